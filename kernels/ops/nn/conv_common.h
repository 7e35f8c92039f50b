// The oneDNN plumbing and the attribute checks shared by Conv/FusedConv (conv.cc) and
// ConvTranspose (conv_transpose.cc): memory layouts, bias fills, one compiled
// convolution or deconvolution primitive with its reorders, and the per-shape cache of
// them. Internal to the kernels library.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/tensor/transpose_tiles.h"

namespace remex::kernels::internal {

// The `group` attribute (default 1) of Conv or ConvTranspose; it must be positive.
inline StatusOr<int64_t> ParseGroup(std::string_view op, const Attributes& attrs) {
  StatusOr<int64_t> group = attrs.Int("group", 1);
  if (!group.ok()) return OpError(op, group.status().message());
  if (*group < 1) return OpError(op, "group must be positive");
  return *group;
}

// Checks that X and W are both float32 or both float16, the types Conv and
// ConvTranspose run (float16 is computed in float32, see RunAsFloat32).
inline Status CheckFloat32(std::string_view op, const ShapeFnArg& x, const ShapeFnArg& w) {
  if ((x.dtype != DType::kFloat32 && x.dtype != DType::kFloat16) || w.dtype != x.dtype) {
    return OpError(op, "supports float32 and float16 (X and W alike), got X " + std::string(DTypeName(x.dtype)) +
                           ", W " + std::string(DTypeName(w.dtype)));
  }
  return OkStatus();
}

// Checks the optional bias in[2], when present: X's dtype, shape [m].
inline Status CheckBias(std::string_view op, std::span<const ShapeFnArg> in, int64_t m) {
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


// Channels-first shape of a channels-last one: [N, D.., C] -> [N, C, D..].
inline Shape ToChannelsFirst(const Shape& s) {
  if (s.size() < 2) return s;
  Shape out = {s[0], s.back()};
  out.insert(out.end(), s.begin() + 1, s.end() - 1);
  return out;
}

// Channels-last shape of a channels-first one: [N, C, D..] -> [N, D.., C].
inline Shape ToChannelsLast(const Shape& s) {
  if (s.size() < 2) return s;
  Shape out = {s[0]};
  out.insert(out.end(), s.begin() + 2, s.end());
  out.push_back(s[1]);
  return out;
}

// The `layout` attribute of Conv, FusedConv, ConvInteger and QLinearConv: "NCHW"
// (default, ONNX's) or "NHWC" (set by the compiler's layout pass, channels-last X and
// Y); true for "NHWC".
inline StatusOr<bool> ParseChannelsLast(std::string_view op, const Attributes& attrs) {
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok()) return OpError(op, layout.status().message());
  if (*layout != "NCHW" && *layout != "NHWC") {
    return OpError(op, "unknown layout '" + *layout + "' (NCHW or NHWC)");
  }
  return *layout == "NHWC";
}

// Dense row-major layout of a tensor of `rank` dims.
inline dnnl::memory::format_tag PlainTag(size_t rank) {
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
inline dnnl::memory::format_tag ChannelsLastTag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 3: return tag::acb;
    case 4: return tag::acdb;
    case 5: return tag::acdeb;
    default: return tag::undef;
  }
}

// Y [N, ..., M] (channels-last) = bias[m] (0 without bias) everywhere.
inline void FillBiasChannelsLast(const TensorRef& y, const float* bias) {
  const int64_t m = y.shape.back();
  const int64_t total = *NumElements(y.shape);
  float* p = DataAs<float>(y);
  for (int64_t i = 0; i < total; ++i) p[i] = bias ? bias[i % m] : 0.f;
}

// Y [N, M, ...] = bias[m] (0 without bias) everywhere.
inline void FillBias(const TensorRef& y, const float* bias) {
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
  // The constant weights `weights` holds reordered (null: none); reordered weights are
  // kept across calls while the same constant comes in.
  const void* weights_kept_from = nullptr;
  // Compute threads it was created with and runs with (ScopedComputeThreads); 0: all.
  int threads = 0;
  // The epilogue's activation runs after the primitive, over Y, rather than as a oneDNN
  // post-op (which oneDNN's GEMM-based convolution applies element by element).
  bool activation_after = false;
  // The primitive's arguments (the memories above; their data handles are set per call).
  std::unordered_map<int, dnnl::memory> args;
  // FusedConv's residual Z through a sum post-op: Z is copied into Y before the
  // primitive runs (reordered into `dst` when Y is reordered; `user_z` in Y's layout).
  bool has_sum = false;
  dnnl::memory user_z;
  dnnl::reorder z_reorder;
  // Reorders of 1-byte tensors (uint8, int8) between the plain layout (NCHW) and
  // channels-last (NHWC) run as our own tiled transposes (TransposeMatrices, 2-3.5
  // times oneDNN's reorder: bench/layout_move_bench): X in, Y out, and Z into Y's
  // primitive layout (each where PlainChannelsLastMove says so; else oneDNN's reorder).
  bool transpose_src = false, transpose_dst = false;
};

