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
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/emulation/device.h"
#include "kernels/cuda/emulation/runtime.h"

namespace remex::cuda_emulation {

// A launch's copy of its kernel's parameters, type-erased: `data` points at them,
// `clone` copies them to the heap and `destroy` frees such a copy (a capture keeps one
// for every launch of its graph). Plain function pointers, so that each kernel adds two
// small functions per parameter list and one thread entry, not a std::function and a
// shared_ptr's control block of its own (about a third of an emulated kernel file's
// compile under the sanitizers; docs/benchmarks.md, "The emulated CUDA launch,
// and one slow test's reference").
struct LaunchParams {
  const void* data = nullptr;
  void* (*clone)(const void* data) = nullptr;
  void (*destroy)(void* copy) = nullptr;
};

// Runs `thread(params.data)` (one device thread's body) for every thread of the grid;
// see above. On a capturing stream (cudaStreamBeginCapture) the checked launch is
// recorded instead, with a copy of the parameters (params.clone), and the grid runs at
// each launch of the graph. `kernel` is the kernel's name for errors and the coverage
// record (REMEX_CUDA_EMULATION_TRACE, kernels/cuda/emulation/README.md).
cudaError_t RunGrid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                    void (*thread)(const void* params), const LaunchParams& params);

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

template <typename T>
void* CloneParams(const void* data) {
  return new T(*static_cast<const T*>(data));
}
template <typename T>
void DestroyParams(void* copy) {
  delete static_cast<T*>(copy);
}
// One device thread of kernel K on the parameters `data` (a T, the parameter tuple).
// Direct calls on std::get, not std::apply: fewer functions per kernel to compile.
template <auto K, typename T, size_t... I>
void RunThread(const void* data) {
  const T& t = *static_cast<const T*>(data);
  K(std::get<I>(t)...);
}

template <auto K, typename T, size_t... I>
cudaError_t LaunchTuple(const T& params, std::index_sequence<I...>, dim3 grid, dim3 block, size_t shared_bytes,
                        cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  ((error = error == cudaSuccess ? CheckParameter(KernelName<K>(), static_cast<int>(I), std::get<I>(params)) : error),
   ...);
  if (error != cudaSuccess) return error;
  return RunGrid(KernelName<K>(), grid, block, shared_bytes, stream, &RunThread<K, T, I...>,
                 LaunchParams{&params, &CloneParams<T>, &DestroyParams<T>});
}

template <auto K, typename... Params, typename... Args>
cudaError_t Launch(void (*)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  // Parameters are copied at launch, as into the GPU's parameter buffer; the grid runs
  // before this returns, so the copy here lives as long as it needs to, and a launch a
  // capture records keeps a copy of its own for every launch of the graph.
  using Tuple = std::tuple<std::decay_t<Params>...>;
  const Tuple params(static_cast<std::decay_t<Params>>(std::forward<Args>(args))...);
  return LaunchTuple<K>(params, std::index_sequence_for<Params...>{}, grid, block, shared_bytes, stream);
}

}  // namespace remex::cuda_emulation
