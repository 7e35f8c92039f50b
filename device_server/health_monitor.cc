#include "device_server/health_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <utility>

namespace remex::server {

StatusOr<std::chrono::seconds> ParseSelfTestInterval(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument(
        "--self-test-interval must be 0 (off) or a whole number with a unit s, m, h or d (30s, "
        "10m, 1h), from 1s to 7d; got '" +
        std::string(text) + "'");
  };
  if (text == "0") return std::chrono::seconds(0);
  if (text.size() < 2 || text.size() > 12) return bad();
  uint64_t n = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  uint64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      return bad();
  }
  // At most 11 digits: n * unit stays far below 2^64.
  const std::chrono::seconds interval(static_cast<int64_t>(n * unit));
  if (interval < kMinSelfTestInterval || interval > kMaxSelfTestInterval) return bad();
  return interval;
}

HealthMonitor::HealthMonitor(Options options) : options_(std::move(options)) {}

HealthMonitor::~HealthMonitor() { Stop(); }

uint64_t HealthMonitor::Enqueue(Shared& shared, SelfTestResult result, std::string reason) {
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    if (shared.stopping) return 0;
    seq = ++shared.submitted;
    shared.queue.push_back(
        {seq, std::move(result), std::move(reason), static_cast<int64_t>(std::time(nullptr))});
  }
  shared.wake.notify_all();
  return seq;
}

uint64_t HealthMonitor::Submit(SelfTestResult result, std::string reason) {
  return Enqueue(*shared_, std::move(result), std::move(reason));
}

void HealthMonitor::Start(std::string pool, std::string id, std::string device, PostSelfTest post) {
  pool_ = std::move(pool);
  id_ = std::move(id);
  device_ = std::move(device);
  post_ = std::move(post);
  thread_ = std::thread([this] { Run(); });
}

bool HealthMonitor::WaitJudged(uint64_t seq, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  return shared_->wake.wait_for(lock, timeout, [&] { return shared_->judged >= seq || shared_->stopping; }) &&
         shared_->judged >= seq;
}

void HealthMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
    shared_->queue.clear();
  }
  shared_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::Run() {
  Shared& shared = *shared_;
  using Clock = std::chrono::steady_clock;
  const bool periodic = options_.interval.count() > 0;
  Clock::time_point next = Clock::now() + options_.interval;
  std::unique_lock<std::mutex> lock(shared.mu);
  for (;;) {
    const auto ready = [&] { return shared.stopping || !shared.queue.empty(); };
    if (periodic) {
      shared.wake.wait_until(lock, next, ready);
    } else {
      shared.wake.wait(lock, ready);
    }
    if (shared.stopping) return;
    if (!shared.queue.empty()) {
      Item item = std::move(shared.queue.front());
      shared.queue.pop_front();
      lock.unlock();
      const bool healthy = Judge(item);
      if (!healthy && periodic) next = std::min(next, Clock::now() + kUnhealthyRetest);
      lock.lock();
      shared.judged = item.seq;
      shared.wake.notify_all();
      continue;
    }
    if (!periodic || Clock::now() < next) continue;
    next = Clock::now() + options_.interval;
    // One periodic self-test at a time: a device busy past the interval (a long
    // benchmark runs without yielding) does not pile them up.
    if (shared.interval_test_posted) continue;
    shared.interval_test_posted = true;
    lock.unlock();
    post_([weak = std::weak_ptr<Shared>(shared_)](std::optional<SelfTestResult> result) {
      const std::shared_ptr<Shared> s = weak.lock();
      if (!s) return;
      {
        std::lock_guard<std::mutex> guard(s->mu);
        s->interval_test_posted = false;
      }
      if (!result) {
        spdlog::info(
            "periodic self-test skipped: the device is being reset after a fault (the reset runs one)");
        return;
      }
      Enqueue(*s, std::move(result).value(), "interval");
    });
    lock.lock();
  }
}

bool HealthMonitor::Judge(const Item& item) {
  const std::string url = tooling::RedactResultsUrl(options_.results_url);
  if (!options_.results_url.empty() && !store_) {
    auto store = tooling::OpenResultsStore(options_.results_url);
    if (store.ok()) {
      store_ = std::move(store).value();
      if (store_failing_) spdlog::info("results store {}: reachable again", url);
      store_failing_ = false;
    } else {
      spdlog::warn(
          "results store {}: {}; the self-test is not recorded and its latency not judged (health on "
          "correctness only) until the store can be opened",
          url, store.status().ToString());
      store_failing_ = true;
    }
  }
  tooling::SelfTestRun run;
  run.pool = pool_;
  run.id = id_;
  run.device = device_;
  run.reason = item.reason;
  run.description = options_.description;
  run.error = item.result.status.ok() ? "" : item.result.status.message();
  run.samples_ms = item.result.samples_ms;
  run.unix_s = item.unix_s;
  tooling::SelfTestOutcome outcome = tooling::JudgeAndRecordSelfTest(store_.get(), run, options_.drift);
  if (!outcome.store_status.ok()) {
    spdlog::warn("results store {}: {}; the self-test is not recorded (health on correctness only)", url,
                 outcome.store_status.ToString());
    store_.reset();  // opened again at the next self-test
    store_failing_ = true;
  }
  const auto& summary = outcome.record.summary;
  const std::string median = summary.contains("median_ms")
                                 ? fmt::format(", median {:.4g} ms", summary["median_ms"].get<double>())
                                 : "";
  const std::string latency = !options_.results_url.empty() && !store_
                                  ? std::string("not judged (the results store cannot be reached)")
                                  : outcome.drift.reason;
  if (outcome.healthy) {
    spdlog::info("self-test ({}): pass{}; latency: {}", item.reason, median, latency);
  } else {
    spdlog::error("self-test ({}): fail{}: {}", item.reason, median, outcome.health);
  }
  if (options_.on_outcome) options_.on_outcome(outcome);
  return outcome.healthy;
}

}  // namespace remex::server
