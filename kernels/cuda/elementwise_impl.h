// Launchers of the CUDA elementwise kernels (elementwise_impl.cu). Plain C++ and the
// CUDA runtime API only: included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"

namespace remex::kernels::cuda {

enum class ElemType : uint8_t { kFloat32, kFloat16 };
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
enum class UnaryOp : uint8_t { kRelu, kSigmoid };

// out[i] = a[.] op b[.] for the `n` output elements (n > 0). Returns the launch error.
cudaError_t LaunchBinary(BinaryOp op, ElemType type, const void* a, const void* b, void* out, int64_t n,
                         const BroadcastPlan& plan, cudaStream_t stream);

// y[i] = op(x[i]) for `n` elements (n > 0). Returns the launch error.
cudaError_t LaunchUnary(UnaryOp op, ElemType type, const void* x, void* y, int64_t n, cudaStream_t stream);

}  // namespace remex::kernels::cuda
