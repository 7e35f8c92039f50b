// Test fixture of tests/dashboard_test.py: records what real commands cannot make on
// demand into a results store, through ResultsStore::Record.
//
//   dashboard_seed URL regression RUN_ID
//     Seven copies of the real run RUN_ID (its report, samples and profile) in a series
//     of their own (device class "seeded:regression", tag seeded=regression), a minute
//     apart and ending now: five with their latencies scaled by 1.000, 1.004, 0.997,
//     1.002, 0.999 (a quiet baseline), then two scaled by 1.5 and 1.52 (a confirmed
//     regression, as remex regressions judges it). Prints the seven ids.
//     The copies' samples are not the real run's: on a loaded machine those spread so
//     widely that a 1.5x shift is not significant at the sample level, and the verdict
//     would hang on the machine's load. Each copy holds as many samples, set within
//     +-1 % of the real run's median (a fixed pattern), then scaled.
// Exit status 0, or 1 with the error on stderr.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "host_client/tooling/results_store.h"

namespace {

using nlohmann::json;
using remex::tooling::RunRecord;

std::string Iso(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

int Die(const std::string& why) {
  std::fprintf(stderr, "dashboard_seed: %s\n", why.c_str());
  return 1;
}

// `j` with every number under the keys that hold latencies (ms) multiplied by `scale`.
void ScaleLatencies(json& j, double scale) {
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      const bool latency = key.size() > 3 && key.compare(key.size() - 3, 3, "_ms") == 0 &&
                           key != "min_repeat_ms" && key != "cooldown_ms" && key != "window_ms";
      if (latency && value.is_number()) {
        value = value.get<double>() * scale;
      } else if (latency && value.is_array()) {
        for (json& v : value) {
          if (v.is_number()) v = v.get<double>() * scale;
        }
      } else {
        ScaleLatencies(value, scale);
      }
    }
  } else if (j.is_array()) {
    for (json& e : j) ScaleLatencies(e, scale);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Die("usage: dashboard_seed URL regression RUN_ID");
  auto store = remex::tooling::OpenResultsStore(argv[1]);
  if (!store.ok()) return Die(store.status().ToString());
  const std::string mode = argv[2];
  const std::time_t now = std::time(nullptr);
  std::vector<RunRecord> records;
  if (mode == "regression") {
    const int64_t id = std::strtoll(argv[3], nullptr, 10);
    auto detail = (*store)->GetRun(id);
    auto report = (*store)->Report(id);
    auto samples = (*store)->Samples(id);
    if (!detail.ok() || !report.ok() || !samples.ok()) return Die("cannot read run " + std::string(argv[3]));
    if (samples->empty()) return Die("run " + std::string(argv[3]) + " has no samples");
    std::vector<double> sorted = *samples;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::vector<double> quiet;  // within +-1 % of the median: -1 %, -0.8 %, ... +1 % in a fixed order
    for (size_t j = 0; j < samples->size(); ++j) {
      quiet.push_back(median * (1 + 0.002 * static_cast<double>(static_cast<int>((j * 7) % 11) - 5)));
    }
    const std::vector<double> scales = {1.0, 1.004, 0.997, 1.002, 0.999, 1.5, 1.52};
    for (size_t i = 0; i < scales.size(); ++i) {
      RunRecord r;
      r.recorded_at = Iso(now - static_cast<std::time_t>(60 * (scales.size() - i)));
      r.kind = detail->run.kind;
      r.user = detail->run.user;
      r.git_commit = "seeded" + std::to_string(i);
      r.git_branch = "main";
      r.tags = {{"seeded", "regression"}};
      r.model_name = detail->series.model_name;
      r.model_hash = detail->series.model_hash;
      r.executable_hash = detail->executable_hash;
      r.compile_options = detail->series.compile_options;
      r.scenario = detail->series.scenario;
      r.device_class = "seeded:regression";
      r.device = detail->device;
      r.report = *report;
      ScaleLatencies(r.report, scales[i]);
      r.summary = detail->run.summary;
      ScaleLatencies(r.summary, scales[i]);
      for (double v : quiet) r.samples_ms.push_back(v * scales[i]);
      r.profile = r.report.contains("profile") ? r.report["profile"] : json(nullptr);
      r.verdict = "pass";
      records.push_back(std::move(r));
    }
  } else {
    return Die("unknown mode '" + mode + "'");
  }
  for (const RunRecord& r : records) {
    auto id = (*store)->Record(r);
    if (!id.ok()) return Die(id.status().ToString());
    std::printf("%lld\n", static_cast<long long>(*id));
  }
  return 0;
}
