// Device code of the reduction family's kernels (reduce_impl.h): Reduce* (ONNX opsets
// 1-18), ArgMax/ArgMin (opsets 1-13), TopK (opsets 1-11). Includes only CUDA and plain
// headers.
//
// Every reduction accumulates in float32 (float16 data included). The order of the
// accumulation differs from the CPU kernels' (a tree over threads), so results agree
// to rounding, not bit for bit; ArgMax/ArgMin and TopK are exact (they only compare).
// This file is compiled with nvcc's default contraction into fused multiply-adds, which
// TopK's comparisons do not meet.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/ops/reduction/cuda/reduce_impl.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// Reduce*.

__device__ __forceinline__ float NanMax(float a, float b) { return isnan(b) ? b : (b > a ? b : a); }
__device__ __forceinline__ float NanMin(float a, float b) { return isnan(b) ? b : (b < a ? b : a); }

template <ReduceKind kKind>
struct Reducer {
  __device__ static float Identity() {
    if constexpr (kKind == ReduceKind::kProd) return 1.0f;
    if constexpr (kKind == ReduceKind::kMax) return -INFINITY;
    if constexpr (kKind == ReduceKind::kMin) return INFINITY;
    return 0.0f;
  }
  // The value element x contributes; `shift` is LogSumExp's maximum.
  __device__ static float Map(float x, float shift) {
    if constexpr (kKind == ReduceKind::kL1) return fabsf(x);
    if constexpr (kKind == ReduceKind::kL2 || kKind == ReduceKind::kSumSquare) return x * x;
    if constexpr (kKind == ReduceKind::kLogSumExp) return expf(x - shift);
    return x;
  }
  __device__ static float Combine(float a, float b) {
    if constexpr (kKind == ReduceKind::kProd) return a * b;
    if constexpr (kKind == ReduceKind::kMax) return NanMax(a, b);
    if constexpr (kKind == ReduceKind::kMin) return NanMin(a, b);
    return a + b;
  }
  __device__ static float Final(float acc, int64_t count, float shift) {
    if constexpr (kKind == ReduceKind::kMean) return acc / static_cast<float>(count);  // 0 / 0: NaN.
    if constexpr (kKind == ReduceKind::kL2) return sqrtf(acc);
    if constexpr (kKind == ReduceKind::kLogSum) return logf(acc);
    if constexpr (kKind == ReduceKind::kLogSumExp) return isfinite(shift) ? shift + logf(acc) : shift;
    return acc;
  }
};

using MaxReducer = Reducer<ReduceKind::kMax>;

__device__ __forceinline__ int64_t GroupOffset(int64_t i, int n, const int64_t* dims,
                                               const int64_t* strides) {
  if (n == 1) return i * strides[0];
  int64_t off = 0;
  for (int g = n - 1; g >= 0; --g) {
    const int64_t c = i % dims[g];
    i /= dims[g];
    off += c * strides[g];
  }
  return off;
}

__device__ __forceinline__ int64_t KeptOffset(const ReducePlan& p, int64_t o) {
  return p.num_kept == 0 ? 0 : GroupOffset(o, p.num_kept, p.kept_dims, p.kept_strides);
}
__device__ __forceinline__ int64_t RedOffset(const ReducePlan& p, int64_t r) {
  return p.num_red == 0 ? 0 : GroupOffset(r, p.num_red, p.red_dims, p.red_strides);
}

constexpr int64_t kShortRow = 64;

// Innermost group reduced, rows of at least kShortRow: one block per output element.
template <typename T, ReduceKind kKind>
__global__ void ReduceRowsKernel(const T* x, T* y, ReducePlan plan) {
  using R = Reducer<kKind>;
  __shared__ float scratch[32];
  for (int64_t o = blockIdx.x; o < plan.out_count; o += gridDim.x) {
    // An offset, not a pointer: x is null when the input is empty (no element read).
    const int64_t base = KeptOffset(plan, o);
    float shift = 0.0f;
    if constexpr (kKind == ReduceKind::kLogSumExp) {
      float m = MaxReducer::Identity();
      for (int64_t r = threadIdx.x; r < plan.red_count; r += blockDim.x) {
        m = MaxReducer::Combine(m, Load(x[base + RedOffset(plan, r)]));
      }
      shift = BlockReduce(m, MaxReducer::Combine, scratch);
    }
    float acc = R::Identity();
    for (int64_t r = threadIdx.x; r < plan.red_count; r += blockDim.x) {
      acc = R::Combine(acc, R::Map(Load(x[base + RedOffset(plan, r)]), shift));
    }
    acc = BlockReduce(acc, R::Combine, scratch);
    if (threadIdx.x == 0) y[o] = Store<T>(R::Final(acc, plan.red_count, shift));
  }
}

