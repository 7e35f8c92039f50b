#include "host_client/tooling/bench_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace remex::bench {
namespace bench_stats_test {

TEST(BenchStatsTest, PercentilesInterpolateLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [0, 50, 90, 99, 100]) = [1, 2.5, 3.7, 3.97, 4].
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_NEAR(Percentile(v, 90), 3.7, 1e-12);
  EXPECT_NEAR(Percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4.0);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 90), 7.0);
}

TEST(BenchStatsTest, SummaryOfUnsortedSamples) {
  // numpy: mean 4.0, median 3.5, p90 7.0, p99 8.8, std (ddof=0) sqrt(40 / 6).
  std::vector<double> v = {9, 1, 3, 4, 2, 5};
  auto s = Summarize(v);
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_NEAR(s.p90, 7.0, 1e-12);
  EXPECT_NEAR(s.p99, 8.8, 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_NEAR(s.std, 2.5819888974716112, 1e-12);
}

TEST(BenchStatsTest, EmptySummaryIsZero) {
  auto s = Summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.mean, 0.0);
  EXPECT_EQ(s.std, 0.0);
}

// ---- Percentile confidence intervals ----------------------------------------------------

TEST(BenchStatsTest, MedianIntervalOfTenSamplesIsTheSecondToTheNinth) {
  // The textbook case: n = 10, median, 95 %: [X_(2), X_(9)], coverage 1 - 2 * 11 / 1024.
  // ([X_(2), X_(8)] covers only 957 / 1024 = 93.5 %.)
  std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto e = EstimatePercentile(v, 50, 0.95);
  ASSERT_TRUE(e.bounded);
  EXPECT_DOUBLE_EQ(e.value, 5.5);
  EXPECT_EQ(e.lower_rank, 2u);
  EXPECT_EQ(e.upper_rank, 9u);
  EXPECT_DOUBLE_EQ(e.lower, 2.0);
  EXPECT_DOUBLE_EQ(e.upper, 9.0);
  EXPECT_NEAR(e.coverage, 1.0 - 22.0 / 1024.0, 1e-12);
  EXPECT_EQ(e.confidence, 0.95);
  EXPECT_EQ(e.q, 50.0);
}

TEST(BenchStatsTest, MinSamplesToBoundKnownCounts) {
  // The smallest n with 1 - (1 - p)^n - p^n >= 0.95.
  EXPECT_EQ(MinSamplesToBound(50, 0.95), 6u);    // 1 - 2 / 64 = 0.969; n = 5: 0.9375
  EXPECT_EQ(MinSamplesToBound(90, 0.95), 29u);   // 0.9^29 = 0.047; 0.9^28 = 0.052
  EXPECT_EQ(MinSamplesToBound(99, 0.95), 299u);  // 0.99^299 = 0.0495; 0.99^298 = 0.0500
  EXPECT_EQ(MinSamplesToBound(99, 0.99), 459u);  // 0.99^459 = 0.00993; 0.99^458 = 0.01003
  EXPECT_EQ(MinSamplesToBound(10, 0.95), 29u);   // symmetric
  EXPECT_EQ(MinSamplesToBound(0, 0.95), 0u);
  EXPECT_EQ(MinSamplesToBound(100, 0.95), 0u);
  EXPECT_EQ(MinSamplesToBound(50, 1.0), 0u);
}

TEST(BenchStatsTest, NotEnoughSamplesBelowTheMinimumAndBoundedAtIt) {
  std::mt19937_64 rng(11);
  std::exponential_distribution<double> dist(1.0);
  for (double q : {50.0, 90.0, 99.0, 99.9}) {
    for (double confidence : {0.9, 0.95, 0.99}) {
      const size_t need = MinSamplesToBound(q, confidence);
      ASSERT_GE(need, 2u);
      for (size_t n : {need - 1, need}) {
        std::vector<double> v(n);
        for (double& x : v) x = dist(rng);
        std::sort(v.begin(), v.end());
        auto e = EstimatePercentile(v, q, confidence);
        EXPECT_EQ(e.bounded, n == need) << "q " << q << " confidence " << confidence << " n " << n;
        EXPECT_DOUBLE_EQ(e.value, Percentile(v, q));
        if (n == need) {  // at the minimum, the interval reaches the sample's maximum
          EXPECT_EQ(e.upper_rank, n);
          if (q == 50) EXPECT_EQ(e.lower_rank, 1u);
          EXPECT_GE(e.coverage, confidence);
        } else {
          EXPECT_EQ(e.lower_rank, 0u);
          EXPECT_EQ(e.coverage, 0.0);
        }
      }
    }
  }
  std::vector<double> v(1000, 1.0);
  EXPECT_FALSE(EstimatePercentile(v, 100, 0.95).bounded);  // the maximum has no bound
  EXPECT_FALSE(EstimatePercentile(v, 0, 0.95).bounded);
  EXPECT_FALSE(EstimatePercentile({}, 50, 0.95).bounded);
}

