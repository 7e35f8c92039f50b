// Unique (kernels/ops/tensor/unique.cc; ONNX Unique-11): ONNX's examples (sorted and in order of
// first occurrence, with and without axis), NaN and signed-zero handling, and errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace unique_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(UniqueTest, OnnxExamples) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({6}, {2, 1, 1, 3, 4, 3});
  auto out = r.Run("Unique", {}, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ((*out)[2].Values<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ((*out)[3].Values<int64_t>(), (std::vector<int64_t>{2, 1, 2, 1}));
  out = r.Run("Unique", Attrs({{"sorted", int64_t{0}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ((*out)[2].Values<int64_t>(), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ((*out)[3].Values<int64_t>(), (std::vector<int64_t>{1, 2, 2, 1}));
  // Rows along axis 0 (and -2).
  const HostTensor m = HostTensor::Of<int32_t>({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  for (int64_t axis : {0, -2}) {
    out = r.Run("Unique", Attrs({{"axis", axis}}), {m});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
    EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{1, 0, 0, 2, 3, 4}));
    EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{0, 2}));
    EXPECT_EQ((*out)[2].Values<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
    EXPECT_EQ((*out)[3].Values<int64_t>(), (std::vector<int64_t>{2, 1}));
  }
  // Columns along axis 1: [0, 1] and [0, 2] differ lexicographically.
  out = r.Run("Unique", Attrs({{"axis", int64_t{1}}}), {HostTensor::Of<int64_t>({2, 3}, {0, 0, 1, 2, 1, 2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));  // Columns [0, 1], [0, 2], [1, 2].
  EXPECT_EQ((*out)[2].Values<int64_t>(), (std::vector<int64_t>{1, 0, 2}));
}

TEST(UniqueTest, NanSortsLastAndSignedZerosAreEqual) {
  OpRunner r;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = r.Run("Unique", {}, {HostTensor::Of<float>({5}, {nan, 0.0f, -1.0f, nan, -0.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto y = (*out)[0].Values<float>();
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ((*out)[3].Values<int64_t>(), (std::vector<int64_t>{1, 2, 2}));
}

TEST(UniqueTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(r.Run("Unique", Attrs({{"axis", int64_t{2}}}), {x}).ok());
  EXPECT_FALSE(r.Run("Unique", Attrs({{"sorted", int64_t{2}}}), {x}).ok());
  EXPECT_EQ(r.registry().FindOp("Unique")->DepOf(0), ShapeDep::kData);
}

}  // namespace unique_test
}  // namespace remex::kernels
