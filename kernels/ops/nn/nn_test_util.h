// Helpers of the nn kernel tests (nn_test.cc, resize_test.cc): seeded data and
// comparisons.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/test_util.h"

namespace remex::kernels::nntest {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> Iota(size_t n, float start = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

inline void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol,
                const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
  }
}

inline void ExpectErrorMentions(const Status& s, std::string_view op) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(op), std::string::npos) << s.message();
}

// Resize's data inputs: scales, sizes, and an absent (empty) roi or scales.
inline testing::HostTensor Scales(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return testing::HostTensor::Of<float>({n}, v);
}
inline testing::HostTensor Sizes(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return testing::HostTensor::Of<int64_t>({n}, v);
}
inline testing::HostTensor EmptyFloats() { return testing::HostTensor::Of<float>({0}, {}); }

}  // namespace remex::kernels::nntest
