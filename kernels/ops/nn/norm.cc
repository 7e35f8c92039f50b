// BatchNormalization (inference and training mode), InstanceNormalization and LayerNormalization. (Softmax,
// LogSoftmax and Hardmax are in softmax.cc.)
//
// InstanceNormalization (opsets 6+; https://onnx.ai/onnx/operators/onnx__InstanceNormalization.html)
//   input [N, C, D1, ...] (rank >= 3), scale [C], B [C]; float16, float32, float64.
//   y = scale * (x - mean) / sqrt(var + epsilon) + B, mean and (biased) variance per
//   (n, c) over the spatial dims. Attribute epsilon (default 1e-5).
//
// LayerNormalization (opset 17; https://onnx.ai/onnx/operators/onnx__LayerNormalization.html)
//   X (rank >= 1), Scale, optional B; float16, float32, float64. Scale and B have X's
//   dtype and broadcast (numpy, unidirectionally) to X's shape. Normalises over the
//   dims [axis, rank): Y = (X - mean) * InvStdDev * Scale + B with
//   InvStdDev = 1 / sqrt(var + epsilon). Attributes axis (default -1, in [-rank, rank)),
//   epsilon (default 1e-5), stash_type (1 = float32, the default, or 11 = float64): the
//   dtype of the optional outputs Mean and InvStdDev, each of shape
//   X.shape[:axis] + [1] * (rank - axis).
//
// Statistics accumulate in float32 (float64 for float64 data or stash_type 11), mean
// first, then the variance about it.

#include <cmath>
#include <string>

#include "kernels/internal.h"
#include "kernels/ops/nn/batchnorm_ops.h"
#include "kernels/ops/nn/lp_ops.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kBatchNorm = "BatchNormalization";

// The `epsilon` attribute (default 1e-5) of a normalization op; it must be >= 0.
StatusOr<float> ParseEpsilon(std::string_view op, const Attributes& attrs) {
  StatusOr<float> eps = attrs.Float("epsilon", 1e-5f);
  if (!eps.ok()) return OpError(op, eps.status().message());
  if (!(*eps >= 0)) return OpError(op, "epsilon must be non-negative");
  return *eps;
}

// Checks that each per-channel input in[i], i >= 1, named names[i], has the dtype of
// in[0] (named names[0]) and shape [c].
Status CheckPerChannelInputs(std::string_view op, std::span<const ShapeFnArg> in,
                             std::span<const char* const> names, int64_t c) {
  const ShapeFnArg& x = in[0];
  for (size_t i = 1; i < names.size(); ++i) {
    if (in[i].dtype != x.dtype) {
      return OpError(op, std::string(names[i]) + " has dtype " +
                             std::string(DTypeName(in[i].dtype)) + ", " + names[0] + " has " +
                             std::string(DTypeName(x.dtype)));
    }
    if (in[i].shape != Shape{c}) {
      return OpError(op, std::string(names[i]) + " must have shape [" + std::to_string(c) +
                             "], got " + ShapeToString(in[i].shape));
    }
  }
  return OkStatus();
}

struct BatchNormAttrs {
  float epsilon = 1e-5f;
  bool training = false;  // training_mode (opset 14+): batch statistics, running stats out.
  float momentum = 0.9f;
};

StatusOr<BatchNormAttrs> ParseBatchNormAttrs(const Attributes& attrs) {
  BatchNormAttrs b;
  REMEX_ASSIGN_OR_RETURN(b.epsilon, ParseEpsilon(kBatchNorm, attrs));
  StatusOr<int64_t> training = attrs.Int("training_mode", 0);
  if (!training.ok()) return OpError(kBatchNorm, training.status().message());
  if (*training != 0 && *training != 1) {
    return OpError(kBatchNorm, "training_mode must be 0 or 1, got " + std::to_string(*training));
  }
  b.training = *training == 1;
  StatusOr<int64_t> spatial = attrs.Int("spatial", 1);
  if (!spatial.ok()) return OpError(kBatchNorm, spatial.status().message());
  if (*spatial != 1) return Unimplemented("BatchNormalization: spatial=0 is not supported");
  StatusOr<float> momentum = attrs.Float("momentum", 0.9f);
  if (!momentum.ok()) return OpError(kBatchNorm, momentum.status().message());
  b.momentum = *momentum;
  return b;
}

