// CUDA kernels: Conv, FusedConv and ConvTranspose on cuDNN 9's convolution API
// (cudnnConvolutionForward, cudnnConvolutionBiasActivationForward,
// cudnnConvolutionBackwardData). Semantics as the CPU kernels (kernels/ops/nn/conv.cc), which
// follow ONNX Conv and ConvTranspose (opsets 1, 11): group, strides, dilations, pads,
// auto_pad, the optional bias B [M]; Conv's internal `layout` attribute (NCHW, or NHWC:
// X and Y channels-last, W and B in their ONNX layouts); ConvTranspose's output_padding
// and output_shape. 1-D, 2-D and 3-D.
//
// FusedConv (Remex's internal op, kernels/ops/nn/conv.cc): Y = activation(Conv(X, W, B) + Z),
// Conv's attributes plus `activation` / `activation_params` (parsed by
// ParseConvEpilogue; each activation is its ONNX operator's, kernels/conv_epilogue.h)
// and the optional residual Z (input 3, Y's shape and layout). It shares Conv's kernel
// class and plan cache. With B and activation none or Relu it is one
// cudnnConvolutionBiasActivationForward (y = act(conv(x) + alpha2 * z + bias); alpha2 =
// 1 with Z, 0 without, z then being Y itself; identity requires the
// IMPLICIT_PRECOMP_GEMM algorithm, so that case uses it whatever the heuristic picks).
// Every other case, and any case cuDNN refuses (CUDNN_STATUS_NOT_SUPPORTED or one of
// its specific codes such as CUDNN_STATUS_NOT_SUPPORTED_SHAPE, at plan time or on the
// first call, after which the plan stays unfused), is
// cudnnConvolutionForward into Y followed by one epilogue kernel over Y (bias, Z and
// activation in one pass, kernels/cuda/epilogue_impl.cu). float16 there: the convolution's result
// is rounded to float16 by cuDNN as it writes Y, the epilogue then computes in float32
// and rounds once on store.
//
// dtypes: float32 (FMA math: no TF32, to stay within the CPU kernel's tolerances) and
// float16 (tensor-core math, CUDNN_TENSOR_OP_MATH, accumulating in float32). Conv's
// and ConvTranspose's OpDefs accept float32 only today, so float16 calls are checked
// against the shape function with their dtypes read as float32.
//
// Per kernel instance: one cudnnHandle bound to the context's stream, and per (X shape,
// W shape, bias, dtype) a plan (descriptors and the algorithm) built at the first call.
// The algorithm is cuDNN's heuristic pick (cudnnGet*Algorithm_v7), or the fastest
// measured one (cudnnFind*Algorithm, which runs and synchronizes once per plan) when
// the environment variable REMEX_CUDNN_EXHAUSTIVE=1 is set at kernel creation. Conv
// and FusedConv take two internal attributes that `remex tune` sets per node
// (docs/tuning.md): `cudnn_algo`, a cudnnConvolutionFwdAlgo_t run whenever cuDNN supports
// it for the call (its workspace query succeeds; otherwise the heuristic's pick), and
// `cudnn_math`, a cudnnMathType_t in place of the dtype's default below; an index out of
// range is INVALID_ARGUMENT when the kernel is created.
// Workspace and scratch buffers come from the context's provider (the device server's
// caching allocator) and are held for one call; without a provider they are
// stream-ordered cudaMallocAsync blocks (StreamWorkspace). The bias is added by
// cudnnAddTensor after the convolution.
//
// cuDNN pads symmetrically. Conv with asymmetric pads copies X into a zero-filled
// padded buffer (cudnnTransformTensor) and runs unpadded. ConvTranspose whose pads are
// asymmetric or negative computes the unpadded result into a scratch buffer and copies
// the part inside Y into a zero-filled Y.

// Compiled in every CUDA build so that the family table's row has its function; the
// kernels exist only where cuDNN was found (REMEX_HAVE_CUDNN), else AddConvCudaKernels
// registers none.
#if REMEX_HAVE_CUDNN

#include <cudnn.h>

