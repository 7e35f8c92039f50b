// Unary elementwise ops (ONNX semantics, opsets 1-17, Swish-24 and Gelu-20): Relu, LeakyRelu,
// HardSigmoid, HardSwish, Sigmoid, Swish, Gelu (approximate "none" only), Tanh, Exp, Log, Erf, Sqrt, Neg, Abs, Reciprocal, Sin, Cos, Tan,
// Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Ceil, Floor, Round, Sign, Softplus,
// Softsign, Elu, Celu, Selu, ThresholdedRelu, Shrink, Not, IsNaN, IsInf; Clip (x with optional scalar
// min and max); Dropout (inference: identity). The formulas are kernels/scalar_ops.h's;
// the ops of the UnaryOps() table take float16/32/64 (Relu, Neg, Abs and Sign integers
// too) and their attributes (alpha, beta, gamma, bias, lambd) with ONNX's defaults. The
// broadcasting ops are in elementwise.cc.
//
// Integer arithmetic wraps (no signed-overflow UB); float16 computes in float. Float
// formulas are kernels/scalar_ops.h's functors, which every other implementation of
// these ops (FusedElementwise, the epilogues, CUDA) shares. Each OpDef carries the
// traits the compiler's passes read (kernels.h OpTraits).

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops/elementwise/dropout_mask.h"
#include "kernels/float32_copies.h"
#include "kernels/internal.h"

#include "kernels/ops/elementwise/elementwise_common.h"

