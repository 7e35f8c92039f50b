// DFT, STFT and MelWeightMatrix (kernels/ops/signal/spectral.cc): DFTs of known signals (impulse,
// cosine, a shifted impulse), every axis against a direct evaluation in long double,
// zero padding and truncation by dft_length, onesided, inverse(DFT(x)) == x, STFT
// against DFTs of its frames (with and without a window), MelWeightMatrix against
// values of ONNX's reference algorithm, output dtypes, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ops/signal/spectral_ops.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace spectral_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor I64(int64_t v) { return HostTensor::Of<int64_t>({}, {v}); }

std::string Message(const StatusOr<std::vector<HostTensor>>& s) {
  return s.ok() ? "" : s.status().ToString();
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// The DFT of x [outer, n, inner, channels] along n, directly in long double.
std::vector<double> DirectDft(const std::vector<double>& x, int64_t outer, int64_t n, int64_t inner,
                              int64_t channels, int64_t n_fft, int64_t bins, bool inverse) {
  std::vector<double> y(static_cast<size_t>(outer * bins * inner * 2));
  const long double pi = 3.141592653589793238462643383279502884L;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < bins; ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        long double re = 0, im = 0;
        for (int64_t t = 0; t < std::min(n, n_fft); ++t) {
          const double* e = &x[static_cast<size_t>(((o * n + t) * inner + i) * channels)];
          const long double xr = e[0], xi = channels == 2 ? e[1] : 0.0;
          const long double a = (inverse ? 2 : -2) * pi * static_cast<long double>((k * t) % n_fft) / n_fft;
          re += xr * std::cos(a) - xi * std::sin(a);
          im += xr * std::sin(a) + xi * std::cos(a);
        }
        if (inverse) {
          re /= n_fft;
          im /= n_fft;
        }
        double* out = &y[static_cast<size_t>(((o * bins + k) * inner + i) * 2)];
        out[0] = static_cast<double>(re);
        out[1] = static_cast<double>(im);
      }
    }
  }
  return y;
}

std::vector<double> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-2.0, 2.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

TEST(SpectralOpsTest, UnitRootIsExactAtQuarterTurnsAndAccurateElsewhere) {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 10, 12, 16, 100, 1000, 4097}) {
    for (int64_t m = 0; m < n; ++m) {
      const spectral::Complex w = spectral::UnitRoot(m, n);
      if ((4 * m) % n == 0) {
        const int q = static_cast<int>(4 * m / n);
        EXPECT_EQ(std::fabs(w.re), q % 2 == 0 ? 1.0 : 0.0) << m << "/" << n;
        EXPECT_EQ(std::fabs(w.im), q % 2 == 1 ? 1.0 : 0.0) << m << "/" << n;
      }
      const long double a = 2 * 3.141592653589793238462643383279502884L * m / n;
      EXPECT_NEAR(w.re, static_cast<double>(std::cos(a)), 1e-15) << m << "/" << n;
      EXPECT_NEAR(w.im, static_cast<double>(std::sin(a)), 1e-15) << m << "/" << n;
    }
  }
}

TEST(DftTest, ImpulseAndCosine) {
  OpRunner r;
  // An impulse at 0: every bin is 1.
  std::vector<float> impulse(8, 0.0f);
  impulse[0] = 1.0f;
  auto out = r.Run("DFT", {}, {HostTensor::Of<float>({1, 8, 1}, impulse)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 8, 2}));
  std::vector<float> ones;
  for (int k = 0; k < 8; ++k) ones.insert(ones.end(), {1.0f, 0.0f});
  EXPECT_EQ((*out)[0].Values<float>(), ones);
  // An impulse at 2 of 8 points: bin k is exp(-i pi k / 2), exact at quarter turns.
  impulse = std::vector<float>(8, 0.0f);
  impulse[2] = 1.0f;
  out = r.Run("DFT", {}, {HostTensor::Of<float>({1, 8, 1}, impulse)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{1, 0, 0, -1, -1, 0, 0, 1, 1, 0, 0, -1, -1, 0, 0, 1}));
  // cos(2 pi 3 t / 16): 8 at bins 3 and 13, 0 elsewhere.
  std::vector<double> c(16);
  for (int t = 0; t < 16; ++t) c[t] = std::cos(2 * M_PI * 3 * t / 16);
  out = r.Run("DFT", {}, {HostTensor::Of<double>({1, 16, 1}, c)});
  ASSERT_TRUE(out.ok()) << Message(out);
  std::vector<double> want(32, 0.0);
  want[6] = want[26] = 8.0;
  ExpectNear((*out)[0].Values<double>(), want, 1e-13);
}

