// Resize: shape function and CPU kernel (ONNX semantics, opsets 10 to 17).
//
// Resize (https://onnx.ai/onnx/operators/onnx__Resize.html)
//   Resize-10: Y = Resize(X, scales)
//   Resize-11: Y = Resize(X, roi, scales[, sizes])
//   Resize-13: Y = Resize(X[, roi][, scales][, sizes])
//   X: any rank >= 1, every dtype Remex holds for `nearest`, numeric dtypes for `linear`
//      and `cubic` (float16/float32/float64 computed in float/float/double; integer
//      results are rounded to nearest and saturated). Y has X's dtype.
//   roi (float16/32/64, [2 * rank]: starts then ends, normalised): read only by
//      coordinate_transformation_mode tf_crop_and_resize.
//   scales (float32, [rank], every value > 0): Y's extent per axis is
//      floor(X extent * scale).
//   sizes (int64 or int32, [rank], values >= 0): Y's extents. Exactly one of scales and
//      sizes is given (non-empty); with sizes, the scale of an axis is sizes / X extent.
//   roi, scales and sizes are data inputs of the shape function (host memory).
//
// Attributes (opset 11 and 13; Resize-10 has `mode` only):
//   mode: nearest (default) | linear | cubic (11+). Interpolation is separable over every
//     axis whose extent or coordinates change: linear is bilinear/trilinear/... on N-D,
//     cubic is bicubic/... with taps floor(x)-1 .. floor(x)+2.
//   coordinate_transformation_mode (default half_pixel): half_pixel, pytorch_half_pixel,
//     align_corners, asymmetric, tf_crop_and_resize (with extrapolation_value, default 0,
//     for coordinates outside [0, extent - 1]) and, in Resize-11 only, tf_half_pixel_for_nn.
//   nearest_mode (default round_prefer_floor): round_prefer_floor, round_prefer_ceil,
//     floor, ceil.
//   cubic_coeff_a (default -0.75), exclude_outside (default 0: taps outside X take the
//     edge value; 1: their weights become 0 and the rest are renormalised).
//   Resize-10 maps coordinates asymmetrically (x_original = x_resized / scale); its
//   nearest picks floor(x_original) when the axis is upscaled (scale >= 1) and
//   ceil(x_original) when it is downscaled.
// Sample indices are clamped into X (edge padding). Resize-11/13 coordinates follow the
// formulas of the ONNX specification, with length_resized (align_corners,
// pytorch_half_pixel, tf_crop_and_resize) taken as ONNX's reference implementation takes
// it: `sizes`, or X extent * scale before flooring.
//
// The 2x nearest upscale of the last axis (PP-OCR's detection neck) has its own loop;
// nearest output rows that repeat a source row are copied from the previous row.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/image/resize_coords.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kResize = "Resize";

}  // namespace

