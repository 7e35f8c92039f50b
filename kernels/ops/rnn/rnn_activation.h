// The activation functions of ONNX LSTM, GRU and RNN (opsets 7-17), shared by the CPU
// kernels (kernels/ops/rnn/rnn.cc, through kernels/op_attrs.h) and the CUDA kernels
// (kernels/ops/rnn/cuda/rnn_impl.cu). A plain header: no CUDA, no Remex headers.
#pragma once

#include <cstdint>

namespace remex::kernels {

enum class RnnAct : uint8_t {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

}  // namespace remex::kernels
