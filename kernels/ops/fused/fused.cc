// FusedElementwise: a chain (or small DAG) of elementwise float ops evaluated in one
// pass over memory. The program format is described in kernels/ops/fused/fused.h.
//
// The CPU kernel walks the output in blocks of kBlock elements. Per block it loads (or
// gathers, where an input broadcasts; a per-channel operand of an NHWC value is read
// from one repeated copy instead, and one of an NCHW value is a uniform operand, read
// once per channel's run, the blocks split at the runs) each input into a block-sized
// slot buffer, runs every instruction over the block, and stores the last result;
// intermediate values stay in the slot buffers (a few KiB, in L1/L2) and never reach
// memory. float32 and float64 inputs that are not broadcast are read in place, and the
// last instruction writes straight into the output. A float32 program that is a
// per-channel affine map, Relu(x * scale + shift) (a BatchNormalization and its Relu),
// runs instead in one loop over the elements (AffineProgram).

#include "kernels/ops/fused/fused.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/internal.h"

namespace remex::kernels {

int FusedOperandCount(int64_t op) {
  switch (static_cast<FusedOpcode>(op)) {
    case FusedOpcode::kAdd:
    case FusedOpcode::kSub:
    case FusedOpcode::kMul:
    case FusedOpcode::kDiv:
    case FusedOpcode::kPow:
    case FusedOpcode::kMin:
    case FusedOpcode::kMax:
    case FusedOpcode::kLeakyRelu:
    case FusedOpcode::kSwish:
      return 2;
    case FusedOpcode::kRelu:
    case FusedOpcode::kSigmoid:
    case FusedOpcode::kTanh:
    case FusedOpcode::kExp:
    case FusedOpcode::kLog:
    case FusedOpcode::kSqrt:
    case FusedOpcode::kNeg:
    case FusedOpcode::kAbs:
    case FusedOpcode::kReciprocal:
    case FusedOpcode::kErf:
    case FusedOpcode::kHardSwish:
    case FusedOpcode::kGelu:
      return 1;
    case FusedOpcode::kHardSigmoid:
    case FusedOpcode::kClip:
      return 3;
  }
  return 0;
}

std::string_view FusedOpcodeName(int64_t op) {
  switch (static_cast<FusedOpcode>(op)) {
    case FusedOpcode::kAdd:
      return "Add";
    case FusedOpcode::kSub:
      return "Sub";
    case FusedOpcode::kMul:
      return "Mul";
    case FusedOpcode::kDiv:
      return "Div";
    case FusedOpcode::kPow:
      return "Pow";
    case FusedOpcode::kMin:
      return "Min";
    case FusedOpcode::kMax:
      return "Max";
    case FusedOpcode::kRelu:
      return "Relu";
    case FusedOpcode::kSigmoid:
      return "Sigmoid";
    case FusedOpcode::kTanh:
      return "Tanh";
    case FusedOpcode::kExp:
      return "Exp";
    case FusedOpcode::kLog:
      return "Log";
    case FusedOpcode::kSqrt:
      return "Sqrt";
    case FusedOpcode::kNeg:
      return "Neg";
    case FusedOpcode::kAbs:
      return "Abs";
    case FusedOpcode::kReciprocal:
      return "Reciprocal";
    case FusedOpcode::kErf:
      return "Erf";
    case FusedOpcode::kHardSwish:
      return "HardSwish";
    case FusedOpcode::kLeakyRelu:
      return "LeakyRelu";
    case FusedOpcode::kHardSigmoid:
      return "HardSigmoid";
    case FusedOpcode::kClip:
      return "Clip";
    case FusedOpcode::kSwish:
      return "Swish";
    case FusedOpcode::kGelu:
      return "Gelu";
  }
  return "";
}

namespace internal {
namespace {

constexpr std::string_view kOp = "FusedElementwise";
// Elements per block: small enough that every slot buffer of a typical chain stays in
// L1/L2, large enough for the per-instruction loops to run at full vector speed.
constexpr int64_t kBlock = 512;
// Blocks per compute thread at least: smaller outputs run on the calling thread alone.
constexpr int64_t kGrainBlocks = 32;

struct Instr {
  FusedOpcode op;
  int32_t a, b, c;  // Slots; -1 where unused.
};

struct Program {
  std::vector<Instr> code;
  std::vector<float> immediates;
  int64_t num_inputs = 0;
};

// The `program` and `immediates` attributes, viewed in place.
struct ProgramView {
  const std::vector<int64_t>* program = nullptr;
  const std::vector<float>* immediates = nullptr;  // Null: none.
};

StatusOr<ProgramView> ViewProgram(const Attributes& attrs) {
  ProgramView view;
  const auto& all = attrs.all();
  auto p = all.find("program");
  if (p == all.end()) return OpError(kOp, "attribute 'program' is required");
  view.program = std::get_if<std::vector<int64_t>>(&p->second);
  if (!view.program) return OpError(kOp, "attribute 'program' must be ints");
  if (auto i = all.find("immediates"); i != all.end()) {
    view.immediates = std::get_if<std::vector<float>>(&i->second);
    if (!view.immediates) return OpError(kOp, "attribute 'immediates' must be floats");
  }
  return view;
}

// Checks the program for `num_inputs` inputs; without `num_inputs` (kernel creation,
// before the inputs are known), operand upper bounds are left to the shape function.
// Allocates only to report an error: it runs at every shape-function call.
Status CheckProgram(const ProgramView& view, std::optional<int64_t> num_inputs) {
  const std::vector<int64_t>& p = *view.program;
  if (p.empty()) return OpError(kOp, "program is empty (it needs at least one instruction)");
  if (p.size() % kFusedWidth != 0) {
    return OpError(kOp, "program has " + std::to_string(p.size()) + " entries, not a multiple of " +
                            std::to_string(kFusedWidth));
  }
  const int64_t nin = num_inputs.value_or(0);
  const int64_t count = static_cast<int64_t>(p.size()) / kFusedWidth;
  const int64_t nimm = view.immediates ? static_cast<int64_t>(view.immediates->size()) : 0;
  if (nin + nimm + count > kFusedMaxSlots) {
    return OpError(kOp, std::to_string(nin) + " inputs, " + std::to_string(nimm) + " immediates and " +
                            std::to_string(count) + " instructions exceed the limit of " +
                            std::to_string(kFusedMaxSlots) + " slots");
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t* e = &p[static_cast<size_t>(j * kFusedWidth)];
    const int arity = FusedOperandCount(e[0]);
    if (arity == 0) {
      return OpError(kOp, "instruction " + std::to_string(j) + ": unknown opcode " + std::to_string(e[0]));
    }
    // Slots this instruction may read: inputs, immediates, earlier results.
    const int64_t limit = nin + nimm + j;
    for (int t = 0; t < 3; ++t) {
      const int64_t v = e[1 + t];
      const bool ok = t >= arity ? v == -1 : v >= 0 && (!num_inputs || v < limit);
      if (ok) continue;
      const std::string where = "instruction " + std::to_string(j) + " (" +
                                std::string(FusedOpcodeName(e[0])) + "): operand " + std::to_string(t);
      if (t >= arity) {
        return OpError(kOp, where + " must be -1 (" + std::string(FusedOpcodeName(e[0])) + " takes " +
                                std::to_string(arity) + ")");
      }
      return OpError(kOp, where + " is slot " + std::to_string(v) + ", expects a slot in [0, " +
                              std::to_string(limit) + ") (inputs, immediates, earlier results)");
    }
  }
  return OkStatus();
}

// The checked program for `num_inputs` inputs, decoded.
StatusOr<Program> ParseProgram(const Attributes& attrs, int64_t num_inputs) {
  REMEX_ASSIGN_OR_RETURN(ProgramView view, ViewProgram(attrs));
  REMEX_RETURN_IF_ERROR(CheckProgram(view, num_inputs));
  Program prog;
  prog.num_inputs = num_inputs;
  if (view.immediates) prog.immediates = *view.immediates;
  const std::vector<int64_t>& p = *view.program;
  for (size_t j = 0; j < p.size(); j += kFusedWidth) {
    prog.code.push_back({static_cast<FusedOpcode>(p[j]), static_cast<int32_t>(p[j + 1]),
                         static_cast<int32_t>(p[j + 2]), static_cast<int32_t>(p[j + 3])});
  }
  return prog;
}

// The optional `num_inputs` and `dtype` attributes against the node's inputs (`in`
// non-empty). Allocates only to report an error, as CheckProgram.
Status CheckSignature(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  const auto& all = attrs.all();
  if (auto it = all.find("num_inputs"); it != all.end()) {
    const int64_t* n = std::get_if<int64_t>(&it->second);
    if (!n) return OpError(kOp, "attribute 'num_inputs' must be an int");
    if (*n != static_cast<int64_t>(in.size())) {
      return OpError(kOp, "attribute 'num_inputs' is " + std::to_string(*n) + " but the node has " +
                              std::to_string(in.size()) + " inputs");
    }
  }
  if (auto it = all.find("dtype"); it != all.end()) {
    const std::string* name = std::get_if<std::string>(&it->second);
    if (!name) return OpError(kOp, "attribute 'dtype' must be a string");
    const std::optional<DType> dtype = DTypeFromName(*name);
    if (!dtype || *dtype != in[0].dtype) {
      return OpError(kOp, "attribute 'dtype' is '" + *name + "' but the inputs are " +
                              std::string(DTypeName(in[0].dtype)));
    }
  }
  return OkStatus();
}

StatusOr<std::vector<TensorInfo>> InferFused(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError(kOp, "expects at least 1 input");
  if (static_cast<int64_t>(in.size()) > kFusedMaxInputs) {
    return OpError(
        kOp, std::to_string(in.size()) + " inputs exceed the limit of " + std::to_string(kFusedMaxInputs));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) return OpError(kOp, "input " + std::to_string(i) + " is absent");
    if (in[i].dtype != in[0].dtype) {
      return OpError(kOp, "input dtypes differ: " + std::string(DTypeName(in[0].dtype)) + " (input 0) and " +
                              std::string(DTypeName(in[i].dtype)) + " (input " + std::to_string(i) + ")");
    }
  }
  if (!IsFloatType(in[0].dtype)) {
    return OpError(kOp, "unsupported dtype " + std::string(DTypeName(in[0].dtype)) + " (float types only)");
  }
  REMEX_RETURN_IF_ERROR(CheckSignature(attrs, in));
  REMEX_ASSIGN_OR_RETURN(ProgramView view, ViewProgram(attrs));
  REMEX_RETURN_IF_ERROR(CheckProgram(view, static_cast<int64_t>(in.size())));
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    REMEX_ASSIGN_OR_RETURN(out, BroadcastShapes(kOp, out, in[i].shape));
  }
  return std::vector<TensorInfo>{{in[0].dtype, std::move(out)}};
}

// ---------------------------------------------------------------------------
// Evaluation.

// d[i] = f(a[i]), f(a[i], b[i]) or f(a[i], b[i], c[i]) for i < len. Inlined into Exec,
// and Exec into each clone of ExecClones, so that every loop is compiled for each CPU.
template <typename F, typename C>
[[gnu::always_inline]] inline void Map1(F f, const C* a, C* d, int64_t len) {
  for (int64_t i = 0; i < len; ++i) d[i] = f(a[i]);
}
// With `b_uniform` (every b[i] is b[0]) b[0] is read once and only it need be set.
template <typename F, typename C>
[[gnu::always_inline]] inline void Map2(F f, const C* a, const C* b, C* d, int64_t len, bool b_uniform) {
  if (b_uniform) {
    const C bv = b[0];
    for (int64_t i = 0; i < len; ++i) d[i] = f(a[i], bv);
  } else {
    for (int64_t i = 0; i < len; ++i) d[i] = f(a[i], b[i]);
  }
}
template <typename F, typename C>
[[gnu::always_inline]] inline void Map3(F f, const C* a, const C* b, const C* c, C* d, int64_t len) {
  for (int64_t i = 0; i < len; ++i) d[i] = f(a[i], b[i], c[i]);
}

// d[i] = op(a[i], b[i], c[i]) for i < len: the functor of op's name in
// kernels/scalar_ops.h, as the unfused kernels compute it. `b_uniform`: every b[i] is
// b[0] (an immediate, a one-element input, or a per-channel one within a channel's
// run), which lets Pow test its exponent once; a two-operand op then reads b[0] alone
// (a three-operand one reads every b[i]: Clip and HardSigmoid).
template <typename C>
[[gnu::always_inline]] inline void Exec(FusedOpcode op, const C* a, const C* b, const C* c, C* d, int64_t len,
                                        bool b_uniform) {
  switch (op) {
    case FusedOpcode::kAdd:
      return Map2(scalar::Add(), a, b, d, len, b_uniform);
    case FusedOpcode::kSub:
      return Map2(scalar::Sub(), a, b, d, len, b_uniform);
    case FusedOpcode::kMul:
      return Map2(scalar::Mul(), a, b, d, len, b_uniform);
    case FusedOpcode::kDiv:
      return Map2(scalar::Div(), a, b, d, len, b_uniform);
    case FusedOpcode::kPow:
      // scalar::Pow's shortcuts, tested once for a uniform exponent.
      if (b_uniform && b[0] == C(2)) {
        for (int64_t i = 0; i < len; ++i) d[i] = a[i] * a[i];
      } else if (b_uniform && b[0] == C(1)) {
        if (d != a) std::memmove(d, a, static_cast<size_t>(len) * sizeof(C));
      } else {
        Map2(scalar::Pow(), a, b, d, len, b_uniform);
      }
      return;
    case FusedOpcode::kMin:
      return Map2(scalar::Min(), a, b, d, len, b_uniform);
    case FusedOpcode::kMax:
      return Map2(scalar::Max(), a, b, d, len, b_uniform);
    case FusedOpcode::kRelu: return Map1(scalar::Relu(), a, d, len);
    case FusedOpcode::kSigmoid: return Map1(scalar::Sigmoid(), a, d, len);
    case FusedOpcode::kTanh: return Map1(scalar::Tanh(), a, d, len);
    case FusedOpcode::kExp: return Map1(scalar::Exp(), a, d, len);
    case FusedOpcode::kLog: return Map1(scalar::Log(), a, d, len);
    case FusedOpcode::kSqrt: return Map1(scalar::Sqrt(), a, d, len);
    case FusedOpcode::kNeg: return Map1(scalar::Neg(), a, d, len);
    case FusedOpcode::kAbs: return Map1(scalar::Abs(), a, d, len);
    case FusedOpcode::kReciprocal: return Map1(scalar::Reciprocal(), a, d, len);
    case FusedOpcode::kErf: return Map1(scalar::Erf(), a, d, len);
    case FusedOpcode::kHardSwish: return Map1(scalar::HardSwish(), a, d, len);
    case FusedOpcode::kLeakyRelu:
      return Map2(scalar::LeakyRelu(), a, b, d, len, b_uniform);
    case FusedOpcode::kSwish:
      return Map2(scalar::Swish(), a, b, d, len, b_uniform);
    case FusedOpcode::kGelu: return Map1(scalar::Gelu(), a, d, len);
    case FusedOpcode::kHardSigmoid: return Map3(scalar::HardSigmoid(), a, b, c, d, len);
    case FusedOpcode::kClip: return Map3(scalar::Clip(), a, b, c, d, len);
  }
}

// Exec compiled for AVX-512 and AVX2 as well as the baseline (REMEX_CPU_CLONES): the
// block loops are where FusedElementwise spends its time. fused.cc is compiled with
// -ffp-contract=off (sources.cmake), so no clone fuses a multiply-add: every clone
// rounds as the baseline, the unfused kernels and the CUDA kernels do.
REMEX_CPU_CLONES void ExecClones(FusedOpcode op, const float* a, const float* b, const float* c, float* d,
                                 int64_t len, bool b_uniform) {
  Exec<float>(op, a, b, c, d, len, b_uniform);
}
}  // namespace

