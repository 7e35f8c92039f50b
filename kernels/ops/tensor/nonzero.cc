// NonZero and Compress: shape functions and CPU kernels of the ops whose output shape
// depends on an input's values (ONNX semantics;
// https://onnx.ai/onnx/operators/onnx__NonZero.html, onnx__Compress.html).
//
// NonZero(X) -> int64 [rank, nnz] (one entry from opset 9; opset 13 adds bfloat16
// only): the coordinates of X's nonzero elements in row-major order, one row per dim.
// X (any dtype) is read on the host (ShapeDep::kData). Floats compare with 0, so NaN
// is nonzero and -0.0 zero. A scalar X counts as a one-element vector: [1, nnz], as
// ONNX Runtime gives.
// Compress(input, condition) -> input's dtype (entries 9-10 and 11+): the slices along
// `axis` (the elements of the flattened input, giving a 1-D output, when axis is
// absent) whose condition entry is true, in order. condition is bool, 1-D, read on the
// host (ShapeDep::kData); positions of the input past its length are dropped, and
// entries past the input's extent must be false (INVALID_ARGUMENT "... out of range
// ..."), as numpy.compress takes them. axis: in [0, rank) from opset 9, [-rank, rank)
// from opset 11.
// Other errors: INVALID_ARGUMENT "<op>: ..."; a dtype Remex does not hold:
// UNIMPLEMENTED.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {
namespace {

// The flat indices of x's nonzero elements, ascending.
StatusOr<std::vector<int64_t>> NonZeroFlat(const ShapeFnArg& x) {
  const int64_t n = *NumElements(x.shape);
  std::vector<int64_t> flat;
  if (n == 0) return flat;
  auto collect = [&](auto is_nonzero, auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(x.data);
    for (int64_t i = 0; i < n; ++i) {
      if (is_nonzero(p[i])) flat.push_back(i);
    }
    return OkStatus();
  };
  switch (x.dtype) {
    case DType::kFloat16:  // Every bit but the sign.
      REMEX_RETURN_IF_ERROR(collect([](uint16_t b) { return (b & 0x7fff) != 0; }, TypeTag<uint16_t>{}));
      break;
    case DType::kFloat32:
      REMEX_RETURN_IF_ERROR(collect([](float v) { return v != 0.0f; }, TypeTag<float>{}));
      break;
    case DType::kFloat64:
      REMEX_RETURN_IF_ERROR(collect([](double v) { return v != 0.0; }, TypeTag<double>{}));
      break;
    default:  // Integers and bool: any set bit.
      REMEX_RETURN_IF_ERROR(DispatchBySize("NonZero", x.dtype, [&](auto tag) -> Status {
        using U = typename decltype(tag)::type;
        return collect([](U v) { return v != 0; }, tag);
      }));
      break;
  }
  return flat;
}

}  // namespace

StatusOr<std::vector<int64_t>> NonZeroCoordinates(const ShapeFnArg& x) {
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> flat, NonZeroFlat(x));
  const Shape dims = x.shape.empty() ? Shape{1} : x.shape;
  const size_t rank = dims.size();
  const size_t nnz = flat.size();
  std::vector<int64_t> coords(rank * nnz);
  for (size_t j = 0; j < nnz; ++j) {
    int64_t rest = flat[j];
    for (size_t d = rank; d-- > 0;) {
      coords[d * nnz + j] = rest % dims[d];
      rest /= dims[d];
    }
  }
  return coords;
}

StatusOr<CompressView> CompressViewOf(bool negative_axis, const Attributes& attrs,
                                      std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Compress";
  if (in.size() != 2 || !in[0].present || !in[1].present) return OpError(op, "expects input and condition");
  const ShapeFnArg& c = in[1];
  if (c.dtype != DType::kBool)
    return OpError(op, "condition must be bool, got " + std::string(DTypeName(c.dtype)));
  if (c.shape.size() != 1) return OpError(op, "condition must be 1-D, got " + ShapeToString(c.shape));
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  CompressView v;
  int64_t axis = -1;
  if (attrs.Has("axis")) {
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op, attrs, "axis", 0));
    if (!negative_axis && a < 0) {
      return OpError(op, "axis " + Str(a) + " is negative, which Compress takes from opset 11");
    }
    REMEX_ASSIGN_OR_RETURN(axis, NormalizeAxis(op, a, rank));
    for (int64_t d = 0; d < axis; ++d) v.outer *= s[d];
    v.extent = s[axis];
    for (int64_t d = axis + 1; d < rank; ++d) v.inner *= s[d];
  } else {
    v.extent = *NumElements(s);
  }
  const uint8_t* cond = static_cast<const uint8_t*>(c.data);
  for (int64_t i = 0; i < c.shape[0]; ++i) {
    if (cond[i] == 0) continue;
    if (i >= v.extent) {
      return OpError(op, "condition[" + Str(i) + "] is true, out of range for extent " + Str(v.extent));
    }
    v.kept.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(v.kept.size());
  if (axis < 0) {
    v.shape = {count};
  } else {
    v.shape = s;
    v.shape[axis] = count;
  }
  return v;
}

namespace {

// ---------------------------------------------------------------------------
// NonZero.

StatusOr<std::vector<TensorInfo>> InferNonZero(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 1 || !in[0].present) return OpError("NonZero", "expects X");
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> flat, NonZeroFlat(in[0]));
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(in[0].shape.size()));
  return std::vector<TensorInfo>{{DType::kInt64, {rank, static_cast<int64_t>(flat.size())}}};
}

OpDef NonZeroDef() {
  OpDef def;
  def.name = "NonZero";
  def.since_version = 9;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kData};
  def.infer = InferNonZero;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) {
    return std::vector<DType>{DType::kInt64};
  };
  return def;
}

class NonZeroKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> coords, NonZeroCoordinates(ToShapeArgs(in)[0]));
    if (!coords.empty()) std::memcpy(out[0].data, coords.data(), coords.size() * sizeof(int64_t));
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Compress.

// `negative_axis`: the opset-11 entry.
OpDef CompressDef(bool negative_axis) {
  OpDef def;
  def.name = "Compress";
  def.since_version = negative_axis ? 11 : 9;
  if (!negative_axis) def.end_version = 10;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = [negative_axis](const Attributes& attrs,
                              std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(CompressView v, CompressViewOf(negative_axis, attrs, in));
    return std::vector<TensorInfo>{{in[0].dtype, std::move(v.shape)}};
  };
  return def;
}

template <bool kNegativeAxis>
class CompressKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(CompressView v, CompressViewOf(kNegativeAxis, attrs(), ToShapeArgs(in)));
    const size_t row = static_cast<size_t>(v.inner) * DTypeSize(in[0].dtype);
    if (row == 0) return OkStatus();
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    for (int64_t o = 0; o < v.outer; ++o) {
      const char* block = x + static_cast<size_t>(o * v.extent) * row;
      for (int64_t k : v.kept) {
        std::memcpy(y, block + static_cast<size_t>(k) * row, row);
        y += row;
      }
    }
    return OkStatus();
  }
};

}  // namespace

Status AddNonZeroOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(NonZeroDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(CompressDef(false)));
  return registry.AddOp(CompressDef(true));
}

Status AddNonZeroCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<NonZeroKernel>(registry, "NonZero"));
  REMEX_RETURN_IF_ERROR(
      AddCpuKernel<CompressKernel<false>>(registry, "Compress", CompressDef(false).since_version));
  return AddCpuKernel<CompressKernel<true>>(registry, "Compress", CompressDef(true).since_version);
}

}  // namespace remex::kernels::internal
