// Conv and ConvTranspose: shape functions and CPU kernels on oneDNN's
// convolution_forward and deconvolution_forward.
//
// Conv (https://onnx.ai/onnx/operators/onnx__Conv.html), opsets 1, 11:
//   X float32 [N, C, D1 (, D2 (, D3))], W float32 [M, C / group, k1 (, k2 (, k3))],
//   optional B float32 [M] -> Y float32 [N, M, O1 (, O2 (, O3))].
//   Internal attribute `layout` (set by the compiler's layout pass, never by ONNX):
//   "NCHW" (default) or "NHWC": X and Y are then channels-last, X [N, D1.., C] and
//   Y [N, O1.., M] (oneDNN's nwc / nhwc / ndhwc memory formats); W and B keep their
//   ONNX layouts. The semantics are unchanged: Y_nhwc = transpose(Conv(X_nchw)).
//   float16 X, W, B are computed in float32 and Y rounded once on store.
//
// FusedConv (internal; the compiler's conv-epilogue fusion creates it, never ONNX):
//   Y = activation(Conv(X, W, B) + Z), Conv's inputs, attributes (`layout` included)
//   and output, plus
//     Z  optional 4th input, X's dtype and exactly Y's shape (in the node's layout; no
//        broadcasting), INVALID_ARGUMENT "FusedConv: ..." otherwise;
//     activation         "" / absent (none), "Relu", "LeakyRelu", "Clip", "Sigmoid",
//                        "Tanh", "HardSigmoid", "HardSwish" (INVALID_ARGUMENT otherwise);
//     activation_params  LeakyRelu [alpha], Clip [min, max], HardSigmoid [alpha, beta],
//                        the others [] (INVALID_ARGUMENT for another count).
//   Each activation is its ONNX operator's (kernels/conv_epilogue.h: Relu-14,
//   LeakyRelu-6, Clip-13, Sigmoid-13, Tanh-13, HardSigmoid-6, HardSwish-14).
//   The CPU kernel is Conv's oneDNN convolution with post-ops: Z through a sum post-op
//   (Z is copied into Y, or reordered into the primitive's blocked Y, first), then the
//   activation as eltwise post-ops (relu with alpha, clip, logistic, tanh, hardswish
//   = x * relu6(x + 3) / 6, and HardSigmoid as linear(alpha, beta) then clip(0, 1)).
//   float16 runs as Conv's: in float32, Y rounded once on store.
//
// ConvTranspose (https://onnx.ai/onnx/operators/onnx__ConvTranspose.html), opsets 1, 11:
//   X float32 [N, C, D1 (, D2 (, D3))], W float32 [C, M / group, k1 (, k2 (, k3))],
//   optional B float32 [M] -> Y float32 [N, M, O1 (, O2 (, O3))].
//   Attributes: group, strides, dilations, kernel_shape (must match W), pads,
//   output_padding (added at the end of each axis), output_shape (spatial extents, or
//   N and C extents too, which are ignored), auto_pad. Per spatial axis the full
//   output is stride * (in - 1) + output_padding + (k - 1) * dilation + 1 and
//     O = full - pad_begin - pad_end with the attribute pads (auto_pad NOTSET, VALID: 0).
//   With output_shape, or with auto_pad SAME_UPPER / SAME_LOWER (O = in * stride), the
//   total padding full - O is split as the ONNX specification gives it: SAME_UPPER puts
//   floor(total / 2) at the begin, everything else puts it at the end. A negative total
//   extends the output with positions no input reaches (they hold the bias).
//   2-D ConvTranspose with stride equal to the kernel, no dilation, padding or groups
//   (PP-OCR's 2x2 stride-2 upsampling) runs as one oneDNN sgemm per image plus a scatter
//   of the kernel-sized patches; every other case on the deconvolution primitive.

#include <algorithm>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "kernels/conv_epilogue.h"
#include "kernels/dnnl_epilogue.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kConv = "Conv";
constexpr std::string_view kFusedConv = "FusedConv";

struct ConvAttrs {
  std::string_view op = kConv;  // "Conv" or "FusedConv", for error messages.
  WindowAttrs window;
  int64_t group = 1;
  bool channels_last = false;  // `layout` "NHWC".
  ConvEpilogue epilogue;       // FusedConv only; none for Conv.
};

// Channels-first shape of a channels-last one: [N, D.., C] -> [N, C, D..].
Shape ToChannelsFirst(const Shape& s) {
  if (s.size() < 2) return s;
  Shape out = {s[0], s.back()};
  out.insert(out.end(), s.begin() + 1, s.end() - 1);
  return out;
}

// Channels-last shape of a channels-first one: [N, C, D..] -> [N, D.., C].
Shape ToChannelsLast(const Shape& s) {
  if (s.size() < 2) return s;
  Shape out = {s[0]};
  out.insert(out.end(), s.begin() + 2, s.end());
  out.push_back(s[1]);
  return out;
}

// The `group` attribute (default 1) of Conv or ConvTranspose; it must be positive.
StatusOr<int64_t> ParseGroup(std::string_view op, const Attributes& attrs) {
  StatusOr<int64_t> group = attrs.Int("group", 1);
  if (!group.ok()) return OpError(op, group.status().message());
  if (*group < 1) return OpError(op, "group must be positive");
  return *group;
}

// Checks that X and W are both float32 or both float16, the types Conv and
// ConvTranspose run (float16 is computed in float32, see RunAsFloat32).
Status CheckFloat32(std::string_view op, const ShapeFnArg& x, const ShapeFnArg& w) {
  if ((x.dtype != DType::kFloat32 && x.dtype != DType::kFloat16) || w.dtype != x.dtype) {
    return OpError(op, "supports float32 and float16 (X and W alike), got X " + std::string(DTypeName(x.dtype)) +
                           ", W " + std::string(DTypeName(w.dtype)));
  }
  return OkStatus();
}

