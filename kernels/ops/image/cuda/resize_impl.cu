// Device code of the image family's Resize (resize_impl.h), ONNX Resize-10/11/13.
// Includes only CUDA and plain headers.
//
// This file is compiled without contraction into fused multiply-adds (cuda/sources.cmake):
// nearest Resize (coordinates in double) then computes what the CPU kernel computes, in
// the same order and rounding; linear and cubic accumulate in float and agree to
// rounding.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/ops/image/cuda/resize_impl.h"
#include "kernels/ops/image/resize_coords.h"

namespace remex::kernels::cuda {
namespace {

// Coordinates are computed in double with the CPU kernel's formulas
// (kernels/ops/image/resize_coords.h), so nearest picks the same source indices.

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

template <typename T>
const T* As(const void* p) {
  return static_cast<const T*>(p);
}

}  // namespace

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

template cudaError_t LaunchResizeInterp<float>(const float*, float*, int64_t, const ResizeParams&, float,
                                               cudaStream_t);
template cudaError_t LaunchResizeInterp<Half>(const Half*, Half*, int64_t, const ResizeParams&, float,
                                              cudaStream_t);

}  // namespace remex::kernels::cuda
