// CUDA kernels of Softmax, LogSoftmax and Hardmax (host side). Device code: the launcher of
// softmax_impl.h (softmax_impl.cu, on the block reduction of kernels/cuda/block_reduce.cuh).
//
// Semantics are the CPU kernels' (kernels/ops/math/softmax.cc): opset 13+ per axis; opsets
// 1-12 (their own entries) over the flattened [axis:] dims. float32 and float16; other
// dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/math/cuda/softmax_impl.h"

namespace remex::kernels::cuda {

namespace {

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax.

// `flatten`: the opsets 1-12 entry; else opset 13's. The view is the CPU kernel's
// (internal::SoftmaxViewOf).
class SoftmaxKernel final : public SkipEmptyKernel {
 public:
  SoftmaxKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, SoftmaxMode mode, bool flatten)
      : SkipEmptyKernel(def, std::move(attrs), context), mode_(mode), flatten_(flatten) {}

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

}  // namespace

Status AddSoftmaxCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (SoftmaxMode mode : {SoftmaxMode::kSoftmax, SoftmaxMode::kLogSoftmax, SoftmaxMode::kHardmax}) {
    const std::string_view name = internal::SoftmaxOpName(mode);
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, 1, MakeCudaKernel<SoftmaxKernel>(context, mode, true)));
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, 13, MakeCudaKernel<SoftmaxKernel>(context, mode, false)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
