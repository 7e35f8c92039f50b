// CUDA kernels of the nn group (host side): reductions, ArgMax/ArgMin, the Softmax family and
// normalisation here; pooling and Resize in nn_pool.cc; the remaining elementwise ops
// in nn_elementwise.cc. Device code in nn_*_impl.cu.
//
// Semantics are the CPU kernels' (kernels/reduce.cc, softmax.cc, norm.cc), which follow
// ONNX:
//   - ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, opsets 1-18: axes
//     as the attribute or as input 1 (host memory, ShapeDep::kData), keepdims,
//     noop_with_empty_axes. float32 and float16, accumulated in float32 (the CPU
//     kernels fold float32 partial sums into float64, so sums agree to float32
//     rounding). Max/Min propagate NaN; empty reductions give the CPU's identities.
//   - ArgMax/ArgMin, opsets 1-13: axis, keepdims, select_last_index; int64 output.
//   - Softmax, LogSoftmax and Hardmax: opset 13+ per axis; opsets 1-12 (their own
//     entries) over the flattened [axis:] dims.
//   - NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12-17, kernels/
//     loss.cc): reduction none, sum, mean; ignore_index; optional weight and log_prob.
//     A target outside [0, C) counts as ignored instead of failing.
//   - BatchNormalization (opsets 7-15, inference and training mode: batch statistics
//     per channel in one block, running statistics written), InstanceNormalization (opset 6),
//     LayerNormalization (opset 17, stash_type 1 only; Mean and InvStdDev outputs).
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/nn_common.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {

namespace {

// ---------------------------------------------------------------------------
// Reduce*.

// Per input dim, whether it is reduced (the shape function has already accepted the
// attributes and the axes; input 1 is ShapeDep::kData: host memory).
StatusOr<std::vector<bool>> ReducedDims(std::string_view op, const Attributes& attrs,
                                        std::span<const TensorRef> in) {
  REMEX_ASSIGN_OR_RETURN(internal::ReduceSpec spec,
                         internal::ParseReduce(op, attrs, internal::ToShapeArgs(in)));
  return std::move(spec.reduced);
}

StatusOr<ReducePlan> MakeReducePlan(std::string_view op, const Shape& shape,
                                    const std::vector<bool>& reduced) {
  struct Group {
    int64_t extent, stride;
    bool reduced;
  };
  std::vector<Group> groups;  // Outermost first.
  ReducePlan plan;
  plan.out_count = 1;
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? plan.red_count : plan.out_count) *= shape[d];
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().extent *= shape[d];
      groups.back().stride = strides[d];
    } else {
      groups.push_back({shape[d], strides[d], reduced[d]});
    }
  }
  for (const Group& g : groups) {
    int& n = g.reduced ? plan.num_red : plan.num_kept;
    if (n == kMaxReduceGroups) {
      return Unimplemented(std::string(op) + " on cuda: " + ShapeToString(shape) + " needs more than " +
                           std::to_string(kMaxReduceGroups) + " groups of kept or reduced dims");
    }
    (g.reduced ? plan.red_dims : plan.kept_dims)[n] = g.extent;
    (g.reduced ? plan.red_strides : plan.kept_strides)[n] = g.stride;
    ++n;
  }
  plan.inner_reduced = !groups.empty() && groups.back().reduced;
  return plan;
}

class ReduceKernel final : public NnKernel {
 public:
  ReduceKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, ReduceKind kind)
      : NnKernel(def, std::move(attrs), context), kind_(kind) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedDims(op(), attrs(), in));
    REMEX_ASSIGN_OR_RETURN(ReducePlan plan, MakeReducePlan(op(), in[0].shape, reduced));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchReduce<T>(kind_, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), plan,
                             stream());
    });
  }

 private:
  const ReduceKind kind_;
};

// ---------------------------------------------------------------------------
// ArgMax, ArgMin.

