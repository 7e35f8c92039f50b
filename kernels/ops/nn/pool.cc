// Pooling: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool and LRN.
//
// AveragePool (https://onnx.ai/onnx/operators/onnx__AveragePool.html), opsets 7, 10, 11:
//   X float16/float32/float64 [N, C, D1 (, D2 (, D3))] -> Y [N, C, O1 (, O2 (, O3))].
//   Attributes: kernel_shape (required), strides, pads, auto_pad (NOTSET, SAME_UPPER,
//   SAME_LOWER, VALID), ceil_mode (opset 10+), count_include_pad (default 0: the
//   divisor counts the window positions inside X; 1: it also counts those in the pads,
//   not those past the end pad that ceil_mode adds). `dilations` (opset 19) is honoured
//   when present.
//
// The layout pass's internal attribute `layout` (never ONNX's; "NCHW" by default): with
// "NHWC", MaxPool (without Indices) and AveragePool take a 4-D X [N, H, W, C] and give
// Y [N, OH, OW, C], GlobalAveragePool X [N, H, W, C] and Y [N, 1, 1, C]; the values are
// the NCHW kernels' (GlobalAveragePool's sums in another order). The CUDA kernels refuse
// it (kernels/ops/nn/cuda/pool.cc). float16 MaxPool runs the float32 loops on float32
// copies (kernels/float32_copies.h; widening is exact and monotonic: the same maxima).
//
// LpPool (https://onnx.ai/onnx/operators/onnx__LpPool.html), opsets 2 and 11 (one entry:
// 11 changed no semantics Remex implements):
//   X float16/float32/float64 [N, C, D1 (, D2 (, D3))] -> Y [N, C, O1 (, O2 (, O3))],
//   Y = (sum over the window's positions inside X of |x|^p)^(1/p): positions in the pads
//   add nothing (kernels/ops/nn/lp_ops.h). Attributes: kernel_shape (required), strides,
//   pads, auto_pad, p (default 2, in [1, 64]). Accumulated in float32 for every dtype,
//   in window order, as the CUDA kernel does.
//
// LRN (https://onnx.ai/onnx/operators/onnx__LRN.html), opsets 1 and 13:
//   X float16/float32/float64 [N, C, ...] -> Y of the same shape,
//   Y[n, c, ...] = X[n, c, ...] / (bias + alpha / size * sum(X[n, c', ...]^2))^beta over
//   c' in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] inside [0, C).
//   Attributes: size (required, >= 1), alpha (1e-4), beta (0.75), bias (1.0).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernels/float32_copies.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/conv_common.h"  // the layout attribute
#include "kernels/ops/nn/lp_ops.h"
#include "kernels/ops/nn/lp_pool_attrs.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kMaxPool = "MaxPool";
// Window taps per compute thread at least (smaller pools run on the calling thread).
constexpr int64_t kGrainTaps = 32768;
constexpr std::string_view kGlobalAveragePool = "GlobalAveragePool";
constexpr std::string_view kAveragePool = "AveragePool";
constexpr std::string_view kLrn = "LRN";

