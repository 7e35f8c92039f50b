// LSTM, GRU and RNN: the op definitions (kernels/ops/rnn/rnn_def.cc) shared with the CPU kernel
// (kernels/ops/rnn/rnn.cc). Semantics, shapes and attributes: the comment at the top of rnn_def.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

// One recurrent op: G = gates, the activations per direction, input and output counts.
struct RnnSpec {
  std::string_view name;
  RnnCell cell;
  int gates;      // G.
  int num_acts;   // Activations per direction.
  int max_inputs;
  int max_outputs;
};

inline constexpr RnnSpec kRnnSpec{"RNN", RnnCell::kRnn, 1, 1, 6, 2};
inline constexpr RnnSpec kGruSpec{"GRU", RnnCell::kGru, 3, 2, 6, 2};
inline constexpr RnnSpec kLstmSpec{"LSTM", RnnCell::kLstm, 4, 3, 8, 3};

// The extents of one call (after ComputeRnnDims has checked its inputs).
struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int64_t layout = 0;
  bool layout0() const { return layout == 0; }
  Shape y;      // Y's shape.
  Shape state;  // initial_h, Y_h, Y_c shape.
};

// Input indices.
inline constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitH = 5, kInitC = 6, kP = 7;

// The attributes of `spec`'s op, checked (INVALID_ARGUMENT "<op>: ..."): hidden_size,
// direction, activations with their alpha and beta, clip, linear_before_reset,
// input_forget, layout.
StatusOr<RnnAttrs> ParseRnnSpecAttrs(const RnnSpec& spec, const Attributes& attrs);

// Checks the inputs' count, dtypes and shapes against `a` and gives the extents
// (INVALID_ARGUMENT "<op>: ..." naming the input).
StatusOr<RnnDims> ComputeRnnDims(const RnnSpec& spec, const RnnAttrs& a,
                                 std::span<const ShapeFnArg> in);

// The OpDef of `spec`'s op (entries 7+: RNN-7, GRU-7, LSTM-7 and their later versions).
OpDef RnnDef(const RnnSpec& spec);

}  // namespace remex::kernels::internal
