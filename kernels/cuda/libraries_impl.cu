// Device code of the library-backed CUDA kernels: Gemm's broadcast of C into Y.
// Includes only CUDA and plain headers.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/libraries_impl.h"

namespace remex::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

__device__ __forceinline__ float Load(float v) { return v; }
__device__ __forceinline__ float Load(__half v) { return __half2float(v); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T>
__global__ void BroadcastFillKernel(T* y, const T* c, int64_t m, int64_t n, int64_t c_rows, int64_t c_cols,
                                    float scale) {
  const int64_t total = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t row = c_rows == 1 ? 0 : i / n;
    const int64_t col = c_cols == 1 ? 0 : i % n;
    Store(y + i, scale * Load(c[row * c_cols + col]));
  }
}

}  // namespace

cudaError_t LaunchBroadcastFill(bool half, void* y, const void* c, int64_t m, int64_t n, int64_t c_rows,
                                int64_t c_cols, float scale, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((m * n + kThreads - 1) / kThreads, kMaxBlocks));
  if (half) {
    BroadcastFillKernel<__half><<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(y), static_cast<const __half*>(c),
                                                                  m, n, c_rows, c_cols, scale);
  } else {
    BroadcastFillKernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<float*>(y), static_cast<const float*>(c),
                                                                 m, n, c_rows, c_cols, scale);
  }
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