void ExecFusedOpcode(FusedOpcode op, const float* a, const float* b, const float* c, float* d, int64_t len,
                     bool b_uniform) {
  ExecClones(op, a, b, c, d, len, b_uniform);
}

namespace {

REMEX_CPU_CLONES void ExecClones(FusedOpcode op, const double* a, const double* b, const double* c, double* d,
                                 int64_t len, bool b_uniform) {
  Exec<double>(op, a, b, c, d, len, b_uniform);
}

// A per-channel affine map of one input, rectified or not: y = Relu(x * scale + shift),
// Mul, Add and Relu each optional but in that order, two of them at least. It is what
// the compiler makes of a BatchNormalization (and the Relu after it) of a value that no
// convolution takes in: DenseNet's, before each of its layers. Such a program runs in
// one pass over memory (AffineClones) in place of the block loops' pass per
// instruction: the same operations on the same values, so the same results (but for the
// payload of a NaN where both operands of a Mul or Add are NaNs: x's, not the other's).
struct AffineProgram {
  int32_t x = -1, scale = -1, shift = -1;  // input slots; -1: no Mul, no Add
  bool relu = false;
};

std::optional<AffineProgram> MatchAffine(const Program& p) {
  if (p.code.size() < 2 || p.code.size() > 3) return std::nullopt;
  const int32_t nin = static_cast<int32_t>(p.num_inputs);
  const int32_t first_result = nin + static_cast<int32_t>(p.immediates.size());
  auto is_input = [&](int32_t slot) { return slot >= 0 && slot < nin; };
  AffineProgram a;
  int32_t value = -1;  // the slot of the map so far
  for (size_t j = 0; j < p.code.size(); ++j) {
    const Instr& ins = p.code[j];
    if (ins.op == FusedOpcode::kMul || ins.op == FusedOpcode::kAdd) {
      int32_t& operand = ins.op == FusedOpcode::kMul ? a.scale : a.shift;
      if (a.relu || a.shift >= 0 || operand >= 0) return std::nullopt;  // Mul, then Add, then Relu
      if (value < 0 && is_input(ins.a) && is_input(ins.b)) {
        a.x = ins.a;  // or ins.b: Eval takes the one read in place
        operand = ins.b;
      } else if (value >= 0 && ins.a == value && is_input(ins.b)) {
        operand = ins.b;
      } else if (value >= 0 && ins.b == value && is_input(ins.a)) {
        operand = ins.a;
      } else {
        return std::nullopt;
      }
    } else if (ins.op == FusedOpcode::kRelu && value >= 0 && ins.a == value) {
      a.relu = true;
    } else {
      return std::nullopt;
    }
    value = first_result + static_cast<int32_t>(j);
  }
  return a;
}

// y[i] = Relu(x[i] * scale[i] + shift[i]) for i < len, each step where its flag is set,
// as Exec computes them (scalar_ops.h's functors; fused.cc contracts no multiply-add).
template <bool kScale, bool kShift, bool kRelu>
[[gnu::always_inline]] inline void AffineLoop(const float* x, const float* scale, const float* shift,
                                              float* y, int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    float v = x[i];
    if constexpr (kScale) v = scalar::Mul()(v, scale[i]);
    if constexpr (kShift) v = scalar::Add()(v, shift[i]);
    if constexpr (kRelu) v = scalar::Relu()(v);
    y[i] = v;
  }
}
template <bool kScale, bool kShift, bool kRelu>
[[gnu::always_inline]] inline void AffineUniformLoop(const float* x, float scale, float shift, float* y,
                                                     int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    float v = x[i];
    if constexpr (kScale) v = scalar::Mul()(v, scale);
    if constexpr (kShift) v = scalar::Add()(v, shift);
    if constexpr (kRelu) v = scalar::Relu()(v);
    y[i] = v;
  }
}