#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/nn/cuda/cudnn_common.h"

namespace remex::kernels::cuda {
namespace {

constexpr std::string_view kConv = "Conv";
constexpr std::string_view kFusedConv = "FusedConv";
constexpr std::string_view kConvTranspose = "ConvTranspose";

// ---------------------------------------------------------------------------
// Conv.

static_assert(kCudnnFwdAlgoCount == CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "Conv's tunable cudnn_algo range");
static_assert(kCudnnMathTypeCount == CUDNN_FMA_MATH + 1, "Conv's tunable cudnn_math range");

struct ConvAttrs {
  internal::WindowAttrs window;
  int64_t group = 1;
  // The internal attributes `remex tune` sets: `cudnn_algo` (a cudnnConvolutionFwdAlgo_t,
  // run when cuDNN supports it for the call's shapes, else the heuristic's pick) and
  // `cudnn_math` (a cudnnMathType_t in place of the dtype's default); -1 when absent.
  int64_t algo = -1;
  int64_t math = -1;
  bool channels_last = false;
  bool fused = false;               // FusedConv: `epilogue` and Z apply.
  internal::ConvEpilogue epilogue;  // FusedConv's activation.
};

// Conv's attributes as `op` ("Conv" or "FusedConv") reads them, FusedConv's epilogue too.
StatusOr<ConvAttrs> ParseConvAttrsOf(std::string_view op, const Attributes& attrs) {
  ConvAttrs c;
  REMEX_ASSIGN_OR_RETURN(c.window, internal::ParseWindowAttrs(op, attrs, /*with_ceil_mode=*/false));
  StatusOr<int64_t> group = attrs.Int("group", 1);
  if (!group.ok()) return internal::OpError(op, group.status().message());
  if (*group < 1) return internal::OpError(op, "group must be positive");
  c.group = *group;
  StatusOr<int64_t> algo = attrs.Int("cudnn_algo", -1);
  if (!algo.ok()) return internal::OpError(op, algo.status().message());
  if (*algo < -1 || *algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) {
    return internal::OpError(op, "cudnn_algo must be in [-1, " + std::to_string(CUDNN_CONVOLUTION_FWD_ALGO_COUNT - 1) +
                                     "], got " + std::to_string(*algo));
  }
  c.algo = *algo;
  StatusOr<int64_t> math = attrs.Int("cudnn_math", -1);
  if (!math.ok()) return internal::OpError(op, math.status().message());
  if (*math < -1 || *math > CUDNN_FMA_MATH) {
    return internal::OpError(op, "cudnn_math must be in [-1, " + std::to_string(CUDNN_FMA_MATH) + "], got " +
                                     std::to_string(*math));
  }
  c.math = *math;
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok()) return internal::OpError(op, layout.status().message());
  if (*layout != "NCHW" && *layout != "NHWC") {
    return internal::OpError(op, "unknown layout '" + *layout + "' (NCHW or NHWC)");
  }
  c.channels_last = *layout == "NHWC";
  if (op == kFusedConv) {
    c.fused = true;
    REMEX_ASSIGN_OR_RETURN(c.epilogue, internal::ParseConvEpilogue(op, attrs));
  }
  return c;
}

StatusOr<ConvAttrs> ParseConvAttrs(const Attributes& attrs) { return ParseConvAttrsOf(kConv, attrs); }
StatusOr<ConvAttrs> ParseFusedConvAttrs(const Attributes& attrs) { return ParseConvAttrsOf(kFusedConv, attrs); }

// [N, D.., C] -> [N, C, D..].
Shape ToChannelsFirst(const Shape& s) {
  Shape out = {s[0], s.back()};
  out.insert(out.end(), s.begin() + 1, s.end() - 1);
  return out;
}

struct ConvPlan {
  bool all_bias = false;  // No input channel reaches Y: Y = bias.
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  // Asymmetric pads: X is copied into the interior of a zero-filled buffer described by
  // `x` (its extents padded), `interior` views X's place in it.
  bool pad_input = false;
  TensorDesc x_in, interior;
  size_t padded_bytes = 0;
  int64_t interior_offset = 0;  // Elements.
  // FusedConv: the epilogue's channel count and stride (see LaunchConvEpilogue), and
  // cudnnConvolutionBiasActivationForward's setup where it computes the whole op.
  // `fused` is cleared (for good) when cuDNN refuses the fused call.
  int64_t channels = 0, inner = 1;
  mutable bool fused = false;
  ActivationDesc activation;
  cudnnConvolutionFwdAlgo_t fused_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t fused_workspace = 0;
};

class ConvCudaKernel final : public CudnnKernel<ConvPlan> {
 public:
  ConvCudaKernel(const OpDef& def, Attributes attrs, ConvAttrs conv, CudaKernelContext context)
      : CudnnKernel(def, std::move(attrs), context), attrs_(std::move(conv)) {}

