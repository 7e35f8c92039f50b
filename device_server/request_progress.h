// How far a session's long request has got (benchmark samples, loadTest queries,
// profile runs), written by the device thread as it goes and read by the progress
// request of another connection (Session::Progress) on an I/O thread: atomics only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace remex::server {

struct RequestProgress {
  enum Kind : uint8_t { kNone = 0, kBenchmark = 1, kLoadTest = 2, kProfile = 3 };

  std::atomic<uint8_t> kind{kNone};
  std::atomic<uint64_t> done{0};       // samples, queries completed, runs
  std::atomic<uint64_t> total{0};      // what the request asked for; 0: not known ahead
  std::atomic<int64_t> started_ns{0};  // steady clock, when the request began

  // A request of `kind` starts, asking for `total` units (0: not known).
  void Start(Kind k, uint64_t n) {
    done.store(0, std::memory_order_relaxed);
    total.store(n, std::memory_order_relaxed);
    started_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    kind.store(k, std::memory_order_release);
  }
  void Stop() { kind.store(kNone, std::memory_order_release); }

  // "benchmark", "loadTest", "profile", or "" when none runs (the request kinds' names).
  static const char* Name(uint8_t k) {
    switch (k) {
      case kBenchmark:
        return "benchmark";
      case kLoadTest:
        return "loadTest";
      case kProfile:
        return "profile";
      default:
        return "";
    }
  }
};

}  // namespace remex::server
