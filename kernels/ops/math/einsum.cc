// Einsum: equation parsing, shape function and CPU kernel (ONNX Einsum-12;
// https://onnx.ai/onnx/operators/onnx__Einsum.html).
//
// Einsum(Inputs...) -> Output, by the `equation` attribute (numpy's einsum notation):
// comma-separated input terms of letters (a-z, A-Z) with at most one ellipsis ("...")
// each, optionally "->" and the output term; spaces ignored. A label repeated within a
// term takes the diagonal; labels absent from the output are summed over. Without
// "->" the output is the ellipsis dims followed by the letters that appear once in the
// whole equation, in ASCII order (upper case first). The dims an ellipsis stands for
// broadcast across inputs (right-aligned, extent 1 against any); ellipsis dims missing
// from an explicit output are summed. A letter's extents must agree wherever it
// appears. 1 to 8 inputs of one dtype: float16, float32, float64 (accumulated in
// double, rounded once), int32, int64 (wrapping). At most 16 output and 16 summed
// indices. Each output element is computed on its own from the index plan
// (kernels/ops/math/einsum_ops.h, shared with the CUDA kernel). INVALID_ARGUMENT "Einsum: ..."
// for a malformed equation, a term whose labels do not match its input's rank,
// disagreeing extents, or another dtype.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops/math/einsum_ops.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kOp = "Einsum";
constexpr int kLetters = 52;   // Labels 0-25: 'A'-'Z', 26-51: 'a'-'z'.
constexpr int kEllipsis = -1;  // The ellipsis in a parsed term.
constexpr int kMaxEllipsisDims = 8;

// A term's labels (kEllipsis for "..."), or an error.
StatusOr<std::vector<int>> ParseTerm(std::string_view term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c >= 'A' && c <= 'Z') {
      labels.push_back(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      labels.push_back(26 + (c - 'a'));
    } else if (c == '.' && term.substr(i, 3) == "...") {
      if (ellipsis) return OpError(kOp, "term '" + std::string(term) + "' has more than one ellipsis");
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
    } else {
      return OpError(kOp,
                     "unexpected character '" + std::string(1, c) + "' in term '" + std::string(term) + "'");
    }
  }
  return labels;
}

std::string LabelName(int label) {
  if (label < 26) return std::string(1, static_cast<char>('A' + label));
  if (label < kLetters) return std::string(1, static_cast<char>('a' + label - 26));
  return "ellipsis dim " + std::to_string(label - kLetters);
}

}  // namespace

