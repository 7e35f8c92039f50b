// The server's metrics and its HTTP endpoint (remex-server --metrics HOST:PORT):
//   GET /metrics  Prometheus text exposition format 0.0.4
//                 (https://prometheus.io/docs/instrumenting/exposition_formats/);
//                 when the server has a metrics token (ServerConfig::metrics_token),
//                 only with "Authorization: Bearer TOKEN", else 401
//   GET /healthz  200 "ok" unless the device thread has been inside one step of work
//                 (one kernel, or one exclusive benchmark) longer than any run may
//                 last: 503 naming how long
//   GET /readyz   200 "ready" when the server is not stopping and its device worker
//                 answers a probe within 1 s; else 503 with the reason
// Served by Boost.Beast on a thread of its own; each connection gets one response and
// is closed; anything else is 404 (405 for another method).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "device_server/requests.h"

namespace remex::server {

// Request counts by kind and status code, and the invoke latency histogram. Every
// method is thread-safe.
class RequestMetrics {
 public:
  // Upper bounds (seconds) of the invoke latency histogram's buckets; +Inf is implied.
  static constexpr std::array<double, 14> kInvokeBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                           0.1,    0.25,  0.5,    1,     2.5,  5,     10};

  // Counted kinds, by slot: the request table's rows (requests.h: RowIndex), then a
  // frame that is not a readable request, then a kind without a row (a newer
  // protocol's request).
  static constexpr size_t kMalformed = kNumRequests;
  static constexpr size_t kUnknown = kNumRequests + 1;
  static constexpr size_t kSlots = kNumRequests + 2;
  // The slot's kind label: the request's name in the protocol (invoke, tensorWrite,
  // ...), "malformed" or "unknown".
  static std::string_view SlotName(size_t slot);

  // Counts a request of kind `slot` (< kSlots) answered with `code`.
  void Count(size_t slot, StatusCode code);
  void ObserveInvoke(std::chrono::nanoseconds run);
  // Counts a request of row `slot` (< kNumRequests) that started on the I/O thread that
  // received it, without the hand-off to the device thread (DeviceWorker::RunInlineIfIdle).
  void CountInline(size_t slot);
  // Appends this object's families (remex_requests_total, remex_requests_inline_total,
  // remex_invoke_seconds) in exposition format.
  void Render(std::string& out) const;

 private:
  mutable std::mutex mu_;
  std::array<std::array<uint64_t, 17>, kSlots> counts_{};  // [slot][status code]
  std::array<uint64_t, kSlots> inline_{};                  // [slot]
  std::array<uint64_t, kInvokeBuckets.size() + 1> buckets_{};
  double invoke_sum_seconds_ = 0;
  uint64_t invoke_count_ = 0;
};

// A GET request: its path (without the query string) and its Authorization header
// ("" when absent). Both are the client's bytes, untrusted.
struct HttpRequest {
  std::string_view target;
  std::string_view authorization;
};

// A response: HTTP status and a text/plain body; `www_authenticate`, when set, is sent
// as the WWW-Authenticate header (with a 401).
struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status_code, std::string text, std::string type = "text/plain; charset=utf-8",
               std::string authenticate = "")
      : status(status_code),
        body(std::move(text)),
        content_type(std::move(type)),
        www_authenticate(std::move(authenticate)) {}
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::string www_authenticate;
};

// A minimal HTTP/1.1 endpoint for GET requests, on its own thread.
class HttpEndpoint {
 public:
  // Answers one GET request.
  using Handler = std::function<HttpResponse(const HttpRequest& request)>;
  // Binds HOST:PORT (port 0: any free one) and starts serving. UNAVAILABLE when the
  // address cannot be bound.
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& host, uint16_t port, Handler handler);
  ~HttpEndpoint();  // stops serving and joins the thread
  uint16_t port() const;

 private:
  struct Impl;
  explicit HttpEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace remex::server