TEST(DftTest, EveryAxisRealAndComplexMatchesDirectEvaluation) {
  OpRunner r;
  const Shape shape = {2, 3, 5, 4};
  for (int64_t channels : {1, 2}) {
    Shape s = shape;
    s.push_back(channels);
    const std::vector<double> x = Random(static_cast<size_t>(*NumElements(s)), 7 + channels);
    for (int64_t axis : {0, 1, 2, 3, -2, -3, -5}) {
      for (int inverse : {0, 1}) {
        for (int onesided : {0, 1}) {
          SCOPED_TRACE("channels " + std::to_string(channels) + " axis " + std::to_string(axis) +
                       " inverse " + std::to_string(inverse) + " onesided " + std::to_string(onesided));
          const int64_t a = axis < 0 ? axis + 5 : axis;
          int64_t outer = 1, inner = 1;
          for (int64_t d = 0; d < a; ++d) outer *= s[d];
          for (int64_t d = a + 1; d < 4; ++d) inner *= s[d];
          const int64_t n = s[a], bins = onesided ? n / 2 + 1 : n;
          auto out = r.Run(
              "DFT", Attrs({{"axis", axis}, {"inverse", int64_t{inverse}}, {"onesided", int64_t{onesided}}}),
              {HostTensor::Of<double>(s, x)});
          ASSERT_TRUE(out.ok()) << Message(out);
          Shape want_shape = s;
          want_shape[a] = bins;
          want_shape[4] = 2;
          EXPECT_EQ((*out)[0].shape, want_shape);
          ExpectNear((*out)[0].Values<double>(), DirectDft(x, outer, n, inner, channels, n, bins, inverse),
                     1e-13);
        }
      }
    }
  }
}

TEST(DftTest, DftLengthPadsOrTruncates) {
  OpRunner r;
  const std::vector<double> x = Random(2 * 6 * 2, 3);
  for (int64_t n_fft : {1, 3, 6, 7, 16}) {
    for (DType length_dtype : {DType::kInt32, DType::kInt64}) {
      SCOPED_TRACE(n_fft);
      const HostTensor length = length_dtype == DType::kInt32
                                    ? HostTensor::Of<int32_t>({1}, {static_cast<int32_t>(n_fft)})
                                    : I64(n_fft);
      auto out = r.Run("DFT", {}, {HostTensor::Of<double>({2, 6, 2}, x), length});
      ASSERT_TRUE(out.ok()) << Message(out);
      EXPECT_EQ((*out)[0].shape, (Shape{2, n_fft, 2}));
      ExpectNear((*out)[0].Values<double>(), DirectDft(x, 2, 6, 1, 2, n_fft, n_fft, false), 1e-13);
    }
  }
  // An empty dft_length is the axis' extent.
  auto out = r.Run("DFT", {}, {HostTensor::Of<double>({2, 6, 2}, x), HostTensor::Of<int64_t>({0}, {})});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{2, 6, 2}));
}