// The affine map over `rows` rows of `period` elements: with `uniform`, each row's scale
// and shift are scale[r] and shift[r] (an NCHW value's channel runs); otherwise every
// row's are scale[0, period) and shift[0, period) (an NHWC value's pixels). A null
// scale or shift: no Mul or no Add.
REMEX_CPU_CLONES void AffineClones(const float* x, const float* scale, const float* shift, bool relu,
                                   bool uniform, float* y, int64_t rows, int64_t period) {
  auto run = [&](auto s, auto b, auto r) {
    constexpr bool kS = decltype(s)::value, kB = decltype(b)::value, kR = decltype(r)::value;
    for (int64_t row = 0; row < rows; ++row) {
      const float* xr = x + row * period;
      float* yr = y + row * period;
      if (uniform) {
        AffineUniformLoop<kS, kB, kR>(xr, kS ? scale[row] : 0.0f, kB ? shift[row] : 0.0f, yr, period);
      } else {
        AffineLoop<kS, kB, kR>(xr, scale, shift, yr, period);
      }
    }
  };
  using T = std::true_type;
  using F = std::false_type;
  const int flags = (scale ? 4 : 0) | (shift ? 2 : 0) | (relu ? 1 : 0);
  switch (flags) {
    case 7:
      return run(T(), T(), T());
    case 6:
      return run(T(), T(), F());
    case 5:
      return run(T(), F(), T());
    case 3:
      return run(F(), T(), T());
    default:
      return run(F(), T(), F());  // AffineProgram has two steps at least: never reached with fewer
  }
}

