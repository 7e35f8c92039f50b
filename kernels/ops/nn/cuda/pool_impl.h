// Launchers of the nn family's pooling CUDA kernels (pool_impl.cu): ONNX MaxPool-12,
// AveragePool-11/19, LpPool-2/11, GlobalAveragePool-1, GlobalMaxPool-1, GlobalLpPool-2
// and MaxUnpool-9/11.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. Each pooling launcher is a template on the element type T
// (kernels/cuda/dtype.h), instantiated in pool_impl.cu for float and Half (float32,
// float16); MaxUnpool's launcher moves elements of 2, 4 or 8 bytes instead. float16 data is loaded as float,
// computed and accumulated in float and stored rounded to nearest even. The host side
// (pool.cc, unpool.cc) has validated shapes and attributes.
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

// MaxUnpool's output when output_shape pads the unpooled tensor: Y [dims] holds the
// unpooled tensor [unpooled] at its origin (rank <= kMaxUnpoolRank, each unpooled dim
// at most Y's). rank 0: Y is the unpooled tensor itself.
constexpr int kMaxUnpoolRank = 8;
struct UnpoolPadding {
  int rank = 0;
  int64_t dims[kMaxUnpoolRank] = {};
  int64_t unpooled[kMaxUnpoolRank] = {};
};

// MaxUnpool (ONNX MaxUnpool-9/11): the unpooled tensor [unpooled_count] of
// `elem_size`-byte elements (2, 4 or 8) is zero but U[indices[i]] = x[i] for i in
// [0, x_count), the largest i winning where indices repeat (the CPU's last write);
// indices outside [0, unpooled_count) are skipped (the CPU's error; they are not read
// back). y [y_count] is U, placed by `padding`. `winner`: unpooled_count int64 of
// scratch. y_count > 0.
cudaError_t LaunchMaxUnpool(const void* x, const int64_t* indices, int64_t x_count, int64_t unpooled_count,
                            const UnpoolPadding& padding, void* y, int64_t y_count, int elem_size,
                            long long* winner, cudaStream_t stream);

}  // namespace remex::kernels::cuda
