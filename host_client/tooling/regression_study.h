// A seeded study of regression::Judge on synthetic series with planted steps: the
// detection rate and the false-positive rate of a set of options (bench/regression_eval
// prints it; regression_test.cc runs a small one). Deterministic for a seed on every
// platform: the generator is std::mt19937_64 (its output is fixed by the standard) with
// our own uniform and normal transforms, not std::*_distribution (implementation-defined).
#pragma once

#include <cstdint>
#include <vector>

#include "host_client/tooling/regression.h"

namespace remex::regression {

// The noise of the synthetic series, chosen to look like latency on a shared CI machine.
struct NoiseModel {
  size_t samples_per_run = 300;
  // Each series' median latency: log-uniform in [min, max] seconds.
  double min_median_s = 0.001, max_median_s = 0.05;
  // Per-sample noise: lognormal, sd of the log uniform in [min, max] per series, AR(1) in
  // sample order with coefficient `autocorrelation` (consecutive samples are alike).
  double min_sample_sigma = 0.03, max_sample_sigma = 0.15;
  double autocorrelation = 0.6;
  // A sample is a spike (x1.5 to x4) with this probability.
  double spike_probability = 0.01;
  // Run-to-run drift: each run's median moves by a lognormal factor with this sd of the log.
  double run_drift_sd = 0.01;
  // An outlier run (a noisy neighbour) with this probability: 5 % to 30 % slower.
  double outlier_run_probability = 0.03;
};

struct StudyOptions {
  uint64_t seed = 1;
  size_t series_per_step = 1000;
  std::vector<double> steps = {0.0, 0.02, 0.05, 0.20};  // planted relative slow-downs
  NoiseModel noise;
  Options judge;  // baseline_runs + confirmations runs per series; the step starts at the
                  // first candidate, so every candidate carries it
};

struct StepResult {
  double step = 0;
  size_t series = 0;
  size_t regressions = 0, improvements = 0, no_change = 0, too_noisy = 0, insufficient = 0;
  // Detection rate: regressions / series (step > 0). False-positive rate: (regressions +
  // improvements) / series (step 0); for a step > 0, improvements / series.
  double detection_rate = 0;
  double false_positive_rate = 0;
  // The fraction of judged series (not too noisy) whose run-level interval contains the
  // planted step, and the mean reported change of those series, %.
  double ci_coverage = 0;
  double mean_change_pct = 0;
};

// One synthetic series of `runs` runs whose last `step_runs` runs are slower by `step`.
Series MakeSyntheticSeries(uint64_t seed, const NoiseModel& noise, size_t runs, size_t step_runs,
                           double step);

// Runs the study. INVALID_ARGUMENT for bad judge options.
StatusOr<std::vector<StepResult>> RunStudy(const StudyOptions& options);

}  // namespace remex::regression