TEST(BenchStatsTest, IntervalIsTheNarrowestPairThatReachesTheConfidence) {
  // Against a brute-force search of every pair, with Boost's CDF.
  for (size_t n : {6u, 17u, 40u, 123u}) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
    for (double q : {25.0, 50.0, 90.0, 95.0}) {
      auto e = EstimatePercentile(v, q, 0.95);
      boost::math::binomial_distribution<double> b(static_cast<double>(n), q / 100);
      size_t best = 0;
      for (size_t l = 1; l <= n; ++l) {
        for (size_t u = l + 1; u <= n; ++u) {
          const double cover = boost::math::cdf(b, static_cast<double>(u - 1)) -
                               boost::math::cdf(b, static_cast<double>(l - 1));
          if (cover >= 0.95 && (best == 0 || u - l < best)) best = u - l;
        }
      }
      ASSERT_EQ(e.bounded, best != 0) << n << " " << q;
      if (!e.bounded) continue;
      EXPECT_EQ(e.upper_rank - e.lower_rank, best) << n << " " << q;
      EXPECT_GE(e.coverage, 0.95);
      EXPECT_LE(e.lower, e.value + 1) << n << " " << q;  // the interval sits around the point
      EXPECT_GE(e.upper, e.value - 1) << n << " " << q;
    }
  }
}

// The true q-th percentile of each test distribution, and a draw from it.
struct Distribution {
  const char* name;
  std::function<double(std::mt19937_64&)> draw;
  std::function<double(double)> quantile;  // p in (0, 1)
};

std::vector<Distribution> TestDistributions() {
  using boost::math::normal;
  const normal standard;
  std::vector<Distribution> d;
  d.push_back({"normal(10, 2)", [](std::mt19937_64& g) { return std::normal_distribution<double>(10, 2)(g); },
               [standard](double p) { return 10 + 2 * boost::math::quantile(standard, p); }});
  d.push_back({"lognormal(0, 0.5)",
               [](std::mt19937_64& g) { return std::lognormal_distribution<double>(0, 0.5)(g); },
               [standard](double p) { return std::exp(0.5 * boost::math::quantile(standard, p)); }});
  // Pareto, x_m 1, alpha 1.5: infinite variance, a heavy tail.
  d.push_back({"pareto(1, 1.5)",
               [](std::mt19937_64& g) {
                 return std::pow(1 - std::uniform_real_distribution<double>(0, 1)(g), -1 / 1.5);
               },
               [](double p) { return std::pow(1 - p, -1 / 1.5); }});
  // 70 % N(1, 0.1) + 30 % N(3, 0.3): two modes, as a run that switches clocks.
  d.push_back({"bimodal 0.7 N(1, 0.1) + 0.3 N(3, 0.3)",
               [](std::mt19937_64& g) {
                 return std::bernoulli_distribution(0.7)(g) ? std::normal_distribution<double>(1, 0.1)(g)
                                                            : std::normal_distribution<double>(3, 0.3)(g);
               },
               [](double p) {
                 const normal a(1, 0.1), b(3, 0.3);
                 double lo = 0, hi = 6;  // the mixture's CDF, inverted by bisection
                 for (int i = 0; i < 200; ++i) {
                   const double mid = 0.5 * (lo + hi);
                   (0.7 * boost::math::cdf(a, mid) + 0.3 * boost::math::cdf(b, mid) < p ? lo : hi) = mid;
                 }
                 return 0.5 * (lo + hi);
               }});
  return d;
}

