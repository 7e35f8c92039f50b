// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: shape functions and CPU kernels
// (ONNX semantics, opsets 12-17; https://onnx.ai/onnx/operators/
// onnx__NegativeLogLikelihoodLoss.html, onnx__SoftmaxCrossEntropyLoss.html).
//
// NegativeLogLikelihoodLoss(input, target, [weight]) -> loss
//   input [N, C] or [N, C, d1, ...] of log-probabilities (float16/32/64), target
//   [N] or [N, d1, ...] of class indices (int32 or int64), weight [C] (input's dtype).
// SoftmaxCrossEntropyLoss(scores, labels, [weights]) -> output, [log_prob]
//   scores of the same shapes, log_prob = LogSoftmax(scores) along axis 1 (scores'
//   shape), and then the loss of log_prob as above.
// With the input seen as [N, C, D] (D = d1 * d2 * ...), per position (n, d) of target
// value t: loss = -input[n, t, d] * w, w = weight[t] (1 without weight); a target equal
// to the attribute `ignore_index` gives loss 0 and w 0. reduction (attribute):
//   "none"  loss of target's shape;
//   "sum"   a scalar, the sum of the losses;
//   "mean"  (default) a scalar, sum of the losses / sum of the w (NaN when that is 0).
// A target outside [0, C) that is not ignore_index is INVALID_ARGUMENT ("out of range"). Sums run in
// double for float64 and float32 otherwise (float16 computes in float32).

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

StatusOr<LossAttrs> LossAttrsOf(std::string_view op, const Attributes& attrs) {
  LossAttrs a;
  StatusOr<std::string> reduction = attrs.String("reduction", "mean");
  if (!reduction.ok()) return OpError(op, reduction.status().message());
  if (*reduction == "none") {
    a.reduction = LossReduction::kNone;
  } else if (*reduction == "sum") {
    a.reduction = LossReduction::kSum;
  } else if (*reduction == "mean") {
    a.reduction = LossReduction::kMean;
  } else {
    return OpError(op, "unknown reduction '" + *reduction + "' (none, sum or mean)");
  }
  if (attrs.all().count("ignore_index")) {
    StatusOr<int64_t> ignore = attrs.Int("ignore_index");
    if (!ignore.ok()) return OpError(op, ignore.status().message());
    a.ignore_index = *ignore;
  }
  return a;
}

StatusOr<LossView> LossViewOf(std::string_view op, std::span<const ShapeFnArg> in) {
  if (in.size() < 2 || in.size() > 3) return OpError(op, "expects 2 or 3 inputs, got " + std::to_string(in.size()));
  const ShapeFnArg& x = in[0];
  const ShapeFnArg& target = in[1];
  if (!x.present || !target.present) return OpError(op, "the first two inputs are required");
  if (!IsFloatType(x.dtype)) return OpError(op, "unsupported dtype " + std::string(DTypeName(x.dtype)));
  if (target.dtype != DType::kInt32 && target.dtype != DType::kInt64) {
    return OpError(op, "target must be int32 or int64, got " + std::string(DTypeName(target.dtype)));
  }
  if (x.shape.size() < 2) return OpError(op, "input must have rank >= 2, got " + ShapeToString(x.shape));
  Shape want = {x.shape[0]};
  want.insert(want.end(), x.shape.begin() + 2, x.shape.end());
  if (target.shape != want) {
    return OpError(op, "target has shape " + ShapeToString(target.shape) + ", expected " + ShapeToString(want) +
                           " for input " + ShapeToString(x.shape));
  }
  LossView v;
  v.n = x.shape[0];
  v.c = x.shape[1];
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, x.shape));
  v.d = v.n * v.c == 0 ? 0 : total / (v.n * v.c);
  if (in.size() == 3 && in[2].present) {
    if (in[2].dtype != x.dtype || in[2].shape != Shape{v.c}) {
      return OpError(op, "weight must be " + std::string(DTypeName(x.dtype)) + " [" + std::to_string(v.c) +
                             "], got " + std::string(DTypeName(in[2].dtype)) + " " + ShapeToString(in[2].shape));
    }
    v.weighted = true;
  }
  return v;
}

