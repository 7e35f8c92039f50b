// Device code of the CUDA data-movement kernels. Includes only CUDA and plain headers.
//
// Every kernel is a grid-stride loop over its output. Kernels that only move elements
// are instantiated per element size (1, 2, 4, 8 and, for the strided copy and Gather,
// 16 bytes) and copy raw bits. Index arithmetic runs in 32 bits when every index and
// offset of the launch fits, in 64 bits otherwise (ReverseSequence's always in 64 bits,
// with kernels/ops/tensor/reverse_sequence_ops.h's plan).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/ops/tensor/cuda/transform_impl.h"
#include "kernels/ops/tensor/diagonal_ops.h"
#include "kernels/ops/tensor/reverse_sequence_ops.h"
#include "kernels/float16.h"

namespace remex::kernels::cuda {
namespace {

constexpr int64_t kMax32 = int64_t{1} << 30;  // Headroom below INT32_MAX for sums.

// Calls f(E{}) with the unsigned type of `elem_size` bytes (uint4 for 16 when kAllow16).
template <bool kAllow16, typename F>
cudaError_t DispatchElemSize(int elem_size, F&& f) {
  switch (elem_size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16:
      if constexpr (kAllow16) return f(uint4{});
      break;
    default: break;
  }
  return cudaErrorInvalidValue;
}

// The largest |offset| a walk over `dims` with `strides` from `base` reaches.
int64_t MaxOffset(int rank, const int64_t* dims, const int64_t* strides, int64_t base) {
  int64_t m = base < 0 ? -base : base;
  for (int d = 0; d < rank; ++d) m += (dims[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
  return m;
}

// Calls f(k, c) with each coordinate c of row-major element `i` over the `rank`
// extents `dims`, from the last dim to the first, in index type I.
template <typename I, typename F>
__device__ __forceinline__ void ForEachCoord(int rank, const int64_t (&dims)[kMaxCopyRank], int64_t i, F f) {
  I rest = static_cast<I>(i);
#pragma unroll
  for (int k = kMaxCopyRank - 1; k >= 0; --k) {
    if (k < rank) {
      const I extent = static_cast<I>(dims[k]);
      const I c = rest % extent;
      rest /= extent;
      f(k, c);
    }
  }
}

// ---------------------------------------------------------------------------
// Strided copy.

template <typename E, typename I>
__global__ void StridedCopyKernel(const E* __restrict__ src, E* __restrict__ dst, int64_t n, CopyPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    I s = static_cast<I>(plan.src_base);
    I d = static_cast<I>(plan.dst_base);
    ForEachCoord<I>(plan.rank, plan.dims, i, [&](int k, I c) {
      s += c * static_cast<I>(plan.src_strides[k]);
      d += c * static_cast<I>(plan.dst_strides[k]);
    });
    dst[d] = src[s];
  }
}

// ---------------------------------------------------------------------------
// Gather.

template <typename E, typename Idx, typename I>
__global__ void GatherKernel(const E* __restrict__ data, const Idx* __restrict__ indices, E* __restrict__ out,
                             int64_t n, GatherPlan plan) {
  const I inner = static_cast<I>(plan.inner);
  const I num_indices = static_cast<I>(plan.num_indices);
  const I extent = static_cast<I>(plan.axis_extent);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const I t = static_cast<I>(i);
    const I k = t % inner;
    const I row = t / inner;
    const I j = row % num_indices;
    const I o = row / num_indices;
    int64_t index = static_cast<int64_t>(indices[j]);
    if (index < 0) index += plan.axis_extent;
    if (index >= 0 && index < plan.axis_extent) {
      out[i] = data[(o * extent + static_cast<I>(index)) * inner + k];
    } else {
      out[i] = E{};
    }
  }
}

// The data element GatherElements reads, and ScatterElements writes, for indices
// element i: -1 when its index is out of range.
template <typename Idx>
__device__ __forceinline__ int64_t ElementsTarget(const Idx* indices, int64_t i, const GatherElementsPlan& plan) {
  int64_t rest = i;
  int64_t offset = 0;
  for (int k = plan.rank - 1; k >= 0; --k) {
    const int64_t c = rest % plan.dims[k];
    rest /= plan.dims[k];
    if (k != plan.axis) offset += c * plan.data_strides[k];
  }
  int64_t index = static_cast<int64_t>(indices[i]);
  if (index < 0) index += plan.axis_extent;
  if (index < 0 || index >= plan.axis_extent) return -1;
  return offset + index * plan.data_strides[plan.axis];
}

template <typename E, typename Idx>
__global__ void GatherElementsKernel(const E* __restrict__ data, const Idx* __restrict__ indices, E* __restrict__ out,
                                     int64_t n, GatherElementsPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t t = ElementsTarget(indices, i, plan);
    out[i] = t >= 0 ? data[t] : E{};
  }
}

template <typename E>
__global__ void TriluKernel(const E* __restrict__ x, E* __restrict__ y, int64_t n, int64_t rows, int64_t cols,
                            int64_t k, bool upper) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t col = i % cols;
    const int64_t row = (i / cols) % rows;
    y[i] = diagonal::TriluKeeps(upper, k, row, col) ? x[i] : E{};
  }
}

