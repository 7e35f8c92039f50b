// The element rules of Trilu and EyeLike (ONNX Trilu-14, EyeLike-9), written once for
// the CPU kernels (kernels/ops/tensor/diagonal.cc) and the CUDA kernels (kernels/cuda/
// transform_impl.cu). A plain header: no CUDA, no Remex headers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_DIAGONAL_FN __host__ __device__ __forceinline__
#else
#define REMEX_DIAGONAL_FN inline
#endif

namespace remex::kernels::diagonal {

// Whether Trilu keeps element (i, j) of a matrix: the upper triangle keeps j - i >= k,
// the lower one j - i <= k; the others become zero.
REMEX_DIAGONAL_FN constexpr bool TriluKeeps(bool upper, int64_t k, int64_t i, int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

// Whether EyeLike's element (i, j) is one: on the k-th diagonal, j - i == k.
REMEX_DIAGONAL_FN constexpr bool EyeLikeOne(int64_t k, int64_t i, int64_t j) { return j - i == k; }

}  // namespace remex::kernels::diagonal

#undef REMEX_DIAGONAL_FN
