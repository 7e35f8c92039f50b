// Range, ConstantOfShape, Size and OneHot: ops whose output is computed from scalars and shapes
// rather than moved from an input's elements. Shape functions and CPU kernels.
// ONNX semantics, opsets 7-17; every dtype Remex holds unless noted. Index-like inputs
// (pads, shape) are int64; int32 is accepted.
//
// Range(start, limit, delta) -> 1-D [max(ceil((limit - start) / delta), 0)] with
//   output[i] = start + i * delta. Three scalar kData inputs of one numeric dtype;
//   delta must be non-zero. Integer arithmetic wraps; float counts are computed as
//   ONNX's reference does ((limit - start) in the dtype, the division in double).
// ConstantOfShape(shape) -> a tensor of extent `shape` (1-D int64 kData input,
//   non-negative values; an empty shape gives a scalar) filled with `value`. The ONNX
//   attribute `value` is a one-element tensor; Remex carries it as the ints
//   {onnx_dtype, bits}, where bits holds the element's bytes (memcpy into a zeroed
//   int64). A float `value` means float32, an int `value` int64; without `value` the
//   output is float32 zeros.
// Size(data) -> int64 scalar: the element count. Reads only data's shape.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<OneHotView> OneHotViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "OneHot";
  if (in.size() != 3 || !in[0].present || !in[1].present || !in[2].present) {
    return OpError(op, "expects indices, depth and values");
  }
  if (!IsNumericType(in[0].dtype)) return OpError(op, "unsupported indices dtype " + std::string(DTypeName(in[0].dtype)));
  if (!in[1].data) return OpError(op, "depth must be known (a constant or a shape computation)");
  if (NumElements(in[1].shape).value_or(0) != 1 || !IsNumericType(in[1].dtype)) {
    return OpError(op, "depth must be one number, got " + std::string(DTypeName(in[1].dtype)) + " " +
                           ShapeToString(in[1].shape));
  }
  if (NumElements(in[2].shape).value_or(0) != 2) {
    return OpError(op, "values must hold [off_value, on_value], got " + ShapeToString(in[2].shape));
  }
  double depth = 0;
  REMEX_RETURN_IF_ERROR(DispatchNumeric(op, in[1].dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T d;
    std::memcpy(&d, in[1].data, sizeof(T));
    depth = static_cast<double>(Load(d));
    return OkStatus();
  }));
  if (!(depth >= 1) || depth > static_cast<double>(std::numeric_limits<int32_t>::max())) {
    return OpError(op, "depth must be in [1, 2^31), got " + std::to_string(depth));
  }
  OneHotView v;
  v.depth = static_cast<int64_t>(depth);  // ONNX: a float depth is truncated.
  const int64_t rank = static_cast<int64_t>(in[0].shape.size()) + 1;
  StatusOr<int64_t> axis = attrs.Int("axis", -1);
  if (!axis.ok()) return OpError(op, axis.status().message());
  REMEX_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(op, *axis, rank));
  for (int64_t d = 0; d < a; ++d) v.outer *= in[0].shape[d];
  for (int64_t d = a; d + 1 < rank; ++d) v.inner *= in[0].shape[d];
  v.shape = in[0].shape;
  v.shape.insert(v.shape.begin() + a, v.depth);
  return v;
}
namespace {

// ---------------------------------------------------------------------------
// Range: start, limit, delta.

template <typename T>
StatusOr<int64_t> RangeCount(T start, T limit, T delta) {
  constexpr std::string_view op = "Range";
  if constexpr (std::is_integral_v<T>) {
    if (delta == 0) return OpError(op, "delta must be non-zero");
    const __int128 diff = static_cast<__int128>(limit) - static_cast<__int128>(start);
    const __int128 d = delta;
    __int128 n = diff / d;  // Truncates toward zero; ceil for a positive quotient.
    if (n * d != diff && ((diff > 0) == (d > 0))) ++n;
    if (n < 0) n = 0;
    if (n > std::numeric_limits<int64_t>::max()) return OpError(op, "too many elements");
    return static_cast<int64_t>(n);
  } else {
    const double de = Load(delta);
    if (de == 0) return OpError(op, "delta must be non-zero");
    // limit - start in the dtype, as ONNX's reference computes it.
    const double diff = static_cast<double>(Load(Store<T>(Load(limit) - Load(start))));
    const double n = std::ceil(diff / de);
    if (std::isnan(n)) return OpError(op, "start, limit and delta must be finite");
    if (n <= 0) return 0;
    if (!(n < 9.2e18)) return OpError(op, "too many elements");
    return static_cast<int64_t>(n);
  }
}

StatusOr<std::vector<TensorInfo>> InferRange(const Attributes&, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Range";
  const DType dt = in[0].dtype;
  const char* names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    if (!in[i].present) return OpError(op, std::string(names[i]) + " is absent");
    if (in[i].dtype != dt) {
      return OpError(op, "start, limit and delta must have one dtype, got " +
                             std::string(DTypeName(dt)) + " and " +
                             std::string(DTypeName(in[i].dtype)));
    }
    std::optional<int64_t> n = NumElements(in[i].shape);
    if (!n || *n != 1) return OpError(op, std::string(names[i]) + " must be a scalar");
    if (in[i].data == nullptr) return OpError(op, std::string(names[i]) + " has no data");
  }
  if (!IsNumericType(dt)) {
    return OpError(op, "unsupported dtype " + std::string(DTypeName(dt)));
  }
  int64_t count = 0;
  Status st = DispatchNumeric(op, dt, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto get = [&](int i) { return static_cast<const T*>(in[i].data)[0]; };
    REMEX_ASSIGN_OR_RETURN(count, RangeCount<T>(get(0), get(1), get(2)));
    return OkStatus();
  });
  REMEX_RETURN_IF_ERROR(st);
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, dt, Shape{count}));
  return std::vector<TensorInfo>{{dt, Shape{count}}};
}

