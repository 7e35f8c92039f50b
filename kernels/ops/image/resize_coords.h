// The per-axis coordinate math of ONNX Resize-10/11/13, shared by the CPU kernel
// (kernels/ops/image/resize.cc) and the CUDA kernel (kernels/ops/image/cuda/resize_impl.cu) so both pick
// the same source indices and weights: the coordinate transformation, the nearest
// rounding modes and the linear and cubic taps. Computed in double. A plain header: no
// CUDA, no Remex headers beyond kernels/op_enums.h, so .cu files include it.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/op_enums.h"

#if defined(__CUDACC__)
#define REMEX_RESIZE_COORDS_FN __host__ __device__ inline
#else
#define REMEX_RESIZE_COORDS_FN inline
#endif

namespace remex::kernels {

// The input coordinate (in elements of the axis, possibly fractional or outside
// [0, in - 1]) of output index `x` of one axis: Resize's coordinate_transformation_mode
// `coord`, with the axis' `scale`, input length `in`, length_resized `out` and, for
// tf_crop_and_resize, the normalized roi bounds `roi_start` and `roi_end`.
REMEX_RESIZE_COORDS_FN double ResizeOriginalCoord(ResizeCoord coord, double x, double scale, int64_t in,
                                                  double out, double roi_start, double roi_end) {
  const double len_in = static_cast<double>(in);
  switch (coord) {
    case ResizeCoord::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::kAlignCorners:
      return out == 1 ? 0.0 : x * (len_in - 1) / (out - 1);
    case ResizeCoord::kAsymmetric:
      return x / scale;
    case ResizeCoord::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case ResizeCoord::kTfCropAndResize:
      return out > 1
                 ? roi_start * (len_in - 1) + x * (roi_end - roi_start) * (len_in - 1) / (out - 1)
                 : 0.5 * (roi_start + roi_end) * (len_in - 1);
  }
  return 0.0;
}

// `v` truncated to an index in [0, in - 1]; NaN gives 0.
REMEX_RESIZE_COORDS_FN int64_t ResizeClampIndex(double v, int64_t in) {
  if (!(v > 0)) return 0;  // Also NaN.
  const double hi = static_cast<double>(in - 1);
  return v >= hi ? in - 1 : static_cast<int64_t>(v);
}

// The input index that nearest mode reads for coordinate `x`: Resize's nearest_mode `m`
// (`downscale`: the axis' scale is below 1, used by Resize-10's simple mode), clamped
// into [0, in - 1].
REMEX_RESIZE_COORDS_FN int64_t ResizeNearestIndex(ResizeNearest m, double x, bool downscale, int64_t in) {
  const double f = std::floor(x);
  double r = f;
  if (x != f) {
    switch (m) {
      case ResizeNearest::kRoundPreferFloor:
        r = x - f <= 0.5 ? f : f + 1;
        break;
      case ResizeNearest::kRoundPreferCeil:
        r = x - f < 0.5 ? f : f + 1;
        break;
      case ResizeNearest::kFloor:
        r = f;
        break;
      case ResizeNearest::kCeil:
        r = f + 1;
        break;
      case ResizeNearest::kSimple:
        r = downscale ? f + 1 : f;
        break;
    }
  }
  return ResizeClampIndex(r, in);
}

// The four cubic weights of the taps at floor(x) - 1 .. floor(x) + 2 for the fraction
// `t` = x - floor(x) in [0, 1), with Resize's cubic_coeff_a `a` (before any
// exclude_outside renormalization).
REMEX_RESIZE_COORDS_FN void ResizeCubicCoeffs(double t, double a, double c[4]) {
  auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(1 - t);
  c[3] = far(2 - t);
}

// The taps of linear (`mode` kLinear: 2) or cubic (otherwise: 4) interpolation at
// coordinate `x` of an axis of `in` >= 1 elements: the input indices `idx`, clamped
// into [0, in - 1], and their weights `w`; cubic uses cubic_coeff_a `cubic_a` and, with
// `exclude_outside`, zeroes the taps outside the axis and renormalizes the rest.
// Returns the number of taps.
REMEX_RESIZE_COORDS_FN int ResizeInterpTaps(ResizeMode mode, double x, int64_t in, double cubic_a,
                                            bool exclude_outside, int64_t idx[4], double w[4]) {
  auto clamp_index = [in](int64_t i) { return i < 0 ? int64_t{0} : (i > in - 1 ? in - 1 : i); };
  // Coordinates far outside the axis sample the edge either way; bound them for the casts.
  const double hi = static_cast<double>(in - 1);
  const double xc = x < -4.0 ? -4.0 : (x > hi + 4.0 ? hi + 4.0 : x);
  const double f = std::floor(xc);
  const double t = xc - f;
  const int64_t base = static_cast<int64_t>(f);
  if (mode == ResizeMode::kLinear) {
    w[0] = 1 - t;
    w[1] = t;
    idx[0] = clamp_index(base);
    idx[1] = clamp_index(base + 1);
    return 2;
  }
  ResizeCubicCoeffs(t, cubic_a, w);
  double sum = 0;
  for (int j = 0; j < 4; ++j) {
    const int64_t i = base - 1 + j;
    if (exclude_outside && (i < 0 || i >= in)) w[j] = 0;
    sum += w[j];
    idx[j] = clamp_index(i);
  }
  if (exclude_outside && sum != 0) {
    for (int j = 0; j < 4; ++j) w[j] /= sum;
  }
  return 4;
}

}  // namespace remex::kernels

#undef REMEX_RESIZE_COORDS_FN