namespace remex::kernels::internal {

StatusOr<std::optional<double>> DropoutTrainingRatio(std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Dropout";
  double ratio = 0.5;  // Dropout-12's default.
  if (in.size() > 1 && in[1].present) {
    if (!IsFloatType(in[1].dtype)) {
      return OpError(op, "ratio has dtype " + DTypeStr(in[1].dtype) + ", expects a float type");
    }
    if (NumElements(in[1].shape).value_or(0) != 1) {
      return OpError(op, "ratio must be a scalar, got shape " + ShapeToString(in[1].shape));
    }
    if (in[1].data == nullptr) return OpError(op, "ratio has no data");
    switch (in[1].dtype) {
      case DType::kFloat32: ratio = *static_cast<const float*>(in[1].data); break;
      case DType::kFloat64: ratio = *static_cast<const double*>(in[1].data); break;
      default: ratio = HalfToFloat(*static_cast<const Half*>(in[1].data)); break;
    }
  }
  if (in.size() < 3 || !in[2].present) return std::optional<double>();
  if (in[2].dtype != DType::kBool) {
    return OpError(op, "training_mode has dtype " + DTypeStr(in[2].dtype) + ", expects bool");
  }
  if (NumElements(in[2].shape).value_or(0) != 1) {
    return OpError(op, "training_mode must be a scalar, got shape " + ShapeToString(in[2].shape));
  }
  if (in[2].data == nullptr) return OpError(op, "training_mode has no data");
  if (*static_cast<const uint8_t*>(in[2].data) == 0) return std::optional<double>();
  if (!(ratio >= 0.0 && ratio < 1.0)) {
    return OpError(op, "ratio must be in [0, 1) in training mode, got " + std::to_string(ratio));
  }
  // Ratio 0 drops nothing: the inference path.
  if (ratio == 0.0) return std::optional<double>();
  if (!IsFloatType(in[0].dtype)) {
    return OpError(op, "training mode takes float16, float32 or float64 data, got " + DTypeStr(in[0].dtype));
  }
  return std::optional<double>(ratio);
}

namespace {

// ---------------------------------------------------------------------------
// Unary ops.

// Which dtypes an op takes.
enum class TypeClass { kFloat, kNumeric, kSigned, kBool };

bool AcceptsType(TypeClass tc, DType dt) {
  switch (tc) {
    case TypeClass::kFloat:
      return IsFloatType(dt);
    case TypeClass::kNumeric:
      return IsNumericType(dt);
    case TypeClass::kSigned:
      return IsFloatType(dt) || dt == DType::kInt8 || dt == DType::kInt16 || dt == DType::kInt32 ||
             dt == DType::kInt64;
    case TypeClass::kBool:
      return dt == DType::kBool;
  }
  return false;
}

std::string_view TypeClassName(TypeClass tc) {
  switch (tc) {
    case TypeClass::kFloat:
      return " (float types only)";
    case TypeClass::kSigned:
      return " (signed types only)";
    case TypeClass::kBool:
      return " (bool only)";
    default:
      return "";
  }
}

// The attribute parameters of a unary op (OpTraits::params: LeakyRelu's alpha,
// HardSigmoid's alpha and beta), their defaults where absent.
struct UnaryParams {
  float alpha = 0;
  float beta = 0;
};

StatusOr<UnaryParams> ParseUnaryParams(std::span<const ScalarParam> params, const Attributes& attrs) {
  float values[2] = {0, 0};
  for (size_t i = 0; i < params.size() && i < 2; ++i) {
    REMEX_ASSIGN_OR_RETURN(values[i], attrs.Float(params[i].attribute, params[i].default_value.value_or(0.0f)));
  }
  return UnaryParams{values[0], values[1]};
}

template <typename T, typename F>
void MapUnary(const TensorRef& in, const TensorRef& out, F f) {
  const int64_t n = *NumElements(in.shape);
  const T* x = DataAs<const T>(in);
  T* y = DataAs<T>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = Store<T>(f(Load(x[i])));
}

// Neg and Abs of any numeric type: integers wrap (no signed-overflow UB), floats are
// scalar_ops.h's.
struct NumericNeg {
  template <typename C>
  C operator()(C v) const {
    if constexpr (std::is_integral_v<C>) {
      return WrapNeg(v);
    } else {
      return scalar::Neg()(v);
    }
  }
};
struct NumericAbs {
  template <typename C>
  C operator()(C v) const {
    if constexpr (std::is_unsigned_v<C>) {
      return v;
    } else if constexpr (std::is_integral_v<C>) {
      return v < C(0) ? WrapNeg(v) : v;
    } else {
      return scalar::Abs()(v);
    }
  }
};

// Elements per block of MapUnaryFloat32.
constexpr int64_t kUnaryBlock = 1024;

// The parameters of FusedElementwise opcode `op` as its operands b and c: a block of
// alpha, then a block of beta (empty when the opcode takes none), made once per kernel.
std::vector<float> ParamBlocks(FusedOpcode op, float alpha, float beta) {
  const int operands = FusedOperandCount(static_cast<int64_t>(op));
  std::vector<float> blocks(static_cast<size_t>((operands - 1) * kUnaryBlock), alpha);
  if (operands > 2) std::fill(blocks.begin() + kUnaryBlock, blocks.end(), beta);
  return blocks;
}

// y = op(x, params) for float32 x of an op with a FusedElementwise opcode, `params` its
// ParamBlocks: FusedElementwise's loops (ExecFusedOpcode, compiled for AVX2 and AVX-512
// too), in blocks spread over the compute threads.
void MapUnaryFloat32(FusedOpcode op, const float* x, float* y, int64_t n, const std::vector<float>& params) {
  constexpr int64_t kGrainBlocks = 16;  // Smaller tensors run on the calling thread alone.
  const float* b = params.empty() ? nullptr : params.data();
  const float* c = params.size() > static_cast<size_t>(kUnaryBlock) ? params.data() + kUnaryBlock : nullptr;
  ParallelFor((n + kUnaryBlock - 1) / kUnaryBlock, kGrainBlocks, [&](int64_t b0, int64_t b1, int) {
    for (int64_t o = b0 * kUnaryBlock; o < std::min(n, b1 * kUnaryBlock); o += kUnaryBlock) {
      ExecFusedOpcode(op, x + o, b, c, y + o, std::min(kUnaryBlock, n - o), true);
    }
  });
}

// y = F(x, params...) with the op's attribute parameters (alpha, beta) as F takes
// them; F is a scalar_ops.h functor. Float dtypes, or every numeric one with kNumeric.
// float32 runs through MapUnaryFloat32 where the op has a FusedElementwise opcode
// (whose instruction computes F).
template <typename F, bool kNumeric>
class UnaryKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<UnaryKernel>> Create(const OpDef& def, const Attributes& attrs) {
    StatusOr<UnaryParams> parsed = ParseUnaryParams(def.traits.params, attrs);
    if (!parsed.ok()) return OpError(def.name, parsed.status().message());
    return std::make_unique<UnaryKernel>(def, attrs, std::move(*parsed));
  }
  UnaryKernel(const OpDef& def, const Attributes& attrs, UnaryParams parsed)
      : ValidatedKernel(def, attrs),
        params_(std::move(parsed)),
        opcode_(def.traits.fused_opcode),
        param_blocks_(opcode_ ? ParamBlocks(*opcode_, params_.alpha, params_.beta) : std::vector<float>()) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (opcode_ && in[0].dtype == DType::kFloat16) {
      // Through float32 copies and the vectorised float32 map below: float16 computes in
      // float32 and rounds once either way.
      return RunAsFloat32(in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); });
    }
    if (opcode_ && in[0].dtype == DType::kFloat32) {
      MapUnaryFloat32(*opcode_, DataAs<const float>(in[0]), DataAs<float>(out[0]), *NumElements(in[0].shape),
                      param_blocks_);
      return OkStatus();
    }
    auto body = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const C alpha = static_cast<C>(params_.alpha);
      const C beta = static_cast<C>(params_.beta);
      // By value: an op of one input uses neither parameter (hence [=], not a list).
      MapUnary<T>(in[0], out[0], [=](C v) {
        if constexpr (std::is_invocable_v<F, C, C, C>) {
          return F()(v, alpha, beta);
        } else if constexpr (std::is_invocable_v<F, C, C>) {
          return F()(v, alpha);
        } else {
          return F()(v);
        }
      });
      return OkStatus();
    };
    if constexpr (kNumeric) {
      return DispatchNumeric(op(), in[0].dtype, body);
    } else {
      return DispatchFloat(op(), in[0].dtype, body);
    }
  }

 private:
  UnaryParams params_;
  const std::optional<FusedOpcode> opcode_;
  const std::vector<float> param_blocks_;  // ParamBlocks of opcode_.
};

class NotKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = *NumElements(in[0].shape);
    const uint8_t* x = DataAs<const uint8_t>(in[0]);
    uint8_t* y = DataAs<uint8_t>(out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] == 0;
    return OkStatus();
  }
};

// IsNaN (opset 9/13) and IsInf (opset 10): float input, bool output. IsInf's attributes
// detect_negative and detect_positive (default 1) choose which infinities count.
struct IsInfAttrs {
  bool negative = true, positive = true;
};

StatusOr<IsInfAttrs> IsInfAttrsOf(const Attributes& attrs) {
  IsInfAttrs a;
  for (auto [name, flag] : {std::pair{"detect_negative", &a.negative}, std::pair{"detect_positive", &a.positive}}) {
    StatusOr<int64_t> v = attrs.Int(name, 1);
    if (!v.ok()) return OpError("IsInf", v.status().message());
    *flag = *v != 0;
  }
  return a;
}

OpDef ClassifyDef(std::string name, int since) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.traits = ElementwiseTraits();
  def.infer = [name](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.size() != 1) return OpError(name, "expects 1 input");
    if (!IsFloatType(in[0].dtype)) return OpError(name, "unsupported dtype " + DTypeStr(in[0].dtype) + " (float types only)");
    if (name == "IsInf") REMEX_RETURN_IF_ERROR(IsInfAttrsOf(attrs).status());
    return std::vector<TensorInfo>{{DType::kBool, in[0].shape}};
  };
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kBool}; };
  return def;
}

// IsNaN, or IsInf with `inf`.
class ClassifyKernel final : public ValidatedKernel {
 public:
  // IsNaN has no attributes; IsInf's are parsed here.
  static StatusOr<std::unique_ptr<ClassifyKernel>> Create(const OpDef& def, const Attributes& attrs) {
    const bool inf = def.name == "IsInf";
    IsInfAttrs parsed;
    if (inf) {
      REMEX_ASSIGN_OR_RETURN(parsed, IsInfAttrsOf(attrs));
    }
    return std::make_unique<ClassifyKernel>(def, attrs, inf, parsed);
  }
  ClassifyKernel(const OpDef& def, const Attributes& attrs, bool inf, IsInfAttrs parsed)
      : ValidatedKernel(def, attrs), inf_(inf), attrs_(parsed) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t n = *NumElements(in[0].shape);
      const T* x = DataAs<const T>(in[0]);
      bool* y = DataAs<bool>(out[0]);
      for (int64_t i = 0; i < n; ++i) {
        const auto v = Load(x[i]);
        y[i] = inf_ ? scalar::IsInf()(v, attrs_.negative, attrs_.positive) : scalar::IsNaN()(v);
      }
      return OkStatus();
    });
  }

 private:
  const bool inf_;
  const IsInfAttrs attrs_;
};

