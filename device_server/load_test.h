// The load generator behind the `loadTest` request: MLPerf LoadGen's scenarios
// (SingleStream, MultiStream, Server, Offline; see rpc/remex.capnp LoadTest and the
// LoadGen rules, "Scenarios") generated on the device, next to the hardware, so the
// network cannot shape the load.
//
// The run drives `lanes`: instances of one module, each running one sample (one call)
// at a time. Every sample runs as a fiber (base/fiber.h) whose VM yields after each
// kernel (its RunControl::yield is Fiber::Suspend), and the generator resumes the busy
// lanes in turn: the lanes' kernels interleave on the calling thread, which is the
// only one that launches kernels meanwhile (on the CPU device each kernel has the whole
// compute team: no oversubscription; on a GPU the caller gives each lane a CUDA stream
// of its own, and a lane whose call is queued polls its stream and yields, so the
// lanes' kernels run concurrently on the device). Between steps the generator admits the queries
// due (server: Poisson arrivals from a seeded std::mt19937_64), starts queued samples
// on idle lanes and, when every lane is idle and nothing is due, sleeps until the next
// arrival.
//
// Must be called from a thread that is not running a fiber (it resumes fibers).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "rpc/load_scenario.h"
#include "vm/vm.h"

namespace remex::server {

using remex::LoadScenario;  // and remex::LoadScenarioName (rpc/load_scenario.h)

struct LoadTestOptions {
  LoadScenario scenario = LoadScenario::kSingleStream;
  uint32_t concurrency = 1;        // lanes used
  uint32_t samples_per_query = 1;  // multi-stream
  double target_qps = 0;           // server
  uint64_t min_queries = 0;
  uint32_t min_duration_ms = 0;
  uint64_t seed = 0;
  // Offline issues its queries at once and must size them up front: from this
  // estimate of one sample's time in seconds (measured by the warmup), enough for
  // min_duration_ms across the lanes, and at least min_queries.
  double seconds_per_sample = 0;
  // Samples (by global sample index, in issue order) whose `audit` is called when they
  // complete: the audit's seeded choice. The run issues at least up to the last of them
  // (a floor beside min_queries), within the time limit.
  std::vector<uint64_t> audited_samples;
  // When set, counts the queries completed as they complete (the session's progress;
  // read from another thread). Not owned.
  std::atomic<uint64_t>* completed_queries = nullptr;
};

inline constexpr uint32_t kMaxLoadConcurrency = 64;
inline constexpr uint32_t kMaxSamplesPerQuery = 1024;
inline constexpr uint32_t kMaxLoadWarmup = 10000;
inline constexpr uint32_t kMaxAuditSamples = 1000;
inline constexpr double kMaxTargetQps = 1e6;

// One instance of the module.
struct LoadLane {
  // Runs one sample to its end, on the device (on a GPU: until its stream is idle).
  // Called inside a fiber; it must yield only through `control->yield`.
  std::function<Status()> run;
  // Called right after sample `sample` completed on this lane, when it is audited
  // (outside the sample's latency): checks its outputs (the audit).
  std::function<Status(uint64_t sample)> audit;
  // The lane's run control (owned by the caller): the generator sets its deadline and
  // yield, and cancels it at the limit.
  vm::RunControl* control = nullptr;
};

struct LoadTestResult {
  std::vector<uint64_t> issue_nanos;    // per query: (scheduled) issue since the start
  std::vector<uint64_t> latency_nanos;  // per query; 0 when dropped
  uint64_t completed = 0;
  uint64_t late = 0;
  uint64_t dropped = 0;
  uint64_t samples = 0;  // samples that completed
  uint64_t duration_nanos = 0;
};

// INVALID_ARGUMENT naming the field for an option out of range (concurrency 1..64,
// samples_per_query 1..1024 and 1 outside multi-stream, target_qps in (0, 1e6] for
// server and 0 otherwise, min_queries <= 1e6, min_duration_ms within `time_limit`).
Status ValidateLoadTestOptions(const LoadTestOptions& options, std::chrono::milliseconds time_limit);

// Runs the scenario on lanes[0 .. concurrency). The run issues queries until both
// min_queries and the last audited sample are issued and min_duration_ms has passed
// (offline: its sized batch, which covers the audited samples),
// then waits for the issued queries. Samples still queued or running at `time_limit`
// (counted from the call) are stopped and their queries counted as dropped. Errors: the
// first error of a sample (other than the generator's own stop), an `audit` error;
// `session` (the requesting session's control: cancel, shutdown) stops the run with
// its error.
StatusOr<LoadTestResult> RunLoadTest(std::vector<LoadLane>& lanes, const LoadTestOptions& options,
                                     std::chrono::milliseconds time_limit, const vm::RunControl& session);

}  // namespace remex::server
