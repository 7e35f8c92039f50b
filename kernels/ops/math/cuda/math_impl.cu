// Device code of the extra group's CUDA kernels (extra_impl.h). Includes only CUDA and
// plain headers. Compiled with -fmad=false: each product and sum rounds as on the CPU.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/ops/math/cuda/math_impl.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/ops/math/determinant_ops.h"
#include "kernels/ops/math/einsum_ops.h"
#include "kernels/float_double.h"
#include "kernels/ops/nn/mvn_ops.h"
#include "kernels/ops/tensor/reverse_sequence_ops.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::cuda {
namespace {

// A double as an element of T, as the CPU kernels store it.
template <typename T>
__device__ __forceinline__ T FromDouble(double v) {
  if constexpr (std::is_integral_v<T>) {
    return window::WindowToInt<T>(v);
  } else {
    return FloatFromDouble<T>(v);
  }
}

template <typename T>
__global__ void WindowKernel(window::WindowKind kind, bool periodic, int64_t size, T* y) {
  for (int64_t n = GlobalThread(); n < size; n += GridThreads()) {
    y[n] = FromDouble<T>(window::WindowValue(kind, periodic, size, n));
  }
}

template <typename T>
__global__ void MvnKernel(seqnorm::MvnPlan p, const T* x, T* y) {
  for (int64_t g = GlobalThread(); g < p.groups; g += GridThreads()) {
    double sum = 0, sum_squares = 0;
    for (int64_t k = 0; k < p.group_size; ++k) {
      const double v = ToDouble(x[seqnorm::MvnOffset(p, g, k)]);
      sum += v;
      sum_squares += v * v;
    }
    const seqnorm::MvnMoments m = seqnorm::MvnFinish(sum, sum_squares, p.group_size);
    for (int64_t k = 0; k < p.group_size; ++k) {
      const int64_t at = seqnorm::MvnOffset(p, g, k);
      y[at] = FromDouble<T>((ToDouble(x[at]) - m.mean) / m.denom);
    }
  }
}

template <typename U>
__global__ void ReverseSequenceKernel(seqnorm::ReversePlan p, int64_t total, int64_t time, const U* x,
                                      const int64_t* lens, U* y) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    int64_t len = lens[seqnorm::ReverseBatch(p, i)];
    len = len < 0 ? 0 : (len > time ? time : len);  // The CPU refuses these; clamped here.
    y[i] = x[seqnorm::ReverseSource(p, i, len)];
  }
}

template <typename T>
__global__ void DetKernel(const T* x, T* y, int64_t batch, int64_t m, double* scratch) {
  for (int64_t b = GlobalThread(); b < batch; b += GridThreads()) {
    double* a = scratch + b * m * m;
    for (int64_t i = 0; i < m * m; ++i) a[i] = ToDouble(x[b * m * m + i]);
    y[b] = FromDouble<T>(determinant::LuDeterminant(a, m));
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchWindow(window::WindowKind kind, bool periodic, int64_t size, T* y, cudaStream_t stream) {
  if (size <= 0) return cudaErrorInvalidValue;
  return LaunchKernel<WindowKernel<T>>(Blocks(size), kThreads, 0, stream, kind, periodic, size, y);
}

template <typename T>
cudaError_t LaunchMvn(const seqnorm::MvnPlan& plan, const T* x, T* y, cudaStream_t stream) {
  if (plan.groups <= 0 || plan.group_size <= 0) return cudaErrorInvalidValue;
  return LaunchKernel<MvnKernel<T>>(Blocks(plan.groups, 64), 64, 0, stream, plan, x, y);
}

cudaError_t LaunchReverseSequence(const seqnorm::ReversePlan& plan, int64_t total, int64_t time,
                                  int elem_size, const void* x, const int64_t* lens, void* y,
                                  cudaStream_t stream) {
  if (total <= 0) return cudaErrorInvalidValue;
  auto go = [&](auto tag) {
    using U = decltype(tag);
    return LaunchKernel<ReverseSequenceKernel<U>>(Blocks(total), kThreads, 0, stream, plan, total, time,
                                                  static_cast<const U*>(x), lens, static_cast<U*>(y));
  };
  switch (elem_size) {
    case 1:
      return go(uint8_t{});
    case 2:
      return go(uint16_t{});
    case 4:
      return go(uint32_t{});
    case 8:
      return go(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace remex::kernels::cuda

namespace remex::kernels::cuda {

template <typename T>
cudaError_t LaunchDet(const T* x, T* y, int64_t batch, int64_t m, double* scratch, cudaStream_t stream) {
  if (batch <= 0 || m < 0 || (m > 0 && scratch == nullptr)) return cudaErrorInvalidValue;
  return LaunchKernel<DetKernel<T>>(Blocks(batch, 64), 64, 0, stream, x, y, batch, m, scratch);
}

}  // namespace remex::kernels::cuda

namespace remex::kernels::cuda {
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
      y[o] = FromDouble<T>(sum);
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

#define REMEX_EXTRA_INSTANTIATE_FLOAT(T)                                                  \
  template cudaError_t LaunchMvn<T>(const seqnorm::MvnPlan&, const T*, T*, cudaStream_t); \
  template cudaError_t LaunchDet<T>(const T*, T*, int64_t, int64_t, double*, cudaStream_t);
#define REMEX_EXTRA_INSTANTIATE_EINSUM(T) \
  template cudaError_t LaunchEinsum<T>(const einsum::EinsumPlan&, const EinsumInputs&, T*, cudaStream_t);
#define REMEX_EXTRA_INSTANTIATE_WINDOW(T) \
  template cudaError_t LaunchWindow<T>(window::WindowKind, bool, int64_t, T*, cudaStream_t);
REMEX_EXTRA_INSTANTIATE_FLOAT(float)
REMEX_EXTRA_INSTANTIATE_FLOAT(Half)
REMEX_EXTRA_INSTANTIATE_FLOAT(double)
REMEX_EXTRA_INSTANTIATE_EINSUM(float)
REMEX_EXTRA_INSTANTIATE_EINSUM(Half)
REMEX_EXTRA_INSTANTIATE_EINSUM(double)
REMEX_EXTRA_INSTANTIATE_EINSUM(int32_t)
REMEX_EXTRA_INSTANTIATE_EINSUM(int64_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(float)
REMEX_EXTRA_INSTANTIATE_WINDOW(Half)
REMEX_EXTRA_INSTANTIATE_WINDOW(double)
REMEX_EXTRA_INSTANTIATE_WINDOW(int8_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(int16_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(int32_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(int64_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(uint8_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(uint16_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(uint32_t)
REMEX_EXTRA_INSTANTIATE_WINDOW(uint64_t)
#undef REMEX_EXTRA_INSTANTIATE_FLOAT
#undef REMEX_EXTRA_INSTANTIATE_EINSUM
#undef REMEX_EXTRA_INSTANTIATE_WINDOW

}  // namespace remex::kernels::cuda
