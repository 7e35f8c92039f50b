// Helpers of the norm and recurrent kernel tests (norm_test.cc, rnn_test.cc): values
// as doubles, converted to and from a tensor's dtype (float16 rounded as the kernels
// see it), and a relative comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/float16.h"
#include "kernels/test_util.h"

namespace remex::kernels::rnntest {

inline std::vector<double> Random(size_t n, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

template <typename T>
inline testing::HostTensor TensorOf(const Shape& shape, const std::vector<double>& v) {
  std::vector<T> t(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      t[i] = FloatToHalf(static_cast<float>(v[i]));
    } else {
      t[i] = static_cast<T>(v[i]);
    }
  }
  return testing::HostTensor::Of<T>(shape, t);
}

template <typename T>
inline std::vector<double> ValuesOf(const testing::HostTensor& t) {
  std::vector<T> v = t.Values<T>();
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      d[i] = HalfToFloat(v[i]);
    } else {
      d[i] = static_cast<double>(v[i]);
    }
  }
  return d;
}

// Values as the kernel sees them after rounding to T.
template <typename T>
inline std::vector<double> Rounded(const std::vector<double>& v) {
  return ValuesOf<T>(TensorOf<T>({static_cast<int64_t>(v.size())}, v));
}

inline void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

}  // namespace remex::kernels::rnntest
