#include "host_client/tooling/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "host_client/tooling/compare.h"
#include "host_client/tooling/interrupt.h"
#include "host_client/tooling/text.h"
#include "rpc/wire_util.h"

namespace remex::tooling {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string OutputNames(const client::FunctionInfo& fn) {
  std::string names;
  for (const auto& o : fn.outputs) names += (names.empty() ? "" : ", ") + o.name;
  return names;
}

}  // namespace

StatusOr<RunReport> RunModel(const ModelRequest& request, PreparedModel& p, const RunOptions& options) {
  client::Session& session = p.session();
  const auto& fn = p.main();
  for (const auto& name : options.fetch.names) {
    bool known = std::any_of(fn.outputs.begin(), fn.outputs.end(), [&](const auto& o) { return o.name == name; });
    if (!known) {
      return InvalidArgument("--fetch names '" + name + "', which is no output; use all, none or output names (" +
                             OutputNames(fn) + ")");
    }
  }
  RunReport r;
  auto t = Clock::now();
  REMEX_ASSIGN_OR_RETURN(client::InvokeResult result, session.Invoke(p.vm, fn.name));
  r.run_ms = MsSince(t);
  r.server_run_ms = result.run_nanos / 1e6;
  r.function = result.function;
  r.copies = result.copies;
  r.allocations = result.allocations;
  r.graph = result.graph;
  std::vector<uint64_t> output_handles;
  for (const auto& out : result.outputs) output_handles.push_back(out.handle);

  Status status = OkStatus();
  if (!options.output_dir.empty() && options.save_inputs) {
    const fs::path dir = fs::path(options.output_dir) / "inputs";
    status = EnsureWritableDirectory(dir.string());
    for (size_t i = 0; status.ok() && i < fn.inputs.size(); ++i) {
      status = npy::Write((dir / (FileNameFor(fn.inputs[i].name) + ".npy")).string(), p.inputs[i]);
    }
  }
  t = Clock::now();
  for (size_t k = 0; status.ok() && k < result.outputs.size(); ++k) {
    const auto& out = result.outputs[k];
    RunOutput o;
    o.name = fn.outputs[k].name;
    o.dtype = out.dtype;
    o.shape = out.shape;
    o.fetched = options.fetch.all || options.fetch.names.count(o.name);
    if (o.fetched) {
      auto array = session.Download(out.handle);
      if (!array.ok()) {
        status = array.status().WithContext("fetching '" + o.name + "'");
        break;
      }
      o.summary = ArraySummary(*array);
      if (!options.output_dir.empty()) {
        o.file = (fs::path(options.output_dir) / (FileNameFor(o.name) + ".npy")).string();
        status = npy::Write(o.file, *array);
      }
    }
    r.outputs.push_back(std::move(o));
  }
  r.fetch_ms = MsSince(t);
  // The outputs are freed whatever happened: the session keeps nothing.
  Status freed = p.Release(output_handles);
  REMEX_RETURN_IF_ERROR(status);
  REMEX_RETURN_IF_ERROR(freed);
  r.session = DescribeSession(request, p);
  return r;
}

Status CheckBenchOptions(const BenchOptions& options) {
  if (options.timing.number < 1 || options.timing.repeat < 1) {
    return InvalidArgument("--number and --repeat must be at least 1");
  }
  if (!(options.min_duration_s >= 0 && options.min_duration_s <= 86400)) {
    return InvalidArgument("--min-duration-s must be in [0, 86400] seconds");
  }
  if (options.min_samples > 10'000'000) return InvalidArgument("--min-samples must be at most 10000000");
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return InvalidArgument("--confidence must be in (0, 1), e.g. 0.95");
  }
  if (!(options.window_ms > 0 && options.window_ms <= 3'600'000)) {
    return InvalidArgument("--window-ms must be in (0, 3600000]");
  }
  if (options.stable_window < 2) return InvalidArgument("--stable-window must be at least 2");
  if (!(options.stable_threshold >= 0) || !std::isfinite(options.stable_threshold)) {
    return InvalidArgument("--stable-threshold must be finite and >= 0");
  }
  if (!(options.stable_percentile >= 0 && options.stable_percentile <= 100)) {
    return InvalidArgument("--stable-percentile must be in [0, 100]");
  }
  if (options.max_trials < 1 || options.max_trials > 1000) {
    return InvalidArgument("--max-trials must be in [1, 1000]");
  }
  if (options.profile_runs < 1 || options.profile_runs > rpc::kMaxProfileRuns) {
    return InvalidArgument("--profile-runs must be in [1, " + std::to_string(rpc::kMaxProfileRuns) + "]");
  }
  if (options.trace && !options.profile) return InvalidArgument("--trace needs --profile");
  return OkStatus();
}

