// CUDA kernel of BitShift-11 (host side). Device code: LaunchBitShift,
// kernels/ops/elementwise/cuda/elementwise_ops_impl.cu.
//
// Semantics are the CPU kernel's (kernels/ops/elementwise/bitshift.cc): uint8, uint16,
// uint32, uint64 with numpy broadcasting (at most kMaxBroadcastRank dims after merging); a
// shift by the bit width or more gives 0 (kernels/ops/tensor/index_ops.h, shared with the
// CPU).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/elementwise/cuda/elementwise_ops_impl.h"

namespace remex::kernels::cuda {
namespace {

using internal::GatherNdView;

int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

// The kernels of this group return early when every output is empty.
class IndexKernel : public CudaKernel {
 public:
  IndexKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  // The element size of a dtype moved as raw bits (1, 2, 4 or 8 bytes).
  StatusOr<int> ElemSize(DType dtype) const {
    const size_t size = DTypeSize(dtype);
    if (size == 1 || size == 2 || size == 4 || size == 8) return static_cast<int>(size);
    return Unsupported(dtype, "elements of 1, 2, 4 or 8 bytes are");
  }
  // Copies `bytes` of host memory to device memory `dst` on stream(). `src` is pageable
  // (a std::vector): cudaMemcpyAsync returns once it has been staged, so the caller may
  // release it as soon as this returns.
  Status Upload(void* dst, const void* src, size_t bytes) const {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(UseDevice());
    return CudaCheck(op(), "cudaMemcpyAsync",
                     cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  }
};

// ---------------------------------------------------------------------------
// BitShift: X, Y broadcast to Z.

class BitShiftKernel final : public IndexKernel {
 public:
  static StatusOr<std::unique_ptr<BitShiftKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                          CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(const bool left, internal::BitShiftLeftOf(attrs));
    return std::make_unique<BitShiftKernel>(def, attrs, context, left);
  }
  BitShiftKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool left)
      : IndexKernel(def, std::move(attrs), context), left_(left) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(in[0].dtype));
    StatusOr<BroadcastPlan> plan = ComputeBroadcastPlan(in[0].shape, in[1].shape, out[0].shape);
    if (!plan.ok()) return plan.status().WithContext(op());
    return Launch([&] {
      return LaunchBitShift(es, left_, in[0].data, in[1].data, out[0].data, Count(out[0].shape), *plan,
                            stream());
    });
  }

 private:
  const bool left_;
};

}  // namespace

Status AddBitShiftCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "BitShift", MakeCudaKernel<BitShiftKernel>(context));
}

}  // namespace remex::kernels::cuda
