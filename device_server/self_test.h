// The device self-test (docs/farm.md, "Health"): a small known model run through the
// server's own device and through the CPU device, its outputs compared, and its latency
// on the device measured. A farm server runs it at start, after every device reset and
// periodically; a device that fails it, or whose latency drifts beyond its history, is
// quarantined.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"
#include "vm/device/allocator.h"

namespace remex::server {

// The runs of one self-test on the device: the first `kSelfTestWarmupRuns` untimed,
// then `kSelfTestTimedRuns` timed.
inline constexpr int kSelfTestWarmupRuns = 5;
inline constexpr int kSelfTestTimedRuns = 20;

// What one self-test found.
struct SelfTestResult {
  // OK; FAILED_PRECONDITION "self-test: ..." naming the largest error and where when
  // the device's result differs from the CPU's; or the run's own error.
  Status status;
  // The timed runs' latencies, ms, in run order: each the host's wall time (steady
  // clock) of one invoke of the model on the device up to the device's synchronize, its
  // input already there. kSelfTestTimedRuns of them; empty when the model could not run.
  std::vector<double> samples_ms;
};

// A fixed description of the self-test: the model (ops, shapes, seeds), the comparison
// and the runs timed. It changes whenever the test does, so its content hash names the
// test in the results store (a self-test's model_hash) and keeps the latencies of
// different tests apart.
std::string SelfTestDescription();

// y = Softmax(Relu(x W + b)) with x [8, 32], W [32, 16] and b [16] filled from a fixed
// seed (MatMul, Add, Relu and Softmax-13 over the last axis), run on `device` (its
// `allocator` and `registry`) kSelfTestWarmupRuns + kSelfTestTimedRuns times, the
// timed runs measured; the last run's output compared elementwise with that of a CPU
// device of this process (|a - b| <= 1e-5 + 1e-4 |b|: the float32 tolerance of the
// real-model tests). `corrupt` (test only) perturbs one element of the device's result
// before the comparison, as a device that computes wrongly would. Runs on the device's
// worker thread (it calls the device directly).
SelfTestResult RunSelfTest(vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator,
                           const kernels::KernelRegistry& registry, bool corrupt = false);

}  // namespace remex::server
