#include "host_client/tooling/regression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "host_client/tooling/regression_study.h"

namespace remex::regression {
namespace regression_test {

NoiseModel QuietNoise() {
  NoiseModel noise;
  noise.run_drift_sd = 0.005;
  noise.outlier_run_probability = 0;
  return noise;
}

// A series whose runs carry only summary medians (milliseconds), one hour apart.
Series SummarySeries(const std::vector<double>& medians_ms) {
  Series s;
  s.name = "summary";
  for (size_t i = 0; i < medians_ms.size(); ++i) {
    Run run;
    run.id = "r" + std::to_string(i);
    run.time_ms = static_cast<int64_t>(i) * 3'600'000;
    run.median_s = medians_ms[i] / 1000;
    s.runs.push_back(run);
  }
  return s;
}

TEST(MannWhitney, SeparatedAndIdenticalSamples) {
  const std::vector<double> low = {1, 2, 3, 4, 5, 6, 7, 8}, high = {11, 12, 13, 14, 15, 16, 17, 18};
  MannWhitney mw = MannWhitneyU(low, high);
  EXPECT_DOUBLE_EQ(mw.u, 64);  // every pair has y > x
  EXPECT_GT(mw.z, 3);
  EXPECT_LT(mw.p_value, 0.001);
  mw = MannWhitneyU(high, low);
  EXPECT_DOUBLE_EQ(mw.u, 0);
  EXPECT_LT(mw.z, -3);
  mw = MannWhitneyU(low, low);
  EXPECT_DOUBLE_EQ(mw.u, 32);
  EXPECT_DOUBLE_EQ(mw.p_value, 1);
  // All tied: no variance, no evidence.
  const std::vector<double> same = {5, 5, 5, 5};
  EXPECT_DOUBLE_EQ(MannWhitneyU(same, same).p_value, 1);
  EXPECT_DOUBLE_EQ(MannWhitneyU({}, same).p_value, 1);
}

TEST(MannWhitney, TiesUseAverageRanks) {
  // x = {1, 2, 2}, y = {2, 3}: pairs with y > x: (1,2) (1,3) (2,3) (2,3) = 4, ties (2,2) x2 = 1.
  const std::vector<double> x = {1, 2, 2}, y = {2, 3};
  EXPECT_DOUBLE_EQ(MannWhitneyU(x, y).u, 5);
}

TEST(HodgesLehmann, SmallCasesByHand) {
  // Differences y - x of {1,2,3} and {2,3,4}: -1 0 0 1 1 1 2 2 3, median 1.
  EXPECT_DOUBLE_EQ(HodgesLehmann(std::vector<double>{1, 2, 3}, std::vector<double>{2, 3, 4}, 0.95).estimate,
                   1);
  // Even count: -1 0 0 1, the mean of the middle two.
  EXPECT_DOUBLE_EQ(HodgesLehmann(std::vector<double>{0, 1}, std::vector<double>{0, 1}, 0.95).estimate, 0);
}

TEST(HodgesLehmann, MatchesTheSortedPairwiseDifferences) {
  std::vector<double> x, y;
  for (int i = 0; i < 37; ++i) x.push_back(std::sin(i * 1.7) * 3);
  for (int j = 0; j < 23; ++j) y.push_back(std::cos(j * 2.3) * 2 + 0.8);
  std::vector<double> diffs;
  for (double a : x) {
    for (double b : y) diffs.push_back(b - a);
  }
  std::sort(diffs.begin(), diffs.end());
  const ShiftEstimate hl = HodgesLehmann(x, y, 0.95);
  const size_t pairs = diffs.size();  // 851, odd
  EXPECT_NEAR(hl.estimate, diffs[pairs / 2], 1e-8);
  // C = floor(nm/2 - 1.96 sqrt(nm (n+m+1) / 12)) = floor(425.5 - 1.96 * 65.83) = 296.
  EXPECT_NEAR(hl.low, diffs[296 - 1], 1e-8);
  EXPECT_NEAR(hl.high, diffs[pairs - 296], 1e-8);
  EXPECT_LT(hl.low, hl.estimate);
  EXPECT_GT(hl.high, hl.estimate);
}

TEST(Judge, IdenticalDistributionsAreNoChange) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Series s = MakeSyntheticSeries(seed, QuietNoise(), 7, 2, 0.0);
    auto f = Judge(s, Options{});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->verdict, Verdict::kNoChange) << "seed " << seed << ": " << f->reason;
    EXPECT_LE(f->ci_low_pct, 0) << f->reason;
    EXPECT_GE(f->ci_high_pct, 0) << f->reason;
  }
}

