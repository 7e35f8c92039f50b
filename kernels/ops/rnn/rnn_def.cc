// Recurrent ops: LSTM, GRU and RNN (ONNX semantics, opsets 7-17;
// https://onnx.ai/onnx/operators/onnx__LSTM.html, onnx__GRU.html, onnx__RNN.html).
//
// G is the number of gates: RNN 1, GRU 3 (order z, r, h), LSTM 4 (order i, o, f, c).
// D is the number of directions (2 for direction = "bidirectional", else 1), H is
// hidden_size, I the input size.
//
// Inputs (optional ones may be absent):
//   0 X              layout 0: [seq, batch, I]; layout 1: [batch, seq, I].
//   1 W              [D, G*H, I].
//   2 R              [D, G*H, H].
//   3 B              [D, 2*G*H] (W biases then R biases); absent: zeros.
//   4 sequence_lens  [batch], int32 (int64 is also accepted); each in [0, seq]. Steps
//                    at or past a batch entry's length are not run: their Y rows are 0
//                    and Y_h / Y_c hold the state after its last step (the initial state
//                    for a length of 0). The reverse direction starts at length - 1.
//   5 initial_h      layout 0: [D, batch, H]; layout 1: [batch, D, H]; absent: zeros.
//   6 initial_c      (LSTM) like initial_h.
//   7 P              (LSTM) peepholes [D, 3*H] (order i, o, f); absent: zeros.
// Outputs (a node may use a prefix):
//   0 Y              layout 0: [seq, D, batch, H]; layout 1: [batch, seq, D, H].
//   1 Y_h            like initial_h: the last hidden state per direction.
//   2 Y_c            (LSTM) like initial_h: the last cell state per direction.
// Every input but sequence_lens and every output share one dtype: float16, float32 or
// float64. float16 is computed in float32, float32 uses oneDNN's sgemm for the gate
// products, float64 a plain loop.
//
// Attributes:
//   hidden_size        when present, must match W; else taken from W.
//   direction          "forward" (default), "reverse" or "bidirectional".
//   activations        per direction G' names (RNN 1: Tanh; GRU 2: Sigmoid, Tanh; LSTM 3:
//                      Sigmoid, Tanh, Tanh), forward's first. A bidirectional node may
//                      give one direction's list, used by both. Names (case-insensitive):
//                      Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
//                      ScaledTanh, HardSigmoid, Elu, Softsign, Softplus (ONNX's
//                      string list, an Attributes::Strings value).
//   activation_alpha,  consumed in order by the activations that take them; missing ones
//   activation_beta    take ONNX's defaults (LeakyRelu 0.01, ThresholdedRelu 1, Elu 1,
//                      Affine 1/0, ScaledTanh 1/1, HardSigmoid 0.2/0.5).
//   clip               when present (> 0), activation inputs are clipped to [-clip, clip].
//   linear_before_reset (GRU) 1: h gate = g(Xt*Wh' + r . (Ht-1*Rh' + Rbh) + Wbh).
//   input_forget       (LSTM) 1: the forget gate is 1 - input gate.
//   layout             (opset 14+) 0 or 1, see the shapes above.
// Opset differences: opset 14 added `layout`; opsets 7-13 and 14+ otherwise compute the
// same. LSTM-1/GRU-1/RNN-1's `output_sequence` (opset < 7) is not supported.

#include <algorithm>
#include <cctype>
#include <string>

#include "kernels/ops/rnn/rnn_def.h"