// Checks the optional bias in[2], when present: X's dtype, shape [m].
Status CheckBias(std::string_view op, std::span<const ShapeFnArg> in, int64_t m) {
  if (in.size() > 2 && in[2].present) {
    const ShapeFnArg& b = in[2];
    if (b.dtype != in[0].dtype) return OpError(op, "B must have X's dtype " + std::string(DTypeName(in[0].dtype)));
    if (b.shape != Shape{m}) {
      return OpError(op,
                     "B must have shape [" + std::to_string(m) + "], got " + ShapeToString(b.shape));
    }
  }
  return OkStatus();
}

// Conv's attributes, and FusedConv's epilogue too when `op` is "FusedConv".
StatusOr<ConvAttrs> ParseConvAttrs(const Attributes& attrs, std::string_view op = kConv) {
  ConvAttrs c;
  c.op = op == kFusedConv ? kFusedConv : kConv;
  REMEX_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(c.op, attrs, /*with_ceil_mode=*/false));
  REMEX_ASSIGN_OR_RETURN(c.group, ParseGroup(c.op, attrs));
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok()) return OpError(c.op, layout.status().message());
  if (*layout != "NCHW" && *layout != "NHWC") {
    return OpError(c.op, "unknown layout '" + *layout + "' (NCHW or NHWC)");
  }
  c.channels_last = *layout == "NHWC";
  if (c.op == kFusedConv) {
    REMEX_ASSIGN_OR_RETURN(c.epilogue, ParseConvEpilogue(c.op, attrs));
  }
  return c;
}

// Validated geometry of one Conv call.
struct ConvShape {
  int64_t n = 0, c = 0, m = 0;  // Batch, input channels, output channels.
  WindowGeometry geometry;
  Shape output;
};

// Shapes in `s` are channels-first (ONNX's) whatever the layout; `output` is in the
// node's layout.
StatusOr<ConvShape> ComputeConvShape(const ConvAttrs& attrs, std::span<const ShapeFnArg> in) {
  const std::string_view op = attrs.op;
  ShapeFnArg x = in[0];
  if (attrs.channels_last) x.shape = ToChannelsFirst(x.shape);
  const ShapeFnArg& w = in[1];
  REMEX_RETURN_IF_ERROR(CheckFloat32(op, x, w));
  if (x.shape.size() < 3 || x.shape.size() > 5) {
    return OpError(
        op, "X must have rank 3 to 5 (1-D to 3-D convolution), got " + ShapeToString(x.shape));
  }
  if (w.shape.size() != x.shape.size()) {
    return OpError(op, "W " + ShapeToString(w.shape) + " must have the rank of X " +
                              ShapeToString(x.shape));
  }
  ConvShape s;
  s.n = x.shape[0];
  s.c = x.shape[1];
  s.m = w.shape[0];
  const int64_t g = attrs.group;
  if (s.c % g != 0) {
    return OpError(op, "input channels " + std::to_string(s.c) + " are not divisible by group " +
                              std::to_string(g));
  }
  if (w.shape[1] != s.c / g) {
    return OpError(op, "W " + ShapeToString(w.shape) + " expects " +
                              std::to_string(w.shape[1] * g) + " input channels with group " +
                              std::to_string(g) + ", X has " + std::to_string(s.c));
  }
  if (s.m % g != 0) {
    return OpError(op, "output channels " + std::to_string(s.m) +
                              " are not divisible by group " + std::to_string(g));
  }
  std::span<const int64_t> kernel(w.shape.data() + 2, w.shape.size() - 2);
  if (!attrs.window.kernel_shape.empty() &&
      !std::equal(kernel.begin(), kernel.end(), attrs.window.kernel_shape.begin(),
                  attrs.window.kernel_shape.end())) {
    return OpError(op, "kernel_shape does not match W " + ShapeToString(w.shape));
  }
  REMEX_RETURN_IF_ERROR(CheckBias(op, in, s.m));
  std::span<const int64_t> spatial(x.shape.data() + 2, x.shape.size() - 2);
  REMEX_ASSIGN_OR_RETURN(s.geometry, ComputeWindowGeometry(op, attrs.window, spatial, kernel));
  s.output = {s.n, s.m};
  s.output.insert(s.output.end(), s.geometry.output.begin(), s.geometry.output.end());
  if (attrs.channels_last) s.output = ToChannelsLast(s.output);
  return s;
}

StatusOr<std::vector<TensorInfo>> InferConv(const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  if (in.size() < 2) return OpError(kConv, "expects inputs X and W");
  REMEX_ASSIGN_OR_RETURN(ConvAttrs c, ParseConvAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(ConvShape s, ComputeConvShape(c, in));
  return std::vector<TensorInfo>{{in[0].dtype, s.output}};
}

OpDef ConvDef() {
  OpDef def;
  def.name = std::string(kConv);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferConv;
  return def;
}

// Conv's shape function plus the residual Z (input 3): X's dtype, exactly Y's shape.
StatusOr<std::vector<TensorInfo>> InferFusedConv(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  if (in.size() < 2) return OpError(kFusedConv, "expects inputs X and W");
  REMEX_ASSIGN_OR_RETURN(ConvAttrs c, ParseConvAttrs(attrs, kFusedConv));
  REMEX_ASSIGN_OR_RETURN(ConvShape s, ComputeConvShape(c, in));
  if (in.size() > 3 && in[3].present) {
    const ShapeFnArg& z = in[3];
    if (z.dtype != in[0].dtype) {
      return OpError(kFusedConv, "Z must have X's dtype " + std::string(DTypeName(in[0].dtype)) + ", got " +
                                     std::string(DTypeName(z.dtype)));
    }
    if (z.shape != s.output) {
      return OpError(kFusedConv, "Z must have Y's shape " + ShapeToString(s.output) + ", got " +
                                     ShapeToString(z.shape));
    }
  }
  return std::vector<TensorInfo>{{in[0].dtype, s.output}};
}

OpDef FusedConvDef() {
  OpDef def;
  def.name = std::string(kFusedConv);
  def.min_inputs = 2;
  def.max_inputs = 4;
  def.infer = InferFusedConv;
  return def;
}

// Dense row-major layout of a tensor of `rank` dims.
dnnl::memory::format_tag PlainTag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 1: return tag::a;
    case 3: return tag::abc;
    case 4: return tag::abcd;
    case 5: return tag::abcde;
    case 6: return tag::abcdef;
    default: return tag::undef;
  }
}

