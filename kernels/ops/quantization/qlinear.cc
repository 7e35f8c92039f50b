// MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv: shape functions, CPU
// kernels and the views of their inputs (kernels/ops/quantization/quantize_view.h).
// https://onnx.ai/onnx/operators/onnx__MatMulInteger.html, onnx__QLinearMatMul.html,
// onnx__ConvInteger.html, onnx__QLinearConv.html (all opset 10).
//
// MatMulInteger(A, B, [a_zero_point], [b_zero_point]) -> Y int32, numpy matmul shapes.
// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
//   y_zero_point) -> y of y_zero_point's dtype.
// ConvInteger(x, w, [x_zero_point], [w_zero_point]) -> y int32 [N, M, O1 ...].
// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
//   y_zero_point, [B]) -> y of y_zero_point's dtype.
// FusedMatMulInteger(A, B, [a_zero_point], [b_zero_point], scale, [bias]) -> Y float32
//   (internal: the compiler's epilogue fusion makes it of MatMulInteger, a Cast to
//   float32, a Mul by a scale and an Add of a bias, the chain ONNX Runtime's dynamic
//   quantizer writes for a MatMul; ONNX Runtime's contrib op MatMulIntegerToFloat
//   computes the same): MatMulInteger's inputs and shape, Y[.., i, j] =
//   activation(float32(sum[.., i, j]) * scale[j] + bias[j]) in float32, in that order,
//   as the unfused nodes compute it; scale float32 of 1 or N values, bias float32 [N];
//   the attributes `activation` and `activation_params` as FusedConv's and FusedMatMul's
//   (kernels/op_attrs.h ParseConvEpilogue: an epilogue activation, ONNX's formula, as
//   the unfused op computes it, on every path).
// uint8 and int8 operands in any combination. The CPU kernels compute the int32 sums as
// int16 GEMMs (zero points subtracted first; exact modulo 2^32, like the CUDA kernels'
// element-by-element sums of kernels/ops/quantization/quantize_ops.h) and requantize with that header's
// functions, so both devices give the same bits. On a CPU with VNNI, constant weights
// that fit int8 less their zero points (for ConvInteger, all but at most one value in
// 64, the rest added after) go through oneDNN's int8 primitives instead, with the same
// bits (int8_dnnl.h).

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ops/nn/conv_common.h"  // ParseGroup.
#include "kernels/conv_epilogue.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/quantization/int_gemm.h"
#include "kernels/ops/quantization/int8_dnnl.h"
#include "kernels/ops/quantization/quantize_cpu.h"
#include "kernels/ops/quantization/quantize_ops.h"
#include "kernels/ops/quantization/quantize_view.h"

namespace remex::kernels::internal {

namespace {

// Input positions of the integer and QLinear forms.
struct Slots {
  int a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp;  // -1: the form has no such input.
};
constexpr Slots kIntegerSlots = {0, -1, 2, 1, -1, 3, -1, -1};
constexpr Slots kQLinearSlots = {0, 1, 2, 3, 4, 5, 6, 7};

bool IsQLinear(std::string_view op) { return op == "QLinearMatMul" || op == "QLinearConv"; }

constexpr std::string_view kFusedMatMulInteger = "FusedMatMulInteger";
constexpr int kScaleSlot = 4, kBiasSlot = 5;  // FusedMatMulInteger's epilogue inputs

const ShapeFnArg* Arg(std::span<const ShapeFnArg> in, int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= in.size() || !in[slot].present) return nullptr;
  return &in[slot];
}

// Checks the operands' dtypes and the per-tensor / per-`count` parameters; returns
// whether B's (w's) parameters hold `count` values.
StatusOr<bool> CheckQuantOperands(std::string_view op, std::span<const ShapeFnArg> in, int64_t count,
                                  std::string_view count_what) {
  const Slots s = IsQLinear(op) ? kQLinearSlots : kIntegerSlots;
  const ShapeFnArg* a = Arg(in, s.a);
  const ShapeFnArg* b = Arg(in, s.b);
  if (a == nullptr || b == nullptr) return OpError(op, "expects its two operands");
  for (const ShapeFnArg* t : {a, b}) {
    if (!IsQuantType(t->dtype)) {
      return OpError(op, "operands must be uint8 or int8, got " + std::string(DTypeName(t->dtype)));
    }
  }
  if (IsQLinear(op)) {
    for (int slot : {s.a_scale, s.a_zp, s.b_scale, s.b_zp, s.y_scale, s.y_zp}) {
      if (Arg(in, slot) == nullptr) return OpError(op, "input " + std::to_string(slot) + " is required");
    }
  }
  bool per_count = false;
  struct Param {
    int slot;
    const char* what;
    DType dtype;  // kUndefined: uint8 or int8.
    bool vector_ok;
  };
  const Param params[] = {{s.a_scale, "the first operand's scale", DType::kFloat32, false},
                          {s.a_zp, "the first operand's zero point", a->dtype, false},
                          {s.b_scale, "the second operand's scale", DType::kFloat32, true},
                          {s.b_zp, "the second operand's zero point", b->dtype, true},
                          {s.y_scale, "y_scale", DType::kFloat32, false},
                          {s.y_zp, "y_zero_point", DType::kUndefined, false}};
  for (const Param& p : params) {
    const ShapeFnArg* t = Arg(in, p.slot);
    if (t == nullptr) continue;
    if (p.dtype == DType::kUndefined ? !IsQuantType(t->dtype) : t->dtype != p.dtype) {
      return OpError(op, std::string(p.what) + " must be " +
                             (p.dtype == DType::kUndefined ? std::string("uint8 or int8")
                                                           : std::string(DTypeName(p.dtype))) +
                             ", got " + std::string(DTypeName(t->dtype)));
    }
    REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, t->shape));
    if (t->shape.size() <= 1 && n == 1) continue;
    if (p.vector_ok && t->shape.size() == 1 && n == count) {
      per_count = true;
      continue;
    }
    if (!p.vector_ok && t->shape.size() == 1 && p.slot == s.a_zp && !IsQLinear(op)) {
      return Unimplemented(std::string(op) + ": a per-row zero point of A " + ShapeToString(t->shape) +
                           " is not supported (per tensor only)");
    }
    return OpError(op, std::string(p.what) + " must hold one value" +
                           (p.vector_ok ? " or " + std::to_string(count) + " (" + std::string(count_what) + ")"
                                        : std::string()) +
                           ", got " + ShapeToString(t->shape));
  }
  return per_count;
}

}  // namespace

