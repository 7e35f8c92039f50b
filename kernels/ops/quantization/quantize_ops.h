// The formulas of ONNX's linear quantization ops, written once for the CPU kernels
// (kernels/ops/quantization/quantize.cc, kernels/ops/quantization/qlinear.cc) and the CUDA kernels
// (kernels/ops/quantization/cuda/quant_impl.cu): each of them calls these functions per element.
//
// Semantics (https://onnx.ai/onnx/operators/):
//   - QuantizeLinear-10/13: y = saturate(round(x / y_scale) + y_zero_point), round
//     half to even, saturate to the range of y's type (uint8 [0, 255], int8
//     [-128, 127]). x / y_scale is a float32 division, as ONNX Runtime computes it.
//   - DequantizeLinear-10/13: y = (x - x_zero_point) * x_scale, the difference in int32
//     (exact) and the product in float32.
//   - DynamicQuantizeLinear-11: the range [min(0, min(x)), max(0, max(x))] maps onto
//     uint8: y_scale = (max - min) / 255 (1 when max == min, i.e. x is all zero: ONNX
//     Runtime's choice, which keeps y = 0 instead of dividing by zero),
//     y_zero_point = saturate(round(0 - min / y_scale)), then QuantizeLinear.
//   - MatMulInteger-10 / ConvInteger-10: int32 sums of (a - a_zero_point) * (b -
//     b_zero_point); the sums wrap modulo 2^32 (they cannot overflow for the shapes
//     of real models: 2^31 / 255^2 = 33025 products of the worst sign).
//   - QLinearMatMul-10 / QLinearConv-10: that int32 sum (plus QLinearConv's int32 bias)
//     requantized: y = saturate(round(float(sum) * multiplier) + y_zero_point), with
//     multiplier = a_scale * b_scale / y_scale computed in float32 once per output
//     channel (ONNX Runtime's order of operations).
//   - FusedQLinearAdd (internal; the compiler's fusion of DequantizeLinear, DequantizeLinear,
//     Add, an optional Relu and QuantizeLinear, all per tensor): those formulas in that
//     order, float32 in between (ONNX Runtime's contrib QLinearAdd computes the same
//     sum).
// A plain header: <math.h> and <stdint.h> only, so that .cu files include it.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REMEX_QUANT_FN __host__ __device__ __forceinline__
#else
#define REMEX_QUANT_FN inline
#endif

namespace remex::kernels::quant {

// Round half to even (the default rounding mode), as numpy.rint.
REMEX_QUANT_FN float RoundHalfEven(float v) { return rintf(v); }

// Saturates an already rounded float to Q's range and converts it. NaN gives 0.
template <typename Q>
REMEX_QUANT_FN Q Saturate(float v) {
  constexpr float lo = static_cast<Q>(-1) < static_cast<Q>(0) ? -128.0f : 0.0f;
  constexpr float hi = static_cast<Q>(-1) < static_cast<Q>(0) ? 127.0f : 255.0f;
  if (!(v >= lo)) return static_cast<Q>(v != v ? 0.0f : lo);
  if (v > hi) return static_cast<Q>(hi);
  return static_cast<Q>(v);
}

// QuantizeLinear of one value (x already converted to float).
template <typename Q>
REMEX_QUANT_FN Q Quantize(float x, float scale, int32_t zero_point) {
  return Saturate<Q>(RoundHalfEven(x / scale) + static_cast<float>(zero_point));
}

// DequantizeLinear of one value.
REMEX_QUANT_FN float Dequantize(int32_t x, int32_t zero_point, float scale) {
  return static_cast<float>(x - zero_point) * scale;
}

// DynamicQuantizeLinear's scale and zero point from x's minimum and maximum.
struct DynamicParams {
  float scale;
  uint8_t zero_point;
};
REMEX_QUANT_FN DynamicParams DynamicQuantizeParams(float x_min, float x_max) {
  const float lo = x_min < 0.0f ? x_min : 0.0f;
  const float hi = x_max > 0.0f ? x_max : 0.0f;
  DynamicParams p;
  p.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  p.zero_point = Saturate<uint8_t>(RoundHalfEven(0.0f - lo / p.scale));
  return p;
}

// FusedQLinearAdd of one element: QuantizeLinear(Relu?(DequantizeLinear(a) +
// DequantizeLinear(b))), Relu as kernels/scalar_ops.h's (x < 0 ? 0 : x).
// Each product is rounded on its own (on a GPU __fmul_rn: nvcc would otherwise contract
// a product and the sum into one fused multiply-add), so both devices give the unfused
// kernels' bits.
template <typename Q>
REMEX_QUANT_FN Q QLinearAdd(int32_t a, int32_t a_zero_point, float a_scale, int32_t b, int32_t b_zero_point,
                            float b_scale, bool relu, float y_scale, int32_t y_zero_point) {
#if defined(__CUDA_ARCH__)
  float sum = __fmul_rn(static_cast<float>(a - a_zero_point), a_scale) +
              __fmul_rn(static_cast<float>(b - b_zero_point), b_scale);
#else
  float sum = Dequantize(a, a_zero_point, a_scale) + Dequantize(b, b_zero_point, b_scale);
#endif
  if (relu) sum = sum < 0.0f ? 0.0f : sum;
  return Quantize<Q>(sum, y_scale, y_zero_point);
}

// The operand and output types FusedQLinearAdd runs on (A, B, Y: uint8_t or int8_t
// each): X(A, B, Y) for each, for the kernels' declarations and instantiations.
#define REMEX_QLINEAR_ADD_TYPES(X)                                                             \
  X(uint8_t, uint8_t, uint8_t) X(uint8_t, uint8_t, int8_t) X(uint8_t, int8_t, uint8_t)         \
  X(uint8_t, int8_t, int8_t) X(int8_t, uint8_t, uint8_t) X(int8_t, uint8_t, int8_t)            \
  X(int8_t, int8_t, uint8_t) X(int8_t, int8_t, int8_t)

// QLinear*'s requantization of an int32 sum.
template <typename Q>
REMEX_QUANT_FN Q Requantize(int32_t sum, float multiplier, int32_t zero_point) {
  return Saturate<Q>(RoundHalfEven(static_cast<float>(sum) * multiplier) + static_cast<float>(zero_point));
}

// ---------------------------------------------------------------------------
// Integer matrix products over batches of [m, k] x [k, n].

// The broadcast batch of MatMulInteger / QLinearMatMul: up to kMaxBatchRank batch dims;
// a_stride / b_stride are each input's element strides per batch dim (0 where it
// broadcasts).
constexpr int kMaxBatchRank = 6;
struct MatMulGeometry {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  int rank = 0;
  int64_t dims[kMaxBatchRank] = {};
  int64_t a_stride[kMaxBatchRank] = {};
  int64_t b_stride[kMaxBatchRank] = {};
};

// Offsets of batch `b`'s A and B matrices.
REMEX_QUANT_FN void BatchOffsets(const MatMulGeometry& g, int64_t b, int64_t* a_off, int64_t* b_off) {
  int64_t ao = 0, bo = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t i = b % g.dims[d];
    b /= g.dims[d];
    ao += i * g.a_stride[d];
    bo += i * g.b_stride[d];
  }
  *a_off = ao;
  *b_off = bo;
}