StatusOr<ResizeAttrs> ParseResizeAttrs(int definition, const Attributes& attrs) {
  auto wrap = [](const Status& s) { return OpError(kResize, s.message()); };
  ResizeAttrs r;
  if (definition != 10 && definition != 11 && definition != 13) {
    return OpError(kResize, "version " + std::to_string(definition) + " is not a Resize definition (10, 11, 13)");
  }
  r.version = definition;
  StatusOr<std::string> mode = attrs.String("mode", "nearest");
  if (!mode.ok()) return wrap(mode.status());
  if (*mode == "nearest") {
    r.mode = ResizeMode::kNearest;
  } else if (*mode == "linear") {
    r.mode = ResizeMode::kLinear;
  } else if (*mode == "cubic" && r.version >= 11) {
    r.mode = ResizeMode::kCubic;
  } else {
    return OpError(kResize, "unknown mode '" + *mode + "'" +
                                (r.version == 10 ? " (Resize-10: nearest or linear)" : ""));
  }
  if (r.version == 10) {
    r.coord = ResizeCoord::kAsymmetric;
    r.nearest = ResizeNearest::kSimple;
    return r;
  }
  StatusOr<std::string> coord = attrs.String("coordinate_transformation_mode", "half_pixel");
  if (!coord.ok()) return wrap(coord.status());
  if (*coord == "half_pixel") {
    r.coord = ResizeCoord::kHalfPixel;
  } else if (*coord == "pytorch_half_pixel") {
    r.coord = ResizeCoord::kPytorchHalfPixel;
  } else if (*coord == "align_corners") {
    r.coord = ResizeCoord::kAlignCorners;
  } else if (*coord == "asymmetric") {
    r.coord = ResizeCoord::kAsymmetric;
  } else if (*coord == "tf_crop_and_resize") {
    r.coord = ResizeCoord::kTfCropAndResize;
  } else if (*coord == "tf_half_pixel_for_nn" && r.version == 11) {
    r.coord = ResizeCoord::kTfHalfPixelForNn;
  } else {
    return OpError(kResize, "unknown coordinate_transformation_mode '" + *coord + "'");
  }
  StatusOr<std::string> nearest = attrs.String("nearest_mode", "round_prefer_floor");
  if (!nearest.ok()) return wrap(nearest.status());
  if (*nearest == "round_prefer_floor") {
    r.nearest = ResizeNearest::kRoundPreferFloor;
  } else if (*nearest == "round_prefer_ceil") {
    r.nearest = ResizeNearest::kRoundPreferCeil;
  } else if (*nearest == "floor") {
    r.nearest = ResizeNearest::kFloor;
  } else if (*nearest == "ceil") {
    r.nearest = ResizeNearest::kCeil;
  } else {
    return OpError(kResize, "unknown nearest_mode '" + *nearest + "'");
  }
  StatusOr<float> a = attrs.Float("cubic_coeff_a", -0.75f);
  if (!a.ok()) return wrap(a.status());
  if (!std::isfinite(*a)) return OpError(kResize, "cubic_coeff_a must be finite");
  r.cubic_a = *a;
  StatusOr<int64_t> exclude = attrs.Int("exclude_outside", 0);
  if (!exclude.ok()) return wrap(exclude.status());
  if (*exclude != 0 && *exclude != 1) return OpError(kResize, "exclude_outside must be 0 or 1");
  r.exclude_outside = *exclude == 1;
  StatusOr<float> extrapolation = attrs.Float("extrapolation_value", 0.0f);
  if (!extrapolation.ok()) return wrap(extrapolation.status());
  r.extrapolation = *extrapolation;
  return r;
}

namespace {

// Output extents and the per-axis scales and roi the coordinate transform uses.
struct ResizePlan {
  Shape output;
  std::vector<double> scales;
  // length_resized of the coordinate transforms: sizes, or X extent * scale (not
  // floored, as ONNX's reference implementation computes it).
  std::vector<double> lengths;
  std::vector<double> roi;  // [start..., end...]; only for tf_crop_and_resize.
};

bool Given(const ShapeFnArg* a) {
  return a != nullptr && a->present && NumElements(a->shape).value_or(0) > 0;
}

StatusOr<std::vector<double>> ReadFloats(std::string_view what, const ShapeFnArg& a) {
  if (a.shape.size() != 1) {
    return OpError(kResize, std::string(what) + " must be 1-D, got " + ShapeToString(a.shape));
  }
  if (a.data == nullptr) return OpError(kResize, std::string(what) + " has no data");
  const int64_t n = a.shape[0];
  std::vector<double> v(static_cast<size_t>(n));
  switch (a.dtype) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<const float*>(a.data)[i];
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<const double*>(a.data)[i];
      break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) v[i] = HalfToFloat(static_cast<const Half*>(a.data)[i]);
      break;
    default:
      return OpError(kResize, std::string(what) + " must be a float tensor, got " +
                                  std::string(DTypeName(a.dtype)));
  }
  return v;
}

