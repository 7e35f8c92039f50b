#include "host_client/tooling/load.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace remex::tooling {
namespace {

using client::LoadScenario;

constexpr double kPercentiles[] = {50, 90, 99};
// The peak search stops when the valid and the invalid rate are this close (relative),
// or after this many probes.
constexpr double kPeakResolution = 0.05;
constexpr int kMaxPeakProbes = 16;
// The rates searched: below 1 QPS a probe of min_samples queries takes minutes; above
// the server's bound on a target rate nothing is generated.
constexpr double kMinPeakQps = 1;
constexpr double kMaxPeakQps = 1e6;

LoadLevel Summarize(const client::LoadTestResult& r, const LoadOptions& o, uint32_t concurrency, double target_qps) {
  LoadLevel l;
  l.concurrency = concurrency;
  l.target_qps = target_qps;
  l.queries = r.issue_nanos.size();
  l.completed = r.completed;
  l.late = r.late;
  l.dropped = r.dropped;
  l.samples = r.samples;
  l.duration_s = r.duration_nanos / 1e9;
  l.throughput_qps = l.duration_s > 0 ? static_cast<double>(l.completed) / l.duration_s : 0;
  l.samples_per_s = l.duration_s > 0 ? static_cast<double>(l.samples) / l.duration_s : 0;
  l.phases = r.phases;
  l.memory = r.memory;
  l.load_average_1m = r.load_average_1m;
  l.audit = {r.audit_checked, r.audit_mismatches, r.audit_first_mismatch};
  std::vector<double> done;
  std::vector<bench::TimedSample> timed;
  for (size_t q = 0; q < r.issue_nanos.size(); ++q) {
    l.issue_s.push_back(r.issue_nanos[q] / 1e9);
    l.latency_ms.push_back(r.latency_nanos[q] / 1e6);
    if (r.latency_nanos[q] == 0) continue;  // dropped
    done.push_back(r.latency_nanos[q] / 1e6);
    timed.push_back({(r.issue_nanos[q] + r.latency_nanos[q]) / 1e9, r.latency_nanos[q] / 1e6, 1});
  }
  l.latency = bench::Summarize(done);
  std::sort(done.begin(), done.end());
  for (double q : kPercentiles) {
    if (done.empty()) break;
    l.percentiles.push_back(bench::EstimatePercentile(done, q, o.confidence));
  }
  std::sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.end_s < b.end_s; });
  // A window shorter than a query's latency would often see no completion: widened to
  // the longest, as bench's own windows are.
  l.window_s = std::max(o.window_ms / 1000.0, l.latency.max / 1000.0);
  l.windows = bench::SplitIntoWindows(timed, l.window_s, o.stable_percentile);
  l.stability = bench::CheckWindowStability(l.windows, 3, o.stable_threshold);
  if (o.latency_bound_ms > 0) {
    // Within the bound, nothing dropped, and the arrivals kept up with: a device that
    // completes queries more slowly than they arrived is not serving that rate.
    const double last_issue_s = l.issue_s.empty() ? 0 : l.issue_s.back();
    const double arrival_qps = last_issue_s > 0 ? static_cast<double>(l.queries) / last_issue_s : 0;
    const bool kept_up = arrival_qps <= 0 || l.throughput_qps >= 0.9 * arrival_qps;
    l.bound_met = !done.empty() && l.latency.p99 <= o.latency_bound_ms && l.dropped == 0 && kept_up;
  }
  return l;
}

// One level's run: the server's loadTest, or the client's own driver.
using LevelRunner = std::function<StatusOr<client::LoadTestResult>(const client::LoadTestOptions&)>;

bool Interrupted(const std::atomic<int>* interrupt) { return interrupt != nullptr && interrupt->load() != 0; }

