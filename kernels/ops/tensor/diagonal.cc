// Trilu and EyeLike: shape functions and CPU kernels (ONNX semantics;
// https://onnx.ai/onnx/operators/onnx__Trilu.html, onnx__EyeLike.html).
//
// Trilu(input, [k]) -> input's shape and dtype (opset 14). input has rank >= 2 and is
//   a batch of [N, M] matrices (its last two dims); k (default 0) is an optional
//   one-element int64 input, read on the host (ShapeDep::kData). upper = 1 (the
//   default) keeps the elements with j - i >= k, upper = 0 those with j - i <= k, and
//   zeroes the rest. Every dtype Remex holds.
// EyeLike(input) -> 2-D, input's shape (opset 9): ones on the diagonal j - i = k
//   (attribute k, default 0), zeros elsewhere. Attribute dtype (an ONNX TensorProto
//   data type) gives the output's dtype, the input's when absent. Only the input's
//   shape is read.

#include <cstring>
#include <string>
#include <vector>

#include "kernels/ops/tensor/diagonal_ops.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

StatusOr<TriluView> TriluViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Trilu";
  if (in.empty() || in.size() > 2 || !in[0].present) return OpError(op, "expects an input and an optional k");
  const Shape& s = in[0].shape;
  if (s.size() < 2) return OpError(op, "input must have rank >= 2, got " + ShapeToString(s));
  TriluView v;
  StatusOr<int64_t> upper = attrs.Int("upper", 1);
  if (!upper.ok()) return OpError(op, upper.status().message());
  if (*upper != 0 && *upper != 1) return OpError(op, "upper must be 0 or 1, got " + std::to_string(*upper));
  v.upper = *upper == 1;
  if (in.size() == 2 && in[1].present) {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> k, ReadIndexTensor(op, "k", in[1].dtype, in[1].shape, in[1].data));
    if (k.size() != 1) return OpError(op, "k must hold one value, got " + std::to_string(k.size()));
    v.k = k[0];
  }
  v.rows = s[s.size() - 2];
  v.cols = s[s.size() - 1];
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, s));
  v.batch = v.rows * v.cols == 0 ? 0 : total / (v.rows * v.cols);
  return v;
}

StatusOr<EyeLikeAttrs> EyeLikeAttrsOf(const Attributes& attrs, DType input_dtype) {
  constexpr std::string_view op = "EyeLike";
  EyeLikeAttrs a;
  a.dtype = input_dtype;
  StatusOr<int64_t> k = attrs.Int("k", 0);
  if (!k.ok()) return OpError(op, k.status().message());
  a.k = *k;
  if (attrs.all().count("dtype")) {
    StatusOr<int64_t> t = attrs.Int("dtype");
    if (!t.ok()) return OpError(op, t.status().message());
    std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(*t));
    if (!dt) return OpError(op, "dtype " + std::to_string(*t) + " is not a data type Remex holds");
    a.dtype = *dt;
  }
  return a;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferTrilu(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_RETURN_IF_ERROR(TriluViewOf(attrs, in).status());
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

OpDef TriluDef() {
  OpDef def;
  def.name = "Trilu";
  def.since_version = 14;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferTrilu;
  return def;
}

class TriluKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<TriluKernel>> Create(const OpDef& def, const Attributes& attrs) {
    StatusOr<int64_t> upper = attrs.Int("upper", 1);
    if (!upper.ok()) return OpError("Trilu", upper.status().message());
    return std::make_unique<TriluKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(TriluView v, TriluViewOf(attrs(), ToShapeArgs(in)));
    const size_t es = DTypeSize(in[0].dtype);
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    for (int64_t b = 0; b < v.batch; ++b) {
      for (int64_t i = 0; i < v.rows; ++i) {
        for (int64_t j = 0; j < v.cols; ++j) {
          const size_t off = static_cast<size_t>((b * v.rows + i) * v.cols + j) * es;
          if (diagonal::TriluKeeps(v.upper, v.k, i, j)) {
            std::memcpy(y + off, x + off, es);
          } else {
            std::memset(y + off, 0, es);
          }
        }
      }
    }
    return OkStatus();
  }
};

StatusOr<std::vector<TensorInfo>> InferEyeLike(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "EyeLike";
  if (in.size() != 1 || !in[0].present) return OpError(op, "expects 1 input");
  if (in[0].shape.size() != 2) return OpError(op, "input must be 2-D, got " + ShapeToString(in[0].shape));
  REMEX_ASSIGN_OR_RETURN(EyeLikeAttrs a, EyeLikeAttrsOf(attrs, in[0].dtype));
  return std::vector<TensorInfo>{{a.dtype, in[0].shape}};
}

OpDef EyeLikeDef() {
  OpDef def;
  def.name = "EyeLike";
  def.since_version = 9;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kShape};
  def.reads_shapes_only = true;
  def.infer = InferEyeLike;
  def.output_dtypes = [](const Attributes& attrs, std::span<const DType> in) {
    StatusOr<EyeLikeAttrs> a = EyeLikeAttrsOf(attrs, in.empty() ? DType::kUndefined : in[0]);
    return std::vector<DType>{a.ok() ? a->dtype : DType::kUndefined};
  };
  return def;
}

class EyeLikeKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<EyeLikeKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(EyeLikeAttrsOf(attrs, DType::kFloat32).status());
    return std::make_unique<EyeLikeKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(EyeLikeAttrs a, EyeLikeAttrsOf(attrs(), in[0].dtype));
    const int64_t rows = out[0].shape[0], cols = out[0].shape[1];
    return DispatchAllTypes(op(), a.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* y = DataAs<T>(out[0]);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = Store<T>(ComputeType<T>(diagonal::EyeLikeOne(a.k, i, j) ? 1 : 0));
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddDiagonalOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(TriluDef()));
  return registry.AddOp(EyeLikeDef());
}

Status AddDiagonalCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<TriluKernel>(registry, "Trilu"));
  return AddCpuKernel<EyeLikeKernel>(registry, "EyeLike");
}

}  // namespace remex::kernels::internal
