// Host-side helpers of the nn group's CUDA kernels (nn.cc, nn_pool.cc,
// nn_elementwise.cc): the kernel base class, the accepted dtypes' names and
// registration.
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

// Registration of the pooling and Resize kernels (nn_pool.cc) and of the elementwise
// ones (nn_elementwise.cc); AddNnCudaKernels (nn.cc) calls both.
Status AddNnPoolCudaKernels(KernelRegistry& registry, CudaKernelContext context);
Status AddNnElementwiseCudaKernels(KernelRegistry& registry, CudaKernelContext context);

}  // namespace remex::kernels::cuda
