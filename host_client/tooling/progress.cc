#include "host_client/tooling/progress.h"

#include <cmath>

#include "host_client/tooling/text.h"

namespace remex::tooling {

std::string ProgressText(const client::RequestProgress& p) {
  if (!p.running || p.done == 0) return "";
  const char* unit = p.kind == "benchmark" ? "samples" : p.kind == "profile" ? "runs" : "queries";
  std::string text = p.total > 0 ? Format("%llu of %llu %s", static_cast<unsigned long long>(p.done),
                                          static_cast<unsigned long long>(p.total), unit)
                                 : Format("%llu %s", static_cast<unsigned long long>(p.done), unit);
  if (p.remaining_s > 0) {
    text += p.remaining_s < 90 ? Format(", about %.0f s left", std::ceil(p.remaining_s))
                               : Format(", about %.0f min left", std::ceil(p.remaining_s / 60));
  }
  return text;
}

ProgressPoller::ProgressPoller(const client::Session& session, Report report,
                               std::chrono::milliseconds period)
    : session_(session), report_(std::move(report)), period_(period) {
  thread_ = std::thread([this] { Loop(); });
}

ProgressPoller::~ProgressPoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressPoller::Loop() {
  std::unique_ptr<client::Session> side;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period_, [this] { return stop_; })) return;
    lock.unlock();
    bool ok = true;
    if (!side) {
      auto other = session_.ConnectAnother();
      ok = other.ok();
      if (ok) side = std::move(other).value();
    }
    if (ok) {
      auto p = side->ProgressOf(session_.server_info());
      ok = p.ok();
      if (ok) report_(ProgressText(*p));
    }
    lock.lock();
    if (!ok) return;  // an old server, or no connection: no progress, quietly
  }
}

}  // namespace remex::tooling
