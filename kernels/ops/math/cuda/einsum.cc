// CUDA kernel of Einsum-12 (host side).
// Device code in kernels/ops/math/cuda/math_impl.cu.
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/math/einsum.cc, index plan of
// kernels/ops/math/einsum_ops.h): float32, float16, float64, int32, int64; the index plan is
// parsed on the host (EinsumViewOf) and passed by value; one thread per output element,
// summing in the CPU's order and type.

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
#include "kernels/ops/math/cuda/math_impl.h"

namespace remex::kernels::cuda {
namespace {

class EinsumKernel final : public CudaKernel {
 public:
  EinsumKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::EinsumView v,
                           internal::EinsumViewOf(attrs(), internal::ToShapeArgs(in)));
    EinsumInputs inputs;
    for (size_t k = 0; k < in.size(); ++k) inputs.data[k] = in[k].data;
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchEinsum<T>(v.plan, inputs, static_cast<T*>(out[0].data), stream());
        });
  }
};

}  // namespace

Status AddEinsumCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "Einsum", MakeCudaKernel<EinsumKernel>(context));
}

}  // namespace remex::kernels::cuda
