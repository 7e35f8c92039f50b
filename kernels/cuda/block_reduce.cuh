// The block-wide reduction of one float per thread, shared by the reduction, Softmax,
// loss, pooling and normalisation kernels (kernels/ops/<family>/cuda/*_impl.cu), beside
// the float/half loads and stores (half_io.cuh) and launch sizes (launch.cuh) they
// include. CUDA headers only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"

namespace remex::kernels::cuda {

// The combiners the kernels reduce with: a sum, and the running maximum of the CPU
// kernels, which skips NaN (NaN is never greater).
__device__ __forceinline__ float Add(float a, float b) { return a + b; }
__device__ __forceinline__ float MaxSkipNan(float a, float b) { return b > a ? b : a; }

// Threads for a block that reduces one row of n elements with BlockReduce: n rounded up
// to whole warps, from one warp to kThreads. A short row (a 6x16 plane: 96 elements)
// takes 3 warps, not kThreads threads of which most would hold nothing.
inline int RowThreads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kThreads));
}

// Block-wide reduction of one float per thread with `combine` (associative and
// commutative); every thread gets the result. blockDim.x is a multiple of 32 and at
// most 1024; `scratch` holds 32 floats. Ends with a barrier, so scratch may be reused.
template <typename F>
__device__ float BlockReduce(float v, F combine, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  __syncthreads();  // Earlier readers of scratch are done.
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = combine(v, scratch[w]);
  __syncthreads();
  return v;
}

}  // namespace remex::kernels::cuda
