// Conv: shape function and the CPU kernel on oneDNN's convolution_forward.

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "kernels/internal.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kConv = "Conv";

struct ConvAttrs {
  WindowAttrs window;
  int64_t group = 1;
};

StatusOr<ConvAttrs> ParseConvAttrs(const Attributes& attrs) {
  ConvAttrs c;
  REMEX_ASSIGN_OR_RETURN(c.window, ParseWindowAttrs(kConv, attrs, /*with_ceil_mode=*/false));
  StatusOr<int64_t> group = attrs.Int("group", 1);
  if (!group.ok()) return OpError(kConv, group.status().message());
  if (*group < 1) return OpError(kConv, "group must be positive");
  c.group = *group;
  return c;
}

// Validated geometry of one Conv call.
struct ConvShape {
  int64_t n = 0, c = 0, m = 0;  // Batch, input channels, output channels.
  WindowGeometry geometry;
  Shape output;
};

StatusOr<ConvShape> ComputeConvShape(const ConvAttrs& attrs, std::span<const ShapeFnArg> in) {
  const ShapeFnArg& x = in[0];
  const ShapeFnArg& w = in[1];
  if (x.dtype != DType::kFloat32 || w.dtype != DType::kFloat32) {
    return OpError(kConv, "supports float32 only, got X " + std::string(DTypeName(x.dtype)) +
                              ", W " + std::string(DTypeName(w.dtype)));
  }
  if (x.shape.size() < 3 || x.shape.size() > 5) {
    return OpError(
        kConv, "X must have rank 3 to 5 (1-D to 3-D convolution), got " + ShapeToString(x.shape));
  }
  if (w.shape.size() != x.shape.size()) {
    return OpError(kConv, "W " + ShapeToString(w.shape) + " must have the rank of X " +
                              ShapeToString(x.shape));
  }
  ConvShape s;
  s.n = x.shape[0];
  s.c = x.shape[1];
  s.m = w.shape[0];
  const int64_t g = attrs.group;
  if (s.c % g != 0) {
    return OpError(kConv, "input channels " + std::to_string(s.c) + " are not divisible by group " +
                              std::to_string(g));
  }
  if (w.shape[1] != s.c / g) {
    return OpError(kConv, "W " + ShapeToString(w.shape) + " expects " +
                              std::to_string(w.shape[1] * g) + " input channels with group " +
                              std::to_string(g) + ", X has " + std::to_string(s.c));
  }
  if (s.m % g != 0) {
    return OpError(kConv, "output channels " + std::to_string(s.m) +
                              " are not divisible by group " + std::to_string(g));
  }
  std::span<const int64_t> kernel(w.shape.data() + 2, w.shape.size() - 2);
  if (!attrs.window.kernel_shape.empty() &&
      !std::equal(kernel.begin(), kernel.end(), attrs.window.kernel_shape.begin(),
                  attrs.window.kernel_shape.end())) {
    return OpError(kConv, "kernel_shape does not match W " + ShapeToString(w.shape));
  }
  if (in.size() > 2 && in[2].present) {
    const ShapeFnArg& b = in[2];
    if (b.dtype != DType::kFloat32) return OpError(kConv, "B must be float32");
    if (b.shape != Shape{s.m}) {
      return OpError(
          kConv, "B must have shape [" + std::to_string(s.m) + "], got " + ShapeToString(b.shape));
    }
  }
  std::span<const int64_t> spatial(x.shape.data() + 2, x.shape.size() - 2);
  REMEX_ASSIGN_OR_RETURN(s.geometry, ComputeWindowGeometry(kConv, attrs.window, spatial, kernel));
  s.output = {s.n, s.m};
  s.output.insert(s.output.end(), s.geometry.output.begin(), s.geometry.output.end());
  return s;
}

