// A device's self-tests in a real SQLite results store: the record's contract, and the
// drift judgement against the device's own passing history (self_test_history.h).
#include "host_client/tooling/self_test_history.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "base/content_hash.h"

namespace remex::tooling {
namespace self_test_history_test {

namespace fs = std::filesystem;

constexpr int64_t kT0 = 1796000000;  // 2026-11-30, Unix seconds

class SelfTestHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remex_self_test_history_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto store = OpenResultsStore("sqlite://" + (dir_ / "results.sqlite").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  // A self-test of device `id` whose 20 samples lie within 1 % of `median_ms`.
  SelfTestRun Run(double median_ms, const std::string& id = "127.0.0.1:9190") {
    SelfTestRun run;
    run.pool = "ci";
    run.id = id;
    run.device = "cpu";
    run.reason = "interval";
    run.description = "self-test model v1";
    for (int i = 0; i < 20; ++i) run.samples_ms.push_back(median_ms * (1 + 0.01 * (jitter_(rng_) - 0.5)));
    run.unix_s = kT0 + (clock_ += 60);
    return run;
  }

  // Judges and records `n` runs at `median_ms`, each of which must pass.
  void Seed(int n, double median_ms, const std::string& id = "127.0.0.1:9190") {
    for (int i = 0; i < n; ++i) {
      const SelfTestOutcome o = JudgeAndRecordSelfTest(store_.get(), Run(median_ms, id), drift_);
      ASSERT_TRUE(o.healthy) << o.health;
      ASSERT_TRUE(o.store_status.ok()) << o.store_status.ToString();
    }
  }

  fs::path dir_;
  std::unique_ptr<ResultsStore> store_;
  DriftOptions drift_;
  std::mt19937 rng_{42};
  std::uniform_real_distribution<double> jitter_{0, 1};
  int64_t clock_ = 0;
};

TEST_F(SelfTestHistoryTest, TheRecordKeepsTheContract) {
  SelfTestRun run = Run(0.5);
  run.reason = "start";
  const RunRecord r = SelfTestRecord(run);
  EXPECT_EQ(r.kind, "self-test");
  EXPECT_EQ(r.model_name, "self-test");
  EXPECT_EQ(r.scenario, "self-test");
  const std::string description = "self-test model v1";
  EXPECT_EQ(r.model_hash, ContentHash(std::as_bytes(std::span(description.data(), description.size()))));
  EXPECT_EQ(r.device_class, "ci/127.0.0.1:9190");
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.tags.at("farm.pool"), "ci");
  EXPECT_EQ(r.tags.at("farm.device"), "127.0.0.1:9190");
  EXPECT_EQ(r.tags.at("self-test.reason"), "start");
  EXPECT_EQ(r.recorded_at, "2026-11-30T00:54:20Z");
  EXPECT_EQ(r.summary["count"], 20);
  for (const char* key : {"median_ms", "p90_ms", "min_ms", "max_ms"}) {
    ASSERT_TRUE(r.summary.contains(key)) << key;
    EXPECT_NEAR(r.summary[key].get<double>(), 0.5, 0.005) << key;
  }
  EXPECT_LE(r.summary["min_ms"].get<double>(), r.summary["median_ms"].get<double>());
  EXPECT_LE(r.summary["median_ms"].get<double>(), r.summary["p90_ms"].get<double>());
  EXPECT_LE(r.summary["p90_ms"].get<double>(), r.summary["max_ms"].get<double>());
  EXPECT_EQ(r.samples_ms.size(), 20u);
  EXPECT_EQ(r.verdict, "pass");
  EXPECT_EQ(r.error, "");
  // A test that failed: its reason, and no latency figures when it could not run.
  run.error = "self-test on cpu: out of memory";
  run.samples_ms.clear();
  const RunRecord failed = SelfTestRecord(run);
  EXPECT_EQ(failed.verdict, "fail");
  EXPECT_EQ(failed.error, run.error);
  EXPECT_EQ(failed.summary, nlohmann::json({{"count", 0}}));
  // Another test, another series.
  run.description = "self-test model v2";
  EXPECT_NE(SelfTestRecord(run).SeriesKey(), r.SeriesKey());
}

TEST_F(SelfTestHistoryTest, BelowTheMinimumHistoryNothingIsJudged) {
  for (int i = 0; i < 5; ++i) {
    // Even ten times slower: too little history to judge.
    const SelfTestOutcome o = JudgeAndRecordSelfTest(store_.get(), Run(i == 4 ? 10.0 : 1.0), drift_);
    EXPECT_TRUE(o.healthy) << o.health;
    EXPECT_EQ(o.drift.state, DriftState::kInsufficientHistory) << o.drift.reason;
    EXPECT_NE(o.drift.reason.find("insufficient history: " + std::to_string(i) + " passing self-test"),
              std::string::npos)
        << o.drift.reason;
    EXPECT_GT(o.run_id, 0);
  }
}

TEST_F(SelfTestHistoryTest, ASlowerSelfTestIsADriftAndStaysOutOfTheHistory) {
  Seed(10, 1.0);
  SelfTestOutcome same = JudgeAndRecordSelfTest(store_.get(), Run(1.0), drift_);
  EXPECT_TRUE(same.healthy) << same.health;
  EXPECT_EQ(same.drift.state, DriftState::kNoDrift) << same.drift.reason;
  EXPECT_EQ(same.drift.history_runs.size(), 10u);  // the latest 10 of 10 passing
  // 10 % slower: significant, but under the 25 % threshold.
  SelfTestOutcome bit_slower = JudgeAndRecordSelfTest(store_.get(), Run(1.1), drift_);
  EXPECT_TRUE(bit_slower.healthy) << bit_slower.health;
  EXPECT_EQ(bit_slower.drift.state, DriftState::kNoDrift) << bit_slower.drift.reason;
  // Twice as slow: a drift, recorded as a failure with the reason.
  SelfTestOutcome slow = JudgeAndRecordSelfTest(store_.get(), Run(2.0), drift_);
  EXPECT_FALSE(slow.healthy);
  EXPECT_EQ(slow.drift.state, DriftState::kDrift) << slow.drift.reason;
  EXPECT_NEAR(slow.drift.change_pct, 100 * (2.0 / std::exp((9 * std::log(1.0) + std::log(1.1)) / 10) - 1), 3);
  EXPECT_EQ(slow.record.verdict, "fail");
  EXPECT_EQ(slow.health, slow.record.error);
  EXPECT_EQ(slow.record.error.rfind("self-test: latency drift: median ", 0), 0u) << slow.record.error;
  EXPECT_NE(slow.record.error.find("against its last 10 passing self-tests (1"), std::string::npos)
      << slow.record.error;
  EXPECT_NE(slow.record.error.find("drift threshold 25 %"), std::string::npos) << slow.record.error;
  auto report = store_->Report(slow.run_id);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ((*report)["drift"]["state"], "drift");
  EXPECT_EQ((*report)["drift"]["threshold_pct"], 25.0);
  // Still slow: judged against the history before the drift (the failed run is not in it).
  SelfTestOutcome still = JudgeAndRecordSelfTest(store_.get(), Run(2.0), drift_);
  EXPECT_EQ(still.drift.state, DriftState::kDrift) << still.drift.reason;
  for (int64_t id : still.drift.history_runs) EXPECT_NE(id, slow.run_id);
  // Back to its speed: healthy again.
  SelfTestOutcome back = JudgeAndRecordSelfTest(store_.get(), Run(1.0), drift_);
  EXPECT_TRUE(back.healthy) << back.health;
  EXPECT_EQ(back.drift.state, DriftState::kNoDrift) << back.drift.reason;
  // Faster is never a drift.
  SelfTestOutcome fast = JudgeAndRecordSelfTest(store_.get(), Run(0.3), drift_);
  EXPECT_TRUE(fast.healthy) << fast.health;
  // The history is the device's own: another device of the pool has none yet.
  SelfTestOutcome other = JudgeAndRecordSelfTest(store_.get(), Run(2.0, "127.0.0.1:9191"), drift_);
  EXPECT_TRUE(other.healthy);
  EXPECT_EQ(other.drift.state, DriftState::kInsufficientHistory);
}

TEST_F(SelfTestHistoryTest, ANoisyHistoryOrAZeroThresholdJudgesNothing) {
  // Medians alternating between 1 and 2 ms: a spread far above the 25 % threshold.
  for (int i = 0; i < 10; ++i) Seed(1, i % 2 ? 2.0 : 1.0);
  SelfTestOutcome o = JudgeAndRecordSelfTest(store_.get(), Run(4.0), drift_);
  EXPECT_TRUE(o.healthy) << o.health;
  EXPECT_EQ(o.drift.state, DriftState::kTooNoisy) << o.drift.reason;
  DriftOptions off;
  off.threshold = 0;
  o = JudgeAndRecordSelfTest(store_.get(), Run(40.0), off);
  EXPECT_TRUE(o.healthy);
  EXPECT_EQ(o.drift.state, DriftState::kNotJudged);
  off.threshold = -1;
  EXPECT_EQ(JudgeSelfTestDrift(*store_, SelfTestRecord(Run(1.0)), off).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SelfTestHistoryTest, AFailedTestFailsWithoutAStoreToo) {
  Seed(10, 1.0);
  SelfTestRun wrong = Run(1.0);
  wrong.error = "self-test: cpu computes Softmax(Relu(x W + b)) unlike the CPU";
  SelfTestOutcome o = JudgeAndRecordSelfTest(store_.get(), wrong, drift_);
  EXPECT_FALSE(o.healthy);
  EXPECT_EQ(o.health, wrong.error);
  EXPECT_EQ(o.drift.state, DriftState::kNotJudged);
  EXPECT_GT(o.run_id, 0);
  // No store: correctness only, nothing recorded.
  o = JudgeAndRecordSelfTest(nullptr, Run(50.0), drift_);
  EXPECT_TRUE(o.healthy);
  EXPECT_EQ(o.run_id, 0);
  EXPECT_TRUE(o.store_status.ok());
  o = JudgeAndRecordSelfTest(nullptr, wrong, drift_);
  EXPECT_FALSE(o.healthy);
  EXPECT_EQ(o.record.verdict, "fail");
}

}  // namespace self_test_history_test
}  // namespace remex::tooling
