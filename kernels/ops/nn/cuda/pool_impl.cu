// Device code of the nn family's pooling (pool_impl.h): ONNX MaxPool-12,
// AveragePool-11/19, LpPool-2/11, GlobalAveragePool-1, GlobalMaxPool-1, GlobalLpPool-2
// and MaxUnpool-9/11. Includes only CUDA and plain headers.
//
// This file is compiled without contraction into fused multiply-adds (cuda/sources.cmake):
// MaxPool, AveragePool and LpPool then compute what the CPU kernels compute, in the same order
// and rounding, and GlobalMaxPool's maximum is the same in any order; GlobalAveragePool
// and GlobalLpPool accumulate in float in another order and agree to rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/ops/nn/cuda/pool_impl.h"
#include "kernels/ops/nn/lp_ops.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool, GlobalLpPool.

struct OutPos {
  int64_t p, o[3];
};

__device__ __forceinline__ OutPos Decompose(int64_t i, const PoolGeometry& g) {
  OutPos r;
  r.o[2] = i % g.out[2];
  i /= g.out[2];
  r.o[1] = i % g.out[1];
  i /= g.out[1];
  r.o[0] = i % g.out[0];
  r.p = i / g.out[0];
  return r;
}

// Calls f(off, i0, i1, i2) for each window position of output `pos` inside x, in
// row-major order: (i0, i1, i2) its input coordinates, off its offset in the plane.
template <typename F>
__device__ __forceinline__ void ForEachWindowTap(const PoolGeometry& g, const OutPos& pos, F f) {
  for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
    const int64_t i0 = pos.o[0] * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
    if (i0 < 0 || i0 >= g.in[0]) continue;
    for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
      const int64_t i1 = pos.o[1] * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
      if (i1 < 0 || i1 >= g.in[1]) continue;
      const int64_t row = (i0 * g.in[1] + i1) * g.in[2];
      for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
        const int64_t i2 = pos.o[2] * g.stride[2] - g.pad_begin[2] + k2 * g.dilation[2];
        if (i2 < 0 || i2 >= g.in[2]) continue;
        f(row + i2, i0, i1, i2);
      }
    }
  }
}

template <typename T>
__global__ void MaxPoolKernel(const T* x, T* y, int64_t* indices, bool column_major, PoolGeometry g) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const OutPos pos = Decompose(i, g);
    const T* plane = x + pos.p * in_plane;
    float best = -INFINITY;
    int64_t best_off = -1;
    int64_t best_pos[3] = {0, 0, 0};
    ForEachWindowTap(g, pos, [&](int64_t off, int64_t i0, int64_t i1, int64_t i2) {
      const float v = Load(plane[off]);
      if (best_off < 0 || v > best) {  // The first position, then strictly greater.
        best = v;
        best_off = off;
        best_pos[0] = i0;
        best_pos[1] = i1;
        best_pos[2] = i2;
      }
    });
    y[i] = Store<T>(best);
    if (indices) {
      int64_t idx = -1;
      if (best_off >= 0) {
        idx = column_major ? best_pos[0] * g.col_stride[0] + best_pos[1] * g.col_stride[1] +
                                 best_pos[2] * g.col_stride[2]
                           : best_off;
        idx += pos.p * in_plane;
      }
      indices[i] = idx;
    }
  }
}

// Window positions along one dim: inside x (`taps`) and inside x or its pads.
__device__ __forceinline__ void CountWindow(const PoolGeometry& g, int d, int64_t o, int64_t& taps,
                                            int64_t& padded) {
  taps = 0;
  padded = 0;
  for (int64_t k = 0; k < g.kernel[d]; ++k) {
    const int64_t i = o * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
    if (i >= 0 && i < g.in[d]) ++taps;
    if (i >= -g.pad_begin[d] && i < g.in[d] + g.pad_end[d]) ++padded;
  }
}

