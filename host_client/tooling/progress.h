// Progress of a long request on the server (a benchmark, a load scenario, a profile),
// for a front end to show while the request's own call blocks: the samples, queries or
// runs done, and an estimate of the time left. The CLI and the shell show it on their
// terminal progress line; Python does not poll.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "host_client/client/client.h"

namespace remex::tooling {

// "1234 of 5000 samples, about 12 s left", "3 of 5 runs", "812 queries"; "" when the
// request is not running or has done nothing yet.
std::string ProgressText(const client::RequestProgress& p);

// Polls the server, on a thread of its own, for how far `session`'s request is, every
// `period` from `period` after it starts (a command shorter than that never polls), on
// a second connection opened at the first poll with the session's options (token,
// TLS) and kept until the poller stops. Each answer goes to `report` as ProgressText,
// on the poller's thread. A server older than protocol 1.6, or a connection that
// fails, ends the polling quietly: progress is a courtesy, never an error.
class ProgressPoller {
 public:
  using Report = std::function<void(const std::string&)>;
  ProgressPoller(const client::Session& session, Report report,
                 std::chrono::milliseconds period = std::chrono::milliseconds(1000));
  ~ProgressPoller();  // stops polling, closes the second connection
  ProgressPoller(const ProgressPoller&) = delete;
  ProgressPoller& operator=(const ProgressPoller&) = delete;

 private:
  void Loop();

  const client::Session& session_;
  Report report_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace remex::tooling
