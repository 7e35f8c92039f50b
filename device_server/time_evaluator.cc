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
  // Named by the clients' flags (remex bench --repeat, ...), which the Python client
  // turns into its keyword arguments.
  auto range = [](const char* flag, uint64_t v, uint64_t lo, uint64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string("benchmark: ") + flag + " must be in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got " + std::to_string(v));
    }
    return OkStatus();
  };
  REMEX_RETURN_IF_ERROR(range("--repeat", o.repeat, 1, kMaxRepeat));
  REMEX_RETURN_IF_ERROR(range("--number", o.number, 1, kMaxNumber));
  REMEX_RETURN_IF_ERROR(range("--warmup", o.warmup, 0, kMaxWarmup));
  REMEX_RETURN_IF_ERROR(range("--min-repeat-ms", o.min_repeat_ms, 0, kMaxRepeatMs));
  REMEX_RETURN_IF_ERROR(range("--cooldown-ms", o.cooldown_ms, 0, kMaxRepeatMs));
  REMEX_RETURN_IF_ERROR(range("--l2-flush-bytes", o.l2_flush_bytes, 0, kMaxL2FlushBytes));
  uint64_t floor_ms = uint64_t{o.repeat} * (uint64_t{o.min_repeat_ms} + o.cooldown_ms);
  if (floor_ms > static_cast<uint64_t>(time_limit.count())) {
    return InvalidArgument("benchmark: --repeat x (--min-repeat-ms + --cooldown-ms) is " +
                           std::to_string(floor_ms) + " ms, over the server's limit of " +
                           LimitText(time_limit) + " (remex-server --benchmark-time-limit-s)");
  }
  return OkStatus();
}

