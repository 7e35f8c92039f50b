// Launchers of the training-mode CUDA kernels (optimizer_impl.cu): the optimizers of the
// training domain and Dropout's scaling under training_mode. Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. Every launcher queues its work
// on `stream` and returns the launch error (cudaErrorInvalidValue for arguments it does
// not accept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/training/optimizer_ops.h"

namespace remex::kernels::cuda {

// One tensor's update by an optimizer of the training domain (ONNX
// ai.onnx.preview.training Adagrad-1, Adam-1, Momentum-1): for e in [0, n) (n > 0),
// x_new[e] = optimizer::Update(params, optimizer::FactorsOf(params, *r, *t), x[e], g[e],
// s1[e], s2[e], &s1_new[e], &s2_new[e]) in double, stored rounded to the tensors'
// element type T (float or double). r: the learning rate, one float32 (`r_is_double`
// false) or float64 in device memory; t: the update count, one int64 in device memory;
// every thread derives the factors from them. s2 and s2_new are used (non-null) for
// Adam only. Outputs may alias their inputs element for element.
template <typename T>
cudaError_t LaunchOptimizerUpdate(const optimizer::Params& params, const void* r, bool r_is_double,
                                  const int64_t* t, const T* x, const T* g, const T* s1, const T* s2,
                                  T* x_new, T* s1_new, T* s2_new, int64_t n, cudaStream_t stream);

// Dropout under training_mode (ONNX Dropout-12/13): y[i] = keep[i] ? x[i] * scale : 0
// for i in [0, n) (n > 0), keep holding bytes 0 / 1 in device memory. The product runs
// in float (double for T double; T is float, Half or double) with `scale` rounded to it, float16 stored
// rounded to nearest even: the CPU kernel's values. y may alias x.
template <typename T>
cudaError_t LaunchDropoutTrain(const T* x, const uint8_t* keep, double scale, T* y, int64_t n,
                               cudaStream_t stream);

}  // namespace remex::kernels::cuda
