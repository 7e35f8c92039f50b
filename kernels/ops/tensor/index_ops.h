// The element rules of BitShift (ONNX BitShift-11) and of the index tuples of GatherND
// and ScatterND (ONNX GatherND-11/12/13, ScatterND-11/13/16), written once for the CPU
// kernels (kernels/ops/elementwise/bitshift.cc, kernels/ops/tensor/gather_nd.cc) and the
// CUDA kernels (kernels/ops/elementwise/cuda/elementwise_ops_impl.cu,
// kernels/ops/tensor/cuda/index_impl.cu). A plain header: no CUDA, no Remex headers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_INDEX_FN __host__ __device__ __forceinline__
#else
#define REMEX_INDEX_FN inline
#endif

namespace remex::kernels::index {

// BitShift of unsigned U (uint8, uint16, uint32, uint64): x << y (`left`) or x >> y.
// A shift by U's bit width or more gives 0 in both directions (C++ leaves it undefined
// and ONNX does not say; ONNX Runtime gives 0 too).
template <typename U>
REMEX_INDEX_FN constexpr U BitShift(U x, U y, bool left) {
  if (y >= static_cast<U>(sizeof(U) * 8)) return U(0);
  return left ? static_cast<U>(x << y) : static_cast<U>(x >> y);
}

// The element offset that the index tuple idx[0..k) names in dims of `extents` with
// element `strides`, each index in [-extent, extent) (a negative index counts from the
// end); -1 when an index is out of range.
REMEX_INDEX_FN int64_t NdOffset(const int64_t* idx, int k, const int64_t* extents, const int64_t* strides) {
  int64_t offset = 0;
  for (int t = 0; t < k; ++t) {
    int64_t v = idx[t];
    if (v < -extents[t] || v >= extents[t]) return -1;
    if (v < 0) v += extents[t];
    offset += v * strides[t];
  }
  return offset;
}

}  // namespace remex::kernels::index

#undef REMEX_INDEX_FN
