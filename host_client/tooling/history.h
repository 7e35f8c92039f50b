// The history of a results store judged (`remex regressions`, `remex suite
// --regressions`): each series' newest runs against its earlier ones, with the method of
// regression.h (host_client/tooling/README.md, "Regression detection").
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/tooling/regression.h"
#include "host_client/tooling/results_store.h"

namespace remex::tooling {

// One series of the store, judged.
struct SeriesFinding {
  SeriesInfo series;
  regression::Finding finding;
  // The store's run ids in `finding` (baseline, excluded, candidates) are decimal
  // strings of StoredRun::id.
};

// Judges every series of `store` that `filter` selects (model, device class, since;
// series_key for one): its passing runs with a median (verdict "pass" and a summary
// median_ms: bench runs and suite bench cases; checks and failed runs never count), the newest `options.baseline_runs +
// options.confirmations` of them, each with its raw samples (ms in the store, seconds to
// Judge). Series whose runs are too few come back as insufficient data. The most
// recently recorded series first. Errors of the store (UNAVAILABLE) and of `options`
// (INVALID_ARGUMENT naming the field).
StatusOr<std::vector<SeriesFinding>> FindRegressions(ResultsStore& store, const HistoryFilter& filter,
                                                     const regression::Options& options);

// A finding's judgement as JSON: {state, change_pct, ci_low_pct, ci_high_pct,
// confidence, p_value, baseline_cv_pct, baseline_runs, excluded_runs, candidate_runs
// (run ids, numbers), reason}: one entry of RegressionsJson without its series and
// candidates, and the dashboard's finding of a series.
nlohmann::json FindingJson(const regression::Finding& finding);

// JSON of `remex regressions --json`: {"schema": "remex.regressions", "schema_version":
// 1, "options": {baseline_runs, min_baseline_runs, confirmations, alpha, min_effect,
// max_baseline_cv}, "findings": [{series_key, model_name, model_hash, scenario,
// device_class, state, change_pct, ci_low_pct, ci_high_pct, confidence, p_value,
// baseline_cv_pct, baseline_runs, excluded_runs, candidate_runs (run ids, numbers),
// candidates: [{id, median_ms, change_pct, z, outside_baseline, p_value, hl_change_pct,
// hl_ci_low_pct, hl_ci_high_pct}], reason}, ...], "regressions": N}.
nlohmann::json RegressionsJson(const std::vector<SeriesFinding>& findings, const regression::Options& options);

// The number of findings in state regression.
size_t CountRegressions(const std::vector<SeriesFinding>& findings);

}  // namespace remex::tooling
