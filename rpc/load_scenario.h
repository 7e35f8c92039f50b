// The load scenarios of the `loadTest` request (rpc/remex.capnp LoadTest, protocol
// 1.4), after MLPerf LoadGen's ("Scenarios" in its rules): their names as the CLI, the
// reports and the server's errors spell them, and the rules both generators follow (the
// server's, device_server/load_test.h, and the client's --from-client,
// host_client/tooling/load.cc): offline's size and server's arrivals. Plain C++.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>

namespace remex {

enum class LoadScenario { kSingleStream, kMultiStream, kServer, kOffline };

inline constexpr LoadScenario kLoadScenarios[] = {LoadScenario::kSingleStream, LoadScenario::kMultiStream,
                                                  LoadScenario::kServer, LoadScenario::kOffline};

// "single-stream", "multi-stream", "server", "offline".
constexpr const char* LoadScenarioName(LoadScenario s) {
  switch (s) {
    case LoadScenario::kSingleStream: return "single-stream";
    case LoadScenario::kMultiStream: return "multi-stream";
    case LoadScenario::kServer: return "server";
    case LoadScenario::kOffline: return "offline";
  }
  return "unknown";
}

// The most queries one run issues (the server's load generator and --from-client).
inline constexpr uint64_t kMaxLoadQueries = 1000000;

// Offline issues its queries at once and must size them up front: enough to keep
// `lanes` instances busy for `min_duration_ms` at `seconds_per_sample` each (the
// warmup's estimate; 0: unknown), and at least `min_queries`; 1..kMaxLoadQueries.
inline uint64_t OfflineQueryCount(uint64_t min_queries, uint32_t min_duration_ms, double seconds_per_sample,
                                  uint32_t lanes) {
  double sized = 0;
  if (seconds_per_sample > 0) {
    sized = std::ceil(min_duration_ms / 1000.0 / seconds_per_sample * static_cast<double>(lanes));
  }
  const uint64_t n = std::max<uint64_t>(min_queries, static_cast<uint64_t>(std::min(sized, 1e7)));
  return std::clamp<uint64_t>(n, 1, kMaxLoadQueries);
}

// The server scenario's arrivals: a Poisson process at `qps` queries per second (> 0),
// its exponential gaps drawn from std::mt19937_64 seeded with `seed`, so that one seed
// gives one schedule (MLPerf LoadGen's Server scenario).
class PoissonArrivals {
 public:
  PoissonArrivals(double qps, uint64_t seed) : rng_(seed), gap_(qps > 0 ? qps : 1.0) {}
  // The time to the next arrival.
  std::chrono::steady_clock::duration NextGap() {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(gap_(rng_)));
  }

 private:
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
};

}  // namespace remex
