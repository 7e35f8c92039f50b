// Device helpers of the library-backed CUDA kernels (libraries_impl.cu). Plain C++
// and the CUDA runtime API only: included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace remex::kernels::cuda {

// y[i, j] = scale * c[c_rows == 1 ? 0 : i, c_cols == 1 ? 0 : j] for y row-major [m, n]
// (m, n > 0) and c row-major [c_rows, c_cols], c_rows in {1, m}, c_cols in {1, n}:
// Gemm's unidirectional broadcast of C. float32, or float16 (`half`: computed in float,
// rounded to nearest even). Returns the launch error.
cudaError_t LaunchBroadcastFill(bool half, void* y, const void* c, int64_t m, int64_t n, int64_t c_rows,
                                int64_t c_cols, float scale, cudaStream_t stream);

}  // namespace remex::kernels::cuda