StatusOr<std::vector<TensorInfo>> InferBatchNorm(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  if (in.size() != 5) return OpError(kBatchNorm, "expects 5 inputs (X, scale, B, mean, var)");
  REMEX_ASSIGN_OR_RETURN(BatchNormAttrs b, ParseBatchNormAttrs(attrs));
  const ShapeFnArg& x = in[0];
  if (!IsFloatType(x.dtype)) {
    return OpError(kBatchNorm, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  if (x.shape.size() < 2) {
    return OpError(kBatchNorm, "X must have rank >= 2, got " + ShapeToString(x.shape));
  }
  const int64_t c = x.shape[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "mean", "var"};
  REMEX_RETURN_IF_ERROR(CheckPerChannelInputs(kBatchNorm, in, kNames, c));
  if (!b.training) return std::vector<TensorInfo>{{x.dtype, x.shape}};
  // Training mode (BatchNormalization-14/15): Y, running_mean, running_var.
  return std::vector<TensorInfo>{{x.dtype, x.shape}, {x.dtype, {c}}, {x.dtype, {c}}};
}

OpDef BatchNormDef() {
  OpDef def;
  def.name = std::string(kBatchNorm);
  def.since_version = 7;
  def.min_inputs = def.max_inputs = 5;
  // Inference: Y. Training mode: Y, running_mean, running_var (opset 14+). Opsets 7-13
  // name up to 5 outputs; those beyond the shape function's are not produced.
  def.max_outputs = 5;
  def.infer = InferBatchNorm;
  return def;
}

// BatchNormalization-15 (https://onnx.ai/onnx/operators/onnx__BatchNormalization.html):
// inference y = scale * (x - mean) / sqrt(var + epsilon) + B with the given mean and
// var. training_mode = 1 normalises with the batch's statistics instead, per channel
// over N and the spatial dims (mean, and the biased variance), and writes running_mean
// = mean * momentum + batch_mean * (1 - momentum), running_var likewise with the batch
// variance (ONNX's reference). Statistics in double for float64, float otherwise, in
// two passes over the channel's values in order (sum, then squared deviations).
class BatchNormKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<BatchNormKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(BatchNormAttrs parsed, ParseBatchNormAttrs(attrs));
    return std::make_unique<BatchNormKernel>(def, attrs, std::move(parsed));
  }
  BatchNormKernel(const OpDef& def, const Attributes& attrs, BatchNormAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    const int64_t n = shape[0];
    const int64_t c = shape[1];
    int64_t inner = 1;
    for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      const T* scale = DataAs<const T>(in[1]);
      const T* bias = DataAs<const T>(in[2]);
      const T* mean = DataAs<const T>(in[3]);
      const T* var = DataAs<const T>(in[4]);
      T* y = DataAs<T>(out[0]);
      std::vector<C> mul(c), add(c);
      for (int64_t ch = 0; ch < c; ++ch) {
        C m_ch = Load(mean[ch]), v_ch = Load(var[ch]);
        if (attrs_.training) {
          BatchMoments(x, n, c, inner, ch, m_ch, v_ch);
          const C mom = static_cast<C>(attrs_.momentum);
          if (out.size() > 1) DataAs<T>(out[1])[ch] = Store<T>(Load(mean[ch]) * mom + m_ch * (C(1) - mom));
          if (out.size() > 2) DataAs<T>(out[2])[ch] = Store<T>(Load(var[ch]) * mom + v_ch * (C(1) - mom));
        }
        const auto affine = batchnorm::ChannelAffine<C>(Load(scale[ch]), Load(bias[ch]), m_ch, v_ch,
                                                        static_cast<C>(attrs_.epsilon));
        mul[ch] = affine.mul;
        add[ch] = affine.add;
      }
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t off = (b * c + ch) * inner;
          const C m = mul[ch], a = add[ch];
          for (int64_t i = 0; i < inner; ++i) y[off + i] = Store<T>(Load(x[off + i]) * m + a);
        }
      }
      return OkStatus();
    });
  }

 private:
  // Channel ch's mean and biased variance over its n planes of `inner` values.
  template <typename T, typename C>
  static void BatchMoments(const T* x, int64_t n, int64_t c, int64_t inner, int64_t ch, C& mean, C& var) {
    const int64_t count = n * inner;
    C sum = 0;
    for (int64_t b = 0; b < n; ++b) {
      const T* p = x + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) sum += Load(p[i]);
    }
    mean = count > 0 ? sum / static_cast<C>(count) : C(0);
    C sq = 0;
    for (int64_t b = 0; b < n; ++b) {
      const T* p = x + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const C d = Load(p[i]) - mean;
        sq += d * d;
      }
    }
    var = count > 0 ? sq / static_cast<C>(count) : C(0);
  }

  BatchNormAttrs attrs_;
};

