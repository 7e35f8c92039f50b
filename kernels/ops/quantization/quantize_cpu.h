// The CPU kernels' loops over whole spans of quantize_ops.h's formulas, compiled for
// AVX-512 and AVX2 as well (REMEX_CPU_CLONES), where the rounding of RoundHalfEven is an
// instruction instead of a call to rintf. Same results as the formulas one value at a time.
#pragma once

#include <cstdint>

#include "kernels/ops/quantization/quantize_ops.h"

namespace remex::kernels::internal {

// y[i] = quant::Quantize(x[i], scale, zero_point) for i < n (QuantizeLinear,
// DynamicQuantizeLinear).
void QuantizeSpan(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
void QuantizeSpan(const float* x, int64_t n, float scale, int32_t zero_point, int8_t* y);

// y[i] = quant::Requantize(static_cast<int32_t>(sum[i] + add), multiplier, zero_point)
// for i < n (QLinearMatMul, QLinearConv: the sums wrap modulo 2^32 as uint32).
void RequantizeSpan(const uint32_t* sum, uint32_t add, int64_t n, float multiplier, int32_t zero_point, uint8_t* y);
void RequantizeSpan(const uint32_t* sum, uint32_t add, int64_t n, float multiplier, int32_t zero_point, int8_t* y);

// y[i] = quant::QLinearAdd(a[i], ..., b[i], ...) for i < n (FusedQLinearAdd), for A, B
// and Y each uint8_t or int8_t.
#define REMEX_QLINEAR_ADD_SPAN(A, B, Y)                                                                   \
  void QLinearAddSpan(const A* a, int32_t a_zero_point, float a_scale, const B* b, int32_t b_zero_point, \
                      float b_scale, bool relu, float y_scale, int32_t y_zero_point, int64_t n, Y* y);
REMEX_QLINEAR_ADD_TYPES(REMEX_QLINEAR_ADD_SPAN)
#undef REMEX_QLINEAR_ADD_SPAN

// The smallest and largest of x[0, n), 0 included (DynamicQuantizeLinear's range; NaN
// skipped).
void RangeWithZero(const float* x, int64_t n, float* lo, float* hi);

}  // namespace remex::kernels::internal