StatusOr<QMatMulView> QMatMulViewOf(std::string_view op, std::span<const ShapeFnArg> in) {
  const Slots s = IsQLinear(op) ? kQLinearSlots : kIntegerSlots;
  const ShapeFnArg* a = Arg(in, s.a);
  const ShapeFnArg* b = Arg(in, s.b);
  if (a == nullptr || b == nullptr) return OpError(op, "expects its two operands");
  REMEX_ASSIGN_OR_RETURN(MatMulDims d, MatMulDimsOf(op, a->shape, b->shape));
  REMEX_ASSIGN_OR_RETURN(bool per_column, CheckQuantOperands(op, in, d.n, "per column"));
  if (op == kFusedMatMulInteger) {
    const ShapeFnArg* scale = Arg(in, kScaleSlot);
    if (scale == nullptr || scale->dtype != DType::kFloat32) return OpError(op, "scale must be float32");
    REMEX_ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(op, scale->shape));
    if (!(scale->shape.size() <= 1 && count == 1) && scale->shape != Shape{d.n}) {
      return OpError(op, "scale must hold one value or " + std::to_string(d.n) + " (per column), got " +
                             ShapeToString(scale->shape));
    }
    const ShapeFnArg* bias = Arg(in, kBiasSlot);
    if (bias != nullptr && (bias->dtype != DType::kFloat32 || bias->shape != Shape{d.n})) {
      return OpError(op, "bias must be float32 [" + std::to_string(d.n) + "], got " +
                             std::string(DTypeName(bias->dtype)) + " " + ShapeToString(bias->shape));
    }
  }
  if (d.batch.size() > static_cast<size_t>(quant::kMaxBatchRank)) {
    return Unimplemented(std::string(op) + ": more than " + std::to_string(quant::kMaxBatchRank) +
                         " batch dims: " + ShapeToString(d.output));
  }
  QMatMulView v;
  v.output = d.output;
  v.b_per_column = per_column;
  quant::MatMulGeometry& g = v.g;
  g.m = d.m;
  g.k = d.k;
  g.n = d.n;
  g.rank = static_cast<int>(d.batch.size());
  int64_t a_step = d.m * d.k, b_step = d.k * d.n;
  for (int i = g.rank - 1; i >= 0; --i) {
    g.dims[i] = d.batch[i];
    g.a_stride[i] = d.a_batch[i] == 1 ? 0 : a_step;
    g.b_stride[i] = d.b_batch[i] == 1 ? 0 : b_step;
    a_step *= d.a_batch[i];
    b_step *= d.b_batch[i];
    g.batch *= d.batch[i];
  }
  return v;
}