// ---------------------------------------------------------------------------
// Shared by InstanceNormalization and LayerNormalization: mean and biased variance of
// n values, accumulated in A over 8 lanes (vectorisable, and less rounding error than
// one running sum).

template <typename T, typename A>
void MeanAndVariance(const T* x, int64_t n, A& mean, A& var) {
  constexpr int kLanes = 8;
  A lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<A>(Load(x[i + l]));
  }
  A sum = 0;
  for (; i < n; ++i) sum += static_cast<A>(Load(x[i]));
  for (int l = 0; l < kLanes; ++l) sum += lane[l];
  mean = n > 0 ? sum / static_cast<A>(n) : A(0);
  A sq[kLanes] = {};
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const A d = static_cast<A>(Load(x[i + l])) - mean;
      sq[l] += d * d;
    }
  }
  A ss = 0;
  for (; i < n; ++i) {
    const A d = static_cast<A>(Load(x[i])) - mean;
    ss += d * d;
  }
  for (int l = 0; l < kLanes; ++l) ss += sq[l];
  var = n > 0 ? ss / static_cast<A>(n) : A(0);
}

// ---------------------------------------------------------------------------
// InstanceNormalization.

constexpr std::string_view kInstanceNorm = "InstanceNormalization";

StatusOr<std::vector<TensorInfo>> InferInstanceNorm(const Attributes& attrs,
                                                    std::span<const ShapeFnArg> in) {
  if (in.size() != 3) return OpError(kInstanceNorm, "expects 3 inputs (input, scale, B)");
  REMEX_RETURN_IF_ERROR(ParseEpsilon(kInstanceNorm, attrs).status());
  const ShapeFnArg& x = in[0];
  if (!IsFloatType(x.dtype)) {
    return OpError(kInstanceNorm, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  if (x.shape.size() < 3) {
    return OpError(kInstanceNorm, "input must have rank >= 3, got " + ShapeToString(x.shape));
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kInstanceNorm, x.shape).status());
  static constexpr const char* kNames[] = {"input", "scale", "B"};
  REMEX_RETURN_IF_ERROR(CheckPerChannelInputs(kInstanceNorm, in, kNames, x.shape[1]));
  return std::vector<TensorInfo>{{x.dtype, x.shape}};
}

OpDef InstanceNormDef() {
  OpDef def;
  def.name = std::string(kInstanceNorm);
  def.since_version = 6;
  def.min_inputs = def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferInstanceNorm;
  return def;
}

class InstanceNormKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<InstanceNormKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(float parsed, ParseEpsilon(kInstanceNorm, attrs));
    return std::make_unique<InstanceNormKernel>(def, attrs, std::move(parsed));
  }
  InstanceNormKernel(const OpDef& def, const Attributes& attrs, float parsed)
      : ValidatedKernel(def, attrs), epsilon_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    const int64_t n = shape[0], c = shape[1];
    int64_t inner = 1;
    for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      const T* scale = DataAs<const T>(in[1]);
      const T* bias = DataAs<const T>(in[2]);
      T* y = DataAs<T>(out[0]);
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t off = (b * c + ch) * inner;
          C mean, var;
          MeanAndVariance<T, C>(x + off, inner, mean, var);
          const C mul = Load(scale[ch]) / std::sqrt(var + static_cast<C>(epsilon_));
          const C add = Load(bias[ch]) - mean * mul;
          for (int64_t i = 0; i < inner; ++i) y[off + i] = Store<T>(Load(x[off + i]) * mul + add);
        }
      }
      return OkStatus();
    });
  }

 private:
  float epsilon_;
};

