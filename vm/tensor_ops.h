// Checks on tensors that stay on the device: summary statistics and an elementwise
// comparison, so that only a few numbers cross the wire (tensorStats, tensorCompare);
// and tensors made on the device from a seed, so that no bytes cross it (tensorAlloc's
// fill).
//
// Both read the tensors' device memory where they are: in place on a host-addressable
// device (DeviceCapabilities::host_addressable: the CPU device), after its Synchronize;
// on any other device the tensor is copied to the host first (TODO(perf): device
// kernels). Run them on the device's thread, like any other device work.
#pragma once

#include <cstdint>
#include <functional>

#include "base/allclose.h"
#include "base/status.h"
#include "base/tensor_fill.h"
#include "vm/device/allocator.h"

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

// Result of comparing `a` with the reference `b` elementwise by the rule of
// base/allclose.h (numpy.isclose, equal_nan = false), which `remex compare` applies on
// the host too: count, mismatches, max_abs_error, max_rel_error, first_mismatch.
using Comparison = AllcloseStats;

// Of a dense tensor or a view (Tensor::physical). INVALID_ARGUMENT for a dtype without
// numbers (undefined); errors of the device copy.
StatusOr<TensorStats> ComputeStats(Device& device, const Tensor& tensor);

// Of dense tensors or views. INVALID_ARGUMENT when the dtypes or shapes differ, or
// rtol / atol is negative or not finite.
StatusOr<Comparison> CompareTensors(Device& device, const Tensor& a, const Tensor& b, double rtol, double atol,
                                     bool equal_nan = false);

// INVALID_ARGUMENT, before anything is written, when `fill` (its bounds resolved:
// ResolveFillBounds) does not suit `dtype`: a dtype without numbers; low >= high or a
// bound not finite; for an integer dtype or bool, a range that leaves the dtype's
// values; kNormal on a non-floating dtype; mean not finite or scale negative or not
// finite.
Status CheckFill(DType dtype, const TensorFill& fill);

// Writes `fill` into `tensor` in blocks of at most 1 MiB (in place on a host-addressable
// device, after its Synchronize, else through a host block and CopyToDevice), calling `yield` (when set) after each
// block so that other device work can run between them. CheckFill's errors; errors of
// the device copy.
Status FillTensor(Device& device, Tensor& tensor, const TensorFill& fill,
                  const std::function<void()>& yield = {});

}  // namespace remex::vm
