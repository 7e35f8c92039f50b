// Det's determinant (ONNX Det-11), written once for the CPU kernel
// (kernels/ops/math/determinant.cc) and the CUDA kernel (kernels/ops/math/cuda/math_impl.cu).
// A plain header: no CUDA, no Remex headers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_DETERMINANT_FN __host__ __device__ __forceinline__
#else
#define REMEX_DETERMINANT_FN inline
#endif

namespace remex::kernels::determinant {

// The determinant of the m x m row-major matrix `a` (m >= 0; 1 for m = 0), which it
// overwrites: LU decomposition with partial pivoting (Doolittle, in place). Column k's
// pivot is the first row i >= k of the largest |a[i][k]|; each row swap flips the
// sign; a zero pivot (a singular matrix) gives 0 at once; the determinant is the
// product of the pivots, multiplied as they are found. NaN anywhere in a pivot's
// column leaves the pivot unchosen by comparison and reaches the product.
REMEX_DETERMINANT_FN double LuDeterminant(double* a, int64_t m) {
  double det = 1.0;
  for (int64_t k = 0; k < m; ++k) {
    int64_t p = k;
    double best = a[k * m + k] < 0 ? -a[k * m + k] : a[k * m + k];
    for (int64_t i = k + 1; i < m; ++i) {
      const double v = a[i * m + k] < 0 ? -a[i * m + k] : a[i * m + k];
      if (v > best) {
        best = v;
        p = i;
      }
    }
    if (p != k) {
      for (int64_t j = 0; j < m; ++j) {
        const double t = a[k * m + j];
        a[k * m + j] = a[p * m + j];
        a[p * m + j] = t;
      }
      det = -det;
    }
    const double pivot = a[k * m + k];
    if (pivot == 0) return 0.0;
    det *= pivot;
    for (int64_t i = k + 1; i < m; ++i) {
      const double f = a[i * m + k] / pivot;
      for (int64_t j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

}  // namespace remex::kernels::determinant

#undef REMEX_DETERMINANT_FN
