// Launcher of the CUDA LSTM, GRU and RNN kernels (rnn_impl.cu). Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. Shapes, gate orders and
// semantics are those of kernels/ops/rnn/rnn_def.cc and rnn.cc (ONNX LSTM / GRU / RNN, opsets 7-17).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"
#include "kernels/ops/rnn/rnn_activation.h"

namespace remex::kernels::cuda {

// The cell kind: the CPU kernels' own enum (kernels/op_enums.h).
using ::remex::kernels::RnnCell;

// Activation functions: the CPU kernels' own list (kernels/ops/rnn/rnn_activation.h).
using RnnActFn = ::remex::kernels::RnnAct;

struct RnnActParams {
  RnnActFn fn = RnnActFn::kTanh;
  float alpha = 0;
  float beta = 0;
};

constexpr int kRnnMaxActs = 6;  // LSTM's 3 activations for each of 2 directions.

// One node's sizes and attributes. G (gates) is 1 for RNN, 3 for GRU (z, r, h), 4 for
// LSTM (i, o, f, c).
struct RnnParams {
  RnnCell cell = RnnCell::kRnn;
  int gates = 1;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int dirs = 1;
  bool layout1 = false;   // layout = 1: batch-major X, Y, states.
  bool reverse = false;   // direction = "reverse" (direction 1 of a bidirectional node is
                          // always reversed).
  bool has_clip = false;
  float clip = 0;
  bool linear_before_reset = false;  // GRU.
  bool input_forget = false;         // LSTM.
  int num_acts = 1;                  // Per direction.
  RnnActParams acts[kRnnMaxActs];    // num_acts per direction, forward's first.
};

// Device pointers; absent optional tensors are nullptr.
struct RnnTensors {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* r = nullptr;
  const void* b = nullptr;
  const void* seq_lens = nullptr;  // int32, or int64 when seq_lens_int64.
  bool seq_lens_int64 = false;
  const void* init_h = nullptr;
  const void* init_c = nullptr;
  const void* p = nullptr;
  void* y = nullptr;
  void* y_h = nullptr;
  void* y_c = nullptr;
};

// float32 elements of the launcher's scratch memory: the input products of every step
// and direction (seq * batch * dirs * G * hidden), two hidden states, the cell state
// and GRU's z and r . h (dirs * batch * hidden each). -1 on int64 overflow.
inline int64_t RnnWorkspaceFloats(const RnnParams& p) {
  int64_t xw = 0, state = 0, total = 0;
  if (__builtin_mul_overflow(p.seq, p.batch, &xw) || __builtin_mul_overflow(xw, int64_t{p.dirs} * p.gates, &xw) ||
      __builtin_mul_overflow(xw, p.hidden, &xw) || __builtin_mul_overflow(int64_t{p.dirs} * p.batch, p.hidden, &state) ||
      __builtin_mul_overflow(state, int64_t{5}, &total) || __builtin_add_overflow(total, xw, &total)) {
    return -1;
  }
  return total;
}

// Queues the whole op on `stream`: the input products (one tiled product over every
// step and direction, biases added), one launch per step for the recurrence (two for
// GRU without linear_before_reset) covering both directions, and the final states.
// `workspace` holds RnnWorkspaceFloats(p) floats. batch * hidden must be > 0. Y is
// zeroed first, so that rows past a batch entry's sequence length read 0. A
// sequence_lens value outside [0, seq] (an error on the CPU; the values are in device
// memory and are not read back) makes that batch entry's Y rows, Y_h and Y_c NaN.
// Returns the first launch error. T, the element type of X, W, R, B, the initial states,
// P and the outputs: float or Half.
template <typename T>
cudaError_t LaunchRnn(const RnnParams& p, const RnnTensors& t, float* workspace, cudaStream_t stream);

}  // namespace remex::kernels::cuda
