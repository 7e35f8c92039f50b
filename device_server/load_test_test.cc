#include "device_server/load_test.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

namespace remex::server {
namespace load_test_test {

using std::chrono::milliseconds;

// Fake instances: a sample is `kernels` steps of `step` each (a sleep), yielding after
// each step as the VM does after a kernel; the fixture counts what ran.
class LoadTestTest : public ::testing::Test {
 protected:
  void MakeLanes(size_t n, int kernels, std::chrono::microseconds step) {
    lanes_.clear();
    controls_.clear();
    for (size_t i = 0; i < n; ++i) {
      controls_.push_back(std::make_unique<vm::RunControl>());
      LoadLane lane;
      lane.control = controls_.back().get();
      vm::RunControl* c = lane.control;
      lane.run = [this, c, kernels, step]() -> Status {
        const int now = ++in_flight_;
        max_in_flight_ = std::max(max_in_flight_.load(), now);
        Status st;
        for (int k = 0; k < kernels && st.ok(); ++k) {
          std::this_thread::sleep_for(step);
          if (fail_at_sample_ >= 0 && samples_run_ >= fail_at_sample_) st = InvalidArgument("kernel refused");
          if (st.ok()) st = c->Check();
          if (st.ok() && c->yield) c->yield();
          if (st.ok()) st = c->Check();
        }
        --in_flight_;
        ++samples_run_;
        return st;
      };
      lane.audit = [this](uint64_t sample) -> Status {
        kept_.push_back(sample);
        return OkStatus();
      };
      lanes_.push_back(std::move(lane));
    }
  }