// The channels-last pools' reductions of one output position over its window's taps
// inside X (`taps`: each tap's `channels` contiguous floats), for float32: 64 channels
// at a time in four 16-float vectors held in registers, built for the CPU's vector
// extensions. The same values as the kernels' loops below, in the same order:
// - PoolTapsMax: y = the first tap, then each later tap where greater (a NaN tap is passed
//   over unless first); no taps: -inf.
// - PoolTapsMean: y = (0 + tap 0 + tap 1 + ...) / divisor.
using PoolVector = float __attribute__((vector_size(64)));
// The four vectors v0..v3 of 64 floats at p, and their store.
#define REMEX_POOL_LOAD4(v, p)       \
  PoolVector v##0, v##1, v##2, v##3; \
  std::memcpy(&v##0, (p), 64);       \
  std::memcpy(&v##1, (p) + 16, 64);  \
  std::memcpy(&v##2, (p) + 32, 64);  \
  std::memcpy(&v##3, (p) + 48, 64)
#define REMEX_POOL_STORE4(p, v)     \
  std::memcpy((p), &v##0, 64);      \
  std::memcpy((p) + 16, &v##1, 64); \
  std::memcpy((p) + 32, &v##2, 64); \
  std::memcpy((p) + 48, &v##3, 64)

REMEX_CPU_CLONES void PoolTapsMax(const float* const* taps, int64_t ntaps, int64_t channels, float* y) {
  int64_t c = 0;
  if (ntaps == 0) {
    for (; c < channels; ++c) y[c] = -std::numeric_limits<float>::infinity();
    return;
  }
  for (; c + 64 <= channels; c += 64) {
    REMEX_POOL_LOAD4(best, taps[0] + c);
    for (int64_t t = 1; t < ntaps; ++t) {
      REMEX_POOL_LOAD4(v, taps[t] + c);
      best0 = v0 > best0 ? v0 : best0;
      best1 = v1 > best1 ? v1 : best1;
      best2 = v2 > best2 ? v2 : best2;
      best3 = v3 > best3 ? v3 : best3;
    }
    REMEX_POOL_STORE4(y + c, best);
  }
  for (; c < channels; ++c) {
    float best = taps[0][c];
    for (int64_t t = 1; t < ntaps; ++t) best = taps[t][c] > best ? taps[t][c] : best;
    y[c] = best;
  }
}

REMEX_CPU_CLONES void PoolTapsMean(const float* const* taps, int64_t ntaps, int64_t channels, float divisor,
                                   float* y) {
  int64_t c = 0;
  for (; c + 64 <= channels; c += 64) {
    PoolVector sum0 = {}, sum1 = {}, sum2 = {}, sum3 = {};
    for (int64_t t = 0; t < ntaps; ++t) {
      REMEX_POOL_LOAD4(v, taps[t] + c);
      sum0 += v0;
      sum1 += v1;
      sum2 += v2;
      sum3 += v3;
    }
    sum0 /= divisor;
    sum1 /= divisor;
    sum2 /= divisor;
    sum3 /= divisor;
    REMEX_POOL_STORE4(y + c, sum);
  }
  for (; c < channels; ++c) {
    float sum = 0;
    for (int64_t t = 0; t < ntaps; ++t) sum += taps[t][c];
    y[c] = sum / divisor;
  }
}
#undef REMEX_POOL_LOAD4
#undef REMEX_POOL_STORE4

}  // namespace

StatusOr<MaxPoolAttrs> ParseMaxPoolAttrs(const Attributes& attrs) {
  MaxPoolAttrs p;
  REMEX_ASSIGN_OR_RETURN(p.window, ParseWindowAttrs(kMaxPool, attrs, /*with_ceil_mode=*/true));
  if (p.window.kernel_shape.empty()) return OpError(kMaxPool, "kernel_shape is required");
  StatusOr<int64_t> order = attrs.Int("storage_order", 0);
  if (!order.ok()) return OpError(kMaxPool, order.status().message());
  if (*order != 0 && *order != 1) return OpError(kMaxPool, "storage_order must be 0 or 1");
  p.storage_order = *order;
  return p;
}

namespace {

// Geometry of a MaxPool or AveragePool window over X [N, C, D1 (, D2 (, D3))]; the
// caller has checked X's dtype.
StatusOr<WindowGeometry> PoolGeometry(std::string_view op, const WindowAttrs& window,
                                      const ShapeFnArg& x) {
  const size_t nsp = window.kernel_shape.size();
  if (x.shape.size() != nsp + 2) {
    return OpError(op, "X " + ShapeToString(x.shape) + " must have rank " +
                           std::to_string(nsp + 2) + " for kernel_shape of " +
                           std::to_string(nsp) + " dims");
  }
  if (nsp < 1 || nsp > 3) return OpError(op, "supports 1-D to 3-D pooling");
  std::span<const int64_t> spatial(x.shape.data() + 2, nsp);
  return ComputeWindowGeometry(op, window, spatial, window.kernel_shape);
}

// Y's shape [N, C, O1 (, O2 (, O3))] for X [N, C, ...] and geometry `g`.
Shape PoolOutputShape(const Shape& x, const WindowGeometry& g) {
  Shape out = {x[0], x[1]};
  out.insert(out.end(), g.output.begin(), g.output.end());
  return out;
}

// The windows of a pooling over X with geometry `g`, the spatial dims padded to 3
// with leading extent-1 dims. Per dim j and output index o, the window's in-bounds
// input positions are taps[j][tap_begin[j][o]] .. taps[j][tap_begin[j][o + 1] - 1],
// and padded[j][o] counts its positions inside X or its pads.
struct PoolWindows {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t planes = 0, in_plane = 0, out_plane = 0;  // N * C and the per-plane sizes.
  std::vector<int64_t> taps[3], tap_begin[3], padded[3];
};

PoolWindows MakePoolWindows(const Shape& x, const WindowGeometry& g) {
  PoolWindows w;
  const size_t nsp = g.kernel.size();
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0},
          pe[3] = {0, 0, 0};
  for (size_t i = 0; i < nsp; ++i) {
    const size_t j = 3 - nsp + i;
    w.in[j] = x[2 + i];
    w.out[j] = g.output[i];
    k[j] = g.kernel[i];
    s[j] = g.strides[i];
    d[j] = g.dilations[i];
    pb[j] = g.pad_begin[i];
    pe[j] = g.pad_end[i];
  }
  w.planes = x[0] * x[1];
  w.in_plane = w.in[0] * w.in[1] * w.in[2];
  w.out_plane = w.out[0] * w.out[1] * w.out[2];
  for (int j = 0; j < 3; ++j) {
    for (int64_t o = 0; o < w.out[j]; ++o) {
      w.tap_begin[j].push_back(static_cast<int64_t>(w.taps[j].size()));
      int64_t padded = 0;
      for (int64_t kk = 0; kk < k[j]; ++kk) {
        const int64_t i = o * s[j] - pb[j] + kk * d[j];
        if (i >= 0 && i < w.in[j]) w.taps[j].push_back(i);
        if (i >= -pb[j] && i < w.in[j] + pe[j]) ++padded;
      }
      w.padded[j].push_back(padded);
    }
    w.tap_begin[j].push_back(static_cast<int64_t>(w.taps[j].size()));
  }
  return w;
}

// Folds each window of every plane (runs of planes on the compute threads): for output
// position (o0, o1, o2), acc = add(acc, v) over the window's values inside X in row-major
// order, starting from `zero`, then y = finish(acc, o0, o1, o2). AveragePool and LpPool
// differ only in add and finish (as their CUDA kernels share ForEachWindowTap,
// cuda/pool_impl.cu).
template <typename T, typename Acc, typename Add, typename Finish>
void FoldPoolWindows(const PoolWindows& w, const WindowGeometry& g, const T* x, T* y, Acc zero, Add add,
                     Finish finish) {
  const int64_t *in = w.in, *out = w.out;
  const auto& taps = w.taps;
  const auto& tap_begin = w.tap_begin;
  int64_t window = 1;
  for (int64_t k : g.kernel) window *= k;
  const int64_t grain = std::max<int64_t>(1, kGrainTaps / std::max<int64_t>(1, w.out_plane * window));
  ParallelFor(w.planes, grain, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xplane = x + p * w.in_plane;
      T* yplane = y + p * w.out_plane;
      int64_t o = 0;
      for (int64_t o0 = 0; o0 < out[0]; ++o0) {
        for (int64_t o1 = 0; o1 < out[1]; ++o1) {
          for (int64_t o2 = 0; o2 < out[2]; ++o2, ++o) {
            Acc acc = zero;
            for (int64_t t0 = tap_begin[0][o0]; t0 < tap_begin[0][o0 + 1]; ++t0) {
              for (int64_t t1 = tap_begin[1][o1]; t1 < tap_begin[1][o1 + 1]; ++t1) {
                const T* row = xplane + (taps[0][t0] * in[1] + taps[1][t1]) * in[2];
                for (int64_t t2 = tap_begin[2][o2]; t2 < tap_begin[2][o2 + 1]; ++t2) {
                  acc = add(acc, row[taps[2][t2]]);
                }
              }
            }
            yplane[o] = finish(acc, o0, o1, o2);
          }
        }
      }
    }
  });
}

bool MaxPoolType(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 ||
         dt == DType::kInt8 || dt == DType::kUint8;
}

StatusOr<WindowGeometry> MaxPoolGeometry(const MaxPoolAttrs& p, const ShapeFnArg& x) {
  if (!MaxPoolType(x.dtype)) {
    return OpError(kMaxPool, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  return PoolGeometry(kMaxPool, p.window, x);
}

// The layout pass's `layout` "NHWC" (conv_common.h ParseChannelsLast) of MaxPool and
// AveragePool: X and Y [N, H, W, C], 2-D windows, no Indices. The CPU kernels only; the
// CUDA kernels refuse it.
StatusOr<bool> ParsePoolChannelsLast(std::string_view op, const Attributes& attrs, size_t rank) {
  REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(op, attrs));
  if (channels_last && rank != 4) return OpError(op, "layout NHWC takes a 4-D X");
  return channels_last;
}

// `x` with its NHWC shape as the NCHW one.
ShapeFnArg ToChannelsFirstArg(ShapeFnArg x) {
  x.shape = ToChannelsFirst(x.shape);
  return x;
}

StatusOr<std::vector<TensorInfo>> InferMaxPool(const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(kMaxPool, "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(MaxPoolAttrs p, ParseMaxPoolAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(bool channels_last, ParsePoolChannelsLast(kMaxPool, attrs, in[0].shape.size()));
  if (channels_last) {
    ShapeFnArg first = in[0];
    first.shape = ToChannelsFirst(in[0].shape);
    REMEX_ASSIGN_OR_RETURN(WindowGeometry g, MaxPoolGeometry(p, first));
    const Shape out = ToChannelsLast(PoolOutputShape(first.shape, g));
    return std::vector<TensorInfo>{{in[0].dtype, out}};
  }
  REMEX_ASSIGN_OR_RETURN(WindowGeometry g, MaxPoolGeometry(p, in[0]));
  const Shape out = PoolOutputShape(in[0].shape, g);
  return std::vector<TensorInfo>{{in[0].dtype, out}, {DType::kInt64, out}};
}

OpDef MaxPoolDef() {
  OpDef def;
  def.name = std::string(kMaxPool);
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.empty() ? DType::kUndefined : in[0], DType::kInt64};  // Y, Indices
  };
  def.max_outputs = 2;
  def.infer = InferMaxPool;
  return def;
}

class MaxPoolKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<MaxPoolKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(MaxPoolAttrs parsed, ParseMaxPoolAttrs(attrs));
    REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(kMaxPool, attrs));
    return std::make_unique<MaxPoolKernel>(def, attrs, std::move(parsed), channels_last);
  }
  MaxPoolKernel(const OpDef& def, const Attributes& attrs, MaxPoolAttrs parsed, bool channels_last)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)), channels_last_(channels_last) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      // Through float32 copies (widening is exact and monotonic, so the same maxima),
      // the float32 loops being vectorised where float16's convert every element.
      return RunAsFloat32(in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); });
    }
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    if (channels_last_) {
      if (out.size() > 1) return OpError(kMaxPool, "layout NHWC gives no Indices");
      REMEX_RETURN_IF_ERROR(ParsePoolChannelsLast(kMaxPool, attrs(), in[0].shape.size()).status());
      args[0].shape = ToChannelsFirst(in[0].shape);
      REMEX_ASSIGN_OR_RETURN(WindowGeometry g, MaxPoolGeometry(attrs_, args[0]));
      return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        PoolChannelsLast<T>(in[0], g, DataAs<T>(out[0]), out[0].shape);
        return OkStatus();
      });
    }
    REMEX_ASSIGN_OR_RETURN(WindowGeometry g, MaxPoolGeometry(attrs_, args[0]));
    int64_t* indices = out.size() > 1 ? DataAs<int64_t>(out[1]) : nullptr;
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Pool<T>(in[0], g, DataAs<T>(out[0]), indices);
      return OkStatus();
    });
  }

 private:
  // X [N, H, W, C] into y [N, OH, OW, C]: per output position the window's first tap,
  // then any greater (the loop of Pool below, so the same values, NaN rule included),
  // over all C channels at once (contiguous: vectorised).
  template <typename T>
  void PoolChannelsLast(const TensorRef& x, const WindowGeometry& g, T* y, const Shape& y_shape) const {
    // Integers compare as themselves (vectorised over C); floats in their compute type.
    using C = std::conditional_t<std::is_integral_v<T>, T, ComputeType<T>>;
    const int64_t n = x.shape[0], h = x.shape[1], wd = x.shape[2], ch = x.shape[3];
    const int64_t oh_n = y_shape[1], ow_n = y_shape[2];
    const int64_t kh = g.kernel[0], kw = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
    const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
    const T* xp = DataAs<const T>(x);
    const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                          : std::numeric_limits<C>::lowest();
    const int64_t grain = std::max<int64_t>(1, kGrainTaps / std::max<int64_t>(1, ow_n * kh * kw * ch));
    if constexpr (std::is_same_v<T, float>) {
      ParallelFor(n * oh_n, grain, [&](int64_t r0, int64_t r1, int) {
        std::vector<const float*> taps(static_cast<size_t>(kh * kw));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t b = r / oh_n, oh = r % oh_n;
          for (int64_t ow = 0; ow < ow_n; ++ow) {
            int64_t ntaps = 0;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t ih = oh * sh - ph + i * dh;
              if (ih < 0 || ih >= h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iw = ow * sw - pw + j * dw;
                if (iw >= 0 && iw < wd) taps[ntaps++] = xp + ((b * h + ih) * wd + iw) * ch;
              }
            }
            PoolTapsMax(taps.data(), ntaps, ch, y + ((b * oh_n + oh) * ow_n + ow) * ch);
          }
        }
      });
      return;
    }
    ParallelFor(n * oh_n, grain, [&](int64_t r0, int64_t r1, int) {
      // Locals, not the captured references: a uint8 store may alias anything, and the
      // loops below would read their bound again after every byte.
      const int64_t channels = ch;
      std::vector<C> best_row(static_cast<size_t>(channels));
      C* __restrict best = best_row.data();
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / oh_n, oh = r % oh_n;
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          bool first = true;
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t ih = oh * sh - ph + i * dh;
            if (ih < 0 || ih >= h) continue;
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t iw = ow * sw - pw + j * dw;
              if (iw < 0 || iw >= wd) continue;
              const T* __restrict px = xp + ((b * h + ih) * wd + iw) * channels;
              if (first) {
                for (int64_t c = 0; c < channels; ++c) best[c] = static_cast<C>(Load(px[c]));
                first = false;
              } else {
                if constexpr (std::is_integral_v<C>) {
                  for (int64_t c = 0; c < channels; ++c) best[c] = std::max(best[c], px[c]);  // pmaxub
                } else {
                  for (int64_t c = 0; c < channels; ++c) {
                    const C v = Load(px[c]);
                    best[c] = v > best[c] ? v : best[c];
                  }
                }
              }
            }
          }
          T* __restrict py = y + ((b * oh_n + oh) * ow_n + ow) * channels;
          for (int64_t c = 0; c < channels; ++c) py[c] = first ? Store<T>(lowest) : Store<T>(best[c]);
        }
      }
    });
  }

  template <typename T>
  void Pool(const TensorRef& x, const WindowGeometry& g, T* y, int64_t* indices) const {
    using C = ComputeType<T>;
    const PoolWindows w = MakePoolWindows(x.shape, g);
    const size_t nsp = g.kernel.size();
    const int64_t *in = w.in, *out = w.out;
    const int64_t planes = w.planes, in_plane = w.in_plane, out_plane = w.out_plane;
    const auto& taps = w.taps;
    const auto& tap_begin = w.tap_begin;
    // Column-major (storage_order 1) strides over the real spatial dims.
    int64_t cm_stride[3] = {0, 0, 0};
    {
      int64_t acc = 1;
      for (size_t i = 0; i < nsp; ++i) {
        cm_stride[3 - nsp + i] = acc;
        acc *= in[3 - nsp + i];
      }
    }
    const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                          : std::numeric_limits<C>::lowest();
    const T* xp = DataAs<const T>(x);
    // Planes are independent: the compute threads take runs of them.
    int64_t window = 1;
    for (size_t i = 0; i < nsp; ++i) window *= g.kernel[i];
    const int64_t grain = std::max<int64_t>(1, kGrainTaps / std::max<int64_t>(1, out_plane * window));
    if (!indices && nsp == 2 && g.dilations[0] == 1 && g.dilations[1] == 1) {
      // 2-D without Indices or dilation: each window is a clamped rectangle, read
      // directly (same order and NaN rule as below: the first tap, then any greater).
      const int64_t h = in[1], wd = in[2], kh = g.kernel[0], kw = g.kernel[1];
      const int64_t sh = g.strides[0], sw = g.strides[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
      // Separably: per output row, the maximum down each input column of its window
      // rows (contiguous, vectorised), then across each window's columns of that row.
      // NaNs never win either step; a NaN first tap (the window's top left) is the
      // window's maximum, as below. Ties are taken in another order: where +0 and -0
      // tie for the maximum, its sign may differ from the loop below.
      // Windows whose kw columns all lie inside X start at columns [0, span). Where they
      // overlap (stride below kw, at most 4: MaxPool 3x3 stride 2), every start's maximum
      // is taken at once in kw vectorised passes; else each window's own, as below.
      const int64_t span = sw < kw && sw <= 4 ? std::max<int64_t>(wd - kw + 1, 0) : 0;
      ParallelFor(planes, grain, [&](int64_t p0, int64_t p1, int) {
        std::vector<C> cols_row(static_cast<size_t>(wd)), slide_row(static_cast<size_t>(span));
        C* __restrict cols = cols_row.data();
        C* __restrict slide = slide_row.data();
        const int64_t width = wd, kw_local = kw, span_local = span;  // locals: a uint8 store may alias them
        for (int64_t p = p0; p < p1; ++p) {
          const T* xplane = xp + p * in_plane;
          T* yplane = y + p * out_plane;
          for (int64_t oh = 0; oh < out[1]; ++oh) {
            const int64_t h0 = std::max<int64_t>(oh * sh - ph, 0), h1 = std::min(oh * sh - ph + kh, h);
            std::fill(cols, cols + width, lowest);
            for (int64_t i = h0; i < h1; ++i) {
              const T* __restrict row = xplane + i * width;
              for (int64_t j = 0; j < width; ++j) {
                const C v = Load(row[j]);
                cols[j] = v > cols[j] ? v : cols[j];
              }
            }
            // The maximum of each whole window's columns, in the same order as the loop
            // below, kw passes over all of them at once (vectorised).
            std::fill(slide, slide + span_local, lowest);
            for (int64_t t = 0; t < kw_local; ++t) {
              for (int64_t j = 0; j < span_local; ++j) slide[j] = cols[j + t] > slide[j] ? cols[j + t] : slide[j];
            }
            for (int64_t ow = 0; ow < out[2]; ++ow) {
              const int64_t start = ow * sw - pw;
              const int64_t w0 = std::max<int64_t>(start, 0), w1 = std::min(start + kw, wd);
              C best = lowest;
              if (start >= 0 && start < span) {
                best = slide[start];
              } else {
                for (int64_t j = w0; j < w1; ++j) best = cols[j] > best ? cols[j] : best;
              }
              if (h0 < h1 && w0 < w1) {
                const C first = Load(xplane[h0 * wd + w0]);
                if (first != first) best = first;
              }
              yplane[oh * out[2] + ow] = Store<T>(best);
            }
          }
        }
      });
      return;
    }
    ParallelFor(planes, grain, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xplane = xp + p * in_plane;
      T* yplane = y + p * out_plane;
      int64_t* iplane = indices ? indices + p * out_plane : nullptr;
      int64_t o = 0;
      for (int64_t o0 = 0; o0 < out[0]; ++o0) {
        for (int64_t o1 = 0; o1 < out[1]; ++o1) {
          for (int64_t o2 = 0; o2 < out[2]; ++o2, ++o) {
            C best = lowest;
            int64_t best_off = -1;  // Row-major offset in the plane.
            for (int64_t t0 = tap_begin[0][o0]; t0 < tap_begin[0][o0 + 1]; ++t0) {
              for (int64_t t1 = tap_begin[1][o1]; t1 < tap_begin[1][o1 + 1]; ++t1) {
                const int64_t row_off = (taps[0][t0] * in[1] + taps[1][t1]) * in[2];
                const T* row = xplane + row_off;
                for (int64_t t2 = tap_begin[2][o2]; t2 < tap_begin[2][o2 + 1]; ++t2) {
                  // The first tap, then any greater one (a NaN first tap stays), as
                  // selects rather than branches.
                  const C v = Load(row[taps[2][t2]]);
                  const bool take = best_off < 0 || v > best;
                  best = take ? v : best;
                  best_off = take ? row_off + taps[2][t2] : best_off;
                }
              }
            }
            yplane[o] = Store<T>(best);
            if (iplane) {
              int64_t idx = -1;
              if (best_off >= 0) {
                if (attrs_.storage_order == 0) {
                  idx = best_off;
                } else {
                  const int64_t i2 = best_off % in[2];
                  const int64_t i1 = (best_off / in[2]) % in[1];
                  const int64_t i0 = best_off / (in[2] * in[1]);
                  idx = i0 * cm_stride[0] + i1 * cm_stride[1] + i2 * cm_stride[2];
                }
                idx += p * in_plane;
              }
              iplane[o] = idx;
            }
          }
        }
      }
    }
    });
  }

  MaxPoolAttrs attrs_;
  bool channels_last_ = false;
};

