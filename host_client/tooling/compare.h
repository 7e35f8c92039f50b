// Host-side comparison of .npy results (`remex compare`), with the same rule and the
// same metrics as the device-side comparison of `remex check` (base/allclose.h:
// numpy.allclose, |actual - expected| <= atol + rtol * |expected|; NaN equal to NaN
// only with equal_nan).
#pragma once

#include <string>
#include <vector>

#include "base/allclose.h"
#include "base/status.h"
#include "host_client/client/npy.h"

namespace remex::compare {

// Checks rtol and atol: finite and >= 0. INVALID_ARGUMENT naming them otherwise.
Status CheckTolerances(double rtol, double atol);

struct ArrayComparison : AllcloseStats {
  bool comparable = false;  // same dtype and shape, valid tolerances
  bool ok = false;          // comparable and every element matches
  std::string reason;       // why not ok: the dtypes, the shapes, or "N of M values differ"
};

// Compares arrays of one dtype and shape element by element (float16, float32,
// float64, integers and bool as doubles; integers exactly). Arrays whose dtypes or
// shapes differ, or bad tolerances, are not comparable (the reason says why).
ArrayComparison CompareArrays(const npy::Array& expected, const npy::Array& actual, double rtol, double atol,
                              bool equal_nan = false);

// One compared pair of files.
struct FileComparison {
  std::string name;      // the expected file's name
  std::string expected;  // paths
  std::string actual;
  bool missing = false;  // the actual file does not exist: a mismatch
  AllcloseStats stats;
  bool match() const { return !missing && stats.mismatches == 0; }
};

struct PathComparison {
  std::vector<FileComparison> files;
  bool match() const;
};

// Compares two .npy files, or every EXPECTED/NAME.npy with ACTUAL/NAME.npy (a file
// missing from ACTUAL is a mismatch). NOT_FOUND when EXPECTED does not exist or holds
// no .npy file; npy::Read's errors; INVALID_ARGUMENT for bad tolerances or a pair of
// arrays whose dtypes or shapes differ (naming the file).
StatusOr<PathComparison> ComparePaths(const std::string& expected, const std::string& actual, double rtol,
                                      double atol, bool equal_nan = false);

}  // namespace remex::compare
