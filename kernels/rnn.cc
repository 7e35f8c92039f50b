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
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

struct RnnSpec {
  std::string_view name;
  RnnCell cell;
  int gates;      // G.
  int num_acts;   // Activations per direction.
  int max_inputs;
  int max_outputs;
};

constexpr RnnSpec kRnnSpec{"RNN", RnnCell::kRnn, 1, 1, 6, 2};
constexpr RnnSpec kGruSpec{"GRU", RnnCell::kGru, 3, 2, 6, 2};
constexpr RnnSpec kLstmSpec{"LSTM", RnnCell::kLstm, 4, 3, 8, 3};

// ---------------------------------------------------------------------------
// Activations.

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

// Applies `a` in place to v[0..n). The switch sits outside the loops.
template <typename C>
void ApplyActivation(const Activation& a, C* v, int64_t n) {
  const C alpha = static_cast<C>(a.alpha), beta = static_cast<C>(a.beta);
  switch (a.kind) {
    case Act::kRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > C(0) ? v[i] : C(0);
      break;
    case Act::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
      break;
    case Act::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = C(1) / (C(1) + std::exp(-v[i]));
      break;
    case Act::kAffine:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
      break;
    case Act::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= C(0) ? v[i] : alpha * v[i];
      break;
    case Act::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > alpha ? v[i] : C(0);
      break;
    case Act::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * std::tanh(beta * v[i]);
      break;
    case Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(alpha * v[i] + beta, C(0), C(1));
      break;
    case Act::kElu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= C(0) ? v[i] : alpha * (std::exp(v[i]) - C(1));
      break;
    case Act::kSoftsign:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (C(1) + std::abs(v[i]));
      break;
    case Act::kSoftplus:
      // log(1 + exp(x)) without overflow for large x.
      for (int64_t i = 0; i < n; ++i) {
        v[i] = v[i] > C(0) ? v[i] + std::log1p(std::exp(-v[i])) : std::log1p(std::exp(v[i]));
      }
      break;
  }
}

// ---------------------------------------------------------------------------
// Attributes.

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

StatusOr<RnnAttrs> ParseSpecAttrs(const RnnSpec& spec, const Attributes& attrs) {
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

struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int64_t layout = 0;
  bool layout0() const { return layout == 0; }
  Shape y;      // Y's shape.
  Shape state;  // initial_h, Y_h, Y_c shape.
};

// Input indices.
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitH = 5, kInitC = 6, kP = 7;

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

StatusOr<std::vector<TensorInfo>> InferRnn(const RnnSpec& spec, const Attributes& attrs,
                                           std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(RnnAttrs a, ParseSpecAttrs(spec, attrs));
  REMEX_ASSIGN_OR_RETURN(RnnDims d, ComputeRnnDims(spec, a, in));
  const DType dtype = in[kX].dtype;
  std::vector<TensorInfo> out = {{dtype, d.y}, {dtype, d.state}};
  if (spec.cell == RnnCell::kLstm) out.push_back({dtype, d.state});
  return out;
}

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

// ---------------------------------------------------------------------------
// Kernel.

// Row-by-row dot products for what oneDNN's sgemm does not pay off on: float64, and
// the per-step recurrent products of a few batch entries (a parallel region per step
// costs more than it saves there). Eight lanes let the compiler vectorise the sums.
template <typename C>
void GemmABtLoop(const C* a, int64_t lda, const C* b, int64_t ldb, C* out, int64_t ldc,
                 int64_t m, int64_t n, int64_t k, bool accumulate) {
  constexpr int kLanes = 8;
  for (int64_t i = 0; i < m; ++i) {
    const C* arow = a + i * lda;
    C* orow = out + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const C* brow = b + j * ldb;
      C lane[kLanes] = {};
      int64_t p = 0;
      for (; p + kLanes <= k; p += kLanes) {
        for (int l = 0; l < kLanes; ++l) lane[l] += arow[p + l] * brow[p + l];
      }
      C acc = 0;
      for (; p < k; ++p) acc += arow[p] * brow[p];
      for (int l = 0; l < kLanes; ++l) acc += lane[l];
      orow[j] = accumulate ? orow[j] + acc : acc;
    }
  }
}

