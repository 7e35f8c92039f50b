// Device code of the math family's Softmax, LogSoftmax and Hardmax (softmax_impl.h),
// ONNX opsets 1-13. Includes only CUDA and plain headers.
//
// The row sums accumulate in float32 (float16 data included), in another order than
// the CPU kernel's (a tree over threads for long rows), so results agree to rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/ops/math/cuda/softmax_impl.h"

namespace remex::kernels::cuda {
namespace {

// Contiguous rows (inner == 1) shorter than this take the column kernel: one block
// per row would leave most of its threads idle.
constexpr int64_t kShortRow = 64;

// inner == 1 and long rows: one block per row of n contiguous elements (Softmax and
// LogSoftmax).
template <typename T, bool kLog>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t outer, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T* row = x + o * n;
    T* out = y + o * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = MaxSkipNan(m, Load(row[j]));
    m = BlockReduce(m, MaxSkipNan, scratch);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(Load(row[j]) - m);
    sum = BlockReduce(sum, Add, scratch);
    if constexpr (kLog) {
      const float log_sum = logf(sum);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = Store<T>((Load(row[j]) - m) - log_sum);
    } else {
      const float inv = 1.0f / sum;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = Store<T>(expf(Load(row[j]) - m) * inv);
    }
  }
}

// inner > 1 (or short rows, or Hardmax): one thread per (outer, inner) column,
// adjacent threads on adjacent columns.
template <typename T, SoftmaxMode kMode>
__global__ void SoftmaxColumnsKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float m = -INFINITY;
    int64_t arg = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float v = Load(x[base + j * inner]);
      if (v > m) {  // The first maximum; NaN is never greater.
        m = v;
        arg = j;
      }
    }
    if constexpr (kMode == SoftmaxMode::kHardmax) {
      for (int64_t j = 0; j < n; ++j) y[base + j * inner] = Store<T>(j == arg ? 1.0f : 0.0f);
    } else {
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) sum += expf(Load(x[base + j * inner]) - m);
      if constexpr (kMode == SoftmaxMode::kLogSoftmax) {
        const float log_sum = logf(sum);
        for (int64_t j = 0; j < n; ++j) y[base + j * inner] = Store<T>((Load(x[base + j * inner]) - m) - log_sum);
      } else {
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) y[base + j * inner] = Store<T>(expf(Load(x[base + j * inner]) - m) * inv);
      }
    }
  }
}

template <typename T, SoftmaxMode kMode>
cudaError_t LaunchSoftmaxTyped(const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                               cudaStream_t stream) {
  const T* tx = static_cast<const T*>(x);
  T* ty = static_cast<T*>(y);
  if (kMode != SoftmaxMode::kHardmax && inner == 1 && n >= kShortRow) {
    LaunchKernel<SoftmaxRowsKernel<T, kMode == SoftmaxMode::kLogSoftmax>>(Blocks(outer, 1), kThreads, 0, stream,
                                                                          tx, ty, outer, n);
  } else {
    LaunchKernel<SoftmaxColumnsKernel<T, kMode>>(Blocks(outer * inner), kThreads, 0, stream, tx, ty, outer, n,
                                                 inner);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchSoftmaxMode(SoftmaxMode mode, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                              cudaStream_t stream) {
  switch (mode) {
    case SoftmaxMode::kSoftmax:
      return LaunchSoftmaxTyped<T, SoftmaxMode::kSoftmax>(x, y, outer, n, inner, stream);
    case SoftmaxMode::kLogSoftmax:
      return LaunchSoftmaxTyped<T, SoftmaxMode::kLogSoftmax>(x, y, outer, n, inner, stream);
    case SoftmaxMode::kHardmax:
      return LaunchSoftmaxTyped<T, SoftmaxMode::kHardmax>(x, y, outer, n, inner, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

template <typename T>
cudaError_t LaunchSoftmax(SoftmaxMode mode, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream) {
  if (outer * n * inner <= 0) return cudaErrorInvalidValue;
  return LaunchSoftmaxMode<DeviceType<T>>(mode, x, y, outer, n, inner, stream);
}

template cudaError_t LaunchSoftmax<float>(SoftmaxMode, const float*, float*, int64_t, int64_t, int64_t,
                                          cudaStream_t);
template cudaError_t LaunchSoftmax<Half>(SoftmaxMode, const Half*, Half*, int64_t, int64_t, int64_t,
                                         cudaStream_t);

}  // namespace remex::kernels::cuda
