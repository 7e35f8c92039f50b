// A small HTTP/1.1 server (Boost.Beast over Boost.Asio, TLS through Asio's OpenSSL) for
// `remex dashboard` (dashboard.h): one thread runs one io_context; requests are parsed
// with bounded headers and bodies, answered one at a time by a handler, and connections
// kept alive between requests until they idle past a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "rpc/tls.h"

namespace remex::tooling {

// One request. Every field is the client's bytes: untrusted.
struct WebRequest {
  std::string method;         // "GET", "HEAD", "POST", ...
  std::string target;         // the request target: path and query, e.g. "/compare?a=1&b=2"
  std::string authorization;  // the Authorization header, "" when absent
  std::string cookie;         // the Cookie header, "" when absent
  std::string content_type;   // the Content-Type header, "" when absent
  std::string body;           // at most WebServerOptions::max_body_bytes
  bool tls = false;           // it came over TLS
};

struct WebResponse {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  // More headers (name, value), e.g. Set-Cookie, Location, Content-Security-Policy.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Answers one request; called on the server's thread, one request at a time. An
// exception it throws becomes a 500 response naming it.
using WebHandler = std::function<WebResponse(const WebRequest&)>;

struct WebServerOptions {
  std::string host = "127.0.0.1";           // an IP address, or "localhost"
  uint16_t port = 8080;                     // 0: any free port (WebServer::port() tells which)
  std::optional<rpc::TlsServerConfig> tls;  // set: HTTPS only
  size_t max_connections = 64;              // connections open at once; more are closed at once
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024;   // a larger body gets 413
  int idle_timeout_s = 30;            // a connection idle (or a request unfinished) this long is closed
  bool stop_on_signals = true;        // Run() returns on SIGINT or SIGTERM
  std::string server_name = "remex";  // the Server header
};

class WebServer {
 public:
  // Binds the address and listens; serving starts with Run(). INVALID_ARGUMENT for a
  // host that is no IP address or an unusable TLS file (naming it), UNAVAILABLE when the
  // address cannot be bound (its system message).
  static StatusOr<std::unique_ptr<WebServer>> Listen(const WebServerOptions& options, WebHandler handler);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  // The bound port.
  uint16_t port() const;
  // Serves on the calling thread until Stop(), or SIGINT/SIGTERM with stop_on_signals;
  // returns the signal's number, or 0 after Stop(). Connections open then are closed.
  int Run();
  // Makes Run() return; thread-safe.
  void Stop();

 private:
  struct Impl;
  explicit WebServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether `host` is a loopback address: "localhost", 127.0.0.0/8 or ::1.
bool IsLoopbackHost(const std::string& host);

// Splits "HOST:PORT" ("[V6]:PORT" for an IPv6 address). INVALID_ARGUMENT naming `flag`
// for another form or a port outside [0, 65535].
StatusOr<std::pair<std::string, uint16_t>> ParseListenAddress(const std::string& text,
                                                              const std::string& flag);

}  // namespace remex::tooling
