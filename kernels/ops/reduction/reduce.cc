// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp; ArgMax, ArgMin; TopK.
// ONNX semantics, opsets 7-17 (https://onnx.ai/onnx/operators/).
//
// Reduce* (inputs: data, optional axes; output: reduced):
//   - data: any numeric dtype (float16/32/64, int8/16/32/64, uint8/16/32/64); ReduceL2,
//     ReduceLogSum and ReduceLogSumExp take float types only. bool is refused.
//   - axes: the attribute `axes` (ints) when present, else the optional input 1 (int64,
//     int32 accepted; 1-D; data-dependent). ReduceSum takes axes as an input from opset
//     13; the other ops take the attribute up to opset 17 (an input from opset 18, also
//     accepted here). Giving both is an error. Negative axes count from the back;
//     repeated or out-of-range axes are errors.
//   - Empty or absent axes reduce every dimension, unless `noop_with_empty_axes` = 1
//     (ReduceSum-13): then no dimension is reduced (each output element is the
//     reduction of its single input element, i.e. the input itself for ReduceSum).
//   - keepdims (default 1): reduced dimensions stay as extent 1, else they are removed.
//   - Output dtype = data dtype. Reducing an empty set gives the identity: Sum, L1, L2,
//     SumSquare 0; Prod 1; Max -inf (the dtype's lowest for integers); Min +inf (the
//     dtype's highest); Mean NaN (0 for integers); LogSum and LogSumExp -inf.
//   - float16 and float32 accumulate sums in float32 partial sums of bounded length
//     folded into float64, products in float64; float64 in float64. Integer sums and
//     products wrap (two's complement) like the dtype's own arithmetic; the integer
//     mean is the wrapped sum divided by the count, truncated toward zero.
//   - Max and Min propagate NaN. LogSumExp is evaluated as m + log(sum(exp(x - m)))
//     with m the maximum.
//
// ArgMax, ArgMin (input: data; output: int64 indices):
//   - data: any numeric dtype, rank >= 1; `axis` (default 0, negative counts from the
//     back), `keepdims` (default 1), `select_last_index` (default 0, opset 12+): the
//     last of equal extrema instead of the first. NaN counts as the extremum (the first
//     NaN, or the last with select_last_index). The axis must not be empty unless the
//     output is.
//
// TopK (inputs: X, K (opset 10+); outputs: Values, Indices (int64)):
//   - X: any numeric dtype, rank >= 1. k: the attribute `k` (opset < 10) when present,
//     else input 1 (int64, int32 accepted; one element; data-dependent); 0 <= k <=
//     X.shape[axis]. `axis` default -1; `largest` (default 1, opset 11+): the k largest,
//     else the k smallest; `sorted` (default 1): the outputs are always sorted (largest
//     first, or smallest first), which also satisfies sorted = 0. Equal values keep the
//     lower index first. NaN orders above every number. The output has X's shape with
//     extent k along `axis`. A node may use the Values output alone.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Reduce*: attributes, axes and output shapes.

constexpr ReduceOpInfo kReduceOps[] = {
    {"ReduceSum", ReduceKind::kSum, false},
    {"ReduceMean", ReduceKind::kMean, false},
    {"ReduceProd", ReduceKind::kProd, false},
    {"ReduceMax", ReduceKind::kMax, false},
    {"ReduceMin", ReduceKind::kMin, false},
    {"ReduceL1", ReduceKind::kL1, false},
    {"ReduceL2", ReduceKind::kL2, true},
    {"ReduceSumSquare", ReduceKind::kSumSquare, false},
    {"ReduceLogSum", ReduceKind::kLogSum, true},
    {"ReduceLogSumExp", ReduceKind::kLogSumExp, true},
};

}  // namespace

std::span<const ReduceOpInfo> ReduceOps() { return kReduceOps; }

// Reads an attribute that must be 0 or 1.
StatusOr<bool> BoolAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                        int64_t default_value) {
  StatusOr<int64_t> v = attrs.Int(name, default_value);
  if (!v.ok()) return OpError(op, v.status().message());
  if (*v != 0 && *v != 1) {
    return OpError(op, std::string(name) + " must be 0 or 1, got " + std::to_string(*v));
  }
  return *v == 1;
}