// CANCELLED once `interrupt` is set, before each trial's request: a level whose trial
// was cut short is dropped whole.
StatusOr<LoadLevel> RunLevel(const LevelRunner& runner, const LoadOptions& o, uint32_t concurrency,
                             double target_qps, const std::atomic<int>* interrupt) {
  client::LoadTestOptions req;
  req.scenario = o.scenario;
  req.concurrency = concurrency;
  req.samples_per_query = o.scenario == LoadScenario::kMultiStream ? o.samples_per_query : 1;
  req.target_qps = o.scenario == LoadScenario::kServer ? target_qps : 0;
  req.min_queries = o.min_queries;
  req.min_duration_ms = static_cast<uint32_t>(std::llround(o.min_duration_s * 1000));
  req.warmup = o.warmup;
  req.audit_samples = o.audit_samples;
  req.audit_rtol = o.audit_rtol;
  req.audit_atol = o.audit_atol;
  // Closed loops are judged stable over their windows and run again when not; server
  // arrivals and an offline batch are set by the scenario, not by the device.
  const bool judged = o.scenario == LoadScenario::kSingleStream || o.scenario == LoadScenario::kMultiStream;
  LoadLevel level;
  for (uint32_t trial = 1; trial <= std::max<uint32_t>(1, o.max_trials); ++trial) {
    req.seed = o.seed + trial - 1;
    if (Interrupted(interrupt))
      return Cancelled("interrupted before the loadTest at concurrency " + std::to_string(concurrency));
    auto result = runner(req);
    if (!result.ok()) return result.status().WithContext("loadTest at concurrency " + std::to_string(concurrency));
    level = Summarize(*result, o, concurrency, req.target_qps);
    level.trials = trial;
    if (!judged || level.stability.stable || !level.audit.passed()) break;
    // Too short to hold the windows judged: the next trial runs long enough for them.
    const double needed_ms = std::ceil((bench::kDefaultStableWindows + 0.5) * level.window_s * 1000);
    if (needed_ms > req.min_duration_ms) req.min_duration_ms = static_cast<uint32_t>(std::min(needed_ms, 600000.0));
  }
  return level;
}

}  // namespace

StatusOr<LoadScenario> ParseLoadScenario(const std::string& name) {
  for (LoadScenario s : kLoadScenarios) {
    if (name == LoadScenarioName(s)) return s;
  }
  return InvalidArgument("--scenario '" + name + "' is none of single-stream, multi-stream, server, offline");
}

StatusOr<std::vector<uint32_t>> ParseConcurrencyRange(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--concurrency '" + spec + "': " + why + " (A, A:B or A:B:STEP, 1 <= A <= B <= 64)");
  };
  std::vector<uint64_t> parts;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(':', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string part = spec.substr(pos, end - pos);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) {
      return bad("'" + part + "' is not a count");
    }
    parts.push_back(std::stoull(part));
    pos = end + 1;
  }
  if (parts.empty() || parts.size() > 3) return bad("one to three counts");
  const uint64_t a = parts[0], b = parts.size() > 1 ? parts[1] : a, step = parts.size() > 2 ? parts[2] : 1;
  if (a < 1 || b < a || b > 64) return bad("out of range");
  if (step < 1) return bad("STEP must be at least 1");
  std::vector<uint32_t> levels;
  for (uint64_t c = a; c <= b; c += step) levels.push_back(static_cast<uint32_t>(c));
  return levels;
}

