// The per-element formulas of DFT-17, STFT-17 and MelWeightMatrix-17
// (https://onnx.ai/onnx/operators/onnx__DFT.html, onnx__STFT.html,
// onnx__MelWeightMatrix.html; ONNX's reference implementations op_dft.py, op_stft.py and
// op_mel_weight_matrix.py), written once for the CPU kernels (kernels/ops/signal/spectral.cc) and
// the CUDA kernels (kernels/ops/signal/cuda/spectral_impl.cu). A plain header: <math.h> and
// <stdint.h> only, so that .cu files include it.
//
// A DFT output element is a naive sum in double over the used input samples (O(n) per
// element, O(n^2) per transform: no FFT). Its twiddle factors come from UnitRoot, which
// reduces the angle exactly with integer arithmetic and evaluates its own polynomial
// (no libm), so that the CPU and the GPU (compiled without contraction into fused
// multiply-adds) get the same bits, and quarter turns are exact (sin(pi) is 0).
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REMEX_SPECTRAL_FN __host__ __device__ __forceinline__
#else
#define REMEX_SPECTRAL_FN inline
#endif

namespace remex::kernels::spectral {

// The largest DFT length (dft_length, STFT's frame_length, MelWeightMatrix's
// dft_length) and MelWeightMatrix's largest num_mel_bins accepted from tensor data.
constexpr int64_t kMaxDftLength = int64_t{1} << 24;
constexpr int64_t kMaxMelBins = int64_t{1} << 16;

struct Complex {
  double re = 0, im = 0;
};

// DFT-17 over one axis of x, seen as [outer, signal, inner, channels] (channels 1: real,
// 2: complex) -> y [outer, bins, inner, 2]. Input samples past `used` (the first
// min(signal, n_fft)) are the zero padding up to n_fft.
struct DftPlan {
  int64_t outer = 1, signal = 0, inner = 1;
  int64_t channels = 1;
  int64_t n_fft = 1;  // dft_length, in [1, kMaxDftLength].
  int64_t used = 0;   // min(signal, n_fft).
  int64_t bins = 1;   // n_fft, or n_fft / 2 + 1 when onesided.
  bool inverse = false;
};

// STFT-17: signal [batch, signal, channels] -> y [batch, frames, bins, 2]. Frame f
// starts at f * frame_step; its sample n (n < used = min(window_length, n_fft)) is
// signal[f * frame_step + n] * window[n] (no window: 1; past the signal: 0), the DFT
// of n_fft (frame_length) points of it.
struct StftPlan {
  int64_t batch = 0, signal = 0, channels = 1;
  int64_t frame_step = 1, frames = 0;
  int64_t n_fft = 1;  // frame_length, in [1, kMaxDftLength].
  int64_t used = 0;
  int64_t bins = 1;
  bool has_window = false;
};

// (cos, sin) of 2 * pi * m / n for 0 <= m < n <= kMaxDftLength: the quarter turn q and
// the rest within it are split exactly in integers; the rest, folded to at most an
// eighth of a turn, goes through Taylor polynomials (the first terms left out,
// x^19 / 19! and x^20 / 20!, are below 1e-19 there).
REMEX_SPECTRAL_FN Complex UnitRoot(int64_t m, int64_t n) {
  constexpr double kHalfPi = 1.57079632679489661923;
  const int64_t q = (4 * m) / n;
  const int64_t rest = 4 * m - q * n;  // The angle within the quarter: (pi / 2) * rest / n.
  const bool folded = rest > n - rest;
  const double phi = kHalfPi * static_cast<double>(folded ? n - rest : rest) / static_cast<double>(n);
  const double p2 = phi * phi;
  // sin and cos of phi in [0, pi / 4]: Taylor polynomials by Horner's scheme, from the
  // x^17 / 17! and x^18 / 18! terms down.
  double s = 1.0 / 355687428096000.0;
  s = -1.0 / 1307674368000.0 + p2 * s;
  s = 1.0 / 6227020800.0 + p2 * s;
  s = -1.0 / 39916800.0 + p2 * s;
  s = 1.0 / 362880.0 + p2 * s;
  s = -1.0 / 5040.0 + p2 * s;
  s = 1.0 / 120.0 + p2 * s;
  s = -1.0 / 6.0 + p2 * s;
  s = phi * (1.0 + p2 * s);
  double c = -1.0 / 6402373705728000.0;
  c = 1.0 / 20922789888000.0 + p2 * c;
  c = -1.0 / 87178291200.0 + p2 * c;
  c = 1.0 / 479001600.0 + p2 * c;
  c = -1.0 / 3628800.0 + p2 * c;
  c = 1.0 / 40320.0 + p2 * c;
  c = -1.0 / 720.0 + p2 * c;
  c = 1.0 / 24.0 + p2 * c;
  c = -1.0 / 2.0 + p2 * c;
  c = 1.0 + p2 * c;
  // The angle within the quarter: phi, or pi / 2 - phi when folded.
  const double qc = folded ? s : c, qs = folded ? c : s;
  switch (q) {
    case 0:
      return {qc, qs};
    case 1:
      return {-qs, qc};
    case 2:
      return {-qc, -qs};
    default:
      return {qs, -qc};
  }
}

// Output bin k (0 <= k < n_fft) of the DFT of `used` samples zero-padded to n_fft:
// sum over t of x[t] * exp(-+2 pi i k t / n_fft) (forward: -, inverse: + and divided
// by n_fft), summed in double in order of t. `load(t)` returns sample t as a Complex;
// `root(m)` returns UnitRoot(m, n_fft) (a table or the function itself).
template <typename Load, typename Root>
REMEX_SPECTRAL_FN Complex DftValue(const Load& load, const Root& root, int64_t used, int64_t k, int64_t n_fft,
                                   bool inverse) {
  double re = 0.0, im = 0.0;
  int64_t m = 0;  // k * t mod n_fft.
  for (int64_t t = 0; t < used; ++t) {
    const Complex x = load(t);
    const Complex w = root(m);
    if (inverse) {
      re += x.re * w.re - x.im * w.im;
      im += x.re * w.im + x.im * w.re;
    } else {
      re += x.re * w.re + x.im * w.im;
      im += x.im * w.re - x.re * w.im;
    }
    m += k;
    if (m >= n_fft) m -= n_fft;
  }
  if (inverse) {
    re /= static_cast<double>(n_fft);
    im /= static_cast<double>(n_fft);
  }
  return {re, im};
}

// MelWeightMatrix's frequency bin of edge i (0 <= i < num_mel_bins + 2), as ONNX's
// reference computes it in double: mels evenly spaced by (mel(upper) - mel(lower)) /
// (num_mel_bins + 2) from mel(lower), mel(f) = 2595 * log10(1 + f / 700), back to hertz,
// then floor((dft_length + 1) * hz / sample_rate) with numpy's float floor division.
// Returned as a double (NaN or out of range for bad edges: the caller checks).
REMEX_SPECTRAL_FN double HzToMel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }
REMEX_SPECTRAL_FN double MelToHz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

