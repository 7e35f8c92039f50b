// MeanVarianceNormalization (kernels/ops/nn/mvn.cc; ONNX MeanVarianceNormalization-9/13):
// values against the mean and variance computed here, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace mvn_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

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

}  // namespace mvn_test
}  // namespace remex::kernels
