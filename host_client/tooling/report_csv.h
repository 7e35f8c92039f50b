// A bench report (the JSON of report_json.h, schema remex.bench) as CSV, for
// spreadsheets and plotting scripts: `remex bench --csv FILE`. The input is the JSON, so
// that every front end with a report writes the same file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace remex::tooling {

// RFC 4180 CSV: a header row, then one row per record, lines ended by "\r\n"; numbers
// only (shortest round-trip form), an empty field where a value is absent or null.
//
// With a "load" object (a load scenario or a --concurrency sweep): one row per level of
// "load.levels", in their order, columns
//   concurrency, target_qps, queries, duration_s, throughput_qps,
//   p50_ms, p50_lower_ms, p50_upper_ms, p90_ms, ..., p99_upper_ms, mean_ms, max_ms,
//   late, dropped
// (pNN_lower_ms/pNN_upper_ms: the bounds of the level's confidence interval of that
// percentile, empty when the sample count cannot bound it).
// Without: one row per sample of "benchmark.samples_ms", columns sample (0-based),
// latency_ms (the sample's mean time per call).
// Fields of the wrong type are left empty: the CSV never fails.
std::string BenchCsv(const nlohmann::json& bench);

}  // namespace remex::tooling