template <typename E>
__global__ void EyeLikeKernel(E* __restrict__ y, int64_t n, int64_t cols, int64_t k, E one) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = diagonal::EyeLikeOne(k, i / cols, i % cols) ? one : E{};
  }
}

// ---------------------------------------------------------------------------
// Pad.

template <typename E, typename I>
__global__ void PadKernel(const E* __restrict__ src, const E* __restrict__ constant, E* __restrict__ dst, int64_t n,
                          PadPlan plan) {
  const E fill = constant != nullptr ? *constant : static_cast<E>(plan.constant_bits);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    I rest = static_cast<I>(i);
    I offset = 0;
    bool inside = true;
    for (int k = plan.rank - 1; k >= 0; --k) {
      const I out_extent = static_cast<I>(plan.out_dims[k]);
      const I in_extent = static_cast<I>(plan.in_dims[k]);
      I s = rest % out_extent - static_cast<I>(plan.pads_begin[k]);
      rest /= out_extent;
      if (s < 0 || s >= in_extent) {
        if (plan.mode == PadMode::kConstant) {
          inside = false;
          break;
        } else if (plan.mode == PadMode::kEdge) {
          s = s < 0 ? 0 : in_extent - 1;
        } else if (in_extent == 1) {
          s = 0;
        } else {
          const I period = 2 * (in_extent - 1);
          s %= period;
          if (s < 0) s += period;
          if (s >= in_extent) s = period - s;
        }
      }
      offset += s * static_cast<I>(plan.in_strides[k]);
    }
    dst[i] = inside ? src[offset] : fill;
  }
}

// ---------------------------------------------------------------------------
// Where.

template <typename E, typename I>
__global__ void WhereKernel(const uint8_t* __restrict__ cond, const E* __restrict__ x, const E* __restrict__ y,
                            E* __restrict__ out, int64_t n, WherePlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    I ic = 0;
    I ix = 0;
    I iy = 0;
    ForEachCoord<I>(plan.rank, plan.dims, i, [&](int k, I c) {
      ic += c * static_cast<I>(plan.cond_strides[k]);
      ix += c * static_cast<I>(plan.x_strides[k]);
      iy += c * static_cast<I>(plan.y_strides[k]);
    });
    out[i] = cond[ic] != 0 ? x[ix] : y[iy];
  }
}

// ---------------------------------------------------------------------------
// Cast: the conversions of kernels/ops/tensor/tensor.cc (Convert) and, for float16, those of
// kernels/float16.h itself (its conversions are __host__ __device__).

using F16 = Half;
using BF16 = BFloat16;
struct Bool {
  uint8_t byte;
};

template <typename T>
struct IntLimits;
#define REMEX_INT_LIMITS(T, LO, HI_EXCL, MIN, MAX) \
  template <>                                     \
  struct IntLimits<T> {                           \
    static constexpr double kLo = LO;             \
    static constexpr double kHiExcl = HI_EXCL;    \
    static constexpr T kMin = MIN;                \
    static constexpr T kMax = MAX;                \
  };
