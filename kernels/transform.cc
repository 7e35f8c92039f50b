// Data-movement ops: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
//
// Every op below moves elements without arithmetic on them, so the kernels work on
// every dtype Remex holds (float16/32/64, int8-64, uint8-64, bool) unless noted.
// Index-like inputs (shape, repeats, axes, split, pads) are int64; int32 is accepted.
//
// Transpose(data) -> [data.shape[perm[i]]]
//   https://onnx.ai/onnx/operators/onnx__Transpose.html. Attribute perm (default: the
//   dims reversed) must be a permutation of [0, rank).
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
// Split(data, [split]) -> one output per part along axis (default 0). With `split`
//   (attribute before opset 13, optional kData input from 13) the parts have those
//   extents, which must sum to the axis extent. Without it the axis is divided into
//   equal parts, one per output; since the shape function does not see the node's
//   output count, the node must then carry the attribute `num_outputs` (the opset 18
//   name; the extent must be divisible by it, as opsets <= 17 require).
// Pad(data, pads, [constant_value]) -> data.shape[i] + pads[i] + pads[i + rank].
//   mode constant (default), reflect or edge. Before opset 11 pads and the float
//   constant `value` are attributes; from 11 pads is a kData input and the constant an
//   optional scalar input of data's dtype. Negative pads remove elements. reflect
//   mirrors without repeating the border element (period 2 * (n - 1)), edge repeats
//   the border element; both need a non-empty dim to pad from.
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
// DepthToSpace(data) -> NCHW [N, C / b^2, H * b, W * b] for blocksize b. mode DCR
//   (default; the only mode before opset 11): output[n, c, h*b + i, w*b + j] =
//   input[n, (i*b + j) * C/b^2 + c, h, w]; CRD: input[n, c*b^2 + i*b + j, h, w].
// SpaceToDepth(data) -> NCHW [N, C * b^2, H / b, W / b], the inverse of DCR:
//   output[n, (i*b + j) * C + c, h, w] = input[n, c, h*b + i, w*b + j].
// Both take the internal attribute `layout` (set by the compiler's layout pass, never
//   by ONNX): "NCHW" (default) or "NHWC", where input and output are channels-last,
//   [N, H, W, C] -> [N, H * b, W * b, C / b^2] (DepthToSpace) with the same channel
//   order as above: output[n, h*b + i, w*b + j, c] = input[n, h, w, (i*b + j) * C/b^2 + c]
//   (DCR), input[n, h, w, c*b^2 + i*b + j] (CRD).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

// attrs.Int with errors naming the op.
StatusOr<int64_t> IntAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                          int64_t default_value) {
  StatusOr<int64_t> v = attrs.Int(name, default_value);
  if (!v.ok()) return OpError(op, v.status().message());
  return *v;
}

std::string Str(int64_t v) { return std::to_string(v); }

// Calls f(TypeTag<U>) with the unsigned integer type of an element's size: the kernels
// that only move elements copy them as raw bits.
template <typename F>
Status DispatchBySize(std::string_view op, DType dtype, F&& f) {
  switch (DTypeSize(dtype)) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: break;
  }
  return Unimplemented(std::string(op) + ": unsupported dtype " + std::string(DTypeName(dtype)));
}

// An output walk: output dims (row-major, contiguous) with the input element stride
// of each (0 = broadcast), after dropping extent-1 dims and merging dims that the
// input also walks contiguously.
struct StridedPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

StridedPlan Coalesce(std::span<const int64_t> dims, std::span<const int64_t> strides) {
  StridedPlan p;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!p.dims.empty() && p.strides.back() == strides[i] * dims[i]) {
      p.dims.back() *= dims[i];
      p.strides.back() = strides[i];
    } else {
      p.dims.push_back(dims[i]);
      p.strides.push_back(strides[i]);
    }
  }
  return p;
}

