// Regression detection over a series of benchmark runs (`remex regressions`): the
// newest runs of one series judged against the runs before them.
//
// The method, and why
// -------------------
// Raw latency samples within one run are autocorrelated (warm caches, clock boosts, a
// neighbour's load) and the median moves from run to run by a percent or so on a quiet
// machine. A test on pooled raw samples alone treats thousands of samples as independent
// and flags that run-to-run drift as significant. So the judgement stands on two levels,
// both of which must agree, and on a minimum effect size:
//
//  1. Run level (the unit of evidence is the run). Each run is summarised by its median
//     m (of its raw samples, or its summary median when it has none). On the log scale,
//     the baseline's B medians give a centre (their mean, i.e. the geometric mean of the
//     medians) and a run-to-run spread s (their sample standard deviation). A candidate
//     run is outside the baseline when its log median lies outside the baseline's
//     two-sided prediction interval for one new run at level 1 - alpha,
//       |log m - centre| > t(B - 1, 1 - alpha / 2) * s * sqrt(1 + 1 / B)
//     (Hahn & Meeker, "Statistical Intervals", 2nd ed., §4.4). This is conbench's
//     lookback z-score (the distance of the newest result from the mean of the lookback
//     window in standard deviations, flagged beyond a fixed z) with the threshold taken
//     from Student's t so that a baseline of a handful of runs is not over-trusted.
//  2. Sample level. When the candidate and the baseline have raw samples, a two-sided
//     Mann-Whitney U test between the candidate's samples and the baseline's pooled
//     samples (average ranks for ties, the tie-corrected variance and the normal
//     approximation with continuity correction: Hollander, Wolfe & Chicken,
//     "Nonparametric Statistical Methods", 3rd ed., §4.1) must give p < alpha, and the
//     Hodges-Lehmann estimate of the shift must point the same way (ibid. §4.2-4.3).
//  3. Effect size. The candidate's median differs from the baseline's centre by at least
//     min_effect (relative; 2 % by default): smaller changes are not reported even when
//     significant.
//
// One outlier run in the baseline (a noisy neighbour) is set aside, named in the finding,
// when its median lies outside the prediction interval of the other baseline runs at
// level 1 - alpha / B (Bonferroni over the B runs tried; only when at least
// min_baseline_runs remain).
//
// A candidate run passing all three is "slower" or "faster". Confirmation follows the
// consecutive-violation rule of PyTorch's HUD: the newest `confirmations` runs (2 by
// default) are the candidates and all of them must be slower (a regression) or all
// faster (an improvement). A shift seen in some but not all of them is reported as no
// change, and the reason names the unconfirmed runs: once the next run repeats it, the
// series is judged a regression.
//
// The five states
//   regression         every candidate run is slower (faster when higher_is_better)
//   improvement        every candidate run is faster
//   no change          otherwise (including an unconfirmed shift, named in the reason)
//   insufficient data  fewer than min_baseline_runs + confirmations runs
//   too noisy          the baseline's run-to-run spread s (≈ the coefficient of variation
//                      of its medians) exceeds max_baseline_cv: the baseline cannot tell
//                      a change of a few percent from its own noise
//
// The change and its confidence interval reported are run-level: the ratio of the
// candidates' geometric-mean median to the baseline's, with the two-sample Student t
// interval on the log medians (pooled variance, B + K - 2 degrees of freedom) at level
// 1 - alpha, so the interval carries the run-to-run noise that a sample-level interval
// would hide. Each candidate run also carries its sample-level Hodges-Lehmann estimate
// with the distribution-free interval from the Mann-Whitney statistic. Quantiles are
// Boost.Math's.
//
// docs/benchmarks.md ("Regression detection on synthetic series") reports the detection
// and false-positive rates of the defaults on synthetic series with planted steps.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace remex::regression {

// One benchmark run of a series.
struct Run {
  std::string id;       // the results store's run id, named in findings
  int64_t time_ms = 0;  // when it ran, Unix milliseconds; runs are given in time order
  // Raw per-query latencies, seconds, each finite and > 0. May be empty when only the
  // summary below is kept: the run then counts at run level only.
  std::vector<double> samples_s;
  std::optional<double> median_s;  // summary median, seconds; used when samples_s is empty
};

// One benchmark series (a model, scenario and device kept apart from others).
struct Series {
  std::string name;
  std::vector<Run> runs;  // oldest first
};

