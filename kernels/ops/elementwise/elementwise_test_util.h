// Helpers of the elementwise kernel tests (elementwise_test.cc, logic_test.cc): numpy
// broadcasting by hand, seeded data, one-input runs and the broadcasting shape pairs.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels::ewtest {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// `values` (of `shape`) expanded to `out` by numpy broadcasting.
template <typename T>
std::vector<T> Expand(const std::vector<T>& values, const Shape& shape, const Shape& out) {
  const size_t rank = out.size();
  const int64_t n = *NumElements(out);
  std::vector<T> result(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t i = idx[rank - shape.size() + d];
      off = off * shape[d] + (shape[d] == 1 ? 0 : i);
    }
    result[flat] = values[off];
  }
  return result;
}

inline std::vector<float> Random(std::mt19937& rng, const Shape& shape, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(*NumElements(shape)));
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> RunFloat(testing::OpRunner& r, std::string_view op, const std::vector<float>& x,
                            const Attributes& attrs = {}) {
  auto out = r.Run(op, attrs, {testing::HostTensor::Of<float>({static_cast<int64_t>(x.size())}, x)});
  EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
  if (!out.ok()) return {};
  return (*out)[0].Values<float>();
}

// Broadcasting shape pairs: equal, scalar, trailing, middle, both ways, rank-expanding.
inline const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {
    {{2, 3}, {2, 3}},       {{2, 3}, {}},
    {{}, {2, 3}},           {{2, 3, 4}, {4}},
    {{2, 3, 4}, {3, 1}},    {{1, 8, 5, 5}, {1, 8, 1, 1}},
    {{4, 1, 3}, {1, 5, 1}}, {{2, 3, 1, 2}, {3, 4, 1}},
    {{3, 1}, {1, 1, 4}},    {{1, 1}, {1}},
    {{5, 1, 1}, {1, 1, 7}}};

}  // namespace remex::kernels::ewtest