 protected:
  StatusOr<std::unique_ptr<ConvPlan>> Build(std::span<const TensorRef> in, const TensorRef& out, bool has_bias,
                                            const TypeInfo& given) override {
    auto plan = std::make_unique<ConvPlan>();
    TypeInfo type = given;
    if (attrs_.math >= 0) type.math = static_cast<cudnnMathType_t>(attrs_.math);
    const Shape x_cf = attrs_.channels_last ? ToChannelsFirst(in[0].shape) : in[0].shape;
    const Shape y_cf = attrs_.channels_last ? ToChannelsFirst(out.shape) : out.shape;
    const Shape& w = in[1].shape;
    const size_t nsp = x_cf.size() - 2;
    const Layout y_layout = DenseLayout(y_cf, attrs_.channels_last);
    REMEX_ASSIGN_OR_RETURN(plan->y, MakeTensorDesc(op(), type.data, y_layout));
    REMEX_ASSIGN_OR_RETURN(plan->bias, MakeBiasDesc(op(), type.data, y_cf[1], y_layout.dims.size()));
    plan->channels = y_cf[1];
    if (!attrs_.channels_last) {
      for (size_t i = 2; i < y_cf.size(); ++i) plan->inner *= y_cf[i];
    }
    if (NumElements(x_cf).value_or(0) == 0 || NumElements(w).value_or(0) == 0) {
      plan->all_bias = true;
      return plan;
    }
    std::span<const int64_t> spatial(x_cf.data() + 2, nsp);
    std::span<const int64_t> kernel(w.data() + 2, nsp);
    REMEX_ASSIGN_OR_RETURN(internal::WindowGeometry g,
                           internal::ComputeWindowGeometry(op(), attrs_.window, spatial, kernel));
    const Layout x_layout = DenseLayout(x_cf, attrs_.channels_last);
    REMEX_ASSIGN_OR_RETURN(plan->x_in, MakeTensorDesc(op(), type.data, x_layout));
    std::vector<int64_t> pads = g.pad_begin;
    plan->pad_input = g.pad_begin != g.pad_end;
    if (plan->pad_input) {
      Shape padded = x_cf;
      for (size_t i = 0; i < nsp; ++i) padded[2 + i] += g.pad_begin[i] + g.pad_end[i];
      const Layout p_layout = DenseLayout(padded, attrs_.channels_last);
      REMEX_ASSIGN_OR_RETURN(plan->x, MakeTensorDesc(op(), type.data, p_layout));
      Layout interior{x_layout.dims, p_layout.strides};
      REMEX_ASSIGN_OR_RETURN(plan->interior, MakeTensorDesc(op(), type.data, interior));
      for (size_t i = 0; i < nsp; ++i) plan->interior_offset += g.pad_begin[i] * p_layout.strides[SpatialIndex(nsp, i)];
      plan->padded_bytes = static_cast<size_t>(*NumElements(padded)) * type.size;
      pads.assign(nsp, 0);
    } else {
      REMEX_ASSIGN_OR_RETURN(plan->x, MakeTensorDesc(op(), type.data, x_layout));
    }
    REMEX_ASSIGN_OR_RETURN(plan->w, MakeFilterDesc(op(), type.data, w));
    REMEX_ASSIGN_OR_RETURN(plan->conv, MakeConvDesc(op(), type, pads, g.strides, g.dilations, attrs_.group));
    if (attrs_.algo >= 0) {
      // The node's algorithm where cuDNN supports it here, else the heuristic's below.
      const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(attrs_.algo);
      const cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(handle(), plan->x.get(), plan->w.get(),
                                                                       plan->conv.get(), plan->y.get(), algo,
                                                                       &plan->workspace);
      if (st == CUDNN_STATUS_SUCCESS) {
        plan->algo = algo;
        if (attrs_.fused) REMEX_RETURN_IF_ERROR(PlanFused(*plan, has_bias));
        return plan;
      }
      if (!IsNotSupported(st)) REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionForwardWorkspaceSize", st));
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    if (exhaustive()) {
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnFindConvolutionForwardAlgorithm",
                                       cudnnFindConvolutionForwardAlgorithm(
                                           handle(), plan->x.get(), plan->w.get(), plan->conv.get(), plan->y.get(),
                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf)));
    } else {
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionForwardAlgorithm_v7",
                                       cudnnGetConvolutionForwardAlgorithm_v7(
                                           handle(), plan->x.get(), plan->w.get(), plan->conv.get(), plan->y.get(),
                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf)));
    }
    REMEX_ASSIGN_OR_RETURN(cudnnConvolutionFwdAlgoPerf_t best, FirstUsable(op(), perf, count));
    plan->algo = best.algo;
    REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionForwardWorkspaceSize",
                                     cudnnGetConvolutionForwardWorkspaceSize(handle(), plan->x.get(), plan->w.get(),
                                                                             plan->conv.get(), plan->y.get(),
                                                                             plan->algo, &plan->workspace)));
    if (attrs_.fused) REMEX_RETURN_IF_ERROR(PlanFused(*plan, has_bias));
    return plan;
  }

  // Sets `plan` up for cudnnConvolutionBiasActivationForward where cuDNN's legacy API
  // covers FusedConv: a bias, and activation none (identity, which needs the
  // IMPLICIT_PRECOMP_GEMM algorithm) or Relu (the heuristic's algorithm). Leaves it
  // unfused otherwise, or when cuDNN does not support that algorithm here.
  Status PlanFused(ConvPlan& plan, bool has_bias) {
    const ConvActivation kind = attrs_.epilogue.activation;
    if (!has_bias || (kind != ConvActivation::kNone && kind != ConvActivation::kRelu)) return OkStatus();
    plan.fused_algo = plan.algo;
    plan.fused_workspace = plan.workspace;
    if (kind == ConvActivation::kNone) {
      plan.fused_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      const cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(
          handle(), plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(), plan.fused_algo, &plan.fused_workspace);
      if (IsNotSupported(st)) return OkStatus();
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionForwardWorkspaceSize", st));
    }
    cudnnActivationDescriptor_t a = nullptr;
    REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnCreateActivationDescriptor", cudnnCreateActivationDescriptor(&a)));
    plan.activation.reset(a);
    // NaN propagates, as the CPU's Relu (x < 0 ? 0 : x) lets it.
    REMEX_RETURN_IF_ERROR(CudnnCheck(
        op(), "cudnnSetActivationDescriptor",
        cudnnSetActivationDescriptor(
            a, kind == ConvActivation::kRelu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
            CUDNN_PROPAGATE_NAN, 0.0)));
    plan.fused = true;
    return OkStatus();
  }

  // FusedConv's epilogue over Y (bias when `bias`, Z when `z`, then the activation).
  Status Epilogue(const ConvPlan& plan, const TensorRef& out, const void* bias, const void* z, const TypeInfo& type) {
    const internal::ConvEpilogue& e = attrs_.epilogue;
    return CudaCheck(op(), "conv epilogue launch",
                     LaunchConvEpilogue(type.data == CUDNN_DATA_HALF, out.data, bias, z, *NumElements(out.shape),
                                        plan.channels, plan.inner, e.activation, e.alpha, e.beta, stream()));
  }

  Status Run(const ConvPlan& plan, std::span<const TensorRef> in, const TensorRef& out, bool has_bias,
             const TypeInfo& type) override {
    const void* bias = has_bias ? in[2].data : nullptr;
    const void* z = attrs_.fused && in.size() > 3 && in[3].present() ? in[3].data : nullptr;
    const bool epilogue = attrs_.fused && (z || attrs_.epilogue.activation != ConvActivation::kNone);
    // Y written over Z's buffer (OpTraits::output_overwrites_input): Z read from a copy,
    // as every path below writes Y before its epilogue reads Z.
    StreamWorkspace z_copy(op(), stream(), provider());
    if (z != nullptr && z == out.data) {
      const size_t bytes = static_cast<size_t>(*NumElements(out.shape)) * type.size;
      REMEX_ASSIGN_OR_RETURN(void* buf, z_copy.Allocate(bytes));
      REMEX_RETURN_IF_ERROR(
          CudaCheck(op(), "cudaMemcpyAsync", cudaMemcpyAsync(buf, z, bytes, cudaMemcpyDeviceToDevice, stream())));
      z = buf;
    }
    if (plan.all_bias) {
      REMEX_RETURN_IF_ERROR(FillBias(op(), handle(), plan.y.get(), out.data, plan.bias.get(), bias));
      return epilogue ? Epilogue(plan, out, nullptr, z, type) : OkStatus();
    }
    StreamWorkspace padded(op(), stream(), provider());
    StreamWorkspace workspace(op(), stream(), provider());
    const void* x = in[0].data;
    if (plan.pad_input) {
      REMEX_ASSIGN_OR_RETURN(void* buf, padded.Allocate(plan.padded_bytes));
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnSetTensor", cudnnSetTensor(handle(), plan.x.get(), buf, &kZeroBits)));
      void* interior = static_cast<char*>(buf) + plan.interior_offset * static_cast<int64_t>(type.size);
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnTransformTensor",
                                       cudnnTransformTensor(handle(), &kOne, plan.x_in.get(), x, &kZero,
                                                            plan.interior.get(), interior)));
      x = buf;
    }
    if (plan.fused) {
      REMEX_ASSIGN_OR_RETURN(void* ws, workspace.Allocate(plan.fused_workspace));
      // Without Z, z is Y itself, scaled by alpha2 = 0.
      const float alpha2 = z ? 1.0f : 0.0f;
      const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
          handle(), &kOne, plan.x.get(), x, plan.w.get(), in[1].data, plan.conv.get(), plan.fused_algo, ws,
          plan.fused_workspace, &alpha2, plan.y.get(), z ? z : out.data, plan.bias.get(), bias, plan.activation.get(),
          plan.y.get(), out.data);
      if (!IsNotSupported(st)) {
        REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnConvolutionBiasActivationForward", st));
        REMEX_RETURN_IF_ERROR(workspace.Release());
        return padded.Release();
      }
      plan.fused = false;  // Refused before any launch: the unfused path, from now on.
      REMEX_RETURN_IF_ERROR(workspace.Release());
    }
    REMEX_ASSIGN_OR_RETURN(void* ws, workspace.Allocate(plan.workspace));
    REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnConvolutionForward",
                                     cudnnConvolutionForward(handle(), &kOne, plan.x.get(), x, plan.w.get(),
                                                             in[1].data, plan.conv.get(), plan.algo, ws,
                                                             plan.workspace, &kZero, plan.y.get(), out.data)));
    if (epilogue) {
      REMEX_RETURN_IF_ERROR(Epilogue(plan, out, bias, z, type));
    } else if (bias) {
      REMEX_RETURN_IF_ERROR(CudnnCheck(
          op(), "cudnnAddTensor", cudnnAddTensor(handle(), &kOne, plan.bias.get(), bias, &kOne, plan.y.get(), out.data)));
    }
    REMEX_RETURN_IF_ERROR(workspace.Release());
    return padded.Release();
  }

 private:
  const ConvAttrs attrs_;
};

