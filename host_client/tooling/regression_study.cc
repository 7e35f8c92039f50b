#include "host_client/tooling/regression_study.h"

#include <cmath>
#include <numbers>
#include <random>

namespace remex::regression {
namespace {

// Uniform and normal variates from mt19937_64's standard-fixed output.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  double Normal() {  // Box-Muller
    const double u1 = 1 - Uniform(), u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace

Series MakeSyntheticSeries(uint64_t seed, const NoiseModel& noise, size_t runs, size_t step_runs,
                           double step) {
  Rng rng(seed);
  Series series;
  series.name = "synthetic-" + std::to_string(seed);
  const double log_median = rng.Uniform(std::log(noise.min_median_s), std::log(noise.max_median_s));
  const double sigma = rng.Uniform(noise.min_sample_sigma, noise.max_sample_sigma);
  const double phi = noise.autocorrelation;
  const double innovation = sigma * std::sqrt(1 - phi * phi);  // keeps the AR(1) at sd sigma
  for (size_t r = 0; r < runs; ++r) {
    Run run;
    run.id = "run-" + std::to_string(r);
    run.time_ms = static_cast<int64_t>(r) * 3'600'000;
    double run_log = log_median + noise.run_drift_sd * rng.Normal();
    if (rng.Uniform() < noise.outlier_run_probability) run_log += std::log(rng.Uniform(1.05, 1.30));
    if (r + step_runs >= runs) run_log += std::log1p(step);
    double e = sigma * rng.Normal();
    run.samples_s.reserve(noise.samples_per_run);
    for (size_t i = 0; i < noise.samples_per_run; ++i) {
      e = phi * e + innovation * rng.Normal();
      double v = std::exp(run_log + e);
      if (rng.Uniform() < noise.spike_probability) v *= rng.Uniform(1.5, 4.0);
      run.samples_s.push_back(v);
    }
    series.runs.push_back(std::move(run));
  }
  return series;
}

StatusOr<std::vector<StepResult>> RunStudy(const StudyOptions& options) {
  if (Status st = CheckOptions(options.judge); !st.ok()) return st;
  const size_t runs = options.judge.baseline_runs + options.judge.confirmations;
  std::vector<StepResult> results;
  for (size_t si = 0; si < options.steps.size(); ++si) {
    StepResult r;
    r.step = options.steps[si];
    r.series = options.series_per_step;
    size_t judged = 0, covered = 0;
    double change_sum = 0;
    for (size_t i = 0; i < options.series_per_step; ++i) {
      // One seed per (study seed, step, series); the same noise under every step.
      const uint64_t seed = options.seed * 1'000'003 + i;
      const Series series =
          MakeSyntheticSeries(seed, options.noise, runs, options.judge.confirmations, r.step);
      auto finding = Judge(series, options.judge);
      if (!finding.ok()) return finding.status();
      switch (finding->verdict) {
        case Verdict::kRegression:
          ++r.regressions;
          break;
        case Verdict::kImprovement:
          ++r.improvements;
          break;
        case Verdict::kNoChange:
          ++r.no_change;
          break;
        case Verdict::kTooNoisy:
          ++r.too_noisy;
          break;
        case Verdict::kInsufficientData:
          ++r.insufficient;
          break;
      }
      if (finding->verdict != Verdict::kTooNoisy && finding->verdict != Verdict::kInsufficientData) {
        ++judged;
        change_sum += finding->change_pct;
        const double planted = r.step * 100;
        if (finding->ci_low_pct <= planted && planted <= finding->ci_high_pct) ++covered;
      }
    }
    const double n = static_cast<double>(r.series);
    if (n > 0) {
      r.detection_rate = static_cast<double>(r.regressions) / n;
      r.false_positive_rate =
          static_cast<double>(r.step == 0 ? r.regressions + r.improvements : r.improvements) / n;
    }
    if (judged > 0) {
      r.ci_coverage = static_cast<double>(covered) / static_cast<double>(judged);
      r.mean_change_pct = change_sum / static_cast<double>(judged);
    }
    results.push_back(r);
  }
  return results;
}

}  // namespace remex::regression
