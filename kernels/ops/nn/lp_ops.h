// The Lp norm of GlobalLpPool-2 and LpNormalization-1 (ONNX,
// https://onnx.ai/onnx/operators/onnx__GlobalLpPool.html and
// onnx__LpNormalization.html), written once for the CPU kernels (kernels/ops/nn/pool.cc,
// kernels/ops/nn/norm.cc) and the CUDA kernels (kernels/ops/nn/cuda/pool_impl.cu,
// norm_impl.cu):
//   ||x||_p = (sum_i |x_i|^p)^(1/p)
// LpTerm gives one |x_i|^p, LpRoot the root of the sum (p = 1 and p = 2 exactly,
// without pow). A plain header: <math.h> only, so that .cu files include it.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define REMEX_LP_FN __host__ __device__ __forceinline__
#else
#define REMEX_LP_FN inline
#endif

namespace remex::kernels::lp {

REMEX_LP_FN float LpTerm(float x, int p) {
  const float a = fabsf(x);
  return p == 1 ? a : p == 2 ? a * a : powf(a, static_cast<float>(p));
}

REMEX_LP_FN float LpRoot(float sum, int p) {
  return p == 1 ? sum : p == 2 ? sqrtf(sum) : powf(sum, 1.0f / static_cast<float>(p));
}

// LpNormalization's y_i = x_i / ||x||_p; a zero norm gives 0 (no division by zero).
REMEX_LP_FN float LpNormalize(float x, float norm) { return norm == 0.0f ? 0.0f : x / norm; }

}  // namespace remex::kernels::lp
