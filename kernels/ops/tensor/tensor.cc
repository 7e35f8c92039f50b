// Data-movement ops: Shape, Cast, CastLike, Slice, Concat, Reshape, Identity.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/float16_cpu.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Identity.

StatusOr<std::vector<TensorInfo>> InferIdentity(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError("Identity", "expects 1 input");
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

OpDef IdentityDef() {
  OpDef def;
  def.name = "Identity";
  def.infer = InferIdentity;
  def.traits.elementwise = def.traits.layout_agnostic = true;
  return def;
}

// Copies a whole tensor's bytes (inputs and outputs validated to match).
void CopyBytes(const TensorRef& from, const TensorRef& to) {
  const size_t bytes = static_cast<size_t>(*NumElements(from.shape)) * DTypeSize(from.dtype);
  if (bytes > 0 && from.data != to.data) std::memmove(to.data, from.data, bytes);
}

// Y = X byte for byte: Identity, and Reshape (the same bytes under a new shape).
Status CheckAllowZero(const Attributes& attrs) {
  StatusOr<int64_t> allowzero = attrs.Int("allowzero", 0);
  if (!allowzero.ok()) return OpError("Reshape", allowzero.status().message());
  if (*allowzero != 0 && *allowzero != 1) return OpError("Reshape", "allowzero must be 0 or 1");
  return OkStatus();
}

class CopyKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<CopyKernel>> Create(const OpDef& def, const Attributes& attrs) {
    if (def.name == "Reshape") REMEX_RETURN_IF_ERROR(CheckAllowZero(attrs));
    return std::make_unique<CopyKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    CopyBytes(in[0], out[0]);
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Shape (opset 15 start/end).

}  // namespace

StatusOr<ShapeRange> ShapeRangeOf(const Attributes& attrs, int64_t rank) {
  StatusOr<int64_t> start = attrs.Int("start", 0);
  if (!start.ok()) return OpError("Shape", start.status().message());
  StatusOr<int64_t> end = attrs.Int("end", rank);
  if (!end.ok()) return OpError("Shape", end.status().message());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v = v < -rank ? 0 : v + rank;
    return v > rank ? rank : v;
  };
  ShapeRange r{clamp(*start), clamp(*end)};
  if (r.end < r.start) r.end = r.start;
  return r;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferShape(const Attributes& attrs,
                                             std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError("Shape", "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(ShapeRange r,
                         ShapeRangeOf(attrs, static_cast<int64_t>(in[0].shape.size())));
  return std::vector<TensorInfo>{{DType::kInt64, Shape{r.end - r.start}}};
}

OpDef ShapeDef() {
  OpDef def;
  def.name = "Shape";
  def.infer = InferShape;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kInt64}; };
  def.reads_shapes_only = true;
  return def;
}

class ShapeKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ShapeKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(ShapeRangeOf(attrs, 0).status());
    return std::make_unique<ShapeKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(ShapeRange r,
                           ShapeRangeOf(attrs(), static_cast<int64_t>(in[0].shape.size())));
    int64_t* y = DataAs<int64_t>(out[0]);
    for (int64_t i = r.start; i < r.end; ++i) y[i - r.start] = in[0].shape[i];
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Cast.

StatusOr<DType> CastTarget(const Attributes& attrs) {
  StatusOr<int64_t> to = attrs.Int("to");
  if (!to.ok()) return OpError("Cast", to.status().message());
  if (*to == 8 || *to == 14 || *to == 15) {
    // string, complex64, complex128.
    return Unimplemented("Cast: target type " + std::to_string(*to) + " is not supported");
  }
  if (*to < std::numeric_limits<int32_t>::min() || *to > std::numeric_limits<int32_t>::max()) {
    return OpError("Cast", "invalid target type " + std::to_string(*to));
  }
  std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(*to));
  if (!dt) return OpError("Cast", "invalid target type " + std::to_string(*to));
  return *dt;
}

