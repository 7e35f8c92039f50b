// Device code of the nn family's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// (loss_impl.h; ONNX opsets 12-17, as kernels/ops/nn/loss.cc). Includes only CUDA and
// plain headers.
//
// One thread per position (n, d) of the input seen as [N, C, D]: it computes the
// position's log-probabilities along C (SoftmaxCrossEntropyLoss, written to log_prob
// when asked for), its loss and its weight. "none" writes each loss; "sum" and "mean"
// run in one block and reduce the losses and weights in float32, so the sums agree
// with the CPU's to rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/ops/nn/cuda/loss_impl.h"

namespace remex::kernels::cuda {
namespace {

template <typename T, typename I>
__global__ void LossKernel(const T* x, const I* target, const T* weight, T* loss, T* log_prob, int64_t n,
                           int64_t c, int64_t d, LossReduction reduction, bool softmax, bool has_ignore,
                           int64_t ignore_index) {
  __shared__ float scratch[32];
  float loss_sum = 0.0f, weight_sum = 0.0f;
  const int64_t positions = n * d;
  for (int64_t pos = GlobalThread(); pos < positions; pos += GridThreads()) {
    const int64_t base = (pos / d) * c * d + pos % d;
    float mx = 0.0f, log_sum = 0.0f;
    if (softmax) {
      mx = -INFINITY;
      for (int64_t j = 0; j < c; ++j) {
        const float v = Load(x[base + j * d]);
        mx = v > mx ? v : mx;  // NaN is skipped, as on the CPU.
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < c; ++j) sum += expf(Load(x[base + j * d]) - mx);
      log_sum = logf(sum);
      if (log_prob) {
        for (int64_t j = 0; j < c; ++j) log_prob[base + j * d] = Store<T>((Load(x[base + j * d]) - mx) - log_sum);
      }
    }
    const int64_t label = static_cast<int64_t>(target[pos]);
    float l = 0.0f, w = 0.0f;
    // A label outside [0, C) (the CPU kernel's error) counts as ignored.
    if (!(has_ignore && label == ignore_index) && label >= 0 && label < c) {
      w = weight ? Load(weight[label]) : 1.0f;
      const float v = Load(x[base + label * d]);
      l = -(softmax ? (v - mx) - log_sum : v) * w;
    }
    if (reduction == LossReduction::kNone) loss[pos] = Store<T>(l);
    loss_sum += l;
    weight_sum += w;
  }
  if (reduction == LossReduction::kNone) return;
  loss_sum = BlockReduce(loss_sum, Add, scratch);
  weight_sum = BlockReduce(weight_sum, Add, scratch);
  if (threadIdx.x == 0) loss[0] = Store<T>(reduction == LossReduction::kSum ? loss_sum : loss_sum / weight_sum);
}

}  // namespace

template <typename T, typename I>
cudaError_t LaunchLoss(const LossLaunch<T, I>& a, cudaStream_t stream) {
  if (a.n < 0 || a.c < 0 || a.d < 0) return cudaErrorInvalidValue;
  if (a.n * a.d == 0 && a.reduction == LossReduction::kNone) return cudaSuccess;
  const int64_t positions = a.n * a.d;
  // "sum" and "mean" reduce in one block; "none" spreads over the grid.
  const unsigned blocks = a.reduction == LossReduction::kNone ? Blocks(positions) : 1u;
  LaunchKernel<LossKernel<DeviceType<T>, I>>(blocks, kThreads, 0, stream, AsDevice(a.x), a.target,
                                             AsDevice(a.weight), AsDevice(a.loss), AsDevice(a.log_prob), a.n,
                                             a.c, a.d, a.reduction, a.softmax, a.has_ignore, a.ignore_index);
  return cudaGetLastError();
}

template cudaError_t LaunchLoss<float, int32_t>(const LossLaunch<float, int32_t>&, cudaStream_t);
template cudaError_t LaunchLoss<float, int64_t>(const LossLaunch<float, int64_t>&, cudaStream_t);
template cudaError_t LaunchLoss<Half, int32_t>(const LossLaunch<Half, int32_t>&, cudaStream_t);
template cudaError_t LaunchLoss<Half, int64_t>(const LossLaunch<Half, int64_t>&, cudaStream_t);

}  // namespace remex::kernels::cuda
