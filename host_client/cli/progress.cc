#include "host_client/cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace remex::cli {

namespace {
constexpr auto kDelay = std::chrono::milliseconds(1000);   // quiet below this
constexpr auto kRedraw = std::chrono::milliseconds(200);
}  // namespace

TerminalProgress::TerminalProgress(bool wanted) : enabled_(wanted && isatty(STDERR_FILENO)) {
  if (enabled_) thread_ = std::thread([this] { Loop(); });
}

TerminalProgress::~TerminalProgress() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ClearLocked();
  }
  cv_.notify_all();
  thread_.join();
}

void TerminalProgress::Step(const std::string& step) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ClearLocked();
  step_ = step;
  detail_.clear();
  started_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

void TerminalProgress::Detail(const std::string& detail) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  detail_ = detail;
}

void TerminalProgress::ClearLocked() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

void TerminalProgress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kRedraw);
    if (stop_ || step_.empty()) continue;
    const auto elapsed = std::chrono::steady_clock::now() - started_;
    if (elapsed < kDelay) continue;
    std::fprintf(stderr, "\r\033[K%s%s%s  %.1f s", step_.c_str(), detail_.empty() ? "" : ": ", detail_.c_str(),
                 std::chrono::duration<double>(elapsed).count());
    std::fflush(stderr);
    drawn_ = true;
  }
}

}  // namespace remex::cli
