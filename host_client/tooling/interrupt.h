// Ctrl-C (SIGINT) and SIGTERM while a session's call runs: the request in progress is
// cancelled on the server (client::Session::Cancel) and the call returns what it has,
// instead of the process dying or waiting for the run to end. remex bench, remex shell
// and the Python client share it.
//
//   auto irq = *Interrupter::Start(report);   // its thread does the cancelling
//   // in a signal handler: irq->Notify(signo) (async-signal-safe)
//   irq->Watch(&session);                     // while the call runs
//   auto r = BenchVm(session, ..., {.interrupt = &irq->signal()});
//   irq->Watch(nullptr);
//   if (irq->signal() != 0) ...               // interrupted: exit 128 + signal
//
// A cancel that finds no request in progress on the server (the request still on its
// way, or the client between two requests) is sent again every 20 ms while the same
// call is watched, at most 25 times; loops of requests (BenchVm) also read signal()
// before each request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "host_client/client/client.h"

namespace remex::tooling {

class Interrupter {
 public:
  // A cancel that finds nothing running is sent again every kCancelRetryEvery, at most
  // kCancelAttempts times in all, while the same call is watched. Such a cancel can reach
  // the call's next request instead (a clean-up after the loop stopped): it is then not
  // run, CANCELLED, and may be sent again after kCancelWindow.
  static constexpr std::chrono::milliseconds kCancelRetryEvery{20};
  static constexpr int kCancelAttempts = 25;
  static constexpr std::chrono::milliseconds kCancelWindow = kCancelRetryEvery * kCancelAttempts;

  // Messages for the user ("cancelling the request on the server", "nothing runs on the
  // server to cancel; the command goes on", "cannot cancel: ..."), called on the
  // Interrupter's thread. Empty: none.
  using Report = std::function<void(const std::string&)>;

  // Starts the thread. INTERNAL when no pipe can be had.
  static StatusOr<std::unique_ptr<Interrupter>> Start(Report report = {});
  ~Interrupter();
  Interrupter(const Interrupter&) = delete;
  Interrupter& operator=(const Interrupter&) = delete;

  // Async-signal-safe, for a signal handler: records `signal` (1..255) as signal() and
  // wakes the thread, which cancels the watched session's request in progress.
  void Notify(int signal) noexcept;

  // The session whose request a notification cancels; nullptr: none (a notification
  // then only sets signal()). Returns once no cancel for the session watched before is
  // in flight, so that none reaches a later request. Not owned; thread-safe.
  void Watch(client::Session* session);

  // The last signal notified since Reset(); 0: none.
  const std::atomic<int>& signal() const { return signal_; }
  void Reset() { signal_.store(0); }

 private:
  explicit Interrupter(Report report) : report_(std::move(report)) {}
  void Loop();
  void CancelWatched();

  Report report_;
  int pipe_[2] = {-1, -1};
  std::atomic<int> signal_{0};
  std::thread thread_;
  std::mutex mu_;  // guards watched_ and generation_; held while a cancel is sent
  std::condition_variable changed_;
  client::Session* watched_ = nullptr;
  uint64_t generation_ = 0;  // counts Watch calls
};

// "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", else "signal N".
std::string SignalName(int signal);

}  // namespace remex::tooling