// ---------------------------------------------------------------------------

// GlobalAveragePool and GlobalMaxPool (opset 1): X [N, C, D1, ...] (rank >= 3, float)
// -> [N, C, 1, ...], the mean or the maximum of each (n, c) plane. The maximum is NaN
// when the plane holds a NaN (numpy.max); an empty plane gives NaN for both.
StatusOr<std::vector<TensorInfo>> InferGlobalPool(std::string_view op, std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(op, "expects 1 input");
  if (!IsFloatType(in[0].dtype)) {
    return OpError(op, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  }
  if (in[0].shape.size() < 3) {
    return OpError(op, "X must have rank >= 3, got " + ShapeToString(in[0].shape));
  }
  Shape out = in[0].shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

class GlobalMaxPoolKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t planes = in[0].shape[0] * in[0].shape[1];
    const int64_t size = *NumElements(in[0].shape) / (planes == 0 ? 1 : planes);
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      for (int64_t p = 0; p < planes; ++p) {
        C m = size == 0 ? std::numeric_limits<C>::quiet_NaN() : -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < size; ++i) {
          const C v = Load(x[p * size + i]);
          if (std::isnan(v) || v > m) m = v;
          if (std::isnan(m)) break;
        }
        y[p] = Store<T>(m);
      }
      return OkStatus();
    });
  }
};

