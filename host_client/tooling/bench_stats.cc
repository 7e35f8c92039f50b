#include "host_client/tooling/bench_stats.h"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
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

namespace {

std::string Format(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

bool ValidProbability(double p) { return p > 0 && p < 1; }

}  // namespace

PercentileEstimate EstimatePercentile(std::span<const double> sorted, double q, double confidence) {
  PercentileEstimate e;
  e.q = std::clamp(q, 0.0, 100.0);
  e.confidence = confidence;
  const size_t n = sorted.size();
  if (n == 0) return e;
  e.value = Percentile(sorted, e.q);
  const double p = e.q / 100.0;
  if (n < 2 || !ValidProbability(p) || !ValidProbability(confidence)) return e;

  // F(k) = P(B <= k), k = 0 .. n - 1, from Boost.Math, evaluated only where the search
  // looks (a few widths around the percentile's rank, not all n).
  const boost::math::binomial_distribution<double> binomial(static_cast<double>(n), p);
  std::vector<double> memo(n, -1.0);
  auto F = [&](size_t k) {
    double& v = memo[k];
    if (v < 0) v = boost::math::cdf(binomial, static_cast<double>(k));
    return v;
  };
  // P(l <= B <= u - 1), 1 <= l < u <= n.
  auto coverage = [&](size_t l, size_t u) { return F(u - 1) - F(l - 1); };
  // The first k in (lo, hi] where `reached` holds, for a predicate false at lo, true at
  // hi and monotone in k.
  auto first_where = [](size_t lo, size_t hi, auto reached) {
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (reached(mid) ? hi : lo) = mid;
    }
    return hi;
  };
  // Feasible pairs have F(l - 1) <= F(n - 1) - confidence: l <= l_max.
  const double top = F(n - 1);
  if (F(0) > top - confidence) return e;  // not even [X_(1), X_(n)] reaches it
  const size_t l_max = first_where(0, n - 1, [&](size_t k) { return F(k) > top - confidence; });
  // Every feasible u has F(u - 1) - F(0) >= confidence: u >= u_floor.
  const size_t u_floor = first_where(0, n - 1, [&](size_t k) { return F(k) - F(0) >= confidence; }) + 1;

  // From l_max down: the smallest u reaching the confidence never grows as l falls; stop
  // once u_floor - l alone is wider than the best pair found.
  const double center = 1.0 + p * static_cast<double>(n - 1);
  size_t u = l_max + 1;
  while (coverage(l_max, u) < confidence) ++u;  // ends by u = n
  for (size_t l = l_max; l >= 1; --l) {
    if (e.bounded && u_floor > l + (e.upper_rank - e.lower_rank)) break;
    while (u - 1 > l && coverage(l, u - 1) >= confidence) --u;
    const double cover = coverage(l, u);
    bool better = !e.bounded;
    if (e.bounded) {
      const size_t width = u - l, best_width = e.upper_rank - e.lower_rank;
      const double off = std::abs(0.5 * static_cast<double>(l + u) - center);
      const double best_off = std::abs(0.5 * static_cast<double>(e.lower_rank + e.upper_rank) - center);
      better = width < best_width ||
               (width == best_width && (off < best_off || (off == best_off && cover > e.coverage)));
    }
    if (better) {
      e.bounded = true;
      e.lower_rank = l;
      e.upper_rank = u;
      e.coverage = cover;
    }
  }
  if (e.bounded) {
    e.lower = sorted[e.lower_rank - 1];
    e.upper = sorted[e.upper_rank - 1];
  }
  return e;
}

size_t MinSamplesToBound(double q, double confidence) {
  const double p = q / 100.0;
  if (!ValidProbability(p) || !ValidProbability(confidence)) return 0;
  // [X_(1), X_(n)] covers with 1 - (1 - p)^n - p^n, which grows with n (n >= 2): start
  // near the closed form's answer and step to the exact smallest n.
  auto reaches = [&](size_t n) {
    const boost::math::binomial_distribution<double> binomial(static_cast<double>(n), p);
    return boost::math::cdf(binomial, static_cast<double>(n - 1)) - boost::math::cdf(binomial, 0.0) >=
           confidence;
  };
  const double guess = std::log1p(-confidence) / std::log(std::max(p, 1.0 - p));
  size_t n = std::max<size_t>(2, static_cast<size_t>(std::max(0.0, std::floor(guess))));
  while (n > 2 && reaches(n - 1)) --n;
  while (!reaches(n)) ++n;
  return n;
}

