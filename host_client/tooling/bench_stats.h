// Summary statistics of benchmark samples, percentiles with distribution-free confidence
// intervals, and the measurement-window stability verdict of `remex bench` (and the
// programs in bench/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace remex::bench {

// Statistics of a set of samples, in the samples' own unit.
struct SampleStats {
  size_t count = 0;
  double mean = 0;
  double median = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
  // Population standard deviation (divides by n, numpy.std's default ddof=0).
  double std = 0;
};

// The q-th percentile (0 <= q <= 100) of `sorted` (ascending, non-empty) by linear
// interpolation between the two nearest ranks, as numpy.percentile's default
// ("linear"): rank = q / 100 * (n - 1).
double Percentile(std::span<const double> sorted, double q);

// Statistics of `samples` (any order). All zero for an empty span.
SampleStats Summarize(std::span<const double> samples);

// ---- Percentiles with confidence intervals ---------------------------------------------
//
// A distribution-free confidence interval for the q-th percentile x_q from order
// statistics: with X_(1) <= ... <= X_(n) the sorted samples and B ~ Binomial(n, q/100)
// the number of samples below x_q,
//   P(X_(l) <= x_q <= X_(u)) >= P(l <= B <= u - 1)
// for any distribution (with equality for a continuous one). This is the bound MLPerf
// LoadGen's early stopping rests on; see also Hahn & Meeker, "Statistical Intervals",
// ch. 5. The binomial CDF is Boost.Math's.

struct PercentileEstimate {
  double q = 0;      // the percentile, 0..100
  double value = 0;  // the point estimate: Percentile(sorted, q)
  // A pair of ranks reaches `confidence`; when false, lower/upper/ranks/coverage are 0
  // ("not enough samples": MinSamplesToBound(q, confidence) tells how many are).
  bool bounded = false;
  double lower = 0, upper = 0;            // X_(lower_rank), X_(upper_rank)
  size_t lower_rank = 0, upper_rank = 0;  // 1-based ranks in the sorted samples
  double confidence = 0;                  // asked for, in (0, 1)
  double coverage = 0;                    // P(lower_rank <= B <= upper_rank - 1) >= confidence
};

// The q-th percentile of `sorted` (ascending) with its two-sided confidence interval
// [X_(l), X_(u)] at `confidence` (0.95 = 95 %): among the rank pairs 1 <= l < u <= n
// whose coverage reaches `confidence`, the narrowest (u - l smallest); between equally
// narrow pairs the one whose middle lies closest to the point estimate's rank
// 1 + q / 100 * (n - 1), then the one of larger coverage. Not bounded when no pair
// reaches `confidence` (too few samples, or q 0 or 100: the extremes of a distribution
// cannot be bounded from a sample). Precondition: 0 <= q <= 100 and 0 < confidence < 1
// (values outside are clamped / give an unbounded estimate). O(n) CDF evaluations.
PercentileEstimate EstimatePercentile(std::span<const double> sorted, double q, double confidence);

// The fewest samples from which EstimatePercentile(q, confidence) is bounded: the
// smallest n with P(1 <= B <= n - 1) >= confidence, since [X_(1), X_(n)] is the widest
// pair. 6 for the median, 29 for p90 and 299 for p99 at 95 %. 0 when no count bounds it
// (q 0 or 100, or confidence outside (0, 1)).
size_t MinSamplesToBound(double q, double confidence);

// ---- Measurement windows and stability ------------------------------------------------
//
// Stability judged over measurement windows as Triton's perf_analyzer judges it
// (--stability-percentage over its measurement windows): the last 3 windows agree within
// the threshold on both throughput and latency.

// One sample of a run.
struct TimedSample {
  double end_s = 0;    // when the sample ended, seconds since the run's start
  double latency = 0;  // its latency, in any unit (the windows' latency is in the same)
  uint64_t calls = 0;  // how many calls (queries) it represents
};

struct WindowSummary {
  double start_s = 0, duration_s = 0;  // the window (start_s, start_s + duration_s]
  size_t samples = 0;                  // samples that ended in it
  // The calls of those samples over the time from the last sample end before the
  // window (or the run's start) to the last end in it: completions per second, free of
  // the rounding a count over the window's fixed length suffers when samples are long.
  // 0 when the window has no sample.
  double throughput_per_s = 0;
  double latency = 0;  // percentile q of those samples' latencies; 0 when none
};

// The run cut into consecutive windows of `window_s` seconds from 0; a sample belongs to
// the window its end falls in. The last window is dropped when partial (it ends after
// the last sample's end), unless it is the only one: a run shorter than one window is
// one window as long as the run. A window that no sample ended in is kept, samples 0.
// Empty for no samples or window_s <= 0. `samples` must be ordered by end_s.
std::vector<WindowSummary> SplitIntoWindows(std::span<const TimedSample> samples, double window_s, double q);

struct WindowStability {
  bool stable = false;
  size_t windows = 0;    // windows judged (the last `last`), 0 when too few
  double threshold = 0;  // allowed deviation from the mean, 0.10 = 10 %
  // The largest relative deviation |x - mean| / mean of the judged windows' throughput
  // and latency from their mean; 0 when not judged.
  double throughput_deviation = 0;
  double latency_deviation = 0;
  // "stable: ...", "unstable: throughput moved ..." / "... latency moved ...", "unstable:
  // window K has no sample" or "too few windows (N of K)".
  std::string verdict;
};

inline constexpr size_t kDefaultStableWindows = 3;
inline constexpr double kDefaultStableThreshold = 0.10;

// Stable when the last `last` windows (at least 1) each have samples and both the
// throughput and the latency of each lie within +-threshold of those windows' mean.
WindowStability CheckWindowStability(std::span<const WindowSummary> windows,
                                     size_t last = kDefaultStableWindows,
                                     double threshold = kDefaultStableThreshold);

}  // namespace remex::bench
