// Host-side comparison of .npy results, with numpy.allclose semantics:
// |actual - expected| <= atol + rtol * |expected| elementwise, NaN never equal.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/client/npy.h"

namespace remex::compare {

struct ArrayComparison {
  bool ok = false;
  std::string reason;        // why not ok: dtype, shape or values
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;  // flat index
  double max_abs_error = 0;
  double max_rel_error = 0;
};

// Dtypes and shapes must be equal; float32, float64, float16 and integer/bool arrays
// are compared as doubles.
ArrayComparison CompareArrays(const npy::Array& expected, const npy::Array& actual, double rtol, double atol);

struct PathComparison {
  bool ok = false;
  std::vector<std::string> lines;  // one per compared array
};

// Compares two .npy files, or every EXPECTED/NAME.npy with ACTUAL/NAME.npy (a file
// missing from ACTUAL is a mismatch). NOT_FOUND / INVALID_ARGUMENT for unreadable files.
StatusOr<PathComparison> ComparePaths(const std::string& expected, const std::string& actual, double rtol,
                                      double atol);

}  // namespace remex::compare