// out[m x n] (leading dim ldc) = a[m x k] (lda) * b[n x k]^T (ldb), plus out when
// `accumulate`.
template <typename C>
Status GemmABt(const C* a, int64_t lda, const C* b, int64_t ldb, C* out, int64_t ldc, int64_t m,
               int64_t n, int64_t k, bool accumulate) {
  constexpr int64_t kSmallM = 8;
  if (m == 0 || n == 0) return OkStatus();
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(out + i * ldc, out + i * ldc + n, C(0));
    }
    return OkStatus();
  }
  if constexpr (std::is_same_v<C, float>) {
    if (m > kSmallM) {
      dnnl::status st = dnnl::sgemm('N', 'T', m, n, k, 1.0f, a, lda, b, ldb,
                                    accumulate ? 1.0f : 0.0f, out, ldc);
      if (st != dnnl::status::success) {
        return Internal("oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)));
      }
      return OkStatus();
    }
  }
  GemmABtLoop<C>(a, lda, b, ldb, out, ldc, m, n, k, accumulate);
  return OkStatus();
}

// The op's tensors in the compute type (absent optional inputs are nullptr).
template <typename C>
struct RnnBuffers {
  const C* x = nullptr;
  const C* w = nullptr;
  const C* r = nullptr;
  const C* b = nullptr;
  const C* init_h = nullptr;
  const C* init_c = nullptr;
  const C* p = nullptr;
  C* y = nullptr;
  C* y_h = nullptr;
  C* y_c = nullptr;
};

template <typename C>
class RnnRunner {
 public:
  RnnRunner(const RnnSpec& spec, const RnnAttrs& a, const RnnDims& d,
            const std::vector<int64_t>& lens, const RnnBuffers<C>& io)
      : spec_(spec), a_(a), d_(d), lens_(lens), io_(io) {}

  Status Run() {
    const int64_t h = d_.hidden, g = spec_.gates;
    if (io_.y) {
      std::fill(io_.y, io_.y + d_.seq * d_.dirs * d_.batch * h, C(0));
    }
    xw_.resize(static_cast<size_t>(d_.seq * d_.batch * g * h));
    hr_.resize(static_cast<size_t>(d_.batch * g * h));
    h_.resize(static_cast<size_t>(d_.batch * h));
    gates_.resize(static_cast<size_t>(g * h));
    if (spec_.cell == RnnCell::kLstm) c_.resize(h_.size());
    if (spec_.cell == RnnCell::kGru) rh_.resize(h_.size());
    for (int64_t dir = 0; dir < d_.dirs; ++dir) REMEX_RETURN_IF_ERROR(RunDirection(dir));
    return OkStatus();
  }

 private:
  // Offset (in elements) of batch entry b's state for direction dir in initial_h / Y_h.
  int64_t StateOffset(int64_t dir, int64_t b) const {
    return (d_.layout0() ? dir * d_.batch + b : b * d_.dirs + dir) * d_.hidden;
  }

