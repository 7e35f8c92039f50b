#include "host_client/tooling/bench_stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace remex::bench {
namespace {

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

TEST(BenchStatsTest, StabilityLooksAtTheLastWindow) {
  // An unstable start does not matter; the last three are within 10 %.
  std::vector<double> v = {5.0, 1.0, 1.00, 1.05, 1.09};
  auto st = CheckStability(v);
  EXPECT_TRUE(st.stable);
  EXPECT_EQ(st.verdict, "stable");
  EXPECT_NEAR(st.max_over_min, 1.09, 1e-12);

  std::vector<double> w = {1.0, 1.0, 1.2};
  auto un = CheckStability(w, 3, 0.10);
  EXPECT_FALSE(un.stable);
  EXPECT_EQ(un.verdict.rfind("unstable: the last 3 samples spread 1.200x", 0), 0u) << un.verdict;
  EXPECT_TRUE(CheckStability(w, 3, 0.25).stable);
  EXPECT_FALSE(CheckStability(w, 2, 0.0).stable);  // last two: 1.0, 1.2
}

// A run that wandered from 35.7 ms to 880 ms is not stable because its last samples
// happen to agree.
TEST(BenchStatsTest, StabilityLooksAtTheWholeSampleSetToo) {
  std::vector<double> v = {35.7, 880.0, 120.0, 410.0, 36.0, 650.0, 90.0, 36.1, 36.2, 36.3};
  auto st = CheckStability(v);
  EXPECT_NEAR(st.max_over_min, 36.3 / 36.1, 1e-12);
  EXPECT_GT(st.iqr_over_median, 1.0);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict.rfind("unstable: the samples spread", 0), 0u) << st.verdict;
  // The same spread within 10 % is stable.
  std::vector<double> steady = {10.0, 10.2, 10.1, 9.9, 10.0, 10.3, 10.1, 10.0, 10.1, 10.2};
  EXPECT_TRUE(CheckStability(steady).stable) << CheckStability(steady).verdict;
}

TEST(BenchStatsTest, TooFewSamplesIsNotStable) {
  std::vector<double> v = {1.0, 1.0};
  auto st = CheckStability(v, 3, 0.1);
  EXPECT_FALSE(st.stable);
  EXPECT_EQ(st.verdict, "too few samples");
  EXPECT_FALSE(CheckStability(v, 1, 0.1).stable);
}

TEST(BenchStatsTest, NonPositiveMinimumIsUnstable) {
  std::vector<double> v = {0.0, 1.0, 1.0};
  EXPECT_FALSE(CheckStability(v).stable);
}

}  // namespace
}  // namespace remex::bench
