// The checked views of the linear quantization ops' inputs, shared by their CPU kernels
// (kernels/ops/quantization/quantize.cc, qlinear.cc) and CUDA kernels (cuda/quant.cc):
// every shape, dtype and attribute is checked here once. Errors are INVALID_ARGUMENT
// "<op>: ..." for inputs the ONNX definition refuses, UNIMPLEMENTED "<op>: ..." for
// forms it allows that Remex does not run (named in each message).
#pragma once

#include <span>
#include <string_view>

#include "base/status.h"
#include "kernels/kernels.h"
#include "kernels/ops/quantization/quantize_ops.h"

namespace remex::kernels::internal {

// The 8-bit types of ONNX's linear quantization: uint8 and int8.
inline bool IsQuantType(DType dt) { return dt == DType::kUint8 || dt == DType::kInt8; }

// QuantizeLinear-10/13 (x, y_scale, [y_zero_point]) and DequantizeLinear-10/13 (x,
// x_scale, [x_zero_point]): x seen as [outer, channels, inner] around `axis` (opset 13,
// default 1, in [-rank, rank)); the scale and zero point hold 1 value (per tensor) or
// `channels` values (per axis, opset 13 only, 1-D).
//   QuantizeLinear: x float32 or int32; y_scale float32; y_zero_point uint8 or int8
//     (absent: uint8 0), which gives y's dtype.
//   DequantizeLinear: x uint8, int8 or int32; x_scale float32; x_zero_point x's dtype
//     (int32: absent or 0, which the kernels check); y float32.
struct QuantizeView {
  int64_t outer = 1, channels = 1, inner = 1;
  bool per_axis = false;
  DType x = DType::kUndefined;  // x's dtype.
  DType q = DType::kUint8;      // The quantized type: y's (Quantize) or x's (Dequantize).
  bool has_zero_point = false;
};
StatusOr<QuantizeView> QuantizeViewOf(std::string_view op, int since_version, const Attributes& attrs,
                                      std::span<const ShapeFnArg> in);

// MatMulInteger-10 (A, B, [a_zero_point], [b_zero_point]) -> int32 and QLinearMatMul-10
// (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) -> y_zero_
// point's type: numpy matmul of uint8 / int8 A and B (either combination), batch dims
// broadcast (at most quant::kMaxBatchRank of them). A's scale and zero point are per
// tensor (1 value); B's per tensor or per column ([N]); y's per tensor. Zero points
// have their matrix's dtype; scales are float32.
struct QMatMulView {
  quant::MatMulGeometry g;
  Shape output;
  bool b_per_column = false;  // B's scale and/or zero point hold N values.
};
StatusOr<QMatMulView> QMatMulViewOf(std::string_view op, std::span<const ShapeFnArg> in);

// ConvInteger-10 (x, w, [x_zero_point], [w_zero_point]) -> int32 and QLinearConv-10
// (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, [B]) ->
// y_zero_point's type: Conv's attributes (auto_pad, dilations, group, kernel_shape,
// pads, strides) over NCHW x [N, C, D1 (, D2 (, D3))] and w [M, C / group, k1 ...],
// uint8 or int8 each. x's scale and zero point and y's are per tensor; w's per tensor
// or per output channel ([M]); B int32 [M].
struct QConvView {
  quant::ConvGeometry g;  // channels-first, whatever the layout
  Shape output;           // Y's shape in the node's layout
  bool channels_last = false;  // `layout` "NHWC": X and Y are [N, D.., C]
  bool w_per_channel = false;
};
StatusOr<QConvView> QConvViewOf(std::string_view op, const Attributes& attrs, std::span<const ShapeFnArg> in);

// ConvInteger's / QLinearConv's attribute checks (Conv's window attributes and group),
// made when a kernel is created.
Status CheckQConvAttrs(std::string_view op, const Attributes& attrs);

// FusedQLinearAdd (A, a_scale, a_zero_point, B, b_scale, b_zero_point, y_scale,
// y_zero_point) -> Y of y_zero_point's dtype and A's shape (internal: the compiler's
// fusion of a per-tensor quantized residual Add; quantize_ops.h QLinearAdd): A and B
// uint8 or int8 of one shape (no broadcasting); every scale float32 and every zero
// point of its operand's dtype (y's: uint8 or int8), one value each; the attribute
// `activation` absent or "Relu".
struct QLinearAddView {
  int64_t n = 0;  // elements of A, B and Y
  DType a = DType::kUint8, b = DType::kUint8, y = DType::kUint8;
  bool relu = false;
};
StatusOr<QLinearAddView> QLinearAddViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// One element of a uint8 / int8 / int32 zero point (or 0 when absent) as int32.
int32_t ZeroPointAt(const TensorRef* zero_point, int64_t i);

}  // namespace remex::kernels::internal
