// Elementwise ops with broadcasting (ONNX semantics, opsets 7-17).
//
// Binary with numpy broadcasting: Add, Sub, Mul, Div, Pow (base and exponent dtypes may
// differ), Mod (fmod), Equal, Less, Greater, LessOrEqual, GreaterOrEqual (bool output),
// And, Or, Xor (bool), PRelu (slope broadcast
// to X only). Variadic with broadcasting: Min, Max, Sum, Mean. Ternary: Where. The unary ops,
// Clip and Dropout are in unary.cc; the broadcast iteration in elementwise_common.h.
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
#include <string>

#include "kernels/float32_copies.h"
#include "kernels/internal.h"

#include "kernels/ops/elementwise/elementwise_common.h"

namespace remex::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Math helpers.


// Float to integer: NaN -> 0, out of range saturates.
template <typename I>
inline I SaturatingCast(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) {
    return std::numeric_limits<I>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Integer power, wrapping on overflow. A negative exponent gives the truncated
// quotient: 1 for base 1, +-1 for base -1, 0 otherwise (0 for base 0 too).
template <typename I>
inline I IntPow(I base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<I>) {
      if (base == -1) return (e & 1) ? I(-1) : I(1);
    }
    return 0;
  }
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(base);
  for (uint64_t u = static_cast<uint64_t>(e); u != 0; u >>= 1) {
    if (u & 1) result *= b;
    b *= b;
  }
  return static_cast<I>(result);
}


// ---------------------------------------------------------------------------
// Binary arithmetic with broadcasting: Add, Sub, Mul, Div.

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

// Wrapping integer arithmetic (no signed-overflow UB); float arithmetic as IEEE.
template <BinaryKind kKind, typename C>
inline C Apply(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (kKind == BinaryKind::kAdd) return scalar::Add()(a, b);
    if constexpr (kKind == BinaryKind::kSub) return scalar::Sub()(a, b);
    if constexpr (kKind == BinaryKind::kMul) return scalar::Mul()(a, b);
    if constexpr (kKind == BinaryKind::kDiv) return scalar::Div()(a, b);
  } else {
    const uint64_t ua = static_cast<uint64_t>(a);
    const uint64_t ub = static_cast<uint64_t>(b);
    if constexpr (kKind == BinaryKind::kAdd) return static_cast<C>(ua + ub);
    if constexpr (kKind == BinaryKind::kSub) return static_cast<C>(ua - ub);
    if constexpr (kKind == BinaryKind::kMul) return static_cast<C>(ua * ub);
    if constexpr (kKind == BinaryKind::kDiv) {
      // The caller has rejected b == 0. Truncates toward zero like C; MIN / -1 wraps.
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return WrapNeg(a);
      }
      return static_cast<C>(a / b);
    }
  }
}

template <BinaryKind kKind, typename T>
inline T ApplyT(T a, T b) {
  return Store<T>(Apply<kKind, ComputeType<T>>(Load(a), Load(b)));
}

StatusOr<std::vector<TensorInfo>> InferBinary(std::string_view op, const Attributes&,
                                              std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError(op, "expects 2 inputs");
  if (in[0].dtype != in[1].dtype) {
    return OpError(op, "input dtypes differ: " + DTypeStr(in[0].dtype) + " and " + DTypeStr(in[1].dtype));
  }
  if (!IsNumericType(in[0].dtype)) {
    return OpError(op, "unsupported dtype " + DTypeStr(in[0].dtype));
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op, in[0].shape, in[1].shape));
  return std::vector<TensorInfo>{{in[0].dtype, std::move(out)}};
}

template <BinaryKind kKind>
class BinaryKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = *NumElements(out[0].shape);
    if (n == 0) return OkStatus();
    if (in[0].dtype == DType::kFloat16) {
      // float16 computes in float32 and rounds once (ApplyT): the same values from
      // float32 copies, whose loops vectorise where float16's convert every element.
      return RunAsFloat32(in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); });
    }
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* a = DataAs<const T>(in[0]);
      const T* b = DataAs<const T>(in[1]);
      if constexpr (kKind == BinaryKind::kDiv && std::is_integral_v<T>) {
        const int64_t nb = *NumElements(in[1].shape);
        for (int64_t i = 0; i < nb; ++i) {
          if (b[i] == 0) return OpError(op(), "integer division by zero");
        }
      }
      BroadcastBinary(a, in[0].shape, b, in[1].shape, DataAs<T>(out[0]), out[0].shape,
                      [](T x, T y) { return ApplyT<kKind>(x, y); });
      return OkStatus();
    });
  }
};