REMEX_INT_LIMITS(int8_t, -128.0, 128.0, -128, 127)
REMEX_INT_LIMITS(int16_t, -32768.0, 32768.0, -32768, 32767)
REMEX_INT_LIMITS(int32_t, -2147483648.0, 2147483648.0, INT32_MIN, INT32_MAX)
REMEX_INT_LIMITS(int64_t, -9223372036854775808.0, 9223372036854775808.0, INT64_MIN, INT64_MAX)
REMEX_INT_LIMITS(uint8_t, 0.0, 256.0, 0, UINT8_MAX)
REMEX_INT_LIMITS(uint16_t, 0.0, 65536.0, 0, UINT16_MAX)
REMEX_INT_LIMITS(uint32_t, 0.0, 4294967296.0, 0, UINT32_MAX)
REMEX_INT_LIMITS(uint64_t, 0.0, 18446744073709551616.0, 0, UINT64_MAX)
#undef REMEX_INT_LIMITS

template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Float to integer: NaN becomes 0, out-of-range values saturate, in-range values
// truncate toward zero.
template <typename To>
__device__ __forceinline__ To FloatToInt(double d) {
  if (d != d) return To(0);
  if (d <= IntLimits<To>::kLo) return IntLimits<To>::kMin;
  if (d >= IntLimits<To>::kHiExcl) return IntLimits<To>::kMax;
  return static_cast<To>(d);
}

template <typename From, typename To>
__device__ __forceinline__ To Convert(From v) {
  if constexpr (std::is_same_v<From, F16>) {
    return Convert<float, To>(HalfToFloat(v));
  } else if constexpr (std::is_same_v<From, BF16>) {
    return Convert<float, To>(BFloat16ToFloat(v));
  } else if constexpr (std::is_same_v<To, BF16>) {
    return FloatToBFloat16(Convert<From, float>(v));
  } else if constexpr (std::is_same_v<From, Bool>) {
    return Convert<uint8_t, To>(v.byte != 0 ? 1 : 0);
  } else if constexpr (std::is_same_v<To, Bool>) {
    return Bool{static_cast<uint8_t>(v != From(0) ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, F16>) {
    if constexpr (std::is_same_v<From, float>) {
      return FloatToHalf(v);
    } else {
      return DoubleToHalf(static_cast<double>(v));
    }
  } else if constexpr (kIsFloat<From> && !kIsFloat<To>) {
    return FloatToInt<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);  // Integer narrowing wraps (two's complement).
  }
}

template <typename E, typename Idx>
__global__ void ScatterKernel(const Idx* __restrict__ indices, const E* __restrict__ updates, E* __restrict__ out,
                              int64_t n, GatherElementsPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t t = ElementsTarget(indices, i, plan);
    if (t >= 0) out[t] = updates[i];
  }
}

// One thread, every update in order: the CPU kernel's accumulation.
template <typename T, typename Idx>
__global__ void ScatterReduceKernel(const Idx* __restrict__ indices, const T* __restrict__ updates, T* __restrict__ out,
                                    int64_t n, GatherElementsPlan plan, bool add) {
  if (GlobalThread() != 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = ElementsTarget(indices, i, plan);
    if (t < 0) continue;
    if constexpr (std::is_same_v<T, F16>) {
      const float a = HalfToFloat(out[t]), b = HalfToFloat(updates[i]);
      out[t] = FloatToHalf(add ? a + b : a * b);
    } else if constexpr (std::is_integral_v<T>) {
      const uint64_t a = static_cast<uint64_t>(out[t]), b = static_cast<uint64_t>(updates[i]);
      out[t] = static_cast<T>(add ? a + b : a * b);
    } else {
      out[t] = add ? out[t] + updates[i] : out[t] * updates[i];
    }
  }
}

template <typename From, typename To>
__global__ void CastKernel(const From* __restrict__ in, To* __restrict__ out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = Convert<From, To>(in[i]);
}

// The device type of a Cast element type: Bool (its byte) for bool, T otherwise.
template <typename T>
using CastElem = std::conditional_t<std::is_same_v<T, bool>, Bool, T>;
static_assert(sizeof(Bool) == sizeof(bool));

