// Elementwise ops.
//
// Binary with numpy broadcasting: Add, Sub, Mul, Div, Pow (base and exponent dtypes may
// differ), Equal, Less, Greater (bool output), And, Or (bool), PRelu (slope broadcast
// to X only). Variadic with broadcasting: Min, Max. Ternary: Where.
// Unary: Relu, LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Tanh, Exp, Log, Erf, Sqrt,
// Neg, Abs, Reciprocal, Not, Clip. Dropout (inference: identity).
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

#include "kernels/internal.h"

namespace remex::kernels::internal {
namespace {

std::string DTypeStr(DType dt) { return std::string(DTypeName(dt)); }

// ---------------------------------------------------------------------------
// Broadcast iteration.

// Iteration plan over the numpy broadcast of N inputs to `out`: dims of extent 1 in
// the output dropped, adjacent dims with the same broadcast pattern merged. Strides are
// in elements, 0 where the input broadcasts. `dims` is never empty.
template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
};

// Every input's rank is at most out's, and each input dim is 1 or out's (the shape
// functions have checked this).
template <size_t N>
BroadcastPlan<N> MakePlan(const std::array<const Shape*, N>& in, const Shape& out) {
  static_assert(N <= 32);
  const size_t rank = out.size();
  std::vector<int64_t> dims;
  std::vector<uint32_t> pattern;  // Bit k: input k broadcasts along the dim.
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    uint32_t p = 0;
    for (size_t k = 0; k < N; ++k) {
      const Shape& s = *in[k];
      const size_t lead = rank - s.size();
      if ((i < lead ? 1 : s[i - lead]) == 1) p |= uint32_t{1} << k;
    }
    if (!dims.empty() && pattern.back() == p) {
      dims.back() *= out[i];
    } else {
      dims.push_back(out[i]);
      pattern.push_back(p);
    }
  }
  if (dims.empty()) {  // A single element.
    dims.push_back(1);
    pattern.push_back((uint32_t{1} << N) - 1);
  }
  BroadcastPlan<N> plan;
  plan.dims = std::move(dims);
  for (size_t k = 0; k < N; ++k) {
    std::vector<int64_t>& st = plan.strides[k];
    st.resize(plan.dims.size());
    int64_t s = 1;
    for (size_t j = plan.dims.size(); j-- > 0;) {
      const bool bcast = (pattern[j] >> k) & 1;
      st[j] = bcast ? 0 : s;
      if (!bcast) s *= plan.dims[j];
    }
  }
  return plan;
}

// Calls body(offsets, o, inner) for each row of the plan's innermost dim: outputs
// [o, o + inner), input k starting at element offsets[k] with stride strides[k].back().
template <size_t N, typename Body>
void ForEachRow(const BroadcastPlan<N>& plan, Body&& body) {
  const size_t r = plan.dims.size();
  const int64_t inner = plan.dims[r - 1];
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < r; ++k) rows *= plan.dims[k];
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  for (int64_t row = 0, o = 0; row < rows; ++row, o += inner) {
    body(off, o, inner);
    // Advance the outer index (dims 0..r-2).
    for (size_t k = r - 1; k-- > 0;) {
      for (size_t j = 0; j < N; ++j) off[j] += plan.strides[j][k];
      if (++idx[k] < plan.dims[k]) break;
      for (size_t j = 0; j < N; ++j) off[j] -= plan.strides[j][k] * plan.dims[k];
      idx[k] = 0;
    }
  }
}