// Y[plane] = reduce(plane) for each (n, c) plane of X (`size` values each), where
// reduce(const T* row, int64_t size) returns the value in its compute type: the loop of
// GlobalAveragePool and GlobalLpPool.
template <typename Reduce>
Status ReducePlanes(std::string_view op, std::span<const TensorRef> in, std::span<const TensorRef> out,
                    Reduce reduce) {
  const int64_t planes = in[0].shape[0] * in[0].shape[1];
  const int64_t size = *NumElements(in[0].shape) / (planes == 0 ? 1 : planes);
  return DispatchFloat(op, in[0].dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* x = DataAs<const T>(in[0]);
    T* y = DataAs<T>(out[0]);
    for (int64_t p = 0; p < planes; ++p) y[p] = Store<T>(static_cast<ComputeType<T>>(reduce(x + p * size, size)));
    return OkStatus();
  });
}

class GlobalAveragePoolKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<GlobalAveragePoolKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(kGlobalAveragePool, attrs));
    return std::make_unique<GlobalAveragePoolKernel>(def, attrs, channels_last);
  }
  GlobalAveragePoolKernel(const OpDef& def, const Attributes& attrs, bool channels_last)
      : ValidatedKernel(def, attrs), channels_last_(channels_last) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (channels_last_) {
      // X [N, H, W, C]: per image, the sum over its H * W positions of every channel at
      // once (contiguous: vectorised), in double, then the mean.
      const int64_t n = in[0].shape[0], positions = in[0].shape[1] * in[0].shape[2], ch = in[0].shape[3];
      return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        const T* x = DataAs<const T>(in[0]);
        T* y = DataAs<T>(out[0]);
        std::vector<double> sum(static_cast<size_t>(ch));
        for (int64_t b = 0; b < n; ++b) {
          std::fill(sum.begin(), sum.end(), 0.0);
          for (int64_t p = 0; p < positions; ++p) {
            const T* row = x + (b * positions + p) * ch;
            for (int64_t c = 0; c < ch; ++c) sum[c] += static_cast<double>(Load(row[c]));
          }
          for (int64_t c = 0; c < ch; ++c) {
            const double mean = positions == 0 ? std::numeric_limits<double>::quiet_NaN() : sum[c] / positions;
            y[b * ch + c] = Store<T>(static_cast<ComputeType<T>>(mean));
          }
        }
        return OkStatus();
      });
    }
    return ReducePlanes(op(), in, out, [](const auto* row, int64_t size) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(row)>>;
      double sum = 0;
      int64_t i = 0;
      if constexpr (std::is_same_v<T, float>) {
        // Sixteen independent float partial sums vectorise; each holds a sixteenth of the
        // plane and they are added up in double.
        constexpr int kLanes = 16;
        float lanes[kLanes] = {};
        for (; i + kLanes <= size; i += kLanes) {
          for (int j = 0; j < kLanes; ++j) lanes[j] += row[i + j];
        }
        for (int j = 0; j < kLanes; ++j) sum += lanes[j];
      }
      for (; i < size; ++i) sum += static_cast<double>(Load(row[i]));
      return size == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / size;
    });
  }

 private:
  const bool channels_last_;
};

