// CUDA kernel of MeanVarianceNormalization-9/13 (host side).
// Device code: LaunchMvn, kernels/ops/nn/cuda/norm_impl.cu.
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/nn/mvn.cc, plan in
// kernels/ops/nn/mvn_ops.h): float32, float16, float64; the sums run in double in the CPU's
// order, one thread per normalised group.

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/cuda/norm_impl.h"

namespace remex::kernels::cuda {
namespace {

class MvnKernel final : public CudaKernel {
 public:
  MvnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(seqnorm::MvnPlan p, internal::MvnPlanOf(attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchMvn<T>(p, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), stream());
    });
  }
};

}  // namespace

Status AddMvnCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (int since : {9, 13}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "MeanVarianceNormalization", since, MakeCudaKernel<MvnKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
