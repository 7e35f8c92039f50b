// Progress of long steps on a terminal: after a step has run for about a second, one
// line on stderr ("uploading the inputs (12.0 MiB)  1.4 s", "benchmarking main: 1234 of
// 5000 samples, about 12 s left  4.1 s") is redrawn in place, and cleared when the step
// ends. Off when stderr is no terminal or the output is JSON.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace remex::cli {

class TerminalProgress {
 public:
  // Enabled only when `wanted` and stderr is a terminal.
  explicit TerminalProgress(bool wanted);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // Starts `step` (ending the previous one); "" ends the current step.
  void Step(const std::string& step);
  // What the current step has done so far, shown after its name until the next Step
  // (tooling::ProgressPoller's text); "" shows none. Thread-safe.
  void Detail(const std::string& detail);
  bool enabled() const { return enabled_; }

 private:
  void Loop();
  void ClearLocked();

  bool enabled_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string step_;
  std::string detail_;
  std::chrono::steady_clock::time_point started_;
  bool drawn_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace remex::cli
