#include "host_client/tooling/self_test_history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <span>

#include "base/content_hash.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/tooling/regression.h"

namespace remex::tooling {
namespace {

using json = nlohmann::json;

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// The samples a judgement may use: finite and > 0, ms to seconds.
std::vector<double> JudgedSeconds(const std::vector<double>& ms) {
  std::vector<double> out;
  for (double v : ms) {
    if (std::isfinite(v) && v > 0) out.push_back(v / 1000.0);
  }
  return out;
}

}  // namespace

std::string_view DriftStateName(DriftState state) {
  switch (state) {
    case DriftState::kNotJudged:
      return "not judged";
    case DriftState::kInsufficientHistory:
      return "insufficient history";
    case DriftState::kTooNoisy:
      return "too noisy";
    case DriftState::kNoDrift:
      return "no drift";
    case DriftState::kDrift:
      return "drift";
  }
  return "not judged";
}

RunRecord SelfTestRecord(const SelfTestRun& run) {
  RunRecord r;
  r.recorded_at = UtcIso8601(run.unix_s);
  r.kind = std::string(kSelfTestKind);
  FillRecordContextFromEnvironment(r);
  r.tags = {{"farm.pool", run.pool}, {"farm.device", run.id}, {"self-test.reason", run.reason}};
  r.model_name = std::string(kSelfTestKind);
  r.model_hash = ContentHash(std::as_bytes(std::span(run.description.data(), run.description.size())));
  r.compile_options = nullptr;
  r.scenario = std::string(kSelfTestKind);
  r.device_class = run.pool + "/" + run.id;
  r.device = run.device;
  r.samples_ms = run.samples_ms;
  const bench::SampleStats stats = bench::Summarize(run.samples_ms);
  r.summary = {{"count", stats.count}};
  if (stats.count > 0) {
    r.summary["median_ms"] = stats.median;
    r.summary["p90_ms"] = stats.p90;
    r.summary["min_ms"] = stats.min;
    r.summary["max_ms"] = stats.max;
  }
  r.verdict = run.error.empty() ? "pass" : "fail";
  r.error = run.error;
  r.report = {{"schema", "remex.self-test"},
              {"schema_version", 1},
              {"description", run.description},
              {"reason", run.reason}};
  return r;
}

StatusOr<DriftJudgement> JudgeSelfTestDrift(ResultsStore& store, const RunRecord& record,
                                            const DriftOptions& options) {
  if (!(std::isfinite(options.threshold) && options.threshold >= 0)) {
    return InvalidArgument("the drift threshold must be finite and >= 0");
  }
  DriftJudgement j;
  if (options.threshold == 0) {
    j.reason = "latency is not judged (drift threshold 0)";
    return j;
  }
  regression::Run candidate;
  candidate.id = "new";
  candidate.samples_s = JudgedSeconds(record.samples_ms);
  if (candidate.samples_s.empty()) {
    j.reason = "the self-test has no latency samples";
    return j;
  }
  regression::Options o;
  o.baseline_runs = options.history;
  o.min_baseline_runs = options.min_history;
  o.confirmations = 1;
  o.alpha = options.alpha;
  o.min_effect = options.threshold;
  o.max_baseline_cv = options.threshold;
  REMEX_RETURN_IF_ERROR(regression::CheckOptions(o));

  HistoryFilter filter;
  filter.series_key = record.SeriesKey();
  filter.verdict = "pass";
  filter.limit = options.history;
  REMEX_ASSIGN_OR_RETURN(std::vector<StoredRun> runs, store.ListRuns(filter));
  regression::Series series;
  series.name = record.device_class;
  int64_t last_ms = 0;
  for (const StoredRun& stored : runs) {
    regression::Run run;
    run.id = std::to_string(stored.id);
    last_ms = std::max(last_ms, UtcIso8601Millis(stored.recorded_at).value_or(0));  // a clock that went back keeps the order
    run.time_ms = last_ms;
    if (stored.sample_count > 0) {
      REMEX_ASSIGN_OR_RETURN(std::vector<double> ms, store.Samples(stored.id));
      run.samples_s = JudgedSeconds(ms);
    }
    if (run.samples_s.empty()) {
      const json& summary = stored.summary;
      if (!summary.is_object() || !summary.contains("median_ms") || !summary["median_ms"].is_number())
        continue;
      const double median_ms = summary["median_ms"].get<double>();
      if (!(std::isfinite(median_ms) && median_ms > 0)) continue;
      run.median_s = median_ms / 1000.0;
    }
    j.history_runs.push_back(stored.id);
    series.runs.push_back(std::move(run));
  }
  candidate.time_ms = std::max(last_ms, UtcIso8601Millis(record.recorded_at).value_or(0));
  series.runs.push_back(std::move(candidate));
  {
    std::vector<double> sorted = series.runs.back().samples_s;
    std::sort(sorted.begin(), sorted.end());
    j.median_ms = bench::Percentile(sorted, 50) * 1000.0;
  }
  const size_t history = series.runs.size() - 1;
  if (history < options.min_history) {
    j.state = DriftState::kInsufficientHistory;
    j.reason = "insufficient history: " + std::to_string(history) + " passing self-test" +
               (history == 1 ? "" : "s") + " of this device; judging its latency needs " +
               std::to_string(options.min_history);
    return j;
  }
  REMEX_ASSIGN_OR_RETURN(regression::Finding f, regression::Judge(series, o));
  j.change_pct = f.change_pct;
  j.history_median_ms = j.median_ms / (1 + f.change_pct / 100);
  std::string against = "median " + Format("%.4g", j.median_ms) + " ms, " + (f.change_pct >= 0 ? "+" : "") +
                        Format("%.1f", f.change_pct) + " % against its last " + std::to_string(history) +
                        " passing self-tests (" + Format("%.4g", j.history_median_ms) +
                        " ms; drift threshold " + Format("%g", options.threshold * 100) + " %)";
  if (!f.excluded_runs.empty()) against += ", run " + f.excluded_runs[0] + " set aside as an outlier";
  switch (f.verdict) {
    case regression::Verdict::kRegression:
      j.state = DriftState::kDrift;
      j.reason = "latency drift: " + against;
      break;
    case regression::Verdict::kTooNoisy:
      j.state = DriftState::kTooNoisy;
      j.reason = "too noisy to judge: " + f.reason;
      break;
    case regression::Verdict::kInsufficientData:
      j.state = DriftState::kInsufficientHistory;
      j.reason = "insufficient history: " + f.reason;
      break;
    default:
      j.state = DriftState::kNoDrift;
      j.reason = "no drift: " + against;
      break;
  }
  return j;
}

SelfTestOutcome JudgeAndRecordSelfTest(ResultsStore* store, const SelfTestRun& run,
                                       const DriftOptions& options) {
  SelfTestOutcome out;
  out.record = SelfTestRecord(run);
  if (!run.error.empty()) {
    out.drift.reason = "the self-test failed";
  } else if (!store) {
    out.drift.reason = "no results store";
  } else {
    auto drift = JudgeSelfTestDrift(*store, out.record, options);
    if (drift.ok()) {
      out.drift = std::move(drift).value();
    } else {
      out.store_status = drift.status();
      out.drift.reason = "the history could not be read: " + drift.status().message();
    }
  }
  if (out.drift.state == DriftState::kDrift) {
    out.record.verdict = "fail";
    out.record.error = "self-test: " + out.drift.reason;
  }
  out.record.report["drift"] = {{"state", std::string(DriftStateName(out.drift.state))},
                                {"reason", out.drift.reason},
                                {"change_pct", out.drift.change_pct},
                                {"threshold_pct", options.threshold * 100},
                                {"history_runs", out.drift.history_runs}};
  out.healthy = out.record.verdict == "pass";
  out.health = out.healthy ? "ok" : out.record.error;
  if (store && out.store_status.ok()) {
    auto id = store->Record(out.record);
    if (id.ok()) {
      out.run_id = *id;
    } else {
      out.store_status = id.status();
    }
  }
  return out;
}

}  // namespace remex::tooling