const bench::PercentileEstimate* BenchReport::Percentile(double q) const {
  for (const auto& p : percentiles) {
    if (p.q == q) return &p;
  }
  return nullptr;
}

namespace {

// The most samples one request may ask for (the server's limit on repeat).
constexpr uint64_t kMaxRepeatPerRequest = 100'000;

// The samples of one reply, checked: the wire is not trusted. A cancelled run has
// fewer than `repeat`.
Status CheckSamples(const client::BenchmarkResult& result, uint32_t repeat) {
  if (result.cancelled ? result.samples_seconds.size() > repeat : result.samples_seconds.size() != repeat) {
    return DataLoss("benchmark: the server returned " + std::to_string(result.samples_seconds.size()) +
                    " samples for repeat " + std::to_string(repeat));
  }
  if (result.number < 1) return DataLoss("benchmark: the server reported 0 calls per sample");
  for (double s : result.samples_seconds) {
    if (!(s >= 0) || !std::isfinite(s))
      return DataLoss("benchmark: the server returned a sample of " + std::to_string(s) + " s");
  }
  return OkStatus();
}

void AddReason(std::vector<std::string>& reasons, const std::string& reason) {
  if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
}

// The windows and stability of the run so far.
BenchStability JudgeStability(const std::vector<bench::TimedSample>& timeline, const BenchOptions& options) {
  BenchStability st;
  st.percentile = options.stable_percentile;
  // A window shorter than a sample would hold no sample end: widen it to the longest.
  double longest = 0, previous = 0;
  for (const auto& s : timeline) {
    longest = std::max(longest, s.end_s - previous);
    previous = s.end_s;
  }
  double window_s = options.window_ms / 1e3;
  if (longest > window_s) {
    window_s = longest;
    st.window_widened = true;
  }
  st.window_ms = window_s * 1e3;
  st.windows = bench::SplitIntoWindows(timeline, window_s, options.stable_percentile);
  static_cast<bench::WindowStability&>(st) =
      bench::CheckWindowStability(st.windows, options.stable_window, options.stable_threshold);
  return st;
}

}  // namespace

std::string BenchFailure(const BenchReport& r) {
  if (!r.load) return r.options.fail_unstable && !r.stability.stable ? "the benchmark is unstable" : "";
  for (const LoadLevel& level : r.load->levels) {
    if (!level.audit.passed()) {
      return "the audit found a mismatch at concurrency " + std::to_string(level.concurrency) + ": " +
             level.audit.first_mismatch;
    }
  }
  const client::LoadScenario sc = r.load->options.scenario;
  const bool judged = sc == client::LoadScenario::kSingleStream || sc == client::LoadScenario::kMultiStream;
  if (r.options.fail_unstable && judged) {
    for (const LoadLevel& level : r.load->levels) {
      if (!level.stability.stable) {
        return "the benchmark is unstable at concurrency " + std::to_string(level.concurrency);
      }
    }
  }
  return "";
}

namespace {

// The profile after the run (options.profile) of a complete run: a run interrupted
// before it is partial without one, as is one whose profile was cancelled.
Status ProfileAfterRun(client::Session& session, uint64_t vm, const std::string& function,
                       const BenchOptions& options, const std::function<std::string()>& stopped_by,
                       BenchReport& r) {
  if (!options.profile || !r.partial.empty()) return OkStatus();
  if (options.interrupt != nullptr && options.interrupt->load() != 0) {
    r.partial = stopped_by();  // no profile
    return OkStatus();
  }
  auto profile = ProfileVm(session, vm, function, options.profile_runs, options.trace);
  if (!profile.ok() && profile.status().code() == StatusCode::kCancelled) {
    r.partial = stopped_by();  // the samples stand; the profile is missing
    return OkStatus();
  }
  REMEX_RETURN_IF_ERROR(profile.status());
  r.profile = std::move(profile).value();
  return OkStatus();
}

}  // namespace

