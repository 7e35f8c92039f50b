// The checked views of NonMaxSuppression, RoiAlign and MaxUnpool, shared by their CPU
// kernels (image/detection.cc, nn/unpool.cc) and CUDA kernels
// (image/cuda/detection.cc, nn/cuda/unpool.cc): every shape, dtype and attribute is checked here once. Errors
// are INVALID_ARGUMENT "<op>: ..." for inputs the ONNX definition refuses, UNIMPLEMENTED
// for dtypes Remex does not run.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/ops/image/det_ops.h"
#include "kernels/kernels.h"

namespace remex::kernels::internal {

// NonMaxSuppression-10/11 (https://onnx.ai/onnx/operators/onnx__NonMaxSuppression.html):
// boxes float32 [B, N, 4], scores float32 [B, C, N], optional
// max_output_boxes_per_class int64, iou_threshold float32 and score_threshold float32
// (0 or 1 element each; absent or empty: 0 boxes, 0, no threshold), all in host memory.
// Attribute center_point_box: 0 (boxes are [y1, x1, y2, x2], either corner first) or 1
// ([x_center, y_center, width, height]). As ONNX Runtime: per batch and class, the boxes
// whose score is > score_threshold are taken in descending score (equal scores by
// ascending box index), a box is kept unless its IoU with a kept box of that class is
// > iou_threshold (iou_threshold in [0, 1]; boxes of zero area never suppress), at most
// max_output_boxes_per_class per class. Returns the selected [batch, class, box]
// triples, flattened (the output is int64 [count, 3]).
StatusOr<std::vector<int64_t>> NonMaxSuppressionOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// RoiAlign-10/16 (https://onnx.ai/onnx/operators/onnx__RoiAlign.html): X float32
// [N, C, H, W], rois float32 [num_rois, 4], batch_indices int64 [num_rois] -> float32
// [num_rois, C, output_height, output_width]. Attributes mode (avg | max),
// output_height, output_width (>= 1), sampling_ratio (>= 0, at most det::kMaxRoiGrid),
// spatial_scale, and from opset 16 coordinate_transformation_mode (half_pixel, the
// default, | output_half_pixel; RoiAlign-10 is output_half_pixel). `since_version`:
// the entry's. A batch index outside [0, N) is out of range (checked by the kernels).
struct RoiAlignView {
  det::RoiAlignGeometry g;
  int64_t num_rois = 0;
  int64_t batch = 0;  // N.
  Shape output;
};
StatusOr<RoiAlignView> RoiAlignViewOf(int since_version, const Attributes& attrs,
                                      std::span<const ShapeFnArg> in);

// MaxUnpool-9/11 (https://onnx.ai/onnx/operators/onnx__MaxUnpool.html): X [N, C, D1 ...]
// (float16, float32, float64), I int64 of X's shape, optional output_shape (int64, X's
// rank, host memory). Attributes kernel_shape (required), strides (default 1), pads
// (default 0). The unpooled shape is X's with each spatial dim (D - 1) * stride -
// pad_begin - pad_end + kernel; I holds flat indices into it: it is zeros but
// U.flat[I[i]] = X.flat[i] (the last i wins where indices repeat). Y is U, or with
// output_shape (each dim at least U's) U at Y's origin and zeros past it, as ONNX
// Runtime pads it. An index outside [0, U's element count) is out of range (checked by
// the kernels).
struct MaxUnpoolView {
  Shape unpooled;
  Shape output;
  int64_t x_count = 0;
  int64_t unpooled_count = 0;
  int64_t y_count = 0;
};
StatusOr<MaxUnpoolView> MaxUnpoolViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

}  // namespace remex::kernels::internal