// Advances an odometer over dims [0, n) of `p`, updating the input offset.
inline void Step(const StridedPlan& p, size_t n, std::vector<int64_t>& idx, int64_t& off) {
  for (size_t k = n; k-- > 0;) {
    off += p.strides[k];
    if (++idx[k] < p.dims[k]) return;
    off -= p.strides[k] * p.dims[k];
    idx[k] = 0;
  }
}

// Writes the output described by `p` (all `total` elements) from `src`: rows of the
// innermost dim are copied with memcpy (stride 1), filled (stride 0) or gathered.
template <typename E>
void StridedCopy(const E* src, E* dst, const StridedPlan& p, int64_t total) {
  if (total == 0) return;
  if (p.dims.empty()) {
    dst[0] = src[0];
    return;
  }
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  const int64_t is = p.strides[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < total; o += inner) {
    const E* s = src + off;
    E* d = dst + o;
    if (is == 1) {
      std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(E));
    } else if (is == 0) {
      std::fill(d, d + inner, *s);
    } else {
      for (int64_t i = 0; i < inner; ++i) d[i] = s[i * is];
    }
    Step(p, r - 1, idx, off);
  }
}

// An output grown from input values (Expand, Tile, Pad, Range, ConstantOfShape): its
// element count and byte size must be representable.
Status CheckOutputSize(std::string_view op, DType dtype, const Shape& shape) {
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, shape));
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(DTypeSize(dtype)), &bytes)) {
    return OpError(op, "output " + ShapeToString(shape) + " is too large");
  }
  return OkStatus();
}

// Checks that an index-like input is present, 1-D (or scalar) int32/int64 with data.
StatusOr<std::vector<int64_t>> ReadInts(std::string_view op, std::string_view what,
                                        const ShapeFnArg& arg) {
  if (!arg.present) return OpError(op, std::string(what) + " is absent");
  return ReadIndexTensor(op, what, arg.dtype, arg.shape, arg.data);
}

// ---------------------------------------------------------------------------
// Transpose.

StatusOr<std::vector<int64_t>> TransposePerm(const Attributes& attrs, int64_t rank) {
  constexpr std::string_view op = "Transpose";
  std::vector<int64_t> perm;
  if (attrs.Has("perm")) {
    StatusOr<std::vector<int64_t>> p = attrs.Ints("perm");
    if (!p.ok()) return OpError(op, p.status().message());
    perm = *p;
    if (static_cast<int64_t>(perm.size()) != rank) {
      return OpError(op, "perm has " + Str(static_cast<int64_t>(perm.size())) +
                             " values, input has rank " + Str(rank));
    }
    std::vector<bool> seen(perm.size(), false);
    for (int64_t v : perm) {
      if (v < 0 || v >= rank || seen[v]) {
        return OpError(op, "perm is not a permutation of [0, " + Str(rank) + ")");
      }
      seen[v] = true;
    }
  } else {
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  }
  return perm;
}

StatusOr<std::vector<TensorInfo>> InferTranspose(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  const Shape& s = in[0].shape;
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                         TransposePerm(attrs, static_cast<int64_t>(s.size())));
  Shape out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[perm[i]];
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef TransposeDef() {
  OpDef def;
  def.name = "Transpose";
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferTranspose;
  return def;
}

// One 2-D tile: dst[r * rs + c] = src[c * cs + r] for r in [r0, r1), c in [c0, c1).
template <typename E>
inline void TransposeTile(const E* src, E* dst, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          int64_t cs, int64_t rs) {
  int64_t r = r0;
#if defined(__SSE2__)
  if constexpr (sizeof(E) == 4) {
    // 4x4 blocks in registers: four strided row loads, four contiguous stores.
    for (; r + 4 <= r1; r += 4) {
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {
        const E* s = src + c * cs + r;
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + cs));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * cs));
        const __m128i f = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * cs));
        const __m128i ab_lo = _mm_unpacklo_epi32(a, b), ef_lo = _mm_unpacklo_epi32(e, f);
        const __m128i ab_hi = _mm_unpackhi_epi32(a, b), ef_hi = _mm_unpackhi_epi32(e, f);
        E* d = dst + r * rs + c;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi64(ab_lo, ef_lo));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + rs), _mm_unpackhi_epi64(ab_lo, ef_lo));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * rs), _mm_unpacklo_epi64(ab_hi, ef_hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * rs), _mm_unpackhi_epi64(ab_hi, ef_hi));
      }
      for (; c < c1; ++c) {
        for (int64_t i = 0; i < 4; ++i) dst[(r + i) * rs + c] = src[c * cs + r + i];
      }
    }
  }