// Where an input's elements come from, per block.
enum class InputKind {
  kInPlace,   // Not broadcast, read where it lies (float32, float64).
  kConvert,   // Not broadcast, converted into its slot per block (float16).
  kScalar,    // One element, filled into its slot once.
  kGather,    // Broadcast: gathered into its slot per block.
  kPeriodic,  // Broadcast along all but its innermost dims (a per-channel [1, 1, 1, C]
              // operand of an NHWC value): its values repeat with period C along the
              // output, read from one copy of them repeated past a block's length.
  kRun,       // Broadcast along the output's innermost dims (a per-channel [C, 1, 1]
              // operand of an NCHW value: one value per H * W run), where every
              // broadcast input that is not kPeriodic runs as long: blocks then stay
              // within a run, and the input is uniform in each (its value read per run).
};

// Row length (channels, or a channel's run) below which an affine program keeps the
// block loops.
constexpr int64_t kMinAffinePeriod = 16;
// Period of a kPeriodic input at most (its repeated copy is C + kBlock elements a part).
constexpr int64_t kMaxPeriod = int64_t{1} << 16;

// An input's broadcast over the output: output dims of extent 1 dropped, adjacent
// dims merged where the input broadcasts along both or neither. Strides in elements,
// 0 where the input broadcasts; the innermost stride is thus 0 or 1.
struct GatherPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

