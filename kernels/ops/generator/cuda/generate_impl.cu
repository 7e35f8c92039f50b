// Device code of the generator family's CUDA kernels (generate_impl.h): Fill,
// WriteInt64s, Range and OneHot. Includes only CUDA and plain headers. Compiled with
// -fmad=false (Range's float product and sum are also written with round-to-nearest
// intrinsics): products and sums round separately, as in the CPU kernels.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/ops/generator/cuda/generate_impl.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// Fill and small writes.

template <typename E>
__global__ void FillKernel(E* out, int64_t n, E value) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = value;
}

template <typename E>
cudaError_t LaunchFillTyped(void* out, int64_t n, uint64_t bits, cudaStream_t stream) {
  E value;
  static_assert(sizeof(E) <= sizeof(bits));
  std::memcpy(&value, &bits, sizeof(E));
  LaunchKernel<FillKernel<E>>(Blocks(n), kThreads, 0, stream, static_cast<E*>(out), n, value);
  return cudaGetLastError();
}

constexpr int kValuesPerLaunch = 32;

struct Int64Chunk {
  int64_t v[kValuesPerLaunch];
};

__global__ void WriteInt64sKernel(int64_t* out, int count, Int64Chunk chunk) {
  if (static_cast<int>(threadIdx.x) < count) out[threadIdx.x] = chunk.v[threadIdx.x];
}

// ---------------------------------------------------------------------------
// Range.

template <typename E>
__global__ void RangeIntKernel(E* out, int64_t n, uint64_t start, uint64_t delta) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = static_cast<E>(start + static_cast<uint64_t>(i) * delta);
  }
}

template <typename T>
__global__ void RangeFloatKernel(T* out, int64_t n, float start, float delta) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = Store<T>(__fadd_rn(start, __fmul_rn(static_cast<float>(i), delta)));
  }
}

__global__ void RangeDoubleKernel(double* out, int64_t n, double start, double delta) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = __dadd_rn(start, __dmul_rn(static_cast<double>(i), delta));
  }
}

}  // namespace

cudaError_t LaunchFill(void* out, int64_t n, int elem_size, uint64_t bits, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  switch (elem_size) {
    case 1:
      return LaunchFillTyped<uint8_t>(out, n, bits, stream);
    case 2:
      return LaunchFillTyped<uint16_t>(out, n, bits, stream);
    case 4:
      return LaunchFillTyped<uint32_t>(out, n, bits, stream);
    case 8:
      return LaunchFillTyped<uint64_t>(out, n, bits, stream);
    default:
      break;
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchWriteInt64s(int64_t* out, const int64_t* values, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaErrorInvalidValue;
  for (int64_t at = 0; at < count; at += kValuesPerLaunch) {
    const int m = static_cast<int>(std::min<int64_t>(kValuesPerLaunch, count - at));
    Int64Chunk chunk{};
    std::copy(values + at, values + at + m, chunk.v);
    LaunchKernel<WriteInt64sKernel>(1, kValuesPerLaunch, 0, stream, out + at, m, chunk);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t LaunchRange(const RangeArgs& a, T* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  const unsigned blocks = Blocks(n);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    LaunchKernel<RangeIntKernel<U>>(blocks, kThreads, 0, stream, reinterpret_cast<U*>(out), n, a.int_start,
                                    a.int_delta);
  } else if constexpr (std::is_same_v<T, double>) {
    LaunchKernel<RangeDoubleKernel>(blocks, kThreads, 0, stream, out, n, a.float_start, a.float_delta);
  } else {
    using D = DeviceType<T>;
    LaunchKernel<RangeFloatKernel<D>>(blocks, kThreads, 0, stream, reinterpret_cast<D*>(out), n,
                                      static_cast<float>(a.float_start), static_cast<float>(a.float_delta));
  }
  return cudaGetLastError();
}

namespace {

template <typename Idx, typename E>
__global__ void OneHotKernel(const Idx* indices, const E* values, E* out, int64_t outer, int64_t depth,
                             int64_t inner) {
  const int64_t n = outer * depth * inner;
  for (int64_t t = GlobalThread(); t < n; t += GridThreads()) {
    const int64_t i = t % inner;
    const int64_t k = (t / inner) % depth;
    const int64_t o = t / (inner * depth);
    double d;
    if constexpr (std::is_same_v<Idx, __half>) {
      d = __half2float(indices[o * inner + i]);
    } else {
      d = static_cast<double>(indices[o * inner + i]);
    }
    int64_t index = -1;
    if (d > -static_cast<double>(depth) - 1 && d < static_cast<double>(depth)) {
      index = static_cast<int64_t>(d);
      if (index < 0) index += depth;
    }
    out[t] = values[index == k ? 1 : 0];
  }
}

}  // namespace

template <typename I>
cudaError_t LaunchOneHot(int elem_size, const I* indices, const void* values, void* out, int64_t outer,
                         int64_t depth, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * depth * inner;
  if (n <= 0) return cudaErrorInvalidValue;
  using Idx = DeviceType<I>;
  auto go = [&](auto e_tag) {
    using E = decltype(e_tag);
    LaunchKernel<OneHotKernel<Idx, E>>(Blocks(n), kThreads, 0, stream, reinterpret_cast<const Idx*>(indices),
                                       static_cast<const E*>(values), static_cast<E*>(out), outer, depth,
                                       inner);
    return cudaGetLastError();
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
    default:
      break;
  }
  return cudaErrorInvalidValue;
}

#define REMEX_GENERATE_INSTANTIATE_ONE_HOT(T)                                                        \
  template cudaError_t LaunchOneHot<T>(int, const T*, const void*, void*, int64_t, int64_t, int64_t, \
                                       cudaStream_t);
#define REMEX_GENERATE_INSTANTIATE_RANGE(T) \
  template cudaError_t LaunchRange<T>(const RangeArgs&, T*, int64_t, cudaStream_t);
REMEX_GENERATE_INSTANTIATE_ONE_HOT(float)
REMEX_GENERATE_INSTANTIATE_ONE_HOT(Half)
REMEX_GENERATE_INSTANTIATE_ONE_HOT(double)
REMEX_GENERATE_INSTANTIATE_ONE_HOT(int32_t)
REMEX_GENERATE_INSTANTIATE_ONE_HOT(int64_t)
REMEX_GENERATE_INSTANTIATE_RANGE(float)
REMEX_GENERATE_INSTANTIATE_RANGE(Half)
REMEX_GENERATE_INSTANTIATE_RANGE(double)
REMEX_GENERATE_INSTANTIATE_RANGE(int8_t)
REMEX_GENERATE_INSTANTIATE_RANGE(int16_t)
REMEX_GENERATE_INSTANTIATE_RANGE(int32_t)
REMEX_GENERATE_INSTANTIATE_RANGE(int64_t)
REMEX_GENERATE_INSTANTIATE_RANGE(uint8_t)
REMEX_GENERATE_INSTANTIATE_RANGE(uint16_t)
REMEX_GENERATE_INSTANTIATE_RANGE(uint32_t)
REMEX_GENERATE_INSTANTIATE_RANGE(uint64_t)
#undef REMEX_GENERATE_INSTANTIATE_ONE_HOT
#undef REMEX_GENERATE_INSTANTIATE_RANGE

}  // namespace remex::kernels::cuda
