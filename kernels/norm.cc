// BatchNormalization (inference) and Softmax.

#include <cmath>
#include <string>

#include "kernels/internal.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kBatchNorm = "BatchNormalization";
constexpr std::string_view kSoftmax = "Softmax";

struct BatchNormAttrs {
  float epsilon = 1e-5f;
};

StatusOr<BatchNormAttrs> ParseBatchNormAttrs(const Attributes& attrs) {
  BatchNormAttrs b;
  StatusOr<float> eps = attrs.Float("epsilon", 1e-5f);
  if (!eps.ok()) return OpError(kBatchNorm, eps.status().message());
  if (!(*eps >= 0)) return OpError(kBatchNorm, "epsilon must be non-negative");
  b.epsilon = *eps;
  StatusOr<int64_t> training = attrs.Int("training_mode", 0);
  if (!training.ok()) return OpError(kBatchNorm, training.status().message());
  if (*training != 0) return Unimplemented("BatchNormalization: training_mode is not supported");
  StatusOr<int64_t> spatial = attrs.Int("spatial", 1);
  if (!spatial.ok()) return OpError(kBatchNorm, spatial.status().message());
  if (*spatial != 1) return Unimplemented("BatchNormalization: spatial=0 is not supported");
  StatusOr<float> momentum = attrs.Float("momentum", 0.9f);
  if (!momentum.ok()) return OpError(kBatchNorm, momentum.status().message());
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
  for (size_t i = 1; i < 5; ++i) {
    if (in[i].dtype != x.dtype) {
      return OpError(kBatchNorm, std::string(kNames[i]) + " has dtype " +
                                     std::string(DTypeName(in[i].dtype)) + ", X has " +
                                     std::string(DTypeName(x.dtype)));
    }
    if (in[i].shape != Shape{c}) {
      return OpError(kBatchNorm, std::string(kNames[i]) + " must have shape [" + std::to_string(c) +
                                     "], got " + ShapeToString(in[i].shape));
    }
  }
  (void)b;
  return std::vector<TensorInfo>{{x.dtype, x.shape}};
}

OpDef BatchNormDef() {
  OpDef def;
  def.name = std::string(kBatchNorm);
  def.min_inputs = def.max_inputs = 5;
  def.max_outputs = 5;  // Training outputs are refused as UNIMPLEMENTED.
  def.infer = InferBatchNorm;
  return def;
}

class BatchNormKernel final : public ValidatedKernel {
 public:
  BatchNormKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), attrs_(*ParseBatchNormAttrs(attrs)) {}

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
        const C m = Load(scale[ch]) / std::sqrt(Load(var[ch]) + static_cast<C>(attrs_.epsilon));
        mul[ch] = m;
        add[ch] = Load(bias[ch]) - Load(mean[ch]) * m;
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
  BatchNormAttrs attrs_;
};

// ---------------------------------------------------------------------------
// Softmax: along `axis` (opset 13), or over the flattened [axis:] dims when the
// frontend marked an older opset with flatten_to_2d = 1.

struct SoftmaxAttrs {
  bool flatten = false;
  int64_t axis = -1;
};

StatusOr<SoftmaxAttrs> ParseSoftmaxAttrs(const Attributes& attrs) {
  SoftmaxAttrs s;
  StatusOr<int64_t> flatten = attrs.Int("flatten_to_2d", 0);
  if (!flatten.ok()) return OpError(kSoftmax, flatten.status().message());
  if (*flatten != 0 && *flatten != 1) return OpError(kSoftmax, "flatten_to_2d must be 0 or 1");
  s.flatten = *flatten == 1;
  StatusOr<int64_t> axis = attrs.Int("axis", s.flatten ? 1 : -1);
  if (!axis.ok()) return OpError(kSoftmax, axis.status().message());
  s.axis = *axis;
  return s;
}

// outer x axis x inner view of the input.
struct SoftmaxView {
  int64_t outer = 1, axis = 1, inner = 1;
};

StatusOr<SoftmaxView> SoftmaxViewOf(const SoftmaxAttrs& a, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  SoftmaxView v;
  if (a.flatten) {
    // Opsets < 13 accept axis in [-rank, rank]; a rank-0 input is one element.
    int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
    if (axis < 0 || axis > rank) {
      return OpError(kSoftmax, "axis " + std::to_string(a.axis) + " is out of range for rank " +
                                   std::to_string(rank));
    }
    for (int64_t i = 0; i < axis; ++i) v.outer *= shape[i];
    for (int64_t i = axis; i < rank; ++i) v.axis *= shape[i];
    return v;
  }
  if (rank == 0) return OpError(kSoftmax, "input must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(kSoftmax, a.axis, rank));
  for (int64_t i = 0; i < axis; ++i) v.outer *= shape[i];
  v.axis = shape[axis];
  for (int64_t i = axis + 1; i < rank; ++i) v.inner *= shape[i];
  return v;
}

StatusOr<std::vector<TensorInfo>> InferSoftmax(const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(kSoftmax, "expects 1 input");
  REMEX_ASSIGN_OR_RETURN(SoftmaxAttrs a, ParseSoftmaxAttrs(attrs));
  if (!IsFloatType(in[0].dtype)) {
    return OpError(kSoftmax, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(SoftmaxView v, SoftmaxViewOf(a, in[0].shape));
  (void)v;
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

OpDef SoftmaxDef() {
  OpDef def;
  def.name = std::string(kSoftmax);
  def.infer = InferSoftmax;
  return def;
}

class SoftmaxKernel final : public ValidatedKernel {
 public:
  SoftmaxKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), attrs_(*ParseSoftmaxAttrs(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(SoftmaxView v, SoftmaxViewOf(attrs_, in[0].shape));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      std::vector<C> buf(static_cast<size_t>(v.axis));
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          const int64_t base = o * v.axis * v.inner + i;
          C mx = -std::numeric_limits<C>::infinity();
          for (int64_t a = 0; a < v.axis; ++a) {
            buf[a] = Load(x[base + a * v.inner]);
            if (buf[a] > mx) mx = buf[a];
          }
          C sum = 0;
          for (int64_t a = 0; a < v.axis; ++a) {
            buf[a] = std::exp(buf[a] - mx);
            sum += buf[a];
          }
          const C inv = C(1) / sum;
          for (int64_t a = 0; a < v.axis; ++a) y[base + a * v.inner] = Store<T>(buf[a] * inv);
        }
      }
      return OkStatus();
    });
  }

 private:
  SoftmaxAttrs attrs_;
};

}  // namespace

Status AddNormOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(BatchNormDef()));
  return registry.AddOp(SoftmaxDef());
}

Status AddNormCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddValidatedKernel<BatchNormKernel>(
      registry, BatchNormDef(),
      [](const Attributes& attrs) { return ParseBatchNormAttrs(attrs).status(); }));
  return AddValidatedKernel<SoftmaxKernel>(registry, SoftmaxDef(), [](const Attributes& attrs) {
    return ParseSoftmaxAttrs(attrs).status();
  });
}

}  // namespace remex::kernels::internal