struct Options {
  // The baseline: up to this many runs before the candidates (the newest ones).
  size_t baseline_runs = 5;
  // Fewer baseline runs than this: insufficient data. At least 2 (a spread needs two).
  size_t min_baseline_runs = 3;
  // The candidates: the newest runs, all of which must show a change (>= 1).
  size_t confirmations = 2;
  // Significance level of each test, in (0, 1); the interval's level is 1 - alpha. With
  // two confirmations, 0.05 keeps false positives near 1 % (docs/benchmarks.md).
  double alpha = 0.05;
  // The smallest relative change of the median reported, >= 0 (0.02 = 2 %).
  double min_effect = 0.02;
  // The largest run-to-run spread of the baseline's medians judged, > 0 (0.05 = 5 %).
  double max_baseline_cv = 0.05;
  // Latency (false): larger is worse. Throughput (true): larger is better.
  bool higher_is_better = false;
};

enum class Verdict { kRegression, kImprovement, kNoChange, kInsufficientData, kTooNoisy };

// "regression", "improvement", "no change", "insufficient data", "too noisy".
std::string_view VerdictName(Verdict verdict);

// One candidate run against the baseline.
struct CandidateRun {
  std::string id;
  double median_s = 0;
  double change_pct = 0;  // its median against the baseline's centre, %
  // Run level: (log m - centre) / (s * sqrt(1 + 1 / B)), and whether it lies beyond
  // t(B - 1, 1 - alpha / 2). Infinite when s is 0 and the median differs.
  double z = 0;
  bool outside_baseline = false;
  // Sample level; false (and the fields 0) when it or the baseline has no raw samples.
  bool has_samples = false;
  double p_value = 1;                            // Mann-Whitney U, two-sided
  double hl_change_pct = 0;                      // Hodges-Lehmann shift of the log latencies, as %
  double hl_ci_low_pct = 0, hl_ci_high_pct = 0;  // its interval at level 1 - alpha
  // +1: passes every test and is worse (slower for latency); -1: better; 0: neither.
  int direction = 0;
};

struct Finding {
  std::string series;
  Verdict verdict = Verdict::kInsufficientData;
  // Run level, candidates against baseline (0 for insufficient data): the change of the
  // geometric-mean median in %, its interval at level `confidence`, the t-test p-value.
  double change_pct = 0;
  double ci_low_pct = 0, ci_high_pct = 0;
  double confidence = 0;
  double p_value = 1;
  double baseline_cv_pct = 0;               // the baseline's spread s, in %
  std::vector<std::string> baseline_runs;   // ids, oldest first
  std::vector<std::string> excluded_runs;   // the baseline's outlier run set aside, if any
  std::vector<std::string> candidate_runs;  // ids, oldest first
  std::vector<CandidateRun> candidates;     // as candidate_runs
  std::string reason;                       // one sentence for people
};

// Checks `options`; INVALID_ARGUMENT naming the field otherwise.
Status CheckOptions(const Options& options);

// Judges the newest runs of `series`. INVALID_ARGUMENT for bad options, a sample that
// is not finite and > 0, a run with neither samples nor a positive summary median, or
// runs out of time order (each names the run). O(N log N) in the samples of the
// baseline and the candidates.
StatusOr<Finding> Judge(const Series& series, const Options& options);

// ---- The statistics, exposed for tests -------------------------------------------------

struct MannWhitney {
  double u = 0;        // U of `y`: pairs (x, y) with y > x, ties counting 1/2
  double z = 0;        // standardised, continuity-corrected; > 0 when y tends larger
  double p_value = 1;  // two-sided, normal approximation; 1 for an empty side
};

// The Mann-Whitney U test of `y` against `x` (any order), ties at average ranks with
// the tie-corrected variance.
MannWhitney MannWhitneyU(std::span<const double> x, std::span<const double> y);

struct ShiftEstimate {
  double estimate = 0;       // median of the pairwise differences y_j - x_i
  double low = 0, high = 0;  // distribution-free interval at `confidence`
};

// The Hodges-Lehmann estimate of the shift of `y` against `x` with the interval from
// the Mann-Whitney statistic: the C-th smallest and C-th largest of the n*m pairwise
// differences, C = floor(n m / 2 - z(1 - (1 - confidence) / 2) sqrt(n m (n + m + 1) / 12))
// (normal approximation; at least 1). Both spans non-empty; O((n + m) log range) by
// selection over the sorted pairs, not O(n m).
ShiftEstimate HodgesLehmann(std::span<const double> x, std::span<const double> y, double confidence);

}  // namespace remex::regression
