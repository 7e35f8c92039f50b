// GridSample's checked view, shared by its CPU kernel (kernels/ops/image/grid_sample.cc) and its
// CUDA kernel (kernels/ops/image/cuda/grid_sample.cc): every shape, dtype and attribute is checked here
// once. Errors are INVALID_ARGUMENT "GridSample: ..." for inputs the ONNX definition
// refuses, UNIMPLEMENTED for dtypes Remex does not run.
#pragma once

#include <span>

#include "base/status.h"
#include "kernels/ops/image/grid_sample_ops.h"
#include "kernels/kernels.h"

namespace remex::kernels::internal {

// GridSample-16 (https://onnx.ai/onnx/operators/onnx__GridSample.html): X [N, C, H_in,
// W_in] and grid [N, H_out, W_out, 2] (the last axis (x, y), normalized to [-1, 1];
// values outside sample the padding) -> Y [N, C, H_out, W_out] of X's dtype. Only the
// 4-D form (opset 16). Dtypes: X and grid both float16, float32 or float64 (ONNX
// allows any X and a float grid of its own dtype; other X dtypes, and a grid dtype
// other than X's, are UNIMPLEMENTED; a grid that is not float is INVALID_ARGUMENT).
// Attributes: align_corners (0, the default, or 1), mode (bilinear, the default,
// nearest, bicubic), padding_mode (zeros, the default, border, reflection). H_in and
// W_in must be at least 1 unless Y is empty. The formula: kernels/ops/image/grid_sample_ops.h.
struct GridSampleView {
  grid::GridSampleGeometry g;
  DType dtype = DType::kUndefined;
  Shape output;
  int64_t output_count = 0;
};
StatusOr<GridSampleView> GridSampleViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

}  // namespace remex::kernels::internal
