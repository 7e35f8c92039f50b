// `remex bench --scenario`: load scenarios run on the server (rpc/remex.capnp LoadTest),
// concurrency sweeps and the search for the peak Server QPS, as reports (rendered by
// report_json.h and the CLI). The scenarios and their metrics are MLPerf LoadGen's
// (SingleStream, MultiStream, Server, Offline; "FindPeakPerformance" for the peak); the
// sweep is a concurrency sweep of closed-loop streams, as perf_analyzer's
// --concurrency-range.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/client/npy.h"
#include "host_client/tooling/bench_stats.h"

namespace remex::tooling {

// What a client needs to drive a model from this host: the module (by content hash,
// from the server's module cache, else uploaded) and the inputs (uploaded once per
// session).
struct ClientModel {
  std::span<const std::byte> executable;
  std::string name;
  std::string function;
  std::vector<npy::Array> inputs;  // in signature order
};

struct LoadOptions {
  client::LoadScenario scenario = client::LoadScenario::kSingleStream;
  // One level per entry (--concurrency A:B:STEP): instances of the module on the server.
  std::vector<uint32_t> concurrency = {1};
  uint32_t samples_per_query = 1;  // multi-stream (default: 8, LoadGen's)
  double target_qps = 0;           // server: arrival rate (queries/s)
  double latency_bound_ms = 0;     // server: the p99 bound (0: none; needed by find_peak)
  bool find_peak = false;          // server: the highest QPS whose p99 stays under the bound
  uint32_t min_queries = 0;        // per level (and per probe)
  double min_duration_s = 1;       // per level (and per probe)
  uint32_t warmup = 1;             // untimed calls per instance
  uint64_t seed = 0;               // the server's arrival generator and the audit's choice
  uint32_t audit_samples = 32;     // timed samples the audit checks; 0: no audit
  double audit_rtol = 0, audit_atol = 0;
  // Statistics: confidence of the percentile intervals, and stability over windows
  // (bench_stats.h): a level whose last 3 windows are not stable is run again, up to
  // max_trials runs in all.
  double confidence = 0.95;
  double window_ms = 250;
  double stable_threshold = 0.10;
  double stable_percentile = 90;
  uint32_t max_trials = 3;
  // --from-client: the same scenario driven from this host over the wire
  // (RunLoadFromClient), on `client` (not owned; set by BenchModel, which has the
  // executable and the inputs).
  bool from_client = false;
  const ClientModel* client = nullptr;
};

// A scenario by its name (LoadScenarioName, rpc/load_scenario.h); INVALID_ARGUMENT
// listing the names.
StatusOr<client::LoadScenario> ParseLoadScenario(const std::string& name);
// "A", "A:B" or "A:B:STEP" (1 <= A <= B <= 64, STEP >= 1) as the levels; errors name
// --concurrency.
StatusOr<std::vector<uint32_t>> ParseConcurrencyRange(const std::string& spec);

// The user's load choices as given (remex bench's flags, the shell's bench, the Python
// client's Model.benchmark keywords), before the defaults that depend on the scenario.
struct LoadSpec {
  std::string scenario;     // --scenario; empty: no load scenario (the time evaluator)
  std::string concurrency;  // --concurrency "A[:B[:STEP]]"; empty: not given
  std::optional<uint32_t> samples_per_query;  // --samples-per-query; not given: 8 multi-stream, else 1
  double target_qps = 0;                      // --target-qps
  double latency_bound_ms = 0;                // --latency-bound-ms
  bool find_peak = false;                     // --find-peak
  std::optional<bool> audit;                  // --audit / --no-audit; not given: on for server and offline
  uint32_t audit_samples = 32;                // --audit-samples
  double audit_rtol = 0, audit_atol = 0;      // --audit-rtol, --audit-atol
  uint64_t seed = 0;                          // --seed
  bool from_client = false;                   // --from-client
};

// The LoadOptions of `spec` (none without a scenario) with the scenario's defaults:
// multi-stream takes 8 samples per query and, without --concurrency, one instance per
// sample (at most 64); the audit is on for server and offline unless turned off. The
// statistics fields (min_duration_s, confidence, ...) keep LoadOptions' defaults: BenchVm
// sets them from BenchOptions. INVALID_ARGUMENT naming the flag for a load flag without
// --scenario, an unknown scenario, a bad --concurrency, or settings CheckLoadOptions
// refuses.
StatusOr<std::optional<LoadOptions>> MakeLoadOptions(const LoadSpec& spec);

struct LoadAudit {
  uint32_t checked = 0, mismatches = 0;
  std::string first_mismatch;
  bool passed() const { return mismatches == 0; }
};

// One run of the scenario at one concurrency (or one target QPS).
struct LoadLevel {
  uint32_t concurrency = 1;
  double target_qps = 0;
  uint64_t queries = 0, completed = 0, late = 0, dropped = 0, samples = 0;
  double duration_s = 0;
  double throughput_qps = 0;  // completed queries / duration
  double samples_per_s = 0;   // completed samples / duration
  bench::SampleStats latency;  // ms, of the completed queries
  std::vector<bench::PercentileEstimate> percentiles;  // p50, p90, p99 (ms), with intervals
  uint32_t trials = 1;
  bench::WindowStability stability;
  double window_s = 0;  // the window judged: window_ms, widened to the longest latency
  std::vector<bench::WindowSummary> windows;
  bool bound_met = true;  // p99 <= latency_bound_ms (true without a bound)
  LoadAudit audit;
  std::vector<double> issue_s, latency_ms;  // per query (latency 0: dropped)
  client::RunPhases phases;
  client::MemoryUse memory;
  double load_average_1m = -1;  // the server host's after the level; -1 unknown
};

struct PeakProbe {
  double target_qps = 0, throughput_qps = 0, p99_ms = 0;
  uint64_t dropped = 0;
  bool valid = false;  // p99 <= the bound and nothing dropped
};

struct LoadRun {
  LoadOptions options;
  std::vector<LoadLevel> levels;
  // find_peak: the probes in order and the highest valid target QPS (0: none valid).
  std::vector<PeakProbe> probes;
  std::optional<double> peak_qps;
  // The run stopped before its last level or probe: interrupted (a signal noticed
  // between levels, or the level's request cancelled on the server) or cancelled on the
  // server by another client. `levels` and `probes` are those completed before; the
  // level cut short is dropped, since its queries so far are no complete level, and
  // peak_qps is the highest valid rate among the probes run. False for a complete run.
  bool stopped = false;
};

// INVALID_ARGUMENT naming the flag for settings that contradict (a target QPS outside
// server, find_peak without a bound, samples per query outside multi-stream, ...).
Status CheckLoadOptions(const LoadOptions& options);

// Runs the levels (or the peak search) on `vm`'s bound inputs. The session's errors;
// an audit mismatch is in the report (LoadAudit), not an error. `interrupt` (not owned,
// may be null; BenchOptions::interrupt) is read before each level's request: once it
// is set, no further level runs. A level whose request ends CANCELLED (the signal's
// cancel, or another client's) stops the run: the levels completed before it are
// returned with LoadRun::stopped, and CANCELLED is returned when none completed.
StatusOr<LoadRun> RunLoad(client::Session& session, uint64_t vm, const std::string& function,
                          const LoadOptions& options, const std::atomic<int>* interrupt = nullptr);

// --from-client: the levels (or the peak search) driven from this host: one session per
// instance (ConnectAnother of `session`), each with the module, a VM and its inputs, and
// a thread that sends invoke requests (outputs freed after each, outside its latency).
// Latency runs from the query's issue (server: its scheduled arrival) to the invoke's
// reply, on this host's steady clock: what the network and the protocol add is in it.
// No audit (the outputs stay on the server; the server scenarios audit). The sessions'
// and the connections' errors. `interrupt` as for RunLoad, also read while a level
// runs: the level stops issuing queries, waits for the calls in flight (one per
// instance) and is dropped.
StatusOr<LoadRun> RunLoadFromClient(client::Session& session, const ClientModel& model,
                                    const LoadOptions& options, const std::atomic<int>* interrupt = nullptr);

}  // namespace remex::tooling
