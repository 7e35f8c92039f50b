// The window functions of HannWindow-17, HammingWindow-17 and BlackmanWindow-17
// (https://onnx.ai/onnx/operators/onnx__HannWindow.html and its siblings), written once
// for the CPU kernels (kernels/ops/signal/window.cc) and the CUDA kernels
// (kernels/ops/signal/cuda/spectral_impl.cu). A plain header: no CUDA, no Remex headers.
//
// Element n of a window of `size` elements is, with x = 2 * pi * n / N,
//   Hann:     0.5 - 0.5 * cos(x)
//   Hamming:  25/46 - (1 - 25/46) * cos(x)
//   Blackman: 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x)
// where N = size for a periodic window and size - 1 for a symmetric one (ONNX's
// reference; a symmetric window of one element divides 0 by 0 and is NaN there, as
// the reference's is). Computed in double; the kernels convert the value to the output
// dtype.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_WINDOW_FN __host__ __device__ __forceinline__
#else
#define REMEX_WINDOW_FN inline
#endif

namespace remex::kernels::window {

// The window ops, in this order everywhere (the CUDA launcher takes it as is).
enum class WindowKind : uint8_t { kHann, kHamming, kBlackman };

// Element n (0 <= n < size) of the window; `periodic` selects N = size, else size - 1.
REMEX_WINDOW_FN double WindowValue(WindowKind kind, bool periodic, int64_t size, int64_t n) {
  constexpr double kPi = 3.14159265358979323846;
  const double denom = static_cast<double>(periodic ? size : size - 1);
  const double x = 2.0 * kPi * static_cast<double>(n) / denom;
  switch (kind) {
    case WindowKind::kHann:
      return 0.5 - 0.5 * cos(x);
    case WindowKind::kHamming: {
      constexpr double a0 = 25.0 / 46.0;
      return a0 - (1.0 - a0) * cos(x);
    }
    case WindowKind::kBlackman:
      return 0.42 - 0.5 * cos(x) + 0.08 * cos(2.0 * x);
  }
  return 0.0;
}

// `v` as an integer output element: truncated toward zero as numpy's astype does
// (the window lies in [0, 1]); NaN becomes 0.
template <typename I>
REMEX_WINDOW_FN I WindowToInt(double v) {
  return v == v ? static_cast<I>(v) : I(0);
}

}  // namespace remex::kernels::window

#undef REMEX_WINDOW_FN