  Status RunDirection(int64_t dir) {
    const int64_t h = d_.hidden, g = spec_.gates, gh = g * h;
    const bool reverse = a_.reverse || dir == 1;
    const C* w = io_.w + dir * gh * d_.input;
    const C* r = io_.r + dir * gh * h;
    const C* bias = io_.b ? io_.b + dir * 2 * gh : nullptr;
    const C* peep = io_.p ? io_.p + dir * 3 * h : nullptr;
    const Activation* acts = a_.acts.data() + dir * spec_.num_acts;
    const bool lbr = spec_.cell == RnnCell::kGru && a_.linear_before_reset;

    // Input products for every step at once, rows in X's order, with the biases that
    // are plain sums (the GRU h gate's R bias stays apart under linear_before_reset).
    const int64_t rows = d_.seq * d_.batch;
    REMEX_RETURN_IF_ERROR(
        GemmABt<C>(io_.x, d_.input, w, d_.input, xw_.data(), gh, rows, gh, d_.input, false));
    rbh_.assign(static_cast<size_t>(h), C(0));
    if (bias) {
      std::vector<C> sum(bias, bias + gh);
      for (int64_t j = 0; j < gh; ++j) sum[j] += bias[gh + j];
      if (lbr) {
        for (int64_t j = 0; j < h; ++j) {
          sum[2 * h + j] = bias[2 * h + j];
          rbh_[j] = bias[gh + 2 * h + j];
        }
      }
      for (int64_t row = 0; row < rows; ++row) {
        C* xr = xw_.data() + row * gh;
        for (int64_t j = 0; j < gh; ++j) xr[j] += sum[j];
      }
    }

    for (int64_t b = 0; b < d_.batch; ++b) {
      C* hb = h_.data() + b * h;
      if (io_.init_h) {
        std::copy(io_.init_h + StateOffset(dir, b), io_.init_h + StateOffset(dir, b) + h, hb);
      } else {
        std::fill(hb, hb + h, C(0));
      }
      if (spec_.cell == RnnCell::kLstm) {
        C* cb = c_.data() + b * h;
        if (io_.init_c) {
          std::copy(io_.init_c + StateOffset(dir, b), io_.init_c + StateOffset(dir, b) + h, cb);
        } else {
          std::fill(cb, cb + h, C(0));
        }
      }
    }

    for (int64_t s = 0; s < d_.seq; ++s) {
      // Recurrent products of the previous hidden state (GRU without
      // linear_before_reset: z and r gates only, the h gate needs r first).
      const int64_t n = spec_.cell == RnnCell::kGru && !lbr ? 2 * h : gh;
      REMEX_RETURN_IF_ERROR(GemmABt<C>(h_.data(), h, r, h, hr_.data(), gh, d_.batch, n, h, false));
      if (spec_.cell == RnnCell::kGru && !lbr) {
        for (int64_t b = 0; b < d_.batch; ++b) {
          if (s >= lens_[b]) continue;
          C* gt = GatePreActivations(b, s, reverse, 2 * h);
          C* z = gt;
          C* rg = gt + h;
          Clip(z, 2 * h);
          ApplyActivation(acts[0], z, h);
          ApplyActivation(acts[0], rg, h);
          const C* hb = h_.data() + b * h;
          C* rh = rh_.data() + b * h;
          for (int64_t j = 0; j < h; ++j) rh[j] = rg[j] * hb[j];
          // z is kept in the recurrent buffer for the second phase.
          std::copy(z, z + h, hr_.data() + b * gh);
        }
        // (r . Ht-1) * Rh^T into the h-gate columns of the recurrent buffer.
        REMEX_RETURN_IF_ERROR(GemmABt<C>(rh_.data(), h, r + 2 * h * h, h, hr_.data() + 2 * h, gh,
                                         d_.batch, h, h, false));
      }
      for (int64_t b = 0; b < d_.batch; ++b) {
        if (s >= lens_[b]) continue;
        const int64_t t = reverse ? lens_[b] - 1 - s : s;
        C* hb = h_.data() + b * h;
        switch (spec_.cell) {
          case RnnCell::kRnn: StepRnn(b, t, hb, acts); break;
          case RnnCell::kGru: StepGru(b, t, hb, acts, lbr); break;
          case RnnCell::kLstm: StepLstm(b, t, hb, acts, peep); break;
        }
        if (io_.y) {
          C* yrow = io_.y + (d_.layout0() ? (t * d_.dirs + dir) * d_.batch + b
                                          : (b * d_.seq + t) * d_.dirs + dir) *
                                h;
          std::copy(hb, hb + h, yrow);
        }
      }
    }

    for (int64_t b = 0; b < d_.batch; ++b) {
      if (io_.y_h) std::copy(h_.data() + b * h, h_.data() + (b + 1) * h, io_.y_h + StateOffset(dir, b));
      if (io_.y_c) std::copy(c_.data() + b * h, c_.data() + (b + 1) * h, io_.y_c + StateOffset(dir, b));
    }
    return OkStatus();
  }

  const C* XwRow(int64_t b, int64_t t) const {
    return xw_.data() + (d_.layout0() ? t * d_.batch + b : b * d_.seq + t) * spec_.gates * d_.hidden;
  }

