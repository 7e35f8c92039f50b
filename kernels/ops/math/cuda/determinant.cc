// CUDA kernel of Det-11 (host side).
// Device code in kernels/ops/math/cuda/math_impl.cu.
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/math/determinant.cc, LU of
// kernels/ops/math/determinant_ops.h): float32, float16, float64; one thread per matrix, LU
// in double in a scratch copy (batch * M * M doubles from the context's workspace hook, or
// stream-ordered cudaMallocAsync without one).

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

class DetKernel final : public CudaKernel {
 public:
  DetKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::DetView v, internal::DetViewOf(internal::ToShapeArgs(in)));
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat16 && in[0].dtype != DType::kFloat64) {
      return Unsupported(in[0].dtype, "float32, float16 and float64 are");
    }
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* scratch,
                           workspace.Allocate(static_cast<size_t>(v.batch * v.m * v.m) * sizeof(double)));
    REMEX_RETURN_IF_ERROR(
        (LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchDet<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), v.batch, v.m,
                              static_cast<double*>(scratch), stream());
        })));
    return workspace.Release();
  }
};

}  // namespace

Status AddDetCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "Det", MakeCudaKernel<DetKernel>(context));
}

}  // namespace remex::kernels::cuda