StatusOr<ReduceSpec> ParseReduce(std::string_view op, const Attributes& attrs,
                                 std::span<const ShapeFnArg> in) {
  ReduceSpec spec;
  REMEX_ASSIGN_OR_RETURN(spec.keepdims, BoolAttr(op, attrs, "keepdims", 1));
  REMEX_ASSIGN_OR_RETURN(bool noop, BoolAttr(op, attrs, "noop_with_empty_axes", 0));
  const bool axes_input = in.size() > 1 && in[1].present;
  std::vector<int64_t> axes;
  if (attrs.Has("axes")) {
    if (axes_input) return OpError(op, "axes given both as attribute and as input 1");
    StatusOr<std::vector<int64_t>> a = attrs.Ints("axes");
    if (!a.ok()) return OpError(op, a.status().message());
    axes = std::move(*a);
  } else if (axes_input) {
    REMEX_ASSIGN_OR_RETURN(axes, ReadIndexTensor(op, "axes", in[1].dtype, in[1].shape, in[1].data));
  }
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  spec.reduced.assign(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    if (!noop) spec.reduced.assign(static_cast<size_t>(rank), true);
    return spec;
  }
  for (int64_t a : axes) {
    REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, a, rank, "axes value"));
    if (spec.reduced[axis]) return OpError(op, "axis " + std::to_string(a) + " is repeated");
    spec.reduced[axis] = true;
  }
  return spec;
}

