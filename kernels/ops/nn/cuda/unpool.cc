// CUDA kernel of MaxUnpool-9/11 (host side). Device code: LaunchMaxUnpool,
// kernels/ops/nn/cuda/pool_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernel's (kernels/ops/nn/unpool.cc; its view in
// kernels/ops/image/det_view.h): float16, float32, float64; output_shape in host memory. The
// winning (largest) position of each output element is found with atomicMax into a
// scratch array, so repeated indices give the CPU's last write; an output_shape that pads
// the unpooled tensor is handled up to rank 8. An index out of range is skipped instead of
// failing.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/ops/image/det_view.h"
#include "kernels/ops/nn/cuda/pool_impl.h"

namespace remex::kernels::cuda {
namespace {

class MaxUnpoolKernel final : public CudaKernel {
 public:
  MaxUnpoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::MaxUnpoolView v,
                           internal::MaxUnpoolViewOf(attrs(), internal::ToShapeArgs(in)));
    UnpoolPadding padding;
    if (v.output != v.unpooled) {
      if (v.output.size() > static_cast<size_t>(kMaxUnpoolRank)) {
        return Unimplemented(op() +
                             " on cuda: an output_shape that pads the output is implemented up to rank " +
                             std::to_string(kMaxUnpoolRank) + ", got " + std::to_string(v.output.size()));
      }
      padding.rank = static_cast<int>(v.output.size());
      for (int d = 0; d < padding.rank; ++d) {
        padding.dims[d] = v.output[d];
        padding.unpooled[d] = v.unpooled[d];
      }
    }
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* winner,
                           workspace.Allocate(static_cast<size_t>(v.unpooled_count) * sizeof(long long)));
    REMEX_RETURN_IF_ERROR(Launch([&] {
      return LaunchMaxUnpool(in[0].data, static_cast<const int64_t*>(in[1].data), v.x_count, v.unpooled_count,
                             padding, out[0].data, v.y_count, static_cast<int>(DTypeSize(in[0].dtype)),
                             static_cast<long long*>(winner), stream());
    }));
    return workspace.Release();
  }
};

}  // namespace

Status AddUnpoolCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (int since : {9, 11}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "MaxUnpool", since, MakeCudaKernel<MaxUnpoolKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
