// Host-side helpers shared by the CUDA kernels whose launchers are declared in
// kernels/cuda/nn_impl.h (the reduction, Softmax, loss, pooling, normalisation, Resize
// and elementwise kernels of several families, kernels/ops/<family>/cuda/): the kernel
// base class and the accepted dtypes' names.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/nn_impl.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

// The `accepted` of the nn kernels' LaunchFor / RunFor (CudaKernel): UNIMPLEMENTED
// "<op> on cuda: dtype <d> is not implemented (<accepted>)" names them.
inline constexpr std::string_view kFloatDTypes = "float32 and float16 are";
inline constexpr std::string_view kFloatIntDTypes = "float32, float16, int32 and int64 are";

// A CUDA kernel of the nn group: a CudaKernel that returns early when every output is
// empty.
class NnKernel : public CudaKernel {
 public:
  NnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}
};

// Element count of a shape the shape function has accepted.
inline int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }


}  // namespace remex::kernels::cuda
