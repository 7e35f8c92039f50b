// Launchers of the nn family's normalisation CUDA kernels (norm_impl.cu): ONNX
// BatchNormalization-15 (inference and training mode), InstanceNormalization-6,
// LayerNormalization-17, LpNormalization-1, LRN-1/13 and MeanVarianceNormalization-9/13.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. Each launcher is a template on the element type T (kernels/cuda/dtype.h),
// instantiated in norm_impl.cu for float and Half (float32, float16) unless its comment
// names other types. float16 data is loaded as float, computed and accumulated in float
// and stored rounded to nearest even, unless the comment says otherwise. The host side
// (norm.cc, lrn.cc, mvn.cc) has validated shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/nn/mvn_ops.h"

namespace remex::kernels::cuda {

// y = x * m + a, m = scale / sqrt(var + eps), a = B - mean * m per channel; x is
// [n, c, inner]; scale, bias, mean and var are [c], all of element type T.
template <typename T>
cudaError_t LaunchBatchNorm(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                            int64_t n, int64_t c, int64_t inner, float epsilon, cudaStream_t stream);

// BatchNormalization in training mode over x [n, c, inner]: one block per channel
// computes the batch mean and biased variance over its n * inner values (two passes, in
// float for every dtype, as InstanceNormalization), normalises y with them, and writes running_mean /
// running_var (null: not wanted) = mean / var inputs * momentum + batch statistic *
// (1 - momentum).
template <typename T>
cudaError_t LaunchBatchNormTraining(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                                    T* y, T* running_mean, T* running_var, int64_t n, int64_t c,
                                    int64_t inner, float epsilon, float momentum, cudaStream_t stream);

// Per (n, c) plane of `inner` elements: y = scale * (x - mean) / sqrt(var + eps) + B.
template <typename T>
cudaError_t LaunchInstanceNorm(const T* x, const T* scale, const T* bias, T* y, int64_t n, int64_t c,
                               int64_t inner, float epsilon, cudaStream_t stream);

inline constexpr int kMaxLayerNormRank = 8;

// Offsets of a parameter broadcast to X: X's dims and the parameter's strides (0 where
// it broadcasts).
struct ParamBroadcast {
  int rank = 0;
  int64_t dims[kMaxLayerNormRank] = {};
  int64_t scale_strides[kMaxLayerNormRank] = {};
  int64_t bias_strides[kMaxLayerNormRank] = {};
  // The parameter holds exactly one row of `inner` values, the same for every row:
  // element i of a row reads parameter element i.
  bool scale_is_row = false;
  bool bias_is_row = false;
};

// Per row of `inner` elements (X as [outer, inner]): Y = (X - mean) * inv * Scale + B,
// inv = 1 / sqrt(var + eps). `bias`, `mean_out`, `inv_out` (float32 [outer]) may be null.
template <typename T>
cudaError_t LaunchLayerNorm(const T* x, const T* scale, const T* bias, T* y, float* mean_out, float* inv_out,
                            int64_t outer, int64_t inner, const ParamBroadcast& params, float epsilon,
                            cudaStream_t stream);

// LpNormalization-1 of x seen as [outer, n, inner]: each of the outer x inner vectors of
// n elements (stride inner) divided by its Lp norm, one thread per vector, summed in
// order as kernels/ops/nn/norm.cc does (kernels/ops/nn/lp_ops.h).
template <typename T>
cudaError_t LaunchLpNormalization(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int p_order,
                                  cudaStream_t stream);

// LRN over x [batch, channels, inner] (float32, float16 or float64; batch * channels *
// inner > 0): y = x / (bias + alpha_over_size * sum(x[c']^2))^beta over c' in
// [c - lo, c + hi] inside [0, channels), summed in channel order in float (double for
// float64) with no fused multiply-add.
struct LrnArgs {
  int64_t batch = 0, channels = 0, inner = 0;
  int64_t lo = 0, hi = 0;
  double alpha_over_size = 0, bias = 0, beta = 0;  // Rounded to float for float32 / float16.
};
// T: float, Half or double.
template <typename T>
cudaError_t LaunchLrn(const T* x, T* y, const LrnArgs& args, cudaStream_t stream);

// MeanVarianceNormalization of x into y by `plan` (groups * group_size > 0): one thread
// per group, summing in double in the CPU kernel's order. T: float, Half or double.
template <typename T>
cudaError_t LaunchMvn(const seqnorm::MvnPlan& plan, const T* x, T* y, cudaStream_t stream);

}  // namespace remex::kernels::cuda