class ArgKernel final : public NnKernel {
 public:
  ArgKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool is_max)
      : NnKernel(def, std::move(attrs), context), is_max_(is_max) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(int64_t axis_attr, attrs().Int("axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis,
                           internal::NormalizeAxis(op(), axis_attr, static_cast<int64_t>(shape.size())));
    REMEX_ASSIGN_OR_RETURN(bool select_last, internal::BoolAttr(op(), attrs(), "select_last_index", 0));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchArgExtremum<T>(is_max_, select_last, static_cast<const T*>(in[0].data),
                                  static_cast<int64_t*>(out[0].data), outer, shape[axis], inner, stream());
    });
  }

 private:
  const bool is_max_;
};

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax.

// `flatten`: the opsets 1-12 entry; else opset 13's. The view is the CPU kernel's
// (internal::SoftmaxViewOf).
class SoftmaxKernel final : public NnKernel {
 public:
  SoftmaxKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, SoftmaxMode mode, bool flatten)
      : NnKernel(def, std::move(attrs), context), mode_(mode), flatten_(flatten) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::SoftmaxView v, internal::SoftmaxViewOf(op(), flatten_, attrs(), in[0].shape));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchSoftmax<T>(mode_, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), v.outer,
                              v.n, v.inner, stream());
    });
  }

 private:
  const SoftmaxMode mode_;
  const bool flatten_;
};

// ---------------------------------------------------------------------------
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

// `softmax`: SoftmaxCrossEntropyLoss. Attributes and the view are the CPU kernel's
// (internal::LossAttrsOf, LossViewOf).
class LossKernel final : public NnKernel {
 public:
  LossKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool softmax)
      : NnKernel(def, std::move(attrs), context), softmax_(softmax) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::LossAttrs a, internal::LossAttrsOf(op(), attrs()));
    REMEX_ASSIGN_OR_RETURN(internal::LossView v, internal::LossViewOf(op(), internal::ToShapeArgs(in)));
    // The element types of x (T) and of the target (I, int32 or int64: the shape
    // function's).
    auto launch = [&](auto x_tag, auto target_tag) {
      using T = decltype(x_tag);
      using I = decltype(target_tag);
      LossLaunch<T, I> l;
      l.x = static_cast<const T*>(in[0].data);
      l.target = static_cast<const I*>(in[1].data);
      l.weight = v.weighted ? static_cast<const T*>(in[2].data) : nullptr;
      l.loss = static_cast<T*>(out[0].data);
      l.log_prob = softmax_ && out.size() > 1 && out[1].present() ? static_cast<T*>(out[1].data) : nullptr;
      l.n = v.n;
      l.c = v.c;
      l.d = v.d;
      l.reduction = a.reduction;
      l.softmax = softmax_;
      l.has_ignore = a.ignore_index.has_value();
      l.ignore_index = a.ignore_index.value_or(0);
      return LaunchLoss(l, stream());
    };
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      return in[1].dtype == DType::kInt64 ? launch(tag, int64_t{}) : launch(tag, int32_t{});
    });
  }

 private:
  const bool softmax_;
};

// ---------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LayerNormalization.

// [n, c, inner] view of a [N, C, ...] shape.
void ChannelView(const Shape& shape, int64_t& n, int64_t& c, int64_t& inner) {
  n = shape[0];
  c = shape[1];
  inner = 1;
  for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
}

class BatchNormKernel final : public NnKernel {
 public:
  using NnKernel::NnKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    int64_t n, c, inner;
    ChannelView(in[0].shape, n, c, inner);
    REMEX_ASSIGN_OR_RETURN(int64_t training, attrs().Int("training_mode", 0));
    float momentum = 0.0f;
    if (training == 1) {
      REMEX_ASSIGN_OR_RETURN(momentum, attrs().Float("momentum", 0.9f));
    }
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      auto input = [&](size_t i) { return static_cast<const T*>(in[i].data); };
      T* y = static_cast<T*>(out[0].data);
      if (training == 1) {
        return LaunchBatchNormTraining<T>(input(0), input(1), input(2), input(3), input(4), y,
                                          out.size() > 1 ? static_cast<T*>(out[1].data) : nullptr,
                                          out.size() > 2 ? static_cast<T*>(out[2].data) : nullptr, n, c,
                                          inner, epsilon, momentum, stream());
      }
      return LaunchBatchNorm<T>(input(0), input(1), input(2), input(3), input(4), y, n, c, inner, epsilon,
                                stream());
    });
  }
};

