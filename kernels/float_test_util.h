// Test helpers for float tensors: values as doubles, conversion between the float
// dtypes (float16 rounded to nearest even), and comparison within tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/test_util.h"

namespace remex::kernels::testing {

// Values of a float16, float32 or float64 tensor as doubles (empty for other dtypes).
inline std::vector<double> FloatValues(const HostTensor& t) {
  std::vector<double> out;
  if (t.dtype == DType::kFloat32) {
    for (float v : t.Values<float>()) out.push_back(v);
  } else if (t.dtype == DType::kFloat64) {
    for (double v : t.Values<double>()) out.push_back(v);
  } else if (t.dtype == DType::kFloat16) {
    for (Half v : t.Values<Half>()) out.push_back(HalfToFloat(v));
  }
  return out;
}

// The float tensor `t` converted to `to` (float16, float32, float64; float16 rounded
// to nearest even).
inline HostTensor ConvertFloat(const HostTensor& t, DType to) {
  std::vector<double> v = FloatValues(t);
  if (to == DType::kFloat32) return HostTensor::Of<float>(t.shape, std::vector<float>(v.begin(), v.end()));
  if (to == DType::kFloat64) return HostTensor::Of<double>(t.shape, v);
  std::vector<Half> h;
  for (double x : v) h.push_back(FloatToHalf(static_cast<float>(x)));
  return HostTensor::Of<Half>(t.shape, h);
}

// |a - e| <= atol + rtol * |e| elementwise; NaN matches NaN, infinities must be equal.
// Reports the first mismatch only (a fatal failure of this function).
inline void ExpectAllClose(const std::vector<double>& actual, const std::vector<double>& expected,
                           double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(a)) << what << " at " << i << ": " << a << " vs NaN";
    } else if (std::isinf(e)) {
      ASSERT_EQ(a, e) << what << " at " << i;
    } else {
      ASSERT_LE(std::fabs(a - e), atol + rtol * std::fabs(e))
          << what << " at " << i << ": " << a << " vs " << e;
    }
  }
}

}  // namespace remex::kernels::testing