StatusOr<ResizePlan> PlanResize(const ResizeAttrs& a, std::span<const ShapeFnArg> in) {
  const ShapeFnArg& x = in[0];
  const ShapeFnArg* roi = nullptr;
  const ShapeFnArg* scales = nullptr;
  const ShapeFnArg* sizes = nullptr;
  if (a.version == 10) {
    if (in.size() != 2) return OpError(kResize, "Resize-10 expects inputs X and scales");
    scales = &in[1];
  } else {
    if (in.size() > 1) roi = &in[1];
    if (in.size() > 2) scales = &in[2];
    if (in.size() > 3) sizes = &in[3];
  }
  if (DTypeSize(x.dtype) == 0) return OpError(kResize, "X has an invalid dtype");
  if (a.mode != ResizeMode::kNearest && x.dtype == DType::kBool) {
    return Unimplemented("Resize: linear and cubic modes do not take bool X");
  }
  const size_t rank = x.shape.size();
  if (rank == 0) return OpError(kResize, "X must have rank >= 1");
  for (int64_t d : x.shape) {
    if (d < 0) return OpError(kResize, "X has an invalid shape " + ShapeToString(x.shape));
  }
  const bool has_scales = Given(scales);
  const bool has_sizes = Given(sizes);
  if (has_scales && has_sizes) {
    return OpError(kResize, "only one of scales and sizes may be given");
  }
  if (!has_scales && !has_sizes) {
    return OpError(kResize, "one of scales and sizes must be given (non-empty)");
  }
  ResizePlan p;
  p.output.resize(rank);
  p.scales.resize(rank);
  p.lengths.resize(rank);
  if (has_scales) {
    if (scales->dtype != DType::kFloat32) {
      return OpError(kResize,
                     "scales must be float32, got " + std::string(DTypeName(scales->dtype)));
    }
    REMEX_ASSIGN_OR_RETURN(std::vector<double> s, ReadFloats("scales", *scales));
    if (s.size() != rank) {
      return OpError(kResize, "scales has " + std::to_string(s.size()) + " values, X has rank " +
                                  std::to_string(rank));
    }
    for (size_t i = 0; i < rank; ++i) {
      if (!(s[i] > 0) || !std::isfinite(s[i])) {
        return OpError(kResize, "scales must be positive and finite, got " + std::to_string(s[i]) +
                                    " for axis " + std::to_string(i));
      }
      const double out = std::floor(s[i] * static_cast<double>(x.shape[i]));
      if (out > 4.0e18)
        return OpError(kResize, "output extent overflows on axis " + std::to_string(i));
      p.output[i] = static_cast<int64_t>(out);
      p.scales[i] = s[i];
      p.lengths[i] = s[i] * static_cast<double>(x.shape[i]);
    }
  } else {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> s, ReadIndexTensor(kResize, "sizes", sizes->dtype,
                                                                   sizes->shape, sizes->data));
    if (s.size() != rank) {
      return OpError(kResize, "sizes has " + std::to_string(s.size()) + " values, X has rank " +
                                  std::to_string(rank));
    }
    for (size_t i = 0; i < rank; ++i) {
      if (s[i] < 0) return OpError(kResize, "sizes must be non-negative");
      if (x.shape[i] == 0 && s[i] != 0) {
        return OpError(kResize, "cannot resize the empty axis " + std::to_string(i) + " to " +
                                    std::to_string(s[i]));
      }
      p.output[i] = s[i];
      p.lengths[i] = static_cast<double>(s[i]);
      p.scales[i] =
          x.shape[i] == 0 ? 1.0 : static_cast<double>(s[i]) / static_cast<double>(x.shape[i]);
    }
  }
  if (a.coord == ResizeCoord::kTfCropAndResize) {
    if (!Given(roi)) return OpError(kResize, "tf_crop_and_resize needs roi");
    REMEX_ASSIGN_OR_RETURN(p.roi, ReadFloats("roi", *roi));
    if (p.roi.size() != 2 * rank) {
      return OpError(kResize, "roi has " + std::to_string(p.roi.size()) +
                                  " values, expected 2 * rank = " + std::to_string(2 * rank));
    }
    for (double v : p.roi) {
      if (!std::isfinite(v)) return OpError(kResize, "roi values must be finite");
    }
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kResize, p.output).status());
  return p;
}

StatusOr<std::vector<TensorInfo>> InferResize(int definition, const Attributes& attrs,
                                              std::span<const ShapeFnArg> in) {
  if (in.empty()) return OpError(kResize, "expects input X");
  REMEX_ASSIGN_OR_RETURN(ResizeAttrs a, ParseResizeAttrs(definition, attrs));
  REMEX_ASSIGN_OR_RETURN(ResizePlan p, PlanResize(a, in));
  return std::vector<TensorInfo>{{in[0].dtype, p.output}};
}

