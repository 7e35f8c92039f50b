// Device code of the quantization ops' CUDA kernels (quant_impl.h). Includes only CUDA
// and plain headers. Compiled with -fmad=false: each product and quotient rounds as on
// the CPU. One thread per output element, each computing it with the CPU kernels'
// functions (kernels/ops/quantization/quantize_ops.h).

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/ops/quantization/cuda/quant_impl.h"
#include "kernels/ops/quantization/quantize_ops.h"

namespace remex::kernels::cuda {
namespace {

__device__ __forceinline__ int32_t LoadInt(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kUint8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::kInt8:
      return static_cast<const int8_t*>(p)[i];
    default: return static_cast<const int32_t*>(p)[i];
  }
}

// Value c (per channel) or 0 (per tensor) of a zero point; 0 when absent.
__device__ __forceinline__ int32_t ZeroPoint(const QParam& p, int64_t c) {
  return p.data == nullptr ? 0 : LoadInt(p.data, p.type, p.per_channel ? c : 0);
}

__device__ __forceinline__ float Scale(const QParam& p, int64_t c) {
  return static_cast<const float*>(p.data)[p.per_channel ? c : 0];
}

template <typename X, typename Y>
__global__ void QuantizeKernel(const X* x, QParam scale, QParam zero_point, Y* y, int64_t total, int64_t channels,
                               int64_t inner) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t c = (i / inner) % channels;
    y[i] = quant::Quantize<Y>(static_cast<float>(x[i]), Scale(scale, c), ZeroPoint(zero_point, c));
  }
}

template <typename X>
__global__ void DequantizeKernel(const X* x, QParam scale, QParam zero_point, float* y, int64_t total,
                                 int64_t channels, int64_t inner) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t c = (i / inner) % channels;
    y[i] = quant::Dequantize(static_cast<int32_t>(x[i]), ZeroPoint(zero_point, c), Scale(scale, c));
  }
}