namespace remex::kernels::internal {
namespace {

using Act = RnnAct;
using Activation = RnnActivation;

struct ActInfo {
  std::string_view name;  // Lower case.
  Act kind;
  bool uses_alpha, uses_beta;
  float default_alpha, default_beta;
};

constexpr ActInfo kActInfos[] = {
    {"relu", Act::kRelu, false, false, 0, 0},
    {"tanh", Act::kTanh, false, false, 0, 0},
    {"sigmoid", Act::kSigmoid, false, false, 0, 0},
    {"affine", Act::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", Act::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", Act::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", Act::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", Act::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", Act::kElu, true, false, 1.0f, 0},
    {"softsign", Act::kSoftsign, false, false, 0, 0},
    {"softplus", Act::kSoftplus, false, false, 0, 0},
};


std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

StatusOr<RnnAttrs> ParseRnnSpecAttrs(const RnnSpec& spec, const Attributes& attrs) {
  const std::string_view op = spec.name;
  auto wrap = [op](const Status& s) { return OpError(op, s.message()); };
  RnnAttrs a;
  a.cell = spec.cell;
  a.gates = spec.gates;
  a.num_acts = spec.num_acts;
  StatusOr<int64_t> hidden = attrs.Int("hidden_size", -1);
  if (!hidden.ok()) return wrap(hidden.status());
  if (attrs.Has("hidden_size") && *hidden <= 0) {
    return OpError(op, "hidden_size must be positive, got " + std::to_string(*hidden));
  }
  a.hidden_size = *hidden;

  StatusOr<std::string> direction = attrs.String("direction", "forward");
  if (!direction.ok()) return wrap(direction.status());
  if (*direction == "bidirectional") {
    a.num_directions = 2;
  } else if (*direction == "reverse") {
    a.reverse = true;
  } else if (*direction != "forward") {
    return OpError(op, "direction must be forward, reverse or bidirectional, got '" +
                           *direction + "'");
  }

  std::vector<std::string> names;
  if (attrs.Has("activations")) {
    StatusOr<std::vector<std::string>> listed = attrs.Strings("activations");
    if (!listed.ok()) return wrap(listed.status());
    names = std::move(listed).value();
  } else {
    switch (spec.cell) {
      case RnnCell::kRnn: names = {"Tanh"}; break;
      case RnnCell::kGru: names = {"Sigmoid", "Tanh"}; break;
      case RnnCell::kLstm: names = {"Sigmoid", "Tanh", "Tanh"}; break;
    }
  }
  const size_t want = static_cast<size_t>(spec.num_acts * a.num_directions);
  if (names.size() == static_cast<size_t>(spec.num_acts) && a.num_directions == 2) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != want) {
    return OpError(op, "activations must list " + std::to_string(want) + " functions, got " +
                           std::to_string(names.size()));
  }
  StatusOr<std::vector<float>> alphas = attrs.Floats("activation_alpha", {});
  if (!alphas.ok()) return wrap(alphas.status());
  StatusOr<std::vector<float>> betas = attrs.Floats("activation_beta", {});
  if (!betas.ok()) return wrap(betas.status());
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const std::string lower = Lower(name);
    const ActInfo* info = nullptr;
    for (const ActInfo& i : kActInfos) {
      if (i.name == lower) info = &i;
    }
    if (!info) return OpError(op, "unknown activation '" + name + "'");
    Activation act{info->kind, info->default_alpha, info->default_beta};
    if (info->uses_alpha && next_alpha < alphas->size()) act.alpha = (*alphas)[next_alpha++];
    if (info->uses_beta && next_beta < betas->size()) act.beta = (*betas)[next_beta++];
    a.acts.push_back(act);
  }