template <typename U>
__global__ void ReverseSequenceKernel(seqnorm::ReversePlan p, int64_t total, int64_t time, const U* x,
                                      const int64_t* lens, U* y) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    int64_t len = lens[seqnorm::ReverseBatch(p, i)];
    len = len < 0 ? 0 : (len > time ? time : len);  // The CPU refuses these; clamped here.
    y[i] = x[seqnorm::ReverseSource(p, i, len)];
  }
}

}  // namespace

cudaError_t LaunchStridedCopy(int elem_size, const void* src, void* dst, int64_t n, const CopyPlan& plan,
                              cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank) return cudaErrorInvalidValue;
  const bool small = n < kMax32 && MaxOffset(plan.rank, plan.dims, plan.src_strides, plan.src_base) < kMax32 &&
                     MaxOffset(plan.rank, plan.dims, plan.dst_strides, plan.dst_base) < kMax32;
  return DispatchElemSize<true>(
      elem_size,
      [&](auto tag) {
        using E = decltype(tag);
        const E* s = static_cast<const E*>(src);
        E* d = static_cast<E*>(dst);
        if (small) {
          LaunchKernel<StridedCopyKernel<E, int32_t>>(Blocks(n), kThreads, 0, stream, s, d, n, plan);
        } else {
          LaunchKernel<StridedCopyKernel<E, int64_t>>(Blocks(n), kThreads, 0, stream, s, d, n, plan);
        }
        return cudaGetLastError();
      });
}

cudaError_t LaunchGather(int elem_size, const void* data, const void* indices, bool indices_int64, void* out,
                         const GatherPlan& plan, cudaStream_t stream) {
  if (plan.outer <= 0 || plan.axis_extent <= 0 || plan.num_indices <= 0 || plan.inner <= 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t n = plan.outer * plan.num_indices * plan.inner;
  const bool small = n < kMax32 && plan.outer * plan.axis_extent * plan.inner < kMax32;
  return DispatchElemSize<true>(
      elem_size,
      [&](auto tag) {
        using E = decltype(tag);
        const E* x = static_cast<const E*>(data);
        E* y = static_cast<E*>(out);
        const unsigned blocks = Blocks(n);
        if (indices_int64) {
          const int64_t* idx = static_cast<const int64_t*>(indices);
          if (small) {
            LaunchKernel<GatherKernel<E, int64_t, int32_t>>(blocks, kThreads, 0, stream, x, idx, y, n, plan);
          } else {
            LaunchKernel<GatherKernel<E, int64_t, int64_t>>(blocks, kThreads, 0, stream, x, idx, y, n, plan);
          }
        } else {
          const int32_t* idx = static_cast<const int32_t*>(indices);
          if (small) {
            LaunchKernel<GatherKernel<E, int32_t, int32_t>>(blocks, kThreads, 0, stream, x, idx, y, n, plan);
          } else {
            LaunchKernel<GatherKernel<E, int32_t, int64_t>>(blocks, kThreads, 0, stream, x, idx, y, n, plan);
          }
        }
        return cudaGetLastError();
      });
}

cudaError_t LaunchGatherElements(int elem_size, const void* data, const void* indices, bool indices_int64,
                                 void* out, int64_t n, const GatherElementsPlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank || plan.axis < 0 || plan.axis >= plan.rank ||
      plan.axis_extent <= 0) {
    return cudaErrorInvalidValue;
  }
  return DispatchElemSize<false>(elem_size, [&](auto tag) {
    using E = decltype(tag);
    const E* x = static_cast<const E*>(data);
    E* y = static_cast<E*>(out);
    if (indices_int64) {
      LaunchKernel<GatherElementsKernel<E, int64_t>>(Blocks(n), kThreads, 0, stream, x,
                                                     static_cast<const int64_t*>(indices), y, n, plan);
    } else {
      LaunchKernel<GatherElementsKernel<E, int32_t>>(Blocks(n), kThreads, 0, stream, x,
                                                     static_cast<const int32_t*>(indices), y, n, plan);
    }
    return cudaGetLastError();
  });
}

