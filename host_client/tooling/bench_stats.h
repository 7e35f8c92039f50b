// Summary statistics of benchmark samples and the stability verdict printed by
// `remex bench` (and the programs in bench/).
#pragma once

#include <cstddef>
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

// Stability of a run, modelled on perf_analyzer's --stability-percentage, judged on two
// scales:
//   - the last `window` samples: max / min <= 1 + threshold (the run has settled);
//   - the whole sample set: interquartile range / median <= threshold (the run did not
//     wander: 35 ms .. 880 ms samples are not stable, whatever the last few say).
// Both must hold.
struct Stability {
  size_t window = 0;          // samples looked at (the last `window`)
  double threshold = 0;       // allowed spread, 0.10 = 10 %
  double max_over_min = 0;    // measured spread of the window (0 when undefined)
  double iqr_over_median = 0; // measured spread of the whole set (0 when undefined)
  bool stable = false;
  // "stable", "unstable: the last K samples spread ...", "unstable: the samples spread
  // ..." or "too few samples".
  std::string verdict;
};

// Defaults: 3 samples, 10 %. Fewer than `window` samples (or window < 2) is "too few
// samples" (not stable); a window whose minimum is <= 0 is unstable.
inline constexpr size_t kDefaultStableWindow = 3;
inline constexpr double kDefaultStableThreshold = 0.10;
Stability CheckStability(std::span<const double> samples, size_t window = kDefaultStableWindow,
                         double threshold = kDefaultStableThreshold);

// The fewest samples whose p99 means something (one sample in a hundred above it):
// reports print p99 from this count on.
inline constexpr size_t kMinSamplesForP99 = 100;

}  // namespace remex::bench
