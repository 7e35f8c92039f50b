// Device code of the math family's CUDA kernels in math_impl.h: Det, Einsum and CumSum.
// Includes only CUDA and plain headers. Compiled with -fmad=false: each product and sum
// rounds as on the CPU.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/float_double.h"
#include "kernels/ops/math/cuda/math_impl.h"
#include "kernels/ops/math/determinant_ops.h"
#include "kernels/ops/math/einsum_ops.h"

namespace remex::kernels::cuda {
namespace {

template <typename T>
__global__ void DetKernel(const T* x, T* y, int64_t batch, int64_t m, double* scratch) {
  for (int64_t b = GlobalThread(); b < batch; b += GridThreads()) {
    double* a = scratch + b * m * m;
    for (int64_t i = 0; i < m * m; ++i) a[i] = ToDouble(x[b * m * m + i]);
    y[b] = FloatFromDouble<T>(determinant::LuDeterminant(a, m));
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchDet(const T* x, T* y, int64_t batch, int64_t m, double* scratch, cudaStream_t stream) {
  if (batch <= 0 || m < 0 || (m > 0 && scratch == nullptr)) return cudaErrorInvalidValue;
  return LaunchKernel<DetKernel<T>>(Blocks(batch, 64), 64, 0, stream, x, y, batch, m, scratch);
}

namespace {

template <typename T, typename A>
__global__ void EinsumKernel(einsum::EinsumPlan p, EinsumInputs inputs, T* y) {
  for (int64_t o = GlobalThread(); o < p.out_total; o += GridThreads()) {
    auto load = [&](int k, int64_t at) -> A {
      const T v = static_cast<const T*>(inputs.data[k])[at];
      if constexpr (std::is_integral_v<T>) {
        return static_cast<A>(v);
      } else {
        return static_cast<A>(ToDouble(v));
      }
    };
    const A sum = einsum::EinsumElement<A>(p, o, load);
    if constexpr (std::is_integral_v<T>) {
      y[o] = static_cast<T>(sum);
    } else {
      y[o] = FloatFromDouble<T>(sum);
    }
  }
}

}  // namespace

// Einsum's accumulator: double for the float types, the unsigned type (wrapping) for
// the integers.
template <typename T, bool = std::is_integral_v<T>>
struct EinsumAccumulator {
  using type = double;
};
template <typename T>
struct EinsumAccumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
cudaError_t LaunchEinsum(const einsum::EinsumPlan& plan, const EinsumInputs& inputs, T* y,
                         cudaStream_t stream) {
  if (plan.out_total <= 0 || plan.num_inputs < 1 || plan.num_inputs > einsum::kMaxInputs)
    return cudaErrorInvalidValue;
  using A = typename EinsumAccumulator<T>::type;
  return LaunchKernel<EinsumKernel<T, A>>(Blocks(plan.out_total), kThreads, 0, stream, plan, inputs, y);
}

namespace {

template <typename T, typename C>
__global__ void CumSumKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                             bool reverse) {
  for (int64_t line = GlobalThread(); line < outer * inner; line += GridThreads()) {
    const int64_t o = line / inner;
    const int64_t i = line % inner;
    C sum = C(0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = (o * n + (reverse ? n - 1 - k : k)) * inner + i;
      C v;
      if constexpr (std::is_same_v<T, __half>) {
        v = __half2float(x[at]);
      } else {
        v = static_cast<C>(x[at]);
      }
      if (!exclusive) sum = static_cast<C>(sum + v);
      if constexpr (std::is_same_v<T, __half>) {
        y[at] = __float2half_rn(sum);
      } else {
        y[at] = static_cast<T>(sum);
      }
      if (exclusive) sum = static_cast<C>(sum + v);
    }
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchCumSum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse, cudaStream_t stream) {
  if (outer * inner <= 0 || n < 0) return cudaErrorInvalidValue;
  using D = DeviceType<T>;
  // The accumulator: float for float16, the type itself for float and double, the
  // unsigned type (wrapping) for integers.
  using C = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                        std::conditional<std::is_same_v<T, Half>, float, T>>::type;
  LaunchKernel<CumSumKernel<D, C>>(Blocks(outer * inner), kThreads, 0, stream, reinterpret_cast<const D*>(x),
                                   reinterpret_cast<D*>(y), outer, n, inner, exclusive, reverse);
  return cudaGetLastError();
}

#define REMEX_MATH_INSTANTIATE_FLOAT(T) \
  template cudaError_t LaunchDet<T>(const T*, T*, int64_t, int64_t, double*, cudaStream_t);
#define REMEX_MATH_INSTANTIATE_ALL(T)                                                                     \
  template cudaError_t LaunchEinsum<T>(const einsum::EinsumPlan&, const EinsumInputs&, T*, cudaStream_t); \
  template cudaError_t LaunchCumSum<T>(const T*, T*, int64_t, int64_t, int64_t, bool, bool, cudaStream_t);
REMEX_MATH_INSTANTIATE_FLOAT(float)
REMEX_MATH_INSTANTIATE_FLOAT(Half)
REMEX_MATH_INSTANTIATE_FLOAT(double)
REMEX_MATH_INSTANTIATE_ALL(float)
REMEX_MATH_INSTANTIATE_ALL(Half)
REMEX_MATH_INSTANTIATE_ALL(double)
REMEX_MATH_INSTANTIATE_ALL(int32_t)
REMEX_MATH_INSTANTIATE_ALL(int64_t)
#undef REMEX_MATH_INSTANTIATE_FLOAT
#undef REMEX_MATH_INSTANTIATE_ALL

}  // namespace remex::kernels::cuda