// Channels-last layout of a tensor of `rank` dims (nwc, nhwc, ndhwc).
dnnl::memory::format_tag ChannelsLastTag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 3: return tag::acb;
    case 4: return tag::acdb;
    case 5: return tag::acdeb;
    default: return tag::undef;
  }
}

// Y [N, ..., M] (channels-last) = bias[m] (0 without bias) everywhere.
void FillBiasChannelsLast(const TensorRef& y, const float* bias) {
  const int64_t m = y.shape.back();
  const int64_t total = *NumElements(y.shape);
  float* p = DataAs<float>(y);
  for (int64_t i = 0; i < total; ++i) p[i] = bias ? bias[i % m] : 0.f;
}

// Y [N, M, ...] = bias[m] (0 without bias) everywhere.
void FillBias(const TensorRef& y, const float* bias) {
  const int64_t n = y.shape[0], m = y.shape[1];
  const int64_t plane = n * m == 0 ? 0 : *NumElements(y.shape) / (n * m);
  float* p = DataAs<float>(y);
  for (int64_t i = 0; i < n * m; ++i) {
    std::fill(p + i * plane, p + (i + 1) * plane, bias ? bias[i % m] : 0.f);
  }
}

// One compiled oneDNN convolution_forward or deconvolution_forward for one (X shape,
// W shape, bias) combination: the primitive, memories over the caller's buffers in
// their own (user) layouts, and the reorders to and from the layouts the primitive
// chose where those differ.
struct DnnlConvPrimitive {
  dnnl::primitive primitive;
  bool has_bias = false;
  dnnl::memory user_src, user_weights, user_dst, bias;
  dnnl::memory src, weights, dst;  // Primitive formats; used only when reordered.
  bool reorder_src = false, reorder_weights = false, reorder_dst = false;
  dnnl::reorder src_reorder, weights_reorder, dst_reorder;
  // FusedConv's residual Z through a sum post-op: Z is copied into Y before the
  // primitive runs (reordered into `dst` when Y is reordered; `user_z` in Y's layout).
  bool has_sum = false;
  dnnl::memory user_z;
  dnnl::reorder z_reorder;
};

// Builds the Primitive (dnnl::convolution_forward or dnnl::deconvolution_forward) of
// `pd` with memories in the user layouts (no data yet; bias_md is ignored without
// bias) and a reorder for each operand whose layout the primitive changed.
template <typename Primitive>
DnnlConvPrimitive MakeDnnlConvPrimitive(const typename Primitive::primitive_desc& pd,
                                        const dnnl::engine& engine,
                                        const dnnl::memory::desc& user_src_md,
                                        const dnnl::memory::desc& user_w_md,
                                        const dnnl::memory::desc& user_dst_md, bool has_bias,
                                        const dnnl::memory::desc& bias_md) {
  using dnnl::memory;
  DnnlConvPrimitive c;
  c.primitive = Primitive(pd);
  c.has_bias = has_bias;
  c.user_src = memory(user_src_md, engine, nullptr);
  c.user_weights = memory(user_w_md, engine, nullptr);
  c.user_dst = memory(user_dst_md, engine, nullptr);
  if (has_bias) c.bias = memory(bias_md, engine, nullptr);
  if (pd.src_desc() != user_src_md) {
    c.reorder_src = true;
    c.src = memory(pd.src_desc(), engine);
    c.src_reorder = dnnl::reorder(c.user_src, c.src);
  }
  if (pd.weights_desc() != user_w_md) {
    c.reorder_weights = true;
    c.weights = memory(pd.weights_desc(), engine);
    c.weights_reorder = dnnl::reorder(c.user_weights, c.weights);
  }
  if (pd.dst_desc() != user_dst_md) {
    c.reorder_dst = true;
    c.dst = memory(pd.dst_desc(), engine);
    c.dst_reorder = dnnl::reorder(c.dst, c.user_dst);
  }
  return c;
}

// Runs `c` on the given buffers in the user layouts (`bias` is read only when `c` has
// a bias, `z` only when it has a sum post-op): reorders X and W in, places Z in Y,
// executes, reorders Y out, and waits for `stream`.
void ExecuteDnnlConv(DnnlConvPrimitive& c, dnnl::stream& stream, void* src, void* weights,
                     void* dst, void* bias, void* z = nullptr) {
  c.user_src.set_data_handle(src);
  c.user_weights.set_data_handle(weights);
  c.user_dst.set_data_handle(dst);
  if (c.has_bias) c.bias.set_data_handle(bias);
  if (c.reorder_src) c.src_reorder.execute(stream, c.user_src, c.src);
  // TODO(perf): keep reordered weights when they are known to be constant.
  if (c.reorder_weights) c.weights_reorder.execute(stream, c.user_weights, c.weights);
  if (c.has_sum) {
    if (c.reorder_dst) {
      c.user_z.set_data_handle(z);
      c.z_reorder.execute(stream, c.user_z, c.dst);
    } else if (z != dst) {
      std::memcpy(dst, z, c.user_dst.get_desc().get_size());
    }
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, c.reorder_src ? c.src : c.user_src},
      {DNNL_ARG_WEIGHTS, c.reorder_weights ? c.weights : c.user_weights},
      {DNNL_ARG_DST, c.reorder_dst ? c.dst : c.user_dst}};
  if (c.has_bias) args[DNNL_ARG_BIAS] = c.bias;
  c.primitive.execute(stream, args);
  if (c.reorder_dst) c.dst_reorder.execute(stream, c.dst, c.user_dst);
  stream.wait();
}

// The compiled primitives of one kernel by (X shape, W shape, variant: which optional
// inputs are present), at most
// kMaxCached (all dropped when full), and the CPU engine and stream they run on.
template <typename Compiled>
class DnnlConvCache {
 public:
  dnnl::engine& engine() { return *engine_; }
  dnnl::stream& stream() { return *stream_; }