OpDef RangeDef() {
  OpDef def;
  def.name = "Range";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 3;
  def.input_deps = {ShapeDep::kData, ShapeDep::kData, ShapeDep::kData};
  def.infer = InferRange;
  return def;
}

class RangeKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = out[0].shape[0];
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T start = DataAs<const T>(in[0])[0];
      const T delta = DataAs<const T>(in[2])[0];
      T* y = DataAs<T>(out[0]);
      if constexpr (std::is_integral_v<T>) {
        // Wrapping arithmetic: start + i * delta without signed overflow.
        const uint64_t s = static_cast<uint64_t>(start), d = static_cast<uint64_t>(delta);
        for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(s + static_cast<uint64_t>(i) * d);
      } else {
        using C = ComputeType<T>;
        const C s = Load(start), d = Load(delta);
        for (int64_t i = 0; i < n; ++i) y[i] = Store<T>(s + static_cast<C>(i) * d);
      }
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// ConstantOfShape: shape.

}  // namespace

StatusOr<FillValue> FillValueOf(const Attributes& attrs) {
  constexpr std::string_view op = "ConstantOfShape";
  FillValue v;
  auto it = attrs.all().find("value");
  if (it == attrs.all().end()) return v;
  if (const float* f = std::get_if<float>(&it->second)) {
    std::memcpy(&v.bits, f, sizeof(float));
  } else if (const int64_t* i = std::get_if<int64_t>(&it->second)) {
    v.dtype = DType::kInt64;
    std::memcpy(&v.bits, i, sizeof(int64_t));
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&it->second)) {
    if (ints->size() != 2) {
      return OpError(op, "value must be {dtype, bits}, got " + Str(static_cast<int64_t>(ints->size())) +
                             " ints");
    }
    const int64_t t = (*ints)[0];
    std::optional<DType> dt;
    if (t > 0 && t <= std::numeric_limits<int32_t>::max()) dt = DTypeFromOnnx(static_cast<int32_t>(t));
    if (!dt) return OpError(op, "value has an unsupported dtype " + Str(t));
    v.dtype = *dt;
    std::memcpy(&v.bits, &(*ints)[1], sizeof(int64_t));
    // Only the element's bytes may be set.
    uint64_t check = 0;
    std::memcpy(&check, &v.bits, DTypeSize(v.dtype));
    if (check != v.bits) return OpError(op, "value bits do not fit its dtype");
  } else {
    return OpError(op, "value must be a one-element tensor");
  }
  return v;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferConstantOfShape(const Attributes& attrs,
                                                       std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "ConstantOfShape";
  REMEX_ASSIGN_OR_RETURN(FillValue v, FillValueOf(attrs));
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(op, "shape", in[0]));
  for (int64_t d : shape) {
    if (d < 0) return OpError(op, "shape value " + Str(d) + " is negative");
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, shape));
  return std::vector<TensorInfo>{{v.dtype, shape}};
}