#endif
  for (; r < r1; ++r) {
    const E* s = src + r;
    E* d = dst + r * rs;
    for (int64_t c = c0; c < c1; ++c) d[c] = s[c * cs];
  }
}

// Transposes with the input's contiguous dim at output dim j and another dim last:
// per combination of the other dims, a 2-D transpose in square tiles so that both
// the strided reads and the contiguous writes stay in cache.
template <typename E>
void TiledTranspose(const E* src, E* dst, const StridedPlan& p, size_t j, int64_t total) {
  constexpr int64_t kTile = sizeof(E) == 4 ? 32 : (64 / sizeof(E) < 8 ? 8 : 64 / sizeof(E));
  const size_t k = p.dims.size();
  std::vector<int64_t> out_stride(k);
  int64_t acc = 1;
  for (size_t i = k; i-- > 0;) {
    out_stride[i] = acc;
    acc *= p.dims[i];
  }
  // The outer dims: all but j and the last.
  StridedPlan outer;
  std::vector<int64_t> outer_out_stride;
  for (size_t i = 0; i + 1 < k; ++i) {
    if (i == j) continue;
    outer.dims.push_back(p.dims[i]);
    outer.strides.push_back(p.strides[i]);
    outer_out_stride.push_back(out_stride[i]);
  }
  const int64_t rows = p.dims[j];          // Contiguous in the input.
  const int64_t cols = p.dims[k - 1];      // Contiguous in the output.
  const int64_t col_stride = p.strides[k - 1];
  const int64_t row_stride = out_stride[j];
  const int64_t per_outer = rows * cols;
  const size_t n_outer = outer.dims.size();
  std::vector<int64_t> idx(n_outer, 0);
  int64_t in_off = 0;
  for (int64_t done = 0; done < total; done += per_outer) {
    int64_t out_off = 0;
    for (size_t i = 0; i < n_outer; ++i) out_off += idx[i] * outer_out_stride[i];
    const E* s0 = src + in_off;
    E* d0 = dst + out_off;
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        TransposeTile(s0, d0, r0, r1, c0, c1, col_stride, row_stride);
      }
    }
    Step(outer, n_outer, idx, in_off);
  }
}

class TransposeKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& s = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                           TransposePerm(attrs(), static_cast<int64_t>(s.size())));
    const int64_t total = *NumElements(s);
    if (total == 0) return OkStatus();
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    std::vector<int64_t> dims(s.size()), strides(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      dims[i] = s[perm[i]];
      strides[i] = in_stride[perm[i]];
    }
    const StridedPlan p = Coalesce(dims, strides);
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(in[0]);
      E* y = DataAs<E>(out[0]);
      if (p.dims.empty() || p.strides.back() == 1) {
        StridedCopy(x, y, p, total);
        return OkStatus();
      }
      size_t j = 0;
      while (p.strides[j] != 1) ++j;  // The input's innermost dim (extent > 1) is kept.
      TiledTranspose(x, y, p, j, total);
      return OkStatus();
    });
  }
};

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

// ---------------------------------------------------------------------------
// Pad: data, pads, [constant_value] (attributes pads and value before opset 11).

}  // namespace

