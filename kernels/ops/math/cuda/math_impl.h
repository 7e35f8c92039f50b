// Launchers of the math family's CUDA kernels in math_impl.cu: Det, Einsum and CumSum.
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error
// (cudaErrorInvalidValue for arguments it does not accept). The formulas, index plans
// and orders of summation are the CPU kernels' (kernels/ops/math/determinant_ops.h,
// kernels/ops/math/einsum_ops.h, kernels/ops/math/cumsum.cc). Softmax's launchers are
// softmax_impl.h's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/math/determinant_ops.h"
#include "kernels/ops/math/einsum_ops.h"

namespace remex::kernels::cuda {

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

// CumSum of x [outer, n, inner] along n, as kernels/ops/math/cumsum.cc: one thread per
// line adds in the CPU kernel's order and type (float32 for float16, float32 and float64
// in their own type, int32 and int64 wrapping). outer * inner > 0. T: float, Half,
// double, int32_t or int64_t.
template <typename T>
cudaError_t LaunchCumSum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse, cudaStream_t stream);

}  // namespace remex::kernels::cuda
