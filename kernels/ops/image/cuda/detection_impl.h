// Launcher of the RoiAlign CUDA kernel (detection_impl.cu). Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. It queues its work on `stream`
// and returns the launch error (cudaErrorInvalidValue for arguments it does not accept).
// NonMaxSuppression runs on the host (detection.cc).
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

}  // namespace remex::kernels::cuda
