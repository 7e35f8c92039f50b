// RoiAlign's per-output formula, written once for the CPU kernel
// (kernels/ops/image/detection.cc) and the CUDA kernel
// (kernels/ops/image/cuda/detection_impl.cu): both call RoiBinsOf per roi and
// RoiAlignValue per output element, so their outputs are the same bits (the device code
// is compiled without contraction into fused multiply-adds).
//
// Semantics (ONNX RoiAlign-10/16, https://onnx.ai/onnx/operators/onnx__RoiAlign.html),
// in ONNX Runtime's order of float32 operations: a roi [x1, y1, x2, y2] is scaled by
// spatial_scale and shifted by -0.5 (coordinate_transformation_mode half_pixel; no
// shift and a size of at least 1x1 for output_half_pixel, RoiAlign-10's only mode);
// each of the output_height x output_width bins samples a grid of sampling_ratio^2
// points (sampling_ratio 0: ceil(roi size / output size) per axis); a point is
// bilinearly interpolated from the 4 pixels around it (0 outside [-1, H] x [-1, W],
// clamped to the last pixel). avg averages the points; max takes, per point, the
// largest of the 4 weighted pixels (w_i * v_i), then the largest over the points:
// ONNX Runtime's definition of max mode, which is not the max of interpolated values.
// A plain header: <math.h> and <stdint.h> only, so that .cu files include it.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REMEX_DET_FN __host__ __device__ __forceinline__
#else
#define REMEX_DET_FN inline
#endif

namespace remex::kernels::det {

// The largest sampling grid per bin axis accepted (a larger one is out of range: the
// CPU kernel fails, the CUDA kernel writes zeros for that roi).
constexpr int64_t kMaxRoiGrid = 1024;

struct RoiAlignGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t pooled_h = 1, pooled_w = 1;
  int64_t sampling_ratio = 0;
  float spatial_scale = 1.0f;
  bool half_pixel = true;
  bool max_mode = false;
};

// One roi's bins: start, bin size and sampling grid per axis.
struct RoiBins {
  float start_h = 0, start_w = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0;
  bool valid = false;  // The grid is within [-kMaxRoiGrid, kMaxRoiGrid] (not NaN).
};

REMEX_DET_FN int64_t RoiGrid(float roi_size, int64_t pooled, int64_t sampling_ratio, bool* valid) {
  if (sampling_ratio > 0) return sampling_ratio;
  const float g = ceilf(roi_size / static_cast<float>(pooled));
  if (!(g >= -static_cast<float>(kMaxRoiGrid) && g <= static_cast<float>(kMaxRoiGrid))) {
    *valid = false;
    return 0;
  }
  return static_cast<int64_t>(g);
}

// `roi`: [x1, y1, x2, y2] as given.
REMEX_DET_FN RoiBins RoiBinsOf(const float* roi, const RoiAlignGeometry& g) {
  RoiBins b;
  const float offset = g.half_pixel ? 0.5f : 0.0f;
  b.start_w = roi[0] * g.spatial_scale - offset;
  b.start_h = roi[1] * g.spatial_scale - offset;
  const float end_w = roi[2] * g.spatial_scale - offset;
  const float end_h = roi[3] * g.spatial_scale - offset;
  float roi_w = end_w - b.start_w;
  float roi_h = end_h - b.start_h;
  if (!g.half_pixel) {
    roi_w = fmaxf(roi_w, 1.0f);
    roi_h = fmaxf(roi_h, 1.0f);
  }
  b.bin_h = roi_h / static_cast<float>(g.pooled_h);
  b.bin_w = roi_w / static_cast<float>(g.pooled_w);
  b.valid = true;
  b.grid_h = RoiGrid(roi_h, g.pooled_h, g.sampling_ratio, &b.valid);
  b.grid_w = RoiGrid(roi_w, g.pooled_w, g.sampling_ratio, &b.valid);
  return b;
}

// Output (ph, pw) of one channel's plane [height, width] for a valid roi `b`.
REMEX_DET_FN float RoiAlignValue(const float* plane, const RoiBins& b, const RoiAlignGeometry& g, int64_t ph,
                                 int64_t pw) {
  float out = 0.0f;
  bool any = false;
  for (int64_t iy = 0; iy < b.grid_h; ++iy) {
    const float yy = b.start_h + static_cast<float>(ph) * b.bin_h +
                     static_cast<float>(iy + 0.5f) * b.bin_h / static_cast<float>(b.grid_h);
    for (int64_t ix = 0; ix < b.grid_w; ++ix) {
      const float xx = b.start_w + static_cast<float>(pw) * b.bin_w +
                       static_cast<float>(ix + 0.5f) * b.bin_w / static_cast<float>(b.grid_w);
      float w1 = 0, w2 = 0, w3 = 0, w4 = 0;
      int64_t p1 = 0, p2 = 0, p3 = 0, p4 = 0;
      float y = yy, x = xx;
      if (!(y < -1.0f || y > static_cast<float>(g.height) || x < -1.0f || x > static_cast<float>(g.width))) {
        if (y <= 0) y = 0;
        if (x <= 0) x = 0;
        int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
        int64_t y_high, x_high;
        if (y_low >= g.height - 1) {
          y_high = y_low = g.height - 1;
          y = static_cast<float>(y_low);
        } else {
          y_high = y_low + 1;
        }
        if (x_low >= g.width - 1) {
          x_high = x_low = g.width - 1;
          x = static_cast<float>(x_low);
        } else {
          x_high = x_low + 1;
        }
        const float ly = y - static_cast<float>(y_low), lx = x - static_cast<float>(x_low);
        const float hy = 1.0f - ly, hx = 1.0f - lx;
        w1 = hy * hx;
        w2 = hy * lx;
        w3 = ly * hx;
        w4 = ly * lx;
        p1 = y_low * g.width + x_low;
        p2 = y_low * g.width + x_high;
        p3 = y_high * g.width + x_low;
        p4 = y_high * g.width + x_high;
      }
      const float v1 = w1 * plane[p1], v2 = w2 * plane[p2], v3 = w3 * plane[p3], v4 = w4 * plane[p4];
      if (g.max_mode) {
        // std::max(a, b) is (a < b) ? b : a.
        float v = v1 < v2 ? v2 : v1;
        v = v < v3 ? v3 : v;
        v = v < v4 ? v4 : v;
        out = !any ? v : (out < v ? v : out);
        any = true;
      } else {
        out += v1 + v2 + v3 + v4;
      }
    }
  }
  if (!g.max_mode) {
    int64_t count = b.grid_h * b.grid_w;
    if (count < 1) count = 1;
    out /= static_cast<float>(count);
  }
  return out;
}

}  // namespace remex::kernels::det
