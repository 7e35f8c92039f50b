// Launcher of the GridSample CUDA kernel (grid_impl.cu). Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. It queues its work on
// `stream` and returns the launch error (cudaErrorInvalidValue for arguments it does
// not accept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/image/grid_sample_ops.h"

namespace remex::kernels::cuda {

// GridSample (ONNX GridSample-16): x [batch, C, h_in, w_in], grid_xy [batch, h_out,
// w_out, 2] -> y [batch, C, h_out, w_out], all of T (float, Half or double), every element from
// grid::GridSampleValue at grid::GridPointOf, as on the CPU (float16 computed in
// float32 and rounded to nearest even). y not empty, h_in and w_in >= 1.
template <typename T>
cudaError_t LaunchGridSample(const grid::GridSampleGeometry& g, const T* x, const T* grid_xy, T* y,
                             cudaStream_t stream);

}  // namespace remex::kernels::cuda
