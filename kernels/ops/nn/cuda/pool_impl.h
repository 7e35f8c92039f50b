// Launchers of the nn family's pooling CUDA kernels (pool_impl.cu): ONNX MaxPool-12,
// AveragePool-11/19, GlobalAveragePool-1, GlobalMaxPool-1 and GlobalLpPool-2.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. Each launcher is a template on the element type T (kernels/cuda/dtype.h),
// instantiated in pool_impl.cu for float and Half (float32, float16). float16 data is
// loaded as float, computed and accumulated in float and stored rounded to nearest
// even. The host side (pool.cc) has validated shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace remex::kernels::cuda {

// A 1-D to 3-D window over [planes, in0, in1, in2] (missing leading spatial dims have
// extent 1, kernel 1, stride 1, no pads).
struct PoolGeometry {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad_begin[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};
  // Column-major strides of the real spatial dims (MaxPool storage_order = 1).
  int64_t col_stride[3] = {0, 0, 0};
};

// MaxPool: y = max over the window's positions inside x (first maximum; -inf for a
// window with none). `indices` (may be null): int64 flat index of the maximum in x
// (row-major, or column-major within the plane when storage_order = 1), -1 when none.
template <typename T>
cudaError_t LaunchMaxPool(const T* x, T* y, int64_t* indices, bool column_major, const PoolGeometry& g,
                          cudaStream_t stream);

// AveragePool: sum over the window's positions inside x divided by their count, or
// with count_include_pad by the count of positions inside x or its pads; NaN for a
// zero count.
template <typename T>
cudaError_t LaunchAveragePool(const T* x, T* y, bool count_include_pad, const PoolGeometry& g,
                              cudaStream_t stream);

// LpPool: (sum over the window's positions inside x of |x|^p)^(1/p), p = `p_order` >= 1
// (kernels/ops/nn/lp_ops.h), accumulated in float in window order as the CPU kernel.
template <typename T>
cudaError_t LaunchLpPool(const T* x, T* y, int p_order, const PoolGeometry& g, cudaStream_t stream);

// GlobalMaxPool: y[p] = the maximum of the `size` elements of plane p; NaN when the
// plane holds a NaN or is empty (as kernels/ops/nn/pool.cc).
template <typename T>
cudaError_t LaunchGlobalMaxPool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream);

// GlobalAveragePool: y[p] = mean of the `size` elements of plane p (NaN when size is 0).
template <typename T>
cudaError_t LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream);

// GlobalLpPool-2: y[p] = the Lp norm of the `size` elements of plane p, order `p_order`
// (kernels/ops/nn/lp_ops.h).
template <typename T>
cudaError_t LaunchGlobalLpPool(const T* x, T* y, int64_t planes, int64_t size, int p_order,
                               cudaStream_t stream);

}  // namespace remex::kernels::cuda
