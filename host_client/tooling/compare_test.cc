#include "host_client/tooling/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace remex::compare {
namespace {

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
  EXPECT_EQ(outside.mismatches, 1);
  EXPECT_EQ(outside.first_mismatch, 1);
  auto nan = CompareArrays(e, Floats({3}, {1.0f, NAN, 0.0f}), 1e-4, 1e-5);
  EXPECT_FALSE(nan.ok);
  auto shape = CompareArrays(e, Floats({1, 3}, {1.0f, 100.0f, 0.0f}), 1e-4, 1e-5);
  EXPECT_FALSE(shape.ok);
}

}  // namespace
}  // namespace remex::compare