// ---------------------------------------------------------------------------
// ConvTranspose: the data gradient of the Conv whose filter is W [C, M / group, k...]
// (X plays that Conv's output, Y its input).

struct ConvTransposeAttrs {
  internal::WindowAttrs window;
  int64_t group = 1;
  std::vector<int64_t> output_padding;
  std::vector<int64_t> output_shape;
};

StatusOr<ConvTransposeAttrs> ParseConvTransposeAttrs(const Attributes& attrs) {
  constexpr std::string_view op = kConvTranspose;
  ConvTransposeAttrs c;
  REMEX_ASSIGN_OR_RETURN(c.window, internal::ParseWindowAttrs(op, attrs, /*with_ceil_mode=*/false));
  StatusOr<int64_t> group = attrs.Int("group", 1);
  if (!group.ok()) return internal::OpError(op, group.status().message());
  if (*group < 1) return internal::OpError(op, "group must be positive");
  c.group = *group;
  StatusOr<std::vector<int64_t>> output_padding = attrs.Ints("output_padding", {});
  if (!output_padding.ok()) return internal::OpError(op, output_padding.status().message());
  c.output_padding = *output_padding;
  StatusOr<std::vector<int64_t>> output_shape = attrs.Ints("output_shape", {});
  if (!output_shape.ok()) return internal::OpError(op, output_shape.status().message());
  c.output_shape = *output_shape;
  return c;
}

