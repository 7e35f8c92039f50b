// ArgMax, ArgMin (opsets 7-13) and TopK (opsets 10-11): shape functions and CPU
// kernels; the semantics are in reduce.cc's header comment
// (https://onnx.ai/onnx/operators/).

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
// ArgMax, ArgMin.

struct ArgSpec {
  int64_t axis = 0;  // Normalised.
  bool keepdims = true;
  bool select_last = false;
};

StatusOr<ArgSpec> ParseArg(std::string_view op, const Attributes& attrs, int64_t rank) {
  ArgSpec s;
  StatusOr<int64_t> axis = attrs.Int("axis", 0);
  if (!axis.ok()) return OpError(op, axis.status().message());
  REMEX_ASSIGN_OR_RETURN(s.keepdims, BoolAttr(op, attrs, "keepdims", 1));
  REMEX_ASSIGN_OR_RETURN(s.select_last, BoolAttr(op, attrs, "select_last_index", 0));
  if (rank < 0) return s;  // Attribute check only.
  REMEX_ASSIGN_OR_RETURN(s.axis, NormalizeAxis(op, *axis, rank));
  return s;
}

OpDef ArgDef(std::string name) {
  OpDef def;
  def.name = name;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kInt64}; };
  def.infer = [name](const Attributes& attrs,
                     std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    if (in.size() != 1) return OpError(name, "expects 1 input");
    if (!IsNumericType(in[0].dtype)) {
      return OpError(name, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
    }
    const Shape& shape = in[0].shape;
    if (shape.empty()) return OpError(name, "input must have rank >= 1");
    REMEX_ASSIGN_OR_RETURN(ArgSpec s, ParseArg(name, attrs, static_cast<int64_t>(shape.size())));
    Shape out = shape;
    if (s.keepdims) {
      out[s.axis] = 1;
    } else {
      out.erase(out.begin() + s.axis);
    }
    if (shape[s.axis] == 0 && NumElements(out).value_or(0) > 0) {
      return OpError(name, "cannot take the index of an extremum along empty axis " +
                               std::to_string(s.axis) + " of " + ShapeToString(shape));
    }
    return std::vector<TensorInfo>{{DType::kInt64, std::move(out)}};
  };
  return def;
}

// NaN-aware ordering: NaN above every number, NaNs equal to each other.
template <typename C>
inline bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename C>
inline bool Above(C a, C b) {
  return a > b || (IsNan(a) && !IsNan(b));
}

// Whether `v` at a later index replaces the current extremum `best`.
template <bool kMax, typename C>
inline bool Replaces(C v, C best, bool select_last) {
  const bool better = kMax ? Above(v, best) : (IsNan(v) ? !IsNan(best) : (v < best && !IsNan(best)));
  if (better) return true;
  if (!select_last) return false;
  // Equal values (NaNs equal each other).
  return IsNan(v) ? IsNan(best) : (v == best);
}

template <bool kMax>
class ArgKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ArgKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(ParseArg(def.name, attrs, -1).status());
    return std::make_unique<ArgKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(ArgSpec s, ParseArg(op(), attrs(), static_cast<int64_t>(shape.size())));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < s.axis; ++d) outer *= shape[d];
    for (size_t d = s.axis + 1; d < shape.size(); ++d) inner *= shape[d];
    const int64_t n = shape[s.axis];
    if (outer * inner == 0) return OkStatus();
    int64_t* y = DataAs<int64_t>(out[0]);
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      if (inner == 1) {
        for (int64_t o = 0; o < outer; ++o) {
          const T* row = x + o * n;
          C best = Load(row[0]);
          int64_t at = 0;
          for (int64_t j = 1; j < n; ++j) {
            const C v = Load(row[j]);
            if (Replaces<kMax>(v, best, s.select_last)) {
              best = v;
              at = j;
            }
          }
          y[o] = at;
        }
        return OkStatus();
      }
      // Rows of `inner` elements compared elementwise against the running extrema.
      std::vector<C> best(static_cast<size_t>(inner));
      for (int64_t o = 0; o < outer; ++o) {
        const T* block = x + o * n * inner;
        int64_t* yo = y + o * inner;
        for (int64_t i = 0; i < inner; ++i) {
          best[i] = Load(block[i]);
          yo[i] = 0;
        }
        for (int64_t j = 1; j < n; ++j) {
          const T* row = block + j * inner;
          for (int64_t i = 0; i < inner; ++i) {
            const C v = Load(row[i]);
            if (Replaces<kMax>(v, best[i], s.select_last)) {
              best[i] = v;
              yo[i] = j;
            }
          }
        }
      }
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// TopK.

struct TopKSpec {
  int64_t axis = 0;  // Normalised.
  int64_t k = 0;
  bool largest = true;
};

}  // namespace