TEST(DftTest, InverseOfForwardIsTheSignal) {
  OpRunner r;
  for (int64_t n : {1, 2, 5, 8, 17, 64}) {
    SCOPED_TRACE(n);
    const std::vector<double> x = Random(static_cast<size_t>(3 * n * 2), static_cast<uint32_t>(n));
    auto y = r.Run("DFT", {}, {HostTensor::Of<double>({3, n, 2}, x)});
    ASSERT_TRUE(y.ok()) << Message(y);
    auto back = r.Run("DFT", Attrs({{"inverse", int64_t{1}}}), {(*y)[0]});
    ASSERT_TRUE(back.ok()) << Message(back);
    ExpectNear((*back)[0].Values<double>(), x, 1e-13);
  }
  // float32 and float16 in and out (summed in double).
  std::vector<float> xf(2 * 10);
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(i % 7) - 3.0f;
  auto y = r.Run("DFT", {}, {HostTensor::Of<float>({1, 10, 2}, xf)});
  ASSERT_TRUE(y.ok()) << Message(y);
  auto back = r.Run("DFT", Attrs({{"inverse", int64_t{1}}}), {(*y)[0]});
  ASSERT_TRUE(back.ok()) << Message(back);
  const std::vector<float> bf = (*back)[0].Values<float>();
  for (size_t i = 0; i < xf.size(); ++i) EXPECT_NEAR(bf[i], xf[i], 1e-5) << i;
  std::vector<Half> xh;
  for (float v : xf) xh.push_back(FloatToHalf(v));
  auto yh = r.Run("DFT", {}, {HostTensor::Of<Half>({1, 10, 2}, xh)});
  ASSERT_TRUE(yh.ok()) << Message(yh);
  const std::vector<Half> gh = (*yh)[0].Values<Half>();
  const std::vector<float> gf = (*y)[0].Values<float>();
  ASSERT_EQ(gh.size(), gf.size());
  for (size_t i = 0; i < gh.size(); ++i)
    EXPECT_NEAR(HalfToFloat(gh[i]), gf[i], 1e-3 * std::fabs(gf[i]) + 1e-3) << i;
}

TEST(StftTest, FramesAreDftsOfWindowedSlices) {
  OpRunner r;
  const int64_t length = 40;
  for (int64_t channels : {1, 2}) {
    const std::vector<double> x = Random(static_cast<size_t>(2 * length * channels), 11);
    std::vector<double> window(10);
    for (int64_t n = 0; n < 10; ++n) window[n] = 0.5 - 0.5 * std::cos(2 * M_PI * n / 10);
    struct Case {
      int64_t step, frame_length, window_length;  // 0: not given.
      int onesided;
    };
    for (const Case& c : {Case{5, 10, 0, 1}, Case{3, 10, 10, 1}, Case{7, 0, 10, 0}, Case{4, 12, 10, 1},
                          Case{4, 8, 10, 0}, Case{1, 40, 0, 1}, Case{100, 0, 0, 0}}) {
      SCOPED_TRACE("channels " + std::to_string(channels) + " step " + std::to_string(c.step) +
                   " frame_length " + std::to_string(c.frame_length) + " window " +
                   std::to_string(c.window_length));
      std::vector<HostTensor> in = {HostTensor::Of<double>({2, length, channels}, x), I64(c.step)};
      const std::vector<double> w(window.begin(), window.begin() + c.window_length);
      if (c.window_length > 0 || c.frame_length > 0) {
        in.push_back(c.window_length > 0 ? HostTensor::Of<double>({c.window_length}, w)
                                         : HostTensor::Absent());
      }
      if (c.frame_length > 0) in.push_back(I64(c.frame_length));
      auto out = r.Run("STFT", Attrs({{"onesided", int64_t{c.onesided}}}), in);
      ASSERT_TRUE(out.ok()) << Message(out);
      const int64_t n_fft = c.frame_length > 0    ? c.frame_length
                            : c.window_length > 0 ? c.window_length
                                                  : length;
      const int64_t frames = 1 + (length - n_fft) / c.step, bins = c.onesided ? n_fft / 2 + 1 : n_fft;
      EXPECT_EQ((*out)[0].shape, (Shape{2, frames, bins, 2}));
      // Each frame: its slice of window_length samples (windowed), DFT of n_fft points.
      const int64_t used = c.window_length > 0 ? std::min(c.window_length, n_fft) : n_fft;
      std::vector<double> want;
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t f = 0; f < frames; ++f) {
          std::vector<double> frame;
          for (int64_t t = 0; t < used; ++t) {
            for (int64_t ch = 0; ch < channels; ++ch) {
              const double v = x[static_cast<size_t>((b * length + f * c.step + t) * channels + ch)];
              frame.push_back(c.window_length > 0 ? v * window[t] : v);
            }
          }
          const std::vector<double> d = DirectDft(frame, 1, used, 1, channels, n_fft, bins, false);
          want.insert(want.end(), d.begin(), d.end());
        }
      }
      ExpectNear((*out)[0].Values<double>(), want, 1e-12);
    }
  }
}