// Innermost group kept (or short rows): 32 consecutive outputs per block (coalesced
// reads when the innermost group is kept), each reduced by 8 lanes over interleaved
// reduction indices, the lanes combined in shared memory.
constexpr int kColumns = 32;
constexpr int kLanes = kThreads / kColumns;

template <typename T, ReduceKind kKind>
__global__ void ReduceColumnsKernel(const T* x, T* y, ReducePlan plan) {
  using R = Reducer<kKind>;
  __shared__ float part[kLanes][kColumns + 1];
  __shared__ float shifts[kColumns];
  const int tx = threadIdx.x % kColumns;
  const int ty = threadIdx.x / kColumns;
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * kColumns; o0 < plan.out_count;
       o0 += static_cast<int64_t>(gridDim.x) * kColumns) {
    const int64_t o = o0 + tx;
    const bool valid = o < plan.out_count;
    const int64_t base = valid ? KeptOffset(plan, o) : 0;
    float shift = 0.0f;
    if constexpr (kKind == ReduceKind::kLogSumExp) {
      float m = MaxReducer::Identity();
      if (valid) {
        for (int64_t r = ty; r < plan.red_count; r += kLanes) {
          m = MaxReducer::Combine(m, Load(x[base + RedOffset(plan, r)]));
        }
      }
      part[ty][tx] = m;
      __syncthreads();
      if (ty == 0) {
        for (int l = 1; l < kLanes; ++l) m = MaxReducer::Combine(m, part[l][tx]);
        shifts[tx] = m;
      }
      __syncthreads();
      shift = shifts[tx];
    }
    float acc = R::Identity();
    if (valid) {
      for (int64_t r = ty; r < plan.red_count; r += kLanes) {
        acc = R::Combine(acc, R::Map(Load(x[base + RedOffset(plan, r)]), shift));
      }
    }
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && valid) {
      for (int l = 1; l < kLanes; ++l) acc = R::Combine(acc, part[l][tx]);
      y[o] = Store<T>(R::Final(acc, plan.red_count, shift));
    }
    __syncthreads();
  }
}

template <typename T, ReduceKind kKind>
cudaError_t LaunchReduceTyped(const void* x, void* y, const ReducePlan& plan, cudaStream_t stream) {
  const T* tx = static_cast<const T*>(x);
  T* ty = static_cast<T*>(y);
  // Short rows would leave most of a block idle: the column kernel (any layout) then
  // gives each thread its own output.
  if (plan.inner_reduced && plan.red_count >= kShortRow) {
    LaunchKernel<ReduceRowsKernel<T, kKind>>(Blocks(plan.out_count, 1), kThreads, 0, stream, tx, ty, plan);
  } else {
    LaunchKernel<ReduceColumnsKernel<T, kKind>>(Blocks(plan.out_count, kColumns), kThreads, 0, stream, tx, ty,
                                                plan);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchReduceKind(ReduceKind kind, const void* x, void* y, const ReducePlan& plan,
                             cudaStream_t stream) {
  switch (kind) {
    case ReduceKind::kSum:
      return LaunchReduceTyped<T, ReduceKind::kSum>(x, y, plan, stream);
    case ReduceKind::kMean:
      return LaunchReduceTyped<T, ReduceKind::kMean>(x, y, plan, stream);
    case ReduceKind::kProd:
      return LaunchReduceTyped<T, ReduceKind::kProd>(x, y, plan, stream);
    case ReduceKind::kMax:
      return LaunchReduceTyped<T, ReduceKind::kMax>(x, y, plan, stream);
    case ReduceKind::kMin:
      return LaunchReduceTyped<T, ReduceKind::kMin>(x, y, plan, stream);
    case ReduceKind::kL1:
      return LaunchReduceTyped<T, ReduceKind::kL1>(x, y, plan, stream);
    case ReduceKind::kL2:
      return LaunchReduceTyped<T, ReduceKind::kL2>(x, y, plan, stream);
    case ReduceKind::kSumSquare:
      return LaunchReduceTyped<T, ReduceKind::kSumSquare>(x, y, plan, stream);
    case ReduceKind::kLogSum:
      return LaunchReduceTyped<T, ReduceKind::kLogSum>(x, y, plan, stream);
    case ReduceKind::kLogSumExp:
      return LaunchReduceTyped<T, ReduceKind::kLogSumExp>(x, y, plan, stream);
  }
  return cudaErrorInvalidValue;
}

// ---------------------------------------------------------------------------
// ArgMax, ArgMin.

// Candidate (v, i) beats (w, j): a strictly better value (NaN is the extremum of
// either direction), or an equal one (NaNs equal each other) at the preferred index.
// A total order, so any reduction tree gives the sequential scan's answer.
template <bool kMax>
__device__ __forceinline__ bool Beats(float v, int64_t i, float w, int64_t j, bool select_last) {
  const bool vn = isnan(v);
  const bool wn = isnan(w);
  if (vn != wn) return vn;
  if (!vn && v != w) return kMax ? v > w : v < w;
  return select_last ? i > j : i < j;
}

// One warp per output element.
template <typename T, bool kMax>
__global__ void ArgKernel(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool select_last) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = GridThreads() / 32;
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < outer * inner;
       w += warps) {
    const int64_t o = w / inner;
    const int64_t i = w % inner;
    const T* col = x + o * n * inner + i;
    float best = 0.0f;
    int64_t at = -1;
    for (int64_t j = lane; j < n; j += 32) {
      const float v = Load(col[j * inner]);
      if (at < 0 || Beats<kMax>(v, j, best, at, select_last)) {
        best = v;
        at = j;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, offset);
      const int64_t oat = __shfl_xor_sync(0xffffffffu, at, offset);
      if (oat >= 0 && (at < 0 || Beats<kMax>(ov, oat, best, at, select_last))) {
        best = ov;
        at = oat;
      }
    }
    if (lane == 0) y[w] = at;
  }
}

