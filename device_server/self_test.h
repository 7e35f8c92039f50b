// The device self-test (docs/farm.md, "Health"): a small known model run through the
// server's own device and through the CPU device, its outputs compared. A farm server
// runs it at start and after every device reset; a device that fails it is quarantined.
#pragma once

#include <memory>

#include "base/status.h"
#include "kernels/kernels.h"
#include "vm/device.h"

namespace remex::server {

// y = Softmax(Relu(x W + b)) with x [8, 32], W [32, 16] and b [16] filled from a fixed
// seed (MatMul, Add, Relu and Softmax-13 over the last axis), run on `device` (its
// `allocator` and `registry`) and on a CPU device of this process, compared elementwise
// (|a - b| <= 1e-5 + 1e-4 |b|: the float32 tolerance of the real-model tests).
// `corrupt` (test only) perturbs one element of the device's result before the
// comparison, as a device that computes wrongly would. OK, or FAILED_PRECONDITION
// "self-test: ..." naming the largest error and where, or the run's own error.
Status RunSelfTest(vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator,
                   const kernels::KernelRegistry& registry, bool corrupt = false);

}  // namespace remex::server