TEST(MelWeightMatrixTest, MatchesTheReferenceAlgorithm) {
  OpRunner r;
  // num_mel_bins 4, dft_length 64, sample_rate 16000, edges 100 and 6000 Hz: frequency
  // bins 0, 1, 3, 6, 10, 16 (values from ONNX's reference algorithm).
  const std::vector<HostTensor> in = {I64(4), I64(64), HostTensor::Of<int32_t>({}, {16000}),
                                      HostTensor::Of<float>({}, {100.0f}),
                                      HostTensor::Of<double>({1}, {6000.0})};
  auto out = r.Run("MelWeightMatrix", Attrs({{"output_datatype", int64_t{11}}}), in);
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].dtype, DType::kFloat64);
  EXPECT_EQ((*out)[0].shape, (Shape{33, 4}));
  std::vector<double> want = {
      0, 0,       0,       0,       1, 0,       0,       0,    0.5, 0.5, 0, 0,       0, 1, 0,    0,
      0, 2.0 / 3, 1.0 / 3, 0,       0, 1.0 / 3, 2.0 / 3, 0,    0,   0,   1, 0,       0, 0, 0.75, 0.25,
      0, 0,       0.5,     0.5,     0, 0,       0.25,    0.75, 0,   0,   0, 1,       0, 0, 0,    5.0 / 6,
      0, 0,       0,       4.0 / 6, 0, 0,       0,       0.5,  0,   0,   0, 2.0 / 6, 0, 0, 0,    1.0 / 6};
  want.resize(33 * 4, 0.0);
  EXPECT_EQ((*out)[0].Values<double>(), want);
  // float32 by default; integer output types truncate.
  out = r.Run("MelWeightMatrix", {}, in);
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_FLOAT_EQ((*out)[0].Values<float>()[4 * 4 + 1], 2.0f / 3);
  out = r.Run("MelWeightMatrix", Attrs({{"output_datatype", int64_t{7}}}), in);
  ASSERT_TRUE(out.ok()) << Message(out);
  const std::vector<int64_t> ints = (*out)[0].Values<int64_t>();
  for (size_t i = 0; i < ints.size(); ++i) EXPECT_EQ(ints[i], want[i] == 1.0 ? 1 : 0) << i;
  // ONNX's example (8 mel bins, dft_length 16, 8192 Hz, 0 to 4096 Hz): bins 0, 0, 0, 1,
  // 1, 2, 3, 4, 5, 6; equal edges put a 1 at the center.
  out = r.Run(
      "MelWeightMatrix", {},
      {I64(8), I64(16), I64(8192), HostTensor::Of<float>({}, {0.0f}), HostTensor::Of<float>({}, {4096.0f})});
  ASSERT_TRUE(out.ok()) << Message(out);
  std::vector<float> want8(9 * 8, 0.0f);
  want8[0 * 8 + 0] = want8[0 * 8 + 1] = want8[1 * 8 + 2] = want8[1 * 8 + 3] = 1;
  for (int i = 4; i < 8; ++i) want8[(i - 2) * 8 + i] = 1;
  EXPECT_EQ((*out)[0].Values<float>(), want8);
}

