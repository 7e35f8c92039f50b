// Device code of the nn family's normalisation (norm_impl.h): ONNX
// BatchNormalization-15 (inference and training mode), InstanceNormalization-6,
// LayerNormalization-17, LpNormalization-1, LRN-1/13 and MeanVarianceNormalization-9/13.
// Includes only CUDA and plain headers.
//
// This file is compiled without contraction into fused multiply-adds (cuda/sources.cmake):
// BatchNormalization in inference mode then computes what the CPU kernel computes, in
// the same order and rounding, LRN sums its squares in channel order as the CPU kernel
// does (pow is the device's own) and MeanVarianceNormalization sums in double in the CPU
// kernel's order; the rest accumulates in float in another order and agrees to rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/float_double.h"
#include "kernels/ops/nn/batchnorm_ops.h"
#include "kernels/ops/nn/cuda/norm_impl.h"
#include "kernels/ops/nn/lp_ops.h"
#include "kernels/ops/nn/mvn_ops.h"

namespace remex::kernels::cuda {
namespace {

template <typename T>
__global__ void BatchNormKernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                                int64_t total, int64_t c, int64_t inner, float epsilon) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t ch = (i / inner) % c;
    const auto affine = batchnorm::ChannelAffine<float>(Load(scale[ch]), Load(bias[ch]), Load(mean[ch]),
                                                        Load(var[ch]), epsilon);
    y[i] = Store<T>(Load(x[i]) * affine.mul + affine.add);
  }
}

// Mean and biased variance (about the mean) of the block's row of n elements.
template <typename T>
__device__ void RowMoments(const T* row, int64_t n, float* scratch, float& mean, float& var) {
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += Load(row[j]);
  s = BlockReduce(s, Add, scratch);
  mean = n > 0 ? s / static_cast<float>(n) : 0.0f;
  float q = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float dv = Load(row[j]) - mean;
    q += dv * dv;
  }
  q = BlockReduce(q, Add, scratch);
  var = n > 0 ? q / static_cast<float>(n) : 0.0f;
}

// One block per channel of x [n, c, inner]: batch statistics, y, running statistics.
template <typename T>
__global__ void BatchNormTrainingKernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                                        T* y, T* running_mean, T* running_var, int64_t n, int64_t c,
                                        int64_t inner, float epsilon, float momentum) {
  using C = float;  // As InstanceNormalization's: statistics in float for every dtype.
  __shared__ C scratch[32];
  const int64_t count = n * inner;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    C s = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      s += static_cast<C>(Load(x[((t / inner) * c + ch) * inner + t % inner]));
    }
    s = BlockReduce(s, Add, scratch);
    const C m = count > 0 ? s / static_cast<C>(count) : C(0);
    C q = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      const C d = static_cast<C>(Load(x[((t / inner) * c + ch) * inner + t % inner])) - m;
      q += d * d;
    }
    q = BlockReduce(q, Add, scratch);
    const C v = count > 0 ? q / static_cast<C>(count) : C(0);
    if (threadIdx.x == 0) {
      const C mom = static_cast<C>(momentum);
      if (running_mean) running_mean[ch] = Store<T>(static_cast<C>(Load(mean[ch])) * mom + m * (C(1) - mom));
      if (running_var) running_var[ch] = Store<T>(static_cast<C>(Load(var[ch])) * mom + v * (C(1) - mom));
    }
    const C mul = static_cast<C>(Load(scale[ch])) / sqrtf(v + static_cast<C>(epsilon));
    const C add = static_cast<C>(Load(bias[ch])) - m * mul;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      const int64_t i = ((t / inner) * c + ch) * inner + t % inner;
      y[i] = Store<T>(static_cast<C>(Load(x[i])) * mul + add);
    }
    __syncthreads();  // scratch is reused by the next channel's reductions.
  }
}

template <typename T>
__global__ void InstanceNormKernel(const T* x, const T* scale, const T* bias, T* y, int64_t planes, int64_t c,
                                   int64_t inner, float epsilon) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * inner;
    T* out = y + p * inner;
    float mean, var;
    RowMoments(row, inner, scratch, mean, var);
    const int64_t ch = p % c;
    const float mul = Load(scale[ch]) / sqrtf(var + epsilon);
    const float add = Load(bias[ch]) - mean * mul;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) out[j] = Store<T>(Load(row[j]) * mul + add);
  }
}