Status CheckLoadOptions(const LoadOptions& o) {
  const bool server = o.scenario == LoadScenario::kServer;
  if (o.concurrency.empty()) return InvalidArgument("--concurrency names no level");
  if (server && !o.find_peak && !(o.target_qps > 0)) {
    return InvalidArgument("--scenario server needs --target-qps Q (queries per second), or --find-peak");
  }
  if (!server && o.target_qps != 0) return InvalidArgument("--target-qps is for --scenario server");
  if (!server && (o.find_peak || o.latency_bound_ms != 0)) {
    return InvalidArgument("--find-peak and --latency-bound-ms are for --scenario server");
  }
  if (o.find_peak && !(o.latency_bound_ms > 0)) return InvalidArgument("--find-peak needs --latency-bound-ms L");
  if (o.find_peak && o.concurrency.size() > 1) {
    return InvalidArgument("--find-peak searches one concurrency: give --concurrency N, not a range");
  }
  if (o.scenario != LoadScenario::kMultiStream && o.samples_per_query != 1) {
    return InvalidArgument("--samples-per-query is for --scenario multi-stream");
  }
  if (o.samples_per_query < 1 || o.samples_per_query > 1024) {
    return InvalidArgument("--samples-per-query must be in [1, 1024]");
  }
  if (!(o.min_duration_s >= 0) || o.min_duration_s > 3600) return InvalidArgument("--min-duration-s must be in [0, 3600]");
  if (o.min_duration_s == 0 && o.min_queries == 0) {
    return InvalidArgument("a load scenario needs --min-duration-s or --min-samples above 0");
  }
  if (!(o.confidence > 0 && o.confidence < 1)) return InvalidArgument("--confidence must be in (0, 1)");
  if (!(o.window_ms > 0)) return InvalidArgument("--window-ms must be above 0");
  if (!(o.audit_rtol >= 0) || !(o.audit_atol >= 0) || !std::isfinite(o.audit_rtol) || !std::isfinite(o.audit_atol)) {
    return InvalidArgument("--audit-rtol and --audit-atol must be finite and >= 0");
  }
  return OkStatus();
}

StatusOr<std::optional<LoadOptions>> MakeLoadOptions(const LoadSpec& spec) {
  if (spec.scenario.empty()) {
    // The flags given, named: "--target-qps needs --scenario ...".
    std::vector<std::string> given;
    if (!spec.concurrency.empty()) given.push_back("--concurrency");
    if (spec.samples_per_query) given.push_back("--samples-per-query");
    if (spec.target_qps != 0) given.push_back("--target-qps");
    if (spec.latency_bound_ms != 0) given.push_back("--latency-bound-ms");
    if (spec.find_peak) given.push_back("--find-peak");
    if (spec.audit) given.push_back(*spec.audit ? "--audit" : "--no-audit");
    if (spec.from_client) given.push_back("--from-client");
    if (!given.empty()) {
      std::string list;
      for (size_t i = 0; i < given.size(); ++i) {
        list += (i == 0 ? "" : i + 1 == given.size() ? " and " : ", ") + given[i];
      }
      return InvalidArgument(list + (given.size() == 1 ? " needs" : " need") +
                             " --scenario single-stream|multi-stream|server|offline");
    }
    return std::optional<LoadOptions>();
  }
  LoadOptions o;
  REMEX_ASSIGN_OR_RETURN(o.scenario, ParseLoadScenario(spec.scenario));
  if (!spec.concurrency.empty()) {
    REMEX_ASSIGN_OR_RETURN(o.concurrency, ParseConcurrencyRange(spec.concurrency));
  }
  const bool multi = o.scenario == LoadScenario::kMultiStream;
  o.samples_per_query = spec.samples_per_query.value_or(multi ? 8 : 1);
  // MultiStream's samples run side by side: one instance per sample unless told.
  if (multi && spec.concurrency.empty()) o.concurrency = {std::min<uint32_t>(o.samples_per_query, 64)};
  o.target_qps = spec.target_qps;
  o.latency_bound_ms = spec.latency_bound_ms;
  o.find_peak = spec.find_peak;
  const bool audit_default = o.scenario == LoadScenario::kServer || o.scenario == LoadScenario::kOffline;
  if (spec.from_client && spec.audit.value_or(false)) {
    return InvalidArgument("--audit compares outputs on the server: it goes with the scenarios the server "
                           "generates, not with --from-client");
  }
  o.from_client = spec.from_client;
  o.audit_samples = !spec.from_client && spec.audit.value_or(audit_default) ? spec.audit_samples : 0;
  o.audit_rtol = spec.audit_rtol;
  o.audit_atol = spec.audit_atol;
  o.seed = spec.seed;
  REMEX_RETURN_IF_ERROR(CheckLoadOptions(o));
  return std::optional<LoadOptions>(o);
}