  std::vector<LoadLane> lanes_;
  std::vector<std::unique_ptr<vm::RunControl>> controls_;
  vm::RunControl session_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
  int samples_run_ = 0;
  int fail_at_sample_ = -1;
  std::vector<uint64_t> kept_;
};

TEST_F(LoadTestTest, SingleStreamIsAClosedLoop) {
  MakeLanes(1, 2, std::chrono::microseconds(300));
  LoadTestOptions o;
  o.min_queries = 20;
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GE(r->issue_nanos.size(), 20u);
  EXPECT_EQ(r->completed, r->issue_nanos.size());
  EXPECT_EQ(r->dropped, 0u);
  EXPECT_EQ(max_in_flight_.load(), 1);
  for (size_t q = 1; q < r->issue_nanos.size(); ++q) {
    // The next query is issued when the previous one completes, never before.
    EXPECT_GE(r->issue_nanos[q], r->issue_nanos[q - 1] + r->latency_nanos[q - 1]) << q;
  }
  for (uint64_t l : r->latency_nanos) EXPECT_GE(l, 600'000u);
}

TEST_F(LoadTestTest, LanesRunTheirSamplesSideBySide) {
  MakeLanes(4, 4, std::chrono::microseconds(200));
  LoadTestOptions o;
  o.concurrency = 4;
  o.min_queries = 16;
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Four samples were in flight at once, interleaved at their kernels.
  EXPECT_EQ(max_in_flight_.load(), 4);
  EXPECT_GE(r->completed, 16u);
  // Interleaved on one thread, each sample waits for the others' kernels: its latency
  // is about four of its own.
  std::vector<uint64_t> sorted = r->latency_nanos;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_GE(sorted[sorted.size() / 2], 4u * 4 * 200'000 * 3 / 4);
}

TEST_F(LoadTestTest, ServerArrivalsArePoissonAndSeeded) {
  MakeLanes(2, 1, std::chrono::microseconds(100));
  LoadTestOptions o;
  o.scenario = LoadScenario::kServer;
  o.concurrency = 2;
  o.target_qps = 400;
  o.min_duration_ms = 500;
  o.seed = 7;
  auto a = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // About 200 arrivals (Poisson: sd ~14).
  EXPECT_GE(a->issue_nanos.size(), 130u);
  EXPECT_LE(a->issue_nanos.size(), 270u);
  EXPECT_TRUE(std::is_sorted(a->issue_nanos.begin(), a->issue_nanos.end()));
  EXPECT_EQ(a->completed, a->issue_nanos.size());
  // The schedule is the seed's, whatever the device did: the same seed gives the same
  // arrival times, another seed others.
  auto b = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(b.ok());
  size_t common = std::min(a->issue_nanos.size(), b->issue_nanos.size());
  ASSERT_GT(common, 100u);
  for (size_t q = 0; q < common; ++q) ASSERT_EQ(a->issue_nanos[q], b->issue_nanos[q]) << q;
  o.seed = 8;
  auto c = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->issue_nanos[1], c->issue_nanos[1]);
}

TEST_F(LoadTestTest, AnOverloadedServerQueuesAndCountsLateQueries) {
  MakeLanes(1, 1, std::chrono::microseconds(4000));  // at most ~250 QPS
  LoadTestOptions o;
  o.scenario = LoadScenario::kServer;
  o.target_qps = 1000;
  o.min_duration_ms = 200;
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->late, r->issue_nanos.size() / 2);
  // Latency counts from the scheduled arrival: the queue's wait is in it.
  EXPECT_GT(*std::max_element(r->latency_nanos.begin(), r->latency_nanos.end()), 50'000'000u);
}

TEST_F(LoadTestTest, QueriesPastTheLimitAreDroppedNotAnError) {
  MakeLanes(1, 1, std::chrono::microseconds(5000));
  LoadTestOptions o;
  o.scenario = LoadScenario::kServer;
  o.target_qps = 2000;
  o.min_duration_ms = 150;
  auto r = RunLoadTest(lanes_, o, milliseconds(200), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->dropped, 0u);
  EXPECT_EQ(r->completed + r->dropped, r->issue_nanos.size());
  for (size_t q = 0; q < r->issue_nanos.size(); ++q) {
    if (r->latency_nanos[q] == 0) continue;
    EXPECT_LT(r->latency_nanos[q], 1'000'000'000u);
  }
}

TEST_F(LoadTestTest, OfflineIssuesItsSizedBatchAtOnce) {
  MakeLanes(2, 1, std::chrono::microseconds(100));
  LoadTestOptions o;
  o.scenario = LoadScenario::kOffline;
  o.concurrency = 2;
  o.min_duration_ms = 50;
  o.seconds_per_sample = 0.001;  // -> 100 queries for 50 ms on two lanes
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->issue_nanos.size(), 100u);
  EXPECT_EQ(r->completed, 100u);
  for (uint64_t t : r->issue_nanos) EXPECT_EQ(t, 0u);
}

TEST_F(LoadTestTest, MultiStreamQueriesEndWithTheirLastSample) {
  MakeLanes(4, 1, std::chrono::microseconds(200));
  LoadTestOptions o;
  o.scenario = LoadScenario::kMultiStream;
  o.concurrency = 4;
  o.samples_per_query = 8;
  o.min_queries = 5;
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->completed, r->issue_nanos.size());
  EXPECT_EQ(r->samples, 8 * r->completed);
  EXPECT_EQ(max_in_flight_.load(), 4);
  // Eight samples on four lanes: at least two sample times each.
  for (uint64_t l : r->latency_nanos) EXPECT_GE(l, 400'000u);
}

TEST_F(LoadTestTest, AuditedSamplesAreKept) {
  MakeLanes(2, 1, std::chrono::microseconds(50));
  LoadTestOptions o;
  o.concurrency = 2;
  o.min_queries = 30;
  o.audited_samples = {3, 11, 29};
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::sort(kept_.begin(), kept_.end());
  EXPECT_EQ(kept_, (std::vector<uint64_t>{3, 11, 29}));
}

// A run that would end before its audit's last chosen sample (slower than the warmup
// estimated) goes on until that sample, in the closed loop, the server scenario and
// offline's sized batch alike.
TEST_F(LoadTestTest, TheRunReachesEveryAuditedSample) {
  for (LoadScenario scenario : {LoadScenario::kSingleStream, LoadScenario::kServer, LoadScenario::kOffline}) {
    SCOPED_TRACE(LoadScenarioName(scenario));
    kept_.clear();
    MakeLanes(2, 1, std::chrono::microseconds(50));
    LoadTestOptions o;
    o.scenario = scenario;
    o.concurrency = 2;
    o.min_queries = 1;
    if (scenario == LoadScenario::kServer) o.target_qps = 20000;
    o.audited_samples = {3, 40};
    auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::sort(kept_.begin(), kept_.end());
    EXPECT_EQ(kept_, (std::vector<uint64_t>{3, 40}));
    EXPECT_GE(r->samples, 41u);
    EXPECT_EQ(r->dropped, 0u);
  }
}

TEST_F(LoadTestTest, ASampleErrorStopsTheRunWithItsError) {
  MakeLanes(2, 2, std::chrono::microseconds(100));
  fail_at_sample_ = 5;
  LoadTestOptions o;
  o.concurrency = 2;
  o.min_queries = 50;
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("kernel refused"), std::string::npos);
  EXPECT_NE(r.status().message().find("loadTest sample"), std::string::npos);
  EXPECT_EQ(in_flight_.load(), 0);  // every lane stopped before the call returned
}

TEST_F(LoadTestTest, CancellingTheSessionStopsTheRun) {
  MakeLanes(1, 1, std::chrono::microseconds(200));
  LoadTestOptions o;
  o.min_duration_ms = 20000;
  std::thread cancel([this] {
    std::this_thread::sleep_for(milliseconds(100));
    session_.reason = "cancelled by the test";
    session_.cancelled.store(true);
  });
  auto r = RunLoadTest(lanes_, o, milliseconds(30000), session_);
  cancel.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
}

TEST_F(LoadTestTest, OptionsOutOfRangeAreRefusedByName) {
  MakeLanes(1, 1, std::chrono::microseconds(10));
  auto refused = [&](LoadTestOptions o, const std::string& field) {
    auto r = RunLoadTest(lanes_, o, milliseconds(1000), session_);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  LoadTestOptions o;
  o.min_queries = 1;
  LoadTestOptions bad = o;
  bad.concurrency = 0;
  refused(bad, "concurrency");
  bad = o;
  bad.concurrency = 65;
  refused(bad, "concurrency");
  bad = o;
  bad.scenario = LoadScenario::kServer;
  refused(bad, "targetQps");
  bad = o;
  bad.target_qps = 10;
  refused(bad, "targetQps");
  bad = o;
  bad.samples_per_query = 4;
  refused(bad, "samplesPerQuery");
  bad = o;
  bad.min_duration_ms = 5000;
  refused(bad, "minDurationMs");
  bad = o;
  bad.min_queries = 0;
  refused(bad, "minQueries or minDurationMs");
  bad = o;
  bad.min_queries = kMaxLoadQueries + 1;
  refused(bad, "minQueries");
}

}  // namespace load_test_test
}  // namespace remex::server