Status CheckTopKAttrs(const Attributes& attrs) {
  constexpr std::string_view op = "TopK";
  StatusOr<int64_t> axis = attrs.Int("axis", -1);
  if (!axis.ok()) return OpError(op, axis.status().message());
  REMEX_RETURN_IF_ERROR(BoolAttr(op, attrs, "largest", 1).status());
  REMEX_RETURN_IF_ERROR(BoolAttr(op, attrs, "sorted", 1).status());
  if (attrs.Has("k") && !attrs.Int("k").ok()) return OpError(op, attrs.Int("k").status().message());
  return OkStatus();
}

namespace {

StatusOr<TopKSpec> ParseTopK(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "TopK";
  REMEX_RETURN_IF_ERROR(CheckTopKAttrs(attrs));
  TopKSpec s;
  const Shape& shape = in[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return OpError(op, "X must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(s.axis, NormalizeAxis(op, *attrs.Int("axis", -1), rank));
  s.largest = *attrs.Int("largest", 1) == 1;
  const bool k_input = in.size() > 1 && in[1].present;
  if (attrs.Has("k")) {
    if (k_input) return OpError(op, "k given both as attribute and as input 1");
    s.k = *attrs.Int("k");
  } else if (k_input) {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> k,
                           ReadIndexTensor(op, "K", in[1].dtype, in[1].shape, in[1].data));
    if (k.size() != 1) {
      return OpError(op, "K must hold one value, got shape " + ShapeToString(in[1].shape));
    }
    s.k = k[0];
  } else {
    return OpError(op, "k is missing (attribute k or input K)");
  }
  if (s.k < 0 || s.k > shape[s.axis]) {
    return OpError(op, "k = " + std::to_string(s.k) + " is out of range [0, " +
                           std::to_string(shape[s.axis]) + "] for axis " +
                           std::to_string(s.axis) + " of " + ShapeToString(shape));
  }
  return s;
}

StatusOr<std::vector<TensorInfo>> InferTopK(const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  if (in.empty() || in.size() > 2) return OpError("TopK", "expects X and optional K");
  if (!IsNumericType(in[0].dtype)) {
    return OpError("TopK", "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(TopKSpec s, ParseTopK(attrs, in));
  Shape out = in[0].shape;
  out[s.axis] = s.k;
  return std::vector<TensorInfo>{{in[0].dtype, out}, {DType::kInt64, out}};
}

OpDef TopKDef() {
  OpDef def;
  def.name = "TopK";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.min_outputs = 1;
  def.max_outputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferTopK;
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.empty() ? DType::kUndefined : in[0], DType::kInt64};
  };
  return def;
}

class TopKKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<TopKKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(CheckTopKAttrs(attrs));
    return std::make_unique<TopKKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(TopKSpec s, ParseTopK(attrs(), args));
    const Shape& shape = in[0].shape;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < s.axis; ++d) outer *= shape[d];
    for (size_t d = s.axis + 1; d < shape.size(); ++d) inner *= shape[d];
    const int64_t n = shape[s.axis];
    const int64_t k = s.k;
    if (outer * inner * k == 0) return OkStatus();
    int64_t* indices = out.size() > 1 ? DataAs<int64_t>(out[1]) : nullptr;
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      T* values = DataAs<T>(out[0]);
      std::vector<C> col(static_cast<size_t>(n));
      std::vector<int64_t> order(static_cast<size_t>(n));
      // Strict weak order: the wanted end first, equal values by index.
      auto before = [&](int64_t a, int64_t b) {
        const C va = col[a], vb = col[b];
        if (s.largest ? Above(va, vb) : Above(vb, va)) return true;
        if (s.largest ? Above(vb, va) : Above(va, vb)) return false;
        return a < b;
      };
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* src = x + o * n * inner + i;
          for (int64_t j = 0; j < n; ++j) col[j] = Load(src[j * inner]);
          std::iota(order.begin(), order.end(), int64_t{0});
          if (k < n) {
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          } else {
            std::sort(order.begin(), order.end(), before);
          }
          const int64_t dst = o * k * inner + i;
          for (int64_t t = 0; t < k; ++t) {
            values[dst + t * inner] = src[order[t] * inner];
            if (indices) indices[dst + t * inner] = order[t];
          }
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddArgTopKOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(ArgDef("ArgMax")));
  REMEX_RETURN_IF_ERROR(registry.AddOp(ArgDef("ArgMin")));
  return registry.AddOp(TopKDef());
}

Status AddArgTopKCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ArgKernel<true>>(registry, "ArgMax"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ArgKernel<false>>(registry, "ArgMin"));
  return AddCpuKernel<TopKKernel>(registry, "TopK");
}

}  // namespace remex::kernels::internal
