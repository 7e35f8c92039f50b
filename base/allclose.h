// numpy.allclose's elementwise rule, in the one place both comparisons use it: on the
// device by the server's compare request (vm/tensor_ops.h CompareTensors, `remex
// check`) and on the host (host_client/tooling/compare.h, `remex compare`).
//
// actual x matches expected y when |x - y| <= atol + rtol * |y| (numpy.isclose); an
// infinity matches only the same infinity; NaN matches nothing, or, with equal_nan
// (numpy.isclose's equal_nan=True, what ONNX's backend tests compare with), a NaN
// matches a NaN.
// Integers are compared exactly: two distinct int64 values count a difference of at
// least one even where float64 rounds them together.
// Over finite pairs it records the largest absolute error |x - y| and the largest
// relative error |x - y| / |y| (infinite where y == 0 and x != y).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace remex {

// Whether rtol and atol are usable: finite and >= 0 (NaN is not).
inline bool ValidTolerances(double rtol, double atol) {
  return rtol >= 0 && atol >= 0 && std::isfinite(rtol) && std::isfinite(atol);
}

struct AllcloseStats {
  uint64_t count = 0;
  uint64_t mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t first_mismatch = -1;  // flat row-major index; -1 when every element matches
};

class AllcloseAccumulator {
 public:
  // rtol, atol: ValidTolerances (the callers check). equal_nan: NaN matches NaN.
  AllcloseAccumulator(double rtol, double atol, bool equal_nan = false)
      : rtol_(rtol), atol_(atol), equal_nan_(equal_nan) {}

  // The next element (flat index stats().count): actual x, expected y. `integers_equal`
  // is set for integer dtypes: whether the two integers are equal.
  void Add(double x, double y, std::optional<bool> integers_equal = std::nullopt) {
    const int64_t index = static_cast<int64_t>(stats_.count++);
    bool match;
    if (std::isfinite(x) && std::isfinite(y)) {
      double err = std::fabs(x - y);
      if (integers_equal) {
        if (*integers_equal) {
          err = 0;
        } else if (err == 0) {
          err = 1;
        }
      }
      match = err <= atol_ + rtol_ * std::fabs(y);
      const double rel = y != 0 ? err / std::fabs(y) : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
      if (err > stats_.max_abs_error) stats_.max_abs_error = err;
      if (rel > stats_.max_rel_error) stats_.max_rel_error = rel;
    } else {
      match = (std::isinf(x) && x == y) || (equal_nan_ && std::isnan(x) && std::isnan(y));
    }
    if (!match) {
      if (stats_.first_mismatch < 0) stats_.first_mismatch = index;
      stats_.mismatches++;
    }
  }

  const AllcloseStats& stats() const { return stats_; }

 private:
  double rtol_, atol_;
  bool equal_nan_;
  AllcloseStats stats_;
};

}  // namespace remex
