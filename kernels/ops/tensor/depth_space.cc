// DepthToSpace and SpaceToDepth: shape functions and CPU kernels.
// ONNX semantics, opsets 7-17; every dtype Remex holds unless noted. Index-like inputs
// (pads, shape) are int64; int32 is accepted.
//
// DepthToSpace(data) -> NCHW [N, C / b^2, H * b, W * b] for blocksize b. mode DCR
//   (default; the only mode before opset 11): output[n, c, h*b + i, w*b + j] =
//   input[n, (i*b + j) * C/b^2 + c, h, w]; CRD: input[n, c*b^2 + i*b + j, h, w].
// SpaceToDepth(data) -> NCHW [N, C * b^2, H / b, W / b], the inverse of DCR:
//   output[n, (i*b + j) * C + c, h, w] = input[n, c, h*b + i, w*b + j].
// Both take the internal attribute `layout` (set by the compiler's layout pass, never
//   by ONNX): "NCHW" (default) or "NHWC", where input and output are channels-last,
//   [N, H, W, C] -> [N, H * b, W * b, C / b^2] (DepthToSpace) with the same channel
//   order as above: output[n, h*b + i, w*b + j, c] = input[n, h, w, (i*b + j) * C/b^2 + c]
//   (DCR), input[n, h, w, c*b^2 + i*b + j] (CRD).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<BlockAttrs> BlockAttrsOf(std::string_view op, const Attributes& attrs) {
  BlockAttrs b;
  StatusOr<int64_t> bs = attrs.Int("blocksize");
  if (!bs.ok()) return OpError(op, "attribute 'blocksize' is required and must be an int");
  if (*bs < 1) return OpError(op, "blocksize must be positive, got " + Str(*bs));
  b.blocksize = *bs;
  if (op == "DepthToSpace") {
    StatusOr<std::string> mode = attrs.String("mode", "DCR");
    if (!mode.ok()) return OpError(op, mode.status().message());
    if (*mode != "DCR" && *mode != "CRD") {
      return OpError(op, "unknown mode '" + *mode + "' (DCR or CRD)");
    }
    b.crd = *mode == "CRD";
  }
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok()) return OpError(op, layout.status().message());
  if (*layout != "NCHW" && *layout != "NHWC") {
    return OpError(op, "unknown layout '" + *layout + "' (NCHW or NHWC)");
  }
  b.channels_last = *layout == "NHWC";
  return b;
}