// out = f(a, b) elementwise, a and b broadcast (numpy) to out_shape, which may be larger
// than their own broadcast (variadic ops). f takes and returns storage types. `out` may
// alias an input of out's element count (same index, read before written).
template <typename A, typename B, typename O, typename F>
void BroadcastBinary(const A* a, const Shape& a_shape, const B* b, const Shape& b_shape, O* out,
                     const Shape& out_shape, F f) {
  const int64_t n = *NumElements(out_shape);
  if (n == 0) return;
  const int64_t na = *NumElements(a_shape);
  const int64_t nb = *NumElements(b_shape);
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    return;
  }
  if (na == n && nb == 1) {
    const B bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
    return;
  }
  if (na == 1 && nb == n) {
    const A av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(av, b[i]);
    return;
  }
  const BroadcastPlan<2> plan = MakePlan<2>({&a_shape, &b_shape}, out_shape);
  const int64_t ia = plan.strides[0].back();
  const int64_t ib = plan.strides[1].back();
  ForEachRow(plan, [&](const std::array<int64_t, 2>& off, int64_t o, int64_t inner) {
    const A* pa = a + off[0];
    const B* pb = b + off[1];
    O* po = out + o;
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], pb[i]);
    } else if (ia == 1) {
      const B bv = *pb;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], bv);
    } else if (ib == 1) {
      const A av = *pa;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(av, pb[i]);
    } else {  // Both broadcast along the dim (a third input does not).
      const O v = f(*pa, *pb);
      for (int64_t i = 0; i < inner; ++i) po[i] = v;
    }
  });
}

// Shape of the numpy broadcast of every input (all present).
StatusOr<Shape> BroadcastAll(std::string_view op, std::span<const ShapeFnArg> in) {
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    REMEX_ASSIGN_OR_RETURN(out, BroadcastShapes(op, out, in[i].shape));
  }
  return out;
}

Status CheckAllPresent(std::string_view op, std::span<const ShapeFnArg> in) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) return OpError(op, "input " + std::to_string(i) + " is absent");
  }
  return OkStatus();
}

Status CheckSameDTypes(std::string_view op, std::span<const ShapeFnArg> in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return OpError(op, "input dtypes differ: " + DTypeStr(in[0].dtype) + " (input 0) and " +
                             DTypeStr(in[i].dtype) + " (input " + std::to_string(i) + ")");
    }
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------
// Math helpers.

// Two's-complement negation of an integer without signed-overflow UB.
template <typename C>
inline C WrapNeg(C v) {
  return static_cast<C>(uint64_t{0} - static_cast<uint64_t>(v));
}

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

// Traits of an elementwise op, FusedElementwise's `opcode` when fusable.
OpTraits ElementwiseTraits(std::optional<FusedOpcode> opcode = std::nullopt, std::vector<ScalarParam> params = {}) {
  OpTraits t;
  t.elementwise = true;
  t.layout_agnostic = true;
  t.fused_opcode = opcode;
  t.params = std::move(params);
  return t;
}

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
// Comparisons (Equal, Less, Greater) and logical ops (And, Or): bool outputs.

enum class CompareKind { kEqual, kLess, kGreater, kAnd, kOr };

