// Private helpers of the CUDA kernels (host side).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/cuda/cuda_kernels.h"

namespace remex::kernels::cuda {

// OK for cudaSuccess; otherwise "<op> on cuda: <call> failed: <name>: <CUDA's message>",
// RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation, INTERNAL otherwise. Clears the
// runtime's per-thread last error.
inline Status CudaCheck(std::string_view op, std::string_view call, cudaError_t error) {
  if (error == cudaSuccess) return OkStatus();
  (void)cudaGetLastError();
  std::string message = std::string(op) + " on cuda: " + std::string(call) + " failed: " + cudaGetErrorName(error) +
                        ": " + cudaGetErrorString(error);
  if (error == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

// Per-op-group registration, called by RegisterCudaKernels.
Status AddElementwiseCudaKernels(KernelRegistry& registry, CudaKernelContext context);

}  // namespace remex::kernels::cuda
