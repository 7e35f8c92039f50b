// ConvInteger and QLinearConv through oneDNN's int8 convolution, MatMulInteger and
// QLinearMatMul through its int8 matmul (u8 or s8 activations times s8 weights, int32
// sums), used by QConvKernel and QMatMulKernel (qlinear.cc) where they give the same
// bits as the int16 GEMM path. Internal to the kernels library.
//
// Exactness. oneDNN sums four u8 x s8 products into int32 per instruction on CPUs with
// VNNI (AVX512-VNNI, AVX-VNNI), without saturating. Without VNNI its int8 kernels go
// through saturating int16 pairs (or halve the weights), so this path is taken only
// where the CPU has VNNI (Available()); elsewhere the int16 GEMM runs. The weights less
// their zero points must fit int8 (W - w_zero_point in [-128, 127]), as uint8 weights
// with zero point 128 and int8 weights with zero point 0 do. ConvInteger also takes
// weights with at most one value in 64 outside int8 (uint8 weights at an asymmetric
// zero point, as a dynamic quantizer writes them): the primitive sums the values
// clamped into int8 and the rest is added after it (DnnlQConv::residual_). Other
// weights, and QLinearConv's weights outside int8, take the int16 path.
//
// Zero points of A (MatMulInteger's A, passed at run time: the product has no padding).
// Zero points of X. A constant x_zero_point is compiled into the primitive (oneDNN's
// source zero point, padding included: a padded position contributes
// (x_zero_point - x_zero_point) * w = 0, ONNX's semantics). A zero point computed at run
// time (DynamicQuantizeLinear's) is not: the primitive sums X * W' over windows of X
// padded with the zero point itself, and the zero point's share, x_zero_point * (the sum
// of W' per output channel), is taken off after (ConvInteger) or through the bias
// (QLinearConv). Both are exact in int32.
//
// Requantization (the QLinear forms): oneDNN computes float(sum + bias) * (x_scale *
// w_scale[m] / y_scale), rounds it half to even (a rounding post-op), adds y_zero_point
// and saturates: quantize_ops.h's Requantize for every sum and bias below 2^24 in
// magnitude. (Without the post-op oneDNN would add the zero point before rounding, in
// float32, and differ at halves.)
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/internal.h"
#include "kernels/ops/nn/conv_common.h"

namespace remex::kernels::internal {

// One call of ConvInteger or QLinearConv, its operands as the kernel found them.
struct QConvCall {
  std::string_view op;            // "ConvInteger" or "QLinearConv"
  const Attributes* attrs = nullptr;
  const TensorRef* x = nullptr;   // uint8 or int8 [N, C, D1 (, D2 (, D3))]
  const TensorRef* w = nullptr;   // uint8 or int8 [M, C / group, k1 ...]
  int32_t x_zero_point = 0;
  bool x_zero_point_constant = true;  // absent or a constant input
  std::span<const int32_t> w_zero_points;  // per output channel, M values
  // QLinearConv only: per output channel x_scale * w_scale[m] / y_scale, M values;
  // y_zero_point; the optional int32 bias [M] (null when absent).
  std::span<const float> multipliers;
  int32_t y_zero_point = 0;
  const int32_t* bias = nullptr;
  const TensorRef* y = nullptr;   // int32 (ConvInteger), uint8 or int8 (QLinearConv)
  // `layout` "NHWC": X [N, D.., C] and Y [N, O.., M] (oneDNN's int8 convolutions' own
  // layout: nothing is reordered).
  bool channels_last = false;
};

class DnnlQConv {
 public:
  // Whether this CPU runs oneDNN's int8 convolutions with VNNI (see above).
  static bool Available();

  // Computes `call` into *call.y and returns true, or returns false having written
  // nothing when this path cannot give the int16 path's bits: no VNNI, W not constant,
  // W less its zero points outside int8 (for ConvInteger: more than one value in 64),
  // or no oneDNN primitive for the case.
  // INTERNAL when oneDNN fails while running.
  StatusOr<bool> Run(const QConvCall& call);

  // Calls Run computed (tests: which path ran).
  int64_t runs() const { return runs_; }