// `check_attrs`, when given, checks the op's other attributes (Gelu's approximate).
OpDef UnaryDef(std::string name, int since, TypeClass types, OpTraits traits,
               Status (*check_attrs)(const Attributes&) = nullptr) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.traits = std::move(traits);
  def.infer = [name, types, params = def.traits.params, check_attrs](
                  const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.size() != 1) return OpError(name, "expects 1 input");
    if (check_attrs) {
      Status st = check_attrs(attrs);
      if (!st.ok()) return Status(st.code(), name + ": " + st.message());
    }
    if (!params.empty()) {
      StatusOr<UnaryParams> p = ParseUnaryParams(params, attrs);
      if (!p.ok()) return OpError(name, p.status().message());
    }
    const DType dt = in[0].dtype;
    if (!AcceptsType(types, dt)) {
      return OpError(name, "unsupported dtype " + DTypeStr(dt) + std::string(TypeClassName(types)));
    }
    return std::vector<TensorInfo>{{dt, in[0].shape}};
  };
  return def;
}

// Registers UnaryKernel<F, kNumeric> for the entry `def` names (UnaryKernel::Create
// refuses attribute parameters of the wrong kind).
template <typename F, bool kNumeric = false>
Status AddUnaryKernel(KernelRegistry& registry, const OpDef& def) {
  return AddCpuKernel<UnaryKernel<F, kNumeric>>(registry, def.name, def.since_version);
}

// A unary op: its dtypes, FusedElementwise opcode, whether an epilogue may apply it,
// its attribute parameters with their ONNX defaults, and its CPU kernel (the
// scalar_ops.h functor; integer dtypes too where `types` takes them).
struct UnaryOp {
  const char* name;
  int since;  // OpDef::since_version.
  TypeClass types;
  std::optional<FusedOpcode> opcode;  // nullopt: not fused by the compiler.
  bool epilogue;
  std::vector<ScalarParam> params;
  Status (*add_kernel)(KernelRegistry&, const OpDef&);
  Status (*check_attrs)(const Attributes&) = nullptr;  // UnaryDef's.
};