// `since`: the ONNX version of the op's definition in effect at opset 7 (its first
// entry; see OpDef::since_version), here and in the other *Def helpers.
OpDef BinaryDef(std::string name, int since, FusedOpcode opcode) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.min_inputs = def.max_inputs = 2;
  def.traits = ElementwiseTraits(opcode);
  def.infer = [name](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferBinary(name, attrs, in);
  };
  return def;
}

// ---------------------------------------------------------------------------
// Pow: base X (int32, int64, float16/32/64), exponent Y of any numeric dtype (Pow-12+);
// the output has X's dtype. Float bases compute in their compute type (float for
// float16); integer bases use exact integer powers for integer exponents and
// double pow, truncated and saturated, for float exponents.

bool IsPowBaseType(DType dt) { return dt == DType::kInt32 || dt == DType::kInt64 || IsFloatType(dt); }

StatusOr<std::vector<TensorInfo>> InferPow(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError("Pow", "expects 2 inputs");
  if (!IsPowBaseType(in[0].dtype)) {
    return OpError(
        "Pow", "unsupported base dtype " + DTypeStr(in[0].dtype) + " (int32, int64 and float types only)");
  }
  if (!IsNumericType(in[1].dtype)) {
    return OpError("Pow", "unsupported exponent dtype " + DTypeStr(in[1].dtype));
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes("Pow", in[0].shape, in[1].shape));
  return std::vector<TensorInfo>{{in[0].dtype, std::move(out)}};
}

// A tensor's values converted to E (host memory).
template <typename E>
StatusOr<std::vector<E>> ConvertValues(std::string_view op, const TensorRef& t) {
  const int64_t n = *NumElements(t.shape);
  std::vector<E> v(static_cast<size_t>(n));
  REMEX_RETURN_IF_ERROR(DispatchNumeric(op, t.dtype, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    const S* src = DataAs<const S>(t);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<E>(Load(src[i]));
    return OkStatus();
  }));
  return v;
}

class PowKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    const bool int_exponent = !IsFloatType(in[1].dtype);
    return DispatchAllTypes(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half>) {
        return RunFloat<T>(in, out[0]);
      } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
        if (int_exponent) return RunInt<T, int64_t>(in, out[0]);
        return RunInt<T, double>(in, out[0]);
      } else {
        return OpError(op(), "unsupported base dtype " + DTypeStr(in[0].dtype));
      }
    });
  }

 private:
  template <typename T>
  Status RunFloat(std::span<const TensorRef> in, const TensorRef& out) {
    using C = ComputeType<T>;
    const T* x = DataAs<const T>(in[0]);
    T* y = DataAs<T>(out);
    if (*NumElements(in[1].shape) == 1) {
      // A scalar exponent (one element: same flat order as X).
      REMEX_ASSIGN_OR_RETURN(std::vector<C> e, ConvertValues<C>(op(), in[1]));
      const C ev = e[0];
      const int64_t n = *NumElements(out.shape);
      if (ev == C(2)) {
        for (int64_t i = 0; i < n; ++i) {
          const C v = Load(x[i]);
          y[i] = Store<T>(v * v);
        }
      } else if (ev == C(1)) {
        if (y != x) std::memmove(y, x, static_cast<size_t>(n) * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) y[i] = Store<T>(std::pow(Load(x[i]), ev));
      }
      return OkStatus();
    }
    // Per element, the scalar exponent's shortcuts (scalar::Pow).
    auto f = [](T a, C b) { return Store<T>(scalar::Pow()(Load(a), b)); };
    if constexpr (!std::is_same_v<T, Half>) {
      if (in[1].dtype == in[0].dtype) {
        BroadcastBinary(x, in[0].shape, DataAs<const T>(in[1]), in[1].shape, y, out.shape, f);
        return OkStatus();
      }
    }
    REMEX_ASSIGN_OR_RETURN(std::vector<C> e, ConvertValues<C>(op(), in[1]));
    BroadcastBinary(x, in[0].shape, e.data(), in[1].shape, y, out.shape, f);
    return OkStatus();
  }

  // E: int64_t for integer exponents, double for float ones.
  template <typename T, typename E>
  Status RunInt(std::span<const TensorRef> in, const TensorRef& out) {
    REMEX_ASSIGN_OR_RETURN(std::vector<E> e, ConvertValues<E>(op(), in[1]));
    BroadcastBinary(DataAs<const T>(in[0]), in[0].shape, e.data(), in[1].shape, DataAs<T>(out), out.shape,
                    [](T a, E b) -> T {
                      if constexpr (std::is_same_v<E, int64_t>) {
                        return IntPow<T>(a, b);
                      } else {
                        return SaturatingCast<T>(std::pow(static_cast<double>(a), b));
                      }
                    });
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) and logical ops (And,
// Or, Xor): bool outputs.

enum class CompareKind { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };

constexpr bool IsLogical(CompareKind k) {
  return k == CompareKind::kAnd || k == CompareKind::kOr || k == CompareKind::kXor;
}

StatusOr<std::vector<TensorInfo>> InferCompare(std::string_view op, CompareKind kind,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError(op, "expects 2 inputs");
  if (in[0].dtype != in[1].dtype) {
    return OpError(op, "input dtypes differ: " + DTypeStr(in[0].dtype) + " and " + DTypeStr(in[1].dtype));
  }
  const DType dt = in[0].dtype;
  const bool ok = IsLogical(kind) ? dt == DType::kBool
                  : kind == CompareKind::kEqual ? dt == DType::kBool || IsNumericType(dt)
                                                : IsNumericType(dt);
  if (!ok) return OpError(op, "unsupported dtype " + DTypeStr(dt));
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op, in[0].shape, in[1].shape));
  return std::vector<TensorInfo>{{DType::kBool, std::move(out)}};
}

