// Device code of the nn group's pooling (ONNX MaxPool-12, AveragePool-11/19,
// GlobalAveragePool-1), Resize (Resize-10/11/13) and normalisation
// (BatchNormalization-15 inference, InstanceNormalization-6, LayerNormalization-17).
// Includes only CUDA and plain headers.
//
// This file is compiled without contraction into fused multiply-adds (nn.cmake):
// MaxPool, AveragePool, nearest Resize (coordinates in double) and BatchNormalization
// then compute what the CPU kernels compute, in the same order and rounding; the rest
// accumulates in float in another order and agrees to rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/nn_device.cuh"
#include "kernels/cuda/nn_impl.h"
#include "kernels/ops/nn/batchnorm_ops.h"
#include "kernels/ops/nn/lp_ops.h"
#include "kernels/ops/image/resize_coords.h"

namespace remex::kernels::cuda {
namespace {

using nn::BlockReduce;

__device__ __forceinline__ float Add(float a, float b) { return a + b; }

// ---------------------------------------------------------------------------
// MaxPool, AveragePool, GlobalAveragePool.

struct OutPos {
  int64_t p, o[3];
};

__device__ __forceinline__ OutPos Decompose(int64_t i, const PoolGeometry& g) {
  OutPos r;
  r.o[2] = i % g.out[2];
  i /= g.out[2];
  r.o[1] = i % g.out[1];
  i /= g.out[1];
  r.o[0] = i % g.out[0];
  r.p = i / g.out[0];
  return r;
}

// Calls f(off, i0, i1, i2) for each window position of output `pos` inside x, in
// row-major order: (i0, i1, i2) its input coordinates, off its offset in the plane.
template <typename F>
__device__ __forceinline__ void ForEachWindowTap(const PoolGeometry& g, const OutPos& pos, F f) {
  for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
    const int64_t i0 = pos.o[0] * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
    if (i0 < 0 || i0 >= g.in[0]) continue;
    for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
      const int64_t i1 = pos.o[1] * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
      if (i1 < 0 || i1 >= g.in[1]) continue;
      const int64_t row = (i0 * g.in[1] + i1) * g.in[2];
      for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
        const int64_t i2 = pos.o[2] * g.stride[2] - g.pad_begin[2] + k2 * g.dilation[2];
        if (i2 < 0 || i2 >= g.in[2]) continue;
        f(row + i2, i0, i1, i2);
      }
    }
  }
}

template <typename T>
__global__ void MaxPoolKernel(const T* x, T* y, int64_t* indices, bool column_major, PoolGeometry g) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const OutPos pos = Decompose(i, g);
    const T* plane = x + pos.p * in_plane;
    float best = -INFINITY;
    int64_t best_off = -1;
    int64_t best_pos[3] = {0, 0, 0};
    ForEachWindowTap(g, pos, [&](int64_t off, int64_t i0, int64_t i1, int64_t i2) {
      const float v = Load(plane[off]);
      if (best_off < 0 || v > best) {  // The first position, then strictly greater.
        best = v;
        best_off = off;
        best_pos[0] = i0;
        best_pos[1] = i1;
        best_pos[2] = i2;
      }
    });
    y[i] = Store<T>(best);
    if (indices) {
      int64_t idx = -1;
      if (best_off >= 0) {
        idx = column_major ? best_pos[0] * g.col_stride[0] + best_pos[1] * g.col_stride[1] +
                                 best_pos[2] * g.col_stride[2]
                           : best_off;
        idx += pos.p * in_plane;
      }
      indices[i] = idx;
    }
  }
}

// Window positions along one dim: inside x (`taps`) and inside x or its pads.
__device__ __forceinline__ void CountWindow(const PoolGeometry& g, int d, int64_t o, int64_t& taps,
                                            int64_t& padded) {
  taps = 0;
  padded = 0;
  for (int64_t k = 0; k < g.kernel[d]; ++k) {
    const int64_t i = o * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
    if (i >= 0 && i < g.in[d]) ++taps;
    if (i >= -g.pad_begin[d] && i < g.in[d] + g.pad_end[d]) ++padded;
  }
}

template <typename T>
__global__ void AveragePoolKernel(const T* x, T* y, bool count_include_pad, PoolGeometry g) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const OutPos pos = Decompose(i, g);
    const T* plane = x + pos.p * in_plane;
    float sum = 0.0f;
    ForEachWindowTap(g, pos, [&](int64_t off, int64_t, int64_t, int64_t) { sum += Load(plane[off]); });
    int64_t count = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t taps, padded;
      CountWindow(g, d, pos.o[d], taps, padded);
      count *= count_include_pad ? padded : taps;
    }
    y[i] = Store<T>(count == 0 ? NAN : __fdiv_rn(sum, static_cast<float>(count)));
  }
}

// The larger of a and b, NaN when either is: order-independent, so the tree reduction
// gives the CPU kernel's result.
__device__ __forceinline__ float MaxOrNan(float a, float b) { return isnan(a) || isnan(b) ? NAN : fmaxf(a, b); }

