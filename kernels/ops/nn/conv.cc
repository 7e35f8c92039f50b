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
//   The CPU kernel is oneDNN's convolution_forward. A 2-D 3x3 stride-1 convolution
//   without dilation or groups runs Winograd's algorithm (convolution_winograd: fewer
//   multiplications, results within a few float32 ulps of the direct sums' magnitude)
//   where both channel counts are at least 64, the call takes at least 2^26
//   multiply-adds and oneDNN has it on the CPU (AVX-512); every other one the direct
//   algorithm. Internal attribute `onednn_algo` (set per
//   node by `remex tune`, docs/tuning.md): -1 (absent) that choice, 0 direct, 1
//   Winograd wherever the geometry allows and oneDNN has it (else direct); out of
//   [-1, 1] INVALID_ARGUMENT.
//
// FusedConv (internal; the compiler's conv-epilogue fusion creates it, never ONNX):
//   Y = activation(Conv(X, W, B) + Z), Conv's inputs, attributes (`layout` included)
//   and output, plus
//     Z  optional 4th input, X's dtype and exactly Y's shape (in the node's layout; no
//        broadcasting), INVALID_ARGUMENT "FusedConv: ..." otherwise;
//     activation         "" / absent (none), "Relu", "LeakyRelu", "Clip", "Sigmoid",
//                        "Tanh", "HardSigmoid", "HardSwish", "Swish", "Gelu"
//                        (INVALID_ARGUMENT otherwise);
//     activation_params  LeakyRelu [alpha], Clip [min, max], HardSigmoid [alpha, beta],
//                        Swish [alpha], the others [] (INVALID_ARGUMENT for another count).
//   Each activation is its ONNX operator's (kernels/conv_epilogue.h: Relu-14,
//   LeakyRelu-6, Clip-13, Sigmoid-13, Tanh-13, HardSigmoid-6, HardSwish-14, Swish-24,
//   Gelu-20 with approximate "none").
//   The CPU kernel is Conv's oneDNN convolution with post-ops: Z through a sum post-op
//   (Z is copied into Y, or reordered into the primitive's blocked Y, first; no copy
//   where the code generator gave Y Z's buffer: OpTraits::output_overwrites_input), then the
//   activation as eltwise post-ops (relu with alpha, clip, logistic, tanh, hardswish
//   = x * relu6(x + 3) / 6, swish with alpha, gelu_erf, and HardSigmoid as linear(alpha, beta)
//   then clip(0, 1)).
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
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "kernels/ops/nn/conv_common.h"
#include "kernels/conv_epilogue.h"
#include "kernels/cpu_features.h"
#include "kernels/dnnl_epilogue.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/prepack.h"

