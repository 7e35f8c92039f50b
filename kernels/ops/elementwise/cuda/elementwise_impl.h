// Launchers of the CUDA elementwise kernels (elementwise_impl.cu). Plain C++ and the
// CUDA runtime API only: included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"

namespace remex::kernels::cuda {

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
enum class UnaryOp : uint8_t { kRelu, kSigmoid };

// out[i] = a[.] op b[.] for the `n` output elements (n > 0). Returns the launch error.
// T: float or Half.
template <typename T>
cudaError_t LaunchBinary(BinaryOp op, const T* a, const T* b, T* out, int64_t n, const BroadcastPlan& plan,
                         cudaStream_t stream);

// y[i] = op(x[i]) for `n` elements (n > 0). Returns the launch error. T: float or Half.
template <typename T>
cudaError_t LaunchUnary(UnaryOp op, const T* x, T* y, int64_t n, cudaStream_t stream);

}  // namespace remex::kernels::cuda
