// The training domain's optimizers: shape functions and CPU kernels of Adagrad-1, Adam-1
// and Momentum-1 (ONNX ai.onnx.preview.training; https://onnx.ai/onnx/operators/#ai-onnx-preview-training).
//
// Each op updates n tensors at once: X_i' from X_i, its gradient G_i and its state, and
// the new state, by the rules of kernels/ops/training/optimizer_ops.h (shared with the CUDA kernels),
// computed per element in double and rounded to the tensors' dtype (float32 or
// float64). The inputs and outputs are laid out as kernels/ops/training/optimizer_view.h gives; R and
// T are read where they lie (ShapeDep::kShape: no shape depends on them). Errors:
// INVALID_ARGUMENT "<op>: ..." from OptimizerViewOf / OptimizerParamsOf.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/ops/training/optimizer_ops.h"
#include "kernels/ops/training/optimizer_view.h"

namespace remex::kernels::internal {

namespace {

// The attribute `name` (ONNX stores it as a float) as a double; `fallback` when absent,
// INVALID_ARGUMENT when absent and required (no fallback).
StatusOr<double> FloatAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                           std::optional<float> fallback) {
  if (!attrs.Has(name) && !fallback) return OpError(op, "attribute '" + std::string(name) + "' is required");
  StatusOr<float> v = fallback ? attrs.Float(name, *fallback) : attrs.Float(name);
  if (!v.ok()) return OpError(op, v.status().message());
  return static_cast<double>(*v);
}

}  // namespace

StatusOr<optimizer::Params> OptimizerParamsOf(std::string_view op, const Attributes& attrs) {
  optimizer::Params p;
  if (op == "Adagrad") {
    p.rule = optimizer::Rule::kAdagrad;
    REMEX_ASSIGN_OR_RETURN(p.decay_factor, FloatAttr(op, attrs, "decay_factor", 0.0f));
    REMEX_ASSIGN_OR_RETURN(p.epsilon, FloatAttr(op, attrs, "epsilon", 1e-6f));
    REMEX_ASSIGN_OR_RETURN(p.norm_coefficient, FloatAttr(op, attrs, "norm_coefficient", 0.0f));
  } else if (op == "Adam") {
    p.rule = optimizer::Rule::kAdam;
    REMEX_ASSIGN_OR_RETURN(p.alpha, FloatAttr(op, attrs, "alpha", 0.9f));
    REMEX_ASSIGN_OR_RETURN(p.beta, FloatAttr(op, attrs, "beta", 0.999f));
    REMEX_ASSIGN_OR_RETURN(p.epsilon, FloatAttr(op, attrs, "epsilon", 1e-6f));
    REMEX_ASSIGN_OR_RETURN(p.norm_coefficient, FloatAttr(op, attrs, "norm_coefficient", 0.0f));
    REMEX_ASSIGN_OR_RETURN(p.norm_coefficient_post, FloatAttr(op, attrs, "norm_coefficient_post", 0.0f));
  } else if (op == "Momentum") {
    REMEX_ASSIGN_OR_RETURN(p.alpha, FloatAttr(op, attrs, "alpha", std::nullopt));
    REMEX_ASSIGN_OR_RETURN(p.beta, FloatAttr(op, attrs, "beta", std::nullopt));
    REMEX_ASSIGN_OR_RETURN(p.norm_coefficient, FloatAttr(op, attrs, "norm_coefficient", std::nullopt));
    if (!attrs.Has("mode")) return OpError(op, "attribute 'mode' is required");
    StatusOr<std::string> mode = attrs.String("mode");
    if (!mode.ok()) return OpError(op, mode.status().message());
    if (*mode == "standard") {
      p.rule = optimizer::Rule::kMomentum;
    } else if (*mode == "nesterov") {
      p.rule = optimizer::Rule::kNesterov;
    } else {
      return OpError(op, "mode must be \"standard\" or \"nesterov\", got \"" + *mode + "\"");
    }
  } else {
    return OpError(op, "not an optimizer of the training domain");
  }
  return p;
}

StatusOr<OptimizerView> OptimizerViewOf(std::string_view op, const Attributes& attrs,
                                        std::span<const ShapeFnArg> in) {
  OptimizerView v;
  REMEX_ASSIGN_OR_RETURN(v.params, OptimizerParamsOf(op, attrs));
  v.states = OptimizerStates(v.params.rule);
  const int64_t groups = 2 + v.states;  // X, G and the state groups.
  const int64_t tensors = static_cast<int64_t>(in.size()) - 2;
  if (tensors < groups || tensors % groups != 0) {
    return OpError(op, std::to_string(in.size()) + " inputs; expects R, T and " + std::to_string(groups) +
                           " groups of n tensors (n >= 1)");
  }
  v.n = tensors / groups;
  for (const ShapeFnArg& a : in) {
    if (!a.present) return OpError(op, "every input is required");
  }
  if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat64) {
    return OpError(op, "R has dtype " + std::string(DTypeName(in[0].dtype)) + ", expects float32 or float64");
  }
  if (NumElements(in[0].shape).value_or(0) != 1) {
    return OpError(op, "R must be a scalar, got shape " + ShapeToString(in[0].shape));
  }
  if (in[1].dtype != DType::kInt64) {
    return OpError(op, "T has dtype " + std::string(DTypeName(in[1].dtype)) + ", expects int64");
  }
  if (NumElements(in[1].shape).value_or(0) != 1) {
    return OpError(op, "T must be a scalar, got shape " + ShapeToString(in[1].shape));
  }
  v.rate_dtype = in[0].dtype;
  v.dtype = in[2].dtype;
  if (v.dtype != DType::kFloat32 && v.dtype != DType::kFloat64) {
    return OpError(op, "X has dtype " + std::string(DTypeName(v.dtype)) + ", expects float32 or float64");
  }
  for (int64_t i = 0; i < v.n; ++i) {
    const ShapeFnArg& x = in[v.X(i)];
    REMEX_ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(op, x.shape));
    auto check = [&](size_t at, const std::string& what) -> Status {
      if (in[at].dtype != v.dtype) {
        return OpError(op, what + " has dtype " + std::string(DTypeName(in[at].dtype)) + ", X has " +
                               std::string(DTypeName(v.dtype)));
      }
      if (in[at].shape != x.shape) {
        return OpError(op, what + " has shape " + ShapeToString(in[at].shape) + ", its X has " +
                               ShapeToString(x.shape));
      }
      return OkStatus();
    };
    const std::string index = std::to_string(i + 1);
    REMEX_RETURN_IF_ERROR(check(v.X(i), "X" + index));
    REMEX_RETURN_IF_ERROR(check(v.G(i), "G" + index));
    for (int k = 0; k < v.states; ++k) {
      REMEX_RETURN_IF_ERROR(check(v.State(k, i), "state " + std::to_string(k + 1) + " of X" + index));
    }
    v.shapes.push_back(x.shape);
    v.counts.push_back(count);
  }
  return v;
}

