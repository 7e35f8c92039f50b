#include "device_server/device_worker.h"

#include <future>
#include <utility>

namespace remex::server {

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  // DeviceServer::Stop drains the queue first, so the last reference to the server's
  // state is never dropped on this thread.
  thread_.join();
}

void DeviceWorker::Post(std::function<void()> work, bool exclusive) {
  auto task = std::make_unique<Task>();
  task->exclusive = exclusive;
  Task* const raw = task.get();
  task->fiber = std::make_unique<Fiber>([raw, work = std::move(work)] {
    work();
    raw->returned.store(true, std::memory_order_release);
  });
  Enqueue(std::move(task));
}

void DeviceWorker::Yield() {
  Task* task = t_task;
  if (task == nullptr || task->exclusive) return;
  if (task->inline_until != std::chrono::steady_clock::time_point::max() &&
      std::chrono::steady_clock::now() < task->inline_until) {
    return;  // started inline and within its budget: go on here
  }
  Fiber::Suspend();
}

void DeviceWorker::MarkWorkReturned() {
  if (t_task != nullptr) t_task->returned.store(true, std::memory_order_release);
}

void DeviceWorker::Drain() {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  Post([&done] { done.set_value(); });
  finished.wait();
  // The marker's fiber is destroyed right after it returns; wait for that too.
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return tasks_.empty() && running_ == nullptr && !inline_running_; });
}

bool DeviceWorker::RunInlineIfIdle(std::function<void()> work, std::chrono::nanoseconds budget) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A device-thread task whose work has returned (MarkWorkReturned: its reply may be
    // what brought this request) is only being torn down: wait for that, microseconds
    // (a time slice where the CPU is oversubscribed), rather than queue this request
    // behind it. Without the wait a client answering at once could find the device busy
    // after every request that went to the device thread.
    idle_cv_.wait(lock, [this] { return running_ == nullptr || !running_->returned.load(std::memory_order_acquire); });
    if (stopping_ || inline_running_ || running_ != nullptr || !tasks_.empty()) return false;
    inline_running_ = true;
  }
  auto task = std::make_unique<Task>();
  task->fiber = std::make_unique<Fiber>(std::move(work));
  task->inline_until = std::chrono::steady_clock::now() + budget;
  Task* const outer = t_task;  // nullptr: the caller is no fiber of a worker
  t_task = task.get();
  const bool finished = task->fiber->Resume();
  t_task = outer;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inline_running_ = false;
    if (!finished) {
      // Past its budget: the device thread finishes it, first, as the request that
      // held the device.
      task->inline_until = std::chrono::steady_clock::time_point::max();
      tasks_.push_front(std::move(task));
    }
    task.reset();  // a finished task's fiber
    queued = !tasks_.empty();
  }
  if (queued) cv_.notify_one();
  idle_cv_.notify_all();
  return true;
}

void DeviceWorker::Enqueue(std::unique_ptr<Task> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void DeviceWorker::Loop() {
  for (;;) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || (!tasks_.empty() && !inline_running_); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = task.get();
    }
    t_task = task.get();
    step_started_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    const bool finished = task->fiber->Resume();
    step_started_.store(0);
    t_task = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = nullptr;
      if (!finished) tasks_.push_back(std::move(task));  // behind everything that is ready
      task.reset();  // a finished task's fiber
    }
    idle_cv_.notify_all();
  }
}

thread_local DeviceWorker::Task* DeviceWorker::t_task = nullptr;

}  // namespace remex::server