// ---------------------------------------------------------------------------
// LayerNormalization.

constexpr std::string_view kLayerNorm = "LayerNormalization";

struct LayerNormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;
  DType stash = DType::kFloat32;
};

StatusOr<LayerNormAttrs> ParseLayerNormAttrs(const Attributes& attrs) {
  LayerNormAttrs a;
  StatusOr<int64_t> axis = attrs.Int("axis", -1);
  if (!axis.ok()) return OpError(kLayerNorm, axis.status().message());
  a.axis = *axis;
  REMEX_ASSIGN_OR_RETURN(a.epsilon, ParseEpsilon(kLayerNorm, attrs));
  StatusOr<int64_t> stash = attrs.Int("stash_type", 1);
  if (!stash.ok()) return OpError(kLayerNorm, stash.status().message());
  if (*stash == 1) {
    a.stash = DType::kFloat32;
  } else if (*stash == 11) {
    a.stash = DType::kFloat64;
  } else {
    return Unimplemented("LayerNormalization: stash_type " + std::to_string(*stash) +
                         " is not supported (1 = float32, 11 = float64)");
  }
  return a;
}

// X seen as [outer, inner] around the normalised dims.
struct LayerNormView {
  int64_t axis = 0, outer = 1, inner = 1;
};

StatusOr<LayerNormView> LayerNormViewOf(const LayerNormAttrs& a, std::span<const ShapeFnArg> in) {
  if (in.size() < 2 || in.size() > 3) return OpError(kLayerNorm, "expects 2 or 3 inputs");
  const ShapeFnArg& x = in[0];
  if (!IsFloatType(x.dtype)) {
    return OpError(kLayerNorm, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return OpError(kLayerNorm, "X must have rank >= 1");
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kLayerNorm, x.shape).status());
  LayerNormView v;
  REMEX_ASSIGN_OR_RETURN(v.axis, NormalizeAxis(kLayerNorm, a.axis, rank));
  for (int64_t i = 0; i < v.axis; ++i) v.outer *= x.shape[i];
  for (int64_t i = v.axis; i < rank; ++i) v.inner *= x.shape[i];
  static constexpr const char* kNames[] = {"X", "Scale", "B"};
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) {
      if (i == 1) return OpError(kLayerNorm, "Scale is required");
      continue;
    }
    if (in[i].dtype != x.dtype) {
      return OpError(kLayerNorm, std::string(kNames[i]) + " has dtype " +
                                     std::string(DTypeName(in[i].dtype)) + ", X has " +
                                     std::string(DTypeName(x.dtype)));
    }
    const Shape& s = in[i].shape;
    bool ok = s.size() <= x.shape.size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      const int64_t xd = x.shape[x.shape.size() - s.size() + d];
      ok = s[d] == 1 || s[d] == xd;
    }
    if (!ok) {
      return OpError(kLayerNorm, std::string(kNames[i]) + " of shape " + ShapeToString(s) +
                                     " does not broadcast to X's shape " +
                                     ShapeToString(x.shape));
    }
  }
  return v;
}

