// Device code of the GridSample CUDA kernel (grid_impl.h). Includes only CUDA and
// plain headers. Compiled with -fmad=false: the interpolation's sums and products
// round as on the CPU (kernels/ops/image/grid_sample_ops.h's functions, called per output
// element).

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ops/image/cuda/grid_sample_impl.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/float16.h"
#include "kernels/ops/image/grid_sample_ops.h"

namespace remex::kernels::cuda {
namespace {

// Element type T and the type its arithmetic runs in (the CPU's ComputeType).
template <typename T>
struct GridElem {
  using C = T;
  __host__ __device__ static C Load(T v) { return v; }
  __host__ __device__ static T Store(C v) { return v; }
};
template <>
struct GridElem<Half> {
  using C = float;
  __host__ __device__ static float Load(Half v) { return HalfToFloat(v); }
  __host__ __device__ static Half Store(float v) { return FloatToHalf(v); }
};

// Element i of one plane, in the compute type.
template <typename T>
struct DevicePlane {
  const T* p;
  __host__ __device__ typename GridElem<T>::C operator()(int64_t i) const { return GridElem<T>::Load(p[i]); }
};

// One thread per output element y[n, c, oh, ow].
template <typename T>
__global__ void GridSampleKernel(grid::GridSampleGeometry g, const T* x, const T* grid_xy, T* y,
                                 int64_t total) {
  using C = typename GridElem<T>::C;
  const int64_t plane_out = g.h_out * g.w_out, plane_in = g.h_in * g.w_in;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t at = i % plane_out;
    const int64_t nc = i / plane_out;
    const int64_t n = nc / g.channels;
    const T* xy = grid_xy + (n * plane_out + at) * 2;
    const grid::GridPoint<C> p = grid::GridPointOf<C>(GridElem<T>::Load(xy[0]), GridElem<T>::Load(xy[1]), g);
    const DevicePlane<T> plane{x + nc * plane_in};
    y[i] = GridElem<T>::Store(grid::GridSampleValue<C>(plane, p, g));
  }
}

template <typename T>
cudaError_t Launch(const grid::GridSampleGeometry& g, const void* x, const void* grid_xy, void* y,
                   int64_t total, cudaStream_t stream) {
  LaunchKernel<GridSampleKernel<T>>(Blocks(total), kThreads, 0, stream, g, static_cast<const T*>(x),
                                    static_cast<const T*>(grid_xy), static_cast<T*>(y), total);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchGridSample(const grid::GridSampleGeometry& g, const T* x, const T* grid_xy, T* y,
                             cudaStream_t stream) {
  const int64_t total = g.batch * g.channels * g.h_out * g.w_out;
  if (total <= 0 || g.h_in <= 0 || g.w_in <= 0) return cudaErrorInvalidValue;
  return Launch<T>(g, x, grid_xy, y, total, stream);
}

template cudaError_t LaunchGridSample<float>(const grid::GridSampleGeometry&, const float*, const float*,
                                             float*, cudaStream_t);
template cudaError_t LaunchGridSample<Half>(const grid::GridSampleGeometry&, const Half*, const Half*, Half*,
                                            cudaStream_t);
template cudaError_t LaunchGridSample<double>(const grid::GridSampleGeometry&, const double*, const double*,
                                              double*, cudaStream_t);

}  // namespace remex::kernels::cuda