TEST(SpectralTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 4, 1}, {1, 2, 3, 4});
  auto expect_error = [&](std::string_view op, const Attributes& attrs, const std::vector<HostTensor>& in,
                          const std::string& fragment) {
    auto out = r.Run(op, attrs, in);
    ASSERT_FALSE(out.ok()) << op << " " << fragment;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
    EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().ToString();
    EXPECT_NE(out.status().message().find(std::string(op)), std::string::npos) << out.status().ToString();
  };
  expect_error("DFT", {}, {x, I64(0)}, "dft_length must be in [1, 16777216], got 0");
  expect_error("DFT", {}, {x, I64(int64_t{1} << 25)}, "dft_length");
  expect_error("DFT", {}, {x, HostTensor::Of<int64_t>({2}, {4, 4})}, "dft_length must hold one value");
  expect_error("DFT", {}, {x, HostTensor::Of<float>({}, {4})}, "dft_length must be int32 or int64");
  expect_error("DFT", Attrs({{"axis", int64_t{2}}}), {x}, "axis must be in [-3, -2] or [0, 1]");
  expect_error("DFT", Attrs({{"axis", int64_t{-1}}}), {x}, "got -1");
  expect_error("DFT", Attrs({{"inverse", int64_t{2}}}), {x}, "inverse must be 0 or 1");
  expect_error("DFT", {}, {HostTensor::Of<float>({1, 4, 3}, std::vector<float>(12))}, "real or complex");
  expect_error("DFT", {}, {HostTensor::Of<int32_t>({1, 4, 1}, {1, 2, 3, 4})}, "input must be float16");
  expect_error("DFT", {}, {HostTensor::Of<float>({1, 0, 1}, {})}, "the signal length along axis must be in");
  expect_error("STFT", {}, {x, I64(0)}, "frame_step must be >= 1");
  expect_error("STFT", {}, {x, I64(1), HostTensor::Absent(), I64(5)}, "frame_length 5 must be at most");
  expect_error("STFT", {}, {x, I64(1), HostTensor::Of<double>({2}, {1, 1})}, "window must be float32");
  expect_error("STFT", {}, {x, I64(1), HostTensor::Of<float>({1, 2}, {1, 1})}, "window must be 1-D");
  expect_error("STFT", {}, {HostTensor::Of<float>({4, 1}, {1, 2, 3, 4}), I64(1)}, "signal must be [batch");
  expect_error("STFT", Attrs({{"onesided", int64_t{3}}}), {x, I64(1)}, "onesided must be 0 or 1");
  const HostTensor lo = HostTensor::Of<float>({}, {0.0f}), hi = HostTensor::Of<float>({}, {4000.0f});
  expect_error("MelWeightMatrix", {}, {I64(0), I64(16), I64(8000), lo, hi},
               "num_mel_bins must be in [1, 65536]");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(0), I64(8000), lo, hi}, "dft_length must be in");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(16), I64(0), lo, hi}, "sample_rate must be >= 1");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(16), I64(8000), lo, HostTensor::Of<float>({}, {NAN})},
               "must be finite");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(16), I64(8000), lo, HostTensor::Of<float>({}, {9000.0f})},
               "out of range");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(16), I64(8000), HostTensor::Of<float>({}, {-500.0f}), hi},
               "out of range");
  expect_error("MelWeightMatrix", Attrs({{"output_datatype", int64_t{9}}}),
               {I64(4), I64(16), I64(8000), lo, hi}, "output_datatype 9");
  expect_error("MelWeightMatrix", {}, {I64(4), I64(16), I64(8000), HostTensor::Of<int64_t>({}, {0}), hi},
               "lower_edge_hertz must be float16");
}

}  // namespace spectral_test
}  // namespace remex::kernels