namespace {

// The state groups of op `name` (Adam 2, Adagrad and Momentum 1).
int StatesOf(const std::string& name) {
  return OptimizerStates(name == "Adam" ? optimizer::Rule::kAdam : optimizer::Rule::kAdagrad);
}

OpDef OptimizerDef(const std::string& name) {
  const int states = StatesOf(name);
  OpDef def;
  def.name = name;
  def.domain = std::string(kTrainingDomain);
  def.since_version = 1;
  def.min_inputs = 2 + 2 + states;  // R, T, one X, its G and its state.
  def.max_inputs = -1;
  def.min_outputs = 1 + states;
  def.max_outputs = -1;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [name](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(OptimizerView v, OptimizerViewOf(name, attrs, in));
    std::vector<TensorInfo> out;
    for (int k = 0; k <= v.states; ++k) {
      for (int64_t i = 0; i < v.n; ++i) out.push_back({v.dtype, v.shapes[static_cast<size_t>(i)]});
    }
    return out;
  };
  def.output_dtypes = [states](const Attributes&, std::span<const DType> in) {
    // X's dtype for each of the (1 + states) * n outputs.
    const size_t groups = 2 + static_cast<size_t>(states);
    const size_t n = in.size() > 2 ? (in.size() - 2) / groups : 0;
    return std::vector<DType>((groups - 1) * n, n > 0 ? in[2] : DType::kUndefined);
  };
  return def;
}

template <typename T>
double ScalarAt(const TensorRef& t) {
  return static_cast<double>(*static_cast<const T*>(t.data));
}

class OptimizerKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<OptimizerKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(OptimizerParamsOf(def.name, attrs).status());
    return std::make_unique<OptimizerKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(OptimizerView v, OptimizerViewOf(op(), attrs(), ToShapeArgs(in)));
    const size_t wanted = static_cast<size_t>((1 + v.states) * v.n);
    if (out.size() != wanted) {
      return OpError(op(), std::to_string(out.size()) + " outputs; expects " + std::to_string(wanted));
    }
    const double r = v.rate_dtype == DType::kFloat32 ? ScalarAt<float>(in[0]) : ScalarAt<double>(in[0]);
    const optimizer::Factors f = optimizer::FactorsOf(v.params, r, *static_cast<const int64_t*>(in[1].data));
    if (v.dtype == DType::kFloat32) {
      Apply<float>(v, f, in, out);
    } else {
      Apply<double>(v, f, in, out);
    }
    return OkStatus();
  }

 private:
  // Outputs may alias their inputs (an update in place): each element is read before
  // it is written.
  template <typename T>
  static void Apply(const OptimizerView& v, const optimizer::Factors& f, std::span<const TensorRef> in,
                    std::span<const TensorRef> out) {
    for (int64_t i = 0; i < v.n; ++i) {
      const T* x = DataAs<const T>(in[v.X(i)]);
      const T* g = DataAs<const T>(in[v.G(i)]);
      const T* s1 = DataAs<const T>(in[v.State(0, i)]);
      const T* s2 = v.states > 1 ? DataAs<const T>(in[v.State(1, i)]) : nullptr;
      T* x_new = DataAs<T>(out[v.NewX(i)]);
      T* s1_new = DataAs<T>(out[v.NewState(0, i)]);
      T* s2_new = v.states > 1 ? DataAs<T>(out[v.NewState(1, i)]) : nullptr;
      for (int64_t e = 0; e < v.counts[static_cast<size_t>(i)]; ++e) {
        double a = 0, b = 0;
        const double xe = optimizer::Update(v.params, f, x[e], g[e], s1[e], s2 ? s2[e] : 0.0, &a, &b);
        x_new[e] = static_cast<T>(xe);
        s1_new[e] = static_cast<T>(a);
        if (s2_new) s2_new[e] = static_cast<T>(b);
      }
    }
  }
};

}  // namespace

Status AddOptimizerOpDefs(KernelRegistry& registry) {
  for (const char* name : {"Adagrad", "Adam", "Momentum"}) REMEX_RETURN_IF_ERROR(registry.AddOp(OptimizerDef(name)));
  return OkStatus();
}

Status AddOptimizerCpuKernels(KernelRegistry& registry) {
  for (const char* name : {"Adagrad", "Adam", "Momentum"}) {
    REMEX_RETURN_IF_ERROR(AddCpuKernel<OptimizerKernel>(registry, name));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
