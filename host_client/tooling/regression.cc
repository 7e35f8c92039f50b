#include "host_client/tooling/regression.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

#include "host_client/tooling/bench_stats.h"

namespace remex::regression {
namespace {

std::string Format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

std::string Pct(double pct) { return Format("%+.1f %%", pct); }

double ToPct(double log_ratio) { return std::expm1(log_ratio) * 100.0; }

double NormalQuantile(double p) { return boost::math::quantile(boost::math::normal(), p); }

double StudentQuantile(double df, double p) { return boost::math::quantile(boost::math::students_t(df), p); }

// Pairs (i, j) with y[j] - x[i] <= d; x and y ascending. O(n + m).
uint64_t CountAtMost(std::span<const double> x, std::span<const double> y, double d) {
  uint64_t count = 0;
  size_t p = 0;  // the first x[p] >= y[j] - d, non-decreasing in j
  for (double v : y) {
    const double t = v - d;
    while (p < x.size() && x[p] < t) ++p;
    count += x.size() - p;
  }
  return count;
}

// The k-th smallest (1-based) of the pairwise differences y[j] - x[i], x and y ascending
// and non-empty, by bisection on the value: the smallest d with k differences <= d, to a
// relative precision of 1e-10 of the differences' range.
double KthDifference(std::span<const double> x, std::span<const double> y, uint64_t k) {
  double lo = y.front() - x.back(), hi = y.back() - x.front();
  if (CountAtMost(x, y, lo) >= k) return lo;
  const double tolerance = 1e-10 * std::max(1.0, hi - lo);
  for (int i = 0; i < 200 && hi - lo > tolerance; ++i) {  // invariant: count(lo) < k <= count(hi)
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (CountAtMost(x, y, mid) >= k ? hi : lo) = mid;
  }
  return hi;
}

double Mean(std::span<const double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double SumSquares(std::span<const double> v, double mean) {
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss;
}

Status CheckRun(const Run& run) {
  for (double s : run.samples_s) {
    if (!std::isfinite(s) || s <= 0) {
      return InvalidArgument("run " + run.id + ": a latency sample is not finite and > 0 (" +
                             std::to_string(s) + ")");
    }
  }
  if (run.samples_s.empty() && !(run.median_s && std::isfinite(*run.median_s) && *run.median_s > 0)) {
    return InvalidArgument("run " + run.id + " has neither latency samples nor a median > 0");
  }
  return OkStatus();
}

std::vector<double> SortedLogs(std::span<const double> samples) {
  std::vector<double> logs;
  logs.reserve(samples.size());
  for (double s : samples) logs.push_back(std::log(s));
  std::sort(logs.begin(), logs.end());
  return logs;
}

std::string Ids(const std::vector<std::string>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += i + 1 == ids.size() ? " and " : ", ";
    out += ids[i];
  }
  return out;
}

}  // namespace

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kRegression:
      return "regression";
    case Verdict::kImprovement:
      return "improvement";
    case Verdict::kNoChange:
      return "no change";
    case Verdict::kInsufficientData:
      return "insufficient data";
    case Verdict::kTooNoisy:
      return "too noisy";
  }
  return "?";
}

Status CheckOptions(const Options& o) {
  if (o.min_baseline_runs < 2) return InvalidArgument("min_baseline_runs must be >= 2");
  if (o.baseline_runs < o.min_baseline_runs)
    return InvalidArgument("baseline_runs must be >= min_baseline_runs");
  if (o.confirmations < 1) return InvalidArgument("confirmations must be >= 1");
  if (!(o.alpha > 0 && o.alpha < 1)) return InvalidArgument("alpha must be in (0, 1)");
  if (!(std::isfinite(o.min_effect) && o.min_effect >= 0))
    return InvalidArgument("min_effect must be finite and >= 0");
  if (!(std::isfinite(o.max_baseline_cv) && o.max_baseline_cv > 0)) {
    return InvalidArgument("max_baseline_cv must be finite and > 0");
  }
  return OkStatus();
}

