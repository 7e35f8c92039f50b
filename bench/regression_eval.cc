// regression_eval: the detection rate and false-positive rate of the regression
// detection (host_client/tooling/regression.h) on seeded synthetic series with planted
// steps (host_client/tooling/regression_study.h: lognormal autocorrelated samples with
// spikes, run-to-run drift, occasional outlier runs). No server, no timing: the output
// depends only on the flags. docs/benchmarks.md has the table and the command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "host_client/tooling/regression_study.h"

namespace remex::bench {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{"regression_eval: regression detection on synthetic series with planted steps"};
  regression::StudyOptions study;
  regression::Options& judge = study.judge;
  regression::NoiseModel& noise = study.noise;
  bool json = false;
  app.add_option("--seed", study.seed, "seed of the series")->capture_default_str();
  app.add_option("--series", study.series_per_step, "series per step size")->capture_default_str();
  app.add_option("--steps", study.steps, "planted slow-downs, relative (0.05 = 5 %)")->capture_default_str();
  app.add_option("--samples", noise.samples_per_run, "latency samples per run")->capture_default_str();
  app.add_option("--drift", noise.run_drift_sd, "run-to-run sd of the log median")->capture_default_str();
  app.add_option("--outlier-runs", noise.outlier_run_probability, "probability of an outlier run")
      ->capture_default_str();
  app.add_option("--baseline-runs", judge.baseline_runs, "baseline window, runs")->capture_default_str();
  app.add_option("--min-baseline-runs", judge.min_baseline_runs, "fewest baseline runs judged")
      ->capture_default_str();
  app.add_option("--confirmations", judge.confirmations, "newest runs that must all show the change")
      ->capture_default_str();
  app.add_option("--alpha", judge.alpha, "significance level of each test")->capture_default_str();
  app.add_option("--min-effect", judge.min_effect, "smallest relative change reported")
      ->capture_default_str();
  app.add_option("--max-baseline-cv", judge.max_baseline_cv, "largest baseline spread judged")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  if (study.series_per_step == 0 || study.series_per_step > 1'000'000) {
    std::fprintf(stderr, "regression_eval: --series must be in [1, 1000000]\n");
    return 2;
  }
  if (noise.samples_per_run == 0 || noise.samples_per_run > 1'000'000) {
    std::fprintf(stderr, "regression_eval: --samples must be in [1, 1000000]\n");
    return 2;
  }
  auto results = regression::RunStudy(study);
  if (!results.ok()) {
    std::fprintf(stderr, "regression_eval: %s\n", results.status().ToString().c_str());
    return 2;
  }
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : *results) {
      rows.push_back({{"step", r.step},
                      {"series", r.series},
                      {"regression", r.regressions},
                      {"improvement", r.improvements},
                      {"no_change", r.no_change},
                      {"too_noisy", r.too_noisy},
                      {"insufficient_data", r.insufficient},
                      {"detection_rate", r.detection_rate},
                      {"false_positive_rate", r.false_positive_rate},
                      {"ci_coverage", r.ci_coverage},
                      {"mean_change_pct", r.mean_change_pct}});
    }
    nlohmann::json j = {{"seed", study.seed},
                        {"options",
                         {{"baseline_runs", judge.baseline_runs},
                          {"min_baseline_runs", judge.min_baseline_runs},
                          {"confirmations", judge.confirmations},
                          {"alpha", judge.alpha},
                          {"min_effect", judge.min_effect},
                          {"max_baseline_cv", judge.max_baseline_cv}}},
                        {"noise",
                         {{"samples_per_run", noise.samples_per_run},
                          {"autocorrelation", noise.autocorrelation},
                          {"run_drift_sd", noise.run_drift_sd},
                          {"outlier_run_probability", noise.outlier_run_probability},
                          {"spike_probability", noise.spike_probability}}},
                        {"steps", rows}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf(
      "| step | series | regression | improvement | no change | too noisy | detection rate | "
      "false-positive rate | CI coverage | mean change |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : *results) {
    char detection[32] = "-";
    if (r.step != 0) std::snprintf(detection, sizeof detection, "%.1f %%", r.detection_rate * 100);
    std::printf("| %g %% | %zu | %zu | %zu | %zu | %zu | %s | %.1f %% | %.1f %% | %+.2f %% |\n", r.step * 100,
                r.series, r.regressions, r.improvements, r.no_change, r.too_noisy, detection,
                r.false_positive_rate * 100, r.ci_coverage * 100, r.mean_change_pct);
  }
  return 0;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
