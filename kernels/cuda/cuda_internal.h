// Private helpers of the CUDA kernels (host side).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/cuda/cuda_faults.h"
#include "kernels/cuda/cuda_kernels.h"

namespace remex::kernels::cuda {

// OK for cudaSuccess; otherwise "<op> on cuda: <call> failed: <name>: <CUDA's message>",
// RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation, ABORTED (with "device fault") for an
// error that poisons the context (IsCudaDeviceFault), INTERNAL otherwise. Clears the
// runtime's per-thread last error.
inline Status CudaCheck(std::string_view op, std::string_view call, cudaError_t error) {
  if (error == cudaSuccess) return OkStatus();
  (void)cudaGetLastError();
  std::string message = std::string(op) + " on cuda: " + std::string(call) + " failed: " + cudaGetErrorName(error) +
                        ": " + cudaGetErrorString(error);
  if (error == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(message));
  if (IsCudaDeviceFault(error)) return Aborted(std::move(message) + " (device fault)");
  return Internal(std::move(message));
}

// Forgets the FusedElementwise modules loaded on GPU `device` (fused.cc): they belonged
// to its context, which a reset destroyed.
void ForgetFusedModules(int device);

// Per-group registration, called by RegisterCudaKernels: for each row
// REMEX_CUDA_GROUP(family, Name) of kernels/ops/families.def (which says what each group
// holds), AddNameCudaKernels, defined in kernels/ops/<family>/cuda/.
#define REMEX_CUDA_GROUP(family, name) \
  Status Add##name##CudaKernels(KernelRegistry& registry, CudaKernelContext context);
#include "kernels/ops/families.def"

}  // namespace remex::kernels::cuda