// Whether the move between a caller's tensor in layout `user` and the primitive's in
// layout `primitive` (X and Z into it, or Y out of it) is a transpose of a channels-first
// tensor (`user` plain) to channels-last (`primitive`) or back, of one 1-byte dtype and
// at least 16 channels. Elsewhere oneDNN's reorder is the quicker
// (bench/layout_move_bench: with 3 channels, an int8 stem's, the register blocks stay
// idle; on float32, 4 x 4 SSE blocks against its AVX-512 reorder), or the move is none
// of ours (channels-last to oneDNN's plain or blocked layouts).
inline bool PlainChannelsLastMove(const dnnl::memory::desc& user, const dnnl::memory::desc& primitive) {
  using dnnl::memory;
  const memory::dims dims = user.dims();
  if (memory::data_type_size(user.data_type()) != 1 || user.data_type() != primitive.data_type() ||
      dims.size() < 3 || dims != primitive.dims() || dims[1] < 16) {
    return false;
  }
  return user == memory::desc(dims, user.data_type(), PlainTag(dims.size())) &&
         primitive == memory::desc(dims, user.data_type(), ChannelsLastTag(dims.size()));
}

// Moves a dense tensor of 1-byte elements and dims [N, C, S...] (oneDNN's order)
// between the plain layout and channels-last: `to_channels_last` [N][C][S] -> [N][S][C],
// else back.
inline void MovePlainChannelsLast(const void* src, void* dst, const dnnl::memory::dims& dims, bool to_channels_last) {
  int64_t spatial = 1;
  for (size_t i = 2; i < dims.size(); ++i) spatial *= dims[i];
  const int64_t rows = to_channels_last ? dims[1] : spatial, cols = to_channels_last ? spatial : dims[1];
  TransposeMatrices(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), dims[0], rows, cols);
}

// Builds the Primitive (dnnl::convolution_forward or dnnl::deconvolution_forward) of
// `pd` with memories in the user layouts (no data yet; bias_md is ignored without
// bias) and a reorder for each operand whose layout the primitive changed.
template <typename Primitive>
inline DnnlConvPrimitive MakeDnnlConvPrimitive(const typename Primitive::primitive_desc& pd,
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
  // Both moves ours where each is a plain <-> channels-last transpose (Z's is Y's).
  c.transpose_src = c.reorder_src && PlainChannelsLastMove(user_src_md, pd.src_desc());
  c.transpose_dst = c.reorder_dst && PlainChannelsLastMove(user_dst_md, pd.dst_desc());
  c.args = {{DNNL_ARG_SRC, c.reorder_src ? c.src : c.user_src},
            {DNNL_ARG_WEIGHTS, c.reorder_weights ? c.weights : c.user_weights},
            {DNNL_ARG_DST, c.reorder_dst ? c.dst : c.user_dst}};
  if (has_bias) c.args[DNNL_ARG_BIAS] = c.bias;
  return c;
}

// Runs `c` on the given buffers in the user layouts (`bias` is read only when `c` has
// a bias, `z` only when it has a sum post-op): reorders X and W in, places Z in Y,
// executes, reorders Y out, and waits for `stream`. Constant weights
// (TensorRef::constant) are reordered on their first call only.
inline void ExecuteDnnlConv(DnnlConvPrimitive& c, dnnl::stream& stream, void* src, const TensorRef& weights,
                     void* dst, void* bias, void* z = nullptr) {
  ScopedComputeThreads threads(c.threads);
  c.user_src.set_data_handle(src);
  c.user_weights.set_data_handle(weights.data);
  c.user_dst.set_data_handle(dst);
  if (c.has_bias) c.bias.set_data_handle(bias);
  if (c.transpose_src) {
    MovePlainChannelsLast(src, c.src.get_data_handle(), c.user_src.get_desc().dims(), /*to_channels_last=*/true);
  } else if (c.reorder_src) {
    c.src_reorder.execute(stream, c.user_src, c.src);
  }
  if (c.reorder_weights && !(weights.constant && c.weights_kept_from == weights.data)) {
    c.weights_reorder.execute(stream, c.user_weights, c.weights);
    c.weights_kept_from = weights.constant ? weights.data : nullptr;
  }
  if (c.has_sum) {
    if (c.transpose_dst) {
      MovePlainChannelsLast(z, c.dst.get_data_handle(), c.user_dst.get_desc().dims(), /*to_channels_last=*/true);
    } else if (c.reorder_dst) {
      c.user_z.set_data_handle(z);
      c.z_reorder.execute(stream, c.user_z, c.dst);
    } else if (z != nullptr && z != dst) {
      std::memcpy(dst, z, c.user_dst.get_desc().get_size());
    }
  }
  c.primitive.execute(stream, c.args);
  if (c.transpose_dst) {
    stream.wait();
    MovePlainChannelsLast(c.dst.get_data_handle(), dst, c.user_dst.get_desc().dims(), /*to_channels_last=*/false);
  } else if (c.reorder_dst) {
    c.dst_reorder.execute(stream, c.dst, c.user_dst);
  }
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
    // The last entry used, compared in place: static shapes find it without a lookup.
    if (last_ && last_key_->size() == in[0].shape.size() + in[1].shape.size() + 1 &&
        std::equal(in[0].shape.begin(), in[0].shape.end(), last_key_->begin()) &&
        std::equal(in[1].shape.begin(), in[1].shape.end(), last_key_->begin() + in[0].shape.size()) &&
        last_key_->back() == variant) {
      return last_;
    }
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
    last_key_ = &it->first;
    last_ = &it->second;
    return last_;
  }

 private:
  static constexpr size_t kMaxCached = 16;
  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<Shape, Compiled> cache_;
  // The entry FindOrCompile returned last (std::map keeps it in place until cleared).
  const Shape* last_key_ = nullptr;
  Compiled* last_ = nullptr;
};

// ConvTranspose (conv_transpose.cc): its OpDef and CPU kernel.
OpDef ConvTransposeDef();
Status AddConvTransposeCpuKernel(KernelRegistry& registry);

}  // namespace remex::kernels::internal