StatusOr<QConvView> QConvViewOf(std::string_view op, const Attributes& attrs, std::span<const ShapeFnArg> in) {
  const Slots s = IsQLinear(op) ? kQLinearSlots : kIntegerSlots;
  const ShapeFnArg* x = Arg(in, s.a);
  const ShapeFnArg* w = Arg(in, s.b);
  if (x == nullptr || w == nullptr) return OpError(op, "expects x and w");
  REMEX_ASSIGN_OR_RETURN(WindowAttrs window, ParseWindowAttrs(op, attrs, /*with_ceil_mode=*/false));
  REMEX_ASSIGN_OR_RETURN(int64_t group, ParseGroup(op, attrs));
  // With layout "NHWC" X and Y are channels-last; the geometry is channels-first.
  REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(op, attrs));
  const Shape x_shape = channels_last ? ToChannelsFirst(x->shape) : x->shape;
  REMEX_ASSIGN_OR_RETURN(ConvDims d, ConvDimsOf(op, window, group, x_shape, w->shape));
  REMEX_ASSIGN_OR_RETURN(bool per_channel, CheckQuantOperands(op, in, d.m, "per output channel"));
  if (op == "QLinearConv" && in.size() > 8 && in[8].present) {
    if (in[8].dtype != DType::kInt32 || in[8].shape != Shape{d.m}) {
      return OpError(op, "B must be int32 [" + std::to_string(d.m) + "], got " + std::string(DTypeName(in[8].dtype)) +
                             " " + ShapeToString(in[8].shape));
    }
  }
  QConvView v;
  v.output = channels_last ? ToChannelsLast(d.output) : d.output;
  v.channels_last = channels_last;
  v.w_per_channel = per_channel;
  quant::ConvGeometry& g = v.g;
  g.n = d.n;
  g.c = d.c;
  g.m = d.m;
  g.group = d.group;
  const size_t spatial = x_shape.size() - 2;
  const size_t first = 3 - spatial;  // Fewer spatial dims fill the last slots.
  for (size_t i = 0; i < spatial; ++i) {
    g.in[first + i] = x_shape[2 + i];
    g.out[first + i] = d.geometry.output[i];
    g.kernel[first + i] = d.geometry.kernel[i];
    g.stride[first + i] = d.geometry.strides[i];
    g.dilation[first + i] = d.geometry.dilations[i];
    g.pad[first + i] = d.geometry.pad_begin[i];
  }
  return v;
}

