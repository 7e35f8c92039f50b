#include "device_server/time_evaluator.h"

#include <gtest/gtest.h>

#include <thread>

namespace remex::server {
namespace {

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
  EXPECT_NE(r.status().message().find("would outrun"), std::string::npos) << r.status().message();
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

}  // namespace
}  // namespace remex::server
