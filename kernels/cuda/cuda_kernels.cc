// RegisterCudaKernels: the CUDA kernels of every op group, or UNIMPLEMENTED in a build
// without CUDA.

#include "kernels/cuda/cuda_kernels.h"

#if REMEX_HAVE_CUDA
#include "kernels/cuda/cuda_internal.h"
#endif

namespace remex::kernels {

Status RegisterCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
#if REMEX_HAVE_CUDA
  REMEX_RETURN_IF_ERROR(cuda::AddElementwiseCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddTransformCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddNnCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddLibraryCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddFusedCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddMiscCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddQuantCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddDetCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddRnnCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddIndexCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddExtraCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddGridCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddSpectralCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddTextCudaKernels(registry, context));
  REMEX_RETURN_IF_ERROR(cuda::AddTrainingCudaKernels(registry, context));
  return OkStatus();
#else
  return Unimplemented("RegisterCudaKernels: Remex was built without CUDA (REMEX_CUDA=OFF or no nvcc)");
#endif
}

void ForgetCudaDeviceState(int device) {
#if REMEX_HAVE_CUDA
  cuda::ForgetFusedModules(device);
#else
  (void)device;
#endif
}

}  // namespace remex::kernels