namespace {

Shape ReducedShape(const Shape& shape, const ReduceSpec& spec) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!spec.reduced[d]) {
      out.push_back(shape[d]);
    } else if (spec.keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

Status CheckReduceDType(const ReduceOpInfo& info, DType dt) {
  if (info.float_only ? !IsFloatType(dt) : !IsNumericType(dt)) {
    return OpError(info.name, "unsupported dtype " + std::string(DTypeName(dt)) +
                                  (info.float_only ? " (float types only)" : ""));
  }
  return OkStatus();
}

OpDef ReduceDef(const ReduceOpInfo& info) {
  OpDef def;
  def.name = info.name;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = [info](const Attributes& attrs,
                     std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.empty() || in.size() > 2) return OpError(info.name, "expects data and optional axes");
    REMEX_RETURN_IF_ERROR(CheckReduceDType(info, in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(ReduceSpec spec, ParseReduce(info.name, attrs, in));
    return std::vector<TensorInfo>{{in[0].dtype, ReducedShape(in[0].shape, spec)}};
  };
  return def;
}

Status CheckReduceAttrs(std::string_view op, const Attributes& attrs) {
  REMEX_RETURN_IF_ERROR(BoolAttr(op, attrs, "keepdims", 1).status());
  REMEX_RETURN_IF_ERROR(BoolAttr(op, attrs, "noop_with_empty_axes", 0).status());
  if (attrs.Has("axes") && !attrs.Ints("axes").ok()) {
    return OpError(op, attrs.Ints("axes").status().message());
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------
// Reduce*: iteration plan.

// Walks the offsets (in elements) of a row-major index space over `dims` with `strides`.
class Odometer {
 public:
  Odometer(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides)
      : dims_(dims), strides_(strides), idx_(dims.size(), 0) {}

  int64_t offset() const { return off_; }

  void Reset() {
    std::fill(idx_.begin(), idx_.end(), 0);
    off_ = 0;
  }

  void Next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      off_ += strides_[d];
      if (++idx_[d] < dims_[d]) return;
      off_ -= strides_[d] * dims_[d];
      idx_[d] = 0;
    }
  }

 private:
  const std::vector<int64_t>& dims_;
  const std::vector<int64_t>& strides_;
  std::vector<int64_t> idx_;
  int64_t off_ = 0;
};

// The input seen as alternating groups of kept and reduced dimensions (extent-1
// dimensions dropped, adjacent dimensions of one kind merged). The innermost group is
// contiguous and handled by the inner loops; the other groups are walked by odometers.
struct ReducePlan {
  int64_t out_count = 1;  // Output elements.
  int64_t red_count = 1;  // Input elements reduced into each output element.
  bool inner_reduced = false;
  int64_t inner = 1;  // Extent of the innermost group.
  std::vector<int64_t> kept_dims, kept_strides;  // Outer kept groups.
  std::vector<int64_t> red_dims, red_strides;    // Outer reduced groups.
};

ReducePlan MakeReducePlan(const Shape& shape, const std::vector<bool>& reduced) {
  ReducePlan plan;
  struct Group {
    int64_t extent;
    int64_t stride;
    bool reduced;
  };
  std::vector<Group> groups;  // Innermost first.
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t e = shape[d];
    if (reduced[d]) {
      plan.red_count *= e;
    } else {
      plan.out_count *= e;
    }
    if (e != 1) {
      if (!groups.empty() && groups.back().reduced == reduced[d]) {
        groups.back().extent *= e;
      } else {
        groups.push_back({e, stride, reduced[d]});
      }
    }
    stride *= e;
  }
  if (groups.empty()) groups.push_back({1, 1, false});
  plan.inner_reduced = groups.front().reduced;
  plan.inner = groups.front().extent;
  for (size_t g = groups.size(); g-- > 1;) {
    if (groups[g].reduced) {
      plan.red_dims.push_back(groups[g].extent);
      plan.red_strides.push_back(groups[g].stride);
    } else {
      plan.kept_dims.push_back(groups[g].extent);
      plan.kept_strides.push_back(groups[g].stride);
    }
  }
  return plan;
}

// Runs reducer `p` over `x` and calls emit(output index, accumulator) once per output
// element, in output order. The reducer provides:
//   Acc Init(int64_t o) const;                        the identity for output o
//   Acc Step(Acc a, T x) const;                       one more element
//   Acc Run(Acc a, const T* x, int64_t n) const;      n more contiguous elements
// and optionally, for sums whose rows accumulate faster in a narrower type:
//   using Partial; Partial PartialStep(Partial s, T x) const; with acc += partial.
template <typename T, typename P, typename E>
void ReduceLoop(const ReducePlan& plan, const T* x, const P& p, E&& emit) {
  using Acc = decltype(p.Init(0));
  if (plan.out_count == 0) return;
  if (plan.red_count == 0) {
    for (int64_t o = 0; o < plan.out_count; ++o) emit(o, p.Init(o));
    return;
  }
  Odometer kept(plan.kept_dims, plan.kept_strides);
  Odometer red(plan.red_dims, plan.red_strides);
  if (plan.inner_reduced) {
    // Each output reduces contiguous runs of `inner` elements.
    const int64_t runs = plan.red_count / plan.inner;
    for (int64_t o = 0; o < plan.out_count; ++o) {
      Acc acc = p.Init(o);
      const T* base = x + kept.offset();
      red.Reset();
      for (int64_t r = 0; r < runs; ++r) {
        acc = p.Run(acc, base + red.offset(), plan.inner);
        red.Next();
      }
      emit(o, acc);
      kept.Next();
    }
    return;
  }
  // Contiguous output blocks of `inner` elements, accumulated row by row in tiles.
  constexpr int64_t kTile = 256;
  Acc acc[kTile];
  const int64_t blocks = plan.out_count / plan.inner;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t t0 = 0; t0 < plan.inner; t0 += kTile) {
      const int64_t tn = std::min(kTile, plan.inner - t0);
      const int64_t o0 = b * plan.inner + t0;
      for (int64_t k = 0; k < tn; ++k) acc[k] = p.Init(o0 + k);
      const T* base = x + kept.offset() + t0;
      red.Reset();
      if constexpr (requires { typename P::Partial; }) {
        // Partial sums over up to kFlush rows in the compute type, folded into acc.
        constexpr int64_t kFlush = 64;
        typename P::Partial part[kTile];
        for (int64_t r0 = 0; r0 < plan.red_count; r0 += kFlush) {
          const int64_t rn = std::min(kFlush, plan.red_count - r0);
          for (int64_t k = 0; k < tn; ++k) part[k] = 0;
          for (int64_t r = 0; r < rn; ++r) {
            const T* row = base + red.offset();
            for (int64_t k = 0; k < tn; ++k) part[k] = p.PartialStep(part[k], row[k]);
            red.Next();
          }
          for (int64_t k = 0; k < tn; ++k) acc[k] += part[k];
        }
      } else {
        for (int64_t r = 0; r < plan.red_count; ++r) {
          const T* row = base + red.offset();
          for (int64_t k = 0; k < tn; ++k) acc[k] = p.Step(acc[k], row[k]);
          red.Next();
        }
      }
      for (int64_t k = 0; k < tn; ++k) emit(o0 + k, acc[k]);
    }
    kept.Next();
  }
}

// ---------------------------------------------------------------------------
// Reduce*: reducers.

// Float sum of map(x) over n contiguous elements: 16 partial sums in the compute type
// over blocks of at most 1024 elements, folded into a float64 total. Bounds the float32
// rounding error to that of 64-element sums whatever n is, and vectorises.
template <typename T, typename M>
double FloatSumRun(const T* p, int64_t n, M map) {
  using C = ComputeType<T>;
  constexpr int kLanes = 16;
  constexpr int64_t kBlock = 1024;
  double total = 0;
  int64_t i = 0;
  while (n - i >= kLanes) {
    C lanes[kLanes] = {};
    const int64_t stop = i + std::min<int64_t>(kBlock, (n - i) / kLanes * kLanes);
    for (; i < stop; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += map(Load(p[i + j]));
    }
    for (int j = 0; j < kLanes; ++j) total += lanes[j];
  }
  for (; i < n; ++i) total += map(Load(p[i]));
  return total;
}

