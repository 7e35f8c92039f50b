// The epilogue of FusedConv: the activation applied after the convolution, its bias
// and the residual Z (Y = activation(Conv(X, W, B) + Z)), shared by the CPU kernel
// (kernels/conv.cc) and the CUDA kernel (kernels/cuda/). A plain header: no CUDA, no
// Remex headers, so .cu files include it.
//
// Each activation is its ONNX operator's definition (https://onnx.ai/onnx/operators/):
// Relu-14, LeakyRelu-6 (alpha), Clip-13 (min = alpha, max = beta), Sigmoid-13, Tanh-13,
// HardSigmoid-6 (alpha, beta), HardSwish-14.
#pragma once

#include <cmath>
#include <cstdint>

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
  kClip,         // min(max(x, alpha), beta)
  kSigmoid,      // 1 / (1 + exp(-x))
  kTanh,         // tanh(x)
  kHardSigmoid,  // max(0, min(1, alpha * x + beta))
  kHardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
};

// The activation `kind` of float32 `x`, with the kind's parameters `alpha` and `beta`
// (see ConvActivation; unused ones are ignored). NaN stays NaN (Clip and the Relu
// family compare, so NaN inputs propagate as the ONNX reference does).
REMEX_CONV_EPILOGUE_FN float ApplyConvActivation(ConvActivation kind, float x, float alpha, float beta) {
  switch (kind) {
    case ConvActivation::kNone:
      return x;
    case ConvActivation::kRelu:
      return x < 0.0f ? 0.0f : x;
    case ConvActivation::kLeakyRelu:
      return x < 0.0f ? alpha * x : x;
    case ConvActivation::kClip:
      return x < alpha ? alpha : (x > beta ? beta : x);
    case ConvActivation::kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case ConvActivation::kTanh:
      return tanhf(x);
    case ConvActivation::kHardSigmoid: {
      const float y = alpha * x + beta;
      return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case ConvActivation::kHardSwish: {
      const float y = x / 6.0f + 0.5f;
      return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
    }
  }
  return x;
}

}  // namespace remex::kernels

#undef REMEX_CONV_EPILOGUE_FN