__device__ __forceinline__ int64_t ParamOffset(int64_t flat, const ParamBroadcast& pb,
                                               const int64_t* strides) {
  int64_t off = 0;
  for (int d = pb.rank - 1; d >= 0; --d) {
    off += (flat % pb.dims[d]) * strides[d];
    flat /= pb.dims[d];
  }
  return off;
}

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* scale, const T* bias, T* y, float* mean_out,
                                float* inv_out, int64_t outer, int64_t inner, ParamBroadcast pb,
                                float epsilon) {
  __shared__ float scratch[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T* row = x + o * inner;
    T* out = y + o * inner;
    float mean, var;
    RowMoments(row, inner, scratch, mean, var);
    const float inv = 1.0f / sqrtf(var + epsilon);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[o] = mean;
      if (inv_out) inv_out[o] = inv;
    }
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      const int64_t flat = o * inner + j;
      const float s = Load(scale[pb.scale_is_row ? j : ParamOffset(flat, pb, pb.scale_strides)]);
      float v = (Load(row[j]) - mean) * inv * s;
      if (bias) v += Load(bias[pb.bias_is_row ? j : ParamOffset(flat, pb, pb.bias_strides)]);
      out[j] = Store<T>(v);
    }
  }
}

template <typename T>
__global__ void LpNormalizationKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int p_order) {
  const int64_t vectors = outer * inner;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (v / inner) * n * inner + v % inner;
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) sum += lp::LpTerm(Load(x[base + k * inner]), p_order);
    const float norm = lp::LpRoot(sum, p_order);
    for (int64_t k = 0; k < n; ++k) y[base + k * inner] = Store<T>(lp::LpNormalize(Load(x[base + k * inner]), norm));
  }
}

// ---------------------------------------------------------------------------
// LRN: one thread per output element (T: float, __half, double).

__device__ __forceinline__ float Pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double Pow(double x, double y) { return pow(x, y); }

template <typename T>
__global__ void LrnKernel(const T* x, T* y, LrnArgs a, ComputeType<T> alpha_over_size,
                          ComputeType<T> bias, ComputeType<T> beta) {
  using C = ComputeType<T>;
  const int64_t total = a.batch * a.channels * a.inner;
  for (int64_t e = GlobalThread(); e < total; e += GridThreads()) {
    const int64_t i = e % a.inner;
    const int64_t ch = (e / a.inner) % a.channels;
    const int64_t base = e - (ch * a.inner + i);  // Start of the batch item.
    const int64_t first = ch - a.lo < 0 ? 0 : ch - a.lo;
    const int64_t last = ch + a.hi > a.channels - 1 ? a.channels - 1 : ch + a.hi;
    C sq = 0;
    for (int64_t cc = first; cc <= last; ++cc) {
      const C v = Load(x[base + cc * a.inner + i]);
      sq += v * v;
    }
    y[e] = Store<T>(Load(x[e]) / Pow(bias + alpha_over_size * sq, beta));
  }
}

