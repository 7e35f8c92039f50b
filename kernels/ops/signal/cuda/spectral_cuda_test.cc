// Differential tests of the DFT, STFT and MelWeightMatrix CUDA kernels
// (kernels/ops/signal/cuda/spectral.cc) against the CPU kernels: DFT (real and complex input,
// every axis, inverse, onesided, dft_length absent, shorter and longer than the signal,
// float32 / float16 / float64, lengths past the block size), STFT (with and without a
// window, frame_length equal to, shorter and longer than the window, onesided, complex
// signals, every float dtype) and MelWeightMatrix (several edges and sizes, float and
// integer output dtypes). Outputs must match bit for bit: both devices evaluate
// kernels/ops/signal/spectral_ops.h's functions in double without contraction.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration runs
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CudaRegistry;
using testing::HostTensor;

TEST(SpectralCudaRegistration, RegistersEveryOp) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : {"DFT", "STFT", "MelWeightMatrix"}) {
    EXPECT_TRUE(registry->FindKernel(op, 17, DeviceKind::kCuda)) << op;
  }
}

class SpectralCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << op << " on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i)
      testing::ExpectSameElements(op, out->cpu[i], out->cuda[i].bytes, i, 0);
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // Random values in [-2, 2] of a float dtype.
  HostTensor Floats(DType dtype, Shape shape) {
    HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
    const size_t n = t.bytes.size() / DTypeSize(dtype);
    std::uniform_real_distribution<double> d(-2.0, 2.0);
    for (size_t i = 0; i < n; ++i) {
      const double v = d(rng_);
      if (dtype == DType::kFloat32) {
        const float f = static_cast<float>(v);
        std::memcpy(t.bytes.data() + i * 4, &f, 4);
      } else if (dtype == DType::kFloat64) {
        std::memcpy(t.bytes.data() + i * 8, &v, 8);
      } else {
        const Half h = DoubleToHalf(v);
        std::memcpy(t.bytes.data() + i * 2, &h.bits, 2);
      }
    }
    return t;
  }

  static HostTensor Length(int64_t v, bool int32) {
    return int32 ? HostTensor::Of<int32_t>({1}, {static_cast<int32_t>(v)}) : HostTensor::Of<int64_t>({}, {v});
  }

  std::mt19937 rng_{20261126};
};

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16};

TEST_F(SpectralCudaTest, Dft) {
  for (int iter = 0; iter < 60; ++iter) {
    const DType dt = kFloatTypes[iter % 3];
    const int64_t rank = Uniform(2, 4);  // Signal dims; the input has one more.
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(Uniform(1, 6));
    shape.push_back(iter % 2 == 0 ? 1 : 2);
    const int64_t r = rank + 1;
    int64_t axis = Uniform(0, r - 2);
    if (iter % 5 == 0) axis -= r;  // Negative, in [-r, -2].
    const int64_t a = axis < 0 ? axis + r : axis;
    if (iter % 7 == 3) shape[a] = Uniform(200, 300);  // Past the block size.
    Attributes attrs =
        Attrs({{"axis", axis}, {"inverse", int64_t{iter % 4 >= 2}}, {"onesided", int64_t{iter % 3 == 1}}});
    std::vector<HostTensor> in = {Floats(dt, shape)};
    const int mode = iter % 4;  // 0: no dft_length, 1: shorter, 2: longer, 3: equal.
    if (mode == 1) in.push_back(Length(Uniform(1, shape[a]), iter % 2 == 0));
    if (mode == 2) in.push_back(Length(shape[a] + Uniform(1, 9), iter % 2 == 0));
    if (mode == 3) in.push_back(Length(shape[a], false));
    SCOPED_TRACE(std::to_string(iter) + ": " + std::string(DTypeName(dt)) + ShapeToString(shape) + " axis " +
                 std::to_string(axis) + " mode " + std::to_string(mode));
    Check("DFT", attrs, in);
  }
}

