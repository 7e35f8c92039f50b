// Index plan and formulas of MeanVarianceNormalization (ONNX
// MeanVarianceNormalization-9/13), written once for the CPU kernel (kernels/ops/nn/mvn.cc)
// and the CUDA kernel (kernels/ops/nn/cuda/mvn.cc). Plain structs, computed on the host and
// passed to the CUDA kernel by value. A plain header: no CUDA, no Remex headers.
#pragma once

#include <cmath>
#include <cstdint>

#ifndef REMEX_SEQNORM_FN
#if defined(__CUDACC__)
#define REMEX_SEQNORM_FN __host__ __device__ __forceinline__
#else
#define REMEX_SEQNORM_FN inline
#endif
#endif

namespace remex::kernels::seqnorm {

constexpr int kMaxRank = 8;

// MeanVarianceNormalization's input as `groups` sets of `group_size` elements: a group
// is one index of the kept (not normalised) dimensions, its elements the indices of the
// normalised ones. Dims and row-major element strides of the input, kept ones first,
// each list in the input's order.
struct MvnPlan {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int64_t reduced_dims[kMaxRank] = {}, reduced_strides[kMaxRank] = {};
  int64_t groups = 1, group_size = 1;
};

// The input offset of element k (0 <= k < group_size, in row-major order of the
// normalised dims) of group g.
REMEX_SEQNORM_FN int64_t MvnOffset(const MvnPlan& p, int64_t g, int64_t k) {
  int64_t at = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    at += (g % p.kept_dims[d]) * p.kept_strides[d];
    g /= p.kept_dims[d];
  }
  for (int d = p.reduced_rank - 1; d >= 0; --d) {
    at += (k % p.reduced_dims[d]) * p.reduced_strides[d];
    k /= p.reduced_dims[d];
  }
  return at;
}

// ONNX's function body: y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + epsilon), epsilon
// the float32 1e-9. The means are sums in double over the group in row-major order
// divided by its size; the variance is clamped at 0 (a rounding below zero would make
// NaN of a constant group, which gives 0 instead).
constexpr double kMvnEpsilon = static_cast<double>(1e-9f);
struct MvnMoments {
  double mean, denom;  // y = (x - mean) / denom.
};
REMEX_SEQNORM_FN MvnMoments MvnFinish(double sum, double sum_squares, int64_t n) {
  const double mean = sum / static_cast<double>(n);
  double var = sum_squares / static_cast<double>(n) - mean * mean;
  if (!(var > 0)) var = var == var ? 0.0 : var;
  return {mean, sqrt(var) + kMvnEpsilon};
}

}  // namespace remex::kernels::seqnorm
