// Device code of the RoiAlign and MaxUnpool CUDA kernels (det_impl.h). Includes only
// CUDA and plain headers. Compiled with -fmad=false: RoiAlign's sums and products round
// as on the CPU (kernels/det_ops.h's functions, called per output element).

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops/image/cuda/detection_impl.h"
#include "kernels/cuda/launch.cuh"
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

cudaError_t LaunchRoiAlign(const det::RoiAlignGeometry& g, const float* x, int64_t batch, const float* rois,
                           const int64_t* batch_indices, int64_t num_rois, float* y, cudaStream_t stream) {
  const int64_t total = num_rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0 || g.height <= 0 || g.width <= 0) return cudaErrorInvalidValue;
  LaunchKernel<RoiAlignKernel>(Blocks(total), kThreads, 0, stream, g, x, batch, rois, batch_indices, y,
                               total);
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

}  // namespace remex::kernels::cuda
