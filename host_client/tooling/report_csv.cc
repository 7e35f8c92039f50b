#include "host_client/tooling/report_csv.h"

#include <cmath>
#include <vector>

namespace remex::tooling {
namespace {

using nlohmann::json;

// `j[key]` when `j` is an object holding a number there, else null.
const json& Number(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? *it : kNull;
}

// Shortest round-trip text of a number; empty for null, NaN and infinities.
std::string Field(const json& number) {
  if (!number.is_number()) return "";
  if (number.is_number_float() && !std::isfinite(number.get<double>())) return "";
  return number.dump();
}

void Row(const std::vector<std::string>& fields, std::string& out) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += fields[i];
  }
  out += "\r\n";
}

// The entry of `level.percentiles` for percentile `q` (50, 90, 99), or null.
const json& Percentile(const json& level, int q) {
  static const json kNull;
  auto it = level.find("percentiles");
  if (it == level.end() || !it->is_array()) return kNull;
  for (const json& p : *it) {
    if (p.is_object() && Number(p, "q").is_number() && Number(p, "q").get<double>() == q) return p;
  }
  return kNull;
}

void LevelRows(const json& levels, std::string& out) {
  Row({"concurrency", "target_qps", "queries", "duration_s", "throughput_qps", "p50_ms", "p50_lower_ms",
       "p50_upper_ms", "p90_ms", "p90_lower_ms", "p90_upper_ms", "p99_ms", "p99_lower_ms", "p99_upper_ms",
       "mean_ms", "max_ms", "late", "dropped"},
      out);
  for (const json& level : levels) {
    if (!level.is_object()) continue;
    const json empty = json::object();
    const json& latency =
        level.contains("latency_ms") && level["latency_ms"].is_object() ? level["latency_ms"] : empty;
    std::vector<std::string> fields = {Field(Number(level, "concurrency")),
                                       Field(Number(level, "target_qps")), Field(Number(level, "queries")),
                                       Field(Number(level, "duration_s")),
                                       Field(Number(level, "throughput_qps"))};
    for (int q : {50, 90, 99}) {
      fields.push_back(Field(Number(latency, ("p" + std::to_string(q)).c_str())));
      const json& p = Percentile(level, q);
      bool bounded = p.is_object() && p.contains("bounded") && p["bounded"] == true;
      fields.push_back(bounded ? Field(Number(p, "lower_ms")) : "");
      fields.push_back(bounded ? Field(Number(p, "upper_ms")) : "");
    }
    for (const char* key : {"mean", "max"}) fields.push_back(Field(Number(latency, key)));
    for (const char* key : {"late", "dropped"}) fields.push_back(Field(Number(level, key)));
    Row(fields, out);
  }
}

}  // namespace

std::string BenchCsv(const json& bench) {
  std::string out;
  if (bench.is_object() && bench.contains("load") && bench["load"].is_object()) {
    const json& levels = bench["load"].contains("levels") ? bench["load"]["levels"] : json();
    LevelRows(levels.is_array() ? levels : json::array(), out);
    return out;
  }
  Row({"sample", "latency_ms"}, out);
  if (!bench.is_object() || !bench.contains("benchmark") || !bench["benchmark"].is_object()) return out;
  const json& samples = bench["benchmark"].contains("samples_ms") ? bench["benchmark"]["samples_ms"] : json();
  if (!samples.is_array()) return out;
  for (size_t i = 0; i < samples.size(); ++i) Row({std::to_string(i), Field(samples[i])}, out);
  return out;
}

}  // namespace remex::tooling
