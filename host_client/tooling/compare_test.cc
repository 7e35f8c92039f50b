#include "host_client/tooling/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace remex::compare {
namespace compare_test {

using npy::Array;

Array Floats(Shape shape, std::vector<float> v) {
  Array a;
  a.dtype = DType::kFloat32;
  a.shape = std::move(shape);
  a.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

TEST(CompareTest, AllcloseSemantics) {
  Array e = Floats({3}, {1.0f, 100.0f, 0.0f});
  auto within = CompareArrays(e, Floats({3}, {1.00001f, 100.009f, 1e-6f}), 1e-4, 1e-5);
  EXPECT_TRUE(within.ok) << within.reason;
  auto outside = CompareArrays(e, Floats({3}, {1.0f, 100.5f, 0.0f}), 1e-4, 1e-5);
  EXPECT_FALSE(outside.ok);
  EXPECT_EQ(outside.mismatches, 1u);
  EXPECT_EQ(outside.first_mismatch, 1);
  auto nan = CompareArrays(e, Floats({3}, {1.0f, NAN, 0.0f}), 1e-4, 1e-5);
  EXPECT_FALSE(nan.ok);
  // equal_nan: NaN matches NaN only.
  Array with_nan = Floats({3}, {1.0f, NAN, 0.0f});
  EXPECT_FALSE(CompareArrays(with_nan, with_nan, 1e-4, 1e-5).ok);
  EXPECT_TRUE(CompareArrays(with_nan, with_nan, 1e-4, 1e-5, /*equal_nan=*/true).ok);
  auto one_side = CompareArrays(with_nan, Floats({3}, {1.0f, 2.0f, 0.0f}), 1e-4, 1e-5, /*equal_nan=*/true);
  EXPECT_EQ(one_side.mismatches, 1u);
  EXPECT_EQ(one_side.first_mismatch, 1);
  auto shape = CompareArrays(e, Floats({1, 3}, {1.0f, 100.0f, 0.0f}), 1e-4, 1e-5);
  EXPECT_FALSE(shape.ok);
  EXPECT_FALSE(shape.comparable);
  EXPECT_NE(shape.reason.find("shape [1, 3]"), std::string::npos) << shape.reason;
  auto negative = CompareArrays(e, e, -1e-4, 1e-5);
  EXPECT_FALSE(negative.comparable);
  EXPECT_NE(negative.reason.find("--rtol and --atol must be finite and >= 0"), std::string::npos) << negative.reason;
}

// remex compare and remex check report the same numbers for the same arrays: one rule
// (base/allclose.h), including the infinite relative error where the expected value is 0.
TEST(CompareTest, MetricsFollowTheSharedRule) {
  Array e = Floats({4}, {0.0f, 2.0f, INFINITY, -4.0f});
  Array a = Floats({4}, {0.5f, 2.5f, INFINITY, -4.0f});
  auto c = CompareArrays(e, a, 0.0, 0.6);
  ASSERT_TRUE(c.comparable);
  EXPECT_TRUE(c.ok) << c.reason;
  EXPECT_EQ(c.count, 4u);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.5);
  EXPECT_TRUE(std::isinf(c.max_rel_error));
  AllcloseAccumulator acc(0.0, 0.6);
  for (int i = 0; i < 4; ++i) {
    float x, y;
    std::memcpy(&x, a.data.data() + 4 * i, 4);
    std::memcpy(&y, e.data.data() + 4 * i, 4);
    acc.Add(x, y);
  }
  EXPECT_EQ(acc.stats().mismatches, c.mismatches);
  EXPECT_EQ(acc.stats().max_abs_error, c.max_abs_error);
  // Integers: exact, even beyond float64's 2^53.
  Array big;
  big.dtype = DType::kInt64;
  big.shape = {1};
  big.data.resize(8);
  int64_t v = (int64_t{1} << 60) + 1;
  std::memcpy(big.data.data(), &v, 8);
  Array other = big;
  v -= 1;
  std::memcpy(other.data.data(), &v, 8);
  auto ints = CompareArrays(big, other, 0.0, 0.0);
  EXPECT_FALSE(ints.ok);
  EXPECT_EQ(ints.mismatches, 1u);
}

}  // namespace compare_test
}  // namespace remex::compare