TEST_F(SpectralCudaTest, DftOfKnownSignals) {
  // arange(100) as [1, 10, 10, 1] along axis 1 and 2 (ONNX's conformance cases), and
  // an inverse of complex input.
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i);
  Check("DFT", {}, {HostTensor::Of<float>({1, 10, 10, 1}, x)});
  Check("DFT", Attrs({{"axis", int64_t{2}}}), {HostTensor::Of<float>({1, 10, 10, 1}, x)});
  std::vector<float> xc(200, 0.0f);
  for (int i = 0; i < 100; ++i) xc[2 * i] = static_cast<float>(i);
  Check("DFT", Attrs({{"inverse", int64_t{1}}}), {HostTensor::Of<float>({1, 10, 10, 2}, xc)});
  // An empty input padded by dft_length: zeros.
  Check("DFT", {}, {HostTensor::Zeros(DType::kFloat32, {2, 0, 1}), Length(5, false)});
}

TEST_F(SpectralCudaTest, Stft) {
  for (int iter = 0; iter < 48; ++iter) {
    const DType dt = kFloatTypes[iter % 3];
    const int64_t batch = Uniform(1, 3), channels = iter % 2 == 0 ? 1 : 2;
    const int64_t length = iter % 8 == 5 ? Uniform(300, 600) : Uniform(8, 64);
    const int64_t n_fft = Uniform(1, std::min<int64_t>(length, 40));
    const int64_t step = Uniform(1, 12);
    std::vector<HostTensor> in = {Floats(dt, {batch, length, channels}), Length(step, iter % 3 == 0)};
    const int mode = iter % 4;  // 0: no window, 1: window of n_fft, 2: other window length, 3: window only.
    if (mode == 0) {
      in.push_back(HostTensor::Absent());
      in.push_back(Length(n_fft, false));
    } else if (mode == 1) {
      in.push_back(Floats(dt, {n_fft}));
      in.push_back(Length(n_fft, true));
    } else if (mode == 2) {
      in.push_back(Floats(dt, {Uniform(1, 50)}));
      in.push_back(Length(n_fft, false));
    } else {
      in.push_back(Floats(dt, {n_fft}));
    }
    SCOPED_TRACE(std::to_string(iter) + ": " + std::string(DTypeName(dt)) + " length " +
                 std::to_string(length) + " n_fft " + std::to_string(n_fft) + " step " +
                 std::to_string(step) + " mode " + std::to_string(mode));
    Check("STFT", Attrs({{"onesided", int64_t{iter % 5 != 2}}}), in);
  }
  // Neither window nor frame_length: one frame of the whole signal.
  Check("STFT", {}, {Floats(DType::kFloat32, {2, 33, 1}), Length(4, false)});
}

TEST_F(SpectralCudaTest, MelWeightMatrix) {
  struct Case {
    int64_t mel_bins, dft_length, sample_rate;
    float lower, upper;
  };
  const Case cases[] = {{8, 16, 8192, 0.0f, 4096.0f},     {4, 64, 16000, 100.0f, 6000.0f},
                        {40, 512, 16000, 20.0f, 8000.0f}, {80, 400, 16000, 0.0f, 7600.0f},
                        {3, 7, 1000, 50.0f, 400.0f},      {128, 2048, 44100, 30.0f, 22050.0f}};
  const int64_t dtypes[] = {1, 11, 10, 7, 2};  // float32, float64, float16, int64, uint8.
  int i = 0;
  for (const Case& c : cases) {
    for (int64_t dt : dtypes) {
      SCOPED_TRACE(std::to_string(i++));
      Check("MelWeightMatrix", Attrs({{"output_datatype", dt}}),
            {HostTensor::Of<int64_t>({}, {c.mel_bins}),
             HostTensor::Of<int32_t>({1}, {static_cast<int32_t>(c.dft_length)}),
             HostTensor::Of<int64_t>({}, {c.sample_rate}), HostTensor::Of<float>({}, {c.lower}),
             HostTensor::Of<double>({}, {static_cast<double>(c.upper)})});
    }
  }
}

}  // namespace
}  // namespace remex::kernels