// Gelu-20's approximate: "none" (the default; erf) is computed, "tanh" is not
// (UNIMPLEMENTED), anything else is INVALID_ARGUMENT.
Status CheckGeluApproximate(const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(std::string approximate, attrs.String("approximate", "none"));
  if (approximate == "none") return OkStatus();
  if (approximate == "tanh") return Unimplemented("approximate 'tanh' is not supported (only 'none', erf)");
  return InvalidArgument("approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

const std::vector<UnaryOp>& UnaryOps() {
  static const std::vector<UnaryOp> ops = {
      {"Relu", 6, TypeClass::kNumeric, FusedOpcode::kRelu, true, {},
       &AddUnaryKernel<scalar::Relu, true>},
      {"LeakyRelu", 6, TypeClass::kFloat, FusedOpcode::kLeakyRelu, true, {{"alpha", -1, 0.01f}},
       &AddUnaryKernel<scalar::LeakyRelu>},
      {"HardSigmoid", 6, TypeClass::kFloat, FusedOpcode::kHardSigmoid, true,
       {{"alpha", -1, 0.2f}, {"beta", -1, 0.5f}},
       &AddUnaryKernel<scalar::HardSigmoid>},
      {"HardSwish", 14, TypeClass::kFloat, FusedOpcode::kHardSwish, true, {},
       &AddUnaryKernel<scalar::HardSwish>},
      {"Sigmoid", 6, TypeClass::kFloat, FusedOpcode::kSigmoid, true, {},
       &AddUnaryKernel<scalar::Sigmoid>},
      // Swish-24 (x * sigmoid(alpha * x)): the compiler also writes it for the SiLU that
      // exporters decompose into Sigmoid and Mul (passes/activation_patterns.h).
      {"Swish", 24, TypeClass::kFloat, FusedOpcode::kSwish, true, {{"alpha", -1, 1.0f}},
       &AddUnaryKernel<scalar::Swish>},
      // Gelu-20 (x * (1 + erf(x / sqrt(2))) / 2): the compiler also writes it for the GELU
      // that exporters decompose into Div, Erf, Add and Mul (passes/activation_patterns.h).
      {"Gelu", 20, TypeClass::kFloat, FusedOpcode::kGelu, true, {}, &AddUnaryKernel<scalar::Gelu>,
       &CheckGeluApproximate},
      {"Tanh", 6, TypeClass::kFloat, FusedOpcode::kTanh, true, {},
       &AddUnaryKernel<scalar::Tanh>},
      {"Exp", 6, TypeClass::kFloat, FusedOpcode::kExp, false, {},
       &AddUnaryKernel<scalar::Exp>},
      {"Log", 6, TypeClass::kFloat, FusedOpcode::kLog, false, {},
       &AddUnaryKernel<scalar::Log>},
      {"Erf", 9, TypeClass::kFloat, FusedOpcode::kErf, false, {},
       &AddUnaryKernel<scalar::Erf>},
      {"Sqrt", 6, TypeClass::kFloat, FusedOpcode::kSqrt, false, {},
       &AddUnaryKernel<scalar::Sqrt>},
      {"Neg", 6, TypeClass::kSigned, FusedOpcode::kNeg, false, {},
       &AddUnaryKernel<NumericNeg, true>},
      {"Abs", 6, TypeClass::kNumeric, FusedOpcode::kAbs, false, {},
       &AddUnaryKernel<NumericAbs, true>},
      {"Reciprocal", 6, TypeClass::kFloat, FusedOpcode::kReciprocal, false, {},
       &AddUnaryKernel<scalar::Reciprocal>},
      {"Sin", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Sin>},
      {"Cos", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Cos>},
      {"Tan", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Tan>},
      {"Asin", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Asin>},
      {"Acos", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Acos>},
      {"Atan", 7, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Atan>},
      {"Sinh", 9, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Sinh>},
      {"Cosh", 9, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Cosh>},
      {"Asinh", 9, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Asinh>},
      {"Acosh", 9, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Acosh>},
      {"Atanh", 9, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Atanh>},
      {"Ceil", 6, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Ceil>},
      {"Floor", 6, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Floor>},
      {"Round", 11, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Round>},
      {"Sign", 9, TypeClass::kNumeric, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Sign, true>},
      {"Softplus", 1, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Softplus>},
      {"Softsign", 1, TypeClass::kFloat, std::nullopt, false, {},
       &AddUnaryKernel<scalar::Softsign>},
      {"Elu", 6, TypeClass::kFloat, std::nullopt, false, {{"alpha", -1, 1.0f}},
       &AddUnaryKernel<scalar::Elu>},
      {"Celu", 12, TypeClass::kFloat, std::nullopt, false, {{"alpha", -1, 1.0f}},
       &AddUnaryKernel<scalar::Celu>},
      {"Selu", 6, TypeClass::kFloat, std::nullopt, false,
       {{"alpha", -1, 1.67326319217681884765625f}, {"gamma", -1, 1.05070102214813232421875f}},
       &AddUnaryKernel<scalar::Selu>},
      {"ThresholdedRelu", 10, TypeClass::kFloat, std::nullopt, false, {{"alpha", -1, 1.0f}},
       &AddUnaryKernel<scalar::ThresholdedRelu>},
      {"Shrink", 9, TypeClass::kFloat, std::nullopt, false, {{"bias", -1, 0.0f}, {"lambd", -1, 0.5f}},
       &AddUnaryKernel<scalar::Shrink>},
  };
  return ops;
}

OpDef UnaryOpDef(const UnaryOp& u) {
  OpTraits traits = ElementwiseTraits(u.opcode, u.params);
  traits.epilogue_activation = u.epilogue;
  return UnaryDef(u.name, u.since, u.types, std::move(traits), u.check_attrs);
}


// ---------------------------------------------------------------------------
// Clip: inputs x, optional min, optional max (scalars of x's dtype).

StatusOr<std::vector<TensorInfo>> InferClip(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError("Clip", "expects an input");
  const DType dt = in[0].dtype;
  if (!IsNumericType(dt)) {
    return OpError("Clip", "unsupported dtype " + DTypeStr(dt));
  }
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) continue;
    const char* what = i == 1 ? "min" : "max";
    if (in[i].dtype != dt) {
      return OpError(
          "Clip", std::string(what) + " has dtype " + DTypeStr(in[i].dtype) + ", input has " + DTypeStr(dt));
    }
    if (in[i].shape.size() > 1 || NumElements(in[i].shape).value_or(0) != 1) {
      return OpError("Clip",
                     std::string(what) + " must be a scalar, got shape " + ShapeToString(in[i].shape));
    }
  }
  return std::vector<TensorInfo>{{dt, in[0].shape}};
}

class ClipKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      C lo, hi;
      if constexpr (std::is_floating_point_v<C>) {
        lo = -std::numeric_limits<C>::infinity();
        hi = std::numeric_limits<C>::infinity();
      } else {
        lo = std::numeric_limits<C>::lowest();
        hi = std::numeric_limits<C>::max();
      }
      if (in.size() > 1 && in[1].present()) lo = Load(*DataAs<const T>(in[1]));
      if (in.size() > 2 && in[2].present()) hi = Load(*DataAs<const T>(in[2]));
      MapUnary<T>(in[0], out[0], [lo, hi](C v) { return scalar::Clip()(v, lo, hi); });
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// Dropout. Two entries: Dropout-7 (opsets 7-9), whose mask has data's dtype, and
// Dropout-10+, whose mask is bool. Inputs (Dropout-12+): data, optional ratio (float
// scalar, default 0.5), optional training_mode (bool scalar, default false);
// Dropout-7/10 take ratio as an attribute and run inference only. ratio and
// training_mode are read on the host (ShapeDep::kData). At inference, or in training
// mode with ratio 0, the output is the data and the mask all true (ones). In training
// mode with ratio in (0, 1), element i is kept (mask true) when the draw of
// kernels/ops/elementwise/dropout_mask.h keeps it: output = keep ? data * 1 / (1 - ratio) : 0, the
// product in float (double for float64), as ONNX Runtime computes it.

// The mask's dtype for data of dtype `dt`: T for Dropout-7, bool from Dropout-10.
DType DropoutMaskType(bool mask_like_data, DType dt) { return mask_like_data ? dt : DType::kBool; }

StatusOr<std::vector<TensorInfo>> InferDropout(bool mask_like_data, const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.empty() || in.size() > 3) return OpError("Dropout", "expects 1 to 3 inputs");
  StatusOr<float> ratio_attr = attrs.Float("ratio", 0.5f);
  if (!ratio_attr.ok()) return OpError("Dropout", ratio_attr.status().message());
  if (attrs.Has("seed")) {
    StatusOr<int64_t> seed = attrs.Int("seed");
    if (!seed.ok()) return OpError("Dropout", seed.status().message());
  }
  const DType dt = in[0].dtype;
  if (DTypeSize(dt) == 0) return OpError("Dropout", "unsupported dtype " + DTypeStr(dt));
  REMEX_RETURN_IF_ERROR(DropoutTrainingRatio(in).status());
  return std::vector<TensorInfo>{{dt, in[0].shape}, {DropoutMaskType(mask_like_data, dt), in[0].shape}};
}