OpDef GlobalPoolDef(std::string_view op) {
  OpDef def;
  def.name = std::string(op);
  def.infer = [op](const Attributes&, std::span<const ShapeFnArg> in) { return InferGlobalPool(op, in); };
  return def;
}
// GlobalLpPool-2: the Lp norm of each (n, c) plane (kernels/ops/nn/lp_ops.h), p an integer
// attribute >= 1 (default 2); float types, accumulated in float as on the device.
class GlobalLpPoolKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<GlobalLpPoolKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(int parsed, ParseGlobalLpPoolP(attrs));
    return std::make_unique<GlobalLpPoolKernel>(def, attrs, std::move(parsed));
  }
  GlobalLpPoolKernel(const OpDef& def, const Attributes& attrs, int parsed)
      : ValidatedKernel(def, attrs), p_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return ReducePlanes(op(), in, out, [this](const auto* row, int64_t size) {
      double sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += lp::LpTerm(static_cast<float>(Load(row[i])), p_);
      return static_cast<double>(lp::LpRoot(static_cast<float>(sum), p_));
    });
  }

 private:
  const int p_;
};

OpDef GlobalLpPoolDef() {
  OpDef def = GlobalPoolDef("GlobalLpPool");
  def.since_version = 2;
  return def;
}

// GlobalAveragePool also takes the layout pass's `layout` "NHWC" (the CPU kernel only):
// X [N, H, W, C] -> Y [N, 1, 1, C].
OpDef GlobalAveragePoolDef() {
  OpDef def = GlobalPoolDef(kGlobalAveragePool);
  def.infer = [](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(kGlobalAveragePool, attrs));
    if (!channels_last) return InferGlobalPool(kGlobalAveragePool, in);
    if (in.size() != 1) return OpError(kGlobalAveragePool, "expects 1 input");
    if (in[0].shape.size() != 4) return OpError(kGlobalAveragePool, "layout NHWC takes a 4-D X");
    REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> out,
                           InferGlobalPool(kGlobalAveragePool, std::vector<ShapeFnArg>{ToChannelsFirstArg(in[0])}));
    out[0].shape = ToChannelsLast(out[0].shape);
    return out;
  };
  return def;
}
OpDef GlobalMaxPoolDef() { return GlobalPoolDef("GlobalMaxPool"); }