  // The entry for `in`, made by `compile()` (which may use engine()) when missing.
  template <typename CompileFn>
  StatusOr<Compiled*> FindOrCompile(std::span<const TensorRef> in, int64_t variant,
                                    CompileFn compile) {
    Shape key = in[0].shape;
    key.insert(key.end(), in[1].shape.begin(), in[1].shape.end());
    key.push_back(variant);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (!engine_) {
        engine_ = std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0);
        stream_ = std::make_unique<dnnl::stream>(*engine_);
      }
      REMEX_ASSIGN_OR_RETURN(Compiled compiled, compile());
      if (cache_.size() >= kMaxCached) cache_.clear();
      it = cache_.emplace(std::move(key), std::move(compiled)).first;
    }
    return &it->second;
  }

 private:
  static constexpr size_t kMaxCached = 16;
  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<Shape, Compiled> cache_;
};

// Y = activation(Y + Z) elementwise (Z may be null), for outputs no convolution
// reaches (they hold the bias).
void ApplyEpilogue(const ConvEpilogue& e, const TensorRef& y, const float* z) {
  float* p = DataAs<float>(y);
  const int64_t n = NumElements(y.shape).value_or(0);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = ApplyConvActivation(e.activation, z ? p[i] + z[i] : p[i], e.alpha, e.beta);
  }
}

// Conv, and FusedConv (`def.name` "FusedConv": the epilogue attributes and Z are read).
class ConvKernel final : public ValidatedKernel {
 public:
  ConvKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), attrs_(*ParseConvAttrs(attrs, def.name)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      return RunAsFloat32(in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); });
    }
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    if (NumElements(in[0].shape).value_or(0) == 0 || NumElements(in[1].shape).value_or(0) == 0) {
      // No input channel (or only padding) reaches the output: Y holds the bias.
      const float* bias = in.size() > 2 && in[2].present() ? DataAs<const float>(in[2]) : nullptr;
      if (attrs_.channels_last) {
        FillBiasChannelsLast(out[0], bias);
      } else {
        FillBias(out[0], bias);
      }
      if (attrs_.op == kFusedConv) ApplyEpilogue(attrs_.epilogue, out[0], HasZ(in) ? DataAs<const float>(in[3]) : nullptr);
      return OkStatus();
    }
    try {
      return RunDnnl(in, out);
    } catch (const dnnl::error& e) {
      return Internal(std::string(attrs_.op) + ": oneDNN: " + std::string(e.what()));
    } catch (const std::exception& e) {
      return Internal(std::string(attrs_.op) + ": " + std::string(e.what()));
    }
  }

 private:
  static bool HasZ(std::span<const TensorRef> in) { return in.size() > 3 && in[3].present(); }

  Status RunDnnl(std::span<const TensorRef> in, std::span<const TensorRef> out) {
    const bool has_bias = in.size() > 2 && in[2].present();
    const bool has_z = HasZ(in);
    REMEX_ASSIGN_OR_RETURN(DnnlConvPrimitive * c, cache_.FindOrCompile(in, int64_t{has_bias} | int64_t{has_z} << 1, [&] {
      return Compile(in, has_bias, has_z);
    }));
    ExecuteDnnlConv(*c, cache_.stream(), in[0].data, in[1].data, out[0].data,
                    has_bias ? in[2].data : nullptr, has_z ? in[3].data : nullptr);
    return OkStatus();
  }

  // The convolution of `in`, with FusedConv's epilogue as post-ops (the sum of Z when
  // `has_z`, then the activation).
  StatusOr<DnnlConvPrimitive> Compile(std::span<const TensorRef> in, bool has_bias, bool has_z) {
    using dnnl::memory;
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(ConvShape s, ComputeConvShape(attrs_, args));
    const size_t rank = in[0].shape.size();
    const int64_t g = attrs_.group;
    // oneDNN dims are always channels-first; the memory format carries the layout.
    const Shape src_shape = attrs_.channels_last ? ToChannelsFirst(in[0].shape) : in[0].shape;
    const Shape dst_shape = attrs_.channels_last ? ToChannelsFirst(s.output) : s.output;
    const memory::format_tag user_tag = attrs_.channels_last ? ChannelsLastTag(rank) : PlainTag(rank);
    memory::dims src_dims(src_shape.begin(), src_shape.end());
    memory::dims dst_dims(dst_shape.begin(), dst_shape.end());
    memory::dims w_dims;
    memory::format_tag w_tag;
    if (g == 1) {
      w_dims.assign(in[1].shape.begin(), in[1].shape.end());
      w_tag = PlainTag(rank);
    } else {
      w_dims = {g, s.m / g, s.c / g};
      w_dims.insert(w_dims.end(), in[1].shape.begin() + 2, in[1].shape.end());
      w_tag = PlainTag(rank + 1);
    }
    const size_t nsp = rank - 2;
    memory::dims strides(s.geometry.strides.begin(), s.geometry.strides.end());
    memory::dims dilates(nsp);
    for (size_t i = 0; i < nsp; ++i) dilates[i] = s.geometry.dilations[i] - 1;
    memory::dims pad_l(s.geometry.pad_begin.begin(), s.geometry.pad_begin.end());
    memory::dims pad_r(s.geometry.pad_end.begin(), s.geometry.pad_end.end());
    const auto f32 = memory::data_type::f32;
    // Pointwise convolutions run as a GEMM on the plain layout faster than a blocked
    // convolution plus the reorders of X and Y; everything else (depthwise above all)
    // gets the layouts oneDNN prefers. Channels-last activations stay channels-last
    // (oneDNN's nhwc convolutions), so X and Y are never reordered.
    bool pointwise = g == 1;
    for (int64_t k : s.geometry.kernel) pointwise = pointwise && k == 1;
    const memory::format_tag act_tag =
        attrs_.channels_last ? user_tag : pointwise ? PlainTag(rank) : memory::format_tag::any;
    memory::desc src_any(src_dims, f32, act_tag);
    memory::desc w_any(w_dims, f32, memory::format_tag::any);
    memory::desc dst_any(dst_dims, f32, act_tag);
    memory::desc user_src_md(src_dims, f32, user_tag);
    memory::desc user_w_md(w_dims, f32, w_tag);
    memory::desc user_dst_md(dst_dims, f32, user_tag);
    memory::desc bias_md({s.m}, f32, memory::format_tag::a);
    auto desc =
        has_bias ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                       src_any, w_any, bias_md, dst_any, strides, dilates, pad_l, pad_r)
                 : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                   dnnl::algorithm::convolution_direct, src_any,
                                                   w_any, dst_any, strides, dilates, pad_l, pad_r);
    dnnl::post_ops post_ops;
    if (has_z) post_ops.append_sum(1.f);
    AppendActivation(post_ops, attrs_.epilogue);
    dnnl::primitive_attr pattr;
    pattr.set_post_ops(post_ops);
    dnnl::convolution_forward::primitive_desc pd(desc, pattr, cache_.engine());
    DnnlConvPrimitive c = MakeDnnlConvPrimitive<dnnl::convolution_forward>(
        pd, cache_.engine(), user_src_md, user_w_md, user_dst_md, has_bias, bias_md);
    if (has_z) {
      c.has_sum = true;
      if (c.reorder_dst) {
        c.user_z = memory(user_dst_md, cache_.engine(), nullptr);
        c.z_reorder = dnnl::reorder(c.user_z, c.dst);
      }
    }
    return c;
  }

  ConvAttrs attrs_;
  DnnlConvCache<DnnlConvPrimitive> cache_;
};

