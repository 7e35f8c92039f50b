#include "device_server/time_evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

namespace remex::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Status ValidateTimeEvaluatorOptions(const TimeEvaluatorOptions& o, std::chrono::milliseconds time_limit) {
  auto range = [](const char* name, uint64_t v, uint64_t lo, uint64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string("benchmark: ") + name + " must be in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got " + std::to_string(v));
    }
    return OkStatus();
  };
  REMEX_RETURN_IF_ERROR(range("repeat", o.repeat, 1, kMaxRepeat));
  REMEX_RETURN_IF_ERROR(range("number", o.number, 1, kMaxNumber));
  REMEX_RETURN_IF_ERROR(range("warmup", o.warmup, 0, kMaxWarmup));
  REMEX_RETURN_IF_ERROR(range("minRepeatMs", o.min_repeat_ms, 0, kMaxRepeatMs));
  REMEX_RETURN_IF_ERROR(range("cooldownMs", o.cooldown_ms, 0, kMaxRepeatMs));
  REMEX_RETURN_IF_ERROR(range("l2FlushBytes", o.l2_flush_bytes, 0, kMaxL2FlushBytes));
  uint64_t floor_ms = uint64_t{o.repeat} * (uint64_t{o.min_repeat_ms} + o.cooldown_ms);
  if (floor_ms > static_cast<uint64_t>(time_limit.count())) {
    return InvalidArgument("benchmark: repeat x (minRepeatMs + cooldownMs) is " + std::to_string(floor_ms) +
                           " ms, over the server's limit of " + std::to_string(time_limit.count()) + " ms");
  }
  return OkStatus();
}

StatusOr<TimeEvaluatorResult> RunTimeEvaluator(const std::function<Status()>& call, vm::Allocator& allocator,
                                               const TimeEvaluatorOptions& o,
                                               std::chrono::milliseconds time_limit) {
  REMEX_RETURN_IF_ERROR(ValidateTimeEvaluatorOptions(o, time_limit));
  vm::Device& device = allocator.device();
  const auto deadline = Clock::now() + time_limit;
  auto over_time = [&](const std::string& when) {
    return DeadlineExceeded("benchmark: " + when + " would exceed the server's limit of " +
                            std::to_string(time_limit.count()) + " ms");
  };
  // The device's own timer where it has one (CUDA events), else the steady clock.
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<vm::DeviceTimer> timer, device.CreateTimer());
  // With `timer`, it is started before the first call and stopped after the last,
  // on the device's queue.
  auto run = [&](uint64_t n, uint64_t first, vm::DeviceTimer* timer) -> Status {
    if (timer) REMEX_RETURN_IF_ERROR(timer->Start());
    for (uint64_t i = 0; i < n; ++i) {
      // Checked before every call, so no warmup or sample outlives the limit by more
      // than one call.
      if (Clock::now() > deadline) return over_time("call " + std::to_string(first + i));
      Status st = call();
      if (!st.ok()) return st.WithContext("benchmark call " + std::to_string(first + i));
    }
    if (timer) REMEX_RETURN_IF_ERROR(timer->Stop());
    return device.Synchronize();
  };

  std::shared_ptr<vm::Buffer> flush;
  if (o.l2_flush_bytes > 0) {
    REMEX_ASSIGN_OR_RETURN(flush, allocator.Allocate(o.l2_flush_bytes));
  }
  uint8_t flush_value = 0;
  auto flush_cache = [&]() -> Status {
    if (!flush) return OkStatus();
    REMEX_RETURN_IF_ERROR(device.Memset(flush->data(), ++flush_value, o.l2_flush_bytes));
    return device.Synchronize();
  };

  uint64_t calls = 0;
  // The run's length is foreseen from the median time per call of the samples kept so
  // far, from the third on: neither a cold first call, nor the fixed costs of samples
  // too short for min_repeat_ms, nor one preempted sample condemns a long run. Until
  // then only the deadline holds.
  std::vector<double> per_call_seen;
  if (o.warmup > 0) {
    REMEX_RETURN_IF_ERROR(run(o.warmup, calls, nullptr));
    calls += o.warmup;
  }
  auto per_call_estimate = [&]() -> double {
    if (per_call_seen.size() < 3) return 0;
    std::vector<double> v = per_call_seen;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };

  TimeEvaluatorResult result;
  result.timer = timer ? timer->name() : "steady_clock";
  uint64_t number = o.number;
  const double min_seconds = o.min_repeat_ms / 1000.0;
  for (uint32_t r = 0; r < o.repeat; ++r) {
    if (r > 0 && o.cooldown_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.cooldown_ms));
    for (;;) {
      // Foreseen from the warmup, or from the first 3 samples on (a run without warmup
      // has a cold first call); the deadline itself holds in any case.
      const double mean_call = per_call_estimate();
      if (mean_call > 0) {
        const double remaining = Seconds(deadline - Clock::now());
        const double needed = mean_call * static_cast<double>(number) * (o.repeat - r);
        if (needed > remaining) {
          char what[256];
          std::snprintf(what, sizeof what,
                        "%u more samples of %llu calls at a median of %.4g ms per call (%.1f s) would outrun the "
                        "%.1f s left of the server's limit of %lld ms (remex-server --benchmark-time-limit-s); "
                        "lower --repeat or --number",
                        o.repeat - r, static_cast<unsigned long long>(number), mean_call * 1e3, needed, remaining,
                        static_cast<long long>(time_limit.count()));
          return DeadlineExceeded(std::string("benchmark: ") + what);
        }
      } else if (Clock::now() > deadline) {
        return over_time("sample " + std::to_string(r));
      }
      REMEX_RETURN_IF_ERROR(flush_cache());
      auto start = Clock::now();
      REMEX_RETURN_IF_ERROR(run(number, calls, timer.get()));
      double elapsed = Seconds(Clock::now() - start);
      if (timer) {
        REMEX_ASSIGN_OR_RETURN(elapsed, timer->ElapsedSeconds());
      }
      calls += number;
      const double per_call = elapsed / static_cast<double>(number);
      if (elapsed >= min_seconds || number >= kMaxNumber) {
        // Bounded memory for a long run: the median of the last samples is as good.
        if (per_call_seen.size() >= 1024) per_call_seen.erase(per_call_seen.begin(), per_call_seen.begin() + 512);
        per_call_seen.push_back(per_call);
        result.samples_seconds.push_back(per_call);
        break;
      }
      // Too short: grow `number` toward min_repeat_ms and take the sample again.
      double scale = elapsed > 0 ? min_seconds / elapsed * 1.618 : 1000.0;
      scale = std::clamp(scale, 1.618, 1000.0);
      number = std::min<uint64_t>(kMaxNumber, static_cast<uint64_t>(std::ceil(static_cast<double>(number) * scale)));
    }
  }
  result.number = static_cast<uint32_t>(number);
  return result;
}

}  // namespace remex::server
