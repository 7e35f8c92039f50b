// GridSample's per-output formula, written once for the CPU kernel
// (kernels/ops/image/grid_sample.cc) and the CUDA kernel (cuda/grid_sample_impl.cu): both call
// GridPointOf per grid point and GridSampleValue per output element, so their outputs
// are the same bits (the device code is compiled without contraction into fused
// multiply-adds).
//
// Semantics (ONNX GridSample-16, https://onnx.ai/onnx/operators/onnx__GridSample.html),
// in ONNX Runtime's order of operations, in the compute type C (float for float16 and
// float32, double for float64):
//   - A grid value g in [-1, 1] is unnormalized to a pixel coordinate: align_corners 1
//     maps -1 and 1 to the centres of the first and last pixels ((g + 1) / 2 *
//     (size - 1)), align_corners 0 to their outer edges (((g + 1) * size - 1) / 2).
//   - mode nearest rounds the coordinate half to even (rint), before and after the
//     padding, as ONNX Runtime and the ONNX reference do.
//   - A coordinate outside [lo, hi] ([0, size - 1] with align_corners, [-0.5, size -
//     0.5] without) is, per axis (the ONNX reference's reading): border, clamped to
//     [0, size - 1]; reflection, reflected at lo and hi until inside; zeros, left.
//   - The value is then the pixel at the coordinate (nearest), the bilinear
//     interpolation of the 2x2 pixels around it, or the bicubic (Keys, alpha -0.75)
//     interpolation of the 4x4 pixels around it. A pixel outside the image is 0
//     (zeros), the nearest edge pixel (border), or the pixel reflected into the image
//     at lo and hi (reflection).
//   - Not finite values: a NaN grid value gives NaN; an infinite one gives 0 under
//     zeros (the point is outside the image), the edge pixel under border and NaN
//     under reflection.
// A plain header: <math.h> and <stdint.h> only, so that .cu files include it.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REMEX_GRID_FN __host__ __device__ __forceinline__
#else
#define REMEX_GRID_FN inline
#endif