namespace {

// The output dtype: int32 for the integer forms, y_zero_point's for the QLinear ones.
DType OutputType(std::string_view op, std::span<const ShapeFnArg> in) {
  return IsQLinear(op) ? in[7].dtype : DType::kInt32;
}

OpDef QDef(std::string_view name) {
  OpDef def;
  def.name = std::string(name);
  def.since_version = 10;
  const bool qlinear = IsQLinear(name);
  def.min_inputs = qlinear ? 8 : 2;
  def.max_inputs = name == "QLinearConv" ? 9 : qlinear ? 8 : 4;
  const bool conv = name.find("Conv") != std::string_view::npos;
  def.infer = [op = std::string(name), conv](const Attributes& attrs,
                                             std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    Shape output;
    if (conv) {
      REMEX_ASSIGN_OR_RETURN(QConvView v, QConvViewOf(op, attrs, in));
      output = v.output;
    } else {
      REMEX_ASSIGN_OR_RETURN(QMatMulView v, QMatMulViewOf(op, in));
      output = v.output;
    }
    return std::vector<TensorInfo>{{OutputType(op, in), output}};
  };
  def.output_dtypes = [qlinear](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{qlinear ? (in.size() > 7 ? in[7] : DType::kUndefined) : DType::kInt32};
  };
  return def;
}

OpDef FusedMatMulIntegerDef() {
  OpDef def;
  def.name = std::string(kFusedMatMulInteger);
  def.since_version = 1;
  def.min_inputs = 5;
  def.max_inputs = 6;
  def.infer = [](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_RETURN_IF_ERROR(ParseConvEpilogue(kFusedMatMulInteger, attrs).status());
    REMEX_ASSIGN_OR_RETURN(QMatMulView v, QMatMulViewOf(kFusedMatMulInteger, in));
    return std::vector<TensorInfo>{{DType::kFloat32, v.output}};
  };
  def.output_dtypes = [](const Attributes&, std::span<const DType>) { return std::vector<DType>{DType::kFloat32}; };
  return def;
}

// y[i] = activation(y[i]) for i < n (ApplyConvActivation), each kind its own loop so
// that it vectorizes (Gelu's erf is kernels/scalar_ops.h's FastErf).
template <typename F>
inline void MapInPlace(float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(y[i]);
}
REMEX_CPU_CLONES void ActivateSpan(ConvActivation kind, float alpha, float beta, float* y, int64_t n) {
  switch (kind) {
    case ConvActivation::kRelu:
      MapInPlace(y, n, [](float x) { return ApplyConvActivation(ConvActivation::kRelu, x, 0, 0); });
      return;
    case ConvActivation::kGelu:
      MapInPlace(y, n, [](float x) { return ApplyConvActivation(ConvActivation::kGelu, x, 0, 0); });
      return;
    default:
      MapInPlace(y, n, [&](float x) { return ApplyConvActivation(kind, x, alpha, beta); });
  }
}

// Calls f(TypeTag<A>, TypeTag<B>) for the operands' types (uint8 / int8 each).
template <typename F>
Status DispatchOperands(DType a, DType b, F&& f) {
  auto with_b = [&](auto a_tag) -> Status {
    return b == DType::kUint8 ? f(a_tag, TypeTag<uint8_t>{}) : f(a_tag, TypeTag<int8_t>{});
  };
  return a == DType::kUint8 ? with_b(TypeTag<uint8_t>{}) : with_b(TypeTag<int8_t>{});
}

// Writes one output element: the int32 sum, or its requantization for the QLinear forms.
struct OutputWriter {
  bool qlinear = false;
  DType y = DType::kInt32;
  void* data = nullptr;
  int32_t y_zp = 0;
  void Put(int64_t i, int32_t sum, float multiplier) const {
    if (!qlinear) {
      static_cast<int32_t*>(data)[i] = sum;
    } else if (y == DType::kUint8) {
      static_cast<uint8_t*>(data)[i] = quant::Requantize<uint8_t>(sum, multiplier, y_zp);
    } else {
      static_cast<int8_t*>(data)[i] = quant::Requantize<int8_t>(sum, multiplier, y_zp);
    }
  }
};

// Per output channel (or column) c: its zero point of B and the requantization
// multiplier a_scale * b_scale[c] / y_scale.
struct ChannelParams {
  std::vector<int32_t> b_zp;
  std::vector<float> multiplier;
};

ChannelParams ChannelParamsOf(std::string_view op, std::span<const TensorRef> in, int64_t count) {
  const Slots s = IsQLinear(op) ? kQLinearSlots : kIntegerSlots;
  ChannelParams p;
  p.b_zp.resize(static_cast<size_t>(count));
  p.multiplier.assign(static_cast<size_t>(count), 1.0f);
  const TensorRef* b_zp = static_cast<size_t>(s.b_zp) < in.size() ? &in[s.b_zp] : nullptr;
  const int64_t zp_n = b_zp && b_zp->present() ? NumElements(b_zp->shape).value_or(1) : 1;
  for (int64_t c = 0; c < count; ++c) p.b_zp[c] = ZeroPointAt(b_zp, zp_n == 1 ? 0 : c);
  if (IsQLinear(op)) {
    const float a_scale = *DataAs<const float>(in[s.a_scale]);
    const float y_scale = *DataAs<const float>(in[s.y_scale]);
    const float* b_scale = DataAs<const float>(in[s.b_scale]);
    const bool per = NumElements(in[s.b_scale].shape).value_or(1) != 1;
    for (int64_t c = 0; c < count; ++c) p.multiplier[c] = a_scale * b_scale[per ? c : 0] / y_scale;
  }
  return p;
}

OutputWriter WriterOf(std::string_view op, std::span<const TensorRef> in, const TensorRef& out) {
  OutputWriter w;
  w.qlinear = IsQLinear(op);
  w.y = out.dtype;
  w.data = out.data;
  if (w.qlinear) w.y_zp = ZeroPointAt(&in[7], 0);
  return w;
}

class QMatMulKernel final : public ValidatedKernel {
 public:
  // FusedMatMulInteger's epilogue attributes are checked here, once.
  static StatusOr<std::unique_ptr<QMatMulKernel>> Create(const OpDef& def, const Attributes& attrs) {
    ConvEpilogue epilogue;
    if (def.name == kFusedMatMulInteger) {
      REMEX_ASSIGN_OR_RETURN(epilogue, ParseConvEpilogue(kFusedMatMulInteger, attrs));
    }
    return std::make_unique<QMatMulKernel>(def, attrs, epilogue);
  }
  QMatMulKernel(const OpDef& def, const Attributes& attrs, ConvEpilogue epilogue)
      : ValidatedKernel(def, attrs), epilogue_(epilogue) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(QMatMulView v, QMatMulViewOf(op(), args));
    const Slots s = IsQLinear(op()) ? kQLinearSlots : kIntegerSlots;
    const quant::MatMulGeometry& g = v.g;
    const int32_t a_zp = static_cast<size_t>(s.a_zp) < in.size() ? ZeroPointAt(&in[s.a_zp], 0) : 0;
    const ChannelParams p = ChannelParamsOf(op(), in, g.n);
    const OutputWriter w = WriterOf(op(), in, out[0]);
    if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return OkStatus();  // Y is empty
    // FusedMatMulInteger's epilogue: Y = float32(sum) * scale[j] + bias[j].
    const bool to_float = op() == kFusedMatMulInteger;
    std::span<const float> scales;
    const float* bias = nullptr;
    if (to_float) {
      scales = {DataAs<const float>(in[kScaleSlot]), static_cast<size_t>(*NumElements(in[kScaleSlot].shape))};
      if (in.size() > kBiasSlot && in[kBiasSlot].present()) bias = DataAs<const float>(in[kBiasSlot]);
    }
    auto put_float = [&](float* y, const uint32_t* sums, int64_t rows) {
      const bool per_column = scales.size() > 1;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          const float v = static_cast<float>(static_cast<int32_t>(sums[i * g.n + j])) * scales[per_column ? j : 0];
          y[i * g.n + j] = ApplyConvActivation(epilogue_.activation, bias ? v + bias[j] : v, epilogue_.alpha,
                                               epilogue_.beta);
        }
      }
    };
    // One B for every batch (B has no batch dims of its own): A's batches are one
    // matrix of batch * M rows, and a constant B is packed once.
    bool one_b = true;
    for (int d = 0; d < g.rank; ++d) one_b = one_b && g.b_stride[d] == 0;
    int64_t last_a_off = 0, last_b_off = 0;
    quant::BatchOffsets(g, g.batch - 1, &last_a_off, &last_b_off);
    one_b = one_b && last_a_off == (g.batch - 1) * g.m * g.k;
    const int64_t products = one_b ? 1 : g.batch;
    const int64_t m = one_b ? g.batch * g.m : g.m;
    const TensorRef* b_zp = static_cast<size_t>(s.b_zp) < in.size() && in[s.b_zp].present() ? &in[s.b_zp] : nullptr;
    const bool keep = one_b && in[s.b].constant && (b_zp == nullptr || b_zp->constant);
    if (one_b) {
      // oneDNN's int8 matmul where it gives these bits (int8_dnnl.h), else the int16
      // GEMMs below.
      QMatMulCall call;
      call.op = op();
      call.a = &in[s.a];
      call.b = &in[s.b];
      call.m = m;
      call.k = g.k;
      call.n = g.n;
      call.a_zero_point = a_zp;
      call.b_zero_points = p.b_zp;
      if (w.qlinear) {
        call.multipliers = p.multiplier;
        call.y_zero_point = w.y_zp;
      }
      call.scales = scales;
      call.bias = bias;
      call.y = &out[0];
      REMEX_ASSIGN_OR_RETURN(bool done, dnnl_.Run(call));
      if (done && to_float && epilogue_.activation != ConvActivation::kNone) {
        // The activation here, not as oneDNN's eltwise post-op: the unfused Gelu's bits,
        // which the next DynamicQuantizeLinear would otherwise round differently.
        float* y = DataAs<float>(out[0]);
        ParallelFor(m * g.n, 16384, [&](int64_t b, int64_t e, int) {
          ActivateSpan(epilogue_.activation, epilogue_.alpha, epilogue_.beta, y + b, e - b);
        });
      }
      if (done) return OkStatus();
    }
    return DispatchOperands(in[s.a].dtype, in[s.b].dtype, [&](auto a_tag, auto b_tag) -> Status {
      using A = typename decltype(a_tag)::type;
      using B = typename decltype(b_tag)::type;
      const A* a = DataAs<const A>(in[s.a]);
      const B* b = DataAs<const B>(in[s.b]);
      std::vector<int16_t> a16(static_cast<size_t>(m * g.k));
      // MatMulInteger's int32 sums go straight to Y; QLinearMatMul's are requantized,
      // FusedMatMulInteger's scaled.
      std::vector<uint32_t> c(w.qlinear || to_float ? static_cast<size_t>(m * g.n) : 0);
      for (int64_t batch = 0; batch < products; ++batch) {
        int64_t a_off = 0, b_off = 0;
        quant::BatchOffsets(g, batch, &a_off, &b_off);
        for (int64_t i = 0; i < m * g.k; ++i) a16[i] = static_cast<int16_t>(int32_t{a[a_off + i]} - a_zp);
        const bool kept = keep && packed_from_ == in[s.b].data && packed_zp_from_ == (b_zp ? b_zp->data : nullptr) &&
                          packed_.k == g.k && packed_.n == g.n;
        if (!kept) {
          std::vector<int16_t> b16(static_cast<size_t>(g.k * g.n));
          for (int64_t kk = 0; kk < g.k; ++kk) {
            const B* row = b + b_off + kk * g.n;
            int16_t* to = b16.data() + kk * g.n;
            for (int64_t j = 0; j < g.n; ++j) to[j] = static_cast<int16_t>(int32_t{row[j]} - p.b_zp[j]);
          }
          packed_ = PackIntGemmB(b16.data(), g.k, g.n);
          packed_from_ = keep ? in[s.b].data : nullptr;
          packed_zp_from_ = keep && b_zp ? b_zp->data : nullptr;
        }
        uint32_t* sums = w.qlinear || to_float ? c.data() : static_cast<uint32_t*>(w.data) + batch * m * g.n;
        IntGemmPacked(a16.data(), packed_, sums, m);
        if (to_float) {
          put_float(static_cast<float*>(out[0].data) + batch * m * g.n, sums, m);
          continue;
        }
        if (!w.qlinear) continue;  // the int32 sums as they are
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < g.n; ++j) {
            w.Put(batch * m * g.n + i * g.n + j, static_cast<int32_t>(c[i * g.n + j]), p.multiplier[j]);
          }
        }
      }
      return OkStatus();
    });
  }

 private:
  const ConvEpilogue epilogue_;  // FusedMatMulInteger's activation
  DnnlQMatMul dnnl_;
  // B (less its zero points) packed for IntGemmPacked; kept across calls while the same
  // constant B and zero points come in (packed_from_ non-null), else packed every call.
  IntGemmPackedB packed_;
  const void* packed_from_ = nullptr;
  const void* packed_zp_from_ = nullptr;
};