TEST(Judge, ATwentyPercentStepIsARegression) {
  const Series s = MakeSyntheticSeries(3, QuietNoise(), 7, 2, 0.20);
  auto f = Judge(s, Options{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
  EXPECT_EQ(VerdictName(f->verdict), "regression");
  EXPECT_NEAR(f->change_pct, 20, 2);
  EXPECT_LE(f->ci_low_pct, 20);
  EXPECT_GE(f->ci_high_pct, 20);
  EXPECT_GT(f->ci_low_pct, 2);
  EXPECT_LT(f->p_value, 0.01);
  EXPECT_DOUBLE_EQ(f->confidence, 0.95);
  // The 5 runs before the candidates (one of them perhaps set aside as an outlier).
  std::vector<std::string> before = f->baseline_runs;
  before.insert(before.end(), f->excluded_runs.begin(), f->excluded_runs.end());
  std::sort(before.begin(), before.end());
  EXPECT_EQ(before, (std::vector<std::string>{"run-0", "run-1", "run-2", "run-3", "run-4"}));
  EXPECT_EQ(f->candidate_runs, (std::vector<std::string>{"run-5", "run-6"}));
  ASSERT_EQ(f->candidates.size(), 2u);
  for (const CandidateRun& c : f->candidates) {
    EXPECT_EQ(c.direction, 1);
    EXPECT_TRUE(c.has_samples);
    EXPECT_TRUE(c.outside_baseline);
    EXPECT_LT(c.p_value, 0.05);
    EXPECT_GT(c.hl_change_pct, 10);
    EXPECT_LT(c.hl_ci_low_pct, c.hl_change_pct);
  }
  EXPECT_NE(f->reason.find("run-5 and run-6 are each slower"), std::string::npos) << f->reason;
}

TEST(Judge, AFasterStepIsAnImprovement) {
  auto f = Judge(MakeSyntheticSeries(4, QuietNoise(), 7, 2, -0.20), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kImprovement) << f->reason;
  EXPECT_NEAR(f->change_pct, -20, 2);
  // For throughput a higher value is the better one.
  Options throughput;
  throughput.higher_is_better = true;
  f = Judge(MakeSyntheticSeries(4, QuietNoise(), 7, 2, 0.20), throughput);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kImprovement) << f->reason;
  EXPECT_NE(f->reason.find("higher"), std::string::npos) << f->reason;
}

TEST(Judge, TooFewRunsIsInsufficientData) {
  auto f = Judge(MakeSyntheticSeries(5, QuietNoise(), 4, 2, 0.20), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kInsufficientData);
  EXPECT_EQ(f->reason, "4 runs; judging needs 3 baseline runs and 2 newer ones to confirm a change");
  EXPECT_EQ(f->candidate_runs, (std::vector<std::string>{"run-2", "run-3"}));
  f = Judge(Series{}, Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kInsufficientData);
  // Five runs are enough: 3 baseline + 2 candidates.
  f = Judge(MakeSyntheticSeries(5, QuietNoise(), 5, 2, 0.20), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
  EXPECT_EQ(f->baseline_runs.size(), 3u);
}

TEST(Judge, OneOutlierRunInTheBaselineIsSetAside) {
  auto f = Judge(SummarySeries({1.0, 1.01, 1.25, 0.99, 1.005, 1.0, 1.3, 1.3}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->excluded_runs, (std::vector<std::string>{"r2"}));
  EXPECT_EQ(f->baseline_runs, (std::vector<std::string>{"r1", "r3", "r4", "r5"}));
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
  EXPECT_NE(f->reason.find("outlier run r2 set aside"), std::string::npos) << f->reason;
}

TEST(Judge, AWildBaselineIsTooNoisy) {
  auto f = Judge(SummarySeries({1.0, 1.25, 0.85, 1.3, 0.9, 1.5, 1.5}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kTooNoisy) << f->reason;
  EXPECT_GT(f->baseline_cv_pct, 5);
  EXPECT_NE(f->reason.find("spread by"), std::string::npos) << f->reason;
  // The same change over a steady baseline is judged.
  f = Judge(SummarySeries({1.0, 1.01, 0.99, 1.0, 1.005, 1.5, 1.5}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
}

TEST(Judge, OneRunAloneIsUnconfirmed) {
  // The step only in the newest run: the run before it does not confirm it.
  const Series s = MakeSyntheticSeries(6, QuietNoise(), 7, 1, 0.20);
  auto f = Judge(s, Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kNoChange) << f->reason;
  EXPECT_EQ(f->candidates[0].direction, 0);
  EXPECT_EQ(f->candidates[1].direction, 1);
  EXPECT_NE(f->reason.find("unconfirmed: run run-6 is slower, 1 of the newest 2 not"), std::string::npos)
      << f->reason;
  // Asking for no confirmation, the one run is enough.
  Options once;
  once.confirmations = 1;
  f = Judge(s, once);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
  EXPECT_EQ(f->candidate_runs, (std::vector<std::string>{"run-6"}));
  // One outlier run in the middle of the candidates does not confirm either.
  f = Judge(SummarySeries({1.0, 1.01, 0.99, 1.0, 1.005, 1.3, 1.0}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kNoChange) << f->reason;
}

TEST(Judge, SmallShiftsBelowTheMinimumEffectAreNoChange) {
  // 1 % slower in both runs over a baseline steady to 0.1 %: significant, but below 2 %.
  auto f = Judge(SummarySeries({1.0, 1.001, 0.999, 1.0, 1.0005, 1.01, 1.01}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kNoChange) << f->reason;
  EXPECT_TRUE(f->candidates[0].outside_baseline);
  Options sensitive;
  sensitive.min_effect = 0.005;
  f = Judge(SummarySeries({1.0, 1.001, 0.999, 1.0, 1.0005, 1.01, 1.01}), sensitive);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
}

TEST(Judge, SummaryOnlyRunsAreJudgedAtRunLevel) {
  auto f = Judge(SummarySeries({10, 10.1, 9.9, 10.05, 9.95, 12, 12.1}), Options{});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->verdict, Verdict::kRegression) << f->reason;
  EXPECT_FALSE(f->candidates[0].has_samples);
  EXPECT_NEAR(f->candidates[0].change_pct, 20, 0.1);
}

TEST(Judge, RefusesBadInput) {
  Series s = MakeSyntheticSeries(7, QuietNoise(), 7, 2, 0.0);
  s.runs[3].samples_s[10] = -1;
  auto f = Judge(s, Options{});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("run run-3"), std::string::npos) << f.status().message();
  s.runs[3].samples_s[10] = NAN;
  EXPECT_FALSE(Judge(s, Options{}).ok());
  s = SummarySeries({1, 1, 1, 1, 1});
  s.runs[2].median_s.reset();
  EXPECT_NE(Judge(s, Options{}).status().message().find("run r2 has neither"), std::string::npos);
  s = SummarySeries({1, 1, 1, 1, 1});
  s.runs[4].time_ms = 0;
  EXPECT_NE(Judge(s, Options{}).status().message().find("time order"), std::string::npos);
  Options bad;
  bad.alpha = 0;
  EXPECT_NE(Judge(SummarySeries({1, 1, 1, 1, 1}), bad).status().message().find("alpha"), std::string::npos);
  bad = Options{};
  bad.min_baseline_runs = 1;
  EXPECT_EQ(CheckOptions(bad).code(), StatusCode::kInvalidArgument);
  bad = Options{};
  bad.baseline_runs = 2;
  EXPECT_NE(CheckOptions(bad).message().find("baseline_runs"), std::string::npos);
  bad = Options{};
  bad.confirmations = 0;
  EXPECT_FALSE(CheckOptions(bad).ok());
  bad = Options{};
  bad.min_effect = -0.1;
  EXPECT_FALSE(CheckOptions(bad).ok());
}

// A small version of bench/regression_eval (docs/benchmarks.md): statistical properties of
// the defaults on seeded synthetic series, not timing.
TEST(RegressionStudy, FalsePositivesAreRareAndLargeStepsAreFound) {
  StudyOptions study;
  study.seed = 42;
  study.series_per_step = 200;
  study.steps = {0.0, 0.20};
  auto results = RunStudy(study);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  ASSERT_EQ(results->size(), 2u);
  const StepResult& none = (*results)[0];
  const StepResult& big = (*results)[1];
  EXPECT_EQ(none.series, 200u);
  EXPECT_LE(none.false_positive_rate, 0.05);
  EXPECT_GE(big.detection_rate, 0.95);
  EXPECT_EQ(big.improvements, 0u);
  EXPECT_NEAR(big.mean_change_pct, 20, 1.5);
  // Deterministic for a seed.
  auto again = RunStudy(study);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[1].regressions, big.regressions);
  EXPECT_EQ((*again)[0].no_change, none.no_change);
}

}  // namespace regression_test
}  // namespace remex::regression
