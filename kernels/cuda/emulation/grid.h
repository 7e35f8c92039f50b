// Kernel launches under the CUDA emulation. Launch() is what kernels/cuda/launch.cuh's
// LaunchKernel calls instead of <<<grid, block, shared, stream>>>: it checks the launch
// as a GPU would (CUDA C++ Programming Guide, "Compute capabilities", 9.0: at most 1024
// threads per block, block dims <= 1024 x 1024 x 64, grid y and z <= 65535, static plus
// dynamic shared memory <= 48 KiB without opt-in) and that every pointer parameter is
// null or points into device or pinned memory, then runs the grid before returning:
// blocks one after another on the calling host thread, the threads of a block as
// fibers that switch at every __syncthreads and warp shuffle, in thread order.
//
// Errors (returned and set as the calling thread's last error, with the detail on
// stderr): cudaErrorInvalidConfiguration for a grid or block out of limits,
// cudaErrorInvalidResourceHandle for a destroyed stream, cudaErrorIllegalAddress for a
// host pointer parameter, cudaErrorLaunchFailure for a barrier or shuffle that not
// every live thread reaches (a hang or undefined behaviour on a GPU).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/emulation/device.h"
#include "kernels/cuda/emulation/runtime.h"

namespace remex::cuda_emulation {

// Runs `thread` (one device thread's body) for every thread of the grid; see above. On
// a capturing stream (cudaStreamBeginCapture) the checked launch is recorded instead,
// `thread` copied, and the grid runs at each launch of the graph.
// `kernel` is the kernel's name for errors and the coverage record
// (REMEX_CUDA_EMULATION_TRACE, kernels/cuda/emulation/README.md).
cudaError_t RunGrid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                    const std::function<void()>& thread);

// cudaErrorIllegalAddress (reported) when `ptr` is neither null nor device or pinned
// memory; cudaSuccess otherwise.
cudaError_t CheckPointerParameter(const char* kernel, int index, const void* ptr);

// The qualified name of kernel K (a function template argument's pretty name).
template <auto K>
const char* KernelName() {
  return __PRETTY_FUNCTION__;
}

template <typename P>
cudaError_t CheckParameter(const char* kernel, int index, const P& p) {
  if constexpr (std::is_pointer_v<P>) {
    return CheckPointerParameter(kernel, index,
                                 const_cast<const void*>(static_cast<const volatile void*>(p)));
  } else {
    return cudaSuccess;
  }
}

template <auto K, typename... Params, typename... Args>
cudaError_t Launch(void (*)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  // Parameters are copied at launch, as into the GPU's parameter buffer; a launch a
  // capture records keeps its copy for every launch of the graph.
  auto params = std::make_shared<std::tuple<std::decay_t<Params>...>>(
      static_cast<std::decay_t<Params>>(std::forward<Args>(args))...);
  cudaError_t error = cudaSuccess;
  std::apply(
      [&](const auto&... p) {
        int index = 0;
        ((error = error == cudaSuccess ? CheckParameter(KernelName<K>(), index, p) : error, ++index), ...);
      },
      *params);
  if (error != cudaSuccess) return error;
  return RunGrid(KernelName<K>(), grid, block, shared_bytes, stream, [params] { std::apply(K, *params); });
}

}  // namespace remex::cuda_emulation