std::string LimitText(std::chrono::milliseconds limit) {
  const long long ms = static_cast<long long>(limit.count());
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

StatusOr<TimeEvaluatorResult> RunTimeEvaluator(const std::function<Status()>& call, vm::Allocator& allocator,
                                               const TimeEvaluatorOptions& o,
                                               std::chrono::milliseconds time_limit,
                                               const std::atomic<bool>* cancelled,
                                               std::atomic<uint64_t>* samples_done) {
  REMEX_RETURN_IF_ERROR(ValidateTimeEvaluatorOptions(o, time_limit));
  vm::Device& device = allocator.device();
  const auto started = Clock::now();
  const auto deadline = started + time_limit;
  const std::string limit_text =
      "the server's limit of " + LimitText(time_limit) + " (remex-server --benchmark-time-limit-s)";
  // What to lower: --number, unless min_repeat_ms sets it.
  const char* lower =
      o.min_repeat_ms > 0 ? "lower --repeat or --min-repeat-ms" : "lower --repeat or --number";
  TimeEvaluatorResult result;
  auto is_cancelled = [&] { return cancelled != nullptr && cancelled->load(std::memory_order_acquire); };
  // A cancelled run ends with the samples so far; `why` is the CANCELLED status.
  auto stop = [&](Status why) {
    result.cancelled = true;
    result.cancel_status = std::move(why);
  };
  // The device's own timer where it has one (CUDA events), else the steady clock.
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<vm::DeviceTimer> timer, device.CreateTimer());
  // With `timer`, it is started before the first call and stopped after the last,
  // on the device's queue. OK with result.cancelled set when cancelled on the way.
  auto run = [&](uint64_t n, uint64_t first, vm::DeviceTimer* timer) -> Status {
    if (timer) REMEX_RETURN_IF_ERROR(timer->Start());
    for (uint64_t i = 0; i < n; ++i) {
      if (is_cancelled()) {
        stop(Cancelled("benchmark: cancelled before call " + std::to_string(first + i)));
        return OkStatus();
      }
      // Checked before every call, so no warmup or sample outlives the limit by more
      // than one call.
      if (Clock::now() > deadline) {
        return DeadlineExceeded("benchmark: the run reached " + limit_text + " at call " +
                                std::to_string(first + i) + ", with " +
                                std::to_string(result.samples_seconds.size()) + " of " +
                                std::to_string(o.repeat) + " samples taken; " + lower);
      }
      Status st = call();
      if (st.code() == StatusCode::kCancelled) {
        stop(std::move(st));
        return OkStatus();
      }
      if (!st.ok()) return st.WithContext("benchmark: call " + std::to_string(first + i));
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

  // Warm per-call times, seconds: warmup calls after the first, and the samples kept.
  // Their median foresees the run once there are three: neither a cold first call, nor
  // the fixed costs of samples too short for min_repeat_ms, nor one preempted call or
  // sample condemns a long run. Until then only the deadline holds.
  std::vector<double> per_call_seen;
  auto seen = [&](double per_call) {
    // Bounded memory for a long run: the median of the last ones is as good.
    if (per_call_seen.size() >= 1024) per_call_seen.erase(per_call_seen.begin(), per_call_seen.begin() + 512);
    per_call_seen.push_back(per_call);
  };
  auto per_call_estimate = [&]() -> double {
    if (per_call_seen.size() < 3) return 0;
    std::vector<double> v = per_call_seen;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };

  uint64_t calls = 0;
  // `n` calls timed as a sample is (the device's timer, else the steady clock around
  // the calls and a synchronize): seconds in all; 0 when cancelled on the way.
  auto timed = [&](uint64_t n) -> StatusOr<double> {
    auto start = Clock::now();
    REMEX_RETURN_IF_ERROR(run(n, calls, timer.get()));
    if (result.cancelled) {
      if (timer) (void)timer->Stop();  // what was cut short is not kept
      return 0.0;
    }
    calls += n;
    if (timer) return timer->ElapsedSeconds();
    return Seconds(Clock::now() - start);
  };
  if (o.warmup > 0) {
    // The first call untimed, then the rest in up to three blocks timed as samples are
    // (one synchronize a block, so a short call's time is not the synchronize's): three
    // warm per-call times when the warmup has four calls or more.
    REMEX_RETURN_IF_ERROR(run(1, calls, nullptr));
    calls += 1;
    const uint64_t warm = o.warmup - 1;
    const uint64_t blocks = std::min<uint64_t>(3, warm);
    for (uint64_t b = 0; b < blocks && !result.cancelled; ++b) {
      const uint64_t n = warm / blocks + (b < warm % blocks ? 1 : 0);
      REMEX_ASSIGN_OR_RETURN(const double elapsed, timed(n));
      if (!result.cancelled) seen(elapsed / static_cast<double>(n));
    }
  }

  result.timer = timer ? timer->name() : "steady_clock";
  uint64_t number = o.number;
  const double min_seconds = o.min_repeat_ms / 1000.0;
  for (uint32_t r = 0; r < o.repeat && !result.cancelled; ++r) {
    if (r > 0 && o.cooldown_ms > 0) {
      // Slept in slices, so that a cancel is seen within one.
      const auto until = Clock::now() + std::chrono::milliseconds(o.cooldown_ms);
      while (!is_cancelled() && Clock::now() < until) {
        std::this_thread::sleep_for(
            std::min<Clock::duration>(std::chrono::milliseconds(10), until - Clock::now()));
      }
      if (is_cancelled()) {
        stop(Cancelled("benchmark: cancelled before sample " + std::to_string(r)));
        break;
      }
    }
    for (;;) {
      // Foreseen from the warm calls; the deadline itself holds in any case.
      const double mean_call = per_call_estimate();
      if (mean_call > 0) {
        const double elapsed = Seconds(Clock::now() - started);
        const uint32_t left = o.repeat - r;
        const double needed =
            mean_call * static_cast<double>(number) * left + (left - 1) * (o.cooldown_ms / 1e3);
        if (elapsed + needed > Seconds(time_limit)) {
          char what[256];
          std::snprintf(
              what, sizeof what,
              "benchmark: the run would take about %.1f s (%u samples of %llu call%s at a median of "
              "%.4g ms per call), over ",
              elapsed + needed, o.repeat, static_cast<unsigned long long>(number), number == 1 ? "" : "s",
              mean_call * 1e3);
          return DeadlineExceeded(what + limit_text + "; " + lower);
        }
      }
      REMEX_RETURN_IF_ERROR(flush_cache());
      REMEX_ASSIGN_OR_RETURN(const double elapsed, timed(number));
      if (result.cancelled) break;  // a sample cut short is not kept
      const double per_call = elapsed / static_cast<double>(number);
      if (elapsed >= min_seconds || number >= kMaxNumber) {
        seen(per_call);
        result.samples_seconds.push_back(per_call);
        if (samples_done != nullptr) samples_done->fetch_add(1, std::memory_order_relaxed);
        break;
      }
      // Too short: grow `number` toward min_repeat_ms and take the sample again.
      double scale = elapsed > 0 ? min_seconds / elapsed * 1.618 : 1000.0;
      scale = std::clamp(scale, 1.618, 1000.0);
      number = std::min<uint64_t>(kMaxNumber, static_cast<uint64_t>(std::ceil(static_cast<double>(number) * scale)));
    }
  }
  if (result.cancelled) (void)device.Synchronize();  // nothing of the run left queued
  result.number = static_cast<uint32_t>(number);
  return result;
}

}  // namespace remex::server