StatusOr<EinsumView> EinsumViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  StatusOr<std::string> eq_or = attrs.String("equation");
  if (!eq_or.ok()) return OpError(kOp, eq_or.status().message());
  std::string eq;
  for (char c : *eq_or) {
    if (c != ' ') eq += c;
  }
  if (in.empty() || in.size() > static_cast<size_t>(einsum::kMaxInputs)) {
    return OpError(kOp, "takes 1 to 8 inputs, got " + std::to_string(in.size()));
  }
  const DType dt = in[0].dtype;
  for (const ShapeFnArg& a : in) {
    if (!a.present) return OpError(kOp, "inputs must be present");
    if (a.dtype != dt) return OpError(kOp, "inputs must have one dtype");
  }
  if (!(IsFloatType(dt) || dt == DType::kInt32 || dt == DType::kInt64)) {
    return OpError(kOp, "unsupported dtype " + std::string(DTypeName(dt)));
  }
  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  const std::string lhs = explicit_out ? eq.substr(0, arrow) : eq;
  const std::string rhs = explicit_out ? eq.substr(arrow + 2) : "";
  if (rhs.find("->") != std::string::npos) return OpError(kOp, "equation has more than one '->'");
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    REMEX_ASSIGN_OR_RETURN(std::vector<int> t, ParseTerm(lhs.substr(start, comma - start)));
    terms.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != in.size()) {
    return OpError(kOp, "equation has " + std::to_string(terms.size()) + " input terms for " +
                            std::to_string(in.size()) + " inputs");
  }
  // Each input's ellipsis rank; every label's extent.
  std::vector<int64_t> ell(in.size(), 0);
  int64_t ell_rank = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t letters =
        std::count_if(terms[k].begin(), terms[k].end(), [](int l) { return l != kEllipsis; });
    const bool has_ell = letters != static_cast<int64_t>(terms[k].size());
    const int64_t rank = static_cast<int64_t>(in[k].shape.size());
    if (has_ell ? rank < letters : rank != letters) {
      return OpError(kOp, "term " + std::to_string(k) + " has " + std::to_string(letters) +
                              " labels for input " + std::to_string(k) + " of shape " +
                              ShapeToString(in[k].shape));
    }
    ell[k] = rank - letters;
    ell_rank = std::max(ell_rank, ell[k]);
  }
  if (ell_rank > kMaxEllipsisDims) return OpError(kOp, "an ellipsis covers more than 8 dims");
  const int num_labels = kLetters + static_cast<int>(ell_rank);
  std::vector<int64_t> extent(num_labels, -1);
  std::vector<int> count(num_labels, 0);
  // Per input, the label of each dim.
  std::vector<std::vector<int>> dim_labels(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    for (int l : terms[k]) {
      if (l != kEllipsis) {
        dim_labels[k].push_back(l);
        continue;
      }
      for (int64_t j = 0; j < ell[k]; ++j)
        dim_labels[k].push_back(kLetters + static_cast<int>(ell_rank - ell[k] + j));
    }
    for (size_t d = 0; d < dim_labels[k].size(); ++d) {
      const int l = dim_labels[k][d];
      const int64_t e = in[k].shape[d];
      ++count[l];
      if (extent[l] < 0 || (l >= kLetters && extent[l] == 1)) {
        extent[l] = e;
      } else if (extent[l] != e && !(l >= kLetters && e == 1)) {
        return OpError(kOp, "label " + LabelName(l) + " has extents " + std::to_string(extent[l]) + " and " +
                                std::to_string(e));
      }
    }
  }
  // The output's labels.
  std::vector<int> out_labels;
  if (explicit_out) {
    REMEX_ASSIGN_OR_RETURN(std::vector<int> t, ParseTerm(rhs));
    for (int l : t) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + static_cast<int>(j));
        continue;
      }
      if (count[l] == 0) return OpError(kOp, "output label " + LabelName(l) + " appears in no input");
      if (std::find(out_labels.begin(), out_labels.end(), l) != out_labels.end()) {
        return OpError(kOp, "output label " + LabelName(l) + " is repeated");
      }
      out_labels.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + static_cast<int>(j));
    for (int l = 0; l < kLetters; ++l) {
      if (count[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> sum_labels;
  for (int l = 0; l < num_labels; ++l) {
    if (count[l] > 0 && std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end())
      sum_labels.push_back(l);
  }
  if (out_labels.size() > static_cast<size_t>(einsum::kMaxIndices) ||
      sum_labels.size() > static_cast<size_t>(einsum::kMaxIndices)) {
    return OpError(kOp, "more than 16 output or summed indices");
  }
  EinsumView v;
  einsum::EinsumPlan& p = v.plan;
  p.num_inputs = static_cast<int>(in.size());
  p.out_rank = static_cast<int>(out_labels.size());
  p.sum_rank = static_cast<int>(sum_labels.size());
  std::vector<int> out_pos(num_labels, -1), sum_pos(num_labels, -1);
  for (int i = 0; i < p.out_rank; ++i) {
    out_pos[out_labels[i]] = i;
    // An ellipsis dim that no input has (output-only) cannot occur: ell_rank is a max.
    p.out_dims[i] = std::max<int64_t>(extent[out_labels[i]], 0);
    v.shape.push_back(p.out_dims[i]);
  }
  for (int i = 0; i < p.sum_rank; ++i) {
    sum_pos[sum_labels[i]] = i;
    p.sum_dims[i] = extent[sum_labels[i]];
  }
  REMEX_ASSIGN_OR_RETURN(p.out_total, CheckedNumElements(kOp, v.shape));
  REMEX_ASSIGN_OR_RETURN(p.sum_total, CheckedNumElements(kOp, Shape(p.sum_dims, p.sum_dims + p.sum_rank)));
  for (size_t k = 0; k < in.size(); ++k) {
    REMEX_RETURN_IF_ERROR(CheckedNumElements(kOp, in[k].shape).status());
    const std::vector<int64_t> strides = RowMajorStrides(in[k].shape);
    for (size_t d = 0; d < dim_labels[k].size(); ++d) {
      const int l = dim_labels[k][d];
      const int64_t stride = in[k].shape[d] == 1 && extent[l] != 1 ? 0 : strides[d];  // Broadcast.
      if (out_pos[l] >= 0) {
        p.out_strides[k][out_pos[l]] += stride;
      } else {
        p.sum_strides[k][sum_pos[l]] += stride;
      }
    }
  }
  return v;
}

namespace {

OpDef EinsumDef() {
  OpDef def;
  def.name = "Einsum";
  def.since_version = 12;
  def.min_inputs = 1;
  def.max_inputs = -1;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(EinsumView v, EinsumViewOf(attrs, in));
    return std::vector<TensorInfo>{{in[0].dtype, v.shape}};
  };
  return def;
}

class EinsumKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<EinsumKernel>> Create(const OpDef& def, const Attributes& attrs) {
    StatusOr<std::string> eq = attrs.String("equation");
    if (!eq.ok()) return OpError(kOp, eq.status().message());
    return std::make_unique<EinsumKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(EinsumView v, EinsumViewOf(attrs(), ToShapeArgs(in)));
    const einsum::EinsumPlan& p = v.plan;
    auto run = [&](auto tag, auto acc) -> Status {
      using T = typename decltype(tag)::type;
      using A = decltype(acc);
      std::array<const T*, einsum::kMaxInputs> x{};
      for (int k = 0; k < p.num_inputs; ++k) x[k] = DataAs<const T>(in[k]);
      T* y = DataAs<T>(out[0]);
      auto load = [&](int k, int64_t at) -> A {
        if constexpr (std::is_same_v<T, Half>) {
          return static_cast<A>(HalfToFloat(x[k][at]));
        } else {
          return static_cast<A>(x[k][at]);
        }
      };
      for (int64_t o = 0; o < p.out_total; ++o) {
        const A s = einsum::EinsumElement<A>(p, o, load);
        if constexpr (std::is_same_v<T, Half>) {
          y[o] = DoubleToHalf(s);
        } else {
          y[o] = static_cast<T>(s);
        }
      }
      return OkStatus();
    };
    switch (in[0].dtype) {
      case DType::kFloat32:
        return run(TypeTag<float>{}, double{});
      case DType::kFloat16:
        return run(TypeTag<Half>{}, double{});
      case DType::kFloat64:
        return run(TypeTag<double>{}, double{});
      case DType::kInt32:
        return run(TypeTag<int32_t>{}, uint32_t{});
      case DType::kInt64:
        return run(TypeTag<int64_t>{}, uint64_t{});
      default:
        return OpError(op(), "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
    }
  }
};

}  // namespace

Status AddEinsumOpDefs(KernelRegistry& registry) { return registry.AddOp(EinsumDef()); }

Status AddEinsumCpuKernels(KernelRegistry& registry) { return AddCpuKernel<EinsumKernel>(registry, kOp); }

}  // namespace remex::kernels::internal
