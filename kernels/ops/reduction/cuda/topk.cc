// CUDA kernel of TopK (host side; device code: LaunchTopK, reduction/cuda/reduce_impl.cu).
// TopK, opsets 1-11, as the CPU kernel (kernels/ops/reduction/arg_topk.cc): axis, largest,
// sorted; k as the attribute (opset 1) or as input 1 (host memory, ShapeDep::kData).
// float32, float16, float64, int32, int64 values, int64 indices. The output is always
// sorted (the wanted end first, NaN above every number, equal values by ascending index),
// as the CPU kernel does. Other dtypes are UNIMPLEMENTED naming the op and dtype.

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
#include "kernels/ops/reduction/cuda/reduce_impl.h"

namespace remex::kernels::cuda {
namespace {

using internal::CheckTopKAttrs;

// ---------------------------------------------------------------------------
// TopK.

class TopKKernel final : public CudaKernel {
 public:
  static StatusOr<std::unique_ptr<TopKKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                      CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(CheckTopKAttrs(attrs));
    return std::make_unique<TopKKernel>(def, attrs, context);
  }
  using CudaKernel::CudaKernel;

 protected:
  // The shape function has accepted axis and k (attribute or input 1): k is the
  // outputs' extent along the axis.
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), *attrs().Int("axis", -1), rank));
    const bool largest = *attrs().Int("largest", 1) == 1;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    const int64_t n = shape[axis];
    const int64_t k = out[0].shape[axis];
    if (outer * inner * k == 0) return OkStatus();
    int64_t* indices = out.size() > 1 ? static_cast<int64_t*>(out[1].data) : nullptr;
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchTopK<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), indices,
                               outer, n, inner, k, largest, stream());
        });
  }
};

}  // namespace

Status AddTopKCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "TopK", MakeCudaKernel<TopKKernel>(context));
}

}  // namespace remex::kernels::cuda
