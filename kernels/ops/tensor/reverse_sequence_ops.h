// Index plan of ReverseSequence (ONNX ReverseSequence-10), written once for the CPU
// kernel (kernels/ops/tensor/reverse_sequence.cc) and the CUDA kernel
// (kernels/ops/tensor/cuda/reverse_sequence.cc). A plain struct, computed on the host and
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
