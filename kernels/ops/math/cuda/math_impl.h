// Launchers of the extra group's CUDA kernels (extra_impl.cu): the window ops,
// MeanVarianceNormalization and ReverseSequence. Plain C++ and the CUDA runtime API
// only: included by .cu and .cc files alike. Every launcher queues its work on
// `stream` and returns the launch error (cudaErrorInvalidValue for arguments it does
// not accept). The formulas and index plans are the CPU kernels'
// (kernels/window_ops.h, kernels/sequence_norm_ops.h, kernels/determinant_ops.h,
// kernels/einsum_ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/math/determinant_ops.h"
#include "kernels/ops/math/einsum_ops.h"
#include "kernels/ops/nn/mvn_ops.h"
#include "kernels/ops/tensor/reverse_sequence_ops.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::cuda {

// y[n] = window::WindowValue(kind, periodic, size, n) for n in [0, size) (size > 0),
// converted to T as the CPU kernel converts it. T: float, Half, double or an int/uint
// of 8 to 64 bits.
template <typename T>
cudaError_t LaunchWindow(window::WindowKind kind, bool periodic, int64_t size, T* y, cudaStream_t stream);

// MeanVarianceNormalization of x into y by `plan` (groups * group_size > 0): one thread
// per group, summing in double in the CPU kernel's order. T: float, Half or double.
template <typename T>
cudaError_t LaunchMvn(const seqnorm::MvnPlan& plan, const T* x, T* y, cudaStream_t stream);

// ReverseSequence of x into y (`total` > 0 elements of `elem_size` 1, 2, 4 or 8 bytes)
// by `plan`, with sequence_lens (int64, device memory, one per batch) clamped to
// [0, time] on the device.
cudaError_t LaunchReverseSequence(const seqnorm::ReversePlan& plan, int64_t total, int64_t time,
                                  int elem_size, const void* x, const int64_t* lens, void* y,
                                  cudaStream_t stream);

// Det of x [batch, m, m] into y [batch] (batch > 0, m >= 0), one thread per matrix:
// each copies its matrix to `scratch` (batch * m * m doubles of device memory) as
// double and runs determinant::LuDeterminant there, as the CPU kernel does. T: float,
// Half or double.
template <typename T>
cudaError_t LaunchDet(const T* x, T* y, int64_t batch, int64_t m, double* scratch, cudaStream_t stream);

// The inputs' device addresses, plan.num_inputs of them.
struct EinsumInputs {
  const void* data[einsum::kMaxInputs] = {};
};

// Einsum into y (plan.out_total > 0 elements), one thread per output element, each
// evaluating einsum::EinsumElement as the CPU kernel does (double for the float
// types, wrapping unsigned arithmetic for the integers). T (inputs and output): float,
// Half, double, int32_t or int64_t.
template <typename T>
cudaError_t LaunchEinsum(const einsum::EinsumPlan& plan, const EinsumInputs& inputs, T* y,
                         cudaStream_t stream);

}  // namespace remex::kernels::cuda