cudaError_t LaunchScatterElements(int elem_size, const void* indices, bool indices_int64, const void* updates,
                                  void* out, int64_t n, const GatherElementsPlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank || plan.axis < 0 || plan.axis >= plan.rank ||
      plan.axis_extent <= 0) {
    return cudaErrorInvalidValue;
  }
  return DispatchElemSize<false>(elem_size, [&](auto tag) {
    using E = decltype(tag);
    if (indices_int64) {
      LaunchKernel<ScatterKernel<E, int64_t>>(Blocks(n), kThreads, 0, stream,
                                              static_cast<const int64_t*>(indices),
                                              static_cast<const E*>(updates), static_cast<E*>(out), n, plan);
    } else {
      LaunchKernel<ScatterKernel<E, int32_t>>(Blocks(n), kThreads, 0, stream,
                                              static_cast<const int32_t*>(indices),
                                              static_cast<const E*>(updates), static_cast<E*>(out), n, plan);
    }
    return cudaGetLastError();
  });
}

template <typename T>
cudaError_t LaunchScatterElementsReduce(bool add, const void* indices, bool indices_int64, const T* updates,
                                        T* out, int64_t n, const GatherElementsPlan& plan,
                                        cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank || plan.axis < 0 || plan.axis >= plan.rank ||
      plan.axis_extent <= 0) {
    return cudaErrorInvalidValue;
  }
  if (indices_int64) {
    LaunchKernel<ScatterReduceKernel<T, int64_t>>(1, 32, 0, stream, static_cast<const int64_t*>(indices),
                                                  updates, out, n, plan, add);
  } else {
    LaunchKernel<ScatterReduceKernel<T, int32_t>>(1, 32, 0, stream, static_cast<const int32_t*>(indices),
                                                  updates, out, n, plan, add);
  }
  return cudaGetLastError();
}

#define REMEX_SCATTER_REDUCE_INSTANTIATE(T)                                                           \
  template cudaError_t LaunchScatterElementsReduce<T>(bool, const void*, bool, const T*, T*, int64_t, \
                                                      const GatherElementsPlan&, cudaStream_t);
REMEX_SCATTER_REDUCE_INSTANTIATE(Half)
REMEX_SCATTER_REDUCE_INSTANTIATE(float)
REMEX_SCATTER_REDUCE_INSTANTIATE(double)
REMEX_SCATTER_REDUCE_INSTANTIATE(int32_t)
REMEX_SCATTER_REDUCE_INSTANTIATE(int64_t)
#undef REMEX_SCATTER_REDUCE_INSTANTIATE

cudaError_t LaunchTrilu(int elem_size, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                        bool upper, cudaStream_t stream) {
  const int64_t n = batch * rows * cols;
  if (batch <= 0 || rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  return DispatchElemSize<false>(elem_size, [&](auto tag) {
    using E = decltype(tag);
    LaunchKernel<TriluKernel<E>>(Blocks(n), kThreads, 0, stream, static_cast<const E*>(x), static_cast<E*>(y), n, rows,
                                 cols, k, upper);
    return cudaGetLastError();
  });
}

cudaError_t LaunchEyeLike(int elem_size, void* y, int64_t rows, int64_t cols, int64_t k, uint64_t one_bits,
                          cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  return DispatchElemSize<false>(elem_size, [&](auto tag) {
    using E = decltype(tag);
    LaunchKernel<EyeLikeKernel<E>>(Blocks(n), kThreads, 0, stream, static_cast<E*>(y), n, cols, k,
                                   static_cast<E>(one_bits));
    return cudaGetLastError();
  });
}

cudaError_t LaunchPad(int elem_size, const void* src, const void* constant, void* dst, int64_t n,
                      const PadPlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank) return cudaErrorInvalidValue;
  int64_t in_elems = 1;
  for (int d = 0; d < plan.rank; ++d) in_elems *= std::max<int64_t>(plan.in_dims[d], 1);
  int64_t max_pad = 0;
  for (int d = 0; d < plan.rank; ++d) max_pad = std::max(max_pad, std::abs(plan.pads_begin[d]) + plan.out_dims[d]);
  const bool small = n < kMax32 && in_elems < kMax32 && max_pad < kMax32;
  return DispatchElemSize<false>(
      elem_size,
      [&](auto tag) {
        using E = decltype(tag);
        const E* s = static_cast<const E*>(src);
        const E* c = static_cast<const E*>(constant);
        E* d = static_cast<E*>(dst);
        if (small) {
          LaunchKernel<PadKernel<E, int32_t>>(Blocks(n), kThreads, 0, stream, s, c, d, n, plan);
        } else {
          LaunchKernel<PadKernel<E, int64_t>>(Blocks(n), kThreads, 0, stream, s, c, d, n, plan);
        }
        return cudaGetLastError();
      });
}

