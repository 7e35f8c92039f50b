// Kernel launches and the launch configuration of the CUDA kernels' grid-stride loops:
// threads per block, the block count for n elements and each thread's first index and
// stride. Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace remex::kernels::cuda {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// Blocks of `per_block` threads for a grid-stride loop over `n` elements: enough to
// cover n, at most kMaxBlocks, and at least 1 (so n = 0 launches an empty loop).
inline unsigned Blocks(int64_t n, int per_block = kThreads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block, kMaxBlocks)));
}

// The calling thread's first index of a grid-stride loop, and the loop's stride.
__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Launches kernel K on `grid` x `block` threads with `shared_bytes` of dynamic shared
// memory on `stream`, and returns the launch's error without clearing it (callers
// still read it with cudaGetLastError). Every kernel launch goes through here: with
// nvcc it is K<<<grid, block, shared_bytes, stream>>>(args...); under the host
// emulation (REMEX_CUDA_EMULATION) it checks the launch and runs the grid on the host
// (kernels/cuda/emulation/grid.h).
template <auto K, typename... Args>
cudaError_t LaunchKernel(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#if defined(REMEX_CUDA_EMULATION)
  return ::remex::cuda_emulation::Launch<K>(K, grid, block, shared_bytes, stream,
                                            std::forward<Args>(args)...);
#else
  // clang-format off
  K<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  return cudaPeekAtLastError();
#endif
}

}  // namespace remex::kernels::cuda
