// Device code of the signal family's CUDA kernels (spectral_impl.h): DFT, STFT and the
// window ops. Includes only CUDA and plain headers. Compiled with -fmad=false: every
// product and sum of kernels/ops/signal/spectral_ops.h's and window_ops.h's functions
// rounds as on the CPU, so DFT's and STFT's outputs are the CPU kernels' bits (the
// windows' cos is the device's own).
//
// TODO(perf): a thread per output bin sums its samples naively (O(n) per bin) and
// evaluates each twiddle factor's polynomial itself; an FFT (or a shared-memory table of
// the roots) would serve long transforms.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/float_double.h"
#include "kernels/ops/signal/cuda/spectral_impl.h"
#include "kernels/ops/signal/spectral_ops.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::cuda {
namespace {

// x * w rounded to T, as the CPU kernel (and numpy) multiplies a frame by the window.
template <typename T>
__device__ __forceinline__ double WindowedSample(T x, T w) {
  if constexpr (std::is_same_v<T, Half>) {
    return static_cast<double>(HalfToFloat(FloatToHalf(HalfToFloat(x) * HalfToFloat(w))));
  } else {
    return static_cast<double>(x * w);
  }
}

// One thread per output bin y[o, k, i, :].
template <typename T>
__global__ void DftKernel(spectral::DftPlan p, const T* x, T* y, int64_t total) {
  for (int64_t e = GlobalThread(); e < total; e += GridThreads()) {
    const int64_t i = e % p.inner;
    const int64_t k = (e / p.inner) % p.bins;
    const int64_t o = e / (p.inner * p.bins);
    const T* xs = x + (o * p.signal * p.inner + i) * p.channels;
    auto load = [&](int64_t t) {
      const T* s = xs + t * p.inner * p.channels;
      return spectral::Complex{ToDouble(s[0]), p.channels == 2 ? ToDouble(s[1]) : 0.0};
    };
    auto root = [&](int64_t m) { return spectral::UnitRoot(m, p.n_fft); };
    const spectral::Complex c = spectral::DftValue(load, root, p.used, k, p.n_fft, p.inverse);
    y[e * 2] = FloatFromDouble<T>(c.re);
    y[e * 2 + 1] = FloatFromDouble<T>(c.im);
  }
}

// One thread per output bin y[b, f, k, :].
template <typename T>
__global__ void StftKernel(spectral::StftPlan p, const T* x, const T* w, T* y, int64_t total) {
  for (int64_t e = GlobalThread(); e < total; e += GridThreads()) {
    const int64_t k = e % p.bins;
    const int64_t f = (e / p.bins) % p.frames;
    const int64_t b = e / (p.bins * p.frames);
    const int64_t start = f * p.frame_step;
    const T* xs = x + b * p.signal * p.channels;
    auto load = [&](int64_t t) {
      const int64_t at = start + t;
      if (at >= p.signal) return spectral::Complex{};
      const T* s = xs + at * p.channels;
      if (w == nullptr) return spectral::Complex{ToDouble(s[0]), p.channels == 2 ? ToDouble(s[1]) : 0.0};
      return spectral::Complex{WindowedSample(s[0], w[t]),
                               p.channels == 2 ? WindowedSample(s[1], w[t]) : 0.0};
    };
    auto root = [&](int64_t m) { return spectral::UnitRoot(m, p.n_fft); };
    const spectral::Complex c = spectral::DftValue(load, root, p.used, k, p.n_fft, false);
    y[e * 2] = FloatFromDouble<T>(c.re);
    y[e * 2 + 1] = FloatFromDouble<T>(c.im);
  }
}

// A double as an element of T, as the CPU kernels store it.
template <typename T>
__device__ __forceinline__ T FromDouble(double v) {
  if constexpr (std::is_integral_v<T>) {
    return window::WindowToInt<T>(v);
  } else {
    return FloatFromDouble<T>(v);
  }
}

template <typename T>
__global__ void WindowKernel(window::WindowKind kind, bool periodic, int64_t size, T* y) {
  for (int64_t n = GlobalThread(); n < size; n += GridThreads()) {
    y[n] = FromDouble<T>(window::WindowValue(kind, periodic, size, n));
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchDft(const spectral::DftPlan& plan, const T* x, T* y, cudaStream_t stream) {
  const int64_t total = plan.outer * plan.bins * plan.inner;
  if (total <= 0 || plan.n_fft < 1 || plan.n_fft > spectral::kMaxDftLength || plan.bins > plan.n_fft ||
      plan.used < 0 || plan.used > plan.signal || plan.used > plan.n_fft ||
      (plan.channels != 1 && plan.channels != 2)) {
    return cudaErrorInvalidValue;
  }
  return LaunchKernel<DftKernel<T>>(Blocks(total), kThreads, 0, stream, plan, x, y, total);
}

template <typename T>
cudaError_t LaunchStft(const spectral::StftPlan& plan, const T* x, const T* window, T* y,
                       cudaStream_t stream) {
  const int64_t total = plan.batch * plan.frames * plan.bins;
  if (total <= 0 || plan.n_fft < 1 || plan.n_fft > spectral::kMaxDftLength || plan.bins > plan.n_fft ||
      plan.used < 0 || plan.used > plan.n_fft || plan.frame_step < 1 ||
      (plan.channels != 1 && plan.channels != 2) || (plan.has_window != (window != nullptr))) {
    return cudaErrorInvalidValue;
  }
  return LaunchKernel<StftKernel<T>>(Blocks(total), kThreads, 0, stream, plan, x, window, y, total);
}

template <typename T>
cudaError_t LaunchWindow(window::WindowKind kind, bool periodic, int64_t size, T* y, cudaStream_t stream) {
  if (size <= 0) return cudaErrorInvalidValue;
  return LaunchKernel<WindowKernel<T>>(Blocks(size), kThreads, 0, stream, kind, periodic, size, y);
}

#define REMEX_SPECTRAL_INSTANTIATE(T)                                                      \
  template cudaError_t LaunchDft<T>(const spectral::DftPlan&, const T*, T*, cudaStream_t); \
  template cudaError_t LaunchStft<T>(const spectral::StftPlan&, const T*, const T*, T*, cudaStream_t);
REMEX_SPECTRAL_INSTANTIATE(float)
REMEX_SPECTRAL_INSTANTIATE(Half)
REMEX_SPECTRAL_INSTANTIATE(double)
#undef REMEX_SPECTRAL_INSTANTIATE

#define REMEX_WINDOW_INSTANTIATE(T) \
  template cudaError_t LaunchWindow<T>(window::WindowKind, bool, int64_t, T*, cudaStream_t);
REMEX_WINDOW_INSTANTIATE(float)
REMEX_WINDOW_INSTANTIATE(Half)
REMEX_WINDOW_INSTANTIATE(double)
REMEX_WINDOW_INSTANTIATE(int8_t)
REMEX_WINDOW_INSTANTIATE(int16_t)
REMEX_WINDOW_INSTANTIATE(int32_t)
REMEX_WINDOW_INSTANTIATE(int64_t)
REMEX_WINDOW_INSTANTIATE(uint8_t)
REMEX_WINDOW_INSTANTIATE(uint16_t)
REMEX_WINDOW_INSTANTIATE(uint32_t)
REMEX_WINDOW_INSTANTIATE(uint64_t)
#undef REMEX_WINDOW_INSTANTIATE

}  // namespace remex::kernels::cuda
