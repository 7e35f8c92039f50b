// The enums that name an op's variant or attribute choice, shared by the CPU kernels
// (kernels/*.cc) and the CUDA kernels (kernels/cuda/), whose .cu launchers take them.
// The attribute parsers that produce them are declared in kernels/op_attrs.h and
// defined beside the CPU kernels. A plain header: no CUDA, no Remex headers, so .cu
// files include it.
//
// The enums' order and values are not part of any format; code switches on the names.
#pragma once

#include <cstdint>

namespace remex::kernels {

// ONNX ReduceSum, ReduceMean, ReduceProd, ReduceMax, ReduceMin, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (opsets 1-18; kernels/ops/reduction/reduce.cc).
enum class ReduceKind : uint8_t {
  kSum,
  kMean,
  kProd,
  kMax,
  kMin,
  kL1,
  kL2,
  kSumSquare,
  kLogSum,
  kLogSumExp,
};

// ONNX Resize-10/11/13 (kernels/ops/image/resize.cc): `mode`.
enum class ResizeMode : uint8_t { kNearest, kLinear, kCubic };
// `coordinate_transformation_mode` (Resize-11/13; Resize-10 is kAsymmetric).
enum class ResizeCoord : uint8_t {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
// `nearest_mode`; kSimple: Resize-10's nearest (floor when upscaling, ceil when
// downscaling).
enum class ResizeNearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

// The recurrent cell of ONNX RNN, GRU and LSTM (opsets 7-17; kernels/ops/rnn/rnn_def.cc). Their
// activation functions are kernels/ops/rnn/rnn_activation.h's RnnAct.
enum class RnnCell : uint8_t { kRnn, kGru, kLstm };

// ONNX Pad (kernels/ops/tensor/pad.cc): `mode` constant, reflect or edge.
enum class PadMode : uint8_t { kConstant, kReflect, kEdge };

// The Softmax family (kernels/ops/math/softmax.cc; ONNX Softmax, LogSoftmax, Hardmax).
enum class SoftmaxMode : uint8_t { kSoftmax, kLogSoftmax, kHardmax };

// The `reduction` of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// (kernels/ops/nn/loss.cc).
enum class LossReduction : uint8_t { kNone, kSum, kMean };

// ScatterElements' `reduction` (kernels/ops/tensor/scatter.cc).
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul };

}  // namespace remex::kernels