// One block: the minimum and maximum of x with 0 (NaN skipped, as on the CPU), then
// the scale and zero point.
__global__ void DynamicRangeKernel(const float* x, int64_t n, float* y_scale, uint8_t* y_zero_point) {
  __shared__ float lo_s[kThreads];
  __shared__ float hi_s[kThreads];
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  for (unsigned step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) {
      const float l = lo_s[threadIdx.x + step], h = hi_s[threadIdx.x + step];
      lo_s[threadIdx.x] = l < lo_s[threadIdx.x] ? l : lo_s[threadIdx.x];
      hi_s[threadIdx.x] = h > hi_s[threadIdx.x] ? h : hi_s[threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const quant::DynamicParams p = quant::DynamicQuantizeParams(lo_s[0], hi_s[0]);
    *y_scale = p.scale;
    *y_zero_point = p.zero_point;
  }
}

__global__ void DynamicQuantizeKernel(const float* x, int64_t n, uint8_t* y, const float* y_scale,
                                      const uint8_t* y_zero_point) {
  const float scale = *y_scale;
  const int32_t zp = *y_zero_point;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = quant::Quantize<uint8_t>(x[i], scale, zp);
}

// Writes output element i from its int32 sum (channel c).
__device__ __forceinline__ void PutOutput(const QLinearParams& p, void* y, int64_t i, int32_t sum, int64_t c) {
  if (p.y == DType::kFloat32) {  // FusedMatMulInteger: the float32 Mul, then the Add
    const float v = __fmul_rn(static_cast<float>(sum), Scale(p.a_scale, c));
    const float b = p.bias.data == nullptr ? v : __fadd_rn(v, static_cast<const float*>(p.bias.data)[c]);
    static_cast<float*>(y)[i] = ApplyConvActivation(p.activation, b, p.alpha, p.beta);
    return;
  }
  if (!p.qlinear) {
    static_cast<int32_t*>(y)[i] = sum;
    return;
  }
  if (p.bias.data != nullptr) {
    sum = static_cast<int32_t>(static_cast<uint32_t>(sum) +
                               static_cast<uint32_t>(static_cast<const int32_t*>(p.bias.data)[c]));
  }
  const float multiplier = Scale(p.a_scale, 0) * Scale(p.b_scale, c) / Scale(p.y_scale, 0);
  const int32_t zp = ZeroPoint(p.y_zero_point, 0);
  if (p.y == DType::kUint8) {
    static_cast<uint8_t*>(y)[i] = quant::Requantize<uint8_t>(sum, multiplier, zp);
  } else {
    static_cast<int8_t*>(y)[i] = quant::Requantize<int8_t>(sum, multiplier, zp);
  }
}

template <typename A, typename B>
__global__ void QMatMulKernel(quant::MatMulGeometry g, const A* a, const B* b, QLinearParams p, void* y) {
  const int64_t total = g.batch * g.m * g.n;
  const int32_t a_zp = ZeroPoint(p.a_zero_point, 0);
  for (int64_t t = GlobalThread(); t < total; t += GridThreads()) {
    const int64_t j = t % g.n;
    const int64_t i = (t / g.n) % g.m;
    const int64_t batch = t / (g.n * g.m);
    int64_t a_off = 0, b_off = 0;
    quant::BatchOffsets(g, batch, &a_off, &b_off);
    const int32_t sum = quant::MatMulIntegerAt(g, a + a_off, b + b_off, a_zp, ZeroPoint(p.b_zero_point, j), i, j);
    PutOutput(p, y, t, sum, j);
  }
}

template <typename X, typename W>
__global__ void QConvKernel(quant::ConvGeometry g, const X* x, const W* w, QLinearParams p, void* y) {
  const int64_t plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t total = g.n * g.m * plane;
  const int32_t x_zp = ZeroPoint(p.a_zero_point, 0);
  for (int64_t t = GlobalThread(); t < total; t += GridThreads()) {
    const int64_t o2 = t % g.out[2];
    const int64_t o1 = (t / g.out[2]) % g.out[1];
    const int64_t o0 = (t / (g.out[2] * g.out[1])) % g.out[0];
    const int64_t mo = (t / plane) % g.m;
    const int64_t b = t / (plane * g.m);
    const int32_t sum = quant::ConvIntegerAt(g, x, w, x_zp, ZeroPoint(p.b_zero_point, mo), b, mo, o0, o1, o2);
    PutOutput(p, y, t, sum, mo);
  }
}

template <typename A, typename B, typename Y>
__global__ void QLinearAddKernel(const A* a, QParam a_scale, QParam a_zero_point, const B* b, QParam b_scale,
                                 QParam b_zero_point, QParam y_scale, QParam y_zero_point, bool relu, Y* y,
                                 int64_t n) {
  const float as = Scale(a_scale, 0), bs = Scale(b_scale, 0), ys = Scale(y_scale, 0);
  const int32_t az = ZeroPoint(a_zero_point, 0), bz = ZeroPoint(b_zero_point, 0), yz = ZeroPoint(y_zero_point, 0);
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = quant::QLinearAdd<Y>(a[i], az, as, b[i], bz, bs, relu, ys, yz);
  }
}

bool ValidOutput(const QLinearParams& p) {
  if (p.y == DType::kFloat32) return !p.qlinear && p.a_scale.data;
  return p.qlinear ? ((p.y == DType::kUint8 || p.y == DType::kInt8) && p.a_scale.data && p.b_scale.data &&
                      p.y_scale.data)
                   : p.y == DType::kInt32;
}

}  // namespace

template <typename X, typename Y>
cudaError_t LaunchQuantize(const X* x, QParam scale, QParam zero_point, Y* y, int64_t outer, int64_t channels,
                           int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * channels * inner;
  if (total <= 0 || scale.data == nullptr) return cudaErrorInvalidValue;
  return LaunchKernel<QuantizeKernel<X, Y>>(Blocks(total), kThreads, 0, stream, x, scale, zero_point, y,
                                            total, channels, inner);
}

template <typename X>
cudaError_t LaunchDequantize(const X* x, QParam scale, QParam zero_point, float* y, int64_t outer,
                             int64_t channels, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * channels * inner;
  if (total <= 0 || scale.data == nullptr) return cudaErrorInvalidValue;
  return LaunchKernel<DequantizeKernel<X>>(Blocks(total), kThreads, 0, stream, x, scale, zero_point, y, total,
                                           channels, inner);
}

cudaError_t LaunchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point,
                                  cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  cudaError_t err = LaunchKernel<DynamicRangeKernel>(1, kThreads, 0, stream, x, n, y_scale, y_zero_point);
  if (err != cudaSuccess || n == 0) return err;
  return LaunchKernel<DynamicQuantizeKernel>(Blocks(n), kThreads, 0, stream, x, n, y,
                                             static_cast<const float*>(y_scale),
                                             static_cast<const uint8_t*>(y_zero_point));
}

