// Elementwise ops: Add, Mul, Div (numpy broadcasting), Clip, Relu, HardSigmoid.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/internal.h"

namespace remex::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Binary arithmetic with broadcasting.

enum class BinaryKind { kAdd, kMul, kDiv };

// Wrapping integer arithmetic (no signed-overflow UB); float arithmetic as IEEE.
template <BinaryKind kKind, typename C>
inline C Apply(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (kKind == BinaryKind::kAdd) return a + b;
    if constexpr (kKind == BinaryKind::kMul) return a * b;
    if constexpr (kKind == BinaryKind::kDiv) return a / b;
  } else {
    const uint64_t ua = static_cast<uint64_t>(a);
    const uint64_t ub = static_cast<uint64_t>(b);
    if constexpr (kKind == BinaryKind::kAdd) return static_cast<C>(ua + ub);
    if constexpr (kKind == BinaryKind::kMul) return static_cast<C>(ua * ub);
    if constexpr (kKind == BinaryKind::kDiv) {
      // The caller has rejected b == 0. Truncates toward zero like C; MIN / -1 wraps.
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return static_cast<C>(uint64_t{0} - ua);
      }
      return static_cast<C>(a / b);
    }
  }
}

template <BinaryKind kKind, typename T>
inline T ApplyT(T a, T b) {
  return Store<T>(Apply<kKind, ComputeType<T>>(Load(a), Load(b)));
}

// Broadcast iteration plan: dims of extent 1 in the output dropped, adjacent dims
// with the same broadcast pattern merged. Strides are in elements; 0 = broadcast.
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> a_strides;
  std::vector<int64_t> b_strides;
};

BroadcastPlan MakePlan(const Shape& a, const Shape& b, const Shape& out) {
  const size_t rank = out.size();
  std::vector<int64_t> dims;
  std::vector<uint8_t> pattern;  // bit 0: a broadcast, bit 1: b broadcast.
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    const uint8_t p = static_cast<uint8_t>((da == 1 ? 1 : 0) | (db == 1 ? 2 : 0));
    if (!dims.empty() && pattern.back() == p) {
      dims.back() *= out[i];
    } else {
      dims.push_back(out[i]);
      pattern.push_back(p);
    }
  }
  BroadcastPlan plan;
  plan.dims = dims;
  plan.a_strides.resize(dims.size());
  plan.b_strides.resize(dims.size());
  int64_t sa = 1, sb = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    plan.a_strides[k] = (pattern[k] & 1) ? 0 : sa;
    plan.b_strides[k] = (pattern[k] & 2) ? 0 : sb;
    if (!(pattern[k] & 1)) sa *= dims[k];
    if (!(pattern[k] & 2)) sb *= dims[k];
  }
  return plan;
}

template <BinaryKind kKind, typename T>
void BinaryLoop(const T* a, const T* b, T* out, const Shape& a_shape, const Shape& b_shape,
                const Shape& out_shape, int64_t n) {
  const int64_t na = *NumElements(a_shape);
  const int64_t nb = *NumElements(b_shape);
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) out[i] = ApplyT<kKind>(a[i], b[i]);
    return;
  }
  if (nb == 1) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = ApplyT<kKind>(a[i], bv);
    return;
  }
  if (na == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = ApplyT<kKind>(av, b[i]);
    return;
  }
  BroadcastPlan plan = MakePlan(a_shape, b_shape, out_shape);
  const size_t r = plan.dims.size();  // >= 1 here since n > 1.
  const int64_t inner = plan.dims[r - 1];
  const int64_t ia = plan.a_strides[r - 1];
  const int64_t ib = plan.b_strides[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t off_a = 0, off_b = 0;
  for (int64_t o = 0; o < n; o += inner) {
    const T* pa = a + off_a;
    const T* pb = b + off_b;
    T* po = out + o;
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < inner; ++i) po[i] = ApplyT<kKind>(pa[i], pb[i]);
    } else if (ia == 1) {
      const T bv = *pb;
      for (int64_t i = 0; i < inner; ++i) po[i] = ApplyT<kKind>(pa[i], bv);
    } else {
      const T av = *pa;
      for (int64_t i = 0; i < inner; ++i) po[i] = ApplyT<kKind>(av, pb[i]);
    }
    // Advance the outer index (dims 0..r-2).
    for (size_t k = r - 1; k-- > 0;) {
      off_a += plan.a_strides[k];
      off_b += plan.b_strides[k];
      if (++idx[k] < plan.dims[k]) break;
      off_a -= plan.a_strides[k] * plan.dims[k];
      off_b -= plan.b_strides[k] * plan.dims[k];
      idx[k] = 0;
    }
  }
}

StatusOr<std::vector<TensorInfo>> InferBinary(std::string_view op, const Attributes&,
                                              std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError(op, "expects 2 inputs");
  if (in[0].dtype != in[1].dtype) {
    return OpError(op, "input dtypes differ: " + std::string(DTypeName(in[0].dtype)) + " and " +
                           std::string(DTypeName(in[1].dtype)));
  }
  if (!IsNumericType(in[0].dtype)) {
    return OpError(op, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
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
      BinaryLoop<kKind, T>(a, b, DataAs<T>(out[0]), in[0].shape, in[1].shape, out[0].shape, n);
      return OkStatus();
    });
  }
};

OpDef BinaryDef(std::string name) {
  OpDef def;
  def.name = name;
  def.min_inputs = def.max_inputs = 2;
  def.infer = [name](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferBinary(name, attrs, in);
  };
  return def;
}

