#include "device_server/time_evaluator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "vm/device/cpu_device.h"

namespace remex::server {
namespace time_evaluator_test {

using std::chrono::milliseconds;

class TimeEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = vm::CreateCpuDevice();
    allocator_ = vm::Allocator::Create(*device_);
  }
  std::unique_ptr<vm::Device> device_;
  std::shared_ptr<vm::Allocator> allocator_;
};

TEST_F(TimeEvaluatorTest, WarmupNumberAndRepeat) {
  int calls = 0;
  auto call = [&]() -> Status {
    ++calls;
    return OkStatus();
  };
  TimeEvaluatorOptions o;
  o.number = 3;
  o.repeat = 4;
  o.warmup = 2;
  auto r = RunTimeEvaluator(call, *allocator_, o, milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 2 + 3 * 4);
  EXPECT_EQ(r->number, 3u);
  EXPECT_EQ(r->samples_seconds.size(), 4u);
  EXPECT_EQ(r->timer, "steady_clock");
}

TEST_F(TimeEvaluatorTest, NumberGrowsUntilMinRepeatMs) {
  auto call = [&]() -> Status {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return OkStatus();
  };
  TimeEvaluatorOptions o;
  o.repeat = 3;
  o.min_repeat_ms = 10;
  auto r = RunTimeEvaluator(call, *allocator_, o, milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->number, 1u);
  ASSERT_EQ(r->samples_seconds.size(), 3u);
  for (double s : r->samples_seconds) {
    EXPECT_GE(s * r->number, 0.010 * 0.99);
    EXPECT_GE(s, 150e-6);
    EXPECT_LT(s, 5e-3);
  }
}