namespace {

// [N, C, H, W] <-> [N, H, W, C] for the channels-last form of the block ops.
Shape NhwcToNchw(const Shape& s) { return {s[0], s[3], s[1], s[2]}; }
Shape NchwToNhwc(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

template <bool kDepthToSpace>
StatusOr<std::vector<TensorInfo>> InferBlock(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = kDepthToSpace ? "DepthToSpace" : "SpaceToDepth";
  REMEX_ASSIGN_OR_RETURN(BlockAttrs b, BlockAttrsOf(op, attrs));
  if (in[0].shape.size() != 4) {
    return OpError(op, std::string("input must be 4-D ") + (b.channels_last ? "NHWC" : "NCHW") + ", got " +
                           ShapeToString(in[0].shape));
  }
  const Shape s = b.channels_last ? NhwcToNchw(in[0].shape) : in[0].shape;
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  int64_t bb;
  if (__builtin_mul_overflow(b.blocksize, b.blocksize, &bb)) {
    return OpError(op, "blocksize is too large");
  }
  Shape out = s;
  if (kDepthToSpace) {
    if (s[1] % bb != 0) {
      return OpError(op, "channels " + Str(s[1]) + " are not a multiple of blocksize^2 = " + Str(bb));
    }
    out[1] = s[1] / bb;
    if (__builtin_mul_overflow(s[2], b.blocksize, &out[2]) ||
        __builtin_mul_overflow(s[3], b.blocksize, &out[3])) {
      return OpError(op, "output extent overflows");
    }
  } else {
    if (s[2] % b.blocksize != 0 || s[3] % b.blocksize != 0) {
      return OpError(op, "height and width " + Str(s[2]) + "x" + Str(s[3]) +
                             " are not multiples of blocksize " + Str(b.blocksize));
    }
    if (__builtin_mul_overflow(s[1], bb, &out[1])) return OpError(op, "output extent overflows");
    out[2] = s[2] / b.blocksize;
    out[3] = s[3] / b.blocksize;
  }
  if (b.channels_last) out = NchwToNhwc(out);
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

template <bool kDepthToSpace>
OpDef BlockDef() {
  OpDef def;
  def.name = kDepthToSpace ? "DepthToSpace" : "SpaceToDepth";
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferBlock<kDepthToSpace>;
  return def;
}

template <bool kDepthToSpace>
class BlockKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<BlockKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(BlockAttrsOf(def.name, attrs).status());
    return std::make_unique<BlockKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(BlockAttrs b, BlockAttrsOf(op(), attrs()));
    if (*NumElements(out[0].shape) == 0) return OkStatus();
    if (b.channels_last) return RunChannelsLast(b, in[0], out[0]);
    const int64_t bs = b.blocksize;
    // The space side (NCHW with the large H, W) and the depth side.
    const Shape& space = kDepthToSpace ? out[0].shape : in[0].shape;
    const Shape& depth = kDepthToSpace ? in[0].shape : out[0].shape;
    const int64_t n = space[0], c = space[1], h = depth[2], w = depth[3];
    const int64_t sh = space[2], sw = space[3], plane = h * w;
    // One task per space row (n, c, h*b + i): it meets b depth rows, one per j, and
    // interleaves them (DepthToSpace) or splits into them (SpaceToDepth), so the space
    // row is read or written once, in order.
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(in[0]);
      E* y = DataAs<E>(out[0]);
      const int64_t rows = n * c * sh;
      ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(sw, 1)),
                  [&](int64_t begin, int64_t end, int) {
                    std::vector<int64_t> depth_rows(static_cast<size_t>(bs));
                    for (int64_t r = begin; r < end; ++r) {
                      const int64_t srow = r % sh, nc = r / sh, ic = nc % c, in_ = nc / c;
                      const int64_t i = srow % bs, ih = srow / bs;
                      for (int64_t j = 0; j < bs; ++j) {
                        const int64_t dc = b.crd ? (ic * bs + i) * bs + j : (i * bs + j) * c + ic;
                        depth_rows[j] = (in_ * c * bs * bs + dc) * plane + ih * w;
                      }
                      const int64_t space_row = r * sw;
                      if (bs == 2) {
                        if constexpr (kDepthToSpace) {
                          const E* a = x + depth_rows[0];
                          const E* d = x + depth_rows[1];
                          E* dst = y + space_row;
                          for (int64_t iw = 0; iw < w; ++iw) {
                            dst[2 * iw] = a[iw];
                            dst[2 * iw + 1] = d[iw];
                          }
                        } else {
                          E* a = y + depth_rows[0];
                          E* d = y + depth_rows[1];
                          const E* src = x + space_row;
                          for (int64_t iw = 0; iw < w; ++iw) {
                            a[iw] = src[2 * iw];
                            d[iw] = src[2 * iw + 1];
                          }
                        }
                        continue;
                      }
                      for (int64_t iw = 0; iw < w; ++iw) {
                        for (int64_t j = 0; j < bs; ++j) {
                          if constexpr (kDepthToSpace) {
                            y[space_row + iw * bs + j] = x[depth_rows[j] + iw];
                          } else {
                            y[depth_rows[j] + iw] = x[space_row + iw * bs + j];
                          }
                        }
                      }
                    }
                  });
      return OkStatus();
    });
  }

 private:
  // NHWC: per space pixel (n, h*b + i, w*b + j) its C channels are one run of the depth
  // pixel (n, h, w): contiguous (DCR, SpaceToDepth) or with stride b^2 (CRD).
  Status RunChannelsLast(const BlockAttrs& b, const TensorRef& x_ref, const TensorRef& y_ref) {
    const int64_t bs = b.blocksize;
    const Shape& space = kDepthToSpace ? y_ref.shape : x_ref.shape;  // [N, H*b, W*b, C]
    const Shape& depth = kDepthToSpace ? x_ref.shape : y_ref.shape;  // [N, H, W, C*b^2]
    const int64_t n = space[0], h = depth[1], w = depth[2], c = space[3], cd = depth[3];
    const int64_t sw = space[2];
    return DispatchBySize(op(), x_ref.dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(x_ref);
      E* y = DataAs<E>(y_ref);
      // One task per space row (n, h*b + i).
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(sw * c, 1));
      ParallelFor(n * h * bs, grain, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t i = r % bs, ih = (r / bs) % h, in_ = r / bs / h;
          for (int64_t iw = 0; iw < w; ++iw) {
            const int64_t depth_px = ((in_ * h + ih) * w + iw) * cd;
            for (int64_t j = 0; j < bs; ++j) {
              const int64_t space_px = ((in_ * space[1] + ih * bs + i) * sw + iw * bs + j) * c;
              if (b.crd) {  // DepthToSpace only.
                const E* src = x + depth_px + i * bs + j;
                E* dst = y + space_px;
                for (int64_t ic = 0; ic < c; ++ic) dst[ic] = src[ic * bs * bs];
              } else {
                const int64_t run = depth_px + (i * bs + j) * c;
                if (kDepthToSpace) {
                  std::memcpy(y + space_px, x + run, sizeof(E) * c);
                } else {
                  std::memcpy(y + run, x + space_px, sizeof(E) * c);
                }
              }
            }
          }
        }
      });
      return OkStatus();
    });
  }
};

}  // namespace

Status AddDepthSpaceOpDefs(KernelRegistry& registry) {
  for (OpDef def : {BlockDef<true>(), BlockDef<false>()}) {
    REMEX_RETURN_IF_ERROR(registry.AddOp(std::move(def)));
  }
  return OkStatus();
}

Status AddDepthSpaceCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BlockKernel<true>>(registry, "DepthToSpace"));
  return AddCpuKernel<BlockKernel<false>>(registry, "SpaceToDepth");
}

}  // namespace remex::kernels::internal
