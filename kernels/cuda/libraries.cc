// CUDA kernels: cuDNN and cuBLASLt. No kernel is registered yet.
#include "kernels/cuda/cuda_internal.h"

namespace remex::kernels::cuda {

Status AddLibraryCudaKernels(KernelRegistry&, CudaKernelContext) { return OkStatus(); }

}  // namespace remex::kernels::cuda
