// GatherND and ScatterND: shape functions and CPU kernels (ONNX semantics;
// https://onnx.ai/onnx/operators/onnx__GatherND.html, onnx__ScatterND.html).
//
// GatherND(data, indices) -> output (one entry from opset 11; batch_dims from opset 12,
// default 0; opset 13 adds bfloat16 only): indices are int64 of rank q >= 1 whose last
// dim k (1 <= k <= rank(data) - batch_dims) holds index tuples into data's dims
// [batch_dims, batch_dims + k); the first batch_dims dims of data and indices are equal
// (batch dims). Output: indices.shape[:-1] + data.shape[batch_dims + k:], data's dtype
// (any), each tuple's slice of data in the tuples' row-major order.
// ScatterND(data, indices, updates) -> data's shape and dtype (one entry from opset 11;
// `reduction` from opset 16): output = data, then update slice j (updates of shape
// indices.shape[:-1] + data.shape[k:], data's dtype) is written to (reduction "none",
// the default), added to ("add") or multiplied into ("mul") the slice that index tuple j
// names. The updates apply in row-major order of the tuples, so with duplicate tuples
// "none" keeps the last one (ONNX leaves it undefined) and "add"/"mul" accumulate in
// that order. "add" and "mul" take numeric dtypes (integers wrap, float16 computes in
// float32); "none" every dtype.
// Both: an index counts from the end when negative and must lie in [-extent, extent)
// of its dim: otherwise INVALID_ARGUMENT "... out of range ...", before ScatterND
// writes anything. Other errors: INVALID_ARGUMENT "<op>: ..." (GatherNdViewOf).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/ops/tensor/index_ops.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<GatherNdView> GatherNdViewOf(std::string_view op, int64_t batch_dims, const ShapeFnArg& data,
                                      const ShapeFnArg& indices) {
  const Shape& s = data.shape;
  const Shape& is = indices.shape;
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t q = static_cast<int64_t>(is.size());
  if (r == 0) return OpError(op, "data must have rank >= 1");
  if (indices.dtype != DType::kInt64) {
    return OpError(op, "indices must be int64, got " + std::string(DTypeName(indices.dtype)));
  }
  if (q == 0) return OpError(op, "indices must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return OpError(op, "batch_dims " + Str(batch_dims) + " must be in [0, " + Str(std::min(r, q)) +
                           ") for data " + ShapeToString(s) + " and indices " + ShapeToString(is));
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (is[d] != s[d]) {
      return OpError(op, "batch dim " + Str(d) + " differs: data " + ShapeToString(s) + ", indices " +
                             ShapeToString(is));
    }
  }
  const int64_t k = is[q - 1];
  if (k < 1 || k > r - batch_dims) {
    return OpError(op, "the last dim of indices " + ShapeToString(is) + " must be in [1, " +
                           Str(r - batch_dims) + "] for data " + ShapeToString(s) + " and batch_dims " +
                           Str(batch_dims));
  }
  GatherNdView v;
  v.k = static_cast<int>(k);
  const std::vector<int64_t> strides = RowMajorStrides(s);
  v.batch_stride = batch_dims == 0 ? *NumElements(s) : strides[batch_dims - 1];
  for (int64_t d = 0; d < batch_dims; ++d) v.batch *= s[d];
  v.tuples = 1;
  for (int64_t d = batch_dims; d < q - 1; ++d) v.tuples *= is[d];
  for (int64_t d = batch_dims + k; d < r; ++d) v.slice *= s[d];
  for (int64_t d = batch_dims; d < batch_dims + k; ++d) {
    v.extents.push_back(s[d]);
    v.strides.push_back(strides[d]);
  }
  v.shape.assign(is.begin(), is.end() - 1);
  v.shape.insert(v.shape.end(), s.begin() + batch_dims + k, s.end());
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, data.dtype, v.shape));
  return v;
}

StatusOr<ScatterReduction> ScatterNdReductionOf(const Attributes& attrs, DType dtype) {
  constexpr std::string_view op = "ScatterND";
  StatusOr<std::string> reduction = attrs.String("reduction", "none");
  if (!reduction.ok()) return OpError(op, reduction.status().message());
  ScatterReduction r = ScatterReduction::kNone;
  if (*reduction == "add") {
    r = ScatterReduction::kAdd;
  } else if (*reduction == "mul") {
    r = ScatterReduction::kMul;
  } else if (*reduction != "none") {
    return OpError(op, "unknown reduction '" + *reduction + "' (none, add or mul)");
  }
  if (r != ScatterReduction::kNone && dtype != DType::kUndefined && !IsNumericType(dtype)) {
    return OpError(
        op, "reduction '" + *reduction + "' needs a numeric dtype, got " + std::string(DTypeName(dtype)));
  }
  return r;
}