// Per spatial dim: Y index o is position o + pad_begin of the region the inputs reach
// (reach = stride * (in - 1) + (k - 1) * dilation + 1), as kernels/ops/nn/conv.cc computes it
// (output_padding and output_shape folded into the pads, which may be negative).
struct TransposeGeometry {
  std::vector<int64_t> strides, dilations, pad_begin, reach;
};

TransposeGeometry ComputeTransposeGeometry(const ConvTransposeAttrs& a, const Shape& x, const Shape& w,
                                           const Shape& y) {
  const size_t nsp = x.size() - 2;
  const internal::WindowAttrs& wa = a.window;
  TransposeGeometry g;
  g.strides = wa.strides.empty() ? std::vector<int64_t>(nsp, 1) : wa.strides;
  g.dilations = wa.dilations.empty() ? std::vector<int64_t>(nsp, 1) : wa.dilations;
  auto half_down = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  const bool same = wa.auto_pad == "SAME_UPPER" || wa.auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t reach = g.strides[i] * (x[2 + i] - 1) + (w[2 + i] - 1) * g.dilations[i] + 1;
    const int64_t full = reach + (a.output_padding.empty() ? 0 : a.output_padding[i]);
    int64_t pb = 0;
    if (!a.output_shape.empty() || same) {
      const int64_t total = full - y[2 + i];
      pb = wa.auto_pad == "SAME_UPPER" ? half_down(total) : total - half_down(total);
    } else if (wa.auto_pad == "NOTSET" && !wa.pads.empty()) {
      pb = wa.pads[i];
    }
    g.pad_begin.push_back(pb);
    g.reach.push_back(reach);
  }
  return g;
}