cudaError_t LaunchWhere(int elem_size, const void* cond, const void* x, const void* y, void* out, int64_t n,
                        const WherePlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxCopyRank) return cudaErrorInvalidValue;
  const bool small = n < kMax32 && MaxOffset(plan.rank, plan.dims, plan.cond_strides, 0) < kMax32 &&
                     MaxOffset(plan.rank, plan.dims, plan.x_strides, 0) < kMax32 &&
                     MaxOffset(plan.rank, plan.dims, plan.y_strides, 0) < kMax32;
  const uint8_t* c = static_cast<const uint8_t*>(cond);
  return DispatchElemSize<false>(
      elem_size,
      [&](auto tag) {
        using E = decltype(tag);
        const E* a = static_cast<const E*>(x);
        const E* b = static_cast<const E*>(y);
        E* o = static_cast<E*>(out);
        if (small) {
          LaunchKernel<WhereKernel<E, int32_t>>(Blocks(n), kThreads, 0, stream, c, a, b, o, n, plan);
        } else {
          LaunchKernel<WhereKernel<E, int64_t>>(Blocks(n), kThreads, 0, stream, c, a, b, o, n, plan);
        }
        return cudaGetLastError();
      });
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

template <typename From, typename To>
cudaError_t LaunchCast(const From* in, To* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  using F = CastElem<From>;
  using T = CastElem<To>;
  LaunchKernel<CastKernel<F, T>>(Blocks(n), kThreads, 0, stream, reinterpret_cast<const F*>(in),
                                 reinterpret_cast<T*>(out), n);
  return cudaGetLastError();
}

// Every (From, To) pair of the 13 Cast element types.
#define REMEX_CAST_INSTANTIATE(From, To) \
  template cudaError_t LaunchCast<From, To>(const From*, To*, int64_t, cudaStream_t);
#define REMEX_CAST_INSTANTIATE_FROM(From) \
  REMEX_CAST_INSTANTIATE(From, Half)      \
  REMEX_CAST_INSTANTIATE(From, float)     \
  REMEX_CAST_INSTANTIATE(From, double)    \
  REMEX_CAST_INSTANTIATE(From, int8_t)    \
  REMEX_CAST_INSTANTIATE(From, int16_t)   \
  REMEX_CAST_INSTANTIATE(From, int32_t)   \
  REMEX_CAST_INSTANTIATE(From, int64_t)   \
  REMEX_CAST_INSTANTIATE(From, uint8_t)   \
  REMEX_CAST_INSTANTIATE(From, uint16_t)  \
  REMEX_CAST_INSTANTIATE(From, uint32_t)  \
  REMEX_CAST_INSTANTIATE(From, uint64_t)  \
  REMEX_CAST_INSTANTIATE(From, bool)      \
  REMEX_CAST_INSTANTIATE(From, BFloat16)
REMEX_CAST_INSTANTIATE_FROM(Half)
REMEX_CAST_INSTANTIATE_FROM(float)
REMEX_CAST_INSTANTIATE_FROM(double)
REMEX_CAST_INSTANTIATE_FROM(int8_t)
REMEX_CAST_INSTANTIATE_FROM(int16_t)
REMEX_CAST_INSTANTIATE_FROM(int32_t)
REMEX_CAST_INSTANTIATE_FROM(int64_t)
REMEX_CAST_INSTANTIATE_FROM(uint8_t)
REMEX_CAST_INSTANTIATE_FROM(uint16_t)
REMEX_CAST_INSTANTIATE_FROM(uint32_t)
REMEX_CAST_INSTANTIATE_FROM(uint64_t)
REMEX_CAST_INSTANTIATE_FROM(bool)
REMEX_CAST_INSTANTIATE_FROM(BFloat16)
#undef REMEX_CAST_INSTANTIATE_FROM
#undef REMEX_CAST_INSTANTIATE

}  // namespace remex::kernels::cuda