StatusOr<PadMode> PadModeOf(const Attributes& attrs) {
  StatusOr<std::string> mode = attrs.String("mode", "constant");
  if (!mode.ok()) return OpError("Pad", mode.status().message());
  if (*mode == "constant") return PadMode::kConstant;
  if (*mode == "reflect") return PadMode::kReflect;
  if (*mode == "edge") return PadMode::kEdge;
  return OpError("Pad", "unknown mode '" + *mode + "' (constant, reflect or edge)");
}

namespace {

StatusOr<std::vector<int64_t>> PadAmounts(const Attributes& attrs,
                                          std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Pad";
  std::vector<int64_t> pads;
  if (attrs.Has("pads")) {
    StatusOr<std::vector<int64_t>> v = attrs.Ints("pads");
    if (!v.ok()) return OpError(op, v.status().message());
    pads = *v;
  } else if (in.size() > 1 && in[1].present) {
    REMEX_ASSIGN_OR_RETURN(pads, ReadInts(op, "pads", in[1]));
  } else {
    return OpError(op, "pads are required (attribute before opset 11, input 1 from 11)");
  }
  const size_t rank = in[0].shape.size();
  if (pads.size() != 2 * rank) {
    return OpError(op, "pads has " + Str(static_cast<int64_t>(pads.size())) +
                           " values, expected 2 * rank = " + Str(static_cast<int64_t>(2 * rank)));
  }
  return pads;
}

StatusOr<std::vector<TensorInfo>> InferPad(const Attributes& attrs,
                                           std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Pad";
  REMEX_ASSIGN_OR_RETURN(PadMode mode, PadModeOf(attrs));
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PadAmounts(attrs, in));
  const Shape& s = in[0].shape;
  const size_t rank = s.size();
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = pads[d], e = pads[d + rank];
    if (__builtin_add_overflow(s[d], b, &out[d]) || __builtin_add_overflow(out[d], e, &out[d])) {
      return OpError(op, "output extent overflows");
    }
    if (out[d] < 0) {
      return OpError(op, "pads " + Str(b) + ", " + Str(e) + " remove more than the extent " +
                             Str(s[d]) + " of dim " + Str(static_cast<int64_t>(d)));
    }
    if (mode != PadMode::kConstant && s[d] == 0 && out[d] > 0) {
      return OpError(op, std::string(mode == PadMode::kEdge ? "edge" : "reflect") +
                             " mode cannot pad the empty dim " + Str(static_cast<int64_t>(d)));
    }
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, out));
  if (in.size() > 2 && in[2].present) {
    if (in[2].dtype != in[0].dtype) {
      return OpError(op, "constant_value has dtype " + std::string(DTypeName(in[2].dtype)) +
                             ", data has " + std::string(DTypeName(in[0].dtype)));
    }
    std::optional<int64_t> n = NumElements(in[2].shape);
    if (!n || *n != 1) return OpError(op, "constant_value must hold one value");
  }
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef PadDef() {
  OpDef def;
  def.name = "Pad";
  def.since_version = 2;
  def.min_inputs = 1;
  def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kShape};
  def.infer = InferPad;
  return def;
}

// A double converted to T: integers saturate (NaN becomes 0), bool is v != 0.
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_same_v<T, Half>) {
    return DoubleToHalf(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  }
}

}  // namespace

StatusOr<uint64_t> PadValueBits(DType dtype, double v) {
  uint64_t bits = 0;
  REMEX_RETURN_IF_ERROR(DispatchAllTypes("Pad", dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T c = FromDouble<T>(v);
    std::memcpy(&bits, &c, sizeof(T));
    return OkStatus();
  }));
  return bits;
}

