// BatchNormalization's inference form (ONNX BatchNormalization-15,
// https://onnx.ai/onnx/operators/onnx__BatchNormalization.html) as a per-channel
// affine map, written once for the CPU kernel (kernels/ops/nn/norm.cc), the CUDA kernel
// (kernels/ops/nn/cuda/norm_impl.cu) and the compiler's folding of it into a Conv
// (host_client/compiler/passes/batchnorm_folding.cc):
//   y = scale * (x - mean) / sqrt(var + epsilon) + B = x * mul + add,
//   mul = scale / sqrt(var + epsilon), add = B - mean * mul.
// A plain header: <math.h> only, so that .cu files include it.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define REMEX_BN_FN __host__ __device__ __forceinline__
#else
#define REMEX_BN_FN inline
#endif

namespace remex::kernels::batchnorm {

template <typename C>
struct Affine {
  C mul;
  C add;
};

// One channel's multiplier and offset, in C (float, or double for float64 data).
template <typename C>
REMEX_BN_FN Affine<C> ChannelAffine(C scale, C bias, C mean, C var, C epsilon) {
  const C mul = scale / sqrt(var + epsilon);
  return Affine<C>{mul, bias - mean * mul};
}

}  // namespace remex::kernels::batchnorm