struct ConvTransposePlan {
  bool all_bias = false;
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace = 0;
  // Asymmetric or negative pads: the result over the whole reach goes to a scratch
  // buffer (`dst` describes it), then its part inside Y is copied into Y.
  bool use_scratch = false;
  TensorDesc dst, scratch_view, y_view;
  size_t scratch_bytes = 0;
  int64_t scratch_offset = 0, y_offset = 0;  // Elements.
};

class ConvTransposeCudaKernel final : public CudnnKernel<ConvTransposePlan> {
 public:
  ConvTransposeCudaKernel(const OpDef& def, Attributes attrs, ConvTransposeAttrs conv,
                          CudaKernelContext context)
      : CudnnKernel(def, std::move(attrs), context), attrs_(std::move(conv)) {}

 protected:
  StatusOr<std::unique_ptr<ConvTransposePlan>> Build(std::span<const TensorRef> in, const TensorRef& out,
                                                     bool has_bias, const TypeInfo& type) override {
    auto plan = std::make_unique<ConvTransposePlan>();
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const Shape& y = out.shape;
    const size_t nsp = x.size() - 2;
    const Layout y_layout = DenseLayout(y, false);
    REMEX_ASSIGN_OR_RETURN(plan->y, MakeTensorDesc(op(), type.data, y_layout));
    REMEX_ASSIGN_OR_RETURN(plan->bias, MakeBiasDesc(op(), type.data, y[1], y_layout.dims.size()));
    if (NumElements(x).value_or(0) == 0 || NumElements(w).value_or(0) == 0) {
      plan->all_bias = true;
      return plan;
    }
    const TransposeGeometry g = ComputeTransposeGeometry(attrs_, x, w, y);
    std::vector<int64_t> pads(nsp, 0);
    bool symmetric = true;
    for (size_t i = 0; i < nsp; ++i) {
      const int64_t pe = g.reach[i] - g.pad_begin[i] - y[2 + i];
      symmetric = symmetric && g.pad_begin[i] >= 0 && g.pad_begin[i] == pe;
    }
    if (symmetric) {
      pads = g.pad_begin;
      REMEX_ASSIGN_OR_RETURN(plan->dst, MakeTensorDesc(op(), type.data, y_layout));
    } else {
      plan->use_scratch = true;
      Shape scratch = {y[0], y[1]};
      scratch.insert(scratch.end(), g.reach.begin(), g.reach.end());
      const Layout s_layout = DenseLayout(scratch, false);
      REMEX_ASSIGN_OR_RETURN(plan->dst, MakeTensorDesc(op(), type.data, s_layout));
      plan->scratch_bytes = static_cast<size_t>(*NumElements(scratch)) * type.size;
      // Y indices [lo, hi) lie inside the reach: scratch index = Y index + pad_begin.
      Layout s_view = s_layout, y_view = y_layout;
      for (size_t i = 0; i < nsp; ++i) {
        const int64_t lo = std::max<int64_t>(0, -g.pad_begin[i]);
        const int64_t hi = std::min<int64_t>(y[2 + i], g.reach[i] - g.pad_begin[i]);
        if (hi <= lo) {
          plan->all_bias = true;  // The pads crop away everything the inputs reach.
          return plan;
        }
        const size_t d = SpatialIndex(nsp, i);
        s_view.dims[d] = y_view.dims[d] = hi - lo;
        plan->scratch_offset += (lo + g.pad_begin[i]) * s_layout.strides[d];
        plan->y_offset += lo * y_layout.strides[d];
      }
      REMEX_ASSIGN_OR_RETURN(plan->scratch_view, MakeTensorDesc(op(), type.data, s_view));
      REMEX_ASSIGN_OR_RETURN(plan->y_view, MakeTensorDesc(op(), type.data, y_view));
    }
    REMEX_ASSIGN_OR_RETURN(plan->x, MakeTensorDesc(op(), type.data, DenseLayout(x, false)));
    REMEX_ASSIGN_OR_RETURN(plan->w, MakeFilterDesc(op(), type.data, w));
    REMEX_ASSIGN_OR_RETURN(plan->conv, MakeConvDesc(op(), type, pads, g.strides, g.dilations, attrs_.group));
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    if (exhaustive()) {
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnFindConvolutionBackwardDataAlgorithm",
                                       cudnnFindConvolutionBackwardDataAlgorithm(
                                           handle(), plan->w.get(), plan->x.get(), plan->conv.get(), plan->dst.get(),
                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf)));
    } else {
      REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                                       cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                           handle(), plan->w.get(), plan->x.get(), plan->conv.get(), plan->dst.get(),
                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf)));
    }
    REMEX_ASSIGN_OR_RETURN(cudnnConvolutionBwdDataAlgoPerf_t best, FirstUsable(op(), perf, count));
    plan->algo = best.algo;
    REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnGetConvolutionBackwardDataWorkspaceSize",
                                     cudnnGetConvolutionBackwardDataWorkspaceSize(
                                         handle(), plan->w.get(), plan->x.get(), plan->conv.get(), plan->dst.get(),
                                         plan->algo, &plan->workspace)));
    return plan;
  }

  Status Run(const ConvTransposePlan& plan, std::span<const TensorRef> in, const TensorRef& out, bool has_bias,
             const TypeInfo& type) override {
    const void* bias = has_bias ? in[2].data : nullptr;
    if (plan.all_bias) return FillBias(op(), handle(), plan.y.get(), out.data, plan.bias.get(), bias);
    StreamWorkspace scratch(op(), stream(), provider());
    StreamWorkspace workspace(op(), stream(), provider());
    void* dst = out.data;
    if (plan.use_scratch) {
      REMEX_ASSIGN_OR_RETURN(dst, scratch.Allocate(plan.scratch_bytes));
    }
    REMEX_ASSIGN_OR_RETURN(void* ws, workspace.Allocate(plan.workspace));
    REMEX_RETURN_IF_ERROR(CudnnCheck(op(), "cudnnConvolutionBackwardData",
                                     cudnnConvolutionBackwardData(handle(), &kOne, plan.w.get(), in[1].data,
                                                                  plan.x.get(), in[0].data, plan.conv.get(), plan.algo,
                                                                  ws, plan.workspace, &kZero, plan.dst.get(), dst)));
    if (plan.use_scratch) {
      const int64_t size = static_cast<int64_t>(type.size);
      REMEX_RETURN_IF_ERROR(
          CudnnCheck(op(), "cudnnSetTensor", cudnnSetTensor(handle(), plan.y.get(), out.data, &kZeroBits)));
      REMEX_RETURN_IF_ERROR(CudnnCheck(
          op(), "cudnnTransformTensor",
          cudnnTransformTensor(handle(), &kOne, plan.scratch_view.get(),
                               static_cast<const char*>(dst) + plan.scratch_offset * size, &kZero, plan.y_view.get(),
                               static_cast<char*>(out.data) + plan.y_offset * size)));
    }
    if (bias) {
      REMEX_RETURN_IF_ERROR(CudnnCheck(
          op(), "cudnnAddTensor", cudnnAddTensor(handle(), &kOne, plan.bias.get(), bias, &kOne, plan.y.get(), out.data)));
    }
    REMEX_RETURN_IF_ERROR(workspace.Release());
    return scratch.Release();
  }

 private:
  const ConvTransposeAttrs attrs_;
};

