// Launchers of the RoiAlign and MaxUnpool CUDA kernels (det_impl.cu). Plain C++ and
// the CUDA runtime API only: included by .cu and .cc files alike. Every launcher queues
// its work on `stream` and returns the launch error (cudaErrorInvalidValue for
// arguments it does not accept). NonMaxSuppression runs on the host (det.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/image/det_ops.h"

namespace remex::kernels::cuda {

// RoiAlign (ONNX RoiAlign-10/16): x float32 [batch, C, H, W], rois float32
// [num_rois, 4], batch_indices int64 [num_rois] -> y float32 [num_rois, C, pooled_h,
// pooled_w], every element from det::RoiAlignValue, as on the CPU. A roi whose batch
// index is outside [0, batch) or whose sampling grid is out of range (the CPU's errors;
// the indices are not read back to the host) gives zeros. num_rois * C * pooled_h *
// pooled_w > 0, H and W > 0.
cudaError_t LaunchRoiAlign(const det::RoiAlignGeometry& g, const float* x, int64_t batch, const float* rois,
                           const int64_t* batch_indices, int64_t num_rois, float* y, cudaStream_t stream);

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