  // gates_[0..n) = input products + recurrent products of batch entry b at step s.
  C* GatePreActivations(int64_t b, int64_t s, bool reverse, int64_t n) {
    const int64_t gh = spec_.gates * d_.hidden;
    const int64_t t = reverse ? lens_[b] - 1 - s : s;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * gh;
    for (int64_t j = 0; j < n; ++j) gates_[j] = xr[j] + hr[j];
    return gates_.data();
  }

  void Clip(C* v, int64_t n) const {
    if (!a_.has_clip) return;
    const C lim = static_cast<C>(a_.clip);
    for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -lim, lim);
  }

  void StepRnn(int64_t b, int64_t t, C* hb, const Activation* acts) {
    const int64_t h = d_.hidden;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * h;
    for (int64_t j = 0; j < h; ++j) hb[j] = xr[j] + hr[j];
    Clip(hb, h);
    ApplyActivation(acts[0], hb, h);
  }

  void StepGru(int64_t b, int64_t t, C* hb, const Activation* acts, bool lbr) {
    const int64_t h = d_.hidden, gh = 3 * h;
    const C* xr = XwRow(b, t);
    C* hr = hr_.data() + b * gh;
    C* z = gates_.data();
    C* rg = z + h;
    C* ht = z + 2 * h;
    if (lbr) {
      for (int64_t j = 0; j < 2 * h; ++j) z[j] = xr[j] + hr[j];
      Clip(z, 2 * h);
      ApplyActivation(acts[0], z, h);
      ApplyActivation(acts[0], rg, h);
      for (int64_t j = 0; j < h; ++j) ht[j] = xr[2 * h + j] + rg[j] * (hr[2 * h + j] + rbh_[j]);
    } else {
      // Phase one left z in hr[0..h) and (r . Ht-1) * Rh^T in hr[2h..3h).
      std::copy(hr, hr + h, z);
      for (int64_t j = 0; j < h; ++j) ht[j] = xr[2 * h + j] + hr[2 * h + j];
    }
    Clip(ht, h);
    ApplyActivation(acts[1], ht, h);
    for (int64_t j = 0; j < h; ++j) hb[j] = (C(1) - z[j]) * ht[j] + z[j] * hb[j];
  }

  void StepLstm(int64_t b, int64_t t, C* hb, const Activation* acts, const C* peep) {
    const int64_t h = d_.hidden, gh = 4 * h;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * gh;
    C* cb = c_.data() + b * h;
    C* gi = gates_.data();
    C* go = gi + h;
    C* gf = gi + 2 * h;
    C* gc = gi + 3 * h;
    for (int64_t j = 0; j < gh; ++j) gi[j] = xr[j] + hr[j];
    if (peep) {
      for (int64_t j = 0; j < h; ++j) {
        gi[j] += peep[j] * cb[j];
        gf[j] += peep[2 * h + j] * cb[j];
      }
    }
    Clip(gi, h);
    Clip(gf, h);
    Clip(gc, h);
    ApplyActivation(acts[0], gi, h);
    if (a_.input_forget) {
      for (int64_t j = 0; j < h; ++j) gf[j] = C(1) - gi[j];
    } else {
      ApplyActivation(acts[0], gf, h);
    }
    ApplyActivation(acts[1], gc, h);
    for (int64_t j = 0; j < h; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
    if (peep) {
      for (int64_t j = 0; j < h; ++j) go[j] += peep[h + j] * cb[j];
    }
    Clip(go, h);
    ApplyActivation(acts[0], go, h);
    // hb = o . h(C), with h(C) computed in the c-gate slot.
    std::copy(cb, cb + h, gc);
    ApplyActivation(acts[2], gc, h);
    for (int64_t j = 0; j < h; ++j) hb[j] = go[j] * gc[j];
  }

  const RnnSpec& spec_;
  const RnnAttrs& a_;
  const RnnDims& d_;
  const std::vector<int64_t>& lens_;
  RnnBuffers<C> io_;
  std::vector<C> xw_, hr_, h_, c_, rh_, gates_, rbh_;
};

