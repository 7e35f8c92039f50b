// Data-movement ops: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
//
// Every op below moves elements without arithmetic on them, so the kernels work on
// every dtype Remex holds (float16/32/64, int8-64, uint8-64, bool) unless noted.
// Index-like inputs (shape, repeats, axes, split, pads) are int64; int32 is accepted.
//
// Squeeze(data, [axes]) -> data.shape without the listed dims (all dims of extent 1
//   when no axes are given). Axes must name dims of extent 1; negative values count
//   from the back. Before opset 13 axes is an attribute, from 13 an optional input
//   (kData); either form is accepted.
// Unsqueeze(data, axes) -> rank + len(axes) dims with 1 inserted at each axis (axes
//   index the output, in [-out_rank, out_rank), no repeats). Axes as for Squeeze,
//   but required.
// Flatten(data) -> 2-D [prod(shape[:axis]), prod(shape[axis:])]. axis (default 1) in
//   [-rank, rank]; negative values only from Flatten-11 (entries 1-10 and 11+).
// Expand(data, shape) -> numpy broadcast of data.shape and `shape` (bidirectional: a
//   1 in `shape` keeps data's extent). `shape` is a 1-D int64 kData input.
// Tile(data, repeats) -> data.shape[i] * repeats[i]. `repeats` is a 1-D int64 kData
//   input of length rank with non-negative values.
// Gather(data, indices) -> data.shape[:axis] + indices.shape + data.shape[axis+1:].
//   axis (default 0) in [-rank, rank). Indices int32 or int64, in [-n, n) where n is
//   data.shape[axis] (negative values count from the back, opset 11+); an index out of
//   range is INVALID_ARGUMENT.
// GatherElements(data, indices) -> indices.shape (GatherElements-11/13): out[c] =
//   data[c with c[axis] replaced by indices[c]]; indices int32 or int64 of data's rank,
//   each dim but axis at most data's, values in [-n, n) for n = data.shape[axis].
// Split(data, [split]) -> one output per part along axis (default 0). With `split`
//   (attribute before opset 13, optional kData input from 13) the parts have those
//   extents, which must sum to the axis extent. Without it the axis is divided into
//   equal parts, one per output; since the shape function does not see the node's
//   output count, the node must then carry the attribute `num_outputs` (the opset 18
//   name; the extent must be divisible by it, as opsets <= 17 require).
// Transpose is in transpose.cc, Pad in pad.cc, Range, ConstantOfShape and Size in
// generate.cc, DepthToSpace and SpaceToDepth in depth_space.cc.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Squeeze and Unsqueeze: data, [axes].

// Axes from the attribute when present, else from input 1; nullopt when neither.
StatusOr<std::optional<std::vector<int64_t>>> AxesOf(std::string_view op, const Attributes& attrs,
                                                     std::span<const ShapeFnArg> in) {
  if (attrs.Has("axes")) {
    StatusOr<std::vector<int64_t>> a = attrs.Ints("axes");
    if (!a.ok()) return OpError(op, a.status().message());
    return std::optional(*a);
  }
  if (in.size() > 1 && in[1].present) {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> a, ReadInts(op, "axes", in[1]));
    return std::optional(std::move(a));
  }
  return std::optional<std::vector<int64_t>>();
}

StatusOr<std::vector<TensorInfo>> InferSqueeze(const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Squeeze";
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  REMEX_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesOf(op, attrs, in));
  std::vector<bool> drop(s.size(), false);
  if (axes) {
    for (int64_t a : *axes) {
      REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, a, rank, "axes value"));
      if (drop[axis]) return OpError(op, "axis " + Str(axis) + " is repeated");
      if (s[axis] != 1) {
        return OpError(op, "axis " + Str(a) + " of " + ShapeToString(s) +
                               " has extent " + Str(s[axis]) + ", not 1");
      }
      drop[axis] = true;
    }
  } else {
    for (size_t d = 0; d < s.size(); ++d) drop[d] = s[d] == 1;
  }
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!drop[d]) out.push_back(s[d]);
  }
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

