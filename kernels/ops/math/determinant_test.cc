// Det (kernels/ops/math/determinant.cc; ONNX Det-11): ONNX's examples, matrices whose determinants are
// known (permutations, triangular, singular, pivoting needed), batches, dtypes and the
// errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace determinant_test {

using testing::HostTensor;
using testing::OpRunner;

TEST(DetTest, OnnxExamplesAndKnownDeterminants) {
  OpRunner r;
  auto out = r.Run("Det", {}, {HostTensor::Of<float>({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, Shape{});
  EXPECT_FLOAT_EQ((*out)[0].Values<float>()[0], -2.0f);
  // test_det_nd: [[1, 2], [2, 1]] and [[1, 3], [3, 1]].
  out = r.Run("Det", {}, {HostTensor::Of<float>({2, 2, 2}, {1, 2, 2, 1, 1, 3, 3, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, Shape{2});
  const auto nd = (*out)[0].Values<float>();
  EXPECT_FLOAT_EQ(nd[0], -3.0f);
  EXPECT_FLOAT_EQ(nd[1], -8.0f);
  // A zero first pivot (rows must swap), a permutation (odd), a singular matrix, an
  // upper triangular one, float64.
  out = r.Run("Det", {}, {HostTensor::Of<double>({4, 3, 3}, {0, 2, 1, 3, 1, 0, 1, 1, 1,  //
                                                             0, 1, 0, 1, 0, 0, 0, 0, 1,  //
                                                             1, 2, 3, 2, 4, 6, 7, 8, 9,  //
                                                             2, 5, 7, 0, 3, 1, 0, 0, -4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto d = (*out)[0].Values<double>();
  EXPECT_NEAR(d[0], 0 * (1 - 0) - 2 * (3 - 0) + 1 * (3 - 1), 1e-12);
  EXPECT_EQ(d[1], -1.0);
  EXPECT_EQ(d[2], 0.0);
  EXPECT_NEAR(d[3], -24.0, 1e-12);
  // 1x1 and 0x0 (determinant 1).
  out = r.Run("Det", {}, {HostTensor::Of<float>({1, 1}, {-2.5f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>()[0], -2.5f);
  out = r.Run("Det", {}, {HostTensor::Zeros(DType::kFloat32, {3, 0, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(DetTest, Errors) {
  OpRunner r;
  EXPECT_FALSE(r.Run("Det", {}, {HostTensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6})}).ok());
  EXPECT_FALSE(r.Run("Det", {}, {HostTensor::Of<float>({2}, {1, 2})}).ok());
  EXPECT_FALSE(r.Run("Det", {}, {HostTensor::Of<int32_t>({1, 1}, {1})}).ok());
}

}  // namespace determinant_test
}  // namespace remex::kernels