StatusOr<std::vector<TensorInfo>> InferCompare(std::string_view op, CompareKind kind,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError(op, "expects 2 inputs");
  if (in[0].dtype != in[1].dtype) {
    return OpError(op, "input dtypes differ: " + DTypeStr(in[0].dtype) + " and " + DTypeStr(in[1].dtype));
  }
  const DType dt = in[0].dtype;
  const bool ok = kind == CompareKind::kAnd || kind == CompareKind::kOr ? dt == DType::kBool
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
    if constexpr (kKind == CompareKind::kAnd || kKind == CompareKind::kOr) {
      // Bool bytes are read as bytes: any nonzero byte is true.
      BroadcastBinary(DataAs<const uint8_t>(in[0]), in[0].shape, DataAs<const uint8_t>(in[1]), in[1].shape, y,
                      out[0].shape, [](uint8_t x, uint8_t z) -> bool {
                        return kKind == CompareKind::kAnd ? (x != 0) & (z != 0) : (x != 0) | (z != 0);
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
// Min, Max: variadic, numpy broadcasting over all inputs. A NaN operand gives NaN.

StatusOr<std::vector<TensorInfo>> InferVariadic(std::string_view op, std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError(op, "expects at least 1 input");
  REMEX_RETURN_IF_ERROR(CheckAllPresent(op, in));
  REMEX_RETURN_IF_ERROR(CheckSameDTypes(op, in));
  if (!IsNumericType(in[0].dtype)) {
    return OpError(op, "unsupported dtype " + DTypeStr(in[0].dtype));
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return std::vector<TensorInfo>{{in[0].dtype, std::move(out)}};
}

template <bool kMax>
class MinMaxKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      auto pick = [](T a, T b) -> T {
        if constexpr (kMax) {
          return Store<T>(scalar::Max()(Load(a), Load(b)));
        } else {
          return Store<T>(scalar::Min()(Load(a), Load(b)));
        }
      };
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
    });
  }
};

OpDef VariadicDef(std::string name, int since, FusedOpcode opcode) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.min_inputs = 1;
  def.max_inputs = -1;
  def.traits = ElementwiseTraits(opcode);
  def.infer = [name](const Attributes&, std::span<const ShapeFnArg> in) { return InferVariadic(name, in); };
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

// y = F(x, params...) with the op's attribute parameters (alpha, beta) as F takes
// them; F is a scalar_ops.h functor. Float dtypes, or every numeric one with kNumeric.
template <typename F, bool kNumeric>
class UnaryKernel final : public ValidatedKernel {
 public:
  UnaryKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), params_(*ParseUnaryParams(def.traits.params, attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    auto body = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const C alpha = static_cast<C>(params_.alpha);
      const C beta = static_cast<C>(params_.beta);
      MapUnary<T>(in[0], out[0], [alpha, beta](C v) {
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

OpDef UnaryDef(std::string name, int since, TypeClass types, OpTraits traits) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.traits = std::move(traits);
  def.infer = [name, types, params = def.traits.params](
                  const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.size() != 1) return OpError(name, "expects 1 input");
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

// A unary op: its dtypes, FusedElementwise opcode, whether an epilogue may apply it,
// and its attribute parameters with their ONNX defaults.
struct UnaryOp {
  const char* name;
  int since;  // OpDef::since_version.
  TypeClass types;
  FusedOpcode opcode;
  bool epilogue;
  std::vector<ScalarParam> params;
};

const std::vector<UnaryOp>& UnaryOps() {
  static const std::vector<UnaryOp> ops = {
      {"Relu", 6, TypeClass::kNumeric, FusedOpcode::kRelu, true, {}},
      {"LeakyRelu", 6, TypeClass::kFloat, FusedOpcode::kLeakyRelu, true, {{"alpha", -1, 0.01f}}},
      {"HardSigmoid", 6, TypeClass::kFloat, FusedOpcode::kHardSigmoid, true,
       {{"alpha", -1, 0.2f}, {"beta", -1, 0.5f}}},
      {"HardSwish", 14, TypeClass::kFloat, FusedOpcode::kHardSwish, true, {}},
      {"Sigmoid", 6, TypeClass::kFloat, FusedOpcode::kSigmoid, true, {}},
      {"Tanh", 6, TypeClass::kFloat, FusedOpcode::kTanh, true, {}},
      {"Exp", 6, TypeClass::kFloat, FusedOpcode::kExp, false, {}},
      {"Log", 6, TypeClass::kFloat, FusedOpcode::kLog, false, {}},
      {"Erf", 9, TypeClass::kFloat, FusedOpcode::kErf, false, {}},
      {"Sqrt", 6, TypeClass::kFloat, FusedOpcode::kSqrt, false, {}},
      {"Neg", 6, TypeClass::kSigned, FusedOpcode::kNeg, false, {}},
      {"Abs", 6, TypeClass::kNumeric, FusedOpcode::kAbs, false, {}},
      {"Reciprocal", 6, TypeClass::kFloat, FusedOpcode::kReciprocal, false, {}},
  };
  return ops;
}

OpDef UnaryOpDef(const UnaryOp& u) {
  OpTraits traits = ElementwiseTraits(u.opcode, u.params);
  traits.epilogue_activation = u.epilogue;
  return UnaryDef(u.name, u.since, u.types, std::move(traits));
}

template <typename K>
Status AddKernel(KernelRegistry& registry, const KernelRegistry& defs, const char* name) {
  return AddValidatedKernel<K>(registry, *defs.FindOp(name));
}

template <typename F, bool kNumeric = false>
Status AddUnaryKernel(KernelRegistry& registry, const KernelRegistry& defs, const char* name) {
  const OpDef& def = *defs.FindOp(name);
  return AddValidatedKernel<UnaryKernel<F, kNumeric>>(registry, def,
                                                [name, params = def.traits.params](const Attributes& attrs) -> Status {
                                                  StatusOr<UnaryParams> p = ParseUnaryParams(params, attrs);
                                                  if (!p.ok()) return OpError(name, p.status().message());
                                                  return OkStatus();
                                                });
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
// Dropout, inference only: output = data; the optional mask is all true. Two entries:
// Dropout-7 (opsets 7-9), whose mask has data's dtype (all ones), and Dropout-10+, whose
// mask is bool. Inputs (Dropout-12+): data, optional ratio (float scalar, ignored),
// optional training_mode (bool scalar); Dropout-7/10 take ratio as an attribute.
// training_mode is read by the shape function (ShapeDep::kData): true is UNIMPLEMENTED.

// The mask's dtype for data of dtype `dt`: T for Dropout-7, bool from Dropout-10.
DType DropoutMaskType(bool mask_like_data, DType dt) { return mask_like_data ? dt : DType::kBool; }

StatusOr<std::vector<TensorInfo>> InferDropout(bool mask_like_data, const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.empty() || in.size() > 3) return OpError("Dropout", "expects 1 to 3 inputs");
  StatusOr<float> ratio_attr = attrs.Float("ratio", 0.5f);
  if (!ratio_attr.ok()) return OpError("Dropout", ratio_attr.status().message());
  const DType dt = in[0].dtype;
  if (DTypeSize(dt) == 0) return OpError("Dropout", "unsupported dtype " + DTypeStr(dt));
  if (in.size() > 1 && in[1].present) {
    if (!IsFloatType(in[1].dtype)) {
      return OpError("Dropout", "ratio has dtype " + DTypeStr(in[1].dtype) + ", expects a float type");
    }
    if (NumElements(in[1].shape).value_or(0) != 1) {
      return OpError("Dropout", "ratio must be a scalar, got shape " + ShapeToString(in[1].shape));
    }
  }
  if (in.size() > 2 && in[2].present) {
    if (in[2].dtype != DType::kBool) {
      return OpError("Dropout", "training_mode has dtype " + DTypeStr(in[2].dtype) + ", expects bool");
    }
    if (NumElements(in[2].shape).value_or(0) != 1) {
      return OpError("Dropout", "training_mode must be a scalar, got shape " + ShapeToString(in[2].shape));
    }
    if (in[2].data == nullptr) return OpError("Dropout", "training_mode has no data");
    if (*static_cast<const uint8_t*>(in[2].data) != 0) {
      return Unimplemented(
          "Dropout: training_mode = true (random dropout) is not supported; Remex runs "
          "inference only");
    }
  }
  return std::vector<TensorInfo>{{dt, in[0].shape}, {DropoutMaskType(mask_like_data, dt), in[0].shape}};
}

// The shape function, run on the inputs before Run, has refused training_mode = true.
class DropoutKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
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
};

// Dropout-7 (opsets 7-9) or Dropout-10+ (`since` 10).
OpDef DropoutDef(int since) {
  const bool mask_like_data = since < 10;
  OpDef def;
  def.name = "Dropout";
  def.since_version = since;
  if (mask_like_data) def.end_version = 9;
  def.min_inputs = 1;
  def.max_inputs = 3;
  def.max_outputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape, ShapeDep::kData};
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
  OpDef prelu;
  prelu.name = "PRelu";
  prelu.since_version = 7;
  prelu.min_inputs = prelu.max_inputs = 2;
  prelu.infer = InferPRelu;
  prelu.traits = ElementwiseTraits();
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(prelu)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Min", 6, FusedOpcode::kMin)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(VariadicDef("Max", 6, FusedOpcode::kMax)));
  OpDef where;
  where.name = "Where";
  where.since_version = 9;
  where.min_inputs = where.max_inputs = 3;
  where.infer = InferWhere;
  where.traits = ElementwiseTraits();
  where.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.size() > 1 ? in[1] : DType::kUndefined};
  };
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(where)));
  for (const UnaryOp& u : UnaryOps()) REMEX_RETURN_IF_ERROR(registry.AddOp(UnaryOpDef(u)));
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