namespace {
StatusOr<LoadRun> RunLevels(const LevelRunner& runner, const LoadOptions& options,
                            const std::atomic<int>* interrupt);
}  // namespace

StatusOr<LoadRun> RunLoad(client::Session& session, uint64_t vm, const std::string& function,
                          const LoadOptions& options, const std::atomic<int>* interrupt) {
  return RunLevels([&](const client::LoadTestOptions& req) { return session.LoadTest(vm, function, req); },
                   options, interrupt);
}

namespace {

// A level that ended CANCELLED (interrupted, or cancelled on the server) stops the run
// with the levels before it (LoadRun::stopped); with none, the run is CANCELLED.
StatusOr<LoadRun> RunLevels(const LevelRunner& runner, const LoadOptions& options,
                            const std::atomic<int>* interrupt) {
  REMEX_RETURN_IF_ERROR(CheckLoadOptions(options));
  LoadRun run;
  run.options = options;
  auto stops = [&](const Status& st) {
    run.stopped = st.code() == StatusCode::kCancelled && !run.levels.empty();
    return run.stopped;
  };
  if (!options.find_peak) {
    for (uint32_t c : options.concurrency) {
      auto level = RunLevel(runner, options, c, options.target_qps, interrupt);
      if (!level.ok()) {
        if (stops(level.status())) break;
        return level.status();
      }
      run.levels.push_back(std::move(level).value());
    }
    return run;
  }
  // The peak: double the rate until the bound fails, then bisect between the highest
  // valid and the lowest invalid rate.
  const uint32_t c = options.concurrency.front();
  double lo = 0, hi = 0;
  double q = options.target_qps > 0 ? options.target_qps : 10;
  for (int probe = 0; probe < kMaxPeakProbes; ++probe) {
    auto probed = RunLevel(runner, options, c, q, interrupt);
    if (!probed.ok()) {
      if (stops(probed.status())) break;
      return probed.status();
    }
    LoadLevel level = std::move(probed).value();
    PeakProbe p;
    p.target_qps = q;
    p.throughput_qps = level.throughput_qps;
    p.p99_ms = level.latency.p99;
    p.dropped = level.dropped;
    p.valid = level.bound_met;
    run.probes.push_back(p);
    const bool audit_failed = !level.audit.passed();
    run.levels.push_back(std::move(level));
    if (audit_failed) break;
    if (p.valid) lo = q;
    else hi = q;
    if (lo > 0 && hi > 0 && (hi - lo) / lo < kPeakResolution) break;
    if (hi > 0 && hi <= kMinPeakQps) break;  // not even kMinPeakQps meets the bound
    q = hi == 0 ? q * 2 : (lo > 0 ? (lo + hi) / 2 : std::max(hi / 2, kMinPeakQps));
    if (q > kMaxPeakQps) break;
  }
  if (lo > 0) run.peak_qps = lo;
  std::sort(run.levels.begin(), run.levels.end(),
            [](const LoadLevel& a, const LoadLevel& b) { return a.target_qps < b.target_qps; });
  return run;
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// One instance driven from this host: its own session and VM.
struct ClientLane {
  std::unique_ptr<client::Session> session;
  uint64_t vm = 0;
};

uint64_t NanosBetween(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()));
}