namespace {

// Input index read for output index o of one dim (-1: the constant).
int64_t PadSource(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

class PadKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(PadMode mode, PadModeOf(attrs()));
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PadAmounts(attrs(), args));
    StatusOr<float> value_attr = attrs().Float("value", 0.f);
    if (!value_attr.ok()) return OpError(op(), value_attr.status().message());
    const Shape& s = in[0].shape;
    const Shape& o = out[0].shape;
    const size_t rank = s.size();
    const int64_t total = *NumElements(o);
    if (total == 0) return OkStatus();
    // Per dim, the input index of every output index (-1: the constant).
    std::vector<std::vector<int64_t>> src(rank);
    for (size_t d = 0; d < rank; ++d) {
      src[d].resize(static_cast<size_t>(o[d]));
      for (int64_t i = 0; i < o[d]; ++i) src[d][i] = PadSource(i, pads[d], s[d], mode);
    }
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    return DispatchAllTypes(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T c = FromDouble<T>(*value_attr);
      if (in.size() > 2 && in[2].present()) c = DataAs<const T>(in[2])[0];
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      if (rank == 0) {
        y[0] = x[0];
        return OkStatus();
      }
      const int64_t inner = o[rank - 1];
      const std::vector<int64_t>& last = src[rank - 1];
      // The output range of the last dim read contiguously from the input.
      const int64_t lo = std::clamp<int64_t>(pads[rank - 1], 0, inner);
      const int64_t hi = std::clamp<int64_t>(pads[rank - 1] + s[rank - 1], lo, inner);
      std::vector<int64_t> idx(rank - 1, 0);
      for (int64_t base = 0; base < total; base += inner) {
        T* row = y + base;
        int64_t off = 0;
        bool constant_row = false;
        for (size_t d = 0; d + 1 < rank; ++d) {
          const int64_t i = src[d][idx[d]];
          if (i < 0) {
            constant_row = true;
            break;
          }
          off += i * in_stride[d];
        }
        if (constant_row) {
          std::fill(row, row + inner, c);
        } else {
          const T* xr = x + off;
          for (int64_t i = 0; i < lo; ++i) row[i] = last[i] < 0 ? c : xr[last[i]];
          if (hi > lo) {
            std::memcpy(static_cast<void*>(row + lo), xr + (lo - pads[rank - 1]),
                        static_cast<size_t>(hi - lo) * sizeof(T));
          }
          for (int64_t i = hi; i < inner; ++i) row[i] = last[i] < 0 ? c : xr[last[i]];
        }
        for (size_t d = rank - 1; d-- > 0;) {
          if (++idx[d] < o[d]) break;
          idx[d] = 0;
        }
      }
      return OkStatus();
    });
  }
};

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

// ---------------------------------------------------------------------------
// DepthToSpace and SpaceToDepth.

struct BlockAttrs {
  int64_t blocksize = 0;
  bool crd = false;            // DepthToSpace mode CRD (else DCR).
  bool channels_last = false;  // `layout` "NHWC".
};

StatusOr<BlockAttrs> BlockAttrsOf(std::string_view op, const Attributes& attrs) {
  BlockAttrs b;
  StatusOr<int64_t> bs = attrs.Int("blocksize");
  if (!bs.ok()) return OpError(op, "attribute 'blocksize' is required and must be an int");
  if (*bs < 1) return OpError(op, "blocksize must be positive, got " + Str(*bs));
  b.blocksize = *bs;
  if (op == "DepthToSpace") {
    StatusOr<std::string> mode = attrs.String("mode", "DCR");
    if (!mode.ok()) return OpError(op, mode.status().message());
    if (*mode != "DCR" && *mode != "CRD") {
      return OpError(op, "unknown mode '" + *mode + "' (DCR or CRD)");
    }
    b.crd = *mode == "CRD";
  }
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok()) return OpError(op, layout.status().message());
  if (*layout != "NCHW" && *layout != "NHWC") {
    return OpError(op, "unknown layout '" + *layout + "' (NCHW or NHWC)");
  }
  b.channels_last = *layout == "NHWC";
  return b;
}

