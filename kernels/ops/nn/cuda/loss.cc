// CUDA kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (host side). Device code:
// the launcher of loss_impl.h (loss_impl.cu).
//
// Semantics are the CPU kernels' (kernels/ops/nn/loss.cc), opsets 12-17: reduction none,
// sum, mean; ignore_index; optional weight and log_prob. A target outside [0, C) counts as
// ignored instead of failing. float32 and float16; other dtypes are UNIMPLEMENTED naming the
// op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/cuda/loss_impl.h"

namespace remex::kernels::cuda {

namespace {

// ---------------------------------------------------------------------------
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

// `softmax`: SoftmaxCrossEntropyLoss. Attributes and the view are the CPU kernel's
// (internal::LossAttrsOf, LossViewOf).
class LossKernel final : public SkipEmptyKernel {
 public:
  LossKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool softmax)
      : SkipEmptyKernel(def, std::move(attrs), context), softmax_(softmax) {}

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

}  // namespace

Status AddLossCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "NegativeLogLikelihoodLoss", MakeCudaKernel<LossKernel>(context, false)));
  return AddCudaKernel(registry, "SoftmaxCrossEntropyLoss", MakeCudaKernel<LossKernel>(context, true));
}

}  // namespace remex::kernels::cuda