StatusOr<BenchReport> BenchVm(client::Session& session, uint64_t vm, const std::string& function,
                              const BenchOptions& options) {
  REMEX_RETURN_IF_ERROR(CheckBenchOptions(options));
  BenchReport r;
  r.function = function;
  r.options = options;
  const double cooldown_s = options.timing.cooldown_ms / 1e3;
  double end_s = 0;
  client::BenchmarkOptions timing = options.timing;
  auto t = Clock::now();
  // The signal that interrupted the run, 0: none.
  auto interrupted = [&] { return options.interrupt != nullptr ? options.interrupt->load() : 0; };
  auto stopped_by = [&] {
    const int sig = interrupted();
    return sig != 0 ? "interrupted by " + SignalName(sig) : std::string("cancelled on the server");
  };
  if (options.load) {
    // The statistics and validity settings are bench's own: one place for each.
    LoadOptions load = *options.load;
    load.min_duration_s = options.min_duration_s;
    load.min_queries = static_cast<uint32_t>(std::min<uint64_t>(options.min_samples, 1000000));
    load.confidence = options.confidence;
    load.window_ms = options.window_ms;
    load.stable_threshold = options.stable_threshold;
    load.stable_percentile = options.stable_percentile;
    load.max_trials = options.max_trials;
    StatusOr<LoadRun> run = FailedPrecondition("--from-client drives a model prepared by remex bench");
    if (!load.from_client)
      run = RunLoad(session, vm, function, load, options.interrupt);
    else if (load.client)
      run = RunLoadFromClient(session, *load.client, load, options.interrupt);
    if (!run.ok() && run.status().code() == StatusCode::kCancelled) {
      return Cancelled("benchmark: " + stopped_by() +
                       " before its first level completed: nothing to report (" +
                       std::string(run.status().message()) + ")");
    }
    if (!run.ok()) return run.status();
    // The levels completed before the run stopped: a partial report.
    if (run->stopped) r.partial = stopped_by();
    r.bench_ms = MsSince(t);
    if (!run->levels.empty()) {
      r.phases = run->levels.front().phases;
      r.memory = run->levels.front().memory;
      // The run's peak is the largest level's.
      for (const auto& level : run->levels) {
        r.memory.run_peak_bytes = std::max(r.memory.run_peak_bytes, level.memory.run_peak_bytes);
        r.session.environment.server_load_after_benchmark_1m =
            std::max(r.session.environment.server_load_after_benchmark_1m, level.load_average_1m);
      }
    }
    r.load = std::move(run).value();
    REMEX_RETURN_IF_ERROR(ProfileAfterRun(session, vm, function, options, stopped_by, r));
    return r;
  }
  timing.partial_on_cancel = true;
  std::vector<std::string> lacking;  // what the requests so far left unmet
  for (;;) {
    if (interrupted() != 0) {
      r.partial = stopped_by();
      break;
    }
    auto result = session.Benchmark(vm, function, timing);
    if (!result.ok()) {
      // A request cancelled before it ran (or by an older server): the samples of the
      // requests before it are kept.
      if (result.status().code() == StatusCode::kCancelled && !r.samples_ms.empty()) {
        r.partial = stopped_by();
        break;
      }
      // A request that extends the run and would pass the server's time limit (its
      // projection from this request's first samples, on a loaded machine perhaps far
      // slower than the run's): the run ends with what it has, its rules unmet.
      if (result.status().code() == StatusCode::kDeadlineExceeded && !r.samples_ms.empty()) {
        r.extended.unmet = lacking;
        std::string why(result.status().message());
        why = why.substr(0, why.find(';'));  // not its advice to lower --repeat: the run chose it
        if (why.rfind("benchmark: ", 0) == 0) why = why.substr(11);
        r.extended.stopped = "request " + std::to_string(r.extended.requests + 1) + " refused: " + why;
        break;
      }
      return result.status().WithContext("benchmark");
    }
    REMEX_RETURN_IF_ERROR(CheckSamples(*result, timing.repeat));
    ++r.extended.requests;
    if (r.extended.requests == 1) {
      r.phases = result->phases;  // the first request holds the VM's first call
      r.memory = result->memory;
    } else {
      r.memory.invoke_peak_bytes = std::max(r.memory.invoke_peak_bytes, result->memory.invoke_peak_bytes);
      r.memory.run_peak_bytes = std::max(r.memory.run_peak_bytes, result->memory.run_peak_bytes);
      r.memory.resident_bytes = result->memory.resident_bytes;
      r.memory.resident_peak_bytes = result->memory.resident_peak_bytes;
    }
    r.number = result->number;
    r.timer = result->timer;
    // The highest load seen after any request of the run.
    r.session.environment.server_load_after_benchmark_1m =
        std::max(r.session.environment.server_load_after_benchmark_1m, result->load_average_1m);
    for (double s : result->samples_seconds) {
      if (!r.samples_ms.empty()) end_s += cooldown_s;
      end_s += s * result->number;
      r.samples_ms.push_back(s * 1e3);
      r.timeline.push_back({end_s, s * 1e3, result->number});
    }
    r.extended.duration_s = end_s;
    r.stability = JudgeStability(r.timeline, options);
    if (result->cancelled) {
      r.partial = stopped_by();
      break;
    }

    // What the run still lacks, and how many samples would supply it.
    const size_t n = r.samples_ms.size();
    const double span = std::max(end_s / static_cast<double>(n), 1e-9);  // seconds per sample
    lacking.clear();
    double need = 0;
    if (end_s < options.min_duration_s) {
      lacking.push_back("min_duration");
      // 5 % over: a run that falls a few samples short would need another request.
      need = std::max(need, std::ceil(1.05 * (options.min_duration_s - end_s) / span));
    }
    if (n < options.min_samples) {
      lacking.push_back("min_samples");
      need = std::max(need, static_cast<double>(options.min_samples - n));
    }
    if (!r.stability.stable) {
      lacking.push_back("stability");
      // Too few windows: as many as are missing; otherwise one more window.
      const double window_s = r.stability.window_ms / 1e3;
      const double whole = std::floor(end_s / window_s + 1e-9);
      const double windows = std::max(1.0, static_cast<double>(options.stable_window) - whole);
      need = std::max(need, std::ceil((windows * window_s) / span));
    }
    if (lacking.empty()) break;
    if (r.extended.requests >= options.max_trials) {
      r.extended.unmet = lacking;
      r.extended.stopped = "max trials reached";
      break;
    }
    for (const auto& reason : lacking) AddReason(r.extended.reasons, reason);
    timing.warmup = 0;
    timing.number = r.number;
    timing.repeat = static_cast<uint32_t>(std::clamp(need, 1.0, static_cast<double>(kMaxRepeatPerRequest)));
  }
  r.bench_ms = MsSince(t);
  if (r.samples_ms.empty()) {
    return Cancelled("benchmark: " + r.partial + " before its first sample: nothing to report");
  }
  r.stats = bench::Summarize(r.samples_ms);
  std::vector<double> sorted = r.samples_ms;
  std::sort(sorted.begin(), sorted.end());
  for (double q : kBenchPercentiles)
    r.percentiles.push_back(bench::EstimatePercentile(sorted, q, options.confidence));
  REMEX_RETURN_IF_ERROR(ProfileAfterRun(session, vm, function, options, stopped_by, r));
  return r;
}

