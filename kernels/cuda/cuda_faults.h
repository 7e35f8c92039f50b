// The CUDA errors that poison a context: after one, every later CUDA call in the
// process on that device fails with it until the device is reset (cudaDeviceReset).
// Shared by the CUDA kernels (cuda_internal.h) and the CUDA device (vm/device/cuda_device.cc),
// which report them as ABORTED "device fault". Needs the CUDA runtime headers (or the
// emulation's, kernels/cuda/emulation/include).
#pragma once

#include <cuda_runtime_api.h>

namespace remex::kernels::cuda {

// Whether `error` is one of the sticky errors of a kernel's execution: an illegal or
// misaligned address, an illegal instruction or program counter, an address-space
// violation, a hardware stack error, a failed device-side assertion, a launch failure
// or timeout, an uncorrectable ECC error.
inline bool IsCudaDeviceFault(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

}  // namespace remex::kernels::cuda