 private:
  struct Entry {
    bool usable = false;  // false: oneDNN has no primitive for it.
    DnnlConvPrimitive conv;
  };
  // Converts constant W less its zero points to int8 (kept while the same constant and
  // zero points come in): values outside int8 are clamped into w8_ and the rest kept in
  // residual_. False when more than one value in 64 is outside int8.
  bool PrepareWeights(const QConvCall& call);
  StatusOr<Entry*> FindOrCompile(std::vector<int64_t> key, const QConvCall& call, const ConvDims& d,
                                 const Shape& src_shape, bool pad_copy, bool bake_x_zero_point, bool with_bias);

  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<std::vector<int64_t>, Entry> cache_;
  // W - w_zero_point as int8, the sum of each output channel's values, and what they
  // were made from.
  std::vector<int8_t> w8_;
  std::vector<int32_t> w8_sums_;
  // The part of W - w_zero_point outside int8 (uint8 weights at an asymmetric zero point,
  // as a dynamic quantizer writes them: W - zp in [-255, 255], a few values in a
  // thousand outside [-128, 127]): each value's output channel, input channel, window
  // tap and value - clamp(value). ConvInteger adds these products after the primitive
  // (AddResidual); QLinearConv, whose sums the primitive requantizes, leaves such
  // weights to the int16 path. w8_sums_ are of the whole values.
  struct Residual {
    int64_t m, c, tap;
    int32_t value;
  };
  std::vector<Residual> residual_;
  void AddResidual(const QConvCall& call, const ConvDims& d, const void* src, const Shape& src_shape, bool pad_copy,
                   int32_t baked_zero_point);
  const void* w8_from_ = nullptr;
  std::vector<int32_t> w8_zero_points_;
  bool w8_fits_ = false;
  std::vector<uint8_t> padded_;    // X padded with a run-time zero point.
  std::vector<int32_t> bias_;      // the bias less the run-time zero point's share
  int64_t runs_ = 0;
};

// One call of MatMulInteger, QLinearMatMul or FusedMatMulInteger whose B is one matrix
// for every batch of A.
struct QMatMulCall {
  std::string_view op;            // "MatMulInteger", "QLinearMatMul" or "FusedMatMulInteger"
  const TensorRef* a = nullptr;   // uint8 or int8, its batches read as [m, k]
  const TensorRef* b = nullptr;   // uint8 or int8 [k, n]
  int64_t m = 0, k = 0, n = 0;
  int32_t a_zero_point = 0;
  std::span<const int32_t> b_zero_points;  // per column, n values
  // QLinearMatMul only: per column a_scale * b_scale[j] / y_scale, n values; y_zero_point.
  std::span<const float> multipliers;
  int32_t y_zero_point = 0;
  // FusedMatMulInteger only: y = float32(sum) * scales[j] + bias[j]; scales 1 or n
  // values, read at run time (a DynamicQuantizeLinear's scale changes every call); bias
  // n values or null. oneDNN applies them as run-time output scales and a binary add
  // post-op, after the sums.
  std::span<const float> scales;
  const float* bias = nullptr;
  // int32 [m, n] (MatMulInteger), uint8 or int8 (QLinearMatMul), float32
  // (FusedMatMulInteger)
  const TensorRef* y = nullptr;
};

class DnnlQMatMul {
 public:
  // Computes `call` into *call.y and returns true, or returns false having written
  // nothing (as DnnlQConv::Run: no VNNI, B not constant or not int8 less its zero
  // points, no primitive). INTERNAL when oneDNN fails while running.
  StatusOr<bool> Run(const QMatMulCall& call);

  int64_t runs() const { return runs_; }

 private:
  struct Entry {
    bool usable = false;
    int threads = 0;
    dnnl::matmul primitive;
    dnnl::memory weights;  // B' in the primitive's layout
    bool weights_ready = false;
  };
  bool PrepareWeights(const QMatMulCall& call);

  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<std::vector<int64_t>, Entry> cache_;
  std::vector<int8_t> b8_;  // B - b_zero_point as int8 [k, n]
  const void* b8_from_ = nullptr;
  std::vector<int32_t> b8_zero_points_;
  bool b8_fits_ = false;
  int64_t runs_ = 0;
};

}  // namespace remex::kernels::internal