template <typename T>
__global__ void AveragePoolKernel(const T* x, T* y, bool count_include_pad, PoolGeometry g) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const OutPos pos = Decompose(i, g);
    const T* plane = x + pos.p * in_plane;
    float sum = 0.0f;
    ForEachWindowTap(g, pos, [&](int64_t off, int64_t, int64_t, int64_t) { sum += Load(plane[off]); });
    int64_t count = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t taps, padded;
      CountWindow(g, d, pos.o[d], taps, padded);
      count *= count_include_pad ? padded : taps;
    }
    y[i] = Store<T>(count == 0 ? NAN : __fdiv_rn(sum, static_cast<float>(count)));
  }
}

template <typename T>
__global__ void LpPoolKernel(const T* x, T* y, int p_order, PoolGeometry g) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const OutPos pos = Decompose(i, g);
    const T* plane = x + pos.p * in_plane;
    float sum = 0.0f;
    ForEachWindowTap(g, pos, [&](int64_t off, int64_t, int64_t, int64_t) {
      sum += lp::LpTerm(Load(plane[off]), p_order);
    });
    y[i] = Store<T>(lp::LpRoot(sum, p_order));
  }
}

// The larger of a and b, NaN when either is: order-independent, so the tree reduction
// gives the CPU kernel's result.
__device__ __forceinline__ float MaxOrNan(float a, float b) { return isnan(a) || isnan(b) ? NAN : fmaxf(a, b); }

template <typename T>
__global__ void GlobalMaxPoolKernel(const T* x, T* y, int64_t planes, int64_t size) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) m = MaxOrNan(m, Load(row[j]));
    m = BlockReduce(m, MaxOrNan, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(size == 0 ? NAN : m);
  }
}

template <typename T>
__global__ void GlobalAveragePoolKernel(const T* x, T* y, int64_t planes, int64_t size) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) sum += Load(row[j]);
    sum = BlockReduce(sum, Add, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(size == 0 ? NAN : sum / static_cast<float>(size));
  }
}

template <typename T>
__global__ void GlobalLpPoolKernel(const T* x, T* y, int64_t planes, int64_t size, int p_order) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) sum += lp::LpTerm(Load(row[j]), p_order);
    sum = BlockReduce(sum, Add, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(lp::LpRoot(sum, p_order));
  }
}

// ---------------------------------------------------------------------------
// MaxUnpool.

__global__ void UnpoolWinnerKernel(const int64_t* indices, int64_t x_count, int64_t unpooled_count,
                                   long long* winner) {
  for (int64_t i = GlobalThread(); i < x_count; i += GridThreads()) {
    const int64_t at = indices[i];
    if (at >= 0 && at < unpooled_count) atomicMax(winner + at, static_cast<long long>(i));
  }
}