namespace remex::kernels::grid {

enum GridMode : int32_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum GridPadding : int32_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// X [batch, channels, h_in, w_in], grid [batch, h_out, w_out, 2] -> Y [batch,
// channels, h_out, w_out]. h_in and w_in >= 1 whenever Y is not empty.
struct GridSampleGeometry {
  int64_t batch = 0, channels = 0, h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int32_t mode = kBilinear;
  int32_t padding = kZeros;
  bool align_corners = false;
};

REMEX_GRID_FN float GridFloor(float v) { return floorf(v); }
REMEX_GRID_FN double GridFloor(double v) { return floor(v); }
REMEX_GRID_FN float GridRint(float v) { return rintf(v); }
REMEX_GRID_FN double GridRint(double v) { return rint(v); }

// The pixel coordinate of normalized grid value `n` on an axis of `size` pixels.
template <typename C>
REMEX_GRID_FN C GridUnnormalize(C n, int64_t size, bool align_corners) {
  if (align_corners) return (n + C(1)) / C(2) * static_cast<C>(size - 1);
  return ((n + C(1)) * static_cast<C>(size) - C(1)) / C(2);
}

// The axis' valid range [lo, hi] of coordinates.
template <typename C>
REMEX_GRID_FN C GridLow(bool align_corners) {
  return align_corners ? C(0) : C(-0.5);
}
template <typename C>
REMEX_GRID_FN C GridHigh(int64_t size, bool align_corners) {
  return align_corners ? static_cast<C>(size) - C(1) : static_cast<C>(size) - C(0.5);
}

// `x` reflected at lo and hi until inside [lo, hi] (ONNX Runtime's GsReflect, with the
// number of reflections kept in C so that no value overflows an integer). lo when the
// range is empty (one pixel with align_corners); NaN for an infinite or NaN x.
template <typename C>
REMEX_GRID_FN C GridReflect(C x, C lo, C hi) {
  const C range = hi - lo;
  if (!(range > C(0))) return x != x ? x : lo;
  if (x < lo) {
    const C dx = lo - x;
    const C n = GridFloor(dx / range);
    const C r = dx - n * range;
    const bool even = GridFloor(n / C(2)) * C(2) == n;
    return even ? lo + r : hi - r;
  }
  if (x > hi) {
    const C dx = x - hi;
    const C n = GridFloor(dx / range);
    const C r = dx - n * range;
    const bool even = GridFloor(n / C(2)) * C(2) == n;
    return even ? hi - r : lo + r;
  }
  return x;
}

// The source coordinate of grid value `n` on an axis of `size` pixels: unnormalized,
// rounded (nearest), padded (border, reflection), rounded again (nearest).
template <typename C>
REMEX_GRID_FN C GridSourceCoord(C n, int64_t size, const GridSampleGeometry& g) {
  C x = GridUnnormalize(n, size, g.align_corners);
  if (g.mode == kNearest) x = GridRint(x);
  const C lo = GridLow<C>(g.align_corners), hi = GridHigh<C>(size, g.align_corners);
  if (x < lo || x > hi) {
    if (g.padding == kBorder) {
      const C last = static_cast<C>(size - 1);
      x = x < C(0) ? C(0) : (x > last ? last : x);
    } else if (g.padding == kReflection) {
      x = GridReflect(x, lo, hi);
    }
  }
  if (g.mode == kNearest) x = GridRint(x);
  return x;
}

// One grid point's source coordinates (x along W, y along H), kept within a few
// pixels of the image so that they convert to int64 (a coordinate further out reads
// only padding, as it would in place); nan: either coordinate is NaN.
template <typename C>
struct GridPoint {
  C x = 0, y = 0;
  bool nan = false;
};

template <typename C>
REMEX_GRID_FN C GridKeepNear(C v, int64_t size) {
  const C lo = C(-4), hi = static_cast<C>(size) + C(4);
  return v < lo ? lo : (v > hi ? hi : v);
}

// The point of the grid's (x, y) pair (gx, gy), in C.
template <typename C>
REMEX_GRID_FN GridPoint<C> GridPointOf(C gx, C gy, const GridSampleGeometry& g) {
  GridPoint<C> p;
  const C x = GridSourceCoord(gx, g.w_in, g), y = GridSourceCoord(gy, g.h_in, g);
  p.nan = x != x || y != y;
  p.x = p.nan ? C(0) : GridKeepNear(x, g.w_in);
  p.y = p.nan ? C(0) : GridKeepNear(y, g.h_in);
  return p;
}

// The pixel (r, c) of a plane [h_in, w_in] under the padding mode. `plane(i)` returns
// element i of the plane in C.
template <typename C, typename Plane>
REMEX_GRID_FN C GridPixelAt(const Plane& plane, int64_t r, int64_t c, const GridSampleGeometry& g) {
  const int64_t h = g.h_in, w = g.w_in;
  if (g.padding == kZeros) {
    if (r < 0 || r >= h || c < 0 || c >= w) return C(0);
  } else if (g.padding == kReflection) {
    c = static_cast<int64_t>(
        GridReflect(static_cast<C>(c), GridLow<C>(g.align_corners), GridHigh<C>(w, g.align_corners)));
    r = static_cast<int64_t>(
        GridReflect(static_cast<C>(r), GridLow<C>(g.align_corners), GridHigh<C>(h, g.align_corners)));
  }
  // Border, and a guard for reflection: within the image.
  c = c < 0 ? 0 : (c >= w ? w - 1 : c);
  r = r < 0 ? 0 : (r >= h ? h - 1 : r);
  return plane(r * w + c);
}

// Keys' cubic convolution coefficients (alpha -0.75) of the 4 taps around a point at
// fraction t past the second tap.
template <typename C>
REMEX_GRID_FN void GridCubicCoeffs(C t, C coeffs[4]) {
  const C a = C(-0.75);
  const C x = t < C(0) ? -t : t;
  coeffs[0] = ((a * (x + C(1)) - C(5) * a) * (x + C(1)) + C(8) * a) * (x + C(1)) - C(4) * a;
  coeffs[1] = ((a + C(2)) * x - (a + C(3))) * x * x + C(1);
  coeffs[2] = ((a + C(2)) * (C(1) - x) - (a + C(3))) * (C(1) - x) * (C(1) - x) + C(1);
  coeffs[3] = ((a * (C(2) - x) - C(5) * a) * (C(2) - x) + C(8) * a) * (C(2) - x) - C(4) * a;
}

// The output of one channel's plane [h_in, w_in] at grid point `p`. `plane(i)`
// returns element i of the plane in C.
template <typename C, typename Plane>
REMEX_GRID_FN C GridSampleValue(const Plane& plane, const GridPoint<C>& p, const GridSampleGeometry& g) {
  if (p.nan) return C(NAN);
  if (g.mode == kNearest) {
    return GridPixelAt<C>(plane, static_cast<int64_t>(p.y), static_cast<int64_t>(p.x), g);
  }
  const int64_t x1 = static_cast<int64_t>(GridFloor(p.x)), y1 = static_cast<int64_t>(GridFloor(p.y));
  if (g.mode == kBilinear) {
    const int64_t x2 = x1 + 1, y2 = y1 + 1;
    const C p11 = GridPixelAt<C>(plane, y1, x1, g), p12 = GridPixelAt<C>(plane, y1, x2, g);
    const C p21 = GridPixelAt<C>(plane, y2, x1, g), p22 = GridPixelAt<C>(plane, y2, x2, g);
    const C dx2 = static_cast<C>(x2) - p.x, dx1 = p.x - static_cast<C>(x1);
    const C dy2 = static_cast<C>(y2) - p.y, dy1 = p.y - static_cast<C>(y1);
    return dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22);
  }
  // Bicubic: the 4x4 taps from (y1 - 1, x1 - 1), interpolated along x per row, then
  // along y.
  const int64_t x0 = x1 - 1, y0 = y1 - 1;
  C coeffs[4];
  GridCubicCoeffs(p.x - static_cast<C>(x0) - C(1), coeffs);
  C rows[4];
  for (int i = 0; i < 4; ++i) {
    C v[4];
    for (int j = 0; j < 4; ++j) v[j] = GridPixelAt<C>(plane, y0 + i, x0 + j, g);
    rows[i] = coeffs[0] * v[0] + coeffs[1] * v[1] + coeffs[2] * v[2] + coeffs[3] * v[3];
  }
  GridCubicCoeffs(p.y - static_cast<C>(y0) - C(1), coeffs);
  return coeffs[0] * rows[0] + coeffs[1] * rows[1] + coeffs[2] * rows[2] + coeffs[3] * rows[3];
}

}  // namespace remex::kernels::grid