namespace {

// INVALID_ARGUMENT "<op>: index tuple <j> (i0, i1) is out of range for dims of extents (e0, e1)".
Status TupleOutOfRange(std::string_view op, const GatherNdView& v, const int64_t* tuple, int64_t j) {
  std::string values, extents;
  for (int t = 0; t < v.k; ++t) {
    if (t > 0) {
      values += ", ";
      extents += ", ";
    }
    values += Str(tuple[t]);
    extents += Str(v.extents[t]);
  }
  return OpError(op, "index tuple " + Str(j) + " (" + values + ") is out of range for dims of extents (" +
                         extents + ")");
}

// The element offset in data of every index tuple (batch blocks included), checked.
StatusOr<std::vector<int64_t>> TupleOffsets(std::string_view op, const GatherNdView& v,
                                            const int64_t* indices) {
  const int64_t rows = v.batch * v.tuples;
  std::vector<int64_t> offsets(static_cast<size_t>(rows));
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t* tuple = indices + j * v.k;
    const int64_t offset = index::NdOffset(tuple, v.k, v.extents.data(), v.strides.data());
    if (offset < 0) return TupleOutOfRange(op, v, tuple, j);
    offsets[j] = (j / v.tuples) * v.batch_stride + offset;
  }
  return offsets;
}

// ---------------------------------------------------------------------------
// GatherND.

StatusOr<GatherNdView> GatherNdOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "GatherND";
  if (in.size() != 2 || !in[0].present || !in[1].present) return OpError(op, "expects data and indices");
  REMEX_ASSIGN_OR_RETURN(int64_t batch_dims, IntAttr(op, attrs, "batch_dims", 0));
  return GatherNdViewOf(op, batch_dims, in[0], in[1]);
}

OpDef GatherNdDef() {
  OpDef def;
  def.name = "GatherND";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(GatherNdView v, GatherNdOf(attrs, in));
    return std::vector<TensorInfo>{{in[0].dtype, std::move(v.shape)}};
  };
  return def;
}

class GatherNdKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(GatherNdView v, GatherNdOf(attrs(), ToShapeArgs(in)));
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, TupleOffsets(op(), v, DataAs<const int64_t>(in[1])));
    const size_t es = DTypeSize(in[0].dtype);
    const size_t row = static_cast<size_t>(v.slice) * es;
    if (row == 0) return OkStatus();
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    for (size_t j = 0; j < offsets.size(); ++j) std::memcpy(y + j * row, x + offsets[j] * es, row);
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// ScatterND.

StatusOr<GatherNdView> ScatterNdOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "ScatterND";
  if (in.size() != 3 || !in[0].present || !in[1].present || !in[2].present) {
    return OpError(op, "expects data, indices and updates");
  }
  REMEX_ASSIGN_OR_RETURN(GatherNdView v, GatherNdViewOf(op, 0, in[0], in[1]));
  if (in[2].shape != v.shape || in[2].dtype != in[0].dtype) {
    return OpError(op, "updates must be " + std::string(DTypeName(in[0].dtype)) + " " +
                           ShapeToString(v.shape) + ", got " + std::string(DTypeName(in[2].dtype)) + " " +
                           ShapeToString(in[2].shape));
  }
  REMEX_RETURN_IF_ERROR(ScatterNdReductionOf(attrs, in[0].dtype).status());
  return v;
}

OpDef ScatterNdDef() {
  OpDef def;
  def.name = "ScatterND";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 3;
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_RETURN_IF_ERROR(ScatterNdOf(attrs, in).status());
    return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
  };
  return def;
}

class ScatterNdKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ScatterNdKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(ScatterNdReductionOf(attrs, DType::kUndefined).status());
    return std::make_unique<ScatterNdKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(GatherNdView v, ScatterNdOf(attrs(), ToShapeArgs(in)));
    REMEX_ASSIGN_OR_RETURN(ScatterReduction reduction, ScatterNdReductionOf(attrs(), in[0].dtype));
    // Every target, checked before anything is written.
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, TupleOffsets(op(), v, DataAs<const int64_t>(in[1])));
    const size_t es = DTypeSize(in[0].dtype);
    if (out[0].data != in[0].data) {
      std::memcpy(out[0].data, in[0].data, static_cast<size_t>(*NumElements(in[0].shape)) * es);
    }
    const int64_t slice = v.slice;
    if (reduction == ScatterReduction::kNone) {
      char* y = static_cast<char*>(out[0].data);
      const char* u = static_cast<const char*>(in[2].data);
      const size_t row = static_cast<size_t>(slice) * es;
      for (size_t j = 0; j < offsets.size() && row > 0; ++j)
        std::memcpy(y + offsets[j] * es, u + j * row, row);
      return OkStatus();
    }
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* y = DataAs<T>(out[0]);
      const T* u = DataAs<const T>(in[2]);
      const bool add = reduction == ScatterReduction::kAdd;
      for (size_t j = 0; j < offsets.size(); ++j) {
        for (int64_t e = 0; e < slice; ++e) {
          T& dst = y[offsets[j] + e];
          const T src = u[static_cast<int64_t>(j) * slice + e];
          if constexpr (std::is_integral_v<T>) {  // Wrapping, in uint64.
            const uint64_t a = static_cast<uint64_t>(dst), b = static_cast<uint64_t>(src);
            dst = static_cast<T>(add ? a + b : a * b);
          } else {
            dst = Store<T>(add ? scalar::Add()(Load(dst), Load(src)) : scalar::Mul()(Load(dst), Load(src)));
          }
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddGatherNdOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(GatherNdDef()));
  return registry.AddOp(ScatterNdDef());
}

Status AddGatherNdCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<GatherNdKernel>(registry, "GatherND"));
  return AddCpuKernel<ScatterNdKernel>(registry, "ScatterND");
}

}  // namespace remex::kernels::internal