StatusOr<std::vector<TensorInfo>> InferLayerNorm(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(LayerNormAttrs a, ParseLayerNormAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(LayerNormView v, LayerNormViewOf(a, in));
  Shape stats(in[0].shape.begin(), in[0].shape.begin() + v.axis);
  stats.resize(in[0].shape.size(), 1);
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}, {a.stash, stats}, {a.stash, stats}};
}

OpDef LayerNormDef() {
  OpDef def;
  def.name = std::string(kLayerNorm);
  def.since_version = 17;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.max_outputs = 3;
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferLayerNorm;
  return def;
}

// Element offsets into a tensor of shape `s`, broadcast to `x` (s right-aligned), for
// every flat index over x's dims [begin, end).
std::vector<int64_t> BroadcastOffsets(const Shape& x, const Shape& s, size_t begin, size_t end) {
  const size_t lead = x.size() - s.size();
  std::vector<int64_t> stride(x.size(), 0);
  int64_t st = 1;
  for (size_t d = s.size(); d-- > 0;) {
    stride[lead + d] = s[d] == 1 ? 0 : st;
    st *= s[d];
  }
  int64_t count = 1;
  for (size_t d = begin; d < end; ++d) count *= x[d];
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  std::vector<int64_t> idx(x.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    offsets[i] = off;
    for (size_t d = end; d-- > begin;) {
      off += stride[d];
      if (++idx[d] < x[d]) break;
      off -= stride[d] * x[d];
      idx[d] = 0;
    }
  }
  return offsets;
}

class LayerNormKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<LayerNormKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(LayerNormAttrs parsed, ParseLayerNormAttrs(attrs));
    return std::make_unique<LayerNormKernel>(def, attrs, std::move(parsed));
  }
  LayerNormKernel(const OpDef& def, const Attributes& attrs, LayerNormAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(LayerNormView v, LayerNormViewOf(attrs_, args));
    if (v.outer == 0) return OkStatus();
    const bool wide = in[0].dtype == DType::kFloat64 || attrs_.stash == DType::kFloat64;
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if (wide) return RunTyped<T, double>(in, out, v);
      if constexpr (std::is_same_v<T, double>) {
        return Internal("unreachable");
      } else {
        return RunTyped<T, float>(in, out, v);
      }
    });
  }

 private:
  template <typename T, typename A>
  Status RunTyped(std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const LayerNormView& v) {
    const Shape& xs = in[0].shape;
    const size_t rank = xs.size();
    const size_t axis = static_cast<size_t>(v.axis);
    const T* x = DataAs<const T>(in[0]);
    T* y = DataAs<T>(out[0]);
    // Scale and B per normalised row: each row's values are expanded once per
    // distinct outer offset (once in all when they do not vary over the outer dims).
    struct Param {
      const T* data = nullptr;
      std::vector<int64_t> outer_off, inner_off;
      std::vector<A> row;
      int64_t row_of = -1;
    };
    Param params[2];
    for (size_t p = 0; p < 2; ++p) {
      const size_t i = p + 1;
      if (i >= in.size() || !in[i].present()) continue;
      params[p].data = DataAs<const T>(in[i]);
      params[p].outer_off = BroadcastOffsets(xs, in[i].shape, 0, axis);
      params[p].inner_off = BroadcastOffsets(xs, in[i].shape, axis, rank);
      params[p].row.resize(static_cast<size_t>(v.inner));
    }
    const DType stash = attrs_.stash;
    void* mean_out = out.size() > 1 ? out[1].data : nullptr;
    void* inv_out = out.size() > 2 ? out[2].data : nullptr;
    auto put = [stash](void* dst, int64_t i, A value) {
      if (stash == DType::kFloat64) {
        static_cast<double*>(dst)[i] = static_cast<double>(value);
      } else {
        static_cast<float*>(dst)[i] = static_cast<float>(value);
      }
    };
    for (int64_t o = 0; o < v.outer; ++o) {
      for (Param& p : params) {
        if (!p.data || p.outer_off[o] == p.row_of) continue;
        p.row_of = p.outer_off[o];
        for (int64_t i = 0; i < v.inner; ++i) {
          p.row[i] = static_cast<A>(Load(p.data[p.row_of + p.inner_off[i]]));
        }
      }
      const T* xr = x + o * v.inner;
      T* yr = y + o * v.inner;
      A mean, var;
      MeanAndVariance<T, A>(xr, v.inner, mean, var);
      const A inv = A(1) / std::sqrt(var + static_cast<A>(attrs_.epsilon));
      if (mean_out) put(mean_out, o, mean);
      if (inv_out) put(inv_out, o, inv);
      const A* scale = params[0].row.data();
      if (params[1].data) {
        const A* bias = params[1].row.data();
        for (int64_t i = 0; i < v.inner; ++i) {
          yr[i] = Store<T>(static_cast<ComputeType<T>>(
              (static_cast<A>(Load(xr[i])) - mean) * inv * scale[i] + bias[i]));
        }
      } else {
        for (int64_t i = 0; i < v.inner; ++i) {
          yr[i] = Store<T>(
              static_cast<ComputeType<T>>((static_cast<A>(Load(xr[i])) - mean) * inv * scale[i]));
        }
      }
    }
    return OkStatus();
  }

  LayerNormAttrs attrs_;
};