template <typename T>
cudaError_t LaunchLrnTyped(const void* x, void* y, const LrnArgs& a, cudaStream_t stream) {
  using C = ComputeType<T>;
  const int64_t total = a.batch * a.channels * a.inner;
  LaunchKernel<LrnKernel<T>>(Blocks(total), kThreads, 0, stream, static_cast<const T*>(x), static_cast<T*>(y),
                             a, static_cast<C>(a.alpha_over_size), static_cast<C>(a.bias),
                             static_cast<C>(a.beta));
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization: one thread per group, in double (T: float, Half, double).

template <typename T>
__global__ void MvnKernel(seqnorm::MvnPlan p, const T* x, T* y) {
  for (int64_t g = GlobalThread(); g < p.groups; g += GridThreads()) {
    double sum = 0, sum_squares = 0;
    for (int64_t k = 0; k < p.group_size; ++k) {
      const double v = ToDouble(x[seqnorm::MvnOffset(p, g, k)]);
      sum += v;
      sum_squares += v * v;
    }
    const seqnorm::MvnMoments m = seqnorm::MvnFinish(sum, sum_squares, p.group_size);
    for (int64_t k = 0; k < p.group_size; ++k) {
      const int64_t at = seqnorm::MvnOffset(p, g, k);
      y[at] = FloatFromDouble<T>((ToDouble(x[at]) - m.mean) / m.denom);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

template <typename T>
cudaError_t LaunchBatchNorm(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                            int64_t n, int64_t c, int64_t inner, float epsilon, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total <= 0) return cudaErrorInvalidValue;
  LaunchKernel<BatchNormKernel<DeviceType<T>>>(Blocks(total), kThreads, 0, stream, AsDevice(x),
                                               AsDevice(scale), AsDevice(bias), AsDevice(mean), AsDevice(var),
                                               AsDevice(y), total, c, inner, epsilon);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBatchNormTraining(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                                    T* y, T* running_mean, T* running_var, int64_t n, int64_t c,
                                    int64_t inner, float epsilon, float momentum, cudaStream_t stream) {
  if (n * c * inner <= 0) return cudaErrorInvalidValue;
  LaunchKernel<BatchNormTrainingKernel<DeviceType<T>>>(Blocks(c, 1), kThreads, 0, stream, AsDevice(x),
                                                       AsDevice(scale), AsDevice(bias), AsDevice(mean),
                                                       AsDevice(var), AsDevice(y), AsDevice(running_mean),
                                                       AsDevice(running_var), n, c, inner, epsilon, momentum);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchInstanceNorm(const T* x, const T* scale, const T* bias, T* y, int64_t n, int64_t c,
                               int64_t inner, float epsilon, cudaStream_t stream) {
  const int64_t planes = n * c;
  if (planes <= 0) return cudaErrorInvalidValue;
  LaunchKernel<InstanceNormKernel<DeviceType<T>>>(Blocks(planes, 1), kThreads, 0, stream, AsDevice(x),
                                                  AsDevice(scale), AsDevice(bias), AsDevice(y), planes, c,
                                                  inner, epsilon);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLayerNorm(const T* x, const T* scale, const T* bias, T* y, float* mean_out, float* inv_out,
                            int64_t outer, int64_t inner, const ParamBroadcast& params, float epsilon,
                            cudaStream_t stream) {
  if (outer <= 0 || params.rank > kMaxLayerNormRank) return cudaErrorInvalidValue;
  LaunchKernel<LayerNormKernel<DeviceType<T>>>(Blocks(outer, 1), kThreads, 0, stream, AsDevice(x),
                                               AsDevice(scale), AsDevice(bias), AsDevice(y), mean_out,
                                               inv_out, outer, inner, params, epsilon);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLpNormalization(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int p_order,
                                  cudaStream_t stream) {
  const int64_t vectors = outer * inner;
  if (vectors <= 0 || p_order < 1) return cudaErrorInvalidValue;
  LaunchKernel<LpNormalizationKernel<DeviceType<T>>>(Blocks(vectors), kThreads, 0, stream, AsDevice(x),
                                                     AsDevice(y), outer, n, inner, p_order);
  return cudaGetLastError();
}

#define REMEX_NORM_INSTANTIATE(T)                                                                           \
  template cudaError_t LaunchBatchNorm<T>(const T*, const T*, const T*, const T*, const T*, T*, int64_t,    \
                                          int64_t, int64_t, float, cudaStream_t);                           \
  template cudaError_t LaunchBatchNormTraining<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, \
                                                  T*, int64_t, int64_t, int64_t, float, float,              \
                                                  cudaStream_t);                                            \
  template cudaError_t LaunchInstanceNorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t,   \
                                             float, cudaStream_t);                                          \
  template cudaError_t LaunchLayerNorm<T>(const T*, const T*, const T*, T*, float*, float*, int64_t,        \
                                          int64_t, const ParamBroadcast&, float, cudaStream_t);             \
  template cudaError_t LaunchLpNormalization<T>(const T*, T*, int64_t, int64_t, int64_t, int, cudaStream_t);
REMEX_NORM_INSTANTIATE(float)
REMEX_NORM_INSTANTIATE(Half)
#undef REMEX_NORM_INSTANTIATE

template <typename T>
cudaError_t LaunchLrn(const T* x, T* y, const LrnArgs& args, cudaStream_t stream) {
  if (args.batch <= 0 || args.channels <= 0 || args.inner <= 0) return cudaErrorInvalidValue;
  return LaunchLrnTyped<DeviceType<T>>(x, y, args, stream);
}

template <typename T>
cudaError_t LaunchMvn(const seqnorm::MvnPlan& plan, const T* x, T* y, cudaStream_t stream) {
  if (plan.groups <= 0 || plan.group_size <= 0) return cudaErrorInvalidValue;
  return LaunchKernel<MvnKernel<T>>(Blocks(plan.groups, 64), 64, 0, stream, plan, x, y);
}

#define REMEX_NORM_INSTANTIATE_DOUBLE(T)                                         \
  template cudaError_t LaunchLrn<T>(const T*, T*, const LrnArgs&, cudaStream_t); \
  template cudaError_t LaunchMvn<T>(const seqnorm::MvnPlan&, const T*, T*, cudaStream_t);
REMEX_NORM_INSTANTIATE_DOUBLE(float)
REMEX_NORM_INSTANTIATE_DOUBLE(Half)
REMEX_NORM_INSTANTIATE_DOUBLE(double)
#undef REMEX_NORM_INSTANTIATE_DOUBLE

}  // namespace remex::kernels::cuda