// ---------------------------------------------------------------------------
// AveragePool.

}  // namespace

StatusOr<int> ParseGlobalLpPoolP(const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(int64_t p, attrs.Int("p", 2));
  if (p < 1 || p > 64) return OpError("GlobalLpPool", "p must be in [1, 64], got " + std::to_string(p));
  return static_cast<int>(p);
}

StatusOr<AveragePoolAttrs> ParseAveragePoolAttrs(const Attributes& attrs) {
  AveragePoolAttrs p;
  REMEX_ASSIGN_OR_RETURN(p.window, ParseWindowAttrs(kAveragePool, attrs, /*with_ceil_mode=*/true));
  if (p.window.kernel_shape.empty()) return OpError(kAveragePool, "kernel_shape is required");
  StatusOr<int64_t> cip = attrs.Int("count_include_pad", 0);
  if (!cip.ok()) return OpError(kAveragePool, cip.status().message());
  if (*cip != 0 && *cip != 1) return OpError(kAveragePool, "count_include_pad must be 0 or 1");
  p.count_include_pad = *cip == 1;
  return p;
}

namespace {

StatusOr<WindowGeometry> AveragePoolGeometry(const AveragePoolAttrs& p, const ShapeFnArg& x) {
  if (!IsFloatType(x.dtype)) {
    return OpError(kAveragePool, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  return PoolGeometry(kAveragePool, p.window, x);
}

StatusOr<std::vector<TensorInfo>> InferAveragePool(const Attributes& attrs,
                                                   std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(kAveragePool, "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(AveragePoolAttrs p, ParseAveragePoolAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(bool channels_last, ParsePoolChannelsLast(kAveragePool, attrs, in[0].shape.size()));
  if (channels_last) {
    const ShapeFnArg first = ToChannelsFirstArg(in[0]);
    REMEX_ASSIGN_OR_RETURN(WindowGeometry g, AveragePoolGeometry(p, first));
    return std::vector<TensorInfo>{{in[0].dtype, ToChannelsLast(PoolOutputShape(first.shape, g))}};
  }
  REMEX_ASSIGN_OR_RETURN(WindowGeometry g, AveragePoolGeometry(p, in[0]));
  return std::vector<TensorInfo>{{in[0].dtype, PoolOutputShape(in[0].shape, g)}};
}

OpDef AveragePoolDef() {
  OpDef def;
  def.name = std::string(kAveragePool);
  def.since_version = 7;
  def.infer = InferAveragePool;
  return def;
}

class AveragePoolKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<AveragePoolKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(AveragePoolAttrs parsed, ParseAveragePoolAttrs(attrs));
    REMEX_ASSIGN_OR_RETURN(bool channels_last, ParseChannelsLast(kAveragePool, attrs));
    return std::make_unique<AveragePoolKernel>(def, attrs, std::move(parsed), channels_last);
  }
  AveragePoolKernel(const OpDef& def, const Attributes& attrs, AveragePoolAttrs parsed, bool channels_last)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)), channels_last_(channels_last) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    if (channels_last_) {
      REMEX_RETURN_IF_ERROR(ParsePoolChannelsLast(kAveragePool, attrs(), in[0].shape.size()).status());
      args[0] = ToChannelsFirstArg(args[0]);
      REMEX_ASSIGN_OR_RETURN(WindowGeometry g, AveragePoolGeometry(attrs_, args[0]));
      return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        PoolNhwc<T>(in[0], args[0].shape, g, DataAs<T>(out[0]));
        return OkStatus();
      });
    }
    REMEX_ASSIGN_OR_RETURN(WindowGeometry g, AveragePoolGeometry(attrs_, args[0]));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Pool<T>(in[0], g, DataAs<T>(out[0]));
      return OkStatus();
    });
  }

 private:
  template <typename T>
  void Pool(const TensorRef& x, const WindowGeometry& g, T* y) const {
    using C = ComputeType<T>;
    const PoolWindows w = MakePoolWindows(x.shape, g);
    // Per dim and output index, how many window positions the divisor counts.
    std::vector<int64_t> counted[3];
    for (int j = 0; j < 3; ++j) {
      for (int64_t o = 0; o < w.out[j]; ++o) {
        counted[j].push_back(attrs_.count_include_pad ? w.padded[j][o]
                                                      : w.tap_begin[j][o + 1] - w.tap_begin[j][o]);
      }
    }
    // Along the innermost dim, tap j of the window of output o reads input o * s - p +
    // j * d; outputs [lo[j], hi[j]) have it inside X.
    const size_t nsp = g.kernel.size();
    const int64_t k = g.kernel[nsp - 1], s = g.strides[nsp - 1], d = g.dilations[nsp - 1];
    const int64_t p = g.pad_begin[nsp - 1], in2 = w.in[2], out2 = w.out[2];
    std::vector<int64_t> lo(static_cast<size_t>(k), out2), hi(static_cast<size_t>(k), 0);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t o = 0; o < out2; ++o) {
        const int64_t i = o * s - p + j * d;
        if (i < 0 || i >= in2) continue;
        lo[j] = std::min(lo[j], o);
        hi[j] = o + 1;
      }
    }
    const T* xp = DataAs<const T>(x);
    int64_t window = 1;
    for (int64_t kk : g.kernel) window *= kk;
    const int64_t grain = std::max<int64_t>(1, kGrainTaps / std::max<int64_t>(1, w.out_plane * window));
    // Per row of outputs, the sums of all its windows at once: each in-bounds tap row,
    // then each tap column, added over the row's outputs that have it inside X (a
    // strided run, vectorised). Each window's taps are thus added in row-major order,
    // as FoldPoolWindows adds them, and divided by the same count.
    ParallelFor(w.planes, grain, [&](int64_t p0, int64_t p1, int) {
      std::vector<C> sum_row(static_cast<size_t>(out2));
      C* __restrict sum = sum_row.data();
      for (int64_t plane = p0; plane < p1; ++plane) {
        const T* xplane = xp + plane * w.in_plane;
        T* yplane = y + plane * w.out_plane;
        for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
          for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
            std::fill(sum, sum + out2, C(0));
            for (int64_t t0 = w.tap_begin[0][o0]; t0 < w.tap_begin[0][o0 + 1]; ++t0) {
              for (int64_t t1 = w.tap_begin[1][o1]; t1 < w.tap_begin[1][o1 + 1]; ++t1) {
                const T* __restrict row = xplane + (w.taps[0][t0] * w.in[1] + w.taps[1][t1]) * in2;
                for (int64_t j = 0; j < k; ++j) {
                  const int64_t off = j * d - p;
                  for (int64_t o = lo[j]; o < hi[j]; ++o) sum[o] += Load(row[o * s + off]);
                }
              }
            }
            T* __restrict yrow = yplane + (o0 * w.out[1] + o1) * out2;
            const int64_t rows = counted[0][o0] * counted[1][o1];
            for (int64_t o = 0; o < out2; ++o) {
              const int64_t count = rows * counted[2][o];
              yrow[o] =
                  Store<T>(count == 0 ? std::numeric_limits<C>::quiet_NaN() : sum[o] / static_cast<C>(count));
            }
          }
        }
      }
    });
  }

  // X [N, H, W, C] (`first`: its channels-first shape) into y [N, OH, OW, C]: per output
  // position, the sum of the window's taps inside X in the order Pool adds them, over all
  // C channels at once (contiguous: vectorised), divided by the same count.
  template <typename T>
  void PoolNhwc(const TensorRef& x, const Shape& first, const WindowGeometry& g, T* y) const {
    using C = ComputeType<T>;
    const PoolWindows w = MakePoolWindows(first, g);  // 2-D: dims 1 (H) and 2 (W) of 3
    const int64_t n = first[0], ch = first[1], h = w.in[1], wd = w.in[2];
    const int64_t oh_n = w.out[1], ow_n = w.out[2];
    const T* xp = DataAs<const T>(x);
    const int64_t window = g.kernel[0] * g.kernel[1];
    const int64_t grain = std::max<int64_t>(1, kGrainTaps / std::max<int64_t>(1, ow_n * window * ch));
    if constexpr (std::is_same_v<T, float>) {
      ParallelFor(n * oh_n, grain, [&](int64_t r0, int64_t r1, int) {
        std::vector<const float*> taps(static_cast<size_t>(window));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t b = r / oh_n, oh = r % oh_n;
          const int64_t rows = w.tap_begin[1][oh + 1] - w.tap_begin[1][oh];
          for (int64_t ow = 0; ow < ow_n; ++ow) {
            int64_t ntaps = 0;
            for (int64_t t1 = w.tap_begin[1][oh]; t1 < w.tap_begin[1][oh + 1]; ++t1) {
              for (int64_t t2 = w.tap_begin[2][ow]; t2 < w.tap_begin[2][ow + 1]; ++t2) {
                taps[ntaps++] = xp + ((b * h + w.taps[1][t1]) * wd + w.taps[2][t2]) * ch;
              }
            }
            const int64_t count = attrs_.count_include_pad
                                      ? w.padded[1][oh] * w.padded[2][ow]
                                      : rows * (w.tap_begin[2][ow + 1] - w.tap_begin[2][ow]);
            float* py = y + ((b * oh_n + oh) * ow_n + ow) * ch;
            if (count == 0) {
              std::fill(py, py + ch, std::numeric_limits<float>::quiet_NaN());
            } else {
              PoolTapsMean(taps.data(), ntaps, ch, static_cast<float>(count), py);
            }
          }
        }
      });
      return;
    }
    ParallelFor(n * oh_n, grain, [&](int64_t r0, int64_t r1, int) {
      const int64_t channels = ch;
      std::vector<C> sum_row(static_cast<size_t>(channels));
      C* __restrict sum = sum_row.data();
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / oh_n, oh = r % oh_n;
        const int64_t rows = w.tap_begin[1][oh + 1] - w.tap_begin[1][oh];
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          std::fill(sum, sum + channels, C(0));
          const int64_t cols = w.tap_begin[2][ow + 1] - w.tap_begin[2][ow];
          for (int64_t t1 = w.tap_begin[1][oh]; t1 < w.tap_begin[1][oh + 1]; ++t1) {
            for (int64_t t2 = w.tap_begin[2][ow]; t2 < w.tap_begin[2][ow + 1]; ++t2) {
              const T* __restrict px = xp + ((b * h + w.taps[1][t1]) * wd + w.taps[2][t2]) * channels;
              for (int64_t c = 0; c < channels; ++c) sum[c] += Load(px[c]);
            }
          }
          const int64_t count = attrs_.count_include_pad ? w.padded[1][oh] * w.padded[2][ow] : rows * cols;
          T* __restrict py = y + ((b * oh_n + oh) * ow_n + ow) * channels;
          if (count == 0) {
            for (int64_t c = 0; c < channels; ++c) py[c] = Store<T>(std::numeric_limits<C>::quiet_NaN());
          } else {
            const C divisor = static_cast<C>(count);
            for (int64_t c = 0; c < channels; ++c) py[c] = Store<T>(sum[c] / divisor);
          }
        }
      }
    });
  }

  AveragePoolAttrs attrs_;
  bool channels_last_ = false;
};