// ---------------------------------------------------------------------------
// Unary ops.

template <typename T, typename F>
void MapUnary(const TensorRef& in, const TensorRef& out, F f) {
  const int64_t n = *NumElements(in.shape);
  const T* x = DataAs<const T>(in);
  T* y = DataAs<T>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = Store<T>(f(Load(x[i])));
}

OpDef UnaryDef(std::string name, bool float_only) {
  OpDef def;
  def.name = name;
  def.infer = [name, float_only](
                  const Attributes&,
                  std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.size() != 1) return OpError(name, "expects 1 input");
    const DType dt = in[0].dtype;
    if (float_only ? !IsFloatType(dt) : !IsNumericType(dt)) {
      return OpError(name, "unsupported dtype " + std::string(DTypeName(dt)));
    }
    return std::vector<TensorInfo>{{dt, in[0].shape}};
  };
  return def;
}

class ReluKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      MapUnary<T>(in[0], out[0], [](C v) { return v < C(0) ? C(0) : v; });
      return OkStatus();
    });
  }
};

struct HardSigmoidParams {
  float alpha;
  float beta;
};

StatusOr<HardSigmoidParams> ParseHardSigmoid(const Attributes& attrs) {
  HardSigmoidParams p;
  REMEX_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 0.2f));
  REMEX_ASSIGN_OR_RETURN(p.beta, attrs.Float("beta", 0.5f));
  return p;
}

class HardSigmoidKernel final : public ValidatedKernel {
 public:
  HardSigmoidKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), params_(*ParseHardSigmoid(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const C alpha = static_cast<C>(params_.alpha);
      const C beta = static_cast<C>(params_.beta);
      MapUnary<T>(in[0], out[0], [alpha, beta](C v) {
        C r = alpha * v + beta;
        r = r < C(0) ? C(0) : r;
        return r > C(1) ? C(1) : r;
      });
      return OkStatus();
    });
  }

 private:
  HardSigmoidParams params_;
};

// ---------------------------------------------------------------------------
// Clip: inputs x, optional min, optional max (scalars of x's dtype).

StatusOr<std::vector<TensorInfo>> InferClip(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError("Clip", "expects an input");
  const DType dt = in[0].dtype;
  if (!IsNumericType(dt)) {
    return OpError("Clip", "unsupported dtype " + std::string(DTypeName(dt)));
  }
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) continue;
    const char* what = i == 1 ? "min" : "max";
    if (in[i].dtype != dt) {
      return OpError("Clip", std::string(what) + " has dtype " +
                                 std::string(DTypeName(in[i].dtype)) + ", input has " +
                                 std::string(DTypeName(dt)));
    }
    if (in[i].shape.size() > 1 || NumElements(in[i].shape).value_or(0) != 1) {
      return OpError(
          "Clip", std::string(what) + " must be a scalar, got shape " + ShapeToString(in[i].shape));
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
      // min(max(x, lo), hi): when lo > hi every value becomes hi, as ONNX specifies.
      MapUnary<T>(in[0], out[0], [lo, hi](C v) {
        C r = v < lo ? lo : v;
        return r > hi ? hi : r;
      });
      return OkStatus();
    });
  }
};

}  // namespace

Status AddElementwiseOpDefs(KernelRegistry& registry) {
  for (const char* name : {"Add", "Mul", "Div"}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(BinaryDef(name)));
  }
  REMEX_RETURN_IF_ERROR(registry.AddOp(UnaryDef("Relu", /*float_only=*/false)));
  OpDef hs = UnaryDef("HardSigmoid", /*float_only=*/true);
  ShapeFn base = hs.infer;
  hs.infer = [base](const Attributes& attrs,
                    std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    StatusOr<HardSigmoidParams> p = ParseHardSigmoid(attrs);
    if (!p.ok()) return OpError("HardSigmoid", p.status().message());
    return base(attrs, in);
  };
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(hs)));
  OpDef clip;
  clip.name = "Clip";
  clip.min_inputs = 1;
  clip.max_inputs = 3;
  clip.infer = InferClip;
  REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(clip)));
  return OkStatus();
}

Status AddElementwiseCpuKernels(KernelRegistry& registry) {
  KernelRegistry defs;
  REMEX_RETURN_IF_ERROR(AddElementwiseOpDefs(defs));
  REMEX_RETURN_IF_ERROR(
      AddValidatedKernel<BinaryKernel<BinaryKind::kAdd>>(registry, *defs.FindOp("Add")));
  REMEX_RETURN_IF_ERROR(
      AddValidatedKernel<BinaryKernel<BinaryKind::kMul>>(registry, *defs.FindOp("Mul")));
  REMEX_RETURN_IF_ERROR(
      AddValidatedKernel<BinaryKernel<BinaryKind::kDiv>>(registry, *defs.FindOp("Div")));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ReluKernel>(registry, *defs.FindOp("Relu")));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ClipKernel>(registry, *defs.FindOp("Clip")));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<HardSigmoidKernel>(
      registry, *defs.FindOp("HardSigmoid"), [](const Attributes& attrs) -> Status {
        StatusOr<HardSigmoidParams> p = ParseHardSigmoid(attrs);
        if (!p.ok()) return OpError("HardSigmoid", p.status().message());
        return OkStatus();
      }));
  return OkStatus();
}

}  // namespace remex::kernels::internal