// The entry of Resize-`definition`: 10 (opset 10), 11 (opsets 11-12) or 13 (13+).
OpDef ResizeDef(int definition) {
  OpDef def;
  def.name = std::string(kResize);
  def.since_version = definition;
  if (definition == 10) def.end_version = 10;
  if (definition == 11) def.end_version = 12;
  def.min_inputs = 1;
  def.max_inputs = 4;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kData, ShapeDep::kData};
  def.infer = [definition](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferResize(definition, attrs, in);
  };
  return def;
}

// ---------------------------------------------------------------------------
// Per-axis sampling.

// For each output index of one axis: `taps` input indices (clamped into the axis) with
// their weights (none for nearest), or `outside` (tf_crop_and_resize extrapolation).
struct AxisMap {
  int64_t in = 0, out = 0;
  int taps = 1;
  bool identity = false;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;  // Empty when no output index is outside.
};

AxisMap BuildAxisMap(const ResizeAttrs& a, int64_t in, int64_t out, double length, double scale,
                     double roi_start, double roi_end) {
  AxisMap m;
  m.in = in;
  m.out = out;
  m.taps = a.mode == ResizeMode::kNearest ? 1 : a.mode == ResizeMode::kLinear ? 2 : 4;
  const size_t n = static_cast<size_t>(m.taps);
  m.index.assign(static_cast<size_t>(out) * n, 0);
  if (a.mode != ResizeMode::kNearest) m.weight.assign(static_cast<size_t>(out) * n, 0.0);
  if (in == 0) {
    m.identity = true;
    return m;
  }
  const double hi = static_cast<double>(in - 1);
  for (int64_t o = 0; o < out; ++o) {
    const double x =
        ResizeOriginalCoord(a.coord, static_cast<double>(o), scale, in, length, roi_start, roi_end);
    int64_t* idx = &m.index[o * n];
    if (a.coord == ResizeCoord::kTfCropAndResize && (x < 0 || x > hi)) {
      if (m.outside.empty()) m.outside.assign(static_cast<size_t>(out), 0);
      m.outside[o] = 1;
      continue;
    }
    if (a.mode == ResizeMode::kNearest) {
      idx[0] = ResizeNearestIndex(a.nearest, x, scale < 1.0, in);
      continue;
    }
    ResizeInterpTaps(a.mode, x, in, a.cubic_a, a.exclude_outside, idx, &m.weight[o * n]);
  }
  // Identity: every output index samples exactly its own input index.
  m.identity = in == out && m.outside.empty();
  for (int64_t o = 0; m.identity && o < out; ++o) {
    if (a.mode == ResizeMode::kNearest) {
      m.identity = m.index[o] == o;
      continue;
    }
    for (size_t j = 0; j < n; ++j) {
      const double w = m.weight[o * n + j];
      if (w != 0.0 && !(w == 1.0 && m.index[o * n + j] == o)) m.identity = false;
    }
  }
  return m;
}

std::vector<AxisMap> BuildAxisMaps(const ResizeAttrs& a, const ResizePlan& p, const Shape& in) {
  const size_t rank = in.size();
  std::vector<AxisMap> maps(rank);
  for (size_t d = 0; d < rank; ++d) {
    const double rs = p.roi.empty() ? 0.0 : p.roi[d];
    const double re = p.roi.empty() ? 1.0 : p.roi[d + rank];
    maps[d] = BuildAxisMap(a, in[d], p.output[d], p.lengths[d], p.scales[d], rs, re);
  }
  return maps;
}

// ---------------------------------------------------------------------------
// Kernels.