// ---------------------------------------------------------------------------
// LpPool.

constexpr std::string_view kLpPool = "LpPool";

}  // namespace

StatusOr<LpPoolAttrs> ParseLpPoolAttrs(const Attributes& attrs) {
  LpPoolAttrs a;
  REMEX_ASSIGN_OR_RETURN(a.window, ParseWindowAttrs(kLpPool, attrs, /*with_ceil_mode=*/false));
  if (a.window.kernel_shape.empty()) return OpError(kLpPool, "kernel_shape is required");
  StatusOr<int64_t> p = attrs.Int("p", 2);
  if (!p.ok()) return OpError(kLpPool, p.status().message());
  if (*p < 1 || *p > 64) return OpError(kLpPool, "p must be in [1, 64], got " + std::to_string(*p));
  a.p = static_cast<int>(*p);
  return a;
}

namespace {

StatusOr<WindowGeometry> LpPoolGeometry(const LpPoolAttrs& a, const ShapeFnArg& x) {
  if (!IsFloatType(x.dtype)) return OpError(kLpPool, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  return PoolGeometry(kLpPool, a.window, x);
}

StatusOr<std::vector<TensorInfo>> InferLpPool(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(kLpPool, "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(LpPoolAttrs a, ParseLpPoolAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(WindowGeometry g, LpPoolGeometry(a, in[0]));
  return std::vector<TensorInfo>{{in[0].dtype, PoolOutputShape(in[0].shape, g)}};
}

OpDef LpPoolDef() {
  OpDef def;
  def.name = std::string(kLpPool);
  def.since_version = 2;
  def.infer = InferLpPool;
  return def;
}

class LpPoolKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<LpPoolKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(LpPoolAttrs parsed, ParseLpPoolAttrs(attrs));
    return std::make_unique<LpPoolKernel>(def, attrs, std::move(parsed));
  }
  LpPoolKernel(const OpDef& def, const Attributes& attrs, LpPoolAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(WindowGeometry g, LpPoolGeometry(attrs_, args[0]));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Pool<T>(in[0], g, DataAs<T>(out[0]));
      return OkStatus();
    });
  }

 private:
  template <typename T>
  void Pool(const TensorRef& x, const WindowGeometry& g, T* y) const {
    const int p = attrs_.p;
    FoldPoolWindows(
        MakePoolWindows(x.shape, g), g, DataAs<const T>(x), y, 0.0f,
        [p](float sum, T v) { return sum + lp::LpTerm(static_cast<float>(Load(v)), p); },
        [p](float sum, int64_t, int64_t, int64_t) {
          return Store<T>(static_cast<ComputeType<T>>(lp::LpRoot(sum, p)));
        });
  }

  LpPoolAttrs attrs_;
};

