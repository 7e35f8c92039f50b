// remex run, bench and check as functions over a prepared model (prepare.h): each
// returns a structured report that a front end renders (report_json.h for JSON).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/allclose.h"
#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/tooling/load.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/profile.h"
#include "host_client/tooling/specs.h"

namespace remex::tooling {

// ---- run ----------------------------------------------------------------------------

struct RunOptions {
  FetchSpec fetch;          // outputs to download
  std::string output_dir;   // write each fetched output as DIR/NAME.npy; empty: none
  bool save_inputs = false; // also DIR/inputs/NAME.npy
};

struct RunOutput {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  bool fetched = false;
  std::string file;     // where it was written, if it was
  std::string summary;  // float32 fetched: values when <= 16, else min/max/mean
};

struct RunReport {
  SessionReport session;
  std::vector<RunOutput> outputs;
  std::string function;          // the function that served the call (a bucket, ...)
  client::DeviceCopies copies;   // device<->host transfers of the call
  uint64_t allocations = 0;      // buffers the VM allocated in the call
  bool graph = false;            // the call launched a device graph (--cuda-graphs)
  double run_ms = 0, server_run_ms = 0, fetch_ms = 0;
};

// Invokes the model's main function once and downloads what `options.fetch` names.
// INVALID_ARGUMENT for a --fetch name that is no output (listing them); the session's
// and the file system's errors. Outputs not fetched are freed with the session's
// other handles: nothing is left on the server.
StatusOr<RunReport> RunModel(const ModelRequest& request, PreparedModel& prepared, const RunOptions& options);

// ---- bench --------------------------------------------------------------------------

// How `remex bench` (and the shell's bench, and Python's Model.benchmark) times a model.
// The first `benchmark` request takes `timing` as given; a run that is not yet valid is
// then extended with more requests (warmup 0, the number of calls per sample the server
// settled on, repeat sized to what is missing), at most `max_trials` requests in all:
//   - shorter than min_duration_s, or fewer samples than min_samples (MLPerf LoadGen's
//     minimum duration and query count of a valid run);
//   - not stable over the last `stable_window` measurement windows of window_ms
//     (Triton perf_analyzer's rule: throughput and the stable_percentile latency of each
//     window within +-stable_threshold of their mean).
// The run's time line is the samples' own: sample k ends at the sum of sample x number
// (+ cooldown) over the samples before it and itself, so time on the wire between
// requests does not count.
struct BenchOptions {
  client::BenchmarkOptions timing;  // number, repeat, warmup, ... (TVM's time_evaluator)
  double min_duration_s = 1.0;      // seconds of samples a valid run has at least
  uint64_t min_samples = 30;        // samples a valid run has at least (29 bound p90 at 95 %)
  double confidence = 0.95;         // of every percentile's interval, in (0, 1)
  double window_ms = 250;           // measurement window (widened to the longest sample)
  size_t stable_window = bench::kDefaultStableWindows;       // windows judged, the last K
  double stable_threshold = bench::kDefaultStableThreshold;  // 0.10 = +-10 % of the mean
  // The latency percentile judged per window. The median: a window of a fast model holds
  // hundreds of samples but one of a slow model a handful, and the median of a handful
  // still moves with the bulk of the calls, not with one preempted sample as p90 would.
  double stable_percentile = 50;
  uint32_t max_trials = 10;         // benchmark requests of a run at most, the first included
  bool fail_unstable = false;       // front ends: a run still unstable is a failure (exit 1)
  // Also profile invokes after the run (profile.h): per op and instruction kind, and
  // per node with its median over `profile_runs` invokes (1..rpc::kMaxProfileRuns);
  // with `trace`, the trace of every instruction run too (ProfileReport::trace).
  bool profile = false;
  uint32_t profile_runs = kDefaultProfileRuns;
  bool trace = false;
  size_t profile_top = kDefaultProfileTop;  // nodes the text report lists (BenchText)
  // --scenario: a load scenario on the server (load.h) instead of the time evaluator;
  // it takes min_duration_s, min_samples (as queries), confidence, window_ms,
  // stable_threshold, stable_percentile and max_trials from here.
  std::optional<LoadOptions> load;
  // A signal's number once the user interrupted the run (Interrupter::signal()), 0
  // before; not owned, may be null. Read before every request: the run sends no more,
  // a request cancelled on the server keeps its samples (partial_on_cancel; a load
  // level cut short is dropped, those before are kept), and the report is partial.
  const std::atomic<int>* interrupt = nullptr;
};

// The percentiles every report gives, with their intervals.
inline constexpr double kBenchPercentiles[] = {50, 90, 99};

// How a run was extended past its first request.
struct BenchExtension {
  // The rules that extended it, in the order they first did: "min_duration",
  // "min_samples", "stability". Empty when the first request was a valid run.
  std::vector<std::string> reasons;
  // The rules still unmet when extending stopped (a subset of the three): at
  // max_trials, or when the server refused the next request (`stopped`).
  std::vector<std::string> unmet;
  // Why extending stopped with rules unmet: "max trials reached", or the server's
  // refusal of the next request (its time limit, projected from the samples so far).
  std::string stopped;
  uint32_t requests = 0;  // benchmark requests of the run, the first included
  double duration_s = 0;  // the run's measured duration: the last sample's end
};

// The stability verdict with what it was judged on.
struct BenchStability : bench::WindowStability {
  double window_ms = 0;                       // the window used (window_ms, or the longest sample)
  bool window_widened = false;                // window_ms was shorter than the longest sample
  double percentile = 50;                     // the latency percentile judged
  std::vector<bench::WindowSummary> windows;  // latency in ms
};

struct BenchReport {
  SessionReport session;
  std::string function;
  BenchOptions options;
  uint32_t number = 0;              // calls per sample of the last request
  std::string timer;                // "steady_clock" or "cuda_event"
  std::vector<double> samples_ms;   // mean ms per call, one per sample, in run order
  std::vector<bench::TimedSample> timeline;  // the same samples: end time, ms, calls
  bench::SampleStats stats;         // of samples_ms
  // p50, p90 and p99 (kBenchPercentiles) of samples_ms, in ms, each with its interval
  // at options.confidence or bounded false ("not enough samples").
  std::vector<bench::PercentileEstimate> percentiles;
  BenchExtension extended;
  BenchStability stability;
  std::optional<ProfileReport> profile;  // with options.profile
  double bench_ms = 0;              // wall time of the benchmark requests, ms
  // Cold start against warm: the server's module load (0: from its cache), and the
  // VM's creation and first call (client::RunPhases); memory around the run.
  double module_load_ms = 0;
  client::RunPhases phases;
  client::MemoryUse memory;
  std::optional<LoadRun> load;  // --scenario
  // Why the run stopped before it was complete ("interrupted by SIGINT", "cancelled on
  // the server"); "" for a complete run. A partial run's numbers are those of the
  // samples taken (a load scenario: of the levels completed), without the profile.
  std::string partial;