StatusOr<BenchReport> BenchModel(const ModelRequest& request, PreparedModel& p, const BenchOptions& options_in) {
  BenchOptions options = options_in;
  ClientModel client_model{p.executable.bytes, fs::path(request.model).filename().string(), p.main().name, p.inputs};
  if (options.load && options.load->from_client) options.load->client = &client_model;
  REMEX_ASSIGN_OR_RETURN(BenchReport r, BenchVm(p.session(), p.vm, p.main().name, options));
  if (r.load) r.load->options.client = nullptr;
  r.options.load.reset();  // held `client`, which ends here
  if (r.load) r.options.load = r.load->options;
  r.module_load_ms = p.module.load_nanos / 1e6;
  // Interrupted: a cancel sent again for a request that might have been on its way can
  // reach this free instead, which then does not run (CANCELLED); such cancels end
  // within the Interrupter's window, so the free is sent again until it has passed.
  Status freed = p.Release();
  const bool interrupted = options.interrupt != nullptr && options.interrupt->load() != 0;
  for (auto until = std::chrono::steady_clock::now() + 2 * Interrupter::kCancelWindow;
       interrupted && freed.code() == StatusCode::kCancelled && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(Interrupter::kCancelRetryEvery);
    freed = p.Release();
  }
  REMEX_RETURN_IF_ERROR(freed);
  const double server_load = r.session.environment.server_load_after_benchmark_1m;
  r.session = DescribeSession(request, p);
  r.session.environment.server_load_after_benchmark_1m = server_load;
  return r;
}

