// Device code of the misc group's CUDA kernels (misc_impl.h). Includes only CUDA and
// plain headers. Compiled with -fmad=false: products and sums round separately, as in
// the CPU kernels.

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

// Loads and stores in the compute type: float for float16, the type itself otherwise.
using cuda::Load;  // float and float16 (half_io.cuh).
__device__ __forceinline__ double Load(double v) { return v; }
__device__ __forceinline__ int32_t Load(int32_t v) { return v; }
__device__ __forceinline__ int64_t Load(int64_t v) { return v; }

template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = float;
};

template <typename T, typename C>
__device__ __forceinline__ T Store(C v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

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

// ---------------------------------------------------------------------------
// TopK: each element's rank in the row's total order (the number of elements before
// it), counted against the row in shared-memory tiles; ranks below k are written.

// a > b with NaN above every number (kernels/reduce.cc's Above).
template <typename C>
__device__ __forceinline__ bool Above(C a, C b) {
  return a > b || (IsNan(a) && !IsNan(b));
}

// Whether (u at index iu) comes before (v at index iv).
template <typename C>
__device__ __forceinline__ bool Before(C u, int64_t iu, C v, int64_t iv, bool largest) {
  const bool first = largest ? Above(u, v) : Above(v, u);
  const bool second = largest ? Above(v, u) : Above(u, v);
  return first || (!second && iu < iv);
}

template <typename T>
__global__ void TopKKernel(const T* x, T* values, int64_t* indices, int64_t rows, int64_t n, int64_t inner,
                           int64_t k, bool largest, int64_t chunks) {
  using C = typename Compute<T>::type;
  __shared__ C tile[kThreads];
  for (int64_t b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const int64_t row = b / chunks;
    const int64_t o = row / inner;
    const int64_t i = row % inner;
    const T* src = x + o * n * inner + i;
    const int64_t j = (b % chunks) * kThreads + threadIdx.x;
    const bool active = j < n;
    const C v = active ? Load(src[j * inner]) : C(0);
    int64_t rank = 0;
    for (int64_t t0 = 0; t0 < n; t0 += kThreads) {
      __syncthreads();  // The previous tile's readers are done.
      if (t0 + threadIdx.x < n) tile[threadIdx.x] = Load(src[(t0 + threadIdx.x) * inner]);
      __syncthreads();
      if (!active || rank >= k) continue;
      const int m = static_cast<int>(min(static_cast<int64_t>(kThreads), n - t0));
      for (int q = 0; q < m; ++q) rank += Before(tile[q], t0 + q, v, j, largest) ? 1 : 0;
    }
    if (active && rank < k) {
      const int64_t dst = o * k * inner + rank * inner + i;
      values[dst] = src[j * inner];
      if (indices) indices[dst] = j;
    }
  }
}

template <typename T>
cudaError_t LaunchTopKTyped(const void* x, void* values, int64_t* indices, int64_t outer, int64_t n,
                            int64_t inner, int64_t k, bool largest, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  const int64_t chunks = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows * chunks, kMaxBlocks));
  LaunchKernel<TopKKernel<T>>(blocks, kThreads, 0, stream, static_cast<const T*>(x), static_cast<T*>(values),
                              indices, rows, n, inner, k, largest, chunks);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// LRN: one thread per output element.

__device__ __forceinline__ float Pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double Pow(double x, double y) { return pow(x, y); }

template <typename T>
__global__ void LrnKernel(const T* x, T* y, LrnArgs a, typename Compute<T>::type alpha_over_size,
                          typename Compute<T>::type bias, typename Compute<T>::type beta) {
  using C = typename Compute<T>::type;
  const int64_t total = a.batch * a.channels * a.inner;
  for (int64_t e = GlobalThread(); e < total; e += GridThreads()) {
    const int64_t i = e % a.inner;
    const int64_t ch = (e / a.inner) % a.channels;
    const int64_t base = e - (ch * a.inner + i);  // Start of the batch item.
    const int64_t first = ch - a.lo < 0 ? 0 : ch - a.lo;
    const int64_t last = ch + a.hi > a.channels - 1 ? a.channels - 1 : ch + a.hi;
    C sq = 0;
    for (int64_t cc = first; cc <= last; ++cc) {
      const C v = Load(x[base + cc * a.inner + i]);
      sq += v * v;
    }
    y[e] = Store<T>(Load(x[e]) / Pow(bias + alpha_over_size * sq, beta));
  }
}

