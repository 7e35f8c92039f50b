// NonZero and Compress (kernels/ops/tensor/nonzero.cc): ONNX's examples, floats (NaN, -0.0),
// scalars and empty inputs, Compress's axis forms per opset and the condition's length.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace nonzero_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(NonZeroTest, CoordinatesRowMajor) {
  OpRunner r;
  auto out = r.Run("NonZero", {}, {HostTensor::Of<bool>({2, 2}, {true, false, true, true})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
  // NaN is nonzero, -0.0 is zero.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto f = r.Run("NonZero", {}, {HostTensor::Of<float>({4}, {-0.0f, nan, 0, 2})});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[0].shape, (Shape{1, 2}));
  EXPECT_EQ((*f)[0].Values<int64_t>(), (std::vector<int64_t>{1, 3}));
  // A scalar is a one-element vector; an empty input has no coordinates.
  auto s = r.Run("NonZero", {}, {HostTensor::Of<int32_t>({}, {7})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].shape, (Shape{1, 1}));
  EXPECT_EQ((*s)[0].Values<int64_t>(), (std::vector<int64_t>{0}));
  auto e = r.Run("NonZero", {}, {HostTensor::Zeros(DType::kUint8, {2, 0, 3})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[0].shape, (Shape{3, 0}));
}

TEST(CompressTest, OnnxExamples) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto a0 =
      r.Run("Compress", Attrs({{"axis", int64_t{0}}}), {x, HostTensor::Of<bool>({3}, {false, true, true})});
  ASSERT_TRUE(a0.ok()) << a0.status().ToString();
  EXPECT_EQ((*a0)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*a0)[0].Values<float>(), (std::vector<float>{3, 4, 5, 6}));
  auto a1 = r.Run("Compress", Attrs({{"axis", int64_t{1}}}), {x, HostTensor::Of<bool>({2}, {false, true})});
  ASSERT_TRUE(a1.ok());
  EXPECT_EQ((*a1)[0].shape, (Shape{3, 1}));
  EXPECT_EQ((*a1)[0].Values<float>(), (std::vector<float>{2, 4, 6}));
  auto flat = r.Run("Compress", {}, {x, HostTensor::Of<bool>({5}, {false, true, false, false, true})});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ((*flat)[0].shape, (Shape{2}));
  EXPECT_EQ((*flat)[0].Values<float>(), (std::vector<float>{2, 5}));
  // A negative axis from opset 11.
  const Attributes neg = Attrs({{"axis", int64_t{-1}}});
  auto n11 = r.Run("Compress-11", neg, {x, HostTensor::Of<bool>({2}, {false, true})});
  ASSERT_TRUE(n11.ok());
  EXPECT_EQ((*n11)[0].Values<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(r.Infer("Compress-9", neg, {x, HostTensor::Of<bool>({2}, {false, true})}).ok());
}

TEST(CompressTest, ConditionLength) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<int64_t>({3}, {1, 2, 3});
  // Shorter: the rest is dropped. Longer: false entries past the end are ignored.
  auto shorter = r.Run("Compress", Attrs({{"axis", int64_t{0}}}), {x, HostTensor::Of<bool>({1}, {true})});
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ((*shorter)[0].Values<int64_t>(), (std::vector<int64_t>{1}));
  auto longer = r.Run("Compress", {}, {x, HostTensor::Of<bool>({5}, {false, false, true, false, false})});
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ((*longer)[0].Values<int64_t>(), (std::vector<int64_t>{3}));
  auto past = r.Infer("Compress", {}, {x, HostTensor::Of<bool>({4}, {false, false, false, true})});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("out of range"), std::string::npos) << past.status().message();
  // condition is bool and 1-D.
  EXPECT_FALSE(r.Infer("Compress", {}, {x, HostTensor::Of<int64_t>({1}, {1})}).ok());
  EXPECT_FALSE(r.Infer("Compress", {}, {x, HostTensor::Of<bool>({1, 1}, {true})}).ok());
}

}  // namespace nonzero_test
}  // namespace remex::kernels
