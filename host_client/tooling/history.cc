#include "host_client/tooling/history.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

namespace remex::tooling {
namespace {

std::vector<int64_t> Ids(const std::vector<std::string>& ids) {
  std::vector<int64_t> out;
  for (const std::string& id : ids) out.push_back(std::strtoll(id.c_str(), nullptr, 10));
  return out;
}

}  // namespace

StatusOr<std::vector<SeriesFinding>> FindRegressions(ResultsStore& store, const HistoryFilter& filter,
                                                     const regression::Options& options) {
  REMEX_RETURN_IF_ERROR(regression::CheckOptions(options));
  REMEX_ASSIGN_OR_RETURN(std::vector<SeriesInfo> series, store.ListSeries(filter));
  const size_t wanted = options.baseline_runs + options.confirmations;
  std::vector<SeriesFinding> out;
  for (SeriesInfo& s : series) {
    HistoryFilter one = filter;
    one.series_key = s.series_key;
    one.limit = 0;
    REMEX_ASSIGN_OR_RETURN(std::vector<StoredRun> runs, store.ListRuns(one));
    std::vector<const StoredRun*> passing;
    for (const StoredRun& r : runs) {
      if (r.verdict != "pass") continue;  // a check has no median; a failed run never counts
      if (!r.summary.is_object() || !r.summary.contains("median_ms") || !r.summary["median_ms"].is_number()) continue;
      if (!(r.summary["median_ms"].get<double>() > 0)) continue;
      passing.push_back(&r);
    }
    if (passing.size() > wanted) passing.erase(passing.begin(), passing.end() - static_cast<ptrdiff_t>(wanted));
    regression::Series judged;
    judged.name = s.model_name + " " + s.scenario + " " + s.device_class;
    int64_t last_ms = 0;
    for (const StoredRun* r : passing) {
      regression::Run run;
      run.id = std::to_string(r->id);
      // Runs are listed oldest first; a clock that went back keeps that order.
      last_ms = std::max(last_ms, UtcIso8601Millis(r->recorded_at).value_or(0));
      run.time_ms = last_ms;
      run.median_s = r->summary["median_ms"].get<double>() / 1000.0;
      if (r->sample_count > 0) {
        REMEX_ASSIGN_OR_RETURN(std::vector<double> ms, store.Samples(r->id));
        for (double v : ms) {
          if (v > 0 && std::isfinite(v)) run.samples_s.push_back(v / 1000.0);
        }
      }
      judged.runs.push_back(std::move(run));
    }
    auto finding = regression::Judge(judged, options);
    if (!finding.ok()) return finding.status().WithContext("series " + s.series_key);
    out.push_back({std::move(s), std::move(finding).value()});
  }
  return out;
}

size_t CountRegressions(const std::vector<SeriesFinding>& findings) {
  size_t n = 0;
  for (const SeriesFinding& f : findings) n += f.finding.verdict == regression::Verdict::kRegression;
  return n;
}

nlohmann::json FindingJson(const regression::Finding& f) {
  return {{"state", std::string(regression::VerdictName(f.verdict))},
          {"change_pct", f.change_pct},
          {"ci_low_pct", f.ci_low_pct},
          {"ci_high_pct", f.ci_high_pct},
          {"confidence", f.confidence},
          {"p_value", f.p_value},
          {"baseline_cv_pct", f.baseline_cv_pct},
          {"baseline_runs", Ids(f.baseline_runs)},
          {"excluded_runs", Ids(f.excluded_runs)},
          {"candidate_runs", Ids(f.candidate_runs)},
          {"reason", f.reason}};
}

nlohmann::json RegressionsJson(const std::vector<SeriesFinding>& findings, const regression::Options& options) {
  nlohmann::json list = nlohmann::json::array();
  for (const SeriesFinding& sf : findings) {
    const regression::Finding& f = sf.finding;
    nlohmann::json candidates = nlohmann::json::array();
    for (const regression::CandidateRun& c : f.candidates) {
      candidates.push_back({{"id", std::strtoll(c.id.c_str(), nullptr, 10)},
                            {"median_ms", c.median_s * 1000.0},
                            {"change_pct", c.change_pct},
                            {"z", std::isfinite(c.z) ? nlohmann::json(c.z) : nlohmann::json(nullptr)},
                            {"outside_baseline", c.outside_baseline},
                            {"p_value", c.p_value},
                            {"hl_change_pct", c.hl_change_pct},
                            {"hl_ci_low_pct", c.hl_ci_low_pct},
                            {"hl_ci_high_pct", c.hl_ci_high_pct}});
    }
    nlohmann::json entry = FindingJson(f);
    entry["series_key"] = sf.series.series_key;
    entry["model_name"] = sf.series.model_name;
    entry["model_hash"] = sf.series.model_hash;
    entry["scenario"] = sf.series.scenario;
    entry["device_class"] = sf.series.device_class;
    entry["candidates"] = candidates;
    list.push_back(std::move(entry));
  }
  return {{"schema", "remex.regressions"},
          {"schema_version", 1},
          {"options",
           {{"baseline_runs", options.baseline_runs},
            {"min_baseline_runs", options.min_baseline_runs},
            {"confirmations", options.confirmations},
            {"alpha", options.alpha},
            {"min_effect", options.min_effect},
            {"max_baseline_cv", options.max_baseline_cv}}},
          {"findings", list},
          {"regressions", CountRegressions(findings)}};
}

}  // namespace remex::tooling