// y[j] from the winner of its position in the unpooled tensor (none past its dims).
template <typename T>
__global__ void UnpoolWriteKernel(const T* x, const long long* winner, UnpoolPadding padding, T* y,
                                  int64_t y_count) {
  for (int64_t j = GlobalThread(); j < y_count; j += GridThreads()) {
    int64_t k = j;
    if (padding.rank > 0) {
      int64_t rest = j, stride = 1;
      k = 0;
      for (int d = padding.rank - 1; d >= 0 && k >= 0; --d) {
        const int64_t coord = rest % padding.dims[d];
        rest /= padding.dims[d];
        if (coord >= padding.unpooled[d]) {
          k = -1;
        } else {
          k += coord * stride;
          stride *= padding.unpooled[d];
        }
      }
    }
    const long long w = k >= 0 ? winner[k] : -1;
    y[j] = w >= 0 ? x[w] : T(0);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

template <typename T>
cudaError_t LaunchMaxPool(const T* x, T* y, int64_t* indices, bool column_major, const PoolGeometry& g,
                          cudaStream_t stream) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<MaxPoolKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(y),
                                             indices, column_major, g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAveragePool(const T* x, T* y, bool count_include_pad, const PoolGeometry& g,
                              cudaStream_t stream) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<AveragePoolKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(y),
                                                 count_include_pad, g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLpPool(const T* x, T* y, int p_order, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (n <= 0 || p_order < 1) return cudaErrorInvalidValue;
  LaunchKernel<LpPoolKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(y), p_order,
                                            g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalMaxPool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream) {
  if (planes <= 0) return cudaErrorInvalidValue;
  LaunchKernel<GlobalMaxPoolKernel<DeviceType<T>>>(Blocks(planes, 1), RowThreads(size), 0, stream,
                                                   AsDevice(x), AsDevice(y), planes, size);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream) {
  if (planes <= 0) return cudaErrorInvalidValue;
  LaunchKernel<GlobalAveragePoolKernel<DeviceType<T>>>(Blocks(planes, 1), RowThreads(size), 0, stream,
                                                       AsDevice(x), AsDevice(y), planes, size);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalLpPool(const T* x, T* y, int64_t planes, int64_t size, int p_order,
                               cudaStream_t stream) {
  if (planes <= 0 || p_order < 1) return cudaErrorInvalidValue;
  LaunchKernel<GlobalLpPoolKernel<DeviceType<T>>>(Blocks(planes, 1), RowThreads(size), 0, stream, AsDevice(x),
                                                  AsDevice(y), planes, size, p_order);
  return cudaGetLastError();
}

cudaError_t LaunchMaxUnpool(const void* x, const int64_t* indices, int64_t x_count, int64_t unpooled_count,
                            const UnpoolPadding& padding, void* y, int64_t y_count, int elem_size,
                            long long* winner, cudaStream_t stream) {
  if (y_count <= 0 || unpooled_count < 0 || padding.rank < 0 || padding.rank > kMaxUnpoolRank) {
    return cudaErrorInvalidValue;
  }
  if (unpooled_count > 0) {
    cudaError_t error =
        cudaMemsetAsync(winner, 0xFF, static_cast<size_t>(unpooled_count) * sizeof(long long), stream);
    if (error != cudaSuccess) return error;
    if (x_count > 0) {
      LaunchKernel<UnpoolWinnerKernel>(Blocks(x_count), kThreads, 0, stream, indices, x_count, unpooled_count,
                                       winner);
      error = cudaGetLastError();
      if (error != cudaSuccess) return error;
    }
  }
  const unsigned blocks = Blocks(y_count);
  switch (elem_size) {
    case 2:
      LaunchKernel<UnpoolWriteKernel<uint16_t>>(blocks, kThreads, 0, stream, static_cast<const uint16_t*>(x),
                                                winner, padding, static_cast<uint16_t*>(y), y_count);
      break;
    case 4:
      LaunchKernel<UnpoolWriteKernel<uint32_t>>(blocks, kThreads, 0, stream, static_cast<const uint32_t*>(x),
                                                winner, padding, static_cast<uint32_t*>(y), y_count);
      break;
    case 8:
      LaunchKernel<UnpoolWriteKernel<uint64_t>>(blocks, kThreads, 0, stream, static_cast<const uint64_t*>(x),
                                                winner, padding, static_cast<uint64_t*>(y), y_count);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

#define REMEX_POOL_INSTANTIATE(T)                                                                         \
  template cudaError_t LaunchMaxPool<T>(const T*, T*, int64_t*, bool, const PoolGeometry&, cudaStream_t); \
  template cudaError_t LaunchAveragePool<T>(const T*, T*, bool, const PoolGeometry&, cudaStream_t);       \
  template cudaError_t LaunchLpPool<T>(const T*, T*, int, const PoolGeometry&, cudaStream_t);             \
  template cudaError_t LaunchGlobalMaxPool<T>(const T*, T*, int64_t, int64_t, cudaStream_t);              \
  template cudaError_t LaunchGlobalAveragePool<T>(const T*, T*, int64_t, int64_t, cudaStream_t);          \
  template cudaError_t LaunchGlobalLpPool<T>(const T*, T*, int64_t, int64_t, int, cudaStream_t);
REMEX_POOL_INSTANTIATE(float)
REMEX_POOL_INSTANTIATE(Half)
#undef REMEX_POOL_INSTANTIATE

}  // namespace remex::kernels::cuda