template <CompareKind kKind>
class CompareKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    bool* y = DataAs<bool>(out[0]);
    if constexpr (IsLogical(kKind)) {
      // Bool bytes are read as bytes: any nonzero byte is true.
      BroadcastBinary(DataAs<const uint8_t>(in[0]), in[0].shape, DataAs<const uint8_t>(in[1]), in[1].shape, y,
                      out[0].shape, [](uint8_t x, uint8_t z) -> bool {
                        if constexpr (kKind == CompareKind::kAnd) return (x != 0) & (z != 0);
                        if constexpr (kKind == CompareKind::kOr) return (x != 0) | (z != 0);
                        return (x != 0) != (z != 0);
                      });
      return OkStatus();
    } else {
      return DispatchAllTypes(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {  // Equal only (the shape function checks).
          BroadcastBinary(DataAs<const uint8_t>(in[0]), in[0].shape, DataAs<const uint8_t>(in[1]),
                          in[1].shape, y, out[0].shape,
                          [](uint8_t x, uint8_t z) -> bool { return (x != 0) == (z != 0); });
          return OkStatus();
        }
        BroadcastBinary(DataAs<const T>(in[0]), in[0].shape, DataAs<const T>(in[1]), in[1].shape, y,
                        out[0].shape, [](T x, T z) -> bool {
                          if constexpr (kKind == CompareKind::kEqual) return Load(x) == Load(z);
                          if constexpr (kKind == CompareKind::kLess) return Load(x) < Load(z);
                          if constexpr (kKind == CompareKind::kLessOrEqual) return Load(x) <= Load(z);
                          if constexpr (kKind == CompareKind::kGreaterOrEqual) return Load(x) >= Load(z);
                          return Load(x) > Load(z);
                        });
        return OkStatus();
      });
    }
  }
};

OpDef CompareDef(std::string name, int since, CompareKind kind) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.min_inputs = def.max_inputs = 2;
  def.infer = [name, kind](const Attributes&, std::span<const ShapeFnArg> in) {
    return InferCompare(name, kind, in);
  };
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kBool}; };
  def.traits = ElementwiseTraits();
  return def;
}

// ---------------------------------------------------------------------------
// Mod (opsets 10, 13): numpy broadcasting, one numeric dtype. fmod = 0 (the default):
// integers only, the remainder with the divisor's sign; fmod = 1: the dividend's sign
// (C's fmod), required for floats. An integer divisor of 0 is INVALID_ARGUMENT
// ("division by zero").