  // The estimate of percentile q (one of kBenchPercentiles), or nullptr.
  const bench::PercentileEstimate* Percentile(double q) const;
};

// INVALID_ARGUMENT naming the flag for number or repeat < 1, min_duration_s negative
// or over a day, min_samples over 10^7, confidence outside (0, 1), window_ms not in
// (0, 3600000], stable_window < 2, a negative or non-finite threshold,
// stable_percentile outside [0, 100], max_trials not in [1, 1000], profile_runs not in
// [1, 100], trace without profile.
Status CheckBenchOptions(const BenchOptions& options);
// Why `report` fails, empty when it passes: a load level whose audit found a mismatch,
// or with options.fail_unstable a run still unstable (of a load scenario: a
// single-stream or multi-stream level; server and offline are not judged). remex bench
// exits 1 for it, a shell script stops, the Python client raises Unstable for the latter.
std::string BenchFailure(const BenchReport& report);
// The run, its extension and statistics (BenchOptions), then the profile if asked. The
// options' errors; the session's (DEADLINE_EXCEEDED when one request would outlast the
// server's benchmark time limit); DATA_LOSS when a reply has another number of samples
// than asked or a sample that is negative or not finite. A run interrupted or cancelled
// on the server is a partial report (BenchReport::partial) when it has samples (a load
// scenario: levels completed, LoadRun::stopped), else CANCELLED.
StatusOr<BenchReport> BenchModel(const ModelRequest& request, PreparedModel& prepared, const BenchOptions& options);
// The benchmark (and profile) of `function` of a VM whose inputs are bound, on any
// session: BenchModel's work without the model's preparation and release; the report's
// `session` is left empty.
StatusOr<BenchReport> BenchVm(client::Session& session, uint64_t vm, const std::string& function,
                              const BenchOptions& options);

// ---- check --------------------------------------------------------------------------

struct CheckOptions {
  std::string reference;  // folder of NAME.npy, one per output (and inputs/NAME.npy)
  double rtol = 1e-4, atol = 1e-5;
  bool equal_nan = true;  // NaN in the output where the reference has NaN is a match
};

struct CheckOutput {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::string reference;  // the file
  // "match", "mismatch" (values, or the reference's dtype or shape differ) or
  // "missing" (no reference file for this output).
  std::string verdict;
  std::string reason;     // for mismatch and missing
  AllcloseStats stats;    // computed on the device (base/allclose.h)
};

struct CheckReport {
  SessionReport session;
  CheckOptions options;
  std::vector<CheckOutput> outputs;
  bool match = false;            // every output matches
  bool missing_reference = false;  // some output has no reference: not a mismatch
  client::DeviceCopies copies;
  double run_ms = 0, server_run_ms = 0, compare_ms = 0;
};

// Checks the options (the folder exists; tolerances finite and >= 0: INVALID_ARGUMENT).
Status CheckCheckOptions(const CheckOptions& options);
StatusOr<CheckReport> CheckModel(const ModelRequest& request, PreparedModel& prepared, const CheckOptions& options);

}  // namespace remex::tooling