GatherPlan MakeGatherPlan(const Shape& in, const Shape& out) {
  const size_t rank = out.size();
  const size_t lead = rank - in.size();
  GatherPlan plan;
  std::vector<bool> bcast;
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    const bool b = i < lead || in[i - lead] == 1;
    if (!plan.dims.empty() && bcast.back() == b) {
      plan.dims.back() *= out[i];
    } else {
      plan.dims.push_back(out[i]);
      bcast.push_back(b);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    bcast.push_back(true);
  }
  plan.strides.resize(plan.dims.size());
  int64_t s = 1;
  for (size_t j = plan.dims.size(); j-- > 0;) {
    plan.strides[j] = bcast[j] ? 0 : s;
    if (!bcast[j]) s *= plan.dims[j];
  }
  return plan;
}

// dst[0, len) = the input's values at output elements [o, o + len).
template <typename T, typename C>
void Gather(const T* x, const GatherPlan& plan, int64_t o, int64_t len, C* dst, std::vector<int64_t>& idx) {
  const size_t r = plan.dims.size();
  idx.assign(r, 0);
  int64_t off = 0;
  int64_t rem = o;
  for (size_t d = r; d-- > 0;) {
    idx[d] = rem % plan.dims[d];
    rem /= plan.dims[d];
    off += idx[d] * plan.strides[d];
  }
  const int64_t inner = plan.dims[r - 1];
  const int64_t step = plan.strides[r - 1];
  while (len > 0) {
    const int64_t run = std::min(len, inner - idx[r - 1]);
    if (step == 1) {
      for (int64_t i = 0; i < run; ++i) dst[i] = Load(x[off + i]);
    } else {
      const C v = Load(x[off]);
      for (int64_t i = 0; i < run; ++i) dst[i] = v;
    }
    dst += run;
    len -= run;
    if (len == 0) break;
    // The run reached the end of the inner dim: carry into the outer ones.
    off -= idx[r - 1] * step;
    idx[r - 1] = 0;
    for (size_t d = r - 1; d-- > 0;) {
      off += plan.strides[d];
      if (++idx[d] < plan.dims[d]) break;
      off -= plan.strides[d] * plan.dims[d];
      idx[d] = 0;
    }
  }
}