StatusOr<std::vector<TensorInfo>> InferConv(const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  if (in.size() < 2) return OpError(kConv, "expects inputs X and W");
  REMEX_ASSIGN_OR_RETURN(ConvAttrs c, ParseConvAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(ConvShape s, ComputeConvShape(c, in));
  return std::vector<TensorInfo>{{DType::kFloat32, s.output}};
}

OpDef ConvDef() {
  OpDef def;
  def.name = std::string(kConv);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferConv;
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

// One compiled convolution for one (X shape, W shape, bias) combination, with the
// buffers its reorders need.
struct CompiledConv {
  dnnl::convolution_forward primitive;
  dnnl::memory user_src, user_weights, user_dst, bias;
  dnnl::memory src, weights, dst;  // Primitive formats; alias user_* when equal.
  bool reorder_src = false, reorder_weights = false, reorder_dst = false;
  dnnl::reorder src_reorder, weights_reorder, dst_reorder;
};

class ConvKernel final : public ValidatedKernel {
 public:
  ConvKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), attrs_(*ParseConvAttrs(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    if (NumElements(in[0].shape).value_or(0) == 0 || NumElements(in[1].shape).value_or(0) == 0) {
      // A sum over no input channels: every output is the bias (or zero).
      const Shape& y = out[0].shape;
      const int64_t batch = y[0], channels = y[1];
      const int64_t spatial = *NumElements(y) / std::max<int64_t>(batch * channels, 1);
      return DispatchFloat(op(), out[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        T* dst = DataAs<T>(out[0]);
        const T* b = in.size() > 2 && in[2].present() ? DataAs<T>(in[2]) : nullptr;
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t m = 0; m < channels; ++m) {
            T v = b ? b[m] : Store<T>(0);
            std::fill_n(dst + (n * channels + m) * spatial, spatial, v);
          }
        }
        return OkStatus();
      });
    }
    try {
      return RunDnnl(in, out);
    } catch (const dnnl::error& e) {
      return Internal("Conv: oneDNN: " + std::string(e.what()));
    } catch (const std::exception& e) {
      return Internal("Conv: " + std::string(e.what()));
    }
  }

 private:
  Status RunDnnl(std::span<const TensorRef> in, std::span<const TensorRef> out) {
    const bool has_bias = in.size() > 2 && in[2].present();
    Shape key = in[0].shape;
    key.insert(key.end(), in[1].shape.begin(), in[1].shape.end());
    key.push_back(has_bias ? 1 : 0);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      REMEX_ASSIGN_OR_RETURN(CompiledConv compiled, Compile(in, has_bias));
      if (cache_.size() >= kMaxCached) cache_.clear();
      it = cache_.emplace(std::move(key), std::move(compiled)).first;
    }
    CompiledConv& c = it->second;
    c.user_src.set_data_handle(in[0].data);
    c.user_weights.set_data_handle(in[1].data);
    c.user_dst.set_data_handle(out[0].data);
    if (has_bias) c.bias.set_data_handle(in[2].data);
    if (c.reorder_src) c.src_reorder.execute(*stream_, c.user_src, c.src);
    // TODO(perf): keep reordered weights when they are known to be constant.
    if (c.reorder_weights) c.weights_reorder.execute(*stream_, c.user_weights, c.weights);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, c.reorder_src ? c.src : c.user_src},
        {DNNL_ARG_WEIGHTS, c.reorder_weights ? c.weights : c.user_weights},
        {DNNL_ARG_DST, c.reorder_dst ? c.dst : c.user_dst}};
    if (has_bias) args[DNNL_ARG_BIAS] = c.bias;
    c.primitive.execute(*stream_, args);
    if (c.reorder_dst) c.dst_reorder.execute(*stream_, c.dst, c.user_dst);
    stream_->wait();
    return OkStatus();
  }

  StatusOr<CompiledConv> Compile(std::span<const TensorRef> in, bool has_bias) {
    using dnnl::memory;
    if (!engine_) {
      engine_ = std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0);
      stream_ = std::make_unique<dnnl::stream>(*engine_);
    }
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(ConvShape s, ComputeConvShape(attrs_, args));
    const size_t rank = in[0].shape.size();
    const int64_t g = attrs_.group;
    memory::dims src_dims(in[0].shape.begin(), in[0].shape.end());
    memory::dims dst_dims(s.output.begin(), s.output.end());
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
    // gets the layouts oneDNN prefers.
    bool pointwise = g == 1;
    for (int64_t k : s.geometry.kernel) pointwise = pointwise && k == 1;
    const memory::format_tag act_tag = pointwise ? PlainTag(rank) : memory::format_tag::any;
    memory::desc src_any(src_dims, f32, act_tag);
    memory::desc w_any(w_dims, f32, memory::format_tag::any);
    memory::desc dst_any(dst_dims, f32, act_tag);
    memory::desc user_src_md(src_dims, f32, PlainTag(rank));
    memory::desc user_w_md(w_dims, f32, w_tag);
    memory::desc user_dst_md(dst_dims, f32, PlainTag(rank));
    memory::desc bias_md({s.m}, f32, memory::format_tag::a);
    auto desc =
        has_bias ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                       src_any, w_any, bias_md, dst_any, strides, dilates, pad_l, pad_r)
                 : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                   dnnl::algorithm::convolution_direct, src_any,
                                                   w_any, dst_any, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, *engine_);
    CompiledConv c;
    c.primitive = dnnl::convolution_forward(pd);
    c.user_src = memory(user_src_md, *engine_, nullptr);
    c.user_weights = memory(user_w_md, *engine_, nullptr);
    c.user_dst = memory(user_dst_md, *engine_, nullptr);
    if (has_bias) c.bias = memory(bias_md, *engine_, nullptr);
    if (pd.src_desc() != user_src_md) {
      c.reorder_src = true;
      c.src = memory(pd.src_desc(), *engine_);
      c.src_reorder = dnnl::reorder(c.user_src, c.src);
    }
    if (pd.weights_desc() != user_w_md) {
      c.reorder_weights = true;
      c.weights = memory(pd.weights_desc(), *engine_);
      c.weights_reorder = dnnl::reorder(c.user_weights, c.weights);
    }
    if (pd.dst_desc() != user_dst_md) {
      c.reorder_dst = true;
      c.dst = memory(pd.dst_desc(), *engine_);
      c.dst_reorder = dnnl::reorder(c.dst, c.user_dst);
    }
    return c;
  }

  static constexpr size_t kMaxCached = 16;
  ConvAttrs attrs_;
  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<Shape, CompiledConv> cache_;
};

}  // namespace

Status AddConvOpDefs(KernelRegistry& registry) { return registry.AddOp(ConvDef()); }

Status AddConvCpuKernels(KernelRegistry& registry) {
  return AddValidatedKernel<ConvKernel>(
      registry, ConvDef(), [](const Attributes& attrs) { return ParseConvAttrs(attrs).status(); });
}

}  // namespace remex::kernels::internal
