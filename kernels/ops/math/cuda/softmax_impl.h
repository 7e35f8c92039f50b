// Launcher of the math family's Softmax, LogSoftmax and Hardmax CUDA kernels
// (softmax_impl.cu), ONNX opsets 1-13.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. The
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. It is a template on the element type T (kernels/cuda/dtype.h), instantiated
// in softmax_impl.cu for float and Half (float32, float16). float16 data is loaded as
// float, computed and accumulated in float and stored rounded to nearest even. The host
// side (softmax.cc) has validated shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

// Softmax, LogSoftmax or Hardmax of x viewed as [outer, n, inner] along n (as
// kernels/ops/math/softmax.cc): exp(x - max) / sum, (x - max) - log(sum), or 1 at the
// first maximum and 0 elsewhere. outer * n * inner > 0.
template <typename T>
cudaError_t LaunchSoftmax(SoftmaxMode mode, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream);

}  // namespace remex::kernels::cuda