namespace remex::kernels::internal {

StatusOr<ConvDims> ConvDimsOf(std::string_view op, const WindowAttrs& window, int64_t g, const Shape& x,
                              const Shape& w) {
  if (x.size() < 3 || x.size() > 5) {
    return OpError(op, "X must have rank 3 to 5 (1-D to 3-D convolution), got " + ShapeToString(x));
  }
  if (w.size() != x.size()) {
    return OpError(op, "W " + ShapeToString(w) + " must have the rank of X " + ShapeToString(x));
  }
  ConvDims s;
  s.n = x[0];
  s.c = x[1];
  s.m = w[0];
  s.group = g;
  if (s.c % g != 0) {
    return OpError(op, "input channels " + std::to_string(s.c) + " are not divisible by group " + std::to_string(g));
  }
  if (w[1] != s.c / g) {
    return OpError(op, "W " + ShapeToString(w) + " expects " + std::to_string(w[1] * g) +
                           " input channels with group " + std::to_string(g) + ", X has " + std::to_string(s.c));
  }
  if (s.m % g != 0) {
    return OpError(op, "output channels " + std::to_string(s.m) + " are not divisible by group " + std::to_string(g));
  }
  std::span<const int64_t> kernel(w.data() + 2, w.size() - 2);
  if (!window.kernel_shape.empty() &&
      !std::equal(kernel.begin(), kernel.end(), window.kernel_shape.begin(), window.kernel_shape.end())) {
    return OpError(op, "kernel_shape does not match W " + ShapeToString(w));
  }
  std::span<const int64_t> spatial(x.data() + 2, x.size() - 2);
  REMEX_ASSIGN_OR_RETURN(s.geometry, ComputeWindowGeometry(op, window, spatial, kernel));
  s.output = {s.n, s.m};
  s.output.insert(s.output.end(), s.geometry.output.begin(), s.geometry.output.end());
  return s;
}

namespace {

constexpr std::string_view kConv = "Conv";
constexpr std::string_view kFusedConv = "FusedConv";

struct ConvAttrs {
  std::string_view op = kConv;  // "Conv" or "FusedConv", for error messages.
  WindowAttrs window;
  int64_t group = 1;
  bool channels_last = false;  // `layout` "NHWC".
  ConvEpilogue epilogue;       // FusedConv only; none for Conv.
  // The internal attribute `onednn_algo` (`remex tune` sets it per node): -1 (absent)
  // the kernel's own choice, 0 convolution_direct, 1 convolution_winograd where oneDNN
  // has it for the call (else direct).
  int64_t onednn_algo = -1;
};

// Conv's attributes, and FusedConv's epilogue too when `op` is "FusedConv".
StatusOr<ConvAttrs> ParseConvAttrs(const Attributes& attrs, std::string_view op = kConv) {
  ConvAttrs c;
  c.op = op == kFusedConv ? kFusedConv : kConv;
  REMEX_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(c.op, attrs, /*with_ceil_mode=*/false));
  REMEX_ASSIGN_OR_RETURN(c.group, ParseGroup(c.op, attrs));
  REMEX_ASSIGN_OR_RETURN(c.channels_last, ParseChannelsLast(c.op, attrs));
  StatusOr<int64_t> algo = attrs.Int("onednn_algo", -1);
  if (!algo.ok()) return OpError(c.op, algo.status().message());
  if (*algo < -1 || *algo >= kOnednnConvAlgoCount) {
    return OpError(c.op, "onednn_algo must be in [-1, " + std::to_string(kOnednnConvAlgoCount - 1) + "], got " +
                             std::to_string(*algo));
  }
  c.onednn_algo = *algo;
  if (c.op == kFusedConv) {
    REMEX_ASSIGN_OR_RETURN(c.epilogue, ParseConvEpilogue(c.op, attrs));
  }
  return c;
}

// Validated geometry of one Conv call.
using ConvShape = ConvDims;

// From how many input and output channels, and multiply-adds, a 3x3 stride-1
// convolution takes Winograd's algorithm by default. Measured on a 2-core AVX-512 CPU
// (oneDNN 2.6, NHWC X and Y reordered around it, caches flushed between calls;
// docs/benchmarks.md): at ResNet-50's 115 M multiply-adds (56x56x64 to 7x7x512)
// 0.43-0.60 ms against 0.59-0.73 ms direct; from 20 to 60 M sometimes faster,
// sometimes slower; slower at 5 M (12x12x64) and at 128 -> 32 channels (DenseNet's
// growth) whatever the size. `remex tune` decides per node where this does not.
constexpr int64_t kWinogradMinChannels = 64;
constexpr int64_t kWinogradMinMacs = int64_t{1} << 26;

// Whether `s` is a convolution oneDNN's Winograd algorithm computes: 2-D, 3x3 kernel,
// stride 1, no dilation, one group.
bool WinogradGeometry(const ConvShape& s) {
  const WindowGeometry& g = s.geometry;
  if (s.group != 1 || g.kernel.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (g.kernel[i] != 3 || g.strides[i] != 1 || g.dilations[i] != 1) return false;
  }
  return true;
}

// Shapes in `s` are channels-first (ONNX's) whatever the layout; `output` is in the
// node's layout.
StatusOr<ConvShape> ComputeConvShape(const ConvAttrs& attrs, std::span<const ShapeFnArg> in) {
  const std::string_view op = attrs.op;
  ShapeFnArg x = in[0];
  if (attrs.channels_last) x.shape = ToChannelsFirst(x.shape);
  const ShapeFnArg& w = in[1];
  REMEX_RETURN_IF_ERROR(CheckFloat32(op, x, w));
  REMEX_ASSIGN_OR_RETURN(ConvShape s, ConvDimsOf(op, attrs.window, attrs.group, x.shape, w.shape));
  REMEX_RETURN_IF_ERROR(CheckBias(op, in, s.m));
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

// cuDNN's algorithm and math type per node (kernels/ops/nn/cuda/conv.cc), and oneDNN's
// algorithm (the CPU kernel below).
std::vector<TunableAttr> ConvTunables() {
  return {{"cudnn_algo", -1, kCudnnFwdAlgoCount - 1},
          {"cudnn_math", -1, kCudnnMathTypeCount - 1},
          {"onednn_algo", -1, kOnednnConvAlgoCount - 1}};
}

OpDef ConvDef() {
  OpDef def;
  def.name = std::string(kConv);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferConv;
  def.traits.tunable = ConvTunables();
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
  def.traits.tunable = ConvTunables();
  // Y over Z's buffer: oneDNN's sum post-op adds Y to what the buffer holds, and the
  // CUDA kernel reads Z from a copy then.
  def.traits.output_overwrites_input = 3;
  return def;
}


// Y = activation(Y + Z) elementwise (Z may be null), for outputs no convolution
// reaches (they hold the bias).
// p[0, n) = activation(p[0, n)), one loop per activation (so that each vectorises).
REMEX_CPU_CLONES void ActivateRange(ConvActivation kind, float* p, int64_t n, float alpha, float beta) {
  switch (kind) {
#define REMEX_ACTIVATE(K)                                                                        \
  case ConvActivation::K:                                                                        \
    for (int64_t i = 0; i < n; ++i) p[i] = ApplyConvActivation(ConvActivation::K, p[i], alpha, beta); \
    return;
    REMEX_ACTIVATE(kRelu)
    REMEX_ACTIVATE(kLeakyRelu)
    REMEX_ACTIVATE(kClip)
    REMEX_ACTIVATE(kSigmoid)
    REMEX_ACTIVATE(kTanh)
    REMEX_ACTIVATE(kHardSigmoid)
    REMEX_ACTIVATE(kHardSwish)
    REMEX_ACTIVATE(kSwish)
    REMEX_ACTIVATE(kGelu)
#undef REMEX_ACTIVATE
    case ConvActivation::kNone:
      return;
  }
}

// y = activation(y) over float32 Y, split over the compute threads.
void ApplyActivation(const ConvEpilogue& e, const TensorRef& y) {
  float* const p = DataAs<float>(y);
  const int64_t n = NumElements(y.shape).value_or(0);
  if (e.activation == ConvActivation::kNone) return;
  ParallelFor(n, 16384, [&](int64_t b, int64_t end, int) { ActivateRange(e.activation, p + b, end - b, e.alpha, e.beta); });
}

void ApplyEpilogue(const ConvEpilogue& e, const TensorRef& y, const float* z) {
  float* p = DataAs<float>(y);
  const int64_t n = NumElements(y.shape).value_or(0);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = ApplyConvActivation(e.activation, z ? p[i] + z[i] : p[i], e.alpha, e.beta);
  }
}

// Conv, and FusedConv (`def.name` "FusedConv": the epilogue attributes and Z are read).
class ConvKernel final : public ValidatedKernel, public ConstantPrepacker {
 public:
  // Float16 constants (W, B) widened to float32 at the load.
  void Prepack(size_t, const TensorRef& constant) override { (void)f32_constants_.Prepack(constant); }
  static StatusOr<std::unique_ptr<ConvKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(ConvAttrs parsed, ParseConvAttrs(attrs, def.name));
    return std::make_unique<ConvKernel>(def, attrs, std::move(parsed));
  }
  ConvKernel(const OpDef& def, const Attributes& attrs, ConvAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      return RunAsFloat32(
          in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); },
          &f32_constants_);
    }
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    if (NumElements(in[0].shape).value_or(0) == 0 || NumElements(in[1].shape).value_or(0) == 0) {
      // No input channel (or only padding) reaches the output: Y holds the bias. Z read
      // from a copy where Y is written over it (OpTraits::output_overwrites_input).
      const float* bias = in.size() > 2 && in[2].present() ? DataAs<const float>(in[2]) : nullptr;
      std::vector<float> z_copy;
      const float* z = HasZ(in) ? DataAs<const float>(in[3]) : nullptr;
      if (z != nullptr && in[3].data == out[0].data) {
        z_copy.assign(z, z + NumElements(out[0].shape).value_or(0));
        z = z_copy.data();
      }
      if (attrs_.channels_last) {
        FillBiasChannelsLast(out[0], bias);
      } else {
        FillBias(out[0], bias);
      }
      if (attrs_.op == kFusedConv) ApplyEpilogue(attrs_.epilogue, out[0], z);
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
    ExecuteDnnlConv(*c, cache_.stream(), in[0].data, in[1], out[0].data,
                    has_bias ? in[2].data : nullptr, has_z ? in[3].data : nullptr);
    if (c->activation_after) ApplyActivation(attrs_.epilogue, out[0]);
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
    memory::desc w_any(w_dims, f32, memory::format_tag::any);
    memory::desc user_src_md(src_dims, f32, user_tag);
    memory::desc user_w_md(w_dims, f32, w_tag);
    memory::desc user_dst_md(dst_dims, f32, user_tag);
    memory::desc bias_md({s.m}, f32, memory::format_tag::a);
    // The descriptor for `algorithm` with X and Y in layout `tag`.
    auto make_desc = [&](dnnl::algorithm algorithm, memory::format_tag tag) {
      memory::desc src_any(src_dims, f32, tag);
      memory::desc dst_any(dst_dims, f32, tag);
      return has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src_any,
                                                        w_any, bias_md, dst_any, strides, dilates, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src_any,
                                                        w_any, dst_any, strides, dilates, pad_l, pad_r);
    };
    dnnl::post_ops post_ops;
    if (has_z) post_ops.append_sum(1.f);
    // oneDNN's GEMM-based (pointwise, plain layout) convolution applies eltwise post-ops
    // element by element, several times slower than the convolution itself at small
    // sizes: the activation runs after it instead (ApplyActivation).
    bool activation_after = pointwise && !attrs_.channels_last;
    dnnl::primitive_attr pattr, pattr_without_activation;
    pattr_without_activation.set_post_ops(post_ops);
    if (!activation_after) AppendActivation(post_ops, attrs_.epilogue);
    pattr.set_post_ops(post_ops);
    // Small convolutions run on one thread: forking the team costs more than it saves.
    const int64_t macs = *NumElements(s.output) * (s.c / g) * (*NumElements(in[1].shape) / (s.m * (s.c / g)));
    const int threads = ThreadsForMacs(macs);
    ScopedComputeThreads scoped(threads);
    // Winograd's minimal filtering (Lavin and Gray, "Fast Algorithms for Convolutional
    // Neural Networks", 2015; oneDNN's F(2x2, 3x3) and F(4x4, 3x3) on AVX-512) for a
    // 3x3 stride-1 convolution: fewer multiplications, X and Y reordered into its
    // blocked layout and back. By default from kWinogradMinChannels channels and
    // kWinogradMinMacs multiply-adds; with onednn_algo 1 wherever the geometry allows;
    // oneDNN's direct convolution where oneDNN has no Winograd implementation for the call.
    // An activation its Winograd kernels do not take as a post-op (Swish: a detector's
    // SiLU) runs after it, over Y (ApplyActivation).
    std::optional<dnnl::convolution_forward::primitive_desc> pd;
    const bool winograd_by_default =
        s.c >= kWinogradMinChannels && s.m >= kWinogradMinChannels && macs >= kWinogradMinMacs;
    if (CpuHasWinogradConvolutions() && WinogradGeometry(s) &&
        (attrs_.onednn_algo == 1 || (attrs_.onednn_algo == -1 && winograd_by_default))) {
      const auto desc = make_desc(dnnl::algorithm::convolution_winograd, memory::format_tag::any);
      try {
        pd.emplace(desc, pattr, cache_.engine());
      } catch (const dnnl::error&) {
        // A throwing emplace leaves pd empty: without the activation, or direct, below.
      }
      if (!pd && !activation_after && attrs_.epilogue.activation != ConvActivation::kNone) {
        try {
          pd.emplace(desc, pattr_without_activation, cache_.engine());
          activation_after = true;
        } catch (const dnnl::error&) {
          // Unimplemented here (pd stays empty): the direct convolution below.
        }
      }
    }
    if (!pd) pd.emplace(make_desc(dnnl::algorithm::convolution_direct, act_tag), pattr, cache_.engine());
    DnnlConvPrimitive c = MakeDnnlConvPrimitive<dnnl::convolution_forward>(
        *pd, cache_.engine(), user_src_md, user_w_md, user_dst_md, has_bias, bias_md);
    c.threads = threads;
    c.activation_after = activation_after && attrs_.epilogue.activation != ConvActivation::kNone;
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
  Float32Constants f32_constants_;  // float16 weights, widened once.
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
    case ConvActivation::kSwish:  // x / (1 + exp(-alpha * x))
      return po.append_eltwise(1.f, alg::eltwise_swish, e.alpha, 0.f);
    case ConvActivation::kGelu:  // x * (1 + erf(x / sqrt(2))) / 2
      return po.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f);
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
      {"Swish", ConvActivation::kSwish, 1},         {"Gelu", ConvActivation::kGelu, 0},
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
                           "' (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish, Gelu or none)");
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
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ConvKernel>(registry, "Conv"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<ConvKernel>(registry, kFusedConv));
  return AddConvTransposeCpuKernel(registry);
}

}  // namespace remex::kernels::internal