template <typename K, typename ParsedAttrs>
Status AddCudnnKernel(KernelRegistry& registry, std::string_view name, CudaKernelContext context,
                      StatusOr<ParsedAttrs> (*parse)(const Attributes&)) {
  return AddCudaKernel(registry, name,
                       [context, parse](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
                              REMEX_ASSIGN_OR_RETURN(ParsedAttrs parsed, parse(attrs));
                              return std::unique_ptr<OpKernel>(
                                  std::make_unique<K>(def, attrs, std::move(parsed), context));
                            });
}

}  // namespace

Status AddConvCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  Status conv = AddCudnnKernel<ConvCudaKernel, ConvAttrs>(registry, kConv, context, ParseConvAttrs);
  if (!conv.ok()) return conv;
  Status fused = AddCudnnKernel<ConvCudaKernel, ConvAttrs>(registry, kFusedConv, context, ParseFusedConvAttrs);
  if (!fused.ok()) return fused;
  return AddCudnnKernel<ConvTransposeCudaKernel, ConvTransposeAttrs>(registry, kConvTranspose, context,
                                                                      ParseConvTransposeAttrs);
}

}  // namespace remex::kernels::cuda

#else  // !REMEX_HAVE_CUDNN

#include "kernels/cuda/cuda_internal.h"

namespace remex::kernels::cuda {

Status AddConvCudaKernels(KernelRegistry&, CudaKernelContext) { return OkStatus(); }

}  // namespace remex::kernels::cuda

#endif  // REMEX_HAVE_CUDNN
