// RegisterCudaKernels: the CUDA kernels of every op group, checked against the op table
// (kernels/ops/ops.def), or UNIMPLEMENTED in a build without CUDA.

#include "kernels/cuda/cuda_kernels.h"

#if REMEX_HAVE_CUDA
#include "kernels/cuda/cuda_internal.h"
#include "kernels/op_table.h"
#endif

namespace remex::kernels {

Status RegisterCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
#if REMEX_HAVE_CUDA
#define REMEX_CUDA_GROUP(family, name) REMEX_RETURN_IF_ERROR(cuda::Add##name##CudaKernels(registry, context));
#include "kernels/ops/families.def"
  return internal::CheckKernelsAgainstTable(internal::OpTable(), registry, DeviceKind::kCuda);
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