OpDef ConstantOfShapeDef() {
  OpDef def;
  def.name = "ConstantOfShape";
  def.since_version = 9;
  def.input_deps = {ShapeDep::kData};
  def.infer = InferConstantOfShape;
  def.output_dtypes = [](const Attributes& attrs, std::span<const DType>) {
    auto v = FillValueOf(attrs);
    return std::vector<DType>{v.ok() ? v->dtype : DType::kUndefined};
  };
  return def;
}

class ConstantOfShapeKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ConstantOfShapeKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(FillValueOf(attrs).status());
    return std::make_unique<ConstantOfShapeKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef>, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(FillValue v, FillValueOf(attrs()));
    const int64_t n = *NumElements(out[0].shape);
    return DispatchBySize(op(), out[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      E e;
      std::memcpy(&e, &v.bits, sizeof(E));
      E* y = DataAs<E>(out[0]);
      std::fill(y, y + n, e);
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// Size.

StatusOr<std::vector<TensorInfo>> InferSize(const Attributes&, std::span<const ShapeFnArg> in) {
  REMEX_RETURN_IF_ERROR(CheckedNumElements("Size", in[0].shape).status());
  return std::vector<TensorInfo>{{DType::kInt64, Shape{}}};
}

OpDef SizeDef() {
  OpDef def;
  def.name = "Size";
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferSize;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kInt64}; };
  def.reads_shapes_only = true;
  return def;
}

class SizeKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    DataAs<int64_t>(out[0])[0] = *NumElements(in[0].shape);
    return OkStatus();
  }
};

// OneHot(indices, depth, values) (opset 9/11): output[..., k, ...] at `axis` is
// values[1] where k equals the index (negative indices count from depth), values[0]
// elsewhere; an index outside [-depth, depth) leaves its row all values[0]. indices of
// any numeric dtype (floats truncated), depth a one-element number read on the host,
// values [off, on] of the output's dtype.
OpDef OneHotDef() {
  OpDef def;
  def.name = "OneHot";
  def.since_version = 9;
  def.min_inputs = def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kShape};
  def.infer = [](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(OneHotView v, OneHotViewOf(attrs, in));
    REMEX_RETURN_IF_ERROR(CheckOutputSize("OneHot", in[2].dtype, v.shape));
    return std::vector<TensorInfo>{{in[2].dtype, v.shape}};
  };
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.size() > 2 ? in[2] : DType::kUndefined};
  };
  return def;
}

class OneHotKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(OneHotView v, OneHotViewOf(attrs(), ToShapeArgs(in)));
    const size_t es = DTypeSize(out[0].dtype);
    const char* off = static_cast<const char*>(in[2].data);
    const char* on = off + es;
    char* y = static_cast<char*>(out[0].data);
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* idx = DataAs<const T>(in[0]);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t k = 0; k < v.depth; ++k) {
          for (int64_t i = 0; i < v.inner; ++i) {
            // Truncated toward zero; NaN and values outside [-depth, depth) match no k.
            const double d = static_cast<double>(Load(idx[o * v.inner + i]));
            int64_t index = -1;
            if (d > -static_cast<double>(v.depth) - 1 && d < static_cast<double>(v.depth)) {
              index = static_cast<int64_t>(d);
              if (index < 0) index += v.depth;
            }
            std::memcpy(y + ((o * v.depth + k) * v.inner + i) * es, index == k ? on : off, es);
          }
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddGenerateOpDefs(KernelRegistry& registry) {
  for (OpDef def : {RangeDef(), ConstantOfShapeDef(), SizeDef(), OneHotDef()}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(def)));
  }
  return OkStatus();
}

Status AddGenerateCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<RangeKernel>(registry, "Range"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ConstantOfShapeKernel>(registry, "ConstantOfShape"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<SizeKernel>(registry, "Size"));
  return AddCpuKernel<OneHotKernel>(registry, "OneHot");
}

}  // namespace remex::kernels::internal