MannWhitney MannWhitneyU(std::span<const double> x, std::span<const double> y) {
  MannWhitney r;
  const size_t n = x.size(), m = y.size();
  if (n == 0 || m == 0) return r;
  std::vector<std::pair<double, bool>> all;  // (value, from y)
  all.reserve(n + m);
  for (double v : x) all.emplace_back(v, false);
  for (double v : y) all.emplace_back(v, true);
  std::sort(all.begin(), all.end());
  const double total = static_cast<double>(n + m);
  double rank_sum_y = 0, ties = 0;  // ties: sum of t^3 - t over groups of equal values
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double average_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k) {
      if (all[k].second) rank_sum_y += average_rank;
    }
    ties += t * t * t - t;
    i = j;
  }
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  r.u = rank_sum_y - md * (md + 1) / 2;
  const double mean = nd * md / 2;
  const double var = nd * md / 12 * ((total + 1) - ties / (total * (total - 1)));
  if (!(var > 0)) return r;
  const double diff = r.u - mean;
  const double corrected = diff > 0 ? std::max(0.0, diff - 0.5) : std::min(0.0, diff + 0.5);
  r.z = corrected / std::sqrt(var);
  r.p_value =
      std::min(1.0, 2 * boost::math::cdf(boost::math::complement(boost::math::normal(), std::abs(r.z))));
  return r;
}

ShiftEstimate HodgesLehmann(std::span<const double> x_any, std::span<const double> y_any, double confidence) {
  ShiftEstimate r;
  if (x_any.empty() || y_any.empty()) return r;
  std::vector<double> x(x_any.begin(), x_any.end()), y(y_any.begin(), y_any.end());
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  const uint64_t pairs = static_cast<uint64_t>(x.size()) * y.size();
  // The median of the pairwise differences (the mean of the middle two for an even count).
  const double lower_middle = KthDifference(x, y, (pairs + 1) / 2);
  r.estimate = pairs % 2 == 1 ? lower_middle : (lower_middle + KthDifference(x, y, pairs / 2 + 1)) / 2;
  const double nd = static_cast<double>(x.size()), md = static_cast<double>(y.size());
  const double z = NormalQuantile(1 - (1 - std::clamp(confidence, 1e-9, 1 - 1e-9)) / 2);
  const double c = std::floor(nd * md / 2 - z * std::sqrt(nd * md * (nd + md + 1) / 12));
  const uint64_t rank = c < 1 ? 1 : static_cast<uint64_t>(c);
  r.low = KthDifference(x, y, rank);
  r.high = KthDifference(x, y, pairs + 1 - rank);
  return r;
}