// The integer convolution as GEMMs: per image and group, W' [M / group, K] (w - w_zp)
// times columns of the input patches (x - x_zp, 0 in the padding) [K, tile], K = C /
// group * kernel size, over tiles of output positions so that the patch matrix stays
// small. A constant W' is packed once (PackIntGemmA) and kept.
class QConvKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<QConvKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(CheckQConvAttrs(def.name, attrs));
    return std::make_unique<QConvKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(QConvView v, QConvViewOf(op(), attrs(), args));
    const Slots s = IsQLinear(op()) ? kQLinearSlots : kIntegerSlots;
    const quant::ConvGeometry& g = v.g;
    const int32_t x_zp = static_cast<size_t>(s.a_zp) < in.size() ? ZeroPointAt(&in[s.a_zp], 0) : 0;
    const ChannelParams p = ChannelParamsOf(op(), in, g.m);
    const int32_t* bias = in.size() > 8 && in[8].present() ? DataAs<const int32_t>(in[8]) : nullptr;
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    // oneDNN's int8 convolution where it gives these bits (int8_dnnl.h), else the
    // int16 GEMMs below.
    QConvCall call;
    call.op = op();
    call.attrs = &attrs();
    call.x = &in[s.a];
    call.w = &in[s.b];
    call.x_zero_point = x_zp;
    call.x_zero_point_constant = !(static_cast<size_t>(s.a_zp) < in.size() && in[s.a_zp].present() &&
                                   !in[s.a_zp].constant);
    call.w_zero_points = p.b_zp;
    if (IsQLinear(op())) {
      call.multipliers = p.multiplier;
      call.y_zero_point = ZeroPointAt(&in[7], 0);
      call.bias = bias;
    }
    call.channels_last = v.channels_last;
    call.y = &out[0];
    REMEX_ASSIGN_OR_RETURN(bool done, dnnl_.Run(call));
    if (done) return OkStatus();
    if (!v.channels_last) return RunInt16(in, out[0], v, x_zp, p, bias);
    // Channels-last X and Y: the int16 GEMMs run on channels-first copies.
    std::vector<TensorRef> first(in.begin(), in.end());
    const Shape x_first = ToChannelsFirst(in[s.a].shape), y_first = ToChannelsFirst(out[0].shape);
    std::vector<uint8_t> x_buffer(static_cast<size_t>(*NumElements(x_first)) * DTypeSize(in[s.a].dtype));
    std::vector<uint8_t> y_buffer(static_cast<size_t>(*NumElements(y_first)) * DTypeSize(out[0].dtype));
    first[s.a] = {x_buffer.data(), in[s.a].dtype, x_first};
    const TensorRef y{y_buffer.data(), out[0].dtype, y_first};
    TransposeChannels(in[s.a], first[s.a], /*to_channels_last=*/false);
    REMEX_RETURN_IF_ERROR(RunInt16(first, y, v, x_zp, p, bias));
    TransposeChannels(y, out[0], /*to_channels_last=*/true);
    return OkStatus();
  }

 private:
  // `from` [N, C, S] into `to` [N, S, C] (to_channels_last) or back, S the spatial
  // dims flattened; elements of 1 or 4 bytes.
  static void TransposeChannels(const TensorRef& from, const TensorRef& to, bool to_channels_last) {
    const Shape& cf = to_channels_last ? from.shape : to.shape;  // channels-first
    const int64_t n = cf[0], c = cf[1], sp = *NumElements(cf) / std::max<int64_t>(n * c, 1);
    const size_t es = DTypeSize(from.dtype);
    const auto* src = static_cast<const uint8_t*>(from.data);
    auto* dst = static_cast<uint8_t*>(to.data);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t i = 0; i < sp; ++i) {
          const int64_t first = (b * c + ch) * sp + i, last = (b * sp + i) * c + ch;
          std::memcpy(dst + (to_channels_last ? last : first) * es, src + (to_channels_last ? first : last) * es, es);
        }
      }
    }
  }

  // The int16 GEMMs over channels-first X (in[0]) and Y.
  Status RunInt16(std::span<const TensorRef> in, const TensorRef& y, const QConvView& v, int32_t x_zp,
                  const ChannelParams& p, const int32_t* bias) {
    const Slots s = IsQLinear(op()) ? kQLinearSlots : kIntegerSlots;
    const quant::ConvGeometry& g = v.g;
    const OutputWriter w = WriterOf(op(), in, y);
    return DispatchOperands(in[s.a].dtype, in[s.b].dtype, [&](auto x_tag, auto w_tag) -> Status {
      using X = typename decltype(x_tag)::type;
      using W = typename decltype(w_tag)::type;
      const X* x = DataAs<const X>(in[s.a]);
      const W* wt = DataAs<const W>(in[s.b]);
      const int64_t cg = g.c / g.group, mg = g.m / g.group;
      const int64_t ksize = g.kernel[0] * g.kernel[1] * g.kernel[2];
      const int64_t k = cg * ksize;
      const int64_t plane = g.out[0] * g.out[1] * g.out[2];
      const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
      constexpr int64_t kTile = 512;
      // W less its zero points, packed per group; kept while the same constant W and
      // zero points come in.
      const TensorRef* w_zp =
          static_cast<size_t>(s.b_zp) < in.size() && in[s.b_zp].present() ? &in[s.b_zp] : nullptr;
      const bool keep = in[s.b].constant && (w_zp == nullptr || w_zp->constant);
      const bool kept = keep && packed_from_ == in[s.b].data && packed_zp_from_ == (w_zp ? w_zp->data : nullptr) &&
                        packed_.size() == static_cast<size_t>(g.group) && packed_k_ == k &&
                        packed_[0].m == mg;
      if (!kept) {
        packed_.clear();
        std::vector<int16_t> w16(static_cast<size_t>(mg * k));
        for (int64_t grp = 0; grp < g.group; ++grp) {
          for (int64_t mi = 0; mi < mg; ++mi) {
            const int64_t m = grp * mg + mi;
            for (int64_t i = 0; i < k; ++i) {
              w16[mi * k + i] = static_cast<int16_t>(int32_t{wt[m * k + i]} - p.b_zp[m]);
            }
          }
          packed_.push_back(PackIntGemmA(w16.data(), mg, k));
        }
        packed_k_ = k;
        packed_from_ = keep ? in[s.b].data : nullptr;
        packed_zp_from_ = keep && w_zp ? w_zp->data : nullptr;
      }
      // Jobs of one tile of output positions of one image and group each, spread over the
      // compute threads, each part with its own patch matrix and sums (IntGemm inside a
      // part runs on the part's thread).
      // Tiles of at most kTile output positions; more of them where that makes the jobs
      // a multiple of the compute threads and keeps tiles of 64 or more (28x28: two of
      // 392, not 512 and 272), so that the threads get even shares.
      const int64_t per_tile_set = g.n * g.group;
      const int64_t threads = ParallelParts(std::numeric_limits<int64_t>::max(), 1);
      int64_t tiles = (plane + kTile - 1) / kTile;
      if (threads > 1 && plane > 0) {
        int64_t even = tiles;
        while (per_tile_set * even % threads != 0) ++even;
        if (plane / even >= 64) tiles = even;
      }
      const int64_t tile = plane > 0 ? std::min(kTile, ((plane + tiles - 1) / tiles + 15) / 16 * 16) : kTile;
      tiles = plane > 0 ? (plane + tile - 1) / tile : 0;
      const int64_t jobs = g.n * g.group * tiles;
      const int parts = ParallelParts(jobs, 1);
      std::vector<std::vector<int16_t>> cols(static_cast<size_t>(parts));
      std::vector<std::vector<uint32_t>> accs(static_cast<size_t>(parts));
      ParallelFor(jobs, 1, [&](int64_t first, int64_t last, int part) {
        std::vector<int16_t>& col = cols[static_cast<size_t>(part)];
        std::vector<uint32_t>& acc = accs[static_cast<size_t>(part)];
        col.resize(static_cast<size_t>(k * tile));
        acc.resize(static_cast<size_t>(mg * tile));
        for (int64_t job = first; job < last; ++job) {
          const int64_t b = job / (g.group * tiles), grp = job / tiles % g.group, t0 = job % tiles * tile;
          const int64_t tn = std::min(tile, plane - t0);
          // The patch matrix [k, tn], along runs of consecutive output positions in a row
          // (o0, o1 fixed), so that a run's input row is found once.
          for (int64_t ci = 0; ci < cg; ++ci) {
            const X* xc = x + (b * g.c + grp * cg + ci) * in_plane;
            for (int64_t kk = 0; kk < ksize; ++kk) {
              const int64_t k2 = kk % g.kernel[2], k1 = (kk / g.kernel[2]) % g.kernel[1];
              const int64_t k0 = kk / (g.kernel[2] * g.kernel[1]);
              int16_t* row = col.data() + (ci * ksize + kk) * tn;
              for (int64_t t = 0; t < tn;) {
                const int64_t pos = t0 + t;
                const int64_t o2 = pos % g.out[2], o1 = (pos / g.out[2]) % g.out[1], o0 = pos / (g.out[2] * g.out[1]);
                const int64_t run = std::min(g.out[2] - o2, tn - t);
                const int64_t i0 = o0 * g.stride[0] - g.pad[0] + k0 * g.dilation[0];
                const int64_t i1 = o1 * g.stride[1] - g.pad[1] + k1 * g.dilation[1];
                if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
                  std::fill(row + t, row + t + run, int16_t{0});
                } else {
                  const X* src = xc + (i0 * g.in[1] + i1) * g.in[2];
                  const int64_t base = o2 * g.stride[2] - g.pad[2] + k2 * g.dilation[2];
                  for (int64_t r = 0; r < run; ++r) {
                    const int64_t i2 = base + r * g.stride[2];
                    row[t + r] = i2 >= 0 && i2 < g.in[2] ? static_cast<int16_t>(int32_t{src[i2]} - x_zp) : int16_t{0};
                  }
                }
                t += run;
              }
            }
          }
          IntGemmPackedAB(packed_[static_cast<size_t>(grp)], PackIntGemmB(col.data(), k, tn), acc.data());
          for (int64_t mi = 0; mi < mg; ++mi) {
            const int64_t m = grp * mg + mi;
            const uint32_t add = bias ? static_cast<uint32_t>(bias[m]) : 0u;
            const int64_t at = (b * g.m + m) * plane + t0;
            const uint32_t* sums = acc.data() + mi * tn;
            if (w.qlinear && w.y == DType::kUint8) {
              RequantizeSpan(sums, add, tn, p.multiplier[m], w.y_zp, static_cast<uint8_t*>(w.data) + at);
            } else if (w.qlinear) {
              RequantizeSpan(sums, add, tn, p.multiplier[m], w.y_zp, static_cast<int8_t*>(w.data) + at);
            } else {
              uint32_t* to = static_cast<uint32_t*>(w.data) + at;
              for (int64_t t = 0; t < tn; ++t) to[t] = sums[t] + add;
            }
          }
        }
      });
      return OkStatus();
    });
  }

 private:
  DnnlQConv dnnl_;
  // W (less its zero points) packed per group for IntGemmPackedAB; kept across calls
  // while the same constant W and zero points come in (packed_from_ non-null).
  std::vector<IntGemmPackedA> packed_;
  int64_t packed_k_ = 0;
  const void* packed_from_ = nullptr;
  const void* packed_zp_from_ = nullptr;
};

