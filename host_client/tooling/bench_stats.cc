#include "host_client/tooling/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace remex::bench {

double Percentile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 100.0);
  double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

SampleStats Summarize(std::span<const double> samples) {
  SampleStats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(sorted.size());
  double ss = 0;
  for (double v : sorted) ss += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(ss / static_cast<double>(sorted.size()));
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = Percentile(sorted, 50);
  s.p90 = Percentile(sorted, 90);
  s.p99 = Percentile(sorted, 99);
  return s;
}

Stability CheckStability(std::span<const double> samples, size_t window, double threshold) {
  Stability st;
  st.window = window;
  st.threshold = threshold;
  if (window < 2 || samples.size() < window) {
    st.verdict = "too few samples";
    return st;
  }
  auto last = samples.subspan(samples.size() - window);
  auto [mn, mx] = std::minmax_element(last.begin(), last.end());
  if (*mn <= 0) {
    st.verdict = "unstable: a sample of 0 or less";
    return st;
  }
  st.max_over_min = *mx / *mn;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double median = Percentile(sorted, 50);
  st.iqr_over_median = median > 0 ? (Percentile(sorted, 75) - Percentile(sorted, 25)) / median : 0;
  char buf[160];
  if (st.max_over_min > 1.0 + threshold) {
    std::snprintf(buf, sizeof buf, "unstable: the last %zu samples spread %.3fx (max/min), more than %.3fx", window,
                  st.max_over_min, 1.0 + threshold);
    st.verdict = buf;
  } else if (st.iqr_over_median > threshold) {
    std::snprintf(buf, sizeof buf,
                  "unstable: the samples spread %.1f %% of the median (interquartile range), more than %.1f %%",
                  100 * st.iqr_over_median, 100 * threshold);
    st.verdict = buf;
  } else {
    st.stable = true;
    st.verdict = "stable";
  }
  return st;
}

}  // namespace remex::bench