// ---------------------------------------------------------------------------
// ConvTranspose.

constexpr std::string_view kConvTranspose = "ConvTranspose";

struct ConvTransposeAttrs {
  WindowAttrs window;
  int64_t group = 1;
  std::vector<int64_t> output_padding;  // Empty: all 0.
  std::vector<int64_t> output_shape;    // Empty: not given.
};

StatusOr<ConvTransposeAttrs> ParseConvTransposeAttrs(const Attributes& attrs) {
  constexpr std::string_view op = kConvTranspose;
  ConvTransposeAttrs c;
  REMEX_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(op, attrs, /*with_ceil_mode=*/false));
  REMEX_ASSIGN_OR_RETURN(c.group, ParseGroup(op, attrs));
  StatusOr<std::vector<int64_t>> output_padding = attrs.Ints("output_padding", {});
  if (!output_padding.ok()) return OpError(op, output_padding.status().message());
  c.output_padding = *output_padding;
  for (int64_t v : c.output_padding) {
    if (v < 0) return OpError(op, "output_padding must be non-negative");
  }
  StatusOr<std::vector<int64_t>> output_shape = attrs.Ints("output_shape", {});
  if (!output_shape.ok()) return OpError(op, output_shape.status().message());
  c.output_shape = *output_shape;
  return c;
}

// Validated geometry of one ConvTranspose call. The pads are relative to the region
// the inputs reach (stride * (in - 1) + (k - 1) * dilation + 1 per axis) and may be
// negative: the output then extends past that region.
struct ConvTransposeShape {
  int64_t n = 0, c = 0, m = 0;
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
  Shape output;
};

StatusOr<ConvTransposeShape> ComputeConvTransposeShape(const ConvTransposeAttrs& attrs,
                                                       std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = kConvTranspose;
  const ShapeFnArg& x = in[0];
  const ShapeFnArg& w = in[1];
  REMEX_RETURN_IF_ERROR(CheckFloat32(op, x, w));
  if (x.shape.size() < 3 || x.shape.size() > 5) {
    return OpError(op, "X must have rank 3 to 5 (1-D to 3-D), got " + ShapeToString(x.shape));
  }
  if (w.shape.size() != x.shape.size()) {
    return OpError(
        op, "W " + ShapeToString(w.shape) + " must have the rank of X " + ShapeToString(x.shape));
  }
  const size_t nsp = x.shape.size() - 2;
  ConvTransposeShape s;
  s.n = x.shape[0];
  s.c = x.shape[1];
  const int64_t g = attrs.group;
  if (w.shape[0] != s.c) {
    return OpError(op, "W " + ShapeToString(w.shape) + " expects " + std::to_string(w.shape[0]) +
                           " input channels, X has " + std::to_string(s.c));
  }
  if (s.c % g != 0) {
    return OpError(op, "input channels " + std::to_string(s.c) + " are not divisible by group " +
                           std::to_string(g));
  }
  if (__builtin_mul_overflow(w.shape[1], g, &s.m)) return OpError(op, "output channels overflow");
  s.kernel.assign(w.shape.begin() + 2, w.shape.end());
  for (int64_t k : s.kernel) {
    if (k < 1) return OpError(op, "W " + ShapeToString(w.shape) + " has an empty kernel");
  }
  if (!attrs.window.kernel_shape.empty() && attrs.window.kernel_shape != s.kernel) {
    return OpError(op, "kernel_shape does not match W " + ShapeToString(w.shape));
  }
  REMEX_RETURN_IF_ERROR(CheckBias(op, in, s.m));
  auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* name) -> Status {
    if (!v.empty() && v.size() != want) {
      return OpError(op, std::string(name) + " has " + std::to_string(v.size()) +
                             " values, expected " + std::to_string(want));
    }
    return OkStatus();
  };
  const WindowAttrs& wa = attrs.window;
  REMEX_RETURN_IF_ERROR(check_len(wa.strides, nsp, "strides"));
  REMEX_RETURN_IF_ERROR(check_len(wa.dilations, nsp, "dilations"));
  REMEX_RETURN_IF_ERROR(check_len(wa.pads, 2 * nsp, "pads"));
  REMEX_RETURN_IF_ERROR(check_len(attrs.output_padding, nsp, "output_padding"));
  std::span<const int64_t> out_attr;
  if (!attrs.output_shape.empty()) {
    if (attrs.output_shape.size() == nsp) {
      out_attr = attrs.output_shape;
    } else if (attrs.output_shape.size() == nsp + 2) {
      out_attr = std::span<const int64_t>(attrs.output_shape).subspan(2);
    } else {
      return OpError(op, "output_shape has " + std::to_string(attrs.output_shape.size()) +
                             " values, expected " + std::to_string(nsp));
    }
  }
  s.strides = wa.strides.empty() ? std::vector<int64_t>(nsp, 1) : wa.strides;
  s.dilations = wa.dilations.empty() ? std::vector<int64_t>(nsp, 1) : wa.dilations;
  s.pad_begin.assign(nsp, 0);
  s.pad_end.assign(nsp, 0);
  s.output = {s.n, s.m};
  // floor(v / 2) for negative totals too.
  auto half_down = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t len = x.shape[2 + i];
    if (len < 1) {
      return OpError(
          op, "X " + ShapeToString(x.shape) + " has an empty spatial dim " + std::to_string(i));
    }
    const int64_t st = s.strides[i], d = s.dilations[i], k = s.kernel[i];
    const int64_t op_pad = attrs.output_padding.empty() ? 0 : attrs.output_padding[i];
    // reach = st * (len - 1) + (k - 1) * d + 1; full = reach + output_padding.
    int64_t reach, k_eff, full;
    if (__builtin_mul_overflow(st, len - 1, &reach) || __builtin_mul_overflow(k - 1, d, &k_eff) ||
        __builtin_add_overflow(reach, k_eff + 1, &reach) ||
        __builtin_add_overflow(reach, op_pad, &full) || full > (int64_t{1} << 40)) {
      return OpError(op, "output extent overflows in spatial dim " + std::to_string(i));
    }
    int64_t out = 0, pb = 0, pe = 0;
    const bool same = wa.auto_pad == "SAME_UPPER" || wa.auto_pad == "SAME_LOWER";
    if (!out_attr.empty() || same) {
      out = !out_attr.empty() ? out_attr[i] : len * st;
      if (out < 1 || out > (int64_t{1} << 40)) {
        return OpError(op, "output_shape value " + std::to_string(out) + " is out of range");
      }
      const int64_t total = full - out;
      if (wa.auto_pad == "SAME_UPPER") {
        pb = half_down(total);
        pe = total - pb;
      } else {
        pe = half_down(total);
        pb = total - pe;
      }
    } else {
      if (wa.auto_pad == "NOTSET" && !wa.pads.empty()) {
        pb = wa.pads[i];
        pe = wa.pads[i + nsp];
      }
      out = full - pb - pe;
      if (out < 1) {
        return OpError(op, "pads leave an empty output in spatial dim " + std::to_string(i));
      }
    }
    s.pad_begin[i] = pb;
    s.pad_end[i] = pe - op_pad;
    s.output.push_back(out);
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s.output).status());
  return s;
}

