// Launchers of the quantization ops' CUDA kernels (quant_impl.cu). Plain C++ and the
// CUDA runtime API only: included by .cu and .cc files alike. Every launcher queues its
// work on `stream` and returns the launch error (cudaErrorInvalidValue for arguments
// it does not accept). Every formula is kernels/ops/quantization/quantize_ops.h's, as on
// the CPU (quantize.cc, qlinear.cc there), so the results are the same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/conv_epilogue.h"
#include "kernels/cuda/dtype.h"
#include "kernels/ops/quantization/quantize_ops.h"

namespace remex::kernels::cuda {

// A scale, zero point or bias in device memory: `count` values, 1 (per tensor) or one
// per channel. A null `data` is absent (zero point 0, no bias).
struct QParam {
  const void* data = nullptr;
  DType type = DType::kUint8;  // Zero points: uint8, int8 or int32. Scales are float32.
  bool per_channel = false;
};

// QuantizeLinear over x [outer, channels, inner] (X float or int32_t): y (Y uint8_t or
// int8_t) with scale and zero point per channel or per tensor. outer * channels *
// inner > 0.
template <typename X, typename Y>
cudaError_t LaunchQuantize(const X* x, QParam scale, QParam zero_point, Y* y, int64_t outer, int64_t channels,
                           int64_t inner, cudaStream_t stream);

// DequantizeLinear over x [outer, channels, inner] (X uint8_t, int8_t or int32_t) to
// float32 y.
template <typename X>
cudaError_t LaunchDequantize(const X* x, QParam scale, QParam zero_point, float* y, int64_t outer,
                             int64_t channels, int64_t inner, cudaStream_t stream);

// DynamicQuantizeLinear of float32 x [n] (n >= 0): y uint8 [n], y_scale float32 and
// y_zero_point uint8 (one element each, written on the device).
cudaError_t LaunchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point,
                                  cudaStream_t stream);

// The parameters of the integer and QLinear matmuls and convolutions: a (x) and b (w)
// operand types, their zero points; for the QLinear forms (`qlinear`) the scales, y's
// scale and zero point and QLinearConv's int32 bias (per channel); for
// FusedMatMulInteger (y float32) its scale in a_scale (per tensor or per column), its
// float32 bias (per column, or absent) and its activation: y = activation(float32(sum) *
// scale + bias).
struct QLinearParams {
  QParam a_zero_point, b_zero_point;
  bool qlinear = false;
  QParam a_scale, b_scale, y_scale, y_zero_point, bias;
  DType y = DType::kInt32;  // int32 without `qlinear`; uint8 or int8 with it; float32.
  // FusedMatMulInteger's activation, after the bias (kernels/conv_epilogue.h).
  ConvActivation activation = ConvActivation::kNone;
  float alpha = 0, beta = 0;
};

// FusedQLinearAdd over n > 0 elements (A, B, Y uint8_t or int8_t; every scale and zero
// point one value in device memory).
template <typename A, typename B, typename Y>
cudaError_t LaunchQLinearAdd(const A* a, QParam a_scale, QParam a_zero_point, const B* b, QParam b_scale,
                             QParam b_zero_point, QParam y_scale, QParam y_zero_point, bool relu, Y* y, int64_t n,
                             cudaStream_t stream);

// MatMulInteger / QLinearMatMul / FusedMatMulInteger over g's batches; y [batch, m, n]. g.batch * g.m * g.n > 0.
// A and B (the operands' types): uint8_t or int8_t.
template <typename A, typename B>
cudaError_t LaunchQMatMul(const quant::MatMulGeometry& g, const A* a, const B* b, const QLinearParams& p,
                          void* y, cudaStream_t stream);

// ConvInteger / QLinearConv, NCHW; y [n, m, out0, out1, out2]. Its element count > 0.
// X and W: uint8_t or int8_t.
template <typename X, typename W>
cudaError_t LaunchQConv(const quant::ConvGeometry& g, const X* x, const W* w, const QLinearParams& p, void* y,
                        cudaStream_t stream);

}  // namespace remex::kernels::cuda
