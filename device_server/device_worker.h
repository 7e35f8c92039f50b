// The device worker of remex-server: one thread per device that runs the sessions'
// device work as fibers taking turns between kernels (internal to device_server/).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/fiber.h"

namespace remex::server {

// Runs device work on one thread per device: the sessions' requests (Post, see
// Session::HandleAsync). Kernel libraries thus see one calling thread however many
// sessions are served (oneDNN's OpenMP team is per calling thread; several teams on few
// cores oversubscribe them). Buffers are still allocated and freed from I/O threads
// (in-place receives, session teardown); the Allocator is thread-safe for that.
//
// Each request runs as a fiber (base/fiber.h), and the fibers take turns: a run yields
// after every kernel, and when it launches none for a slice (a loop of jumps: 100 us,
// RunControl::slice), through Yield, which the VM calls by RunControl::yield; the worker
// then resumes the next ready request in arrival order. One session's long run thus
// delays another session's request by at most one kernel or one slice, however its
// executable loops. Exclusive work (benchmarks
// and profiles, whose timings must be their own) does not yield: it runs to its end
// once started, and other requests wait meanwhile.
class DeviceWorker {
 public:
  DeviceWorker() : thread_([this] { Loop(); }) {}
  ~DeviceWorker();

  // Queues `work` on the device thread and returns at once. `work` must not throw.
  // With `exclusive`, Yield() does nothing inside it.
  void Post(std::function<void()> work, bool exclusive = false);

  // From device work: lets the other ready requests run one step each (up to their
  // next yield) before this one goes on; suspends even when none is ready (the worker
  // then resumes it at once). Does nothing outside the worker's fibers and
  // inside exclusive work.
  static void Yield();

  // Called by the running task when what it owes its caller is done (a request's reply
  // handed to the I/O thread) and only its return and teardown are left: from then on
  // RunInlineIfIdle waits for the device thread to finish it instead of counting the
  // device busy. Does nothing outside a worker's task.
  static void MarkWorkReturned();

  // How long the device thread has been in its current step of work (one request up
  // to its next yield: one kernel, or a whole exclusive benchmark); zero when idle.
  std::chrono::nanoseconds current_step() const {
    const int64_t started = step_started_.load();
    if (started == 0) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(std::chrono::steady_clock::now().time_since_epoch().count() - started);
  }

  // Starts `work` on the calling thread, now, when the device thread is idle (nothing
  // running, nothing queued), and returns true; otherwise returns false without
  // running it. The device thread starts nothing meanwhile, so kernels still run one
  // caller at a time. `work` runs as a fiber like posted work: at its first Yield
  // after `budget` (after a kernel, or a VM run's slice without one) it is suspended and handed to the device thread, which finishes it
  // in turn with the other requests (so `work` may end on either thread, and
  // RunInlineIfIdle may return before it ends). For short device work (a small model's
  // invoke): it saves the two thread hand-offs of Post, which cost a small invoke more
  // than its kernels (docs/benchmarks.md, round-trip latency), while a misjudged long
  // run holds the calling thread for at most `budget` and one kernel or one slice.
  // `work` must not throw.
  bool RunInlineIfIdle(std::function<void()> work, std::chrono::nanoseconds budget);

  // Waits until every task queued before the call has run and been destroyed. Not to
  // be called from the device thread.
  void Drain();

 private:
  struct Task {
    std::unique_ptr<Fiber> fiber;
    bool exclusive = false;
    // Started by RunInlineIfIdle: runs on its caller's thread until this time, then
    // yields to the device thread. max: a task of the device thread.
    std::chrono::steady_clock::time_point inline_until = std::chrono::steady_clock::time_point::max();
    // Its work returned (a request's reply is written by then): only the fiber's teardown
    // is left, which RunInlineIfIdle waits for rather than count the device as busy.
    std::atomic<bool> returned{false};
  };

  void Enqueue(std::unique_ptr<Task> task);
  void Loop();

  static thread_local Task* t_task;

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<Task>> tasks_;
  Task* running_ = nullptr;
  bool inline_running_ = false;  // RunInlineIfIdle's work holds the device
  bool stopping_ = false;
  std::atomic<int64_t> step_started_{0};  // steady-clock ticks; 0: idle
  std::thread thread_;  // last: starts after the queue exists
};

}  // namespace remex::server