// ---------------------------------------------------------------------------
// LpNormalization-1: y = x / ||x||_p along `axis` (kernels/ops/nn/lp_ops.h), float types.

StatusOr<std::vector<TensorInfo>> InferLpNormalization(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError("LpNormalization", "expects 1 input");
  if (!IsFloatType(in[0].dtype)) {
    return OpError("LpNormalization", "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  }
  REMEX_RETURN_IF_ERROR(ParseLpNormalization(attrs, in[0].shape).status());
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

class LpNormalizationKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(LpNormParams g, ParseLpNormalization(attrs(), in[0].shape));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      for (int64_t o = 0; o < g.outer; ++o) {
        for (int64_t i = 0; i < g.inner; ++i) {
          const int64_t base = o * g.n * g.inner + i;
          float sum = 0;  // in float, in order, as the device's one thread per vector
          for (int64_t k = 0; k < g.n; ++k) sum += lp::LpTerm(static_cast<float>(Load(x[base + k * g.inner])), g.p);
          const float norm = lp::LpRoot(sum, g.p);
          for (int64_t k = 0; k < g.n; ++k) {
            const int64_t at = base + k * g.inner;
            y[at] = Store<T>(static_cast<ComputeType<T>>(lp::LpNormalize(static_cast<float>(Load(x[at])), norm)));
          }
        }
      }
      return OkStatus();
    });
  }
};

OpDef LpNormalizationDef() {
  OpDef def;
  def.name = "LpNormalization";
  def.since_version = 1;
  def.infer = InferLpNormalization;
  return def;
}

}  // namespace

StatusOr<LpNormParams> ParseLpNormalization(const Attributes& attrs, const Shape& shape) {
  REMEX_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.Int("axis", -1));
  REMEX_ASSIGN_OR_RETURN(int64_t p, attrs.Int("p", 2));
  if (p != 1 && p != 2) return OpError("LpNormalization", "p must be 1 or 2, got " + std::to_string(p));
  if (shape.empty()) return OpError("LpNormalization", "X must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis("LpNormalization", axis_attr, static_cast<int64_t>(shape.size())));
  LpNormParams g;
  g.p = static_cast<int>(p);
  for (int64_t d = 0; d < axis; ++d) g.outer *= shape[d];
  g.n = shape[axis];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) g.inner *= shape[d];
  return g;
}

Status AddNormOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(BatchNormDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(InstanceNormDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(LpNormalizationDef()));
  return registry.AddOp(LayerNormDef());
}

Status AddNormCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<BatchNormKernel>(registry, "BatchNormalization"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<InstanceNormKernel>(registry, kInstanceNorm));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<LpNormalizationKernel>(registry, "LpNormalization"));
  return AddCpuKernel<LayerNormKernel>(registry, "LayerNormalization");
}

}  // namespace remex::kernels::internal
