// remex-server's device health over time (docs/farm.md, "Health"): the self-tests at
// start, after every device reset and every --self-test-interval, each judged for
// latency drift against the device's history in the results store and recorded there
// (host_client/tooling/self_test_history.h). Part of the remex-server executable: the
// device server library stays free of the results store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "base/status.h"
#include "device_server/self_test.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/self_test_history.h"

namespace remex::server {

// The shortest and longest --self-test-interval (0 turns it off).
inline constexpr std::chrono::seconds kMinSelfTestInterval{1};
inline constexpr std::chrono::seconds kMaxSelfTestInterval{7 * 24 * 3600};

// A device found unhealthy is tested again this soon when the interval is longer, so
// that a quarantine a moment of load caused (a slow self-test on a busy host) ends
// within a minute, not an interval, once a self-test passes.
inline constexpr std::chrono::seconds kUnhealthyRetest{60};

// A --self-test-interval value: "0" (off), or a whole number with a unit, s, m, h or d
// (30s, 10m, 1h), from kMinSelfTestInterval to kMaxSelfTestInterval. INVALID_ARGUMENT
// naming the forms otherwise.
StatusOr<std::chrono::seconds> ParseSelfTestInterval(std::string_view text);

class HealthMonitor {
 public:
  struct Options {
    // The results store (results_store.h URL form, checked by the caller); empty: none,
    // and the health rests on correctness alone. Opened on the monitor's thread at the
    // first self-test, and again after any failure of the store: a store that cannot be
    // reached is a warning in the log, never a reason to stop serving.
    std::string results_url;
    // Between periodic self-tests (kUnhealthyRetest while the device is unhealthy, when
    // shorter); 0: none.
    std::chrono::seconds interval{3600};
    tooling::DriftOptions drift;
    std::string description;  // SelfTestDescription()
    // Called on the monitor's thread with each self-test judged (and recorded).
    std::function<void(const tooling::SelfTestOutcome&)> on_outcome;
  };
  // Queues `done` to be called with a new self-test's result, as
  // DeviceServer::PostSelfTest does (nullopt: skipped, the device is being reset).
  using PostSelfTest = std::function<void(std::function<void(std::optional<SelfTestResult>)> done)>;

  explicit HealthMonitor(Options options);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Queues the result of a self-test that ran ("start", "reset") for judgement; returns
  // its sequence number (from 1). Never blocks; from any thread, before or after Start.
  uint64_t Submit(SelfTestResult result, std::string reason);

  // Starts the monitor's thread: it judges and records what is queued, as the device
  // `pool`/`id` ("local" and HOST:PORT without a farm) serving `device`, and every
  // interval asks `post` for a self-test (one at a time).
  void Start(std::string pool, std::string id, std::string device, PostSelfTest post);

  // Waits up to `timeout` until the self-test `seq` has been judged (and the store
  // written or given up); true when it has.
  bool WaitJudged(uint64_t seq, std::chrono::milliseconds timeout);

  // Stops the thread (a self-test being judged is finished first); what is queued is
  // dropped. Idempotent.
  void Stop();

 private:
  struct Item {
    uint64_t seq = 0;
    SelfTestResult result;
    std::string reason;
    int64_t unix_s = 0;
  };
  // What the device worker's callbacks share with the monitor; outlives it.
  struct Shared {
    std::mutex mu;
    std::condition_variable wake;
    std::deque<Item> queue;
    uint64_t submitted = 0, judged = 0;
    bool stopping = false;
    bool interval_test_posted = false;  // a periodic self-test is queued on the device
  };
  static uint64_t Enqueue(Shared& shared, SelfTestResult result, std::string reason);
  void Run();
  // Judges and records `item`; whether the device is healthy.
  bool Judge(const Item& item);

  const Options options_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::string pool_, id_, device_;
  PostSelfTest post_;
  std::unique_ptr<tooling::ResultsStore> store_;  // the thread's
  bool store_failing_ = false;                    // the thread's
  std::thread thread_;
};

}  // namespace remex::server