// [N, C, H, W] <-> [N, H, W, C] for the channels-last form of the block ops.
Shape NhwcToNchw(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }
Shape NchwToNhwc(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

template <bool kDepthToSpace>
StatusOr<std::vector<TensorInfo>> InferBlock(const Attributes& attrs,
                                             std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = kDepthToSpace ? "DepthToSpace" : "SpaceToDepth";
  REMEX_ASSIGN_OR_RETURN(BlockAttrs b, BlockAttrsOf(op, attrs));
  if (in[0].shape.size() != 4) {
    return OpError(op, std::string("input must be 4-D ") + (b.channels_last ? "NHWC" : "NCHW") +
                           ", got " + ShapeToString(in[0].shape));
  }
  const Shape s = b.channels_last ? NhwcToNchw(in[0].shape) : in[0].shape;
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  int64_t bb;
  if (__builtin_mul_overflow(b.blocksize, b.blocksize, &bb)) {
    return OpError(op, "blocksize is too large");
  }
  Shape out = s;
  if (kDepthToSpace) {
    if (s[1] % bb != 0) {
      return OpError(op, "channels " + Str(s[1]) + " are not a multiple of blocksize^2 = " +
                             Str(bb));
    }
    out[1] = s[1] / bb;
    if (__builtin_mul_overflow(s[2], b.blocksize, &out[2]) ||
        __builtin_mul_overflow(s[3], b.blocksize, &out[3])) {
      return OpError(op, "output extent overflows");
    }
  } else {
    if (s[2] % b.blocksize != 0 || s[3] % b.blocksize != 0) {
      return OpError(op, "height and width " + Str(s[2]) + "x" + Str(s[3]) +
                             " are not multiples of blocksize " + Str(b.blocksize));
    }
    if (__builtin_mul_overflow(s[1], bb, &out[1])) return OpError(op, "output extent overflows");
    out[2] = s[2] / b.blocksize;
    out[3] = s[3] / b.blocksize;
  }
  if (b.channels_last) out = NchwToNhwc(out);
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

template <bool kDepthToSpace>
OpDef BlockDef() {
  OpDef def;
  def.name = kDepthToSpace ? "DepthToSpace" : "SpaceToDepth";
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferBlock<kDepthToSpace>;
  return def;
}

template <bool kDepthToSpace>
class BlockKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(BlockAttrs b, BlockAttrsOf(op(), attrs()));
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    if (b.channels_last) return RunChannelsLast(b, in[0], out[0]);
    const int64_t bs = b.blocksize;
    // The space side (NCHW with the large H, W) and the depth side.
    const Shape& space = kDepthToSpace ? out[0].shape : in[0].shape;
    const Shape& depth = kDepthToSpace ? in[0].shape : out[0].shape;
    const int64_t n = space[0], c = space[1], h = depth[2], w = depth[3];
    const int64_t sw = space[3], plane = h * w, space_plane = space[2] * sw;
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(in[0]);
      E* y = DataAs<E>(out[0]);
      for (int64_t in_ = 0; in_ < n; ++in_) {
        for (int64_t ic = 0; ic < c; ++ic) {
          const int64_t space_off = (in_ * c + ic) * space_plane;
          for (int64_t i = 0; i < bs; ++i) {
            for (int64_t j = 0; j < bs; ++j) {
              const int64_t dc = b.crd ? (ic * bs + i) * bs + j : (i * bs + j) * c + ic;
              const int64_t depth_off = (in_ * c * bs * bs + dc) * plane;
              for (int64_t ih = 0; ih < h; ++ih) {
                const int64_t srow = space_off + (ih * bs + i) * sw + j;
                const int64_t drow = depth_off + ih * w;
                if (kDepthToSpace) {
                  for (int64_t iw = 0; iw < w; ++iw) y[srow + iw * bs] = x[drow + iw];
                } else {
                  for (int64_t iw = 0; iw < w; ++iw) y[drow + iw] = x[srow + iw * bs];
                }
              }
            }
          }
        }
      }
      return OkStatus();
    });
  }

 private:
  // NHWC: per space pixel (n, h*b + i, w*b + j) its C channels are one run of the depth
  // pixel (n, h, w): contiguous (DCR, SpaceToDepth) or with stride b^2 (CRD).
  Status RunChannelsLast(const BlockAttrs& b, const TensorRef& x_ref, const TensorRef& y_ref) {
    const int64_t bs = b.blocksize;
    const Shape& space = kDepthToSpace ? y_ref.shape : x_ref.shape;  // [N, H*b, W*b, C]
    const Shape& depth = kDepthToSpace ? x_ref.shape : y_ref.shape;  // [N, H, W, C*b^2]
    const int64_t n = space[0], h = depth[1], w = depth[2], c = space[3], cd = depth[3];
    const int64_t sw = space[2];
    return DispatchBySize(op(), x_ref.dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(x_ref);
      E* y = DataAs<E>(y_ref);
      for (int64_t in_ = 0; in_ < n; ++in_) {
        for (int64_t ih = 0; ih < h; ++ih) {
          for (int64_t i = 0; i < bs; ++i) {
            for (int64_t iw = 0; iw < w; ++iw) {
              const int64_t depth_px = ((in_ * h + ih) * w + iw) * cd;
              for (int64_t j = 0; j < bs; ++j) {
                const int64_t space_px = ((in_ * space[1] + ih * bs + i) * sw + iw * bs + j) * c;
                if (b.crd) {  // DepthToSpace only.
                  const E* src = x + depth_px + i * bs + j;
                  E* dst = y + space_px;
                  for (int64_t ic = 0; ic < c; ++ic) dst[ic] = src[ic * bs * bs];
                } else {
                  const int64_t run = depth_px + (i * bs + j) * c;
                  if (kDepthToSpace) {
                    std::memcpy(y + space_px, x + run, sizeof(E) * c);
                  } else {
                    std::memcpy(y + run, x + space_px, sizeof(E) * c);
                  }
                }
              }
            }
          }
        }
      }
      return OkStatus();
    });
  }
};