class InstanceNormKernel final : public NnKernel {
 public:
  using NnKernel::NnKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    int64_t n, c, inner;
    ChannelView(in[0].shape, n, c, inner);
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchInstanceNorm<T>(static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                   static_cast<const T*>(in[2].data), static_cast<T*>(out[0].data), n, c,
                                   inner, epsilon, stream());
    });
  }
};

// Strides of a parameter of shape `s` broadcast (right-aligned) to `x`, 0 where it
// broadcasts; whether it is one row over the dims [axis, rank).
void ParamStrides(const Shape& x, const Shape& s, size_t axis, int64_t* strides, bool& is_row) {
  const size_t lead = x.size() - s.size();
  int64_t st = 1;
  is_row = true;
  for (size_t d = x.size(); d-- > 0;) {
    const int64_t extent = d < lead ? 1 : s[d - lead];
    strides[d] = extent == 1 ? 0 : st;
    st *= extent;
    if (d < axis ? extent != 1 : extent != x[d]) is_row = false;
  }
}

class LayerNormKernel final : public NnKernel {
 public:
  using NnKernel::NnKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int64_t stash, attrs().Int("stash_type", 1));
    if (stash != 1) {
      return Unimplemented(op() + " on cuda: stash_type " + std::to_string(stash) +
                           " is not implemented (1 is)");
    }
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    REMEX_ASSIGN_OR_RETURN(int64_t axis_attr, attrs().Int("axis", -1));
    const Shape& xs = in[0].shape;
    const int64_t rank = static_cast<int64_t>(xs.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), axis_attr, rank));
    if (rank > kMaxLayerNormRank) {
      return Unimplemented(op() + " on cuda: rank " + std::to_string(rank) + " is above " +
                           std::to_string(kMaxLayerNormRank));
    }
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= xs[i];
    if (outer == 0) return OkStatus();
    ParamBroadcast pb;
    pb.rank = static_cast<int>(rank);
    for (int64_t i = 0; i < rank; ++i) pb.dims[i] = xs[i];
    ParamStrides(xs, in[1].shape, static_cast<size_t>(axis), pb.scale_strides, pb.scale_is_row);
    const bool has_bias = in.size() > 2 && in[2].present();
    if (has_bias) ParamStrides(xs, in[2].shape, static_cast<size_t>(axis), pb.bias_strides, pb.bias_is_row);
    float* mean_out = out.size() > 1 ? static_cast<float*>(out[1].data) : nullptr;
    float* inv_out = out.size() > 2 ? static_cast<float*>(out[2].data) : nullptr;
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchLayerNorm<T>(static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                has_bias ? static_cast<const T*>(in[2].data) : nullptr,
                                static_cast<T*>(out[0].data), mean_out, inv_out, outer, inner, pb, epsilon,
                                stream());
    });
  }
};

}  // namespace

Status AddNnCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const internal::ReduceOpInfo& r : internal::ReduceOps()) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, r.name, MakeCudaKernel<ReduceKernel>(context, r.kind)));
  }
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "ArgMax", MakeCudaKernel<ArgKernel>(context, true)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "ArgMin", MakeCudaKernel<ArgKernel>(context, false)));
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "NegativeLogLikelihoodLoss", MakeCudaKernel<LossKernel>(context, false)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "SoftmaxCrossEntropyLoss", MakeCudaKernel<LossKernel>(context, true)));
  for (SoftmaxMode mode : {SoftmaxMode::kSoftmax, SoftmaxMode::kLogSoftmax, SoftmaxMode::kHardmax}) {
    const std::string_view name = internal::SoftmaxOpName(mode);
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, 1, MakeCudaKernel<SoftmaxKernel>(context, mode, true)));
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, 13, MakeCudaKernel<SoftmaxKernel>(context, mode, false)));
  }
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "BatchNormalization", MakeCudaKernel<BatchNormKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "InstanceNormalization", MakeCudaKernel<InstanceNormKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "LayerNormalization", MakeCudaKernel<LayerNormKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddNnPoolCudaKernels(registry, context));
  return AddNnElementwiseCudaKernels(registry, context);
}

}  // namespace remex::kernels::cuda
