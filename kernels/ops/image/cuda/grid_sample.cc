// CUDA kernel of GridSample-16 (host side). Device code in grid_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/image/grid_sample.cc): the same
// view (kernels/ops/image/grid_sample_view.h) checks the inputs. float16, float32, float64; a
// thread per output element evaluating kernels/ops/image/grid_sample_ops.h's functions, as the
// CPU does: the same bits.

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/image/cuda/grid_sample_impl.h"
#include "kernels/ops/image/grid_sample_view.h"
#include "kernels/internal.h"

namespace remex::kernels::cuda {
namespace {

class GridSampleKernel final : public CudaKernel {
 public:
  GridSampleKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::GridSampleView v,
                           internal::GridSampleViewOf(attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double>(v.dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchGridSample<T>(v.g, static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                 static_cast<T*>(out[0].data), stream());
    });
  }
};

}  // namespace

Status AddGridSampleCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "GridSample", 16, MakeCudaKernel<GridSampleKernel>(context));
}

}  // namespace remex::kernels::cuda