Status CheckDepthToSpace(const Attributes& attrs) {
  return BlockAttrsOf("DepthToSpace", attrs).status();
}
Status CheckSpaceToDepth(const Attributes& attrs) {
  return BlockAttrsOf("SpaceToDepth", attrs).status();
}

}  // namespace

Status AddTransformOpDefs(KernelRegistry& registry) {
  for (OpDef def : {TransposeDef(), SqueezeDef(), UnsqueezeDef(), FlattenDef(1), FlattenDef(11), ExpandDef(),
                    TileDef(), GatherDef(), SplitDef(), PadDef(), RangeDef(),
                    ConstantOfShapeDef(), SizeDef(), BlockDef<true>(), BlockDef<false>()}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(def)));
  }
  return OkStatus();
}

Status AddTransformCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<TransposeKernel>(registry, TransposeDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<CopyKernel>(registry, SqueezeDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<CopyKernel>(registry, UnsqueezeDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<CopyKernel>(registry, FlattenDef(1)));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<CopyKernel>(registry, FlattenDef(11)));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ExpandKernel>(registry, ExpandDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<TileKernel>(registry, TileDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<GatherKernel>(registry, GatherDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<SplitKernel>(registry, SplitDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<PadKernel>(
      registry, PadDef(), [](const Attributes& attrs) { return PadModeOf(attrs).status(); }));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<RangeKernel>(registry, RangeDef()));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ConstantOfShapeKernel>(
      registry, ConstantOfShapeDef(),
      [](const Attributes& attrs) { return FillValueOf(attrs).status(); }));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<SizeKernel>(registry, SizeDef()));
  REMEX_RETURN_IF_ERROR(
      AddValidatedKernel<BlockKernel<true>>(registry, BlockDef<true>(), CheckDepthToSpace));
  return AddValidatedKernel<BlockKernel<false>>(registry, BlockDef<false>(), CheckSpaceToDepth);
}

}  // namespace remex::kernels::internal