std::vector<WindowSummary> SplitIntoWindows(std::span<const TimedSample> samples, double window_s, double q) {
  std::vector<WindowSummary> windows;
  if (samples.empty() || !(window_s > 0) || !std::isfinite(window_s)) return windows;
  const double end = std::max(0.0, samples.back().end_s);
  // A sample ending at t belongs to the window (k w, (k + 1) w] with k = ceil(t / w) - 1;
  // end times are sums of many floating-point terms, so a boundary is matched within a
  // relative 1e-9 (ten samples of 0.1 s end at 0.9999999999999999, in the fourth window
  // of 0.25 s, which is then whole).
  constexpr double kSlack = 1e-9;
  auto index_of = [&](double t) {
    double k = std::ceil(t / window_s - kSlack) - 1;
    return k < 0 ? size_t{0} : static_cast<size_t>(k);
  };
  size_t full = static_cast<size_t>(std::floor(end / window_s + kSlack));
  // Whole windows up to the run's end; the partial one after them is dropped.
  const bool only_partial = full == 0;
  const size_t count = only_partial ? 1 : full;
  windows.resize(count);
  for (size_t k = 0; k < count; ++k) {
    windows[k].start_s = static_cast<double>(k) * window_s;
    windows[k].duration_s = only_partial ? end : window_s;
  }
  std::vector<std::vector<double>> latencies(count);
  std::vector<uint64_t> calls(count, 0);
  // The last sample end before each window's samples, and the last end in it.
  std::vector<double> before(count, 0.0), last_end(count, 0.0);
  double previous_end = 0;
  for (const TimedSample& s : samples) {
    const size_t k = only_partial ? 0 : index_of(s.end_s);
    if (k < count) {
      if (windows[k].samples == 0) before[k] = previous_end;
      ++windows[k].samples;
      latencies[k].push_back(s.latency);
      calls[k] += s.calls;
      last_end[k] = s.end_s;
    }
    previous_end = std::max(previous_end, s.end_s);
  }
  for (size_t k = 0; k < count; ++k) {
    if (windows[k].samples == 0) continue;
    std::sort(latencies[k].begin(), latencies[k].end());
    windows[k].latency = Percentile(latencies[k], q);
    const double span = last_end[k] - before[k];
    windows[k].throughput_per_s = span > 0 ? static_cast<double>(calls[k]) / span : 0.0;
  }
  return windows;
}

WindowStability CheckWindowStability(std::span<const WindowSummary> windows, size_t last, double threshold) {
  WindowStability st;
  st.threshold = threshold;
  last = std::max<size_t>(last, 1);
  char buf[256];
  if (windows.size() < last) {
    std::snprintf(buf, sizeof buf, "too few windows (%zu of %zu)", windows.size(), last);
    st.verdict = buf;
    return st;
  }
  const size_t first = windows.size() - last;
  auto judged = windows.subspan(first);
  for (size_t k = 0; k < judged.size(); ++k) {
    if (judged[k].samples == 0) {
      std::snprintf(buf, sizeof buf, "unstable: window %zu (from %.3f s) has no sample", first + k + 1,
                    judged[k].start_s);
      st.verdict = buf;
      return st;
    }
  }
  st.windows = last;
  double mean_throughput = 0, mean_latency = 0;
  for (const auto& w : judged) {
    mean_throughput += w.throughput_per_s;
    mean_latency += w.latency;
  }
  mean_throughput /= static_cast<double>(last);
  mean_latency /= static_cast<double>(last);
  // The largest relative deviation and the window that has it (1-based, run order).
  auto deviation = [&](double mean, auto value, size_t* at) {
    double worst = 0;
    *at = first + 1;
    for (size_t k = 0; k < judged.size(); ++k) {
      const double v = value(judged[k]);
      const double d = mean > 0 ? std::abs(v - mean) / mean : (v == mean ? 0.0 : INFINITY);
      if (d > worst) {
        worst = d;
        *at = first + k + 1;
      }
    }
    return worst;
  };
  size_t throughput_at = 0, latency_at = 0;
  st.throughput_deviation = deviation(
      mean_throughput, [](const WindowSummary& w) { return w.throughput_per_s; }, &throughput_at);
  st.latency_deviation = deviation(
      mean_latency, [](const WindowSummary& w) { return w.latency; }, &latency_at);
  const bool throughput_ok = st.throughput_deviation <= threshold;
  const bool latency_ok = st.latency_deviation <= threshold;
  if (throughput_ok && latency_ok) {
    st.stable = true;
    std::snprintf(
        buf, sizeof buf,
        "stable: the last %zu windows' throughput within %.1f %% and latency within %.1f %% of their "
        "mean (threshold %.1f %%)",
        last, 100 * st.throughput_deviation, 100 * st.latency_deviation, 100 * threshold);
  } else if (!throughput_ok) {
    std::snprintf(
        buf, sizeof buf,
        "unstable: throughput moved %.1f %% from the mean of the last %zu windows in window %zu (threshold "
        "%.1f %%)%s",
        100 * st.throughput_deviation, last, throughput_at, 100 * threshold,
        latency_ok ? "" : Format("; latency moved %.1f %%", 100 * st.latency_deviation).c_str());
  } else {
    std::snprintf(
        buf, sizeof buf,
        "unstable: latency moved %.1f %% from the mean of the last %zu windows in window %zu (threshold "
        "%.1f %%)",
        100 * st.latency_deviation, last, latency_at, 100 * threshold);
  }
  st.verdict = buf;
  return st;
}

}  // namespace remex::bench
