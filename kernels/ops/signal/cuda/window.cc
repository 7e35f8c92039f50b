// CUDA kernels of HannWindow-17, HammingWindow-17 and BlackmanWindow-17 (host side).
// Device code: LaunchWindow, kernels/ops/signal/cuda/spectral_impl.cu.
// Semantics, dtypes and checks are the CPU kernels' (kernels/ops/signal/window.cc), with the
// formulas of kernels/ops/signal/window_ops.h: size in host memory (ShapeDep::kData); every
// numeric output_datatype. cos runs in double on the device (within 2 ulp of the CPU's
// before the output's rounding).

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
#include "kernels/ops/signal/cuda/spectral_impl.h"

namespace remex::kernels::cuda {
namespace {

class WindowKernel final : public CudaKernel {
 public:
  WindowKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::WindowView v,
                           internal::WindowViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                     uint64_t>(v.dtype, "numeric dtypes are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchWindow<T>(v.kind, v.periodic, v.size, static_cast<T*>(out[0].data), stream());
    });
  }
};

}  // namespace

Status AddWindowCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const char* name : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<WindowKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