// Sum, Mean, L1, L2, SumSquare, LogSum: a sum of map(x), then a final function.
template <ReduceKind kKind, typename T>
struct SumReducer {
  using C = ComputeType<T>;
  static constexpr bool kFloat = std::is_floating_point_v<C>;
  using U = std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>;
  using Acc = std::conditional_t<kFloat, double, uint64_t>;

  int64_t count;  // Elements per output (Mean).

  static C MapFloat(C v) {
    if constexpr (kKind == ReduceKind::kL1) return std::abs(v);
    if constexpr (kKind == ReduceKind::kL2 || kKind == ReduceKind::kSumSquare) return v * v;
    return v;
  }
  // Wrapping integer map.
  static uint64_t MapInt(T v) {
    const uint64_t u = static_cast<uint64_t>(static_cast<U>(v));
    if constexpr (kKind == ReduceKind::kL1) {
      if constexpr (std::is_signed_v<C>) return v < 0 ? uint64_t{0} - u : u;
    }
    if constexpr (kKind == ReduceKind::kSumSquare) return u * u;
    return u;
  }

  // Rows summed in float32 (float16, float32) before joining the float64 total.
  using Partial = std::conditional_t<kFloat, C, uint64_t>;
  Partial PartialStep(Partial s, T x) const {
    if constexpr (kFloat) {
      return s + MapFloat(Load(x));
    } else {
      return s + MapInt(x);
    }
  }

  Acc Init(int64_t) const { return 0; }
  Acc Step(Acc a, T x) const {
    if constexpr (kFloat) {
      return a + static_cast<double>(MapFloat(Load(x)));
    } else {
      return a + MapInt(x);
    }
  }
  Acc Run(Acc a, const T* x, int64_t n) const {
    if constexpr (kFloat) {
      return a + FloatSumRun(x, n, [](C v) { return MapFloat(v); });
    } else {
      for (int64_t i = 0; i < n; ++i) a += MapInt(x[i]);
      return a;
    }
  }
  T Final(Acc a) const {
    if constexpr (kFloat) {
      double r = a;
      if constexpr (kKind == ReduceKind::kMean) r = a / static_cast<double>(count);
      if constexpr (kKind == ReduceKind::kL2) r = std::sqrt(a);
      if constexpr (kKind == ReduceKind::kLogSum) r = std::log(a);
      return Store<T>(static_cast<C>(r));
    } else {
      if constexpr (kKind == ReduceKind::kMean) {
        if (count == 0) return T(0);
        if constexpr (std::is_signed_v<C>) {
          return static_cast<T>(static_cast<int64_t>(a) / count);
        } else {
          return static_cast<T>(a / static_cast<uint64_t>(count));
        }
      }
      return static_cast<T>(static_cast<U>(a));  // Wraps to T.
    }
  }
};

template <typename T>
struct ProdReducer {
  using C = ComputeType<T>;
  static constexpr bool kFloat = std::is_floating_point_v<C>;
  using U = std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>;
  using Acc = std::conditional_t<kFloat, double, uint64_t>;

  Acc Init(int64_t) const { return 1; }
  Acc Step(Acc a, T x) const {
    if constexpr (kFloat) {
      return a * static_cast<double>(Load(x));
    } else {
      return a * static_cast<uint64_t>(static_cast<U>(x));
    }
  }
  Acc Run(Acc a, const T* x, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) a = Step(a, x[i]);
    return a;
  }
  T Final(Acc a) const {
    if constexpr (kFloat) {
      return Store<T>(static_cast<C>(a));
    } else {
      return static_cast<T>(static_cast<U>(a));
    }
  }
};

// Max (kMax) or Min; NaN propagates.
template <bool kMax, typename T>
struct ExtremumReducer {
  using C = ComputeType<T>;
  using Acc = C;

  static C Identity() {
    if constexpr (std::is_floating_point_v<C>) {
      return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    } else {
      return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
    }
  }
  static C Pick(C a, C v) {
    if constexpr (std::is_floating_point_v<C>) {
      if (v != v) return v;
    }
    if constexpr (kMax) {
      return v > a ? v : a;
    } else {
      return v < a ? v : a;
    }
  }

