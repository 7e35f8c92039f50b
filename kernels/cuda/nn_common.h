// Host-side helpers of the nn group's CUDA kernels (nn.cc, nn_pool.cc,
// nn_elementwise.cc): the kernel base class, dtype mapping and registration.
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

// Which dtypes a kernel takes.
enum class NnTypes : uint8_t {
  kFloat,        // float32, float16.
  kFloatAndInt,  // float32, float16, int32, int64.
  kBool,         // bool.
  kCompare,      // float32, float16, int32, int64, bool.
};

// The NnType of `dtype`, or UNIMPLEMENTED "<op> on cuda: dtype ... is not implemented".
StatusOr<NnType> ToNnType(std::string_view op, DType dtype, NnTypes accepted = NnTypes::kFloat);

// A CUDA kernel of the nn group: Compute checks the inputs and outputs against the op's
// shape function, returns early when every output is empty and calls Run, which checks
// dtypes and attributes (before any CUDA call) and queues the work on stream() through
// Launch.
class NnKernel : public OpKernel {
 public:
  NnKernel(OpDef def, Attributes attrs, CudaKernelContext context)
      : def_(std::move(def)), attrs_(std::move(attrs)), context_(context) {}

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) final;

 protected:
  virtual Status Run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) = 0;

  const std::string& op() const { return def_.name; }
  const Attributes& attrs() const { return attrs_; }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(context_.stream); }
  // Selects the kernel's device (for the launches and copies that follow).
  Status UseDevice() const { return CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)); }
  // Selects the device and calls `launch` (returning a launcher's cudaError_t): OK, or
  // "<op> on cuda: kernel launch failed: ...".
  template <typename F>
  Status Launch(F&& launch) const {
    REMEX_RETURN_IF_ERROR(UseDevice());
    return CudaCheck(def_.name, "kernel launch", launch());
  }

 private:
  const OpDef def_;
  const Attributes attrs_;
  const CudaKernelContext context_;
};

// Element count of a shape the shape function has accepted.
inline int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

// Registration of the pooling and Resize kernels (nn_pool.cc) and of the elementwise
// ones (nn_elementwise.cc); AddNnCudaKernels (nn.cc) calls both.
Status AddNnPoolCudaKernels(KernelRegistry& registry, CudaKernelContext context);
Status AddNnElementwiseCudaKernels(KernelRegistry& registry, CudaKernelContext context);

}  // namespace remex::kernels::cuda
