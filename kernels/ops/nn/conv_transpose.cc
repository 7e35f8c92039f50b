// ConvTranspose: shape function and CPU kernel (the semantics: conv.cc's header
// comment; https://onnx.ai/onnx/operators/onnx__ConvTranspose.html, opsets 1, 11).

#include <algorithm>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "kernels/ops/nn/conv_common.h"
#include "kernels/dnnl_epilogue.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/prepack.h"

namespace remex::kernels::internal {
namespace {

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

OpDef ConvTransposeDefinition() {
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

class ConvTransposeKernel final : public ValidatedKernel, public ConstantPrepacker {
 public:
  // Float16 constants (W, B) widened to float32 at the load.
  void Prepack(size_t, const TensorRef& constant) override { (void)f32_constants_.Prepack(constant); }
  static StatusOr<std::unique_ptr<ConvTransposeKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(ConvTransposeAttrs parsed, ParseConvTransposeAttrs(attrs));
    return std::make_unique<ConvTransposeKernel>(def, attrs, std::move(parsed));
  }
  ConvTransposeKernel(const OpDef& def, const Attributes& attrs, ConvTransposeAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      return RunAsFloat32(
          in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); },
          &f32_constants_);
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
    ExecuteDnnlConv(c.deconv, cache_.stream(), in[0].data, in[1],
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
  Float32Constants f32_constants_;  // float16 weights, widened once.
};

}  // namespace

OpDef ConvTransposeDef() { return ConvTransposeDefinition(); }

Status AddConvTransposeCpuKernel(KernelRegistry& registry) {
  return AddCpuKernel<ConvTransposeKernel>(registry, "ConvTranspose");
}

}  // namespace remex::kernels::internal
