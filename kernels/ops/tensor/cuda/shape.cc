// CUDA kernel of Shape (host side; device code: LaunchWriteInt64s, generator/cuda/generate_impl.cu).
// Semantics are the CPU kernel's (kernels/ops/tensor/tensor.cc): Shape, opsets 1-15, opset
// 15's start/end (clamped to [0, rank]); it reads the input's shape only and writes int64
// values to device memory.

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
#include "kernels/ops/generator/cuda/generate_impl.h"
#include "kernels/ops/training/cuda/optimizer_impl.h"
#include "kernels/ops/elementwise/dropout_mask.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

using internal::ShapeRange;
using internal::ShapeRangeOf;

// ---------------------------------------------------------------------------
// Shape and Size.

class ShapeKernel final : public CudaKernel {
 public:
  // start and end are clamped per call, to the input's rank.
  static StatusOr<std::unique_ptr<ShapeKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                       CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(ShapeRangeOf(attrs, 0).status());
    return std::make_unique<ShapeKernel>(def, attrs, context);
  }
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(ShapeRange r, ShapeRangeOf(attrs(), static_cast<int64_t>(shape.size())));
    if (r.end == r.start) return OkStatus();
    return Launch([&] {
      return LaunchWriteInt64s(static_cast<int64_t*>(out[0].data), shape.data() + r.start, r.end - r.start,
                               stream());
    });
  }
};

}  // namespace

Status AddShapeCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "Shape", MakeCudaKernel<ShapeKernel>(context));
}

}  // namespace remex::kernels::cuda