// sum over kk of (a[i, kk] - a_zp) * (b[kk, j] - b_zp), a and b pointing at the batch's
// matrices (row-major [m, k] and [k, n]).
template <typename A, typename B>
REMEX_QUANT_FN int32_t MatMulIntegerAt(const MatMulGeometry& g, const A* a, const B* b, int32_t a_zp, int32_t b_zp,
                                       int64_t i, int64_t j) {
  uint32_t sum = 0;  // Wraps instead of overflowing.
  for (int64_t kk = 0; kk < g.k; ++kk) {
    const int32_t av = static_cast<int32_t>(a[i * g.k + kk]) - a_zp;
    const int32_t bv = static_cast<int32_t>(b[kk * g.n + j]) - b_zp;
    sum += static_cast<uint32_t>(av * bv);
  }
  return static_cast<int32_t>(sum);
}

// ---------------------------------------------------------------------------
// Integer convolution, NCHW, 1 to 3 spatial dims (fewer dims padded with extent 1).

struct ConvGeometry {
  int64_t n = 0, c = 0, m = 0, group = 1;
  int64_t in[3] = {1, 1, 1};      // Input spatial extents.
  int64_t out[3] = {1, 1, 1};     // Output spatial extents.
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};     // Padding at the begin of each spatial dim.
};

// Output element (b, mo, o0, o1, o2)'s sum over the channels of mo's group and the
// kernel window of (x - x_zp) * (w - w_zp); padding contributes nothing (as x == x_zp).
template <typename X, typename W>
REMEX_QUANT_FN int32_t ConvIntegerAt(const ConvGeometry& g, const X* x, const W* w, int32_t x_zp, int32_t w_zp,
                                     int64_t b, int64_t mo, int64_t o0, int64_t o1, int64_t o2) {
  const int64_t cg = g.c / g.group;
  const int64_t c0 = (mo / (g.m / g.group)) * cg;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t k_plane = g.kernel[0] * g.kernel[1] * g.kernel[2];
  uint32_t sum = 0;
  for (int64_t ci = 0; ci < cg; ++ci) {
    const X* xc = x + (b * g.c + c0 + ci) * in_plane;
    const W* wc = w + (mo * cg + ci) * k_plane;
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
      const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dilation[0];
      if (i0 < 0 || i0 >= g.in[0]) continue;
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
        const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dilation[1];
        if (i1 < 0 || i1 >= g.in[1]) continue;
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          const int64_t i2 = o2 * g.stride[2] - g.pad[2] + k2 * g.dilation[2];
          if (i2 < 0 || i2 >= g.in[2]) continue;
          const int32_t xv = static_cast<int32_t>(xc[(i0 * g.in[1] + i1) * g.in[2] + i2]) - x_zp;
          const int32_t wv = static_cast<int32_t>(wc[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2]) - w_zp;
          sum += static_cast<uint32_t>(xv * wv);
        }
      }
    }
  }
  return static_cast<int32_t>(sum);
}

}  // namespace remex::kernels::quant