constexpr std::string_view kMatMuls[] = {"MatMulInteger", "QLinearMatMul"};
constexpr std::string_view kConvs[] = {"ConvInteger", "QLinearConv"};

}  // namespace

Status CheckQConvAttrs(std::string_view op, const Attributes& attrs) {
  REMEX_RETURN_IF_ERROR(ParseWindowAttrs(op, attrs, /*with_ceil_mode=*/false).status());
  REMEX_RETURN_IF_ERROR(ParseChannelsLast(op, attrs).status());
  return ParseGroup(op, attrs).status();
}

Status AddQLinearOpDefs(KernelRegistry& registry) {
  for (std::string_view name : kMatMuls) REMEX_RETURN_IF_ERROR(registry.AddOp(QDef(name)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(FusedMatMulIntegerDef()));
  for (std::string_view name : kConvs) REMEX_RETURN_IF_ERROR(registry.AddOp(QDef(name)));
  return OkStatus();
}

Status AddQLinearCpuKernels(KernelRegistry& registry) {
  for (std::string_view name : kMatMuls) {
    REMEX_RETURN_IF_ERROR(AddCpuKernel<QMatMulKernel>(registry, name));
  }
  REMEX_RETURN_IF_ERROR(AddCpuKernel<QMatMulKernel>(registry, kFusedMatMulInteger));
  for (std::string_view name : kConvs) {
    REMEX_RETURN_IF_ERROR(AddCpuKernel<QConvKernel>(registry, name));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