// One level driven from this host: the scenarios of the server's generator
// (device_server/load_test.h), with invoke requests over `lanes[0 .. concurrency)`.
StatusOr<client::LoadTestResult> DriveFromClient(std::vector<ClientLane>& lanes, const std::string& fn,
                                                 const client::LoadTestOptions& req,
                                                 const std::atomic<int>* interrupt) {
  const size_t n = req.concurrency;
  if (n == 0 || n > lanes.size()) return Internal("from-client: concurrency " + std::to_string(n));
  // Warmup, each instance in turn; its mean call time sizes an offline batch.
  double warm_s = 0;
  uint64_t warm_calls = 0;
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t w = 0; w < req.warmup; ++w) {
      if (Interrupted(interrupt)) return Cancelled("from-client: interrupted in the warmup");
      auto t = Clock::now();
      auto r = lanes[i].session->Invoke(lanes[i].vm, fn);
      if (!r.ok()) return r.status().WithContext("from-client warmup");
      std::vector<uint64_t> handles;
      for (const auto& out : r->outputs) handles.push_back(out.handle);
      REMEX_RETURN_IF_ERROR(lanes[i].session->Free(handles));
      if (w > 0 || req.warmup == 1) {
        warm_s += std::chrono::duration<double>(Clock::now() - t).count();
        ++warm_calls;
      }
    }
  }
  const double seconds_per_call = warm_calls ? warm_s / static_cast<double>(warm_calls) : 0;

  struct Query {
    Clock::time_point issued, done;
    uint32_t remaining = 0;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> pending;  // a query's sample, by query index
  std::vector<Query> queries;
  bool issuing = true, stop = false, interrupted = false;
  Status failure;
  uint64_t samples = 0, late = 0;
  size_t idle = n;
  const bool closed_loop = req.scenario == client::LoadScenario::kSingleStream ||
                           req.scenario == client::LoadScenario::kMultiStream;
  const uint32_t per_query = req.scenario == client::LoadScenario::kMultiStream ? req.samples_per_query : 1;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_completion = start;
  // Bounded as the server bounds its own runs: past it, what is queued is dropped.
  const Clock::time_point limit = start + std::chrono::milliseconds(req.min_duration_ms) * 4 + std::chrono::seconds(60);
  auto issue = [&](Clock::time_point when) {  // with `mu` held
    queries.push_back({when, {}, per_query});
    for (uint32_t k = 0; k < per_query; ++k) pending.push_back(queries.size() - 1);
  };

  std::vector<std::thread> workers;
  for (size_t i = 0; i < n; ++i) {
    workers.emplace_back([&, i] {
      for (;;) {
        size_t q;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || !pending.empty(); });
          if (stop) return;
          q = pending.front();
          pending.pop_front();
          --idle;
        }
        auto r = lanes[i].session->Invoke(lanes[i].vm, fn);
        const Clock::time_point done = Clock::now();
        Status st = r.status();
        if (st.ok()) {
          std::vector<uint64_t> handles;
          for (const auto& out : r->outputs) handles.push_back(out.handle);
          st = lanes[i].session->Free(handles);
        }
        std::lock_guard<std::mutex> lock(mu);
        ++idle;
        if (!st.ok()) {
          if (failure.ok()) failure = st.WithContext("from-client sample");
          stop = true;
          cv.notify_all();
          return;
        }
        ++samples;
        last_completion = std::max(last_completion, done);
        Query& query = queries[q];
        if (--query.remaining == 0) {
          query.done = done;
          if (issuing && closed_loop) issue(done);
        }
        cv.notify_all();
      }
    });
  }

  PoissonArrivals arrivals(req.target_qps, req.seed);
  Clock::time_point next_arrival = start;
  {
    std::unique_lock<std::mutex> lock(mu);
    switch (req.scenario) {
      case client::LoadScenario::kSingleStream:
        for (size_t i = 0; i < n; ++i) issue(start);
        break;
      case client::LoadScenario::kMultiStream: issue(start); break;
      case client::LoadScenario::kServer: break;
      case client::LoadScenario::kOffline: {
        const uint64_t count = OfflineQueryCount(req.min_queries, req.min_duration_ms, seconds_per_call,
                                                 static_cast<uint32_t>(n));
        for (uint64_t k = 0; k < count; ++k) issue(start);
        issuing = false;
        break;
      }
    }
    cv.notify_all();
    const Clock::time_point min_end = start + std::chrono::milliseconds(req.min_duration_ms);
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (!failure.ok()) break;
      if (!interrupted && Interrupted(interrupt)) {
        // No more queries: the calls in flight end, and the level is dropped.
        interrupted = true;
        issuing = false;
        pending.clear();
      }
      if (issuing && req.scenario == client::LoadScenario::kServer) {
        while (next_arrival <= now && queries.size() < kMaxLoadQueries) {
          if (!pending.empty() || idle == 0) ++late;
          issue(next_arrival);
          next_arrival += arrivals.NextGap();
        }
        cv.notify_all();
      }
      if (issuing && ((now >= min_end && queries.size() >= req.min_queries) || queries.size() >= kMaxLoadQueries)) {
        issuing = false;
      }
      if (now > limit) {
        issuing = false;
        pending.clear();  // never sent: dropped
      }
      if (!issuing && pending.empty() && idle == n) break;
      const Clock::time_point wake =
          issuing && req.scenario == client::LoadScenario::kServer ? std::min(next_arrival, now + std::chrono::milliseconds(10))
                                                                    : now + std::chrono::milliseconds(10);
      cv.wait_until(lock, wake);
    }
    stop = true;
    cv.notify_all();
  }
  for (auto& w : workers) w.join();
  REMEX_RETURN_IF_ERROR(failure);
  if (interrupted) {
    return Cancelled("from-client: interrupted at concurrency " + std::to_string(n) + " after " +
                     std::to_string(samples) + " samples; the level is dropped");
  }

  client::LoadTestResult r;
  r.timer = "client steady_clock";
  r.late = late;
  r.samples = samples;
  for (const Query& q : queries) {
    r.issue_nanos.push_back(NanosBetween(start, q.issued));
    if (q.remaining == 0) {
      r.latency_nanos.push_back(std::max<uint64_t>(1, NanosBetween(q.issued, q.done)));
      ++r.completed;
    } else {
      r.latency_nanos.push_back(0);
      ++r.dropped;
    }
  }
  r.duration_nanos = NanosBetween(start, last_completion);
  return r;
}

}  // namespace

