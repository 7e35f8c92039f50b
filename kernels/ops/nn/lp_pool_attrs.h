// LpPool's attributes, parsed once for its CPU kernel (kernels/ops/nn/pool.cc) and its
// CUDA kernel (kernels/ops/nn/cuda/pool.cc), so both refuse the same values with the
// same errors.
#pragma once

#include "kernels/internal.h"

namespace remex::kernels::internal {

// LpPool-2/11 (https://onnx.ai/onnx/operators/onnx__LpPool.html): the window
// (kernel_shape required; strides, pads, auto_pad; no ceil_mode before opset 18) and
// the norm's order p (default 2).
struct LpPoolAttrs {
  WindowAttrs window;
  int p = 2;
};

// INVALID_ARGUMENT "LpPool: ..." for a missing kernel_shape, a bad window attribute or
// p outside [1, 64].
StatusOr<LpPoolAttrs> ParseLpPoolAttrs(const Attributes& attrs);

}  // namespace remex::kernels::internal
