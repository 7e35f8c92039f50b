// Host-side helpers shared by the CUDA kernels of several families (reduction,
// Softmax, loss, pooling, normalisation, Resize and the elementwise ops of
// kernels/ops/<family>/cuda/): the kernel base class that skips empty outputs, the
// accepted dtypes' names and the element count of a shape.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

// The `accepted` of these kernels' LaunchFor / RunFor (CudaKernel): UNIMPLEMENTED
// "<op> on cuda: dtype <d> is not implemented (<accepted>)" names them.
inline constexpr std::string_view kFloatDTypes = "float32 and float16 are";
inline constexpr std::string_view kFloatIntDTypes = "float32, float16, int32 and int64 are";

// A CUDA kernel that returns early when every output is empty (a CudaKernel with
// EmptyOutputs::kSkip), so its Run and launchers see at least one element.
class SkipEmptyKernel : public CudaKernel {
 public:
  SkipEmptyKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}
};

// Element count of a shape the shape function has accepted.
inline int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

}  // namespace remex::kernels::cuda