namespace {

constexpr std::string_view kNll = "NegativeLogLikelihoodLoss";
constexpr std::string_view kSce = "SoftmaxCrossEntropyLoss";

StatusOr<std::vector<TensorInfo>> InferLoss(std::string_view op, bool softmax, const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(LossAttrs a, LossAttrsOf(op, attrs));
  REMEX_RETURN_IF_ERROR(LossViewOf(op, in).status());
  const DType dt = in[0].dtype;
  std::vector<TensorInfo> out = {{dt, a.reduction == LossReduction::kNone ? in[1].shape : Shape{}}};
  if (softmax) out.push_back({dt, in[0].shape});  // log_prob
  return out;
}

OpDef LossDef(std::string_view op, bool softmax) {
  OpDef def;
  def.name = std::string(op);
  def.since_version = 12;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.min_outputs = 1;
  def.max_outputs = softmax ? 2 : 1;
  def.infer = [op, softmax](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferLoss(op, softmax, attrs, in);
  };
  return def;
}

class LossKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<LossKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                      bool softmax) {
    REMEX_ASSIGN_OR_RETURN(LossAttrs parsed, LossAttrsOf(def.name, attrs));
    return std::make_unique<LossKernel>(def, attrs, softmax, std::move(parsed));
  }
  LossKernel(const OpDef& def, const Attributes& attrs, bool softmax, LossAttrs parsed)
      : ValidatedKernel(def, attrs), softmax_(softmax), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(LossView v, LossViewOf(op(), ToShapeArgs(in)));
    // Target values (int32 or int64, shape [N, d1, ...] as the view checked).
    std::vector<int64_t> target(static_cast<size_t>(v.n * v.d));
    for (size_t i = 0; i < target.size(); ++i) {
      target[i] = in[1].dtype == DType::kInt64 ? DataAs<const int64_t>(in[1])[i] : DataAs<const int32_t>(in[1])[i];
    }
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      const T* weight = v.weighted ? DataAs<const T>(in[2]) : nullptr;
      // SoftmaxCrossEntropyLoss: log_prob along C, into its output or a buffer.
      std::vector<C> log_prob;
      if (softmax_) {
        log_prob.resize(static_cast<size_t>(v.n * v.c * v.d));
        for (int64_t n = 0; n < v.n; ++n) {
          for (int64_t d = 0; d < v.d; ++d) {
            const int64_t base = n * v.c * v.d + d;
            C mx = -std::numeric_limits<C>::infinity();
            for (int64_t c = 0; c < v.c; ++c) mx = std::max(mx, C(Load(x[base + c * v.d])));
            C sum = 0;
            for (int64_t c = 0; c < v.c; ++c) sum += std::exp(Load(x[base + c * v.d]) - mx);
            const C log_sum = std::log(sum);
            for (int64_t c = 0; c < v.c; ++c) log_prob[base + c * v.d] = (Load(x[base + c * v.d]) - mx) - log_sum;
          }
        }
        if (out.size() > 1 && out[1].present()) {
          T* lp = DataAs<T>(out[1]);
          for (size_t i = 0; i < log_prob.size(); ++i) lp[i] = Store<T>(log_prob[i]);
        }
      }
      auto value = [&](int64_t i) -> C { return softmax_ ? log_prob[i] : C(Load(x[i])); };
      T* loss = DataAs<T>(out[0]);
      C loss_sum = 0, weight_sum = 0;
      for (int64_t n = 0; n < v.n; ++n) {
        for (int64_t d = 0; d < v.d; ++d) {
          const int64_t pos = n * v.d + d;
          const int64_t label = target[pos];
          C l = 0, w = 0;
          if (!(attrs_.ignore_index && label == *attrs_.ignore_index)) {
            if (label < 0 || label >= v.c) {
              return OpError(op(), "target value " + std::to_string(label) + " at index " + std::to_string(pos) +
                                       " is out of range [0, " + std::to_string(v.c) + ")");
            }
            w = weight ? C(Load(weight[label])) : C(1);
            l = -value(n * v.c * v.d + label * v.d + d) * w;
          }
          if (attrs_.reduction == LossReduction::kNone) loss[pos] = Store<T>(l);
          loss_sum += l;
          weight_sum += w;
        }
      }
      if (attrs_.reduction == LossReduction::kSum) loss[0] = Store<T>(loss_sum);
      if (attrs_.reduction == LossReduction::kMean) loss[0] = Store<T>(loss_sum / weight_sum);
      return OkStatus();
    });
  }

 private:
  const bool softmax_;
  const LossAttrs attrs_;
};

}  // namespace

Status AddLossOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(LossDef(kNll, false)));
  return registry.AddOp(LossDef(kSce, true));
}

Status AddLossCpuKernels(KernelRegistry& registry) {
  for (bool softmax : {false, true}) {
    REMEX_ASSIGN_OR_RETURN(const int since,
                           OnlyEntrySince(registry, softmax ? kSce : kNll, "RegisterCpuKernels"));
    REMEX_RETURN_IF_ERROR(
        registry.AddKernel(softmax ? kSce : kNll, since, DeviceKind::kCpu, MakeKernel<LossKernel>(softmax)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