// numpy's floor_divide of doubles (npymath's npy_divmod).
REMEX_SPECTRAL_FN double FloorDivide(double a, double b) {
  const double mod = fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return copysign(0.0, a / b);
  double floordiv = floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

REMEX_SPECTRAL_FN double MelFrequencyBin(int64_t i, int64_t num_mel_bins, int64_t dft_length,
                                         int64_t sample_rate, double lower_edge_hertz,
                                         double upper_edge_hertz) {
  const double low = HzToMel(lower_edge_hertz);
  const double high = HzToMel(upper_edge_hertz);
  const double step = (high - low) / static_cast<double>(num_mel_bins + 2);
  const double hz = MelToHz(static_cast<double>(i) * step + low);
  return FloorDivide(static_cast<double>(dft_length + 1) * hz, static_cast<double>(sample_rate));
}

// Element [j, i] of the matrix: mel bin i's triangle over spectrogram bin j, from its
// frequency bins lower = bins[i], center = bins[i + 1], higher = bins[i + 2], as the
// reference writes it: rising (j - lower) / (center - lower) on [lower, center] (1 at
// center when lower == center), then falling (higher - j) / (higher - center) on
// [center, higher), which overwrites the center; 0 elsewhere.
REMEX_SPECTRAL_FN double MelWeight(int64_t j, int64_t lower, int64_t center, int64_t higher) {
  double v = 0.0;
  const int64_t low_to_center = center - lower;
  if (low_to_center == 0) {
    if (j == center) v = 1.0;
  } else if (j >= lower && j <= center) {
    v = static_cast<double>(j - lower) / static_cast<double>(low_to_center);
  }
  const int64_t center_to_high = higher - center;
  if (center_to_high > 0 && j >= center && j < higher) {
    v = static_cast<double>(higher - j) / static_cast<double>(center_to_high);
  }
  return v;
}

}  // namespace remex::kernels::spectral

#undef REMEX_SPECTRAL_FN
