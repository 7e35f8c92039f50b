// Index plans and formulas of MeanVarianceNormalization (ONNX
// MeanVarianceNormalization-9/13) and ReverseSequence (ONNX ReverseSequence-10), written
// once for the CPU kernels (kernels/sequence_norm.cc) and the CUDA kernels
// (kernels/cuda/extra_impl.cu). Plain structs, computed on the host and passed to the
// CUDA kernels by value. A plain header: no CUDA, no Remex headers.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_SEQNORM_FN __host__ __device__ __forceinline__
#else
#define REMEX_SEQNORM_FN inline
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

// ReverseSequence's input as [dim0, dim1, inner] (inner: the product of the dims after
// the first two); the batch axis is 0 or 1 and the time axis the other.
struct ReversePlan {
  int64_t dim0 = 0, dim1 = 0, inner = 1;
  int batch_axis = 1;
};

// The batch index of output element i.
REMEX_SEQNORM_FN int64_t ReverseBatch(const ReversePlan& p, int64_t i) {
  const int64_t i1 = (i / p.inner) % p.dim1;
  const int64_t i0 = i / (p.inner * p.dim1);
  return p.batch_axis == 0 ? i0 : i1;
}

// The input element that output element i copies, for its batch's sequence length
// `len` (0 <= len <= the time extent): times t < len are reversed (len - 1 - t), the
// others copied.
REMEX_SEQNORM_FN int64_t ReverseSource(const ReversePlan& p, int64_t i, int64_t len) {
  const int64_t r = i % p.inner;
  int64_t i1 = (i / p.inner) % p.dim1;
  int64_t i0 = i / (p.inner * p.dim1);
  int64_t& t = p.batch_axis == 0 ? i1 : i0;
  if (t < len) t = len - 1 - t;
  return (i0 * p.dim1 + i1) * p.inner + r;
}

}  // namespace remex::kernels::seqnorm

#undef REMEX_SEQNORM_FN