StatusOr<std::vector<TensorInfo>> InferConvTranspose(const Attributes& attrs,
                                                     std::span<const ShapeFnArg> in) {
  if (in.size() < 2) return OpError(kConvTranspose, "expects inputs X and W");
  REMEX_ASSIGN_OR_RETURN(ConvTransposeAttrs c, ParseConvTransposeAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(ConvTransposeShape s, ComputeConvTransposeShape(c, in));
  return std::vector<TensorInfo>{{in[0].dtype, s.output}};
}

OpDef ConvTransposeDef() {
  OpDef def;
  def.name = std::string(kConvTranspose);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferConvTranspose;
  return def;
}

// One compiled deconvolution for one (X shape, W shape, bias) combination. When a pad
// is negative the primitive runs with the pads clamped to 0 into `scratch`, which is
// then placed into Y (`offset` per spatial axis: Y index + offset = scratch index).
struct CompiledDeconv {
  DnnlConvPrimitive deconv;
  bool all_bias = false;
  bool use_scratch = false;
  std::vector<float> scratch;
  Shape scratch_shape;
  std::vector<int64_t> offset;
};

class ConvTransposeKernel final : public ValidatedKernel {
 public:
  ConvTransposeKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), attrs_(*ParseConvTransposeAttrs(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      return RunAsFloat32(in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); });
    }
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    const bool has_bias = in.size() > 2 && in[2].present();
    if (NumElements(in[0].shape).value_or(0) == 0 || NumElements(in[1].shape).value_or(0) == 0) {
      // No input reaches the output: Y holds the bias.
      FillBias(out[0], has_bias ? DataAs<const float>(in[2]) : nullptr);
      return OkStatus();
    }
    try {
      if (in[0].shape.size() == 4 && attrs_.group == 1) {
        std::vector<ShapeFnArg> args = ToShapeArgs(in);
        REMEX_ASSIGN_OR_RETURN(ConvTransposeShape s, ComputeConvTransposeShape(attrs_, args));
        if (IsPatchScatter(s)) return RunPatchScatter(s, in, out, has_bias);
      }
      return RunDnnl(in, out, has_bias);
    } catch (const dnnl::error& e) {
      return Internal("ConvTranspose: oneDNN: " + std::string(e.what()));
    }
  }

 private:
  // 2-D, stride equal to the kernel, no dilation or padding: every output pixel gets
  // exactly one input pixel's contribution (PP-OCR's 2x2 stride-2 upsampling).
  static bool IsPatchScatter(const ConvTransposeShape& s) {
    for (size_t i = 0; i < 2; ++i) {
      if (s.strides[i] != s.kernel[i] || s.dilations[i] != 1 || s.pad_begin[i] != 0 ||
          s.pad_end[i] != 0) {
        return false;
      }
    }
    return true;
  }

  // Per image one GEMM, T[M * kh * kw, H * W] = W[C, M * kh * kw]^T X[C, H * W] (oneDNN
  // sgemm), then each column of T becomes a kh x kw output patch.
  Status RunPatchScatter(const ConvTransposeShape& s, std::span<const TensorRef> in,
                         std::span<const TensorRef> out, bool has_bias) {
    const int64_t h = in[0].shape[2], w = in[0].shape[3];
    const int64_t kh = s.kernel[0], kw = s.kernel[1];
    const int64_t hw = h * w, mk = s.m * kh * kw, ow = w * kw;
    patches_.resize(static_cast<size_t>(mk * hw));
    const float* x = DataAs<const float>(in[0]);
    const float* wt = DataAs<const float>(in[1]);
    const float* bias = has_bias ? DataAs<const float>(in[2]) : nullptr;
    float* y = DataAs<float>(out[0]);
    for (int64_t n = 0; n < s.n; ++n) {
      dnnl::status st = dnnl::sgemm('T', 'N', mk, hw, s.c, 1.0f, wt, mk, x + n * s.c * hw, hw, 0.0f,
                                    patches_.data(), hw);
      if (st != dnnl::status::success) {
        return Internal("ConvTranspose: oneDNN sgemm failed with status " +
                        std::to_string(static_cast<int>(st)));
      }
      for (int64_t m = 0; m < s.m; ++m) {
        const float b = bias ? bias[m] : 0.0f;
        float* ym = y + (n * s.m + m) * h * kh * ow;
        for (int64_t i = 0; i < kh; ++i) {
          const float* t = patches_.data() + (m * kh + i) * kw * hw;
          for (int64_t r = 0; r < h; ++r) {
            float* yr = ym + (r * kh + i) * ow;
            const float* tr = t + r * w;
            if (kw == 2) {
              for (int64_t c = 0; c < w; ++c) {
                yr[2 * c] = tr[c] + b;
                yr[2 * c + 1] = tr[hw + c] + b;
              }
            } else {
              for (int64_t c = 0; c < w; ++c) {
                for (int64_t j = 0; j < kw; ++j) yr[c * kw + j] = tr[j * hw + c] + b;
              }
            }
          }
        }
      }
    }
    return OkStatus();
  }

  Status RunDnnl(std::span<const TensorRef> in, std::span<const TensorRef> out, bool has_bias) {
    REMEX_ASSIGN_OR_RETURN(CompiledDeconv * cp, cache_.FindOrCompile(in, has_bias, [&] {
      return Compile(in, has_bias);
    }));
    CompiledDeconv& c = *cp;
    if (c.all_bias) {
      FillBias(out[0], has_bias ? DataAs<const float>(in[2]) : nullptr);
      return OkStatus();
    }
    ExecuteDnnlConv(c.deconv, cache_.stream(), in[0].data, in[1].data,
                    c.use_scratch ? c.scratch.data() : out[0].data,
                    has_bias ? in[2].data : nullptr);
    if (c.use_scratch) PlaceScratch(c, out[0], has_bias ? DataAs<const float>(in[2]) : nullptr);
    return OkStatus();
  }

  // Y = bias everywhere, then the scratch result where it lies inside Y.
  static void PlaceScratch(const CompiledDeconv& c, const TensorRef& y, const float* bias) {
    FillBias(y, bias);
    const size_t nsp = y.shape.size() - 2;
    int64_t yd[3] = {1, 1, 1}, sd[3] = {1, 1, 1}, off[3] = {0, 0, 0};
    for (size_t i = 0; i < nsp; ++i) {
      yd[3 - nsp + i] = y.shape[2 + i];
      sd[3 - nsp + i] = c.scratch_shape[2 + i];
      off[3 - nsp + i] = c.offset[i];
    }
    const int64_t planes = y.shape[0] * y.shape[1];
    const int64_t y_plane = yd[0] * yd[1] * yd[2], s_plane = sd[0] * sd[1] * sd[2];
    // Y indices i2 in [lo2, hi2) map to scratch indices i2 + off[2] in [0, sd[2]).
    const int64_t lo2 = std::max<int64_t>(0, -off[2]);
    const int64_t hi2 = std::min<int64_t>(yd[2], sd[2] - off[2]);
    if (hi2 <= lo2) return;
    float* yp = DataAs<float>(y);
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t i0 = 0; i0 < yd[0]; ++i0) {
        const int64_t j0 = i0 + off[0];
        if (j0 < 0 || j0 >= sd[0]) continue;
        for (int64_t i1 = 0; i1 < yd[1]; ++i1) {
          const int64_t j1 = i1 + off[1];
          if (j1 < 0 || j1 >= sd[1]) continue;
          const float* src = c.scratch.data() + p * s_plane + (j0 * sd[1] + j1) * sd[2];
          float* dst = yp + p * y_plane + (i0 * yd[1] + i1) * yd[2];
          std::memcpy(dst + lo2, src + lo2 + off[2], sizeof(float) * (hi2 - lo2));
        }
      }
    }
  }

  StatusOr<CompiledDeconv> Compile(std::span<const TensorRef> in, bool has_bias) {
    using dnnl::memory;
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(ConvTransposeShape s, ComputeConvTransposeShape(attrs_, args));
    const size_t rank = in[0].shape.size();
    const size_t nsp = rank - 2;
    const int64_t g = attrs_.group;
    CompiledDeconv c;
    // Pads clamped to 0; a negative pad turns into an offset into a scratch output.
    memory::dims pad_l(nsp), pad_r(nsp), dilates(nsp);
    Shape dst_shape = {s.n, s.m};
    c.offset.assign(nsp, 0);
    for (size_t i = 0; i < nsp; ++i) {
      pad_l[i] = std::max<int64_t>(0, s.pad_begin[i]);
      pad_r[i] = std::max<int64_t>(0, s.pad_end[i]);
      dilates[i] = s.dilations[i] - 1;
      if (s.pad_begin[i] < 0 || s.pad_end[i] < 0) c.use_scratch = true;
      c.offset[i] = s.pad_begin[i] - pad_l[i];
      const int64_t reach =
          s.strides[i] * (in[0].shape[2 + i] - 1) + (s.kernel[i] - 1) * s.dilations[i] + 1;
      dst_shape.push_back(reach - pad_l[i] - pad_r[i]);
    }
    for (size_t i = 2; i < rank; ++i) {
      if (dst_shape[i] < 1) {
        c.all_bias = true;  // The pads crop away every output an input reaches.
        return c;
      }
    }
    if (c.use_scratch) {
      c.scratch_shape = dst_shape;
      c.scratch.resize(static_cast<size_t>(*NumElements(dst_shape)));
    }
    memory::dims src_dims(in[0].shape.begin(), in[0].shape.end());
    memory::dims dst_dims(dst_shape.begin(), dst_shape.end());
    // ONNX W is [C, M / g, k...]; oneDNN's deconvolution weights are [M, C, k...]
    // ([g, M / g, C / g, k...] grouped), described here by strides over W's layout.
    int64_t ksize = 1;
    for (int64_t k : s.kernel) ksize *= k;
    memory::dims w_dims, w_strides;
    const int64_t mg = s.m / g, cg = s.c / g;
    if (g == 1) {
      w_dims = {s.m, s.c};
      w_strides = {ksize, s.m * ksize};
    } else {
      w_dims = {g, mg, cg};
      w_strides = {cg * mg * ksize, ksize, mg * ksize};
    }
    {
      int64_t acc = ksize;
      for (size_t i = 0; i < nsp; ++i) {
        acc /= s.kernel[i];
        w_dims.push_back(s.kernel[i]);
        w_strides.push_back(acc);
      }
    }
    memory::dims strides(s.strides.begin(), s.strides.end());
    const auto f32 = memory::data_type::f32;
    memory::desc src_any(src_dims, f32, memory::format_tag::any);
    memory::desc w_any(w_dims, f32, memory::format_tag::any);
    memory::desc dst_any(dst_dims, f32, memory::format_tag::any);
    memory::desc user_src_md(src_dims, f32, PlainTag(rank));
    memory::desc user_w_md(w_dims, f32, w_strides);
    memory::desc user_dst_md(dst_dims, f32, PlainTag(rank));
    memory::desc bias_md({s.m}, f32, memory::format_tag::a);
    auto desc = has_bias
                    ? dnnl::deconvolution_forward::desc(
                          dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                          src_any, w_any, bias_md, dst_any, strides, dilates, pad_l, pad_r)
                    : dnnl::deconvolution_forward::desc(
                          dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                          src_any, w_any, dst_any, strides, dilates, pad_l, pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, cache_.engine());
    c.deconv = MakeDnnlConvPrimitive<dnnl::deconvolution_forward>(
        pd, cache_.engine(), user_src_md, user_w_md, user_dst_md, has_bias, bias_md);
    return c;
  }

  ConvTransposeAttrs attrs_;
  std::vector<float> patches_;  // RunPatchScatter's GEMM result.
  DnnlConvCache<CompiledDeconv> cache_;
};

}  // namespace