class RnnKernel final : public ValidatedKernel {
 public:
  RnnKernel(const RnnSpec& spec, const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), spec_(spec), attrs_(*ParseSpecAttrs(spec, attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(RnnDims d, ComputeRnnDims(spec_, attrs_, args));
    std::vector<int64_t> lens(static_cast<size_t>(d.batch), d.seq);
    if (Present(in, kSeqLens)) {
      const TensorRef& t = in[kSeqLens];
      REMEX_ASSIGN_OR_RETURN(lens, ReadIndexTensor(op(), "sequence_lens", t.dtype, t.shape, t.data));
      for (int64_t v : lens) {
        if (v < 0 || v > d.seq) {
          return OpError(op(), "sequence_lens value " + std::to_string(v) + " is outside [0, " +
                                   std::to_string(d.seq) + "]");
        }
      }
    }
    return DispatchFloat(op(), in[kX].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      auto input = [&](size_t i) -> const T* {
        return Present(in, i) ? DataAs<const T>(in[i]) : nullptr;
      };
      auto output = [&](size_t i) -> T* { return i < out.size() ? DataAs<T>(out[i]) : nullptr; };
      if constexpr (std::is_same_v<T, C>) {
        RnnBuffers<C> io{input(kX), input(kW), input(kR), input(kB), input(kInitH),
                         input(kInitC), input(kP), output(0), output(1), output(2)};
        return RnnRunner<C>(spec_, attrs_, d, lens, io).Run();
      } else {
        // float16: the tensors are widened to float32 and the outputs narrowed back.
        std::vector<std::vector<C>> wide(kP + 1);
        auto widen = [&](size_t i) -> const C* {
          const T* p = input(i);
          if (!p) return nullptr;
          const size_t n = static_cast<size_t>(*NumElements(in[i].shape));
          wide[i].resize(n);
          for (size_t j = 0; j < n; ++j) wide[i][j] = Load(p[j]);
          return wide[i].data();
        };
        std::vector<std::vector<C>> outs(out.size());
        auto scratch = [&](size_t i) -> C* {
          if (i >= out.size()) return nullptr;
          outs[i].resize(static_cast<size_t>(*NumElements(out[i].shape)));
          return outs[i].data();
        };
        RnnBuffers<C> io{widen(kX), widen(kW), widen(kR), widen(kB), widen(kInitH),
                         widen(kInitC), widen(kP), scratch(0), scratch(1), scratch(2)};
        REMEX_RETURN_IF_ERROR(RnnRunner<C>(spec_, attrs_, d, lens, io).Run());
        for (size_t i = 0; i < out.size(); ++i) {
          T* o = DataAs<T>(out[i]);
          for (size_t j = 0; j < outs[i].size(); ++j) o[j] = Store<T>(outs[i][j]);
        }
        return OkStatus();
      }
    });
  }

 private:
  static bool Present(std::span<const TensorRef> in, size_t i) {
    return i < in.size() && in[i].present();
  }

  const RnnSpec& spec_;
  RnnAttrs attrs_;
};

Status AddRnnKernel(KernelRegistry& registry, const RnnSpec& spec) {
  OpDef def = RnnDef(spec);
  const std::string name = def.name;
  const int since = def.since_version;
  return registry.AddKernel(
      name, since, DeviceKind::kCpu,
      [def = std::move(def), &spec](const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_RETURN_IF_ERROR(ParseSpecAttrs(spec, attrs).status());
        return std::unique_ptr<OpKernel>(std::make_unique<RnnKernel>(spec, def, attrs));
      });
}

}  // namespace

StatusOr<RnnAttrs> ParseRnnAttrs(std::string_view op, const Attributes& attrs) {
  for (const RnnSpec* spec : {&kLstmSpec, &kGruSpec, &kRnnSpec}) {
    if (spec->name == op) return ParseSpecAttrs(*spec, attrs);
  }
  return InvalidArgument("ParseRnnAttrs: " + std::string(op) + " is not LSTM, GRU or RNN");
}

Status AddRnnOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(RnnDef(kLstmSpec)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(RnnDef(kGruSpec)));
  return registry.AddOp(RnnDef(kRnnSpec));
}

Status AddRnnCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, kLstmSpec));
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, kGruSpec));
  return AddRnnKernel(registry, kRnnSpec);
}

}  // namespace remex::kernels::internal
