#include "device_server/metrics.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <thread>

#include "rpc/auth.h"

namespace remex::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string_view RequestMetrics::SlotName(size_t slot) {
  if (slot < kNumRequests) return kRequests[slot].name;
  return slot == kMalformed ? "malformed" : "unknown";
}

void RequestMetrics::Count(size_t slot, StatusCode code) {
  const auto c = static_cast<size_t>(code);
  std::lock_guard<std::mutex> lock(mu_);
  if (slot < counts_.size() && c < counts_[slot].size()) ++counts_[slot][c];
}

void RequestMetrics::CountInline(size_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot < inline_.size()) ++inline_[slot];
}

void RequestMetrics::ObserveInvoke(std::chrono::nanoseconds run) {
  const double seconds = std::chrono::duration<double>(run).count();
  std::lock_guard<std::mutex> lock(mu_);
  size_t b = 0;
  while (b < kInvokeBuckets.size() && seconds > kInvokeBuckets[b]) ++b;
  ++buckets_[b];
  invoke_sum_seconds_ += seconds;
  ++invoke_count_;
}

void RequestMetrics::Render(std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP remex_requests_total Requests answered, by kind and status code.\n";
  out += "# TYPE remex_requests_total counter\n";
  for (size_t k = 0; k < counts_.size(); ++k) {
    for (size_t c = 0; c < counts_[k].size(); ++c) {
      if (counts_[k][c] == 0) continue;
      out += "remex_requests_total{kind=\"" + std::string(SlotName(k)) + "\",code=\"" +
             std::string(StatusCodeName(static_cast<StatusCode>(c))) + "\"} " +
             std::to_string(counts_[k][c]) + "\n";
    }
  }
  out += "# HELP remex_requests_inline_total Requests that started on the I/O thread that received them, "
         "the device thread being idle, without the hand-offs to it and back (--inline-invoke-below-us).\n";
  out += "# TYPE remex_requests_inline_total counter\n";
  for (size_t k = 0; k < inline_.size(); ++k) {
    if (inline_[k] == 0) continue;
    out += "remex_requests_inline_total{kind=\"" + std::string(SlotName(k)) + "\"} " + std::to_string(inline_[k]) + "\n";
  }
  out += "# HELP remex_invoke_seconds Run time of invoke requests on the device.\n";
  out += "# TYPE remex_invoke_seconds histogram\n";
  uint64_t cumulative = 0;
  char le[32];
  for (size_t b = 0; b < kInvokeBuckets.size(); ++b) {
    cumulative += buckets_[b];
    std::snprintf(le, sizeof le, "%g", kInvokeBuckets[b]);
    out += "remex_invoke_seconds_bucket{le=\"" + std::string(le) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += buckets_.back();
  out += "remex_invoke_seconds_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9g", invoke_sum_seconds_);
  out += "remex_invoke_seconds_sum " + std::string(sum) + "\n";
  out += "remex_invoke_seconds_count " + std::to_string(invoke_count_) + "\n";
}


// One thread runs an io_context: accept, read one request (5 s deadline, 8 KiB of
// headers at most), write one response, close.
struct HttpEndpoint::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Handler handler;
  std::thread thread;
  uint16_t bound_port = 0;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (acceptor.is_open()) Accept();
        return;
      }
      Serve(std::make_shared<beast::tcp_stream>(std::move(socket)));
      Accept();
    });
  }

  void Serve(std::shared_ptr<beast::tcp_stream> stream) {
    auto buffer = std::make_shared<beast::flat_buffer>(8192);
    auto parser = std::make_shared<http::request_parser<http::empty_body>>();
    parser->header_limit(8192);
    stream->expires_after(std::chrono::seconds(5));
    http::async_read(*stream, *buffer, *parser,
                     [this, stream, buffer, parser](beast::error_code ec, size_t) {
                       if (ec) return;
                       const auto& req = parser->get();
                       auto res = std::make_shared<http::response<http::string_body>>();
                       res->version(req.version());
                       res->keep_alive(false);
                       res->set(http::field::server, "remex-server");
                       HttpResponse r;
                       if (req.method() != http::verb::get) {
                         r = {405, "only GET is served\n"};
                       } else {
                         std::string_view target(req.target().data(), req.target().size());
                         HttpRequest request;
                         request.target = target.substr(0, target.find('?'));
                         const auto authorization = req.find(http::field::authorization);
                         if (authorization != req.end()) {
                           request.authorization = std::string_view(authorization->value().data(),
                                                                    authorization->value().size());
                         }
                         try {
                           r = handler(request);
                         } catch (const std::exception& e) {
                           r = {500, std::string("internal error: ") + e.what() + "\n"};
                         }
                       }
                       res->result(static_cast<http::status>(r.status));
                       res->set(http::field::content_type, r.content_type);
                       if (!r.www_authenticate.empty()) res->set(http::field::www_authenticate, r.www_authenticate);
                       res->body() = std::move(r.body);
                       res->prepare_payload();
                       http::async_write(*stream, *res, [stream, res](beast::error_code, size_t) {
                         beast::error_code ignored;
                         stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
                       });
                     });
  }
};

HttpEndpoint::HttpEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const std::string& host, uint16_t port, Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("metrics address " + where + ": " + ec.message());
  tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("metrics endpoint on " + where + ": " + ec.message());
  impl->bound_port = impl->acceptor.local_endpoint(ec).port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(impl)));
}

HttpEndpoint::~HttpEndpoint() {
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  impl_->thread.join();
}

uint16_t HttpEndpoint::port() const { return impl_->bound_port; }

}  // namespace remex::server
