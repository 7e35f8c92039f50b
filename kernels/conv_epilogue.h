// The epilogue of FusedConv: the activation applied after the convolution, its bias
// and the residual Z (Y = activation(Conv(X, W, B) + Z)), shared by the CPU kernel
// (kernels/ops/nn/conv.cc) and the CUDA kernel (kernels/cuda/). A plain header: no CUDA, and
// of Remex only the plain kernels/scalar_ops.h, so .cu files include it.
//
// Each activation is its ONNX operator's definition (https://onnx.ai/onnx/operators/):
// Relu-14, LeakyRelu-6 (alpha), Clip-13 (min = alpha, max = beta), Sigmoid-13, Tanh-13,
// HardSigmoid-6 (alpha, beta), HardSwish-14, Swish-24 (alpha; SiLU for alpha = 1),
// Gelu-20 (approximate "none").
#pragma once

#include <cstdint>

#include "kernels/scalar_ops.h"

#if defined(__CUDACC__)
#define REMEX_CONV_EPILOGUE_FN __host__ __device__ inline
#else
#define REMEX_CONV_EPILOGUE_FN inline
#endif

namespace remex::kernels {

enum class ConvActivation : uint8_t {
  kNone,         // identity
  kRelu,         // max(0, x)
  kLeakyRelu,    // x >= 0 ? x : alpha * x
  kClip,         // min(max(x, alpha), beta); beta everywhere when alpha > beta
  kSigmoid,      // 1 / (1 + exp(-x))
  kTanh,         // tanh(x)
  kHardSigmoid,  // max(0, min(1, alpha * x + beta))
  kHardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
  kSwish,        // x * sigmoid(alpha * x)
  kGelu,         // x * (1 + erf(x / sqrt(2))) / 2
};

// The activation `kind` of float32 `x`, with the kind's parameters `alpha` and `beta`
// (see ConvActivation; unused ones are ignored): the op's functor of
// kernels/scalar_ops.h, as its own kernel computes it. NaN stays NaN.
REMEX_CONV_EPILOGUE_FN float ApplyConvActivation(ConvActivation kind, float x, float alpha, float beta) {
  switch (kind) {
    case ConvActivation::kNone: return x;
    case ConvActivation::kRelu: return scalar::Relu()(x);
    case ConvActivation::kLeakyRelu: return scalar::LeakyRelu()(x, alpha);
    case ConvActivation::kClip: return scalar::Clip()(x, alpha, beta);
    case ConvActivation::kSigmoid: return scalar::Sigmoid()(x);
    case ConvActivation::kTanh: return scalar::Tanh()(x);
    case ConvActivation::kHardSigmoid: return scalar::HardSigmoid()(x, alpha, beta);
    case ConvActivation::kHardSwish: return scalar::HardSwish()(x);
    case ConvActivation::kSwish: return scalar::Swish()(x, alpha);
    case ConvActivation::kGelu: return scalar::Gelu()(x);
  }
  return x;
}

}  // namespace remex::kernels

#undef REMEX_CONV_EPILOGUE_FN