  Acc Init(int64_t) const { return Identity(); }
  Acc Step(Acc a, T x) const { return Pick(a, Load(x)); }
  Acc Run(Acc a, const T* x, int64_t n) const {
    constexpr int kLanes = 8;
    int64_t i = 0;
    if (n >= kLanes) {
      C lanes[kLanes];
      for (int j = 0; j < kLanes; ++j) lanes[j] = Identity();
      for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) lanes[j] = Pick(lanes[j], Load(x[i + j]));
      }
      for (int j = 0; j < kLanes; ++j) a = Pick(a, lanes[j]);
    }
    for (; i < n; ++i) a = Pick(a, Load(x[i]));
    return a;
  }
  T Final(Acc a) const { return Store<T>(a); }
};

// LogSumExp given each output's maximum `shift`: shift + log(sum(exp(x - shift))).
template <typename T>
struct LogSumExpReducer {
  struct Acc {
    double shift;
    double sum;
  };
  const double* shift;

  Acc Init(int64_t o) const { return {shift[o], 0.0}; }
  Acc Step(Acc a, T x) const {
    a.sum += std::exp(static_cast<double>(Load(x)) - a.shift);
    return a;
  }
  Acc Run(Acc a, const T* x, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) a = Step(a, x[i]);
    return a;
  }
  T Final(Acc a) const {
    // Infinite or NaN maxima (including the empty set's -inf) are the result.
    if (!std::isfinite(a.shift)) return Store<T>(static_cast<ComputeType<T>>(a.shift));
    return Store<T>(static_cast<ComputeType<T>>(a.shift + std::log(a.sum)));
  }
};

template <typename T, typename P>
void RunReducer(const ReducePlan& plan, const T* x, T* y, const P& p) {
  ReduceLoop(plan, x, p, [&](int64_t o, auto acc) { y[o] = p.Final(acc); });
}

template <ReduceKind kKind, typename T>
void ReduceTyped(const ReducePlan& plan, const T* x, T* y) {
  if constexpr (kKind == ReduceKind::kProd) {
    RunReducer(plan, x, y, ProdReducer<T>{});
  } else if constexpr (kKind == ReduceKind::kMax) {
    RunReducer(plan, x, y, ExtremumReducer<true, T>{});
  } else if constexpr (kKind == ReduceKind::kMin) {
    RunReducer(plan, x, y, ExtremumReducer<false, T>{});
  } else if constexpr (kKind == ReduceKind::kLogSumExp) {
    std::vector<double> shift(static_cast<size_t>(plan.out_count));
    ReduceLoop(plan, x, ExtremumReducer<true, T>{},
               [&](int64_t o, auto m) { shift[o] = static_cast<double>(m); });
    RunReducer(plan, x, y, LogSumExpReducer<T>{shift.data()});
  } else {
    RunReducer(plan, x, y, SumReducer<kKind, T>{plan.red_count});
  }
}

template <ReduceKind kKind>
class ReduceKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ReduceKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(CheckReduceAttrs(def.name, attrs));
    return std::make_unique<ReduceKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(ReduceSpec spec, ParseReduce(op(), attrs(), args));
    const ReducePlan plan = MakeReducePlan(in[0].shape, spec.reduced);
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ReduceTyped<kKind, T>(plan, DataAs<const T>(in[0]), DataAs<T>(out[0]));
      return OkStatus();
    };
    if constexpr (kKind == ReduceKind::kL2 || kKind == ReduceKind::kLogSum ||
                  kKind == ReduceKind::kLogSumExp) {
      return DispatchFloat(op(), in[0].dtype, run);
    } else {
      return DispatchNumeric(op(), in[0].dtype, run);
    }
  }
};

template <ReduceKind kKind>
Status AddReduceKernel(KernelRegistry& registry, const ReduceOpInfo& info) {
  return AddCpuKernel<ReduceKernel<kKind>>(registry, info.name, ReduceDef(info).since_version);
}

}  // namespace

Status AddReduceOpDefs(KernelRegistry& registry) {
  for (const ReduceOpInfo& info : kReduceOps) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(ReduceDef(info)));
  }
  return OkStatus();
}

Status AddReduceCpuKernels(KernelRegistry& registry) {
  const auto& ops = kReduceOps;
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kSum>(registry, ops[0]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kMean>(registry, ops[1]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kProd>(registry, ops[2]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kMax>(registry, ops[3]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kMin>(registry, ops[4]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kL1>(registry, ops[5]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kL2>(registry, ops[6]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kSumSquare>(registry, ops[7]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kLogSum>(registry, ops[8]));
  REMEX_RETURN_IF_ERROR(AddReduceKernel<ReduceKind::kLogSumExp>(registry, ops[9]));
  return OkStatus();
}

}  // namespace remex::kernels::internal