// Converts a computed value to T: float types directly, integers rounded to nearest
// and saturated.
template <typename T, typename A>
T FromCompute(A v) {
  if constexpr (std::is_same_v<T, Half>) {
    return FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != A(0);
  } else {
    if (std::isnan(v)) return T(0);
    const double r = std::nearbyint(static_cast<double>(v));
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (r <= lo) return std::numeric_limits<T>::lowest();
    if (r >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  }
}

template <typename T>
void NearestResize(const T* x, T* y, const Shape& in_shape, const Shape& out_shape,
                   const std::vector<AxisMap>& maps, T extrapolation) {
  const size_t rank = in_shape.size();
  size_t first = rank;  // First axis that is not the identity.
  for (size_t d = 0; d < rank; ++d) {
    if (!maps[d].identity) {
      first = d;
      break;
    }
  }
  if (first == rank) {
    std::memcpy(static_cast<void*>(y), x, sizeof(T) * static_cast<size_t>(*NumElements(in_shape)));
    return;
  }
  const size_t last = rank - 1;
  int64_t planes = 1;
  for (size_t d = 0; d < first; ++d) planes *= in_shape[d];
  // Source offsets within a plane per output index of each axis at or after `first`.
  std::vector<std::vector<int64_t>> offsets(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > first;) {
    offsets[d].resize(static_cast<size_t>(out_shape[d]));
    for (int64_t o = 0; o < out_shape[d]; ++o) offsets[d][o] = maps[d].index[o] * stride;
    stride *= in_shape[d];
  }
  const int64_t in_plane = stride;
  int64_t rows = 1;
  for (size_t d = first; d < last; ++d) rows *= out_shape[d];
  const int64_t out_w = out_shape[last];
  const int64_t out_plane = rows * out_w;
  const AxisMap& wmap = maps[last];
  const bool doubles = !wmap.identity && wmap.outside.empty() && out_w == 2 * wmap.in && [&] {
    for (int64_t o = 0; o < out_w; ++o) {
      if (wmap.index[o] != o / 2) return false;
    }
    return true;
  }();
  const int64_t* wofs = offsets[last].data();
  std::vector<int64_t> pos(rank, 0);
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_plane;
    T* yp = y + p * out_plane;
    std::fill(pos.begin(), pos.end(), 0);
    int64_t prev_base = -1;
    for (int64_t r = 0; r < rows; ++r) {
      T* yr = yp + r * out_w;
      bool outside = false;
      int64_t base = 0;
      for (size_t d = first; d < last; ++d) {
        if (!maps[d].outside.empty() && maps[d].outside[pos[d]]) outside = true;
        base += offsets[d][pos[d]];
      }
      if (outside) {
        std::fill(yr, yr + out_w, extrapolation);
        prev_base = -1;
      } else if (base == prev_base) {
        std::memcpy(static_cast<void*>(yr), yr - out_w, sizeof(T) * static_cast<size_t>(out_w));
      } else {
        const T* xr = xp + base;
        if (doubles) {
          for (int64_t i = 0; i < wmap.in; ++i) {
            const T v = xr[i];
            yr[2 * i] = v;
            yr[2 * i + 1] = v;
          }
        } else if (wmap.outside.empty()) {
          for (int64_t o = 0; o < out_w; ++o) yr[o] = xr[wofs[o]];
        } else {
          for (int64_t o = 0; o < out_w; ++o) yr[o] = wmap.outside[o] ? extrapolation : xr[wofs[o]];
        }
        prev_base = base;
      }
      for (size_t d = last; d-- > first;) {
        if (++pos[d] < out_shape[d]) break;
        pos[d] = 0;
      }
    }
  }
}

// The type linear and cubic interpolation accumulate in.
template <typename T>
using InterpType =
    std::conditional_t<std::is_same_v<T, double> || (std::is_integral_v<T> && sizeof(T) >= 4),
                       double, float>;