// The statistics' proof: for each distribution, 1,000 runs of n samples; the 95 %
// interval reported for p50, p90 and p99 covers the true percentile in at least 93 % of
// them (the binomial bound gives >= 95 %; 93 % leaves three standard deviations of the
// count), and no more often than the coverage it claims allows (so it is not loose).
TEST(BenchStatsTest, NinetyFivePercentIntervalsCoverTheTruePercentile) {
  constexpr int kTrials = 1000;
  constexpr double kConfidence = 0.95;
  struct Case {
    size_t n;
    std::vector<double> qs;
  };
  // 400 samples bound p99 (299 needed); 30 bound the median and p90 (29 needed).
  const std::vector<Case> cases = {{400, {50, 90, 99}}, {30, {50, 90}}, {8, {50}}};
  std::mt19937_64 rng(20240601);
  for (const Distribution& d : TestDistributions()) {
    for (const Case& c : cases) {
      std::vector<int> covered(c.qs.size(), 0);
      std::vector<double> claimed(c.qs.size(), 0);
      std::vector<double> v(c.n);
      for (int t = 0; t < kTrials; ++t) {
        for (double& x : v) x = d.draw(rng);
        std::sort(v.begin(), v.end());
        for (size_t i = 0; i < c.qs.size(); ++i) {
          auto e = EstimatePercentile(v, c.qs[i], kConfidence);
          ASSERT_TRUE(e.bounded) << d.name << " n " << c.n << " p" << c.qs[i];
          const double truth = d.quantile(c.qs[i] / 100);
          covered[i] += e.lower <= truth && truth <= e.upper;
          claimed[i] = e.coverage;  // the same for every trial of this n and q
        }
      }
      for (size_t i = 0; i < c.qs.size(); ++i) {
        const double rate = static_cast<double>(covered[i]) / kTrials;
        EXPECT_GE(rate, 0.93) << d.name << " n " << c.n << " p" << c.qs[i];
        EXPECT_LE(rate, claimed[i] + 0.025)
            << d.name << " n " << c.n << " p" << c.qs[i] << " claims " << claimed[i];
      }
    }
  }
}

// ---- Windows and stability ---------------------------------------------------------------

// Samples of `latency` seconds each, back to back from 0, one call each.
std::vector<TimedSample> BackToBack(const std::vector<double>& latencies) {
  std::vector<TimedSample> s;
  double t = 0;
  for (double l : latencies) {
    t += l;
    s.push_back({t, l, 1});
  }
  return s;
}

TEST(BenchStatsTest, WindowsSplitByEndTimeAndDropThePartialLast) {
  // Ten samples of 0.1 s: ends 0.1 .. 1.0; windows of 0.25 s: (0, .25] (.25, .5] (.5, .75]
  // (.75, 1.0]; 1.0 s is exactly four windows, none partial.
  auto s = BackToBack(std::vector<double>(10, 0.1));
  auto w = SplitIntoWindows(s, 0.25, 50);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].samples, 2u);  // 0.1, 0.2
  EXPECT_EQ(w[1].samples, 3u);  // 0.3, 0.4, 0.5
  EXPECT_EQ(w[2].samples, 2u);  // 0.6, 0.7
  EXPECT_EQ(w[3].samples, 3u);  // 0.8, 0.9, 1.0
  EXPECT_DOUBLE_EQ(w[2].start_s, 0.5);
  EXPECT_DOUBLE_EQ(w[2].duration_s, 0.25);
  // Throughput over the time those samples took: 10 calls/s in every window, whether
  // it holds two samples or three.
  for (const auto& x : w) EXPECT_NEAR(x.throughput_per_s, 10.0, 1e-9);
  EXPECT_NEAR(w[1].latency, 0.1, 1e-12);

  // One more sample (ends 1.1): the partial fifth window is dropped.
  s = BackToBack(std::vector<double>(11, 0.1));
  EXPECT_EQ(SplitIntoWindows(s, 0.25, 50).size(), 4u);
  // A run shorter than a window is one window as long as the run.
  auto short_run = SplitIntoWindows(BackToBack({0.01, 0.03, 0.02}), 0.25, 50);
  ASSERT_EQ(short_run.size(), 1u);
  EXPECT_EQ(short_run[0].samples, 3u);
  EXPECT_NEAR(short_run[0].duration_s, 0.06, 1e-12);
  EXPECT_NEAR(short_run[0].latency, 0.02, 1e-12);
  EXPECT_NEAR(short_run[0].throughput_per_s, 50.0, 1e-9);
  EXPECT_TRUE(SplitIntoWindows({}, 0.25, 50).empty());
}

