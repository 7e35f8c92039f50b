// Device code of the library-backed CUDA kernels: Gemm's broadcast of C into Y,
// FusedConv's epilogue (bias, residual Z and activation over the convolution's Y).
// Includes only CUDA and plain headers.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/epilogue_impl.h"

namespace remex::kernels::cuda {
namespace {

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

template <typename T>
__global__ void ConvEpilogueKernel(T* y, const T* bias, const T* z, int64_t n, int64_t channels, int64_t inner,
                                   ConvActivation activation, float alpha, float beta) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    float v = Load(y[i]);
    if (bias) v += Load(bias[(i / inner) % channels]);
    if (z) v += Load(z[i]);
    Store(&y[i], ApplyConvActivation(activation, v, alpha, beta));
  }
}

}  // namespace

cudaError_t LaunchConvEpilogue(bool half, void* y, const void* bias, const void* z, int64_t n, int64_t channels,
                               int64_t inner, ConvActivation activation, float alpha, float beta,
                               cudaStream_t stream) {
  const unsigned blocks = Blocks(n);
  if (half) {
    LaunchKernel<ConvEpilogueKernel<__half>>(blocks, kThreads, 0, stream, static_cast<__half*>(y),
                                             static_cast<const __half*>(bias), static_cast<const __half*>(z),
                                             n, channels, inner, activation, alpha, beta);
  } else {
    LaunchKernel<ConvEpilogueKernel<float>>(blocks, kThreads, 0, stream, static_cast<float*>(y),
                                            static_cast<const float*>(bias), static_cast<const float*>(z), n,
                                            channels, inner, activation, alpha, beta);
  }
  return cudaGetLastError();
}

cudaError_t LaunchBroadcastFill(bool half, void* y, const void* c, int64_t m, int64_t n, int64_t c_rows,
                                int64_t c_cols, float scale, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaErrorInvalidValue;
  const unsigned blocks = Blocks(m * n);
  if (half) {
    LaunchKernel<BroadcastFillKernel<__half>>(blocks, kThreads, 0, stream, static_cast<__half*>(y),
                                              static_cast<const __half*>(c), m, n, c_rows, c_cols, scale);
  } else {
    LaunchKernel<BroadcastFillKernel<float>>(blocks, kThreads, 0, stream, static_cast<float*>(y),
                                             static_cast<const float*>(c), m, n, c_rows, c_cols, scale);
  }
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
