// CUDA kernels: FusedElementwise through NVRTC. No kernel is registered yet.
#include "kernels/cuda/cuda_internal.h"

namespace remex::kernels::cuda {

Status AddFusedCudaKernels(KernelRegistry&, CudaKernelContext) { return OkStatus(); }

}  // namespace remex::kernels::cuda