StatusOr<std::vector<TensorInfo>> InferUnsqueeze(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Unsqueeze";
  const Shape& s = in[0].shape;
  REMEX_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesOf(op, attrs, in));
  if (!axes) return OpError(op, "axes are required (attribute, or input 1 from opset 13)");
  const int64_t out_rank = static_cast<int64_t>(s.size() + axes->size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : *axes) {
    REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, a, out_rank, "axes value"));
    if (inserted[axis]) return OpError(op, "axis " + Str(axis) + " is repeated");
    inserted[axis] = true;
  }
  Shape out(static_cast<size_t>(out_rank));
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) out[d] = inserted[d] ? 1 : s[next++];
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef SqueezeDef() {
  OpDef def;
  def.name = "Squeeze";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferSqueeze;
  return def;
}

OpDef UnsqueezeDef() {
  OpDef def = SqueezeDef();
  def.name = "Unsqueeze";
  def.infer = InferUnsqueeze;
  return def;
}

// ---------------------------------------------------------------------------
// Flatten.

StatusOr<std::vector<TensorInfo>> InferFlatten(bool negative_axis, const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Flatten";
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  REMEX_ASSIGN_OR_RETURN(int64_t axis, IntAttr(op, attrs, "axis", 1));
  if (axis < 0 && !negative_axis) {
    return OpError(op, "negative axis " + Str(axis) + " needs opset 11");
  }
  if (axis < -rank || axis > rank) {
    return OpError(op, "axis " + Str(axis) + " is out of range for rank " + Str(rank));
  }
  if (axis < 0) axis += rank;
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= s[d];
  return std::vector<TensorInfo>{{in[0].dtype, Shape{outer, inner}}};
}

// Flatten-1 (opsets 1-10, axis >= 0) or Flatten-11+ (`since` 11, negative axes too).
OpDef FlattenDef(int since) {
  const bool negative_axis = since >= 11;
  OpDef def;
  def.name = "Flatten";
  def.since_version = since;
  if (!negative_axis) def.end_version = 10;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [negative_axis](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferFlatten(negative_axis, attrs, in);
  };
  return def;
}

// Squeeze, Unsqueeze and Flatten keep the element order: a plain copy.
class CopyKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const size_t bytes = static_cast<size_t>(*NumElements(in[0].shape)) * DTypeSize(in[0].dtype);
    if (bytes > 0 && in[0].data != out[0].data) std::memmove(out[0].data, in[0].data, bytes);
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Expand: data, shape.

StatusOr<std::vector<TensorInfo>> InferExpand(const Attributes&, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Expand";
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(op, "shape", in[1]));
  for (int64_t v : shape) {
    if (v < 0) return OpError(op, "shape value " + Str(v) + " is negative");
  }
  REMEX_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op, in[0].shape, shape));
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, out));
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef ExpandDef() {
  OpDef def;
  def.name = "Expand";
  def.since_version = 8;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferExpand;
  return def;
}

class ExpandKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& s = in[0].shape;
    const Shape& o = out[0].shape;
    const int64_t total = *NumElements(o);
    const size_t lead = o.size() - s.size();
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    std::vector<int64_t> strides(o.size(), 0);
    for (size_t i = lead; i < o.size(); ++i) {
      strides[i] = s[i - lead] == 1 ? 0 : in_stride[i - lead];
    }
    const StridedPlan p = Coalesce(o, strides);
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      StridedCopy(DataAs<const E>(in[0]), DataAs<E>(out[0]), p, total);
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// Tile: data, repeats.

StatusOr<std::vector<int64_t>> TileRepeats(std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Tile";
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadInts(op, "repeats", in[1]));
  if (repeats.size() != in[0].shape.size()) {
    return OpError(op, "repeats has " + Str(static_cast<int64_t>(repeats.size())) +
                           " values, input has rank " + Str(static_cast<int64_t>(in[0].shape.size())));
  }
  for (int64_t r : repeats) {
    if (r < 0) return OpError(op, "repeats value " + Str(r) + " is negative");
  }
  return repeats;
}

StatusOr<std::vector<TensorInfo>> InferTile(const Attributes&, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Tile";
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, TileRepeats(in));
  Shape out = in[0].shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if (__builtin_mul_overflow(out[d], repeats[d], &out[d])) {
      return OpError(op, "output extent overflows");
    }
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, out));
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef TileDef() {
  OpDef def;
  def.name = "Tile";
  def.since_version = 6;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferTile;
  return def;
}

class TileKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, TileRepeats(args));
    const Shape& s = in[0].shape;
    const int64_t total = *NumElements(out[0].shape);
    // An empty output may come from huge repeats of an empty input, whose products
    // below would overflow.
    if (total == 0) return OkStatus();
    // The output seen as [r0, s0, r1, s1, ...]: the repeat dims read with stride 0.
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    std::vector<int64_t> dims, strides;
    for (size_t d = 0; d < s.size(); ++d) {
      dims.insert(dims.end(), {repeats[d], s[d]});
      strides.insert(strides.end(), {0, in_stride[d]});
    }
    const StridedPlan p = Coalesce(dims, strides);
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      StridedCopy(DataAs<const E>(in[0]), DataAs<E>(out[0]), p, total);
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// Gather: data, indices.

StatusOr<std::vector<TensorInfo>> InferGather(const Attributes& attrs,
                                              std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Gather";
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) return OpError(op, "data must have rank >= 1");
  if (in[1].dtype != DType::kInt32 && in[1].dtype != DType::kInt64) {
    return OpError(op, "indices must be int32 or int64, got " +
                           std::string(DTypeName(in[1].dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op, attrs, "axis", 0));
  REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, a, rank));
  Shape out(s.begin(), s.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), s.begin() + axis + 1, s.end());
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, out).status());
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef GatherDef() {
  OpDef def;
  def.name = "Gather";
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape};
  def.infer = InferGather;
  return def;
}

class GatherKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op(), attrs(), "axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op(), a, rank));
    const int64_t n = s[axis];
    const int64_t num_idx = *NumElements(in[1].shape);
    // Indices checked and normalised up front.
    std::vector<int64_t> idx(static_cast<size_t>(num_idx));
    for (int64_t i = 0; i < num_idx; ++i) {
      const int64_t v = in[1].dtype == DType::kInt32 ? DataAs<const int32_t>(in[1])[i]
                                                     : DataAs<const int64_t>(in[1])[i];
      if (v < -n || v >= n) {
        return OpError(op(), "index " + Str(v) + " is out of range for axis " + Str(axis) +
                                 " of extent " + Str(n));
      }
      idx[i] = v < 0 ? v + n : v;
    }
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    int64_t outer = 1, inner = static_cast<int64_t>(DTypeSize(in[0].dtype));
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o) {
      const char* src = x + o * n * inner;
      for (int64_t i = 0; i < num_idx; ++i, y += inner) {
        std::memcpy(y, src + idx[i] * inner, static_cast<size_t>(inner));
      }
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// GatherElements: data, indices of data's rank.

StatusOr<std::vector<TensorInfo>> InferGatherElements(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "GatherElements";
  REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op, attrs, "axis", 0));
  REMEX_RETURN_IF_ERROR(CheckElementsIndices(op, in[0], in[1], a).status());
  return std::vector<TensorInfo>{{in[0].dtype, in[1].shape}};
}

OpDef GatherElementsDef() {
  OpDef def;
  def.name = "GatherElements";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape};
  def.infer = InferGatherElements;
  return def;
}

// out[c] = data[c with c[axis] = indices[c]] over the coordinates c of indices.
class GatherElementsKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& s = in[0].shape;
    const Shape& is = in[1].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op(), attrs(), "axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op(), a, rank));
    const std::vector<int64_t> strides = RowMajorStrides(s);
    const int64_t n = *NumElements(is);
    const int64_t extent = s[axis];
    const size_t es = DTypeSize(in[0].dtype);
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    std::vector<int64_t> c(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = in[1].dtype == DType::kInt32 ? DataAs<const int32_t>(in[1])[i] : DataAs<const int64_t>(in[1])[i];
      if (v < -extent || v >= extent) {
        return OpError(op(), "index " + Str(v) + " is out of range for axis " + Str(axis) + " of extent " +
                                 Str(extent));
      }
      if (v < 0) v += extent;
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d) offset += (d == axis ? v : c[d]) * strides[d];
      std::memcpy(y + i * es, x + offset * es, es);
      for (int64_t d = rank - 1; d >= 0; --d) {  // Next coordinate of indices.
        if (++c[d] < is[d]) break;
        c[d] = 0;
      }
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Split: data, [split].