StatusOr<bool> ModFmod(const Attributes& attrs) {
  StatusOr<int64_t> fmod = attrs.Int("fmod", 0);
  if (!fmod.ok()) return OpError("Mod", fmod.status().message());
  if (*fmod != 0 && *fmod != 1) return OpError("Mod", "fmod must be 0 or 1, got " + std::to_string(*fmod));
  return *fmod == 1;
}

StatusOr<std::vector<TensorInfo>> InferMod(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Mod";
  if (in.size() != 2) return OpError(op, "expects 2 inputs");
  REMEX_ASSIGN_OR_RETURN(bool fmod, ModFmod(attrs));
  const DType dt = in[0].dtype;
  if (in[1].dtype != dt) return OpError(op, "input dtypes differ: " + DTypeStr(dt) + " and " + DTypeStr(in[1].dtype));
  if (!IsNumericType(dt)) return OpError(op, "unsupported dtype " + DTypeStr(dt));
  if (IsFloatType(dt) && !fmod) return OpError(op, "fmod must be 1 for " + DTypeStr(dt) + " inputs");
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op, in[0].shape, in[1].shape));
  return std::vector<TensorInfo>{{dt, std::move(out)}};
}

class ModKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ModKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(bool parsed, ModFmod(attrs));
    return std::make_unique<ModKernel>(def, attrs, std::move(parsed));
  }
  ModKernel(const OpDef& def, const Attributes& attrs, bool parsed)
      : ValidatedKernel(def, attrs), fmod_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* b = DataAs<const T>(in[1]);
      if constexpr (std::is_integral_v<T>) {
        const int64_t nb = *NumElements(in[1].shape);
        for (int64_t i = 0; i < nb; ++i) {
          if (b[i] == 0) return OpError(op(), "division by zero (B[" + std::to_string(i) + "] is 0)");
        }
      }
      const bool fmod = fmod_;
      BroadcastBinary(DataAs<const T>(in[0]), in[0].shape, b, in[1].shape, DataAs<T>(out[0]), out[0].shape,
                      [fmod](T x, T y) -> T {
                        const C a = Load(x), d = Load(y);
                        return Store<T>(fmod ? scalar::Fmod()(a, d) : scalar::Mod()(a, d));
                      });
      return OkStatus();
    });
  }

 private:
  const bool fmod_;
};

// ---------------------------------------------------------------------------
// PRelu: y = x < 0 ? slope * x : x, slope broadcast unidirectionally to X.

StatusOr<std::vector<TensorInfo>> InferPRelu(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError("PRelu", "expects 2 inputs");
  if (in[0].dtype != in[1].dtype) {
    return OpError("PRelu", "slope has dtype " + DTypeStr(in[1].dtype) + ", X has " + DTypeStr(in[0].dtype));
  }
  if (!IsNumericType(in[0].dtype)) {
    return OpError("PRelu", "unsupported dtype " + DTypeStr(in[0].dtype));
  }
  StatusOr<Shape> b = BroadcastShapes("PRelu", in[0].shape, in[1].shape);
  if (!b.ok() || *b != in[0].shape) {
    return OpError("PRelu", "slope shape " + ShapeToString(in[1].shape) +
                                " does not broadcast to X's shape " + ShapeToString(in[0].shape));
  }
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

class PReluKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      BroadcastBinary(DataAs<const T>(in[0]), in[0].shape, DataAs<const T>(in[1]), in[1].shape,
                      DataAs<T>(out[0]), out[0].shape, [](T x, T s) -> T {
                        const C v = Load(x);
                        if constexpr (std::is_unsigned_v<C>) {
                          return x;
                        } else {
                          return v < C(0) ? Store<T>(Apply<BinaryKind::kMul, C>(Load(s), v)) : x;
                        }
                      });
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// Min, Max, Sum, Mean: variadic, numpy broadcasting over all inputs. Min and Max take
// every numeric dtype (a NaN operand gives NaN), Sum and Mean (opsets 6-13; the
// definitions before 8 take equal shapes, a case of broadcasting) float types; Mean is
// the sum divided by the input count.

StatusOr<std::vector<TensorInfo>> InferVariadic(std::string_view op, bool float_only,
                                                std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError(op, "expects at least 1 input");
  REMEX_RETURN_IF_ERROR(CheckAllPresent(op, in));
  REMEX_RETURN_IF_ERROR(CheckSameDTypes(op, in));
  if (float_only ? !IsFloatType(in[0].dtype) : !IsNumericType(in[0].dtype)) {
    return OpError(op, "unsupported dtype " + DTypeStr(in[0].dtype));
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return std::vector<TensorInfo>{{in[0].dtype, std::move(out)}};
}

// Folds the inputs pairwise with the commutative scalar_ops.h functor F (Max, Min,
// Add); kMean divides the sum by the input count.
template <typename F, bool kMean = false>
class VariadicKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      auto pick = [](T a, T b) -> T { return Store<T>(F()(Load(a), Load(b))); };
      T* y = DataAs<T>(out[0]);
      // The operation is commutative: start from an input that shares the output's
      // buffer, if any, so that no input is overwritten before it is read.
      size_t first = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].data == out[0].data) first = i;
      }
      if (in.size() == 1) {
        if (y != in[0].data) {
          std::memmove(y, in[0].data, static_cast<size_t>(*NumElements(out[0].shape)) * sizeof(T));
        }
        return OkStatus();
      }
      bool started = false;
      for (size_t i = 0; i < in.size(); ++i) {
        if (i == first) continue;
        if (!started) {
          BroadcastBinary(DataAs<const T>(in[first]), in[first].shape, DataAs<const T>(in[i]), in[i].shape, y,
                          out[0].shape, pick);
          started = true;
        } else {
          BroadcastBinary(static_cast<const T*>(y), out[0].shape, DataAs<const T>(in[i]), in[i].shape, y,
                          out[0].shape, pick);
        }
      }
      return OkStatus();
    }));
    if constexpr (kMean) {
      return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        using C = ComputeType<T>;
        T* y = DataAs<T>(out[0]);
        const C count = static_cast<C>(in.size());
        const int64_t n = *NumElements(out[0].shape);
        for (int64_t i = 0; i < n; ++i) y[i] = Store<T>(Load(y[i]) / count);
        return OkStatus();
      });
    }
    return OkStatus();
  }
};

