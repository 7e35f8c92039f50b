// Checks on tensors that stay on the device: summary statistics and an elementwise
// comparison, so that only a few numbers cross the wire (tensorStats, tensorCompare).
//
// Both read the tensors' device memory where they are: on the CPU device in place;
// on any other device the tensor is copied to the host first (TODO(perf): device
// kernels). Run them on the device's thread, like any other device work.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "vm/device.h"

namespace remex::vm {

// Statistics of a tensor's elements, in float64. min, max, mean and std (population,
// ddof = 0) are over the finite elements only; NaN and +-Inf are counted instead. With
// no finite element (or no element) they are NaN. bool counts as 0/1; integers are
// converted to float64 (exact below 2^53).
struct TensorStats {
  uint64_t count = 0;
  double min = 0, max = 0, mean = 0, std = 0;
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;
};

// Result of comparing `a` with the reference `b` elementwise as numpy.isclose does
// (equal_nan = false): a[i] matches when |a[i] - b[i]| <= atol + rtol * |b[i]|; NaN
// never matches; infinities match only an infinity of the same sign.
// max_abs_error and max_rel_error (|a - b| / |b|; +Inf where b is 0 and a is not) are
// over the pairs where both values are finite.
struct Comparison {
  uint64_t count = 0;
  uint64_t mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t first_mismatch = -1;  // flat row-major index; -1 when every element matches
};

// INVALID_ARGUMENT for a dtype without numbers (undefined); errors of the device copy.
StatusOr<TensorStats> ComputeStats(Device& device, const Tensor& tensor);

// INVALID_ARGUMENT when the dtypes or shapes differ, or rtol / atol is negative or not
// finite.
StatusOr<Comparison> CompareTensors(Device& device, const Tensor& a, const Tensor& b, double rtol, double atol);

}  // namespace remex::vm