  if (attrs.Has("clip")) {
    StatusOr<float> clip = attrs.Float("clip");
    if (!clip.ok()) return wrap(clip.status());
    if (!(*clip > 0)) return OpError(op, "clip must be positive, got " + std::to_string(*clip));
    a.has_clip = true;
    a.clip = *clip;
  }
  if (spec.cell == RnnCell::kGru) {
    StatusOr<int64_t> lbr = attrs.Int("linear_before_reset", 0);
    if (!lbr.ok()) return wrap(lbr.status());
    a.linear_before_reset = *lbr != 0;
  }
  if (spec.cell == RnnCell::kLstm) {
    StatusOr<int64_t> input_forget = attrs.Int("input_forget", 0);
    if (!input_forget.ok()) return wrap(input_forget.status());
    a.input_forget = *input_forget != 0;
  }
  StatusOr<int64_t> layout = attrs.Int("layout", 0);
  if (!layout.ok()) return wrap(layout.status());
  if (*layout != 0 && *layout != 1) {
    return OpError(op, "layout must be 0 or 1, got " + std::to_string(*layout));
  }
  a.layout = *layout;
  StatusOr<int64_t> output_sequence = attrs.Int("output_sequence", 0);
  if (!output_sequence.ok()) return wrap(output_sequence.status());
  if (*output_sequence != 0) {
    return Unimplemented(std::string(op) + ": output_sequence (opset 1) is not supported");
  }
  return a;
}

// ---------------------------------------------------------------------------
// Shapes.

StatusOr<RnnDims> ComputeRnnDims(const RnnSpec& spec, const RnnAttrs& a,
                                 std::span<const ShapeFnArg> in) {
  const std::string_view op = spec.name;
  static constexpr const char* kNames[] = {"X",         "W",         "R",         "B",
                                           "sequence_lens", "initial_h", "initial_c", "P"};
  if (in.size() < 3 || in.size() > static_cast<size_t>(spec.max_inputs)) {
    return OpError(op, "expects 3 to " + std::to_string(spec.max_inputs) + " inputs, got " +
                           std::to_string(in.size()));
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!in[i].present) return OpError(op, std::string(kNames[i]) + " is required");
  }
  const DType dtype = in[kX].dtype;
  if (!IsFloatType(dtype)) {
    return OpError(op, "unsupported dtype " + std::string(DTypeName(dtype)) +
                           " (float16, float32, float64)");
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) continue;
    REMEX_RETURN_IF_ERROR(CheckedNumElements(op, in[i].shape).status());
    if (i == kSeqLens) continue;
    if (in[i].dtype != dtype) {
      return OpError(op, std::string(kNames[i]) + " has dtype " +
                             std::string(DTypeName(in[i].dtype)) + ", X has " +
                             std::string(DTypeName(dtype)));
    }
  }
  auto expect = [&](size_t i, const Shape& want) -> Status {
    if (in[i].shape != want) {
      return OpError(op, std::string(kNames[i]) + " must have shape " + ShapeToString(want) +
                             ", got " + ShapeToString(in[i].shape));
    }
    return OkStatus();
  };
  const Shape& xs = in[kX].shape;
  if (xs.size() != 3) return OpError(op, "X must have rank 3, got " + ShapeToString(xs));
  RnnDims d;
  d.dirs = a.num_directions;
  d.layout = a.layout;
  d.seq = a.layout == 0 ? xs[0] : xs[1];
  d.batch = a.layout == 0 ? xs[1] : xs[0];
  d.input = xs[2];
  const Shape& ws = in[kW].shape;
  if (ws.size() != 3 || ws[0] != d.dirs || ws[2] != d.input || ws[1] % spec.gates != 0) {
    return OpError(op, "W must have shape [" + std::to_string(d.dirs) + ", " +
                           std::to_string(spec.gates) + "*hidden_size, " +
                           std::to_string(d.input) + "], got " + ShapeToString(ws));
  }
  d.hidden = ws[1] / spec.gates;
  if (a.hidden_size >= 0 && a.hidden_size != d.hidden) {
    return OpError(op, "hidden_size is " + std::to_string(a.hidden_size) + " but W has shape " +
                           ShapeToString(ws));
  }
  const int64_t gh = ws[1];
  REMEX_RETURN_IF_ERROR(expect(kR, {d.dirs, gh, d.hidden}));
  if (in.size() > kB && in[kB].present) {
    if (gh > std::numeric_limits<int64_t>::max() / 2) return OpError(op, "W is too large");
    REMEX_RETURN_IF_ERROR(expect(kB, {d.dirs, 2 * gh}));
  }
  if (in.size() > kSeqLens && in[kSeqLens].present) {
    const DType t = in[kSeqLens].dtype;
    if (t != DType::kInt32 && t != DType::kInt64) {
      return OpError(op, "sequence_lens must be int32, got " + std::string(DTypeName(t)));
    }
    REMEX_RETURN_IF_ERROR(expect(kSeqLens, {d.batch}));
  }
  d.state = a.layout == 0 ? Shape{d.dirs, d.batch, d.hidden} : Shape{d.batch, d.dirs, d.hidden};
  if (in.size() > kInitH && in[kInitH].present) REMEX_RETURN_IF_ERROR(expect(kInitH, d.state));
  if (in.size() > kInitC && in[kInitC].present) REMEX_RETURN_IF_ERROR(expect(kInitC, d.state));
  if (in.size() > kP && in[kP].present) {
    if (d.hidden > std::numeric_limits<int64_t>::max() / 3) return OpError(op, "P is too large");
    REMEX_RETURN_IF_ERROR(expect(kP, {d.dirs, 3 * d.hidden}));
  }
  d.y = a.layout == 0 ? Shape{d.seq, d.dirs, d.batch, d.hidden}
                      : Shape{d.batch, d.seq, d.dirs, d.hidden};
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, d.y).status());
  // The kernel's scratch: seq * batch * G * H gate pre-activations.
  int64_t scratch = 0;
  if (__builtin_mul_overflow(d.seq * d.batch, gh, &scratch)) {
    return OpError(op, "X and W are too large");
  }
  return d;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferRnn(const RnnSpec& spec, const Attributes& attrs,
                                           std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(RnnAttrs a, ParseRnnSpecAttrs(spec, attrs));
  REMEX_ASSIGN_OR_RETURN(RnnDims d, ComputeRnnDims(spec, a, in));
  const DType dtype = in[kX].dtype;
  std::vector<TensorInfo> out = {{dtype, d.y}, {dtype, d.state}};
  if (spec.cell == RnnCell::kLstm) out.push_back({dtype, d.state});
  return out;
}

}  // namespace

OpDef RnnDef(const RnnSpec& spec) {
  OpDef def;
  def.name = std::string(spec.name);
  def.since_version = 7;  // RNN-7, GRU-7, LSTM-7.
  def.min_inputs = 3;
  def.max_inputs = spec.max_inputs;
  def.min_outputs = 1;
  def.max_outputs = spec.max_outputs;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [spec](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferRnn(spec, attrs, in);
  };
  return def;
}

StatusOr<RnnAttrs> ParseRnnAttrs(std::string_view op, const Attributes& attrs) {
  for (const RnnSpec* spec : {&kLstmSpec, &kGruSpec, &kRnnSpec}) {
    if (spec->name == op) return ParseRnnSpecAttrs(*spec, attrs);
  }
  return InvalidArgument("ParseRnnAttrs: " + std::string(op) + " is not LSTM, GRU or RNN");
}

Status AddRnnOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(RnnDef(kLstmSpec)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(RnnDef(kGruSpec)));
  return registry.AddOp(RnnDef(kRnnSpec));
}

}  // namespace remex::kernels::internal