template <typename A, typename B>
cudaError_t LaunchQMatMul(const quant::MatMulGeometry& g, const A* a, const B* b, const QLinearParams& p,
                          void* y, cudaStream_t stream) {
  const int64_t total = g.batch * g.m * g.n;
  if (total <= 0 || g.k < 0 || !ValidOutput(p)) return cudaErrorInvalidValue;
  return LaunchKernel<QMatMulKernel<A, B>>(Blocks(total), kThreads, 0, stream, g, a, b, p, y);
}

template <typename X, typename W>
cudaError_t LaunchQConv(const quant::ConvGeometry& g, const X* x, const W* w, const QLinearParams& p, void* y,
                        cudaStream_t stream) {
  const int64_t total = g.n * g.m * g.out[0] * g.out[1] * g.out[2];
  if (total <= 0 || g.group <= 0 || !ValidOutput(p)) return cudaErrorInvalidValue;
  return LaunchKernel<QConvKernel<X, W>>(Blocks(total), kThreads, 0, stream, g, x, w, p, y);
}

template <typename A, typename B, typename Y>
cudaError_t LaunchQLinearAdd(const A* a, QParam a_scale, QParam a_zero_point, const B* b, QParam b_scale,
                             QParam b_zero_point, QParam y_scale, QParam y_zero_point, bool relu, Y* y, int64_t n,
                             cudaStream_t stream) {
  if (n <= 0 || !a_scale.data || !b_scale.data || !y_scale.data) return cudaErrorInvalidValue;
  return LaunchKernel<QLinearAddKernel<A, B, Y>>(Blocks(n), kThreads, 0, stream, a, a_scale, a_zero_point, b, b_scale,
                                                 b_zero_point, y_scale, y_zero_point, relu, y, n);
}

#define REMEX_QUANT_INSTANTIATE_QLINEAR_ADD(A, B, Y)                                                         \
  template cudaError_t LaunchQLinearAdd<A, B, Y>(const A*, QParam, QParam, const B*, QParam, QParam, QParam, \
                                                 QParam, bool, Y*, int64_t, cudaStream_t);
REMEX_QLINEAR_ADD_TYPES(REMEX_QUANT_INSTANTIATE_QLINEAR_ADD)
#undef REMEX_QUANT_INSTANTIATE_QLINEAR_ADD

#define REMEX_QUANT_INSTANTIATE_OPERANDS(A, B)                                               \
  template cudaError_t LaunchQMatMul<A, B>(const quant::MatMulGeometry&, const A*, const B*, \
                                           const QLinearParams&, void*, cudaStream_t);       \
  template cudaError_t LaunchQConv<A, B>(const quant::ConvGeometry&, const A*, const B*,     \
                                         const QLinearParams&, void*, cudaStream_t);
#define REMEX_QUANT_INSTANTIATE_QUANTIZE(X, Y)                                                       \
  template cudaError_t LaunchQuantize<X, Y>(const X*, QParam, QParam, Y*, int64_t, int64_t, int64_t, \
                                            cudaStream_t);
#define REMEX_QUANT_INSTANTIATE_DEQUANTIZE(X)                                                           \
  template cudaError_t LaunchDequantize<X>(const X*, QParam, QParam, float*, int64_t, int64_t, int64_t, \
                                           cudaStream_t);
REMEX_QUANT_INSTANTIATE_OPERANDS(uint8_t, uint8_t)
REMEX_QUANT_INSTANTIATE_OPERANDS(uint8_t, int8_t)
REMEX_QUANT_INSTANTIATE_OPERANDS(int8_t, uint8_t)
REMEX_QUANT_INSTANTIATE_OPERANDS(int8_t, int8_t)
REMEX_QUANT_INSTANTIATE_QUANTIZE(float, uint8_t)
REMEX_QUANT_INSTANTIATE_QUANTIZE(float, int8_t)
REMEX_QUANT_INSTANTIATE_QUANTIZE(int32_t, uint8_t)
REMEX_QUANT_INSTANTIATE_QUANTIZE(int32_t, int8_t)
REMEX_QUANT_INSTANTIATE_DEQUANTIZE(uint8_t)
REMEX_QUANT_INSTANTIATE_DEQUANTIZE(int8_t)
REMEX_QUANT_INSTANTIATE_DEQUANTIZE(int32_t)
#undef REMEX_QUANT_INSTANTIATE_OPERANDS
#undef REMEX_QUANT_INSTANTIATE_QUANTIZE
#undef REMEX_QUANT_INSTANTIATE_DEQUANTIZE

}  // namespace remex::kernels::cuda
