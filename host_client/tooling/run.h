// remex run, bench and check as functions over a prepared model (prepare.h): each
// returns a structured report that a front end renders (report_json.h for JSON).
#pragma once

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
  double run_ms = 0, server_run_ms = 0, fetch_ms = 0;
};

// Invokes the model's main function once and downloads what `options.fetch` names.
// INVALID_ARGUMENT for a --fetch name that is no output (listing them); the session's
// and the file system's errors. Outputs not fetched are freed with the session's
// other handles: nothing is left on the server.
StatusOr<RunReport> RunModel(const ModelRequest& request, PreparedModel& prepared, const RunOptions& options);

// ---- bench --------------------------------------------------------------------------

struct BenchOptions {
  client::BenchmarkOptions timing;  // number, repeat, warmup, ... (TVM's time_evaluator)
  size_t stable_window = bench::kDefaultStableWindow;
  double stable_threshold = bench::kDefaultStableThreshold;
  bool profile = false;  // also one profiled invoke, per op and instruction kind
  // --scenario: a load scenario on the server (load.h) instead of the time evaluator.
  std::optional<LoadOptions> load;
};

struct ProfileEntry {
  std::string name, kind;  // op or instruction; "kernel" or "instruction"
  uint64_t calls = 0;
  double total_ms = 0, mean_us = 0, share_percent = 0;
  uint64_t copies = 0, copy_bytes = 0;
};

struct BenchReport {
  SessionReport session;
  std::string function;
  BenchOptions options;
  uint32_t number = 0;              // calls per sample actually used
  std::string timer;                // "steady_clock" or "cuda_event"
  std::vector<double> samples_ms;   // mean ms per call, one per sample
  bench::SampleStats stats;         // of samples_ms
  bool has_p99 = false;             // enough samples (bench::kMinSamplesForP99)
  bench::Stability stability;
  std::optional<double> profile_total_ms;
  std::vector<ProfileEntry> profile;  // largest total first
  double bench_ms = 0;
  // Cold start against warm: the server's module load (0: from its cache), and the
  // VM's creation and first call (client::RunPhases); memory around the run.
  double module_load_ms = 0;
  client::RunPhases phases;
  client::MemoryUse memory;
  std::optional<LoadRun> load;  // --scenario
};

// INVALID_ARGUMENT for number or repeat < 1, a negative threshold; the session's
// errors.
Status CheckBenchOptions(const BenchOptions& options);
StatusOr<BenchReport> BenchModel(const ModelRequest& request, PreparedModel& prepared, const BenchOptions& options);
// The benchmark (and profile) of `function` of a VM whose inputs are bound, on any
// session: BenchModel's work without the model's preparation and release; the report's
// `session` is left empty.
StatusOr<BenchReport> BenchVm(client::Session& session, uint64_t vm, const std::string& function,
                              const BenchOptions& options);
// A server's profile as report rows: times in ms and us, shares of the whole invoke,
// largest total first.
std::vector<ProfileEntry> ProfileEntries(const client::ProfileResult& profile);

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
