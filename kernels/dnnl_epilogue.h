// oneDNN helpers shared by the CPU kernels of FusedConv (kernels/ops/nn/conv.cc) and
// FusedMatMul (kernels/ops/math/matmul.cc): the epilogue's activation as eltwise post-ops
// (float16 tensors go through float32 copies: kernels/float32_copies.h).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <span>

#include "kernels/float32_copies.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

// Appends the epilogue's activation `e` to `po` as oneDNN eltwise post-ops: oneDNN's
// own algorithms, for speed, which compute each ONNX operator's formula to within
// their rounding (the reference formula, which the non-oneDNN paths compute, is
// kernels/scalar_ops.h's through kernels/conv_epilogue.h): relu with alpha 0 (Relu) or
// alpha (LeakyRelu), clip (Clip; clip(max, max) when min > max), logistic (Sigmoid),
// tanh, linear(alpha, beta) then clip(0, 1) (HardSigmoid), hardswish =
// x * relu6(x + 3) / 6 (HardSwish), swish with alpha (Swish), gelu_erf (Gelu). Nothing for no activation (defined in
// kernels/ops/nn/conv.cc).
void AppendActivation(dnnl::post_ops& po, const ConvEpilogue& e);

}  // namespace remex::kernels::internal
