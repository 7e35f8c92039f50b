// Launcher of the nn family's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// CUDA kernel (loss_impl.cu), ONNX opsets 12-17.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. The
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. float16 data is loaded as float, computed and accumulated in float and
// stored rounded to nearest even. The host side (loss.cc) has validated shapes and
// attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

// NegativeLogLikelihoodLoss (softmax false: x holds log-probabilities) or
// SoftmaxCrossEntropyLoss (softmax true: x holds scores; log_prob, when not null,
// gets their LogSoftmax along C) of x viewed as [n, c, d], as kernels/ops/nn/loss.cc: per
// position loss = -logp[target] * w with w = weight[target] (1 without weight, 0 for
// ignore_index); "none" writes n * d losses, "sum" and "mean" one value. A target
// outside [0, c) counts as ignored (the CPU kernel refuses it; targets are not read
// back). x, weight, loss and log_prob have element type T (float or Half), target I
// (int32_t or int64_t).
using ::remex::kernels::LossReduction;  // kernels/op_enums.h
template <typename T, typename I>
struct LossLaunch {
  const T* x = nullptr;
  const I* target = nullptr;
  const T* weight = nullptr;  // [c] or null
  T* loss = nullptr;
  T* log_prob = nullptr;  // [n, c, d] or null
  int64_t n = 0, c = 0, d = 1;
  LossReduction reduction = LossReduction::kMean;
  bool softmax = false;
  bool has_ignore = false;
  int64_t ignore_index = 0;
};
template <typename T, typename I>
cudaError_t LaunchLoss(const LossLaunch<T, I>& launch, cudaStream_t stream);

}  // namespace remex::kernels::cuda
