#include "host_client/tooling/web_server.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <csignal>
#include <cstdlib>
#include <exception>

#include "rpc/stream.h"

namespace remex::tooling {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// What every connection of a server shares; held by each connection, so that a
// connection destroyed with the io_context finds it alive.
struct Shared {
  WebServerOptions options;
  WebHandler handler;
  size_t connections = 0;  // open now (the server's one thread only)
};

// The response to a request that the handler never saw (bad request, too large).
http::response<http::string_body> Plain(int status, const std::string& text, unsigned version,
                                        const std::string& server) {
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  res.set(http::field::server, server);
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(false);
  res.body() = text;
  res.prepare_payload();
  return res;
}

std::string Header(const http::request<http::string_body>& req, http::field field) {
  auto it = req.find(field);
  return it == req.end() ? std::string() : std::string(it->value());
}

// One connection: reads requests one after the other, answers each through the handler.
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(std::shared_ptr<Shared> shared, Stream stream, bool tls)
      : shared_(std::move(shared)), stream_(std::move(stream)), tls_(tls) {
    ++shared_->connections;
  }
  ~Connection() { --shared_->connections; }

  void Start() {
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->Read();
                              });
    } else {
      Read();
    }
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_->options.max_header_bytes));
    parser_->body_limit(shared_->options.max_body_bytes);
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Write(Plain(413, "request body too large\n", 11, shared_->options.server_name));
    }
    if (ec == http::error::header_limit) {
      return Write(Plain(431, "request header too large\n", 11, shared_->options.server_name));
    }
    if (ec) return Close();  // end of stream, timeout, or bytes that are no HTTP
    const auto& req = parser_->get();
    WebRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.authorization = Header(req, http::field::authorization);
    request.cookie = Header(req, http::field::cookie);
    request.content_type = Header(req, http::field::content_type);
    request.body = req.body();
    request.tls = tls_;
    WebResponse answer;
    try {
      answer = shared_->handler(request);
    } catch (const std::exception& e) {
      answer = {500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what() + "\n", {}};
    } catch (...) {
      answer = {500, "text/plain; charset=utf-8", "internal error\n", {}};
    }
    http::response<http::string_body> res{static_cast<http::status>(answer.status), req.version()};
    res.set(http::field::server, shared_->options.server_name);
    res.set(http::field::content_type, answer.content_type);
    for (const auto& [name, value] : answer.headers) res.insert(name, value);
    res.keep_alive(req.keep_alive());
    const size_t length = answer.body.size();
    if (req.method() != http::verb::head) res.body() = std::move(answer.body);
    res.content_length(length);
    Write(std::move(res));
  }

  void Write(http::response<http::string_body> res) {
    response_ = std::move(res);
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
    http::async_write(stream_, response_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->response_.keep_alive()) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream_).close();
  }

  std::shared_ptr<Shared> shared_;
  Stream stream_;
  bool tls_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

StatusOr<std::pair<std::string, uint16_t>> ParseListenAddress(const std::string& text,
                                                              const std::string& flag) {
  auto bad = [&] {
    return InvalidArgument(flag + " must be HOST:PORT (an IPv6 host in brackets), got '" + text + "'");
  };
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return bad();
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return bad();
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return bad();
  }
  const unsigned long value = std::strtoul(port.c_str(), nullptr, 10);
  if (value > 65535) return bad();
  return std::pair<std::string, uint16_t>(host, static_cast<uint16_t>(value));
}

struct WebServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::signal_set signals{io};
  std::unique_ptr<asio::ssl::context> tls;
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  uint16_t port = 0;
  int signal = 0;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (acceptor.is_open()) Accept();
        return;
      }
      if (shared->connections >= shared->options.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);  // too many at once: the client may try again
      } else if (tls) {
        std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
            shared, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls), true)
            ->Start();
      } else {
        std::make_shared<Connection<beast::tcp_stream>>(shared, beast::tcp_stream(std::move(socket)), false)
            ->Start();
      }
      Accept();
    });
  }
};

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WebServer::~WebServer() = default;

StatusOr<std::unique_ptr<WebServer>> WebServer::Listen(const WebServerOptions& options, WebHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->shared->options = options;
  impl->shared->handler = std::move(handler);
  if (options.tls) {
    REMEX_ASSIGN_OR_RETURN(impl->tls, rpc::detail::MakeServerContext(*options.tls));
  }
  const std::string where = options.host + ":" + std::to_string(options.port);
  beast::error_code ec;
  auto address = asio::ip::make_address(options.host == "localhost" ? "127.0.0.1" : options.host, ec);
  if (ec)
    return InvalidArgument("listen address " + where + ": the host is no IP address (" + ec.message() + ")");
  tcp::endpoint endpoint(address, options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("cannot listen on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint(ec).port();
  if (options.stop_on_signals) {
    // Registered now, so that a signal arriving before Run() waits for it, queued.
    impl->signals.add(SIGINT, ec);
    if (!ec) impl->signals.add(SIGTERM, ec);
    if (ec) return Internal("cannot handle SIGINT and SIGTERM: " + ec.message());
  }
  return std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
}

uint16_t WebServer::port() const { return impl_->port; }

int WebServer::Run() {
  Impl& impl = *impl_;
  if (impl.shared->options.stop_on_signals) {
    impl.signals.async_wait([&impl](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      impl.signal = signal;
      impl.io.stop();
    });
  }
  impl.Accept();
  impl.io.run();
  boost::system::error_code ignored;
  impl.acceptor.close(ignored);
  impl.signals.cancel(ignored);
  return impl.signal;
}

void WebServer::Stop() {
  asio::post(impl_->io, [impl = impl_.get()] { impl->io.stop(); });
}

}  // namespace remex::tooling
