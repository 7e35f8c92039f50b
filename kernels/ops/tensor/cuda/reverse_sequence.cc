// CUDA kernel of ReverseSequence-10 (host side).
// Device code: LaunchReverseSequence, kernels/ops/tensor/cuda/transform_impl.cu.
// Semantics and checks are the CPU kernel's (kernels/ops/tensor/reverse_sequence.cc, plan in
// kernels/ops/tensor/reverse_sequence_ops.h): any dtype; sequence_lens stay in device memory,
// so an out-of-range length, which the CPU kernel refuses ("out of range"), is clamped to
// [0, time extent] here: no element outside the input is read and every output element is
// written.

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
#include "kernels/ops/tensor/cuda/transform_impl.h"

namespace remex::kernels::cuda {
namespace {

class ReverseSequenceKernel final : public CudaKernel {
 public:
  ReverseSequenceKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::ReverseSequenceView v,
                           internal::ReverseSequenceViewOf(attrs(), internal::ToShapeArgs(in)));
    const int size = static_cast<int>(DTypeSize(in[0].dtype));
    if (size != 1 && size != 2 && size != 4 && size != 8)
      return Unsupported(in[0].dtype, "1, 2, 4 and 8-byte dtypes are");
    return Launch([&] {
      return LaunchReverseSequence(v.plan, v.total, v.time, size, in[0].data,
                                   static_cast<const int64_t*>(in[1].data), out[0].data, stream());
    });
  }
};

}  // namespace

Status AddReverseSequenceCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "ReverseSequence", MakeCudaKernel<ReverseSequenceKernel>(context));
}

}  // namespace remex::kernels::cuda
