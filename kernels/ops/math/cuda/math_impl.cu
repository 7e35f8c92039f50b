// Device code of the math family's CUDA kernels in math_impl.h: Det and Einsum.
// Includes only CUDA and plain headers. Compiled with -fmad=false: each product and sum
// rounds as on the CPU.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

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

#define REMEX_MATH_INSTANTIATE_FLOAT(T) \
  template cudaError_t LaunchDet<T>(const T*, T*, int64_t, int64_t, double*, cudaStream_t);
#define REMEX_MATH_INSTANTIATE_EINSUM(T) \
  template cudaError_t LaunchEinsum<T>(const einsum::EinsumPlan&, const EinsumInputs&, T*, cudaStream_t);
REMEX_MATH_INSTANTIATE_FLOAT(float)
REMEX_MATH_INSTANTIATE_FLOAT(Half)
REMEX_MATH_INSTANTIATE_FLOAT(double)
REMEX_MATH_INSTANTIATE_EINSUM(float)
REMEX_MATH_INSTANTIATE_EINSUM(Half)
REMEX_MATH_INSTANTIATE_EINSUM(double)
REMEX_MATH_INSTANTIATE_EINSUM(int32_t)
REMEX_MATH_INSTANTIATE_EINSUM(int64_t)
#undef REMEX_MATH_INSTANTIATE_FLOAT
#undef REMEX_MATH_INSTANTIATE_EINSUM

}  // namespace remex::kernels::cuda