StatusOr<std::vector<TensorInfo>> InferCast(const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError("Cast", "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(DType to, CastTarget(attrs));
  return std::vector<TensorInfo>{{to, in[0].shape}};
}

OpDef CastDef() {
  OpDef def;
  def.name = "Cast";
  def.since_version = 6;
  def.traits.elementwise = def.traits.layout_agnostic = true;
  def.infer = InferCast;
  def.output_dtypes = [](const Attributes& attrs, std::span<const DType>) {
    auto to = CastTarget(attrs);
    return to.ok() ? std::vector<DType>{*to} : std::vector<DType>{DType::kUndefined};
  };
  return def;
}

// CastLike(input, target_type) (opset 15): Cast to target_type's dtype, whose values are
// not read.
StatusOr<std::vector<TensorInfo>> InferCastLike(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 2 || !in[0].present || !in[1].present) return OpError("CastLike", "expects 2 inputs");
  if (in[1].dtype == DType::kUndefined) return OpError("CastLike", "target_type has no data type");
  return std::vector<TensorInfo>{{in[1].dtype, in[0].shape}};
}

OpDef CastLikeDef() {
  OpDef def;
  def.name = "CastLike";
  def.since_version = 15;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape};
  def.infer = InferCastLike;
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.size() > 1 ? in[1] : DType::kUndefined};
  };
  return def;
}

// Float to integer: NaN becomes 0, out-of-range values saturate, in-range values
// truncate toward zero.
template <typename To, typename F>
To FloatToInt(F v) {
  if (std::isnan(v)) return To(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<To>::lowest());
  // 2^(digits) is exact in double: the first value above To's max.
  constexpr double hi_excl =
      std::is_signed_v<To> ? -lo
                           : 2.0 * (static_cast<double>(std::numeric_limits<To>::max() / 2 + 1));
  const double d = static_cast<double>(v);
  if (d <= lo) return std::numeric_limits<To>::lowest();
  if (d >= hi_excl) return std::numeric_limits<To>::max();
  return static_cast<To>(d);
}

template <typename From, typename To>
To Convert(From v) {
  if constexpr (std::is_same_v<From, Half>) {
    return Convert<float, To>(HalfToFloat(v));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return Convert<float, To>(BFloat16ToFloat(v));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    // Through float32 (a double is rounded twice, as ONNX Runtime converts it).
    return FloatToBFloat16(Convert<From, float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<To, Half>) {
    if constexpr (std::is_same_v<From, double>) {
      return DoubleToHalf(v);
    } else if constexpr (std::is_same_v<From, float>) {
      return FloatToHalf(v);
    } else {
      return DoubleToHalf(static_cast<double>(v));
    }
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return FloatToInt<To>(v);
  } else {
    return static_cast<To>(v);  // Integer narrowing wraps (two's complement).
  }
}

// Cast and CastLike: input 0 converted to the output's dtype.
class CastKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<CastKernel>> Create(const OpDef& def, const Attributes& attrs) {
    if (def.name == "Cast") REMEX_RETURN_IF_ERROR(CastTarget(attrs).status());
    return std::make_unique<CastKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = *NumElements(in[0].shape);
    if (in[0].dtype == out[0].dtype) {
      CopyBytes(in[0], out[0]);
      return OkStatus();
    }
    // float16 <-> float32: the bulk conversions (F16C; the same values as Convert).
    if (in[0].dtype == DType::kFloat16 && out[0].dtype == DType::kFloat32) {
      HalfToFloatN(DataAs<const Half>(in[0]), DataAs<float>(out[0]), n);
      return OkStatus();
    }
    if (in[0].dtype == DType::kFloat32 && out[0].dtype == DType::kFloat16) {
      FloatToHalfN(DataAs<const float>(in[0]), DataAs<Half>(out[0]), n);
      return OkStatus();
    }
    return DispatchCastTypes(op(), in[0].dtype, [&](auto from_tag) -> Status {
      using From = typename decltype(from_tag)::type;
      return DispatchCastTypes(op(), out[0].dtype, [&](auto to_tag) -> Status {
        using To = typename decltype(to_tag)::type;
        const From* x = DataAs<const From>(in[0]);
        To* y = DataAs<To>(out[0]);
        // Long tensors spread over the compute threads.
        ParallelFor(n, 16384, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) y[i] = Convert<From, To>(x[i]);
        });
        return OkStatus();
      });
    });
  }
};