StatusOr<Finding> Judge(const Series& series, const Options& options) {
  if (Status st = CheckOptions(options); !st.ok()) return st;
  for (size_t i = 0; i < series.runs.size(); ++i) {
    if (Status st = CheckRun(series.runs[i]); !st.ok()) return st;
    if (i > 0 && series.runs[i].time_ms < series.runs[i - 1].time_ms) {
      return InvalidArgument("run " + series.runs[i].id + " is older than run " + series.runs[i - 1].id +
                             " before it: runs must be in time order");
    }
  }
  Finding f;
  f.series = series.name;
  f.confidence = 1 - options.alpha;
  const size_t n = series.runs.size(), k = options.confirmations;
  const size_t first_candidate = n > k ? n - k : 0;
  const size_t b = std::min(options.baseline_runs, first_candidate);
  for (size_t i = first_candidate - b; i < first_candidate; ++i) f.baseline_runs.push_back(series.runs[i].id);
  for (size_t i = first_candidate; i < n; ++i) f.candidate_runs.push_back(series.runs[i].id);
  if (n < options.min_baseline_runs + k) {
    f.verdict = Verdict::kInsufficientData;
    f.reason = std::to_string(n) + (n == 1 ? " run" : " runs") + "; judging needs " +
               std::to_string(options.min_baseline_runs) + " baseline runs and " + std::to_string(k) +
               " newer ones to confirm a change";
    return f;
  }

  auto run_median = [](const Run& run) {
    if (run.samples_s.empty()) return *run.median_s;
    std::vector<double> sorted = run.samples_s;
    std::sort(sorted.begin(), sorted.end());
    return bench::Percentile(sorted, 50);
  };
  // Run level: log medians. One outlier run in the baseline (a noisy neighbour) is set
  // aside when its median lies outside the prediction interval of the others at level
  // 1 - alpha / b, so that it neither hides a change nor makes the series noisy.
  std::vector<size_t> base;
  std::vector<double> base_logs, cand_logs;
  for (size_t i = first_candidate - b; i < first_candidate; ++i) {
    base.push_back(i);
    base_logs.push_back(std::log(run_median(series.runs[i])));
  }
  if (b > options.min_baseline_runs) {
    size_t worst = 0;
    double worst_z = 0;
    for (size_t j = 0; j < b; ++j) {
      std::vector<double> others = base_logs;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(j));
      const double m = Mean(others);
      const double sd = std::sqrt(SumSquares(others, m) / static_cast<double>(b - 2));
      const double d = std::abs(base_logs[j] - m);
      const double z = sd > 0 ? d / (sd * std::sqrt(1 + 1 / static_cast<double>(b - 1)))
                              : (d > 0 ? std::numeric_limits<double>::infinity() : 0.0);
      if (z > worst_z) worst_z = z, worst = j;
    }
    // The most extreme of b runs: Bonferroni's alpha / b keeps a quiet baseline whole.
    if (worst_z >
        StudentQuantile(static_cast<double>(b) - 2, 1 - options.alpha / (2 * static_cast<double>(b)))) {
      f.excluded_runs.push_back(series.runs[base[worst]].id);
      base.erase(base.begin() + static_cast<std::ptrdiff_t>(worst));
      base_logs.erase(base_logs.begin() + static_cast<std::ptrdiff_t>(worst));
    }
  }
  const size_t used = base.size();
  f.baseline_runs.clear();
  bool base_samples = true;
  std::vector<double> pooled;
  for (size_t i : base) {
    const Run& run = series.runs[i];
    f.baseline_runs.push_back(run.id);
    base_samples = base_samples && !run.samples_s.empty();
    for (double v : run.samples_s) pooled.push_back(std::log(v));
  }
  const double centre = Mean(base_logs);
  const double base_ss = SumSquares(base_logs, centre);
  const double s = std::sqrt(base_ss / static_cast<double>(used - 1));
  f.baseline_cv_pct = s * 100;
  const double bd = static_cast<double>(used), kd = static_cast<double>(k);
  const double t_pred = StudentQuantile(bd - 1, 1 - options.alpha / 2);
  const double worse = options.higher_is_better ? -1.0 : 1.0;  // the sign of a worse change in log medians

  std::vector<std::string> worse_ids, better_ids;
  for (size_t i = first_candidate; i < n; ++i) {
    const Run& run = series.runs[i];
    CandidateRun c;
    c.id = run.id;
    c.median_s = run_median(run);
    const double d = std::log(c.median_s) - centre;
    cand_logs.push_back(std::log(c.median_s));
    c.change_pct = ToPct(d);
    const double scale = s * std::sqrt(1 + 1 / bd);
    c.z = scale > 0 ? d / scale : (d == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), d));
    c.outside_baseline = std::abs(c.z) > t_pred;
    bool sample_level_agrees = true;
    if (base_samples && !run.samples_s.empty()) {
      c.has_samples = true;
      const std::vector<double> logs = SortedLogs(run.samples_s);
      const MannWhitney mw = MannWhitneyU(pooled, logs);
      const ShiftEstimate hl = HodgesLehmann(pooled, logs, 1 - options.alpha);
      c.p_value = mw.p_value;
      c.hl_change_pct = ToPct(hl.estimate);
      c.hl_ci_low_pct = ToPct(hl.low);
      c.hl_ci_high_pct = ToPct(hl.high);
      sample_level_agrees = mw.p_value < options.alpha && hl.estimate * d > 0;
    }
    const bool large_enough = std::abs(std::expm1(d)) >= options.min_effect && d != 0;
    if (c.outside_baseline && sample_level_agrees && large_enough) {
      c.direction = d * worse > 0 ? 1 : -1;
      (c.direction > 0 ? worse_ids : better_ids).push_back(c.id);
    }
    f.candidates.push_back(std::move(c));
  }

  // Run level, all candidates together: two-sample t on the log medians, pooled variance.
  const double cand_mean = Mean(cand_logs);
  const double diff = cand_mean - centre;
  const double df = bd + kd - 2;
  const double pooled_sd = std::sqrt((base_ss + SumSquares(cand_logs, cand_mean)) / df);
  const double se = pooled_sd * std::sqrt(1 / bd + 1 / kd);
  f.change_pct = ToPct(diff);
  if (se > 0) {
    const double half = StudentQuantile(df, 1 - options.alpha / 2) * se;
    f.ci_low_pct = ToPct(diff - half);
    f.ci_high_pct = ToPct(diff + half);
    f.p_value = std::min(
        1.0, 2 * boost::math::cdf(boost::math::complement(boost::math::students_t(df), std::abs(diff) / se)));
  } else {
    f.ci_low_pct = f.ci_high_pct = f.change_pct;
    f.p_value = diff == 0 ? 1.0 : 0.0;
  }

  const std::string change = Pct(f.change_pct) + " (" + Format("%g", f.confidence * 100) + " % CI " +
                             Pct(f.ci_low_pct) + " to " + Pct(f.ci_high_pct) + ")";
  std::string against = " against the " + std::to_string(used) + " runs before";
  if (!f.excluded_runs.empty()) against += " (outlier run " + f.excluded_runs[0] + " set aside)";
  const char* worse_word = options.higher_is_better ? "lower" : "slower";
  const char* better_word = options.higher_is_better ? "higher" : "faster";
  if (s > options.max_baseline_cv) {
    f.verdict = Verdict::kTooNoisy;
    f.reason = "the baseline runs' medians spread by " + Format("%.1f", f.baseline_cv_pct) + " % (above " +
               Format("%.1f", options.max_baseline_cv * 100) + " %): cannot judge " + change;
  } else if (worse_ids.size() == k) {
    f.verdict = Verdict::kRegression;
    f.reason = (k == 1 ? "run " : "runs ") + Ids(worse_ids) + (k == 1 ? " is " : " are each ") + worse_word +
               ": " + change + against;
  } else if (better_ids.size() == k) {
    f.verdict = Verdict::kImprovement;
    f.reason = (k == 1 ? "run " : "runs ") + Ids(better_ids) + (k == 1 ? " is " : " are each ") +
               better_word + ": " + change + against;
  } else {
    f.verdict = Verdict::kNoChange;
    f.reason = "no confirmed change of " + Format("%g", options.min_effect * 100) + " % or more: " + change +
               against;
    for (const auto* ids : {&worse_ids, &better_ids}) {
      if (ids->empty()) continue;
      f.reason += "; unconfirmed: " + std::string(ids->size() == 1 ? "run " : "runs ") + Ids(*ids) +
                  (ids->size() == 1 ? " is " : " are ") + (ids == &worse_ids ? worse_word : better_word) +
                  ", " + std::to_string(k - ids->size()) + " of the newest " + std::to_string(k) + " not";
    }
  }
  return f;
}

}  // namespace remex::regression
