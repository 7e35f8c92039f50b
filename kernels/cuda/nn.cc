// CUDA kernels: reductions, Softmax, pooling, Resize, normalisation, more elementwise. No kernel is registered yet.
#include "kernels/cuda/cuda_internal.h"

namespace remex::kernels::cuda {

Status AddNnCudaKernels(KernelRegistry&, CudaKernelContext) { return OkStatus(); }

}  // namespace remex::kernels::cuda