class DropoutKernel final : public ValidatedKernel {
 public:
  DropoutKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs),
        seeds_(DropoutSeedOf(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::optional<double> ratio, DropoutTrainingRatio(ToShapeArgs(in)));
    if (ratio) return RunTraining(*ratio, in, out);
    const size_t bytes = static_cast<size_t>(*NumElements(in[0].shape)) * DTypeSize(in[0].dtype);
    if (bytes > 0 && out[0].data != in[0].data) std::memmove(out[0].data, in[0].data, bytes);
    if (out.size() > 1) {
      return DispatchAllTypes(op(), out[1].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        const int64_t n = *NumElements(out[1].shape);
        T* m = DataAs<T>(out[1]);
        const T one = Store<T>(ComputeType<T>(1));
        for (int64_t i = 0; i < n; ++i) m[i] = one;
        return OkStatus();
      });
    }
    return OkStatus();
  }

 private:
  // Training mode (Dropout-12+, so the mask is bool): the mask is drawn straight into
  // the mask output when there is one.
  Status RunTraining(double ratio, std::span<const TensorRef> in, std::span<const TensorRef> out) {
    const int64_t n = *NumElements(in[0].shape);
    std::vector<uint8_t> scratch;
    uint8_t* keep = nullptr;
    if (out.size() > 1) {
      keep = DataAs<uint8_t>(out[1]);
    } else {
      scratch.resize(static_cast<size_t>(n));
      keep = scratch.data();
    }
    DrawDropoutMask(seeds_.Next(), ratio, keep, n);
    const double scale = 1.0 / (1.0 - ratio);
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      const auto s = static_cast<ComputeType<T>>(scale);
      for (int64_t i = 0; i < n; ++i) y[i] = keep[i] ? Store<T>(Load(x[i]) * s) : Store<T>(ComputeType<T>(0));
      return OkStatus();
    });
  }

  DropoutSeeds seeds_;
};

// Dropout-7 (opsets 7-9) or Dropout-10+ (`since` 10).
OpDef DropoutDef(int since) {
  const bool mask_like_data = since < 10;
  OpDef def;
  def.name = "Dropout";
  def.since_version = since;
  if (mask_like_data) def.end_version = 9;
  def.min_inputs = 1;
  // Dropout-7 takes data alone (its mask, of data's dtype, is never a training mask);
  // ratio and training_mode are inputs from Dropout-12, served by the 10+ entry.
  def.max_inputs = mask_like_data ? 1 : 3;
  def.max_outputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kData};
  def.infer = [mask_like_data](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferDropout(mask_like_data, attrs, in);
  };
  def.output_dtypes = [mask_like_data](const Attributes&, std::span<const DType> in) {
    const DType dt = in.empty() ? DType::kUndefined : in[0];
    return std::vector<DType>{dt, DropoutMaskType(mask_like_data, dt)};  // output, mask
  };
  return def;
}

}  // namespace

Status AddUnaryOpDefs(KernelRegistry& registry) {
  for (const UnaryOp& u : UnaryOps()) REMEX_RETURN_IF_ERROR(registry.AddOp(UnaryOpDef(u)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(ClassifyDef("IsNaN", 9)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(ClassifyDef("IsInf", 10)));
  OpDef not_def = UnaryDef("Not", 1, TypeClass::kBool, ElementwiseTraits());
  not_def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kBool}; };
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(not_def)));
  OpDef clip;
  clip.name = "Clip";
  // Clip-6's min/max attributes reach the registry as Clip-11's inputs: the ONNX
  // frontend rewrites the older form and binds the node to this entry.
  clip.since_version = 11;
  clip.min_inputs = 1;
  clip.max_inputs = 3;
  clip.infer = InferClip;
  // min and max: one-element constants fuse as immediates, absent ones are unbounded.
  const float inf = std::numeric_limits<float>::infinity();
  clip.traits = ElementwiseTraits(FusedOpcode::kClip, {{"", 1, -inf}, {"", 2, inf}});
  clip.traits.epilogue_activation = true;
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(clip)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(DropoutDef(7)));
  return registry.AddOp(DropoutDef(10));
}

Status AddUnaryCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<NotKernel>(registry, "Not"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ClassifyKernel>(registry, "IsNaN"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ClassifyKernel>(registry, "IsInf"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ClipKernel>(registry, "Clip"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<DropoutKernel>(registry, "Dropout", 7));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<DropoutKernel>(registry, "Dropout", 10));
  for (const UnaryOp& u : UnaryOps()) {
    const OpDef* def = registry.FindOp(u.name);
    if (!def) return FailedPrecondition("RegisterCpuKernels: op " + std::string(u.name) + " has no OpDef");
    REMEX_RETURN_IF_ERROR(u.add_kernel(registry, *def));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