// Declared in kernels/dnnl_epilogue.h.
void AppendActivation(dnnl::post_ops& po, const ConvEpilogue& e) {
  using alg = dnnl::algorithm;
  switch (e.activation) {
    case ConvActivation::kNone:
      return;
    case ConvActivation::kRelu:
      return po.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f);
    case ConvActivation::kLeakyRelu:
      return po.append_eltwise(1.f, alg::eltwise_relu, e.alpha, 0.f);
    case ConvActivation::kClip:
      // ONNX Clip with min > max gives max everywhere: clip(max, max).
      return po.append_eltwise(1.f, alg::eltwise_clip, e.alpha > e.beta ? e.beta : e.alpha, e.beta);
    case ConvActivation::kSigmoid:
      return po.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f);
    case ConvActivation::kTanh:
      return po.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f);
    case ConvActivation::kHardSigmoid:
      po.append_eltwise(1.f, alg::eltwise_linear, e.alpha, e.beta);
      return po.append_eltwise(1.f, alg::eltwise_clip, 0.f, 1.f);
    case ConvActivation::kHardSwish:
      return po.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f);
  }
}

StatusOr<ConvEpilogue> ParseConvEpilogue(std::string_view op, const Attributes& attrs) {
  struct Kind {
    std::string_view name;
    ConvActivation activation;
    size_t params;
  };
  static constexpr Kind kKinds[] = {
      {"", ConvActivation::kNone, 0},          {"Relu", ConvActivation::kRelu, 0},
      {"LeakyRelu", ConvActivation::kLeakyRelu, 1}, {"Clip", ConvActivation::kClip, 2},
      {"Sigmoid", ConvActivation::kSigmoid, 0},    {"Tanh", ConvActivation::kTanh, 0},
      {"HardSigmoid", ConvActivation::kHardSigmoid, 2}, {"HardSwish", ConvActivation::kHardSwish, 0},
  };
  StatusOr<std::string> name = attrs.String("activation", "");
  if (!name.ok()) return OpError(op, name.status().message());
  StatusOr<std::vector<float>> params = attrs.Floats("activation_params", {});
  if (!params.ok()) return OpError(op, params.status().message());
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds) {
    if (k.name == *name) kind = &k;
  }
  if (!kind) {
    return OpError(op, "unknown activation '" + *name +
                           "' (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish or none)");
  }
  if (params->size() != kind->params) {
    return OpError(op, "activation " + (name->empty() ? std::string("none") : *name) + " takes " +
                           std::to_string(kind->params) + " activation_params, got " +
                           std::to_string(params->size()));
  }
  ConvEpilogue e;
  e.activation = kind->activation;
  if (!params->empty()) e.alpha = (*params)[0];
  if (params->size() > 1) e.beta = (*params)[1];
  return e;
}

Status AddConvOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(ConvDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(FusedConvDef()));
  return registry.AddOp(ConvTransposeDef());
}

Status AddConvCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ConvKernel>(
      registry, ConvDef(), [](const Attributes& attrs) { return ParseConvAttrs(attrs).status(); }));
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<ConvKernel>(registry, FusedConvDef(), [](const Attributes& attrs) {
    return ParseConvAttrs(attrs, kFusedConv).status();
  }));
  return AddValidatedKernel<ConvTransposeKernel>(
      registry, ConvTransposeDef(),
      [](const Attributes& attrs) { return ParseConvTransposeAttrs(attrs).status(); });
}

}  // namespace remex::kernels::internal