Status CheckCheckOptions(const CheckOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(options.reference, ec)) {
    return InvalidArgument("--reference '" + options.reference + "' is not a folder" +
                           (fs::exists(options.reference, ec) ? "" : " (it does not exist)"));
  }
  return compare::CheckTolerances(options.rtol, options.atol);
}

StatusOr<CheckReport> CheckModel(const ModelRequest& request, PreparedModel& p, const CheckOptions& options) {
  REMEX_RETURN_IF_ERROR(CheckCheckOptions(options));
  client::Session& session = p.session();
  const auto& fn = p.main();
  CheckReport r;
  r.options = options;
  auto t = Clock::now();
  REMEX_ASSIGN_OR_RETURN(client::InvokeResult result, session.Invoke(p.vm, fn.name));
  r.run_ms = MsSince(t);
  r.server_run_ms = result.run_nanos / 1e6;
  r.copies = result.copies;

  // Each output is compared with its reference on the device: only the numbers return.
  t = Clock::now();
  std::vector<uint64_t> to_free;
  for (const auto& out : result.outputs) to_free.push_back(out.handle);
  Status status = OkStatus();
  r.match = true;
  for (size_t k = 0; k < result.outputs.size() && status.ok(); ++k) {
    const auto& out = result.outputs[k];
    CheckOutput o;
    o.name = fn.outputs[k].name;
    o.dtype = out.dtype;
    o.shape = out.shape;
    o.reference = (fs::path(options.reference) / (FileNameFor(o.name) + ".npy")).string();
    std::error_code ec;
    if (!fs::exists(o.reference, ec)) {
      o.verdict = "missing";
      o.reason = "no reference file " + o.reference;
      r.missing_reference = true;
      r.match = false;
      r.outputs.push_back(std::move(o));
      continue;
    }
    auto ref = npy::Read(o.reference);
    if (!ref.ok()) {
      status = ref.status().WithContext("the reference of '" + o.name + "'");
      break;
    }
    if (ref->dtype != out.dtype || ref->shape != out.shape) {
      o.verdict = "mismatch";
      o.reason = ref->dtype != out.dtype ? "the reference's dtype is " + std::string(DTypeName(ref->dtype))
                                         : "the reference's shape is " + ShapeToString(ref->shape);
      r.match = false;
      r.outputs.push_back(std::move(o));
      continue;
    }
    auto uploaded = session.Upload(*ref);
    if (!uploaded.ok()) {
      status = uploaded.status().WithContext("uploading the reference of '" + o.name + "'");
      break;
    }
    to_free.push_back(uploaded->handle);
    auto cmp = session.Compare(out.handle, uploaded->handle, options.rtol, options.atol, options.equal_nan);
    if (!cmp.ok()) {
      status = cmp.status().WithContext("comparing '" + o.name + "'");
      break;
    }
    o.stats.count = cmp->count;
    o.stats.mismatches = cmp->mismatches;
    o.stats.max_abs_error = cmp->max_abs_error;
    o.stats.max_rel_error = cmp->max_rel_error;
    o.stats.first_mismatch = cmp->first_mismatch;
    o.verdict = cmp->mismatches == 0 ? "match" : "mismatch";
    if (cmp->mismatches) o.reason = std::to_string(cmp->mismatches) + " of " + std::to_string(cmp->count) + " values differ";
    r.match &= cmp->mismatches == 0;
    r.outputs.push_back(std::move(o));
  }
  r.compare_ms = MsSince(t);
  Status freed = p.Release(to_free);
  REMEX_RETURN_IF_ERROR(status);
  REMEX_RETURN_IF_ERROR(freed);
  r.session = DescribeSession(request, p);
  return r;
}

}  // namespace remex::tooling