template <typename T>
__global__ void GlobalMaxPoolKernel(const T* x, T* y, int64_t planes, int64_t size) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) m = MaxOrNan(m, Load(row[j]));
    m = BlockReduce(m, MaxOrNan, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(size == 0 ? NAN : m);
  }
}

template <typename T>
__global__ void GlobalAveragePoolKernel(const T* x, T* y, int64_t planes, int64_t size) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) sum += Load(row[j]);
    sum = BlockReduce(sum, Add, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(size == 0 ? NAN : sum / static_cast<float>(size));
  }
}

template <typename T>
__global__ void GlobalLpPoolKernel(const T* x, T* y, int64_t planes, int64_t size, int p_order) {
  __shared__ float scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* row = x + p * size;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) sum += lp::LpTerm(Load(row[j]), p_order);
    sum = BlockReduce(sum, Add, scratch);
    if (threadIdx.x == 0) y[p] = Store<T>(lp::LpRoot(sum, p_order));
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
// Resize. Coordinates are computed in double with the CPU kernel's formulas
// (kernels/resize_coords.h), so nearest picks the same source indices.

__device__ __forceinline__ double OriginalCoord(const ResizeParams& p, int d, double x) {
  return ResizeOriginalCoord(p.coord, x, p.scale[d], p.in[d], p.length[d], p.roi_start[d], p.roi_end[d]);
}

__device__ __forceinline__ bool Outside(const ResizeParams& p, int d, double x) {
  return p.coord == ResizeCoord::kTfCropAndResize && (x < 0 || x > static_cast<double>(p.in[d] - 1));
}

template <typename U>
__global__ void ResizeNearestKernel(const U* x, U* y, int64_t n_out, ResizeParams p, U extrapolation) {
  for (int64_t i = GlobalThread(); i < n_out; i += GridThreads()) {
    int64_t rest = i;
    int64_t off = 0;
    int64_t stride = 1;
    bool outside = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t o = rest % p.out[d];
      rest /= p.out[d];
      const double xc = OriginalCoord(p, d, static_cast<double>(o));
      if (Outside(p, d, xc)) outside = true;
      off += ResizeNearestIndex(p.nearest, xc, p.scale[d] < 1.0, p.in[d]) * stride;
      stride *= p.in[d];
    }
    y[i] = outside ? extrapolation : x[off];
  }
}

// Up to 4 taps of axis d for output index o: input indices and float weights.
__device__ int AxisTaps(const ResizeParams& p, int d, int64_t o, int64_t idx[4], float w[4], bool& outside) {
  const int64_t in = p.in[d];
  const double x = OriginalCoord(p, d, static_cast<double>(o));
  if (Outside(p, d, x)) {
    outside = true;
    return 0;
  }
  double c[4];
  const int taps = ResizeInterpTaps(p.mode, x, in, p.cubic_a, p.exclude_outside, idx, c);
  for (int j = 0; j < taps; ++j) w[j] = static_cast<float>(c[j]);
  return taps;
}

template <typename T>
__global__ void ResizeInterpKernel(const T* x, T* y, int64_t n_out, ResizeParams p, float extrapolation) {
  for (int64_t i = GlobalThread(); i < n_out; i += GridThreads()) {
    int64_t idx[kMaxResizeRank][4];
    float w[kMaxResizeRank][4];
    int taps[kMaxResizeRank];
    int64_t stride[kMaxResizeRank];
    int64_t rest = i;
    int64_t st = 1;
    bool outside = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t o = rest % p.out[d];
      rest /= p.out[d];
      taps[d] = AxisTaps(p, d, o, idx[d], w[d], outside);
      stride[d] = st;
      st *= p.in[d];
    }
    if (outside) {
      y[i] = Store<T>(extrapolation);
      continue;
    }
    // Every combination of one tap per axis, odometer over the axes.
    int pick[kMaxResizeRank] = {};
    float sum = 0.0f;
    while (true) {
      float weight = 1.0f;
      int64_t off = 0;
      for (int d = 0; d < p.rank; ++d) {
        weight *= w[d][pick[d]];
        off += idx[d][pick[d]] * stride[d];
      }
      if (weight != 0.0f) sum += weight * Load(x[off]);
      int d = p.rank - 1;
      for (; d >= 0; --d) {
        // Skip zero-weight taps of this axis.
        do {
          ++pick[d];
        } while (pick[d] < taps[d] && w[d][pick[d]] == 0.0f);
        if (pick[d] < taps[d]) break;
        pick[d] = 0;
      }
      if (d < 0) break;
    }
    y[i] = Store<T>(sum);
  }
}

