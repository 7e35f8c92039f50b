// Unique: shape function, CPU kernel and the computation the CUDA kernel shares
// (https://onnx.ai/onnx/operators/onnx__Unique.html, opset 11).
//
// Unique(X) -> Y, [indices], [inverse_indices], [counts]. Without `axis`, X is
// flattened and Y [u] holds its distinct values; with `axis` (in [-rank, rank)), Y holds
// X's distinct slices along it (X's shape with u at the axis), compared element by
// element in row-major order of the other dims (numpy.unique's rule). `sorted` (default
// 1): ascending (lexicographic for slices); 0: in order of first occurrence. indices
// [u] int64: each unique's first position in X (along the axis); inverse_indices [n]
// int64: each of X's positions' index in Y; counts [u] int64. Floats compare by value
// (-0.0 equals 0.0; the first occurrence's bits are kept), NaNs equal each other and
// sort after every number. Every dtype, bool included (false < true). X is read on
// the host (ShapeDep::kData): Y's extent depends on its values.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

// a < b, a == b over one element type, with NaN after every number and equal to NaN.
template <typename T>
int CompareValues(T a, T b) {
  if constexpr (std::is_same_v<T, Half>) {
    return CompareValues(HalfToFloat(a), HalfToFloat(b));
  } else if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
    return a < b ? -1 : (b < a ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}

}  // namespace

StatusOr<UniqueResult> UniqueOf(const Attributes& attrs, const ShapeFnArg& x) {
  constexpr std::string_view op = "Unique";
  if (!x.present) return OpError(op, "expects X");
  if (x.data == nullptr && NumElements(x.shape).value_or(0) > 0) return OpError(op, "X has no data");
  StatusOr<int64_t> sorted = attrs.Int("sorted", 1);
  if (!sorted.ok()) return OpError(op, sorted.status().message());
  if (*sorted != 0 && *sorted != 1) return OpError(op, "sorted must be 0 or 1, got " + std::to_string(*sorted));
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, x.shape));
  int64_t outer = 1, n = total, inner = 1;
  std::optional<int64_t> axis;
  if (attrs.Has("axis")) {
    StatusOr<int64_t> a = attrs.Int("axis");
    if (!a.ok()) return OpError(op, a.status().message());
    REMEX_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(op, *a, static_cast<int64_t>(x.shape.size())));
    axis = ax;
    outer = 1;
    inner = 1;
    for (int64_t d = 0; d < ax; ++d) outer *= x.shape[d];
    n = x.shape[ax];
    for (size_t d = static_cast<size_t>(ax) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  }
  const size_t es = DTypeSize(x.dtype);
  UniqueResult r;
  Status st = DispatchAllTypes(op, x.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* v = static_cast<const T*>(x.data);
    // Compares slices k and l element by element in (o, i) order.
    auto compare = [&](int64_t k, int64_t l) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int c = CompareValues(v[(o * n + k) * inner + i], v[(o * n + l) * inner + i]);
          if (c != 0) return c;
        }
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    // Groups of equal slices, each led by its first occurrence (stable sort).
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    for (size_t j = 0; j < order.size(); ++j) {
      if (j == 0 || compare(order[j - 1], order[j]) != 0) {
        r.indices.push_back(order[j]);
        r.counts.push_back(0);
      }
      group_of[order[j]] = static_cast<int64_t>(r.indices.size()) - 1;
      ++r.counts.back();
    }
    std::vector<int64_t> rank(r.indices.size());
    std::iota(rank.begin(), rank.end(), 0);
    if (*sorted == 0) {
      // Order of first occurrence: sort the groups by their first position.
      std::vector<int64_t> by_first(r.indices.size());
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return r.indices[a] < r.indices[b]; });
      std::vector<int64_t> indices, counts;
      for (size_t j = 0; j < by_first.size(); ++j) {
        rank[by_first[j]] = static_cast<int64_t>(j);
        indices.push_back(r.indices[by_first[j]]);
        counts.push_back(r.counts[by_first[j]]);
      }
      r.indices = std::move(indices);
      r.counts = std::move(counts);
    }
    r.inverse.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) r.inverse[k] = rank[group_of[k]];
    const int64_t u = static_cast<int64_t>(r.indices.size());
    r.y.resize(static_cast<size_t>(outer * u * inner) * es);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < u; ++j) {
        std::memcpy(r.y.data() + static_cast<size_t>((o * u + j) * inner) * es,
                    static_cast<const uint8_t*>(x.data) + static_cast<size_t>((o * n + r.indices[j]) * inner) * es,
                    static_cast<size_t>(inner) * es);
      }
    }
    return OkStatus();
  });
  REMEX_RETURN_IF_ERROR(st);
  const int64_t u = static_cast<int64_t>(r.indices.size());
  if (axis) {
    r.y_shape = x.shape;
    r.y_shape[*axis] = u;
  } else {
    r.y_shape = {u};
  }
  return r;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferUnique(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError("Unique", "expects X");
  REMEX_ASSIGN_OR_RETURN(UniqueResult r, UniqueOf(attrs, in[0]));
  const int64_t u = static_cast<int64_t>(r.indices.size());
  return std::vector<TensorInfo>{{in[0].dtype, r.y_shape},
                                 {DType::kInt64, {u}},
                                 {DType::kInt64, {static_cast<int64_t>(r.inverse.size())}},
                                 {DType::kInt64, {u}}};
}

OpDef UniqueDef() {
  OpDef def;
  def.name = "Unique";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 1;
  def.max_outputs = 4;
  def.input_deps = {ShapeDep::kData};
  def.infer = InferUnique;
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    const DType dt = in.empty() ? DType::kUndefined : in[0];
    return std::vector<DType>{dt, DType::kInt64, DType::kInt64, DType::kInt64};
  };
  return def;
}

class UniqueKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(UniqueResult r, UniqueOf(attrs(), ToShapeArgs(in)[0]));
    const std::vector<int64_t>* ints[] = {&r.indices, &r.inverse, &r.counts};
    if (!r.y.empty()) std::memcpy(out[0].data, r.y.data(), r.y.size());
    for (size_t i = 1; i < out.size() && i < 4; ++i) {
      if (!ints[i - 1]->empty()) std::memcpy(out[i].data, ints[i - 1]->data(), ints[i - 1]->size() * sizeof(int64_t));
    }
    return OkStatus();
  }
};

}  // namespace

Status AddUniqueOpDefs(KernelRegistry& registry) { return registry.AddOp(UniqueDef()); }

Status AddUniqueCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<UniqueKernel>(registry, "Unique");
}

}  // namespace remex::kernels::internal