TEST_F(TimeEvaluatorTest, FlushBufferIsAllocatedAndReleased) {
  TimeEvaluatorOptions o;
  o.repeat = 2;
  o.l2_flush_bytes = 4 << 20;
  uint64_t peak_before = allocator_->stats().peak_allocated_bytes;
  auto r = RunTimeEvaluator([] { return OkStatus(); }, *allocator_, o, milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(allocator_->stats().peak_allocated_bytes, peak_before + (4u << 20));
  EXPECT_EQ(allocator_->stats().allocated_bytes, 0u);
}

TEST_F(TimeEvaluatorTest, BadOptionsAndErrorsAndTimeLimit) {
  auto ok = [] { return OkStatus(); };
  TimeEvaluatorOptions o;
  o.repeat = 0;
  EXPECT_EQ(RunTimeEvaluator(ok, *allocator_, o, milliseconds(1000)).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.number = 0;
  EXPECT_EQ(RunTimeEvaluator(ok, *allocator_, o, milliseconds(1000)).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.repeat = kMaxRepeat + 1;
  EXPECT_EQ(RunTimeEvaluator(ok, *allocator_, o, milliseconds(1000)).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.l2_flush_bytes = kMaxL2FlushBytes + 1;
  EXPECT_EQ(RunTimeEvaluator(ok, *allocator_, o, milliseconds(1000)).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.repeat = 100;
  o.cooldown_ms = 100;  // 10 s of sleeping alone
  auto too_long = RunTimeEvaluator(ok, *allocator_, o, milliseconds(1000));
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("limit"), std::string::npos);
  // A call that fails stops the run with its error.
  int calls = 0;
  auto failing = [&]() -> Status { return ++calls == 3 ? Internal("boom") : OkStatus(); };
  o = {};
  o.repeat = 5;
  auto failed = RunTimeEvaluator(failing, *allocator_, o, milliseconds(1000));
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_NE(failed.status().message().find("boom"), std::string::npos);
  // Slow calls: the deadline stops the first sample.
  auto slow = [] {
    std::this_thread::sleep_for(milliseconds(20));
    return OkStatus();
  };
  o = {};
  o.warmup = 1;
  o.number = 100;
  o.repeat = 10;
  auto deadline = RunTimeEvaluator(slow, *allocator_, o, milliseconds(500));
  EXPECT_EQ(deadline.status().code(), StatusCode::kDeadlineExceeded);
  // Nothing foreseen (no warmup timing, a long warmup): the limit still holds per call.
  o = {};
  o.warmup = 1000;
  auto start = std::chrono::steady_clock::now();
  auto long_warmup = RunTimeEvaluator(slow, *allocator_, o, milliseconds(300));
  EXPECT_EQ(long_warmup.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  o = {};
  o.warmup = 0;
  o.number = 1000;
  start = std::chrono::steady_clock::now();
  auto long_sample = RunTimeEvaluator(slow, *allocator_, o, milliseconds(300));
  EXPECT_EQ(long_sample.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

TEST_F(TimeEvaluatorTest, TheSamplesLeftAreForeseenFromTheMedianOfThoseTaken) {
  // 1000 samples of about 5 ms cannot fit in 1 s: refused after the third sample, long
  // before the limit, naming the projection.
  auto five_ms = [] {
    std::this_thread::sleep_for(milliseconds(5));
    return OkStatus();
  };
  TimeEvaluatorOptions o;
  o.repeat = 1000;
  auto start = std::chrono::steady_clock::now();
  auto r = RunTimeEvaluator(five_ms, *allocator_, o, milliseconds(1000));
  ASSERT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("would take about"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("lower --repeat or --number"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  // A cold first call (warmup) and one slow sample do not condemn a run that fits.
  int calls = 0;
  auto cold_then_fast = [&] {
    ++calls;
    std::this_thread::sleep_for(calls == 1 || calls == 5 ? milliseconds(150) : std::chrono::microseconds(500));
    return OkStatus();
  };
  o = {};
  o.warmup = 1;
  o.repeat = 200;
  auto fits = RunTimeEvaluator(cold_then_fast, *allocator_, o, milliseconds(2000));
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->samples_seconds.size(), 200u);
}

TEST_F(TimeEvaluatorTest, WarmWarmupCallsForeseeTheRunBeforeItsFirstSample) {
  // A cold first call of 300 ms, then 5 ms calls: 1000 samples cannot fit in 2 s. The
  // warmup calls after the first foresee it: refused before any sample, the message
  // naming the projection (about 5 s), the limit and the flags to lower, once prefixed.
  int calls = 0;
  auto cold_then_5ms = [&] {
    std::this_thread::sleep_for(++calls == 1 ? milliseconds(300) : milliseconds(5));
    return OkStatus();
  };
  TimeEvaluatorOptions o;
  o.warmup = 4;
  o.repeat = 1000;
  auto r = RunTimeEvaluator(cold_then_5ms, *allocator_, o, milliseconds(2000));
  ASSERT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  const std::string& m = r.status().message();
  EXPECT_EQ(calls, 4) << "refused after the warmup, before the first sample";
  EXPECT_EQ(m.rfind("benchmark: the run would take about ", 0), 0u) << m;
  EXPECT_EQ(m.find("benchmark:", 1), std::string::npos) << m;
  double projected = 0;
  ASSERT_EQ(std::sscanf(m.c_str(), "benchmark: the run would take about %lf s", &projected), 1) << m;
  EXPECT_GT(projected, 4.0) << m;   // 1000 x 5 ms, and the warmup's 0.3 s
  EXPECT_LT(projected, 60.0) << m;  // not from the cold call (1000 x 300 ms)
  EXPECT_NE(m.find("1000 samples of 1 call at a median of"), std::string::npos) << m;
  EXPECT_NE(m.find("over the server's limit of 2 s (remex-server --benchmark-time-limit-s)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("lower --repeat or --number"), std::string::npos) << m;

  // The same calls, a run that fits: the cold first call alone condemns nothing.
  calls = 0;
  o.repeat = 100;  // 0.5 s
  auto fits = RunTimeEvaluator(cold_then_5ms, *allocator_, o, milliseconds(2000));
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->samples_seconds.size(), 100u);

  // With min_repeat_ms, --number is the server's to grow: the message names
  // --min-repeat-ms instead.
  calls = 0;
  o.repeat = 400;
  o.min_repeat_ms = 4;
  auto grown = RunTimeEvaluator(cold_then_5ms, *allocator_, o, milliseconds(2000));
  ASSERT_EQ(grown.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(grown.status().message().find("lower --repeat or --min-repeat-ms"), std::string::npos)
      << grown.status().message();
}

TEST_F(TimeEvaluatorTest, ACancelStopsTheRunWithTheSamplesTaken) {
  auto one_ms = [] {
    std::this_thread::sleep_for(milliseconds(1));
    return OkStatus();
  };
  std::atomic<bool> cancelled{false};
  TimeEvaluatorOptions o;
  o.number = 10;
  o.repeat = 10000;  // 100 s unless cancelled
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancelled = true;
  });
  auto start = std::chrono::steady_clock::now();
  auto r = RunTimeEvaluator(one_ms, *allocator_, o, milliseconds(600000), &cancelled);
  const auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->cancel_status.code(), StatusCode::kCancelled);
  EXPECT_GE(r->samples_seconds.size(), 1u);
  EXPECT_LT(r->samples_seconds.size(), 10000u);
  for (double s : r->samples_seconds) EXPECT_GE(s, 0.9e-3);  // whole samples only
  EXPECT_LT(took, milliseconds(10000));

  // A cooldown is cut short by the cancel too.
  cancelled = false;
  o = {};
  o.repeat = 3;
  o.cooldown_ms = 20000;
  std::thread cooldown_canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancelled = true;
  });
  start = std::chrono::steady_clock::now();
  r = RunTimeEvaluator(one_ms, *allocator_, o, milliseconds(600000), &cancelled);
  cooldown_canceller.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->samples_seconds.size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(10000));

  // A call that returns CANCELLED (the VM saw the cancel at a kernel boundary) stops
  // the run the same way, with its status.
  int calls = 0;
  auto cancelled_at_7 = [&] {
    return ++calls == 7 ? Cancelled("cancelled by a cancel request") : OkStatus();
  };
  o = {};
  o.number = 2;
  o.repeat = 10;
  r = RunTimeEvaluator(cancelled_at_7, *allocator_, o, milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->cancel_status.message(), "cancelled by a cancel request");
  EXPECT_EQ(r->samples_seconds.size(), 3u);  // calls 1-6; the fourth sample is cut at call 7
}

}  // namespace time_evaluator_test
}  // namespace remex::server