StatusOr<LoadRun> RunLoadFromClient(client::Session& session, const ClientModel& model,
                                    const LoadOptions& options, const std::atomic<int>* interrupt) {
  REMEX_RETURN_IF_ERROR(CheckLoadOptions(options));
  uint32_t most = 0;
  for (uint32_t c : options.concurrency) most = std::max(most, c);
  std::vector<ClientLane> lanes;
  for (uint32_t i = 0; i < most; ++i) {
    if (Interrupted(interrupt)) return Cancelled("from-client: interrupted while opening its sessions");
    ClientLane lane;
    REMEX_ASSIGN_OR_RETURN(lane.session, session.ConnectAnother());
    auto module = lane.session->LoadModuleCached(model.executable, model.name);
    if (!module.ok()) return module.status().WithContext("from-client session " + std::to_string(i));
    REMEX_ASSIGN_OR_RETURN(lane.vm, lane.session->CreateVm(module->handle));
    std::vector<uint64_t> inputs;
    for (const npy::Array& a : model.inputs) {
      REMEX_ASSIGN_OR_RETURN(client::RemoteTensor t, lane.session->Upload(a));
      inputs.push_back(t.handle);
    }
    REMEX_RETURN_IF_ERROR(lane.session->SetInputs(lane.vm, model.function, inputs));
    lanes.push_back(std::move(lane));
  }
  LoadOptions o = options;
  o.audit_samples = 0;  // the outputs stay on the server: the server scenarios audit
  auto run = RunLevels(
      [&](const client::LoadTestOptions& req) {
        return DriveFromClient(lanes, model.function, req, interrupt);
      },
      o, interrupt);
  if (run.ok()) run->options.from_client = true;
  return run;
}

}  // namespace remex::tooling