struct SplitPlan {
  int64_t axis = 0;
  std::vector<int64_t> parts;
};

StatusOr<SplitPlan> ComputeSplit(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Split";
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) return OpError(op, "input must have rank >= 1");
  SplitPlan plan;
  REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op, attrs, "axis", 0));
  REMEX_ASSIGN_OR_RETURN(plan.axis, NormalizeAxis(op, a, rank));
  const int64_t dim = s[plan.axis];
  if (attrs.Has("split")) {
    StatusOr<std::vector<int64_t>> v = attrs.Ints("split");
    if (!v.ok()) return OpError(op, v.status().message());
    plan.parts = *v;
  } else if (in.size() > 1 && in[1].present) {
    REMEX_ASSIGN_OR_RETURN(plan.parts, ReadInts(op, "split", in[1]));
  } else {
    if (!attrs.Has("num_outputs")) {
      return OpError(op, "without 'split' the node needs the attribute 'num_outputs' "
                         "(the number of equal parts)");
    }
    REMEX_ASSIGN_OR_RETURN(int64_t n, IntAttr(op, attrs, "num_outputs", 1));
    if (n < 1) return OpError(op, "num_outputs must be positive, got " + Str(n));
    if (dim % n != 0) {
      return OpError(op, "axis extent " + Str(dim) + " does not split into " + Str(n) +
                             " equal parts");
    }
    plan.parts.assign(static_cast<size_t>(n), dim / n);
    return plan;
  }
  if (plan.parts.empty()) return OpError(op, "split is empty");
  int64_t sum = 0;
  for (int64_t v : plan.parts) {
    if (v < 0) return OpError(op, "split value " + Str(v) + " is negative");
    if (__builtin_add_overflow(sum, v, &sum)) return OpError(op, "split values overflow");
  }
  if (sum != dim) {
    return OpError(op, "split values sum to " + Str(sum) + ", axis extent is " + Str(dim));
  }
  return plan;
}

StatusOr<std::vector<TensorInfo>> InferSplit(const Attributes& attrs,
                                             std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(SplitPlan plan, ComputeSplit(attrs, in));
  std::vector<TensorInfo> out;
  for (int64_t part : plan.parts) {
    Shape s = in[0].shape;
    s[plan.axis] = part;
    out.push_back({in[0].dtype, s});
  }
  return out;
}

OpDef SplitDef() {
  OpDef def;
  def.name = "Split";
  def.since_version = 2;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.max_outputs = std::numeric_limits<int>::max();  // One output per part.
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferSplit;
  return def;
}

class SplitKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(SplitPlan plan, ComputeSplit(attrs(), args));
    const Shape& s = in[0].shape;
    int64_t outer = 1, inner = static_cast<int64_t>(DTypeSize(in[0].dtype));
    for (int64_t d = 0; d < plan.axis; ++d) outer *= s[d];
    for (size_t d = plan.axis + 1; d < s.size(); ++d) inner *= s[d];
    const char* x = static_cast<const char*>(in[0].data);
    const int64_t in_row = s[plan.axis] * inner;
    int64_t col = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t row = plan.parts[i] * inner;
      char* y = static_cast<char*>(out[i].data);
      if (row > 0) {
        for (int64_t o = 0; o < outer; ++o) {
          std::memcpy(y + o * row, x + o * in_row + col, static_cast<size_t>(row));
        }
      }
      col += row;
    }
    return OkStatus();
  }
};

}  // namespace

Status AddTransformOpDefs(KernelRegistry& registry) {
  for (OpDef def : {SqueezeDef(), UnsqueezeDef(), FlattenDef(1), FlattenDef(11), ExpandDef(), TileDef(),
                    GatherDef(), GatherElementsDef(), SplitDef()}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(def)));
  }
  return OkStatus();
}

Status AddTransformCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CopyKernel>(registry, "Squeeze"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CopyKernel>(registry, "Unsqueeze"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CopyKernel>(registry, "Flatten", 1));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<CopyKernel>(registry, "Flatten", 11));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ExpandKernel>(registry, "Expand"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<TileKernel>(registry, "Tile"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<GatherKernel>(registry, "Gather"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<GatherElementsKernel>(registry, "GatherElements"));
  return AddCpuKernel<SplitKernel>(registry, "Split");
}

}  // namespace remex::kernels::internal