// ---------------------------------------------------------------------------
// LRN.

}  // namespace

StatusOr<LrnAttrs> ParseLrnAttrs(const Attributes& attrs) {
  auto wrap = [](const Status& s) { return OpError(kLrn, s.message()); };
  LrnAttrs l;
  StatusOr<int64_t> size = attrs.Int("size");
  if (!size.ok()) return wrap(size.status());
  if (*size < 1) return OpError(kLrn, "size must be positive");
  l.size = *size;
  for (auto [name, dest, def] : {std::tuple<const char*, float*, float>{"alpha", &l.alpha, 1e-4f},
                                 {"beta", &l.beta, 0.75f},
                                 {"bias", &l.bias, 1.0f}}) {
    StatusOr<float> v = attrs.Float(name, def);
    if (!v.ok()) return wrap(v.status());
    *dest = *v;
  }
  return l;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferLrn(const Attributes& attrs,
                                           std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(kLrn, "expects 1 input");
  REMEX_RETURN_IF_ERROR(ParseLrnAttrs(attrs).status());
  if (!IsFloatType(in[0].dtype)) {
    return OpError(kLrn, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  }
  if (in[0].shape.size() < 2) {
    return OpError(kLrn, "X must have rank >= 2 ([N, C, ...]), got " + ShapeToString(in[0].shape));
  }
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

OpDef LrnDef() {
  OpDef def;
  def.name = std::string(kLrn);
  def.infer = InferLrn;
  return def;
}

class LrnKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<LrnKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(LrnAttrs parsed, ParseLrnAttrs(attrs));
    return std::make_unique<LrnKernel>(def, attrs, std::move(parsed));
  }
  LrnKernel(const OpDef& def, const Attributes& attrs, LrnAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    const int64_t n = shape[0], c = shape[1];
    int64_t inner = 1;
    for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
    const int64_t lo = (attrs_.size - 1) / 2;
    const int64_t hi = attrs_.size - 1 - lo;  // ceil((size - 1) / 2).
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      const C alpha_over_size = static_cast<C>(attrs_.alpha) / static_cast<C>(attrs_.size);
      const C bias = attrs_.bias, beta = attrs_.beta;
      std::vector<C> sq(static_cast<size_t>(inner));
      for (int64_t b = 0; b < n; ++b) {
        const T* xb = x + b * c * inner;
        T* yb = y + b * c * inner;
        for (int64_t ch = 0; ch < c; ++ch) {
          std::fill(sq.begin(), sq.end(), C(0));
          const int64_t first = std::max<int64_t>(0, ch - lo);
          const int64_t last = std::min<int64_t>(c - 1, ch + hi);
          for (int64_t cc = first; cc <= last; ++cc) {
            const T* row = xb + cc * inner;
            for (int64_t i = 0; i < inner; ++i) {
              const C v = Load(row[i]);
              sq[i] += v * v;
            }
          }
          const T* xr = xb + ch * inner;
          T* yr = yb + ch * inner;
          for (int64_t i = 0; i < inner; ++i) {
            yr[i] = Store<T>(Load(xr[i]) / std::pow(bias + alpha_over_size * sq[i], beta));
          }
        }
      }
      return OkStatus();
    });
  }

 private:
  LrnAttrs attrs_;
};

}  // namespace

Status AddPoolOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(MaxPoolDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(AveragePoolDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(LpPoolDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(LrnDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(GlobalMaxPoolDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(GlobalLpPoolDef()));
  return registry.AddOp(GlobalAveragePoolDef());
}

Status AddPoolCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<MaxPoolKernel>(registry, "MaxPool"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<AveragePoolKernel>(registry, "AveragePool"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<LpPoolKernel>(registry, "LpPool"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<LrnKernel>(registry, "LRN"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<GlobalMaxPoolKernel>(registry, "GlobalMaxPool"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<GlobalLpPoolKernel>(registry, "GlobalLpPool"));
  return AddCpuKernel<GlobalAveragePoolKernel>(registry, "GlobalAveragePool");
}

}  // namespace remex::kernels::internal
