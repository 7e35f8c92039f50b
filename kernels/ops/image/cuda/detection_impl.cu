// Device code of the RoiAlign CUDA kernel (detection_impl.h). Includes only CUDA and
// plain headers. Compiled with -fmad=false: RoiAlign's sums and products round as on the
// CPU (kernels/ops/image/det_ops.h's functions, called per output element).

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/ops/image/cuda/detection_impl.h"
#include "kernels/ops/image/det_ops.h"

namespace remex::kernels::cuda {
namespace {

// One thread per output element y[r, c, ph, pw].
__global__ void RoiAlignKernel(det::RoiAlignGeometry g, const float* x, int64_t batch, const float* rois,
                               const int64_t* batch_indices, float* y, int64_t total) {
  const int64_t bins = g.pooled_h * g.pooled_w;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t pw = i % g.pooled_w;
    const int64_t ph = (i / g.pooled_w) % g.pooled_h;
    const int64_t c = (i / bins) % g.channels;
    const int64_t r = i / (bins * g.channels);
    const int64_t n = batch_indices[r];
    const det::RoiBins b = det::RoiBinsOf(rois + r * 4, g);
    if (n < 0 || n >= batch || !b.valid) {
      y[i] = 0.0f;
      continue;
    }
    y[i] = det::RoiAlignValue(x + (n * g.channels + c) * g.height * g.width, b, g, ph, pw);
  }
}

}  // namespace

cudaError_t LaunchRoiAlign(const det::RoiAlignGeometry& g, const float* x, int64_t batch, const float* rois,
                           const int64_t* batch_indices, int64_t num_rois, float* y, cudaStream_t stream) {
  const int64_t total = num_rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0 || g.height <= 0 || g.width <= 0) return cudaErrorInvalidValue;
  LaunchKernel<RoiAlignKernel>(Blocks(total), kThreads, 0, stream, g, x, batch, rois, batch_indices, y,
                               total);
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
