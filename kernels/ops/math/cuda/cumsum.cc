// CUDA kernel of CumSum (host side; device code: LaunchCumSum, math/cuda/math_impl.cu).
// CumSum, opsets 11-14, as the CPU kernel (kernels/ops/math/cumsum.cc): axis on the host,
// exclusive, reverse; float32, float16, float64, int32, int64 (uint32 and uint64 are the
// CPU's only). Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/math/cuda/math_impl.h"

namespace remex::kernels::cuda {
namespace {


// ---------------------------------------------------------------------------
// CumSum: x (device), axis (host); the view and flags are the CPU kernel's.

class CumSumKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::CumSumView v, internal::CumSumViewOf(attrs(), internal::ToShapeArgs(in)));
    if (v.outer * v.n * v.inner == 0) return OkStatus();
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchCumSum<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), v.outer,
                                 v.n, v.inner, v.exclusive, v.reverse, stream());
        });
  }
};

}  // namespace

Status AddCumSumCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "CumSum", MakeCudaKernel<CumSumKernel>(context));
}

}  // namespace remex::kernels::cuda
