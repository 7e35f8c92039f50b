// The window ops (kernels/window.cc; ONNX HannWindow-17, HammingWindow-17,
// BlackmanWindow-17), MeanVarianceNormalization and ReverseSequence
// (kernels/sequence_norm.cc; ONNX MeanVarianceNormalization-9/13, ReverseSequence-10):
// values against formulas written here and ONNX's examples, dtypes, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

constexpr double kPi = 3.14159265358979323846;

double Window(const std::string& op, double n, double big_n) {
  const double x = 2 * kPi * n / big_n;
  if (op == "HannWindow") return 0.5 - 0.5 * std::cos(x);
  if (op == "HammingWindow") return 25.0 / 46 - 21.0 / 46 * std::cos(x);
  return 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
}

TEST(WindowTest, PeriodicAndSymmetricMatchTheFormulas) {
  OpRunner r;
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t periodic : {0, 1}) {
      for (int64_t size : {2, 10, 33}) {
        SCOPED_TRACE(std::string(op) + " periodic " + std::to_string(periodic) + " size " +
                     std::to_string(size));
        auto out = r.Run(op, Attrs({{"periodic", periodic}, {"output_datatype", int64_t{11}}}),
                         {HostTensor::Of<int64_t>({}, {size})});
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ASSERT_EQ((*out)[0].shape, Shape{size});
        const auto got = (*out)[0].Values<double>();
        for (int64_t n = 0; n < size; ++n) {
          EXPECT_NEAR(got[n], Window(op, n, periodic ? size : size - 1), 1e-15) << n;
        }
      }
    }
  }
}

TEST(WindowTest, DtypesAndDefaults) {
  OpRunner r;
  // Default float32, periodic; int32 size.
  auto out = r.Run("HannWindow", {}, {HostTensor::Of<int32_t>({}, {4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0.0f, 0.5f, 1.0f, 0.5f}));
  // Integer output truncates: only the peak is 1.
  out = r.Run("HannWindow", Attrs({{"output_datatype", int64_t{7}}}), {HostTensor::Of<int64_t>({1}, {4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  // float16, empty.
  out =
      r.Run("BlackmanWindow", Attrs({{"output_datatype", int64_t{10}}}), {HostTensor::Of<int64_t>({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, Shape{0});
  // A symmetric window of one element is 0 / 0, NaN as in ONNX's reference.
  out = r.Run("HammingWindow", Attrs({{"periodic", int64_t{0}}}), {HostTensor::Of<int64_t>({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan((*out)[0].Values<float>()[0]));
}

TEST(WindowTest, Errors) {
  OpRunner r;
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<int64_t>({}, {-1})}).ok());
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<float>({}, {4})}).ok());
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<int64_t>({2}, {4, 4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"periodic", int64_t{2}}}), {HostTensor::Of<int64_t>({}, {4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"output_datatype", int64_t{9}}}), {HostTensor::Of<int64_t>({}, {4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"output_datatype", int64_t{99}}}), {HostTensor::Of<int64_t>({}, {4})})
          .ok());
}

TEST(MeanVarianceNormalizationTest, MatchesMeanAndVarianceOverAxes) {
  OpRunner r;
  const Shape s = {2, 3, 2, 2};
  std::vector<double> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i) * 1.3) * 4;
  for (const char* op : {"MeanVarianceNormalization-9", "MeanVarianceNormalization"}) {
    auto out = r.Run(op, {}, {HostTensor::Of<double>(s, x)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const auto got = (*out)[0].Values<double>();
    for (int64_t c = 0; c < 3; ++c) {  // Default axes [0, 2, 3]: per channel.
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < 2; ++n) {
        for (int64_t k = 0; k < 4; ++k) {
          const double v = x[(n * 3 + c) * 4 + k];
          sum += v;
          sq += v * v;
        }
      }
      const double mean = sum / 8, denom = std::sqrt(sq / 8 - mean * mean) + 1e-9;
      for (int64_t n = 0; n < 2; ++n) {
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t at = (n * 3 + c) * 4 + k;
          EXPECT_NEAR(got[at], (x[at] - mean) / denom, 1e-12) << at;
        }
      }
    }
  }
  // Axes [-1] of a 2-D float32 input: per row; a constant row becomes 0.
  auto out = r.Run("MeanVarianceNormalization", Attrs({{"axes", std::vector<int64_t>{-1}}}),
                   {HostTensor::Of<float>({2, 2}, {1, 3, 5, 5})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1, 1, 0, 0}));
}

TEST(MeanVarianceNormalizationTest, Errors) {
  OpRunner r;
  const HostTensor x3 = HostTensor::Of<float>({1, 2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(r.Run("MeanVarianceNormalization", {}, {x3}).ok());  // Axis 3 of a rank-3 input.
  EXPECT_FALSE(r.Run("MeanVarianceNormalization", Attrs({{"axes", std::vector<int64_t>{1, -2}}}), {x3}).ok());
  EXPECT_FALSE(r.Run("MeanVarianceNormalization", Attrs({{"axes", std::vector<int64_t>{0}}}),
                     {HostTensor::Of<int32_t>({2}, {1, 2})})
                   .ok());
}

TEST(ReverseSequenceTest, OnnxExamples) {
  OpRunner r;
  const HostTensor lens_time = HostTensor::Of<int64_t>({4}, {4, 3, 2, 1});
  auto out = r.Run(
      "ReverseSequence", Attrs({{"time_axis", int64_t{0}}, {"batch_axis", int64_t{1}}}),
      {HostTensor::Of<float>({4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}), lens_time});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
  out = r.Run("ReverseSequence", Attrs({{"time_axis", int64_t{1}}, {"batch_axis", int64_t{0}}}),
              {HostTensor::Of<float>({4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}),
               HostTensor::Of<int64_t>({4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}));
  // Trailing dims move together; length 0 copies.
  out = r.Run("ReverseSequence", {},
              {HostTensor::Of<int32_t>({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
               HostTensor::Of<int64_t>({2}, {3, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11}));
}

TEST(ReverseSequenceTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({3, 2}, {0, 1, 2, 3, 4, 5});
  auto out = r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({2}, {4, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().ToString();
  out = r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({2}, {-1, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().ToString();
  EXPECT_FALSE(r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({3}, {1, 1, 1})}).ok());
  EXPECT_FALSE(r.Run("ReverseSequence", {}, {x, HostTensor::Of<int32_t>({2}, {1, 1})}).ok());
  EXPECT_FALSE(r.Run("ReverseSequence", Attrs({{"batch_axis", int64_t{0}}}),
                     {x, HostTensor::Of<int64_t>({3}, {1, 1, 1})})
                   .ok());
  EXPECT_FALSE(
      r.Run("ReverseSequence", {}, {HostTensor::Of<float>({3}, {0, 1, 2}), HostTensor::Of<int64_t>({1}, {1})})
          .ok());
}

}  // namespace
}  // namespace remex::kernels