// ---------------------------------------------------------------------------
// Normalisation.

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
const T* As(const void* p) {
  return static_cast<const T*>(p);
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

template <typename T>
cudaError_t LaunchMaxPool(const T* x, T* y, int64_t* indices, bool column_major, const PoolGeometry& g,
                          cudaStream_t stream) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<MaxPoolKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(y),
                                             indices, column_major, g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAveragePool(const T* x, T* y, bool count_include_pad, const PoolGeometry& g,
                              cudaStream_t stream) {
  const int64_t n = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<AveragePoolKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(y),
                                                 count_include_pad, g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalMaxPool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream) {
  if (planes <= 0) return cudaErrorInvalidValue;
  LaunchKernel<GlobalMaxPoolKernel<DeviceType<T>>>(Blocks(planes, 1), kThreads, 0, stream, AsDevice(x),
                                                   AsDevice(y), planes, size);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream) {
  if (planes <= 0) return cudaErrorInvalidValue;
  LaunchKernel<GlobalAveragePoolKernel<DeviceType<T>>>(Blocks(planes, 1), kThreads, 0, stream, AsDevice(x),
                                                       AsDevice(y), planes, size);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGlobalLpPool(const T* x, T* y, int64_t planes, int64_t size, int p_order,
                               cudaStream_t stream) {
  if (planes <= 0 || p_order < 1) return cudaErrorInvalidValue;
  LaunchKernel<GlobalLpPoolKernel<DeviceType<T>>>(Blocks(planes, 1), kThreads, 0, stream, AsDevice(x),
                                                  AsDevice(y), planes, size, p_order);
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

cudaError_t LaunchResizeNearest(int elem_size, const void* x, void* y, int64_t n_out, const ResizeParams& p,
                                uint64_t extrapolation, cudaStream_t stream) {
  if (n_out <= 0 || p.rank < 1 || p.rank > kMaxResizeRank) return cudaErrorInvalidValue;
  const unsigned blocks = Blocks(n_out);
  switch (elem_size) {
    case 1:
      LaunchKernel<ResizeNearestKernel<uint8_t>>(blocks, kThreads, 0, stream, As<uint8_t>(x),
                                                 static_cast<uint8_t*>(y), n_out, p,
                                                 static_cast<uint8_t>(extrapolation));
      break;
    case 2:
      LaunchKernel<ResizeNearestKernel<uint16_t>>(blocks, kThreads, 0, stream, As<uint16_t>(x),
                                                  static_cast<uint16_t*>(y), n_out, p,
                                                  static_cast<uint16_t>(extrapolation));
      break;
    case 4:
      LaunchKernel<ResizeNearestKernel<uint32_t>>(blocks, kThreads, 0, stream, As<uint32_t>(x),
                                                  static_cast<uint32_t*>(y), n_out, p,
                                                  static_cast<uint32_t>(extrapolation));
      break;
    case 8:
      LaunchKernel<ResizeNearestKernel<uint64_t>>(blocks, kThreads, 0, stream, As<uint64_t>(x),
                                                  static_cast<uint64_t*>(y), n_out, p, extrapolation);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchResizeInterp(const T* x, T* y, int64_t n_out, const ResizeParams& p, float extrapolation,
                               cudaStream_t stream) {
  if (n_out <= 0 || p.rank < 1 || p.rank > kMaxResizeRank || p.mode == ResizeMode::kNearest) {
    return cudaErrorInvalidValue;
  }
  LaunchKernel<ResizeInterpKernel<DeviceType<T>>>(Blocks(n_out), kThreads, 0, stream, AsDevice(x),
                                                  AsDevice(y), n_out, p, extrapolation);
  return cudaGetLastError();
}

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

#define REMEX_NN_POOL_INSTANTIATE(T)                                                                         \
  template cudaError_t LaunchMaxPool<T>(const T*, T*, int64_t*, bool, const PoolGeometry&, cudaStream_t);    \
  template cudaError_t LaunchAveragePool<T>(const T*, T*, bool, const PoolGeometry&, cudaStream_t);          \
  template cudaError_t LaunchGlobalMaxPool<T>(const T*, T*, int64_t, int64_t, cudaStream_t);                 \
  template cudaError_t LaunchGlobalAveragePool<T>(const T*, T*, int64_t, int64_t, cudaStream_t);             \
  template cudaError_t LaunchGlobalLpPool<T>(const T*, T*, int64_t, int64_t, int, cudaStream_t);             \
  template cudaError_t LaunchLpNormalization<T>(const T*, T*, int64_t, int64_t, int64_t, int, cudaStream_t); \
  template cudaError_t LaunchResizeInterp<T>(const T*, T*, int64_t, const ResizeParams&, float,              \
                                             cudaStream_t);                                                  \
  template cudaError_t LaunchBatchNorm<T>(const T*, const T*, const T*, const T*, const T*, T*, int64_t,     \
                                          int64_t, int64_t, float, cudaStream_t);                            \
  template cudaError_t LaunchBatchNormTraining<T>(const T*, const T*, const T*, const T*, const T*, T*, T*,  \
                                                  T*, int64_t, int64_t, int64_t, float, float,               \
                                                  cudaStream_t);                                             \
  template cudaError_t LaunchInstanceNorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t,    \
                                             float, cudaStream_t);                                           \
  template cudaError_t LaunchLayerNorm<T>(const T*, const T*, const T*, T*, float*, float*, int64_t,         \
                                          int64_t, const ParamBroadcast&, float, cudaStream_t);
REMEX_NN_POOL_INSTANTIATE(float)
REMEX_NN_POOL_INSTANTIATE(Half)
#undef REMEX_NN_POOL_INSTANTIATE

}  // namespace remex::kernels::cuda
