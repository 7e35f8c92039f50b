// The time evaluator behind the `benchmark` request, as TVM's time_evaluator:
// `warmup` untimed calls, then `repeat` samples, each the mean time of `number` calls.
// With min_repeat_ms > 0, `number` grows (by the ratio still missing, times 1.618, at
// least x1.618, at most x1000 a step, up to kMaxNumber) until a sample takes at least
// that long; samples that were too short are discarded, and the grown `number` is kept
// for the following samples. `cooldown_ms` is slept between samples. With
// l2_flush_bytes > 0 a device buffer of that size is written before each sample, so
// that the calls do not find their data in the cache.
//
// Timing: the device's own timer where it has one (Device::CreateTimer; on a GPU,
// CUDA events recorded on the device's stream before the first and after the last of
// the `number` calls, result `timer` "cuda_event"), else a steady clock on the calling
// thread around the calls and a device Synchronize ("steady_clock", the CPU device).
// Runs on the device thread: it blocks other device work meanwhile.
//
// The run's length is foreseen from warm calls: the warmup calls after the first (the
// first call of a VM allocates its buffers), timed as samples are in up to three
// blocks, and the samples kept. Once
// three warm per-call times are known their median projects the rest of the run, and a
// run that would outlast the time limit is refused then, naming the projection, the
// limit and what to lower, instead of running up to the limit.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "vm/device/allocator.h"

namespace remex::server {

struct TimeEvaluatorOptions {
  uint32_t number = 1;
  uint32_t repeat = 1;
  uint32_t min_repeat_ms = 0;
  uint32_t warmup = 0;
  uint32_t cooldown_ms = 0;
  uint64_t l2_flush_bytes = 0;
};

struct TimeEvaluatorResult {
  uint32_t number = 0;                  // calls per sample, after adaptation
  std::vector<double> samples_seconds;  // mean seconds per call, one per sample
  std::string timer;                    // "steady_clock" or "cuda_event"
  // The run was cancelled (the `cancelled` flag, or a call that returned CANCELLED):
  // samples_seconds holds the samples completed before, fewer than `repeat`.
  bool cancelled = false;
  Status cancel_status;  // the CANCELLED status that stopped it, with its reason
};

inline constexpr uint32_t kMaxRepeat = 100000;
inline constexpr uint32_t kMaxNumber = 10000000;
inline constexpr uint32_t kMaxWarmup = 100000;
inline constexpr uint32_t kMaxRepeatMs = 60000;   // min_repeat_ms and cooldown_ms
inline constexpr uint64_t kMaxL2FlushBytes = uint64_t{1} << 30;

// INVALID_ARGUMENT naming the field when an option is out of range (repeat and number
// 1..kMax*, warmup <= kMaxWarmup, min_repeat_ms and cooldown_ms <= kMaxRepeatMs,
// l2_flush_bytes <= kMaxL2FlushBytes) or when the requested sleeps and minimum sample
// times alone exceed `time_limit`.
Status ValidateTimeEvaluatorOptions(const TimeEvaluatorOptions& options, std::chrono::milliseconds time_limit);

// Runs `call` as described above. `cancelled` (may be null), set from another thread,
// is read before every call and during cooldowns: the run then stops and returns the
// samples completed so far with `cancelled` set; a call that returns CANCELLED does the
// same. Errors (each message starting "benchmark: "): the first other error of `call`
// (with the call's position), RESOURCE_EXHAUSTED when the flush buffer cannot be
// allocated, DEADLINE_EXCEEDED when the run passes `time_limit` (checked before every
// call), or when the run would (foreseen before each sample from the median of three or
// more warm per-call times; the message names the projected time, the limit and the
// flags to lower).
// `samples_done` (may be null) counts the samples kept as they are taken, for another
// thread to read (the session's progress).
StatusOr<TimeEvaluatorResult> RunTimeEvaluator(const std::function<Status()>& call, vm::Allocator& allocator,
                                               const TimeEvaluatorOptions& options,
                                               std::chrono::milliseconds time_limit,
                                               const std::atomic<bool>* cancelled = nullptr,
                                               std::atomic<uint64_t>* samples_done = nullptr);

// "600 s" for a whole number of seconds, else "1500 ms": a time limit as messages give it.
std::string LimitText(std::chrono::milliseconds limit);

}  // namespace remex::server