// One separable pass over axis `map` of a [outer, map.in, inner] tensor into
// [outer, map.out, inner].
template <typename In, typename Out, typename A>
void InterpPass(const In* x, Out* y, int64_t outer, int64_t inner, const AxisMap& map,
                const std::vector<A>& weights, A extrapolation) {
  const int64_t n = map.taps;
  const Out extra = FromCompute<Out, A>(extrapolation);
  std::vector<A> acc(inner > 1 ? static_cast<size_t>(inner) : 0);
  for (int64_t ot = 0; ot < outer; ++ot) {
    const In* xs = x + ot * map.in * inner;
    Out* ys = y + ot * map.out * inner;
    for (int64_t o = 0; o < map.out; ++o) {
      Out* yr = ys + o * inner;
      if (!map.outside.empty() && map.outside[o]) {
        std::fill(yr, yr + inner, extra);
        continue;
      }
      const int64_t* idx = &map.index[o * n];
      const A* w = &weights[o * n];
      if (inner == 1) {
        A s = 0;
        for (int64_t j = 0; j < n; ++j) s += w[j] * static_cast<A>(Load(xs[idx[j]]));
        yr[0] = FromCompute<Out, A>(s);
        continue;
      }
      A* a = acc.data();
      bool started = false;
      for (int64_t j = 0; j < n; ++j) {
        if (w[j] == 0) continue;
        const In* row = xs + idx[j] * inner;
        const A wj = w[j];
        if (!started) {
          for (int64_t i = 0; i < inner; ++i) a[i] = wj * static_cast<A>(Load(row[i]));
          started = true;
        } else {
          for (int64_t i = 0; i < inner; ++i) a[i] += wj * static_cast<A>(Load(row[i]));
        }
      }
      if (!started) std::fill(a, a + inner, A(0));
      for (int64_t i = 0; i < inner; ++i) yr[i] = FromCompute<Out, A>(a[i]);
    }
  }
}

// Linear interpolation over the last two axes only (a bilinear upsampling of NCHW
// planes, the common case): both passes at once, an output row at a time, the rows
// split over the compute threads. The same sums in the same order as InterpPass's two
// passes (the W pass w0 * x0 + w1 * x1, then the H pass skipping a zero weight), so
// the same values up to the sign of a zero, without the intermediate tensor.
template <typename T>
void Bilinear2D(const T* x, T* y, int64_t planes, const AxisMap& mh, const AxisMap& mw) {
  using A = InterpType<T>;
  const int64_t ow = mw.out, iw = mw.in, oh = mh.out, ih = mh.in;
  std::vector<int64_t> ix0(static_cast<size_t>(ow)), ix1(static_cast<size_t>(ow));
  std::vector<A> wx0(static_cast<size_t>(ow)), wx1(static_cast<size_t>(ow));
  for (int64_t o = 0; o < ow; ++o) {
    ix0[o] = mw.index[o * 2];
    ix1[o] = mw.index[o * 2 + 1];
    wx0[o] = static_cast<A>(mw.weight[o * 2]);
    wx1[o] = static_cast<A>(mw.weight[o * 2 + 1]);
  }
  ParallelFor(planes * oh, std::max<int64_t>(1, 16384 / std::max<int64_t>(ow, 1)), [&](int64_t first, int64_t last, int) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t p = r / oh, o = r % oh;
      const A wh0 = static_cast<A>(mh.weight[o * 2]), wh1 = static_cast<A>(mh.weight[o * 2 + 1]);
      const T* r0 = x + (p * ih + mh.index[o * 2]) * iw;
      const T* r1 = x + (p * ih + mh.index[o * 2 + 1]) * iw;
      T* yr = y + r * ow;
      if (wh0 != 0 && wh1 != 0) {
        for (int64_t j = 0; j < ow; ++j) {
          const A t0 = wx0[j] * static_cast<A>(Load(r0[ix0[j]])) + wx1[j] * static_cast<A>(Load(r0[ix1[j]]));
          const A t1 = wx0[j] * static_cast<A>(Load(r1[ix0[j]])) + wx1[j] * static_cast<A>(Load(r1[ix1[j]]));
          yr[j] = FromCompute<T, A>(wh0 * t0 + wh1 * t1);
        }
      } else if (wh0 != 0 || wh1 != 0) {
        const T* row = wh0 != 0 ? r0 : r1;
        const A wh = wh0 != 0 ? wh0 : wh1;
        for (int64_t j = 0; j < ow; ++j) {
          yr[j] = FromCompute<T, A>(wh * (wx0[j] * static_cast<A>(Load(row[ix0[j]])) +
                                          wx1[j] * static_cast<A>(Load(row[ix1[j]]))));
        }
      } else {
        for (int64_t j = 0; j < ow; ++j) yr[j] = FromCompute<T, A>(A(0));
      }
    }
  });
}

