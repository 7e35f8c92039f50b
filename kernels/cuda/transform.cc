// CUDA kernels: data movement. No kernel is registered yet.
#include "kernels/cuda/cuda_internal.h"

namespace remex::kernels::cuda {

Status AddTransformCudaKernels(KernelRegistry&, CudaKernelContext) { return OkStatus(); }

}  // namespace remex::kernels::cuda
