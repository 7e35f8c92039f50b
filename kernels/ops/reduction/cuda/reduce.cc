// CUDA kernels of the Reduce ops, ArgMax and ArgMin (host side). Device code: the launchers of
// reduce_impl.h (reduce_impl.cu).
//
// Semantics are the CPU kernels' (kernels/ops/reduction/reduce.cc, arg_topk.cc), which follow
// ONNX:
//   - ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, opsets 1-18: axes
//     as the attribute or as input 1 (host memory, ShapeDep::kData), keepdims,
//     noop_with_empty_axes. float32 and float16, accumulated in float32 (the CPU
//     kernels fold float32 partial sums into float64, so sums agree to float32
//     rounding). Max/Min propagate NaN; empty reductions give the CPU's identities.
//   - ArgMax/ArgMin, opsets 1-13: axis, keepdims, select_last_index; int64 output.
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/reduction/cuda/reduce_impl.h"

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

class ReduceKernel final : public SkipEmptyKernel {
 public:
  ReduceKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, ReduceKind kind)
      : SkipEmptyKernel(def, std::move(attrs), context), kind_(kind) {}

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

class ArgKernel final : public SkipEmptyKernel {
 public:
  ArgKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool is_max)
      : SkipEmptyKernel(def, std::move(attrs), context), is_max_(is_max) {}

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

}  // namespace

Status AddReduceCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const internal::ReduceOpInfo& r : internal::ReduceOps()) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, r.name, MakeCudaKernel<ReduceKernel>(context, r.kind)));
  }
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "ArgMax", MakeCudaKernel<ArgKernel>(context, true)));
  return AddCudaKernel(registry, "ArgMin", MakeCudaKernel<ArgKernel>(context, false));
}

}  // namespace remex::kernels::cuda