template <typename T>
void InterpResize(const T* x, T* y, const Shape& in_shape, const Shape& out_shape,
                  const std::vector<AxisMap>& maps, double extrapolation) {
  using A = InterpType<T>;
  const size_t rank = in_shape.size();
  std::vector<size_t> axes;  // Innermost first.
  for (size_t d = rank; d-- > 0;) {
    if (!maps[d].identity) axes.push_back(d);
  }
  if (axes.empty()) {
    std::memcpy(static_cast<void*>(y), x, sizeof(T) * static_cast<size_t>(*NumElements(in_shape)));
    return;
  }
  if (axes.size() == 2 && axes[0] == rank - 1 && axes[1] == rank - 2 && maps[rank - 1].taps == 2 &&
      maps[rank - 2].taps == 2 && maps[rank - 1].outside.empty() && maps[rank - 2].outside.empty() &&
      maps[rank - 1].in > 0 && maps[rank - 2].in > 0 && maps[rank - 1].out > 1) {
    Bilinear2D<T>(x, y, *NumElements(in_shape) / (in_shape[rank - 1] * in_shape[rank - 2]), maps[rank - 2],
                  maps[rank - 1]);
    return;
  }
  Shape cur = in_shape;
  std::vector<A> buf[2];
  const A* src = nullptr;  // Null: read x.
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t d = axes[k];
    const AxisMap& map = maps[d];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= cur[i];
    for (size_t i = d + 1; i < rank; ++i) inner *= cur[i];
    std::vector<A> weights(map.weight.begin(), map.weight.end());
    const bool final = k + 1 == axes.size();
    const A e = static_cast<A>(extrapolation);
    if (final) {
      if (src) {
        InterpPass<A, T, A>(src, y, outer, inner, map, weights, e);
      } else {
        InterpPass<T, T, A>(x, y, outer, inner, map, weights, e);
      }
    } else {
      std::vector<A>& dst = buf[k % 2];
      dst.resize(static_cast<size_t>(outer * map.out * inner));
      if (src) {
        InterpPass<A, A, A>(src, dst.data(), outer, inner, map, weights, e);
      } else {
        InterpPass<T, A, A>(x, dst.data(), outer, inner, map, weights, e);
      }
      src = dst.data();
    }
    cur[d] = map.out;
  }
}

class ResizeKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<ResizeKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(ResizeAttrs parsed, ParseResizeAttrs(def.since_version, attrs));
    return std::make_unique<ResizeKernel>(def, attrs, std::move(parsed));
  }
  ResizeKernel(const OpDef& def, const Attributes& attrs, ResizeAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(attrs_, args));
    const std::vector<AxisMap> maps = BuildAxisMaps(attrs_, plan, in[0].shape);
    if (attrs_.mode == ResizeMode::kNearest) {
      return DispatchAllTypes(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        const T e = FromCompute<T, double>(attrs_.extrapolation);
        NearestResize<T>(DataAs<const T>(in[0]), DataAs<T>(out[0]), in[0].shape, out[0].shape, maps,
                         e);
        return OkStatus();
      });
    }
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      InterpResize<T>(DataAs<const T>(in[0]), DataAs<T>(out[0]), in[0].shape, out[0].shape, maps,
                      attrs_.extrapolation);
      return OkStatus();
    });
  }

 private:
  ResizeAttrs attrs_;
};

}  // namespace

uint64_t ResizeExtrapolationBits(DType dtype, double v) {
  uint64_t bits = 0;
  (void)DispatchAllTypes(kResize, dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T value = FromCompute<T, double>(v);
    std::memcpy(&bits, &value, sizeof(T));
    return OkStatus();
  });
  return bits;
}

Status AddResizeOpDefs(KernelRegistry& registry) {
  for (int definition : {10, 11, 13}) REMEX_RETURN_IF_ERROR(registry.AddOp(ResizeDef(definition)));
  return OkStatus();
}

Status AddResizeCpuKernels(KernelRegistry& registry) {
  for (int definition : {10, 11, 13}) {
    REMEX_RETURN_IF_ERROR(
        AddCpuKernel<ResizeKernel>(registry, "Resize", ResizeDef(definition).since_version));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