template <typename T>
cudaError_t LaunchArgTyped(bool is_max, bool select_last, const void* x, int64_t* y, int64_t outer, int64_t n,
                           int64_t inner, cudaStream_t stream) {
  const T* tx = static_cast<const T*>(x);
  const unsigned blocks = Blocks(outer * inner, kThreads / 32);
  if (is_max) {
    LaunchKernel<ArgKernel<T, true>>(blocks, kThreads, 0, stream, tx, y, outer, n, inner, select_last);
  } else {
    LaunchKernel<ArgKernel<T, false>>(blocks, kThreads, 0, stream, tx, y, outer, n, inner, select_last);
  }
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// TopK: each element's rank in the row's total order (the number of elements before
// it), counted against the row in shared-memory tiles; ranks below k are written.

// a > b with NaN above every number (kernels/ops/reduction/arg_topk.cc's Above).
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
  using C = ComputeType<T>;
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

}  // namespace

template <typename T>
cudaError_t LaunchReduce(ReduceKind kind, const T* x, T* y, const ReducePlan& plan, cudaStream_t stream) {
  if (plan.out_count <= 0 || plan.num_kept > kMaxReduceGroups || plan.num_red > kMaxReduceGroups) {
    return cudaErrorInvalidValue;
  }
  return LaunchReduceKind<DeviceType<T>>(kind, x, y, plan, stream);
}

template <typename T>
cudaError_t LaunchArgExtremum(bool is_max, bool select_last, const T* x, int64_t* y, int64_t outer, int64_t n,
                              int64_t inner, cudaStream_t stream) {
  if (outer * inner <= 0 || n <= 0) return cudaErrorInvalidValue;
  return LaunchArgTyped<DeviceType<T>>(is_max, select_last, x, y, outer, n, inner, stream);
}

#define REMEX_REDUCE_INSTANTIATE(T)                                                                    \
  template cudaError_t LaunchReduce<T>(ReduceKind, const T*, T*, const ReducePlan&, cudaStream_t);     \
  template cudaError_t LaunchArgExtremum<T>(bool, bool, const T*, int64_t*, int64_t, int64_t, int64_t, \
                                            cudaStream_t);
REMEX_REDUCE_INSTANTIATE(float)
REMEX_REDUCE_INSTANTIATE(Half)
#undef REMEX_REDUCE_INSTANTIATE

template <typename T>
cudaError_t LaunchTopK(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                       int64_t k, bool largest, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || k <= 0 || k > n) return cudaErrorInvalidValue;
  return LaunchTopKTyped<DeviceType<T>>(x, values, indices, outer, n, inner, k, largest, stream);
}

#define REMEX_TOPK_INSTANTIATE(T)                                                                      \
  template cudaError_t LaunchTopK<T>(const T*, T*, int64_t*, int64_t, int64_t, int64_t, int64_t, bool, \
                                     cudaStream_t);
REMEX_TOPK_INSTANTIATE(float)
REMEX_TOPK_INSTANTIATE(Half)
REMEX_TOPK_INSTANTIATE(double)
REMEX_TOPK_INSTANTIATE(int32_t)
REMEX_TOPK_INSTANTIATE(int64_t)
#undef REMEX_TOPK_INSTANTIATE

}  // namespace remex::kernels::cuda
