#include "device_server/device_worker.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace remex::server {
namespace device_worker_test {

using namespace std::chrono_literals;

// The calling thread's id from the kernel. Not std::this_thread::get_id(): its
// pthread_self() is declared const, so a compiler may keep its value across a Yield
// that moved the fiber to another thread.
long ThreadId() { return syscall(SYS_gettid); }

TEST(DeviceWorkerTest, InlineWorkRunsOnTheCallingThreadWhenTheDeviceIsIdle) {
  DeviceWorker worker;
  worker.Drain();
  long ran_on = 0;
  bool ran = worker.RunInlineIfIdle([&] { ran_on = ThreadId(); }, 1s);
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, ThreadId());
}

TEST(DeviceWorkerTest, InlineWorkIsRefusedWhileTheDeviceThreadRuns) {
  DeviceWorker worker;
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  worker.Post([&started, released] {
    started.set_value();
    released.wait();
  });
  started.get_future().wait();
  bool ran_inline = false;
  EXPECT_FALSE(worker.RunInlineIfIdle([&] { ran_inline = true; }, 1s));
  EXPECT_FALSE(ran_inline);
  release.set_value();
  worker.Drain();
  EXPECT_TRUE(worker.RunInlineIfIdle([&] { ran_inline = true; }, 1s));
  EXPECT_TRUE(ran_inline);
}

TEST(DeviceWorkerTest, WorkPostedDuringAnInlineRunWaitsForIt) {
  DeviceWorker worker;
  worker.Drain();
  std::atomic<bool> inline_done{false};
  std::atomic<bool> posted_saw_inline_done{false};
  std::promise<void> posted_ran;
  ASSERT_TRUE(worker.RunInlineIfIdle(
      [&] {
        worker.Post([&] {
          posted_saw_inline_done = inline_done.load();
          posted_ran.set_value();
        });
        std::this_thread::sleep_for(50ms);  // the device thread would run the post now
        inline_done = true;
      },
      1s));
  posted_ran.get_future().wait();
  EXPECT_TRUE(posted_saw_inline_done) << "the device thread ran work while inline work held the device";
}

TEST(DeviceWorkerTest, InlineWorkPastItsBudgetMovesToTheDeviceThreadAtAYield) {
  DeviceWorker worker;
  // The device thread's id, from work it runs.
  std::promise<long> device_id;
  worker.Post([&] { device_id.set_value(ThreadId()); });
  const long device_thread = device_id.get_future().get();
  worker.Drain();
  std::vector<long> steps;
  std::promise<void> done;
  ASSERT_TRUE(worker.RunInlineIfIdle(
      [&] {
        steps.push_back(ThreadId());
        DeviceWorker::Yield();  // within the budget: stays
        steps.push_back(ThreadId());
        std::this_thread::sleep_for(30ms);
        DeviceWorker::Yield();  // past the budget: moves
        steps.push_back(ThreadId());
        done.set_value();
      },
      10ms));
  done.get_future().wait();
  worker.Drain();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], ThreadId());
  EXPECT_EQ(steps[1], ThreadId());
  EXPECT_EQ(steps[2], device_thread);
}

}  // namespace device_worker_test
}  // namespace remex::server
