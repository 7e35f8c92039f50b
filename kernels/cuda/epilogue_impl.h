// Device helpers of the library-backed CUDA kernels (epilogue_impl.cu), shared by the
// cuDNN convolutions (kernels/ops/nn/cuda/conv.cc) and the cuBLASLt matrix products
// (kernels/ops/math/cuda/matmul.cc). Plain C++
// and the CUDA runtime API only: included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/conv_epilogue.h"

namespace remex::kernels::cuda {

// y[i, j] = scale * c[c_rows == 1 ? 0 : i, c_cols == 1 ? 0 : j] for y row-major [m, n]
// (m, n > 0) and c row-major [c_rows, c_cols], c_rows in {1, m}, c_cols in {1, n}:
// Gemm's unidirectional broadcast of C. float32, or float16 (`half`: computed in float,
// rounded to nearest even). Returns the launch error.
cudaError_t LaunchBroadcastFill(bool half, void* y, const void* c, int64_t m, int64_t n, int64_t c_rows,
                                int64_t c_cols, float scale, cudaStream_t stream);

// FusedConv's epilogue in one pass over the convolution's output Y (n > 0 elements,
// `channels` channels): y[i] = ApplyConvActivation(activation, y[i] + bias[c] + z[i],
// alpha, beta) with c = (i / inner) % channels (inner = 1 for channels-last Y, the
// product of the spatial dims for channels-first). `bias` [channels] and `z` (Y's
// shape and layout; it may be Y itself) may be null. float32, or float16 (`half`):
// loaded into float32, summed and activated there, rounded to nearest even once on
// store. Returns the launch error.
cudaError_t LaunchConvEpilogue(bool half, void* y, const void* bias, const void* z, int64_t n, int64_t channels,
                               int64_t inner, ConvActivation activation, float alpha, float beta,
                               cudaStream_t stream);

}  // namespace remex::kernels::cuda