// The element of a kRun input (its plan's innermost stride 0) that output run r reads.
int64_t RunOffset(const GatherPlan& plan, int64_t r) {
  if (plan.dims.size() == 2) return r * plan.strides[0];  // [C, R]: no division
  int64_t off = 0;
  for (size_t d = plan.dims.size() - 1, rem = static_cast<size_t>(r); d-- > 0;) {
    off += static_cast<int64_t>(rem % static_cast<size_t>(plan.dims[d])) * plan.strides[d];
    rem /= static_cast<size_t>(plan.dims[d]);
  }
  return off;
}

class FusedKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<FusedKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(ProgramView view, ViewProgram(attrs));
    REMEX_RETURN_IF_ERROR(CheckProgram(view, std::nullopt));
    return std::make_unique<FusedKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (!program_ || program_->num_inputs != static_cast<int64_t>(in.size())) {
      REMEX_ASSIGN_OR_RETURN(Program p, ParseProgram(attrs(), static_cast<int64_t>(in.size())));
      program_ = std::move(p);
      affine_ = MatchAffine(*program_);
    }
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Eval<T>(in, out[0]);
      return OkStatus();
    });
  }

 private:
  template <typename C>
  std::vector<C>& Scratch() {
    if constexpr (std::is_same_v<C, float>) {
      return scratch_f_;
    } else {
      return scratch_d_;
    }
  }

  template <typename T>
  void Eval(std::span<const TensorRef> in, const TensorRef& out) {
    using C = ComputeType<T>;
    constexpr bool kDirect = std::is_same_v<T, C>;  // Inputs and output read/written in place.
    const Program& p = *program_;
    const size_t nin = in.size();
    const size_t nimm = p.immediates.size();
    const size_t ncode = p.code.size();
    const size_t nslots = nin + nimm + ncode;
    const int64_t n = *NumElements(out.shape);
    // Elements per block actually used: a smaller output needs smaller fills.
    const int64_t block = std::min(kBlock, n);
    uniform_.assign(nslots, false);
    kind_.resize(nin);
    plans_.resize(nin);
    for (size_t i = 0; i < nimm; ++i) uniform_[nin + i] = true;
    // Every broadcast input constant along runs of the same length R of the output (the
    // per-channel operands of an NCHW value, R = H * W): blocks then never cross a run,
    // and those inputs are kRun, uniform within each block.
    int64_t run_len = 0;
    bool runs = true;
    for (size_t k = 0; k < nin; ++k) {
      const int64_t nk = *NumElements(in[k].shape);
      if (nk == n) {
        kind_[k] = kDirect ? InputKind::kInPlace : InputKind::kConvert;
      } else if (nk == 1) {
        kind_[k] = InputKind::kScalar;
        uniform_[k] = true;
      } else {
        kind_[k] = InputKind::kGather;
        plans_[k] = MakeGatherPlan(in[k].shape, out.shape);
        const GatherPlan& plan = plans_[k];
        if (plan.dims.size() == 2 && plan.strides[0] == 0 && plan.strides[1] == 1 && plan.dims[1] <= kMaxPeriod) {
          kind_[k] = InputKind::kPeriodic;
        } else if (plan.strides.back() == 0 && (run_len == 0 || run_len == plan.dims.back())) {
          run_len = plan.dims.back();
        } else {
          runs = false;
        }
      }
    }
    runs = runs && run_len > 0;
    // Runs of at most a quarter block go several to a block (`runs_per_block`), their
    // kRun inputs filled run by run; longer ones one to a block at most.
    const int64_t runs_per_block = runs && run_len <= kBlock / 4 ? kBlock / run_len : 1;
    // A kRun input's slot is filled only where some instruction reads more than its
    // first element: as a, as c, or as b of a three-operand op (see Exec), or where a
    // block holds several runs.
    fill_.assign(nin, runs_per_block > 1);
    if (runs) {
      for (size_t k = 0; k < nin; ++k) {
        if (kind_[k] != InputKind::kGather) continue;
        kind_[k] = InputKind::kRun;
        uniform_[k] = runs_per_block == 1;
      }
      for (const Instr& ins : p.code) {
        const bool b_whole = FusedOperandCount(static_cast<int64_t>(ins.op)) > 2;
        for (int32_t slot : {ins.a, ins.c, b_whole ? ins.b : -1}) {
          if (slot >= 0 && static_cast<size_t>(slot) < nin) fill_[static_cast<size_t>(slot)] = true;
        }
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      if (affine_ && EvalAffine(in, out, *affine_, n, runs ? run_len : 0)) return;
    }
    const std::vector<bool>& uniform = uniform_;
    const std::vector<bool>& fill = fill_;
    const std::vector<InputKind>& kind = kind_;
    T* y = DataAs<T>(out);
    const size_t last = nin + nimm + ncode - 1;
    // Each part's scratch: its slots, then each periodic input's values repeated over
    // its period plus a block (the block at output element o reads them from element
    // o % period on), at repeated_at_[k] past the slots.
    repeated_at_.assign(nin, 0);
    size_t part_size = nslots * kBlock;
    for (size_t k = 0; k < nin; ++k) {
      if (kind[k] != InputKind::kPeriodic) continue;
      repeated_at_[k] = part_size;
      part_size += static_cast<size_t>(plans_[k].dims[1] + block);
    }
    // Blocks: kBlock elements each; with runs, runs_per_block whole runs each, or each
    // run's first kBlock, next kBlock, ... (`per_run` blocks a run).
    const int64_t per_run = runs ? (run_len + kBlock - 1) / kBlock : 0;
    const int64_t run_count = runs ? n / run_len : 0;
    const int64_t blocks = !runs                ? (n + kBlock - 1) / kBlock
                           : runs_per_block > 1 ? (run_count + runs_per_block - 1) / runs_per_block
                                                : run_count * per_run;
    const int64_t block_len = !runs                ? kBlock
                              : runs_per_block > 1 ? runs_per_block * run_len
                                                   : std::min(run_len, kBlock);
    const int64_t grain = std::max<int64_t>(1, kGrainBlocks * kBlock / block_len);
    // Blocks are independent: the compute threads take contiguous runs of them, each
    // with its own slots.
    const int parts = ParallelParts(blocks, grain);
    std::vector<C>& scratch = Scratch<C>();
    scratch.resize(static_cast<size_t>(parts) * part_size);
    idx_.resize(static_cast<size_t>(parts));
    ParallelFor(blocks, grain, [&](int64_t b0, int64_t b1, int part) {
      C* base = scratch.data() + static_cast<size_t>(part) * part_size;
      auto buf = [&](size_t slot) { return base + slot * kBlock; };
      std::vector<const C*> ptr(nslots, nullptr);
      std::vector<int64_t>& idx = idx_[part];
      // Per kRun input: the run whose value its slot holds, -1 for none.
      std::vector<int64_t> run_in_slot(nin, -1);
      for (size_t k = 0; k < nin; ++k) {
        if (kind[k] != InputKind::kPeriodic) continue;
        const T* x = DataAs<const T>(in[k]);
        const int64_t period = plans_[k].dims[1];
        C* r = base + repeated_at_[k];
        for (int64_t i = 0; i < period + block; ++i) r[i] = Load(x[i % period]);
      }
      for (size_t i = 0; i < nimm; ++i) {
        std::fill_n(buf(nin + i), block, static_cast<C>(p.immediates[i]));
        ptr[nin + i] = buf(nin + i);
      }
      for (size_t k = 0; k < nin; ++k) {
        if (kind[k] == InputKind::kScalar) std::fill_n(buf(k), block, Load(*DataAs<const T>(in[k])));
        ptr[k] = buf(k);
      }
      for (int64_t bi = b0; bi < b1; ++bi) {
        int64_t o, len, run = 0;
        if (runs_per_block > 1) {
          run = bi * runs_per_block;
          o = run * run_len;
          len = std::min(runs_per_block * run_len, n - o);
        } else if (runs) {
          run = bi / per_run;
          const int64_t in_run = bi % per_run * kBlock;
          o = run * run_len + in_run;
          len = std::min(kBlock, run_len - in_run);
        } else {
          o = bi * kBlock;
          len = std::min(kBlock, n - o);
        }
        for (size_t k = 0; k < nin; ++k) {
          const T* x = DataAs<const T>(in[k]);
          switch (kind[k]) {
            case InputKind::kInPlace:
              if constexpr (kDirect) ptr[k] = x + o;
              break;
            case InputKind::kConvert:
              for (int64_t i = 0; i < len; ++i) buf(k)[i] = Load(x[o + i]);
              break;
            case InputKind::kScalar:
              break;
            case InputKind::kGather:
              Gather<T, C>(x, plans_[k], o, len, buf(k), idx);
              break;
            case InputKind::kPeriodic:
              ptr[k] = base + repeated_at_[k] + o % plans_[k].dims[1];
              break;
            case InputKind::kRun:
              if (run != run_in_slot[k]) {
                // Each run's value: the run's index over the plan's outer dims. The
                // whole slot only where it is read whole (a later block of the run may
                // be longer than this one).
                const GatherPlan& plan = plans_[k];
                auto value_of = [&](int64_t r) { return Load(x[RunOffset(plan, r)]); };
                if (runs_per_block > 1) {
                  for (int64_t i = 0; i < len; i += run_len)
                    std::fill_n(buf(k) + i, run_len, value_of(run + i / run_len));
                } else if (fill[k]) {
                  std::fill_n(buf(k), kBlock, value_of(run));
                } else {
                  buf(k)[0] = value_of(run);
                }
                run_in_slot[k] = run;
              }
              break;
          }
        }
        for (size_t j = 0; j < ncode; ++j) {
          const Instr& ins = p.code[j];
          const size_t slot = nin + nimm + j;
          C* d = buf(slot);
          // The last result goes straight to the output. Should the output share its
          // buffer with an input read in place, each element is read before it is
          // written (same index, and earlier instructions of the block run first).
          if constexpr (kDirect) {
            if (slot == last) d = y + o;
          }
          ExecClones(ins.op, ptr[ins.a], ins.b >= 0 ? ptr[ins.b] : nullptr, ins.c >= 0 ? ptr[ins.c] : nullptr, d,
                     len, ins.b >= 0 && uniform[ins.b]);
          ptr[slot] = d;
        }
        if constexpr (!kDirect) {
          const C* r = ptr[last];
          for (int64_t i = 0; i < len; ++i) y[o + i] = Store<T>(r[i]);
        }
      }
    });
  }

  // The affine program's single pass, where x is read in place and the scale and shift
  // are both per-channel operands of one kind (kPeriodic: `run_len` 0; or kRun, uniform
  // over runs of `run_len`). False where they are not: the block loops run it.
  bool EvalAffine(std::span<const TensorRef> in, const TensorRef& out, AffineProgram a, int64_t n,
                  int64_t run_len) {
    if (kind_[static_cast<size_t>(a.x)] != InputKind::kInPlace) {
      // The first instruction's operands the other way round (Mul and Add commute).
      std::swap(a.x, a.scale >= 0 ? a.scale : a.shift);
      if (kind_[static_cast<size_t>(a.x)] != InputKind::kInPlace) return false;
    }
    const InputKind want = run_len > 0 ? InputKind::kRun : InputKind::kPeriodic;
    int64_t period = run_len;
    for (int32_t k : {a.scale, a.shift}) {
      if (k < 0) continue;
      if (kind_[static_cast<size_t>(k)] != want) return false;
      if (want == InputKind::kPeriodic) {
        const int64_t pk = plans_[static_cast<size_t>(k)].dims[1];
        if (period != 0 && pk != period) return false;
        period = pk;
      }
    }
    // Rows of a few elements (an RGB value's three channels, NCHW planes of 1 x 3) would
    // barely vectorise: the block loops run those.
    if (period < kMinAffinePeriod) return false;
    const int64_t rows = n / period;
    const float* x = DataAs<const float>(in[static_cast<size_t>(a.x)]);
    float* y = DataAs<float>(out);
    // NCHW: each run's scale and shift gathered into per-run arrays first.
    const float* scale = a.scale >= 0 ? DataAs<const float>(in[static_cast<size_t>(a.scale)]) : nullptr;
    const float* shift = a.shift >= 0 ? DataAs<const float>(in[static_cast<size_t>(a.shift)]) : nullptr;
    if (run_len > 0) {
      affine_runs_.resize(static_cast<size_t>(2 * rows));
      for (int64_t r = 0; r < rows; ++r) {
        const size_t i = static_cast<size_t>(r);
        const GatherPlan& scale_plan = plans_[static_cast<size_t>(std::max(a.scale, 0))];
        const GatherPlan& shift_plan = plans_[static_cast<size_t>(std::max(a.shift, 0))];
        if (scale) affine_runs_[i] = scale[RunOffset(scale_plan, r)];
        if (shift) affine_runs_[static_cast<size_t>(rows) + i] = shift[RunOffset(shift_plan, r)];
      }
      if (scale) scale = affine_runs_.data();
      if (shift) shift = affine_runs_.data() + rows;
    }
    const bool uniform = run_len > 0;
    const int64_t grain = std::max<int64_t>(1, kGrainBlocks * kBlock / period);
    ParallelFor(rows, grain, [&](int64_t r0, int64_t r1, int) {
      AffineClones(x + r0 * period, uniform && scale ? scale + r0 : scale,
                   uniform && shift ? shift + r0 : shift, a.relu, uniform, y + r0 * period, r1 - r0, period);
    });
    return true;
  }

  std::optional<Program> program_;
  std::optional<AffineProgram> affine_;  // program_ as an affine map, where it is one
  std::vector<float> affine_runs_;       // EvalAffine's per-run scales and shifts
  // Per-call state, kept to spare allocations.
  std::vector<bool> uniform_;
  std::vector<InputKind> kind_;
  std::vector<bool> fill_;  // Per kRun input: its slot filled whole.
  std::vector<GatherPlan> plans_;
  std::vector<std::vector<int64_t>> idx_;  // Per part.
  std::vector<size_t> repeated_at_;        // Per input: a periodic one's copy in a part's scratch.
  std::vector<float> scratch_f_;
  std::vector<double> scratch_d_;
};

OpDef FusedDef() {
  OpDef def;
  def.name = std::string(kOp);
  def.min_inputs = 1;
  def.max_inputs = -1;
  def.infer = InferFused;
  return def;
}

}  // namespace

Status AddFusedOpDefs(KernelRegistry& registry) { return registry.AddOp(FusedDef()); }

Status AddFusedCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<FusedKernel>(registry, FusedDef().name);
}

}  // namespace internal
}  // namespace remex::kernels