OpDef VariadicDef(std::string name, int since, std::optional<FusedOpcode> opcode, bool float_only = false) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.min_inputs = 1;
  def.max_inputs = -1;
  def.traits = ElementwiseTraits(opcode);
  def.infer = [name, float_only](const Attributes&, std::span<const ShapeFnArg> in) {
    return InferVariadic(name, float_only, in);
  };
  return def;
}

// ---------------------------------------------------------------------------
// Where(condition, X, Y): 3-way broadcast; the output has X's dtype.

StatusOr<std::vector<TensorInfo>> InferWhere(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 3) return OpError("Where", "expects 3 inputs");
  if (in[0].dtype != DType::kBool) {
    return OpError("Where", "condition has dtype " + DTypeStr(in[0].dtype) + ", expects bool");
  }
  if (in[1].dtype != in[2].dtype) {
    return OpError("Where",
                   "X and Y dtypes differ: " + DTypeStr(in[1].dtype) + " and " + DTypeStr(in[2].dtype));
  }
  if (DTypeSize(in[1].dtype) == 0) {
    return OpError("Where", "unsupported dtype " + DTypeStr(in[1].dtype));
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastAll("Where", in));
  return std::vector<TensorInfo>{{in[1].dtype, std::move(out)}};
}

template <typename U>
void WhereLoop(std::span<const TensorRef> in, const TensorRef& out) {
  const uint8_t* c = DataAs<const uint8_t>(in[0]);  // Any nonzero byte is true.
  const U* x = DataAs<const U>(in[1]);
  const U* z = DataAs<const U>(in[2]);
  U* y = DataAs<U>(out);
  const int64_t n = *NumElements(out.shape);
  if (*NumElements(in[0].shape) == n && *NumElements(in[1].shape) == n && *NumElements(in[2].shape) == n) {
    for (int64_t i = 0; i < n; ++i) y[i] = c[i] ? x[i] : z[i];
    return;
  }
  const BroadcastPlan<3> plan = MakePlan<3>({&in[0].shape, &in[1].shape, &in[2].shape}, out.shape);
  const int64_t sc = plan.strides[0].back();
  const int64_t sx = plan.strides[1].back();
  const int64_t sz = plan.strides[2].back();
  ForEachRow(plan, [&](const std::array<int64_t, 3>& off, int64_t o, int64_t inner) {
    const uint8_t* pc = c + off[0];
    const U* px = x + off[1];
    const U* pz = z + off[2];
    U* po = y + o;
    for (int64_t i = 0; i < inner; ++i) po[i] = pc[i * sc] ? px[i * sx] : pz[i * sz];
  });
}

class WhereKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    // Values are only copied: dispatch on the element size.
    switch (DTypeSize(in[1].dtype)) {
      case 1:
        WhereLoop<uint8_t>(in, out[0]);
        return OkStatus();
      case 2:
        WhereLoop<uint16_t>(in, out[0]);
        return OkStatus();
      case 4:
        WhereLoop<uint32_t>(in, out[0]);
        return OkStatus();
      case 8:
        WhereLoop<uint64_t>(in, out[0]);
        return OkStatus();
      default:
        break;
    }
    return Unimplemented("Where: unsupported dtype " + DTypeStr(in[1].dtype));
  }
};

}  // namespace

Status AddElementwiseOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(BinaryDef("Add", 7, FusedOpcode::kAdd)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(BinaryDef("Sub", 7, FusedOpcode::kSub)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(BinaryDef("Mul", 7, FusedOpcode::kMul)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(BinaryDef("Div", 7, FusedOpcode::kDiv)));
  OpDef pow;
  pow.name = "Pow";
  pow.since_version = 7;
  pow.min_inputs = pow.max_inputs = 2;
  pow.infer = InferPow;
  // The exponent fuses as an immediate when it is a one-element constant.
  pow.traits = ElementwiseTraits(FusedOpcode::kPow, {{"", 1, std::nullopt}});
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(pow)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("Equal", 7, CompareKind::kEqual)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("Less", 7, CompareKind::kLess)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("Greater", 7, CompareKind::kGreater)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("And", 7, CompareKind::kAnd)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("Or", 7, CompareKind::kOr)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("Xor", 7, CompareKind::kXor)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("LessOrEqual", 12, CompareKind::kLessOrEqual)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompareDef("GreaterOrEqual", 12, CompareKind::kGreaterOrEqual)));
  OpDef mod;
  mod.name = "Mod";
  mod.since_version = 10;
  mod.min_inputs = mod.max_inputs = 2;
  mod.infer = InferMod;
  mod.traits = ElementwiseTraits();
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(mod)));
  OpDef prelu;
  prelu.name = "PRelu";
  prelu.since_version = 7;
  prelu.min_inputs = prelu.max_inputs = 2;
  prelu.infer = InferPRelu;
  prelu.traits = ElementwiseTraits();
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(prelu)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Min", 6, FusedOpcode::kMin)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Max", 6, FusedOpcode::kMax)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Sum", 6, std::nullopt, /*float_only=*/true)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Mean", 6, std::nullopt, /*float_only=*/true)));
  OpDef where;
  where.name = "Where";
  where.since_version = 9;
  where.min_inputs = where.max_inputs = 3;
  where.infer = InferWhere;
  where.traits = ElementwiseTraits();
  where.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.size() > 1 ? in[1] : DType::kUndefined};
  };
  return registry.AddOp(std::move(where));
}

Status AddElementwiseCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BinaryKernel<BinaryKind::kAdd>>(registry, "Add"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BinaryKernel<BinaryKind::kSub>>(registry, "Sub"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BinaryKernel<BinaryKind::kMul>>(registry, "Mul"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BinaryKernel<BinaryKind::kDiv>>(registry, "Div"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<PowKernel>(registry, "Pow"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kEqual>>(registry, "Equal"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kLess>>(registry, "Less"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kGreater>>(registry, "Greater"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kAnd>>(registry, "And"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kOr>>(registry, "Or"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kXor>>(registry, "Xor"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CompareKernel<CompareKind::kLessOrEqual>>(registry, "LessOrEqual"));
  REMEX_RETURN_IF_ERROR(
      AddCpuKernel<CompareKernel<CompareKind::kGreaterOrEqual>>(registry, "GreaterOrEqual"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ModKernel>(registry, "Mod"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<PReluKernel>(registry, "PRelu"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<VariadicKernel<scalar::Min>>(registry, "Min"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<VariadicKernel<scalar::Max>>(registry, "Max"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<VariadicKernel<scalar::Add>>(registry, "Sum"));
  REMEX_RETURN_IF_ERROR((AddCpuKernel<VariadicKernel<scalar::Add, true>>(registry, "Mean")));
  return AddCpuKernel<WhereKernel>(registry, "Where");
}

}  // namespace remex::kernels::internal