Status AddElementwiseCpuKernels(KernelRegistry& registry) {
  KernelRegistry defs;
  REMEX_RETURN_IF_ERROR(AddElementwiseOpDefs(defs));
  REMEX_RETURN_IF_ERROR(AddKernel<BinaryKernel<BinaryKind::kAdd>>(registry, defs, "Add"));
  REMEX_RETURN_IF_ERROR(AddKernel<BinaryKernel<BinaryKind::kSub>>(registry, defs, "Sub"));
  REMEX_RETURN_IF_ERROR(AddKernel<BinaryKernel<BinaryKind::kMul>>(registry, defs, "Mul"));
  REMEX_RETURN_IF_ERROR(AddKernel<BinaryKernel<BinaryKind::kDiv>>(registry, defs, "Div"));
  REMEX_RETURN_IF_ERROR(AddKernel<PowKernel>(registry, defs, "Pow"));
  REMEX_RETURN_IF_ERROR(AddKernel<CompareKernel<CompareKind::kEqual>>(registry, defs, "Equal"));
  REMEX_RETURN_IF_ERROR(AddKernel<CompareKernel<CompareKind::kLess>>(registry, defs, "Less"));
  REMEX_RETURN_IF_ERROR(AddKernel<CompareKernel<CompareKind::kGreater>>(registry, defs, "Greater"));
  REMEX_RETURN_IF_ERROR(AddKernel<CompareKernel<CompareKind::kAnd>>(registry, defs, "And"));
  REMEX_RETURN_IF_ERROR(AddKernel<CompareKernel<CompareKind::kOr>>(registry, defs, "Or"));
  REMEX_RETURN_IF_ERROR(AddKernel<PReluKernel>(registry, defs, "PRelu"));
  REMEX_RETURN_IF_ERROR(AddKernel<MinMaxKernel<false>>(registry, defs, "Min"));
  REMEX_RETURN_IF_ERROR(AddKernel<MinMaxKernel<true>>(registry, defs, "Max"));
  REMEX_RETURN_IF_ERROR(AddKernel<WhereKernel>(registry, defs, "Where"));
  REMEX_RETURN_IF_ERROR(AddKernel<NotKernel>(registry, defs, "Not"));
  REMEX_RETURN_IF_ERROR(AddKernel<ClipKernel>(registry, defs, "Clip"));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<DropoutKernel>(registry, DropoutDef(7)));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<DropoutKernel>(registry, DropoutDef(10)));
  REMEX_RETURN_IF_ERROR((AddUnaryKernel<scalar::Relu, true>(registry, defs, "Relu")));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::LeakyRelu>(registry, defs, "LeakyRelu"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::HardSigmoid>(registry, defs, "HardSigmoid"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::HardSwish>(registry, defs, "HardSwish"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Sigmoid>(registry, defs, "Sigmoid"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Tanh>(registry, defs, "Tanh"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Exp>(registry, defs, "Exp"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Log>(registry, defs, "Log"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Erf>(registry, defs, "Erf"));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Sqrt>(registry, defs, "Sqrt"));
  REMEX_RETURN_IF_ERROR((AddUnaryKernel<NumericNeg, true>(registry, defs, "Neg")));
  REMEX_RETURN_IF_ERROR((AddUnaryKernel<NumericAbs, true>(registry, defs, "Abs")));
  REMEX_RETURN_IF_ERROR(AddUnaryKernel<scalar::Reciprocal>(registry, defs, "Reciprocal"));
  return OkStatus();
}

}  // namespace remex::kernels::internal