// ---------------------------------------------------------------------------
// Slice: data, starts, ends, [axes], [steps].

// Per input dimension: first index, step and element count of the slice.
struct SliceDim {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

StatusOr<std::vector<SliceDim>> ComputeSlice(std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Slice";
  const Shape& shape = in[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                         ReadIndexTensor(op, "starts", in[1].dtype, in[1].shape, in[1].data));
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> ends,
                         ReadIndexTensor(op, "ends", in[2].dtype, in[2].shape, in[2].data));
  if (in[1].dtype != in[2].dtype) return OpError(op, "starts and ends must have one dtype");
  if (starts.size() != ends.size()) {
    return OpError(op, "starts and ends have different lengths");
  }
  const size_t n = starts.size();
  std::vector<int64_t> axes, steps;
  if (in.size() > 3 && in[3].present) {
    REMEX_ASSIGN_OR_RETURN(axes, ReadIndexTensor(op, "axes", in[3].dtype, in[3].shape, in[3].data));
    if (axes.size() != n) return OpError(op, "axes and starts have different lengths");
  } else {
    if (static_cast<int64_t>(n) > rank) return OpError(op, "more starts than input dims");
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (in.size() > 4 && in[4].present) {
    REMEX_ASSIGN_OR_RETURN(steps,
                           ReadIndexTensor(op, "steps", in[4].dtype, in[4].shape, in[4].data));
    if (steps.size() != n) return OpError(op, "steps and starts have different lengths");
  } else {
    steps.assign(n, 1);
  }
  std::vector<SliceDim> dims(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) dims[d] = {0, 1, shape[d]};
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < n; ++i) {
    REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, axes[i], rank, "axes value"));
    if (seen[axis]) return OpError(op, "axis " + std::to_string(axis) + " is repeated");
    seen[axis] = true;
    const int64_t dim = shape[axis];
    const int64_t step = steps[i];
    if (step == 0) return OpError(op, "steps must be non-zero");
    int64_t start = starts[i];
    int64_t end = ends[i];
    if (start < 0) start += dim;  // No overflow: start < 0 <= dim.
    if (end < 0) end += dim;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const uint64_t neg = uint64_t{0} - static_cast<uint64_t>(step);  // |step|, exact.
      count =
          start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / neg + 1) : 0;
    }
    dims[axis] = {count > 0 ? start : 0, count > 1 ? step : 1, count};
  }
  return dims;
}

StatusOr<std::vector<TensorInfo>> InferSlice(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() < 3) return OpError("Slice", "expects data, starts and ends");
  REMEX_ASSIGN_OR_RETURN(std::vector<SliceDim> dims, ComputeSlice(in));
  Shape out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) out[i] = dims[i].count;
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef SliceDef() {
  OpDef def;
  def.name = "Slice";
  // Slice-1's starts/ends/axes attributes reach the registry as Slice-10's inputs: the
  // ONNX frontend rewrites the older form and binds the node to this entry.
  def.since_version = 10;
  def.min_inputs = 3;
  def.max_inputs = 5;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kData, ShapeDep::kData,
                    ShapeDep::kData};
  def.infer = InferSlice;
  return def;
}

class SliceKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(std::vector<SliceDim> dims, ComputeSlice(args));
    const int64_t total = *NumElements(out[0].shape);
    if (total == 0) return OkStatus();
    const int64_t es = static_cast<int64_t>(DTypeSize(in[0].dtype));
    const Shape& shape = in[0].shape;
    const size_t rank = shape.size();
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    if (rank == 0) {
      std::memcpy(dst, src, es);
      return OkStatus();
    }
    // Byte strides of the input.
    std::vector<int64_t> stride(rank);
    int64_t acc = es;
    for (size_t d = rank; d-- > 0;) {
      stride[d] = acc;
      acc *= shape[d];
    }
    // Trailing dims taken whole and the innermost partial dim with step 1 form one
    // contiguous block.
    size_t inner = rank;  // Dims [inner, rank) are copied as one block.
    int64_t block = es;
    while (inner > 0) {
      const SliceDim& sd = dims[inner - 1];
      if (sd.start == 0 && sd.step == 1 && sd.count == shape[inner - 1]) {
        block *= sd.count;
        --inner;
      } else {
        break;
      }
    }
    int64_t base = 0;
    for (size_t d = 0; d < rank; ++d) base += dims[d].start * stride[d];
    if (inner > 0 && dims[inner - 1].step == 1) {
      block *= dims[inner - 1].count;
      --inner;
    }
    if (inner == 0) {
      std::memcpy(dst, src + base, block);
      return OkStatus();
    }
    std::vector<int64_t> idx(inner, 0);
    int64_t off = base;
    const int64_t blocks = total * es / block;
    for (int64_t b = 0; b < blocks; ++b) {
      std::memcpy(dst + b * block, src + off, block);
      for (size_t d = inner; d-- > 0;) {
        off += dims[d].step * stride[d];
        if (++idx[d] < dims[d].count) break;
        off -= dims[d].step * stride[d] * dims[d].count;
        idx[d] = 0;
      }
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Concat.

StatusOr<int64_t> ConcatAxis(const Attributes& attrs, int64_t rank) {
  StatusOr<int64_t> axis = attrs.Int("axis");
  if (!axis.ok()) return OpError("Concat", axis.status().message());
  return NormalizeAxis("Concat", *axis, rank);
}

StatusOr<std::vector<TensorInfo>> InferConcat(const Attributes& attrs,
                                              std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Concat";
  if (in.empty()) return OpError(op, "expects at least 1 input");
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  if (rank == 0) return OpError(op, "inputs must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(attrs, rank));
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) return OpError(op, "input " + std::to_string(i) + " is absent");
    if (in[i].dtype != in[0].dtype) {
      return OpError(op, "input " + std::to_string(i) + " has dtype " +
                             std::string(DTypeName(in[i].dtype)) + ", input 0 has " +
                             std::string(DTypeName(in[0].dtype)));
    }
    const Shape& s = in[i].shape;
    if (static_cast<int64_t>(s.size()) != rank) {
      return OpError(op, "input " + std::to_string(i) + " has rank " + std::to_string(s.size()) +
                             ", input 0 has " + std::to_string(rank));
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (__builtin_add_overflow(out[d], s[d], &out[d])) {
          return OpError(op, "output extent overflows");
        }
      } else if (s[d] != out[d]) {
        return OpError(op, "input " + std::to_string(i) + " " + ShapeToString(s) +
                               " does not match input 0 " + ShapeToString(in[0].shape) +
                               " outside axis " + std::to_string(axis));
      }
    }
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, out).status());
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef ConcatDef() {
  OpDef def;
  def.name = "Concat";
  def.since_version = 4;
  def.min_inputs = 1;
  def.max_inputs = -1;
  def.infer = InferConcat;
  return def;
}

class ConcatKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ConcatKernel>> Create(const OpDef& def, const Attributes& attrs) {
    if (!attrs.Int("axis").ok()) return OpError("Concat", "attribute 'axis' is required and must be an int");
    return std::make_unique<ConcatKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = out[0].shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(attrs(), rank));
    const int64_t es = static_cast<int64_t>(DTypeSize(out[0].dtype));
    int64_t outer = 1, inner = es;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    char* dst = static_cast<char*>(out[0].data);
    const int64_t out_row = shape[axis] * inner;
    // Runs of output rows on the compute threads (a channels-last Concat copies many
    // short rows), each thread copying every input's part of its rows; at least
    // kGrainBytes a thread.
    constexpr int64_t kGrainBytes = int64_t{128} << 10;
    const int64_t grain = std::max<int64_t>(1, kGrainBytes / std::max<int64_t>(1, out_row));
    ParallelFor(outer, grain, [&](int64_t o0, int64_t o1, int) {
      int64_t col = 0;
      for (const TensorRef& t : in) {
        const int64_t row = t.shape[axis] * inner;
        const char* src = static_cast<const char*>(t.data);
        if (row > 0) {
          for (int64_t o = o0; o < o1; ++o) std::memcpy(dst + o * out_row + col, src + o * row, row);
        }
        col += row;
      }
    });
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Reshape: data, shape (int64; int32 accepted).

StatusOr<Shape> ReshapeOutput(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Reshape";
  StatusOr<int64_t> allowzero = attrs.Int("allowzero", 0);
  if (!allowzero.ok()) return OpError(op, allowzero.status().message());
  if (*allowzero != 0 && *allowzero != 1) return OpError(op, "allowzero must be 0 or 1");
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> target,
                         ReadIndexTensor(op, "shape", in[1].dtype, in[1].shape, in[1].data));
  const Shape& data = in[0].shape;
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, data));
  Shape out(target.size());
  int64_t infer_at = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t v = target[i];
    if (v == 0 && *allowzero == 0) {
      if (i >= data.size()) {
        return OpError(op, "shape[" + std::to_string(i) + "] = 0 copies a dim the input " +
                               ShapeToString(data) + " does not have");
      }
      v = data[i];
    } else if (v == -1) {
      if (infer_at >= 0) return OpError(op, "shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    } else if (v < -1) {
      return OpError(op, "shape value " + std::to_string(v) + " is invalid");
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    if (__builtin_mul_overflow(known, v, &known)) {
      return OpError(op, "target shape's element count overflows");
    }
  }
  if (infer_at >= 0) {
    if (*allowzero == 1 && has_zero) {
      return OpError(op, "shape has both 0 and -1 with allowzero=1");
    }
    if (known == 0) {
      return OpError(op, "cannot infer -1: the other dims have no elements");
    }
    if (total % known != 0) {
      return OpError(op, "cannot reshape " + ShapeToString(data) + " (" + std::to_string(total) +
                             " elements) to a multiple of " + std::to_string(known));
    }
    out[infer_at] = total / known;
  } else if (known != total) {
    return OpError(op, "cannot reshape " + ShapeToString(data) + " to " + ShapeToString(out) +
                           ": element counts differ");
  }
  return out;
}

StatusOr<std::vector<TensorInfo>> InferReshape(const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError("Reshape", "expects data and shape");
  REMEX_ASSIGN_OR_RETURN(Shape out, ReshapeOutput(attrs, in));
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef ReshapeDef() {
  OpDef def;
  def.name = "Reshape";
  def.since_version = 5;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferReshape;
  return def;
}

}  // namespace

Status AddTensorOpDefs(KernelRegistry& registry) {
  for (OpDef def : {IdentityDef(), ShapeDef(), CastDef(), CastLikeDef(), SliceDef(), ConcatDef(), ReshapeDef()}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(def)));
  }
  return OkStatus();
}

Status AddTensorCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CopyKernel>(registry, "Identity"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ShapeKernel>(registry, "Shape"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CastKernel>(registry, "Cast"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CastKernel>(registry, "CastLike"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<SliceKernel>(registry, "Slice"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ConcatKernel>(registry, "Concat"));
  return AddCpuKernel<CopyKernel>(registry, "Reshape");
}

}  // namespace remex::kernels::internal