TEST(BenchStatsTest, WindowsKeepGapsAndTakeThePercentile) {
  // A 0.6 s sample leaves two windows without an end; calls weigh in throughput.
  std::vector<TimedSample> s = {{0.1, 1, 4}, {0.2, 2, 4}, {0.24, 9, 4}, {0.84, 5, 1}, {1.0, 3, 2}};
  auto w = SplitIntoWindows(s, 0.25, 90);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].samples, 3u);
  EXPECT_NEAR(w[0].latency, Percentile(std::vector<double>{1, 2, 9}, 90), 1e-12);
  EXPECT_NEAR(w[0].throughput_per_s, 12 / 0.24, 1e-9);
  EXPECT_EQ(w[1].samples, 0u);
  EXPECT_EQ(w[1].throughput_per_s, 0.0);
  EXPECT_EQ(w[2].samples, 0u);
  EXPECT_EQ(w[3].samples, 2u);
  EXPECT_NEAR(w[3].throughput_per_s, 3 / (1.0 - 0.24), 1e-9);  // from the last end before it
  auto st = CheckWindowStability(w, 3, 0.5);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict, "unstable: window 2 (from 0.250 s) has no sample");
}

std::vector<WindowSummary> Windows(const std::vector<std::pair<double, double>>& throughput_latency) {
  std::vector<WindowSummary> w;
  for (const auto& [t, l] : throughput_latency) w.push_back({0, 0.25, 10, t, l});
  return w;
}

TEST(BenchStatsTest, StabilityJudgesTheLastThreeWindowsOnBothScales) {
  // A slow start does not matter: the last three agree within 10 %.
  auto w = Windows({{50, 20}, {100, 10}, {104, 10.4}, {96, 9.7}});
  auto st = CheckWindowStability(w, 3, 0.10);
  EXPECT_TRUE(st.stable) << st.verdict;
  EXPECT_EQ(st.windows, 3u);
  EXPECT_NEAR(st.throughput_deviation, 4.0 / 100.0, 1e-12);
  EXPECT_EQ(st.verdict.rfind("stable: the last 3 windows' throughput within 4.0 %", 0), 0u) << st.verdict;

  // Latency steady, throughput moved 15 % in the last window.
  w = Windows({{100, 10}, {100, 10}, {100, 10}, {130, 10}});
  st = CheckWindowStability(w, 3, 0.10);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict.rfind(
                "unstable: throughput moved 18.2 % from the mean of the last 3 windows in window 4", 0),
            0u)
      << st.verdict;
  EXPECT_TRUE(CheckWindowStability(w, 3, 0.20).stable);
  EXPECT_TRUE(CheckWindowStability(w, 2, 0.20).stable);  // 100, 130: 13 % each way
  EXPECT_FALSE(CheckWindowStability(w, 2, 0.10).stable);

  // Throughput steady, latency moved.
  w = Windows({{100, 10}, {100, 10}, {100, 14}});
  st = CheckWindowStability(w, 3, 0.10);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict.rfind("unstable: latency moved 23.5 %", 0), 0u) << st.verdict;
  EXPECT_NEAR(st.latency_deviation, 4.0 / 3.0 / (34.0 / 3.0) * 2, 1e-12);

  // A zero threshold holds only identical windows.
  EXPECT_TRUE(CheckWindowStability(Windows({{5, 1}, {5, 1}, {5, 1}}), 3, 0.0).stable);
  EXPECT_FALSE(CheckWindowStability(Windows({{5, 1}, {5, 1}, {5, 1.001}}), 3, 0.0).stable);
}

TEST(BenchStatsTest, TooFewWindowsIsNotStable) {
  auto st = CheckWindowStability(Windows({{1, 1}, {1, 1}}), 3, 0.1);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict, "too few windows (2 of 3)");
  EXPECT_EQ(st.windows, 0u);
  EXPECT_FALSE(CheckWindowStability({}, 3, 0.1).stable);
}

TEST(BenchStatsTest, StableRunFromSplitSamples) {
  // 2,000 samples of 1 ms +- 2 % (1 call each) over 2 s: windows of 0.25 s are stable at
  // 10 %; a run whose calls slow to 1.5 ms in the last 0.4 s is not.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> jitter(0.98e-3, 1.02e-3);
  std::vector<double> lat(2000);
  for (double& l : lat) l = jitter(rng);
  auto steady = SplitIntoWindows(BackToBack(lat), 0.25, 50);
  EXPECT_EQ(steady.size(), 8u);
  EXPECT_TRUE(CheckWindowStability(steady).stable) << CheckWindowStability(steady).verdict;
  for (size_t i = 1600; i < lat.size(); ++i) lat[i] *= 1.5;
  auto slowing = SplitIntoWindows(BackToBack(lat), 0.25, 50);
  auto st = CheckWindowStability(slowing);
  EXPECT_FALSE(st.stable);
  EXPECT_GT(st.latency_deviation, 0.10);
  EXPECT_GT(st.throughput_deviation, 0.10);
}

}  // namespace bench_stats_test
}  // namespace remex::bench