template <typename T>
cudaError_t LaunchLrnTyped(const void* x, void* y, const LrnArgs& a, cudaStream_t stream) {
  using C = typename Compute<T>::type;
  const int64_t total = a.batch * a.channels * a.inner;
  LaunchKernel<LrnKernel<T>>(Blocks(total), kThreads, 0, stream, static_cast<const T*>(x), static_cast<T*>(y),
                             a, static_cast<C>(a.alpha_over_size), static_cast<C>(a.bias),
                             static_cast<C>(a.beta));
  return cudaGetLastError();
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

template <typename T>
cudaError_t LaunchTopK(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                       int64_t k, bool largest, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || k <= 0 || k > n) return cudaErrorInvalidValue;
  return LaunchTopKTyped<DeviceType<T>>(x, values, indices, outer, n, inner, k, largest, stream);
}

template <typename T>
cudaError_t LaunchLrn(const T* x, T* y, const LrnArgs& args, cudaStream_t stream) {
  if (args.batch <= 0 || args.channels <= 0 || args.inner <= 0) return cudaErrorInvalidValue;
  return LaunchLrnTyped<DeviceType<T>>(x, y, args, stream);
}

#define REMEX_MISC_INSTANTIATE_ALL(T)                                                                      \
  template cudaError_t LaunchOneHot<T>(int, const T*, const void*, void*, int64_t, int64_t, int64_t,       \
                                       cudaStream_t);                                                      \
  template cudaError_t LaunchCumSum<T>(const T*, T*, int64_t, int64_t, int64_t, bool, bool, cudaStream_t); \
  template cudaError_t LaunchTopK<T>(const T*, T*, int64_t*, int64_t, int64_t, int64_t, int64_t, bool,     \
                                     cudaStream_t);
#define REMEX_MISC_INSTANTIATE_FLOAT(T) \
  template cudaError_t LaunchLrn<T>(const T*, T*, const LrnArgs&, cudaStream_t);
#define REMEX_MISC_INSTANTIATE_RANGE(T) \
  template cudaError_t LaunchRange<T>(const RangeArgs&, T*, int64_t, cudaStream_t);
REMEX_MISC_INSTANTIATE_ALL(float)
REMEX_MISC_INSTANTIATE_ALL(Half)
REMEX_MISC_INSTANTIATE_ALL(double)
REMEX_MISC_INSTANTIATE_ALL(int32_t)
REMEX_MISC_INSTANTIATE_ALL(int64_t)
REMEX_MISC_INSTANTIATE_FLOAT(float)
REMEX_MISC_INSTANTIATE_FLOAT(Half)
REMEX_MISC_INSTANTIATE_FLOAT(double)
REMEX_MISC_INSTANTIATE_RANGE(float)
REMEX_MISC_INSTANTIATE_RANGE(Half)
REMEX_MISC_INSTANTIATE_RANGE(double)
REMEX_MISC_INSTANTIATE_RANGE(int8_t)
REMEX_MISC_INSTANTIATE_RANGE(int16_t)
REMEX_MISC_INSTANTIATE_RANGE(int32_t)
REMEX_MISC_INSTANTIATE_RANGE(int64_t)
REMEX_MISC_INSTANTIATE_RANGE(uint8_t)
REMEX_MISC_INSTANTIATE_RANGE(uint16_t)
REMEX_MISC_INSTANTIATE_RANGE(uint32_t)
REMEX_MISC_INSTANTIATE_RANGE(uint64_t)
#undef REMEX_MISC_INSTANTIATE_ALL
#undef REMEX_MISC_INSTANTIATE_FLOAT
#undef REMEX_MISC_INSTANTIATE_RANGE

}  // namespace remex::kernels::cuda
