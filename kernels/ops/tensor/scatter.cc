// ScatterElements and Scatter: shape functions and CPU kernels (ONNX semantics;
// https://onnx.ai/onnx/operators/onnx__ScatterElements.html, onnx__Scatter.html).
//
// ScatterElements(data, indices, updates) -> data's shape and dtype (opsets 11-17):
//   output = data, then for every coordinate c of indices, output[c with c[axis]
//   replaced by indices[c]] is set to updates[c] (reduction "none", the default), or
//   has updates[c] added ("add", opset 16) or multiplied in ("mul", opset 16). indices
//   are int32 or int64 of data's rank, each dim at most data's (any extent along the
//   axis), values in [-n, n) for n = data.shape[axis] (out of range: INVALID_ARGUMENT);
//   updates have the indices' shape and data's dtype. The updates apply in row-major
//   order of the indices, so with duplicate indices "none" keeps the last one (ONNX
//   leaves it undefined) and "add"/"mul" accumulate in that order. "add" and "mul" take
//   numeric dtypes (integers wrap); "none" every dtype.
// Scatter (opsets 9-10; ONNX deprecates it from 11, Remex keeps running it) is
// ScatterElements without `reduction`.

#include <cstring>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<ScatterView> ScatterViewOf(std::string_view op, const Attributes& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() != 3 || !in[0].present || !in[1].present || !in[2].present) {
    return OpError(op, "expects data, indices and updates");
  }
  if (in[2].shape != in[1].shape || in[2].dtype != in[0].dtype) {
    return OpError(op, "updates must be " + std::string(DTypeName(in[0].dtype)) + " " + ShapeToString(in[1].shape) +
                           ", got " + std::string(DTypeName(in[2].dtype)) + " " + ShapeToString(in[2].shape));
  }
  StatusOr<int64_t> a = attrs.Int("axis", 0);
  if (!a.ok()) return OpError(op, a.status().message());
  ScatterView v;
  REMEX_ASSIGN_OR_RETURN(v.axis, CheckElementsIndices(op, in[0], in[1], *a));
  StatusOr<std::string> reduction = attrs.String("reduction", "none");
  if (!reduction.ok()) return OpError(op, reduction.status().message());
  if (*reduction == "add") {
    v.reduction = ScatterReduction::kAdd;
  } else if (*reduction == "mul") {
    v.reduction = ScatterReduction::kMul;
  } else if (*reduction != "none") {
    return OpError(op, "unknown reduction '" + *reduction + "' (none, add or mul)");
  }
  if (v.reduction != ScatterReduction::kNone && !IsNumericType(in[0].dtype)) {
    return OpError(op, "reduction '" + *reduction + "' needs a numeric dtype, got " +
                           std::string(DTypeName(in[0].dtype)));
  }
  return v;
}

namespace {

OpDef ScatterDef(std::string name, int since) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.min_inputs = def.max_inputs = 3;
  def.infer = [name](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_RETURN_IF_ERROR(ScatterViewOf(name, attrs, in).status());
    return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
  };
  return def;
}

class ScatterKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(ScatterView v, ScatterViewOf(op(), attrs(), ToShapeArgs(in)));
    const Shape& s = in[0].shape;
    const Shape& is = in[1].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    const std::vector<int64_t> strides = RowMajorStrides(s);
    const int64_t n = *NumElements(is);
    const int64_t extent = s[v.axis];
    // The target offset of every update, checked before anything is written.
    std::vector<int64_t> target(static_cast<size_t>(n));
    std::vector<int64_t> c(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t idx = in[1].dtype == DType::kInt32 ? DataAs<const int32_t>(in[1])[i] : DataAs<const int64_t>(in[1])[i];
      if (idx < -extent || idx >= extent) {
        return OpError(op(), "index " + std::to_string(idx) + " is out of range for axis " + std::to_string(v.axis) +
                                 " of extent " + std::to_string(extent));
      }
      if (idx < 0) idx += extent;
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d) offset += (d == v.axis ? idx : c[d]) * strides[d];
      target[i] = offset;
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++c[d] < is[d]) break;
        c[d] = 0;
      }
    }
    const size_t es = DTypeSize(in[0].dtype);
    if (out[0].data != in[0].data) {
      std::memcpy(out[0].data, in[0].data, static_cast<size_t>(*NumElements(s)) * es);
    }
    if (v.reduction == ScatterReduction::kNone) {
      char* y = static_cast<char*>(out[0].data);
      const char* u = static_cast<const char*>(in[2].data);
      for (int64_t i = 0; i < n; ++i) std::memcpy(y + target[i] * es, u + i * es, es);
      return OkStatus();
    }
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* y = DataAs<T>(out[0]);
      const T* u = DataAs<const T>(in[2]);
      const bool add = v.reduction == ScatterReduction::kAdd;
      for (int64_t i = 0; i < n; ++i) {
        T& dst = y[target[i]];
        if constexpr (std::is_integral_v<T>) {  // Wrapping, in uint64.
          const uint64_t a = static_cast<uint64_t>(dst), b = static_cast<uint64_t>(u[i]);
          dst = static_cast<T>(add ? a + b : a * b);
        } else {
          dst = Store<T>(add ? scalar::Add()(Load(dst), Load(u[i])) : scalar::Mul()(Load(dst), Load(u[i])));
        }
      }
      return OkStatus();
    });
  }
};

OpDef ScatterElementsDef() { return ScatterDef("ScatterElements", 11); }
OpDef LegacyScatterDef() { return ScatterDef("Scatter", 9); }

}  // namespace

Status AddScatterOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(ScatterElementsDef()));
  return registry.AddOp(LegacyScatterDef());
}

Status AddScatterCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ScatterKernel>(registry, "ScatterElements"));
  return AddCpuKernel<ScatterKernel>(registry, "Scatter");
}

}  // namespace remex::kernels::internal
