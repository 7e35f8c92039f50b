// Device code of the CUDA elementwise kernels. Includes only CUDA and plain headers.
//
// Every kernel is a grid-stride loop over the output. float16 values are loaded as
// float, computed in float and stored rounded to nearest even (__float2half_rn), as the
// CPU kernels do (kernels/float16.h).

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/ops/elementwise/cuda/elementwise_impl.h"
#include "kernels/cuda/broadcast_index.cuh"
#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/scalar_ops.h"

namespace remex::kernels::cuda {
namespace {

// The formulas are kernels/scalar_ops.h's, which the CPU kernels share.
template <BinaryOp kOp>
__device__ __forceinline__ float ApplyBinary(float x, float y) {
  if constexpr (kOp == BinaryOp::kAdd) {
    return scalar::Add()(x, y);
  } else if constexpr (kOp == BinaryOp::kSub) {
    return scalar::Sub()(x, y);
  } else if constexpr (kOp == BinaryOp::kMul) {
    return scalar::Mul()(x, y);
  } else {
    return scalar::Div()(x, y);  // IEEE division (nvcc's default -prec-div=true).
  }
}

template <UnaryOp kOp>
__device__ __forceinline__ float ApplyUnary(float x) {
  if constexpr (kOp == UnaryOp::kRelu) {
    return scalar::Relu()(x);
  } else {
    return scalar::Sigmoid()(x);
  }
}

// Broadcasting: output element i -> offsets into a and b through the plan.
template <typename T, BinaryOp kOp>
__global__ void BinaryKernel(const T* a, const T* b, T* out, int64_t n,
                             BroadcastPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t ia;
    int64_t ib;
    BroadcastOffsets(plan, i, ia, ib);
    out[i] = Store<T>(ApplyBinary<kOp>(Load(a[ia]), Load(b[ib])));
  }
}

// One merged dim: both inputs are contiguous or scalar (stride 1 or 0), no divisions.
template <typename T, BinaryOp kOp>
__global__ void BinaryFlatKernel(const T* a, const T* b, T* out, int64_t n,
                                 int64_t a_stride, int64_t b_stride) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    out[i] = Store<T>(ApplyBinary<kOp>(Load(a[i * a_stride]), Load(b[i * b_stride])));
  }
}

template <typename T, UnaryOp kOp>
__global__ void UnaryKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = Store<T>(ApplyUnary<kOp>(Load(x[i])));
  }
}

template <typename T, BinaryOp kOp>
cudaError_t LaunchBinaryTyped(const void* a, const void* b, void* out, int64_t n, const BroadcastPlan& plan,
                              cudaStream_t stream) {
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* tout = static_cast<T*>(out);
  if (plan.rank == 1) {
    LaunchKernel<BinaryFlatKernel<T, kOp>>(Blocks(n), kThreads, 0, stream, ta, tb, tout, n, plan.a_strides[0],
                                           plan.b_strides[0]);
  } else {
    LaunchKernel<BinaryKernel<T, kOp>>(Blocks(n), kThreads, 0, stream, ta, tb, tout, n, plan);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBinaryOp(BinaryOp op, const void* a, const void* b, void* out, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream) {
  switch (op) {
    case BinaryOp::kAdd: return LaunchBinaryTyped<T, BinaryOp::kAdd>(a, b, out, n, plan, stream);
    case BinaryOp::kSub: return LaunchBinaryTyped<T, BinaryOp::kSub>(a, b, out, n, plan, stream);
    case BinaryOp::kMul: return LaunchBinaryTyped<T, BinaryOp::kMul>(a, b, out, n, plan, stream);
    case BinaryOp::kDiv: return LaunchBinaryTyped<T, BinaryOp::kDiv>(a, b, out, n, plan, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchUnaryOp(UnaryOp op, const void* x, void* y, int64_t n, cudaStream_t stream) {
  const T* tx = static_cast<const T*>(x);
  T* ty = static_cast<T*>(y);
  switch (op) {
    case UnaryOp::kRelu:
      LaunchKernel<UnaryKernel<T, UnaryOp::kRelu>>(Blocks(n), kThreads, 0, stream, tx, ty, n);
      break;
    case UnaryOp::kSigmoid:
      LaunchKernel<UnaryKernel<T, UnaryOp::kSigmoid>>(Blocks(n), kThreads, 0, stream, tx, ty, n);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchBinary(BinaryOp op, const T* a, const T* b, T* out, int64_t n, const BroadcastPlan& plan,
                         cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxBroadcastRank) return cudaErrorInvalidValue;
  return LaunchBinaryOp<DeviceType<T>>(op, a, b, out, n, plan, stream);
}

template <typename T>
cudaError_t LaunchUnary(UnaryOp op, const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  return LaunchUnaryOp<DeviceType<T>>(op, x, y, n, stream);
}

#define REMEX_ELEMENTWISE_INSTANTIATE(T)                                                                \
  template cudaError_t LaunchBinary<T>(BinaryOp, const T*, const T*, T*, int64_t, const BroadcastPlan&, \
                                       cudaStream_t);                                                   \
  template cudaError_t LaunchUnary<T>(UnaryOp, const T*, T*, int64_t, cudaStream_t);
REMEX_ELEMENTWISE_INSTANTIATE(float)
REMEX_ELEMENTWISE_INSTANTIATE(Half)
#undef REMEX_ELEMENTWISE_INSTANTIATE

}  // namespace remex::kernels::cuda
