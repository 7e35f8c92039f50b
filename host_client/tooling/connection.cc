#include "host_client/tooling/connection.h"

#include <cstdlib>

#include "host_client/tooling/specs.h"
#include "rpc/auth.h"

namespace remex::tooling {

Connection::~Connection() {
  session.reset();  // before the server it talks to
  embedded.reset();
}

StatusOr<std::string> TokenFromFileOrEnvironment(const std::string& token_file) {
  if (!token_file.empty()) return rpc::ReadTokenFile(token_file);
  const char* env = std::getenv("REMEX_TOKEN");
  if (env == nullptr || *env == '\0') return std::string();
  std::string token(env);
  if (token.size() < rpc::kMinTokenBytes) {
    return InvalidArgument("REMEX_TOKEN has " + std::to_string(token.size()) + " bytes; tokens have at least " +
                           std::to_string(rpc::kMinTokenBytes));
  }
  return token;
}

StatusOr<std::optional<rpc::TlsClientConfig>> TlsFromFlags(const std::string& address, const std::string& ca,
                                                          const std::string& cert, const std::string& key,
                                                          const std::string& server_name) {
  if (ca.empty()) {
    if (!cert.empty() || !key.empty() || !server_name.empty()) {
      return InvalidArgument("--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA of the server's certificate)");
    }
    return std::optional<rpc::TlsClientConfig>();
  }
  if (address.empty()) return InvalidArgument("--tls-ca needs --server (the embedded server speaks plaintext)");
  if (cert.empty() != key.empty()) return InvalidArgument("--tls-cert and --tls-key go together");
  return std::optional<rpc::TlsClientConfig>(rpc::TlsClientConfig{ca, cert, key, server_name});
}

StatusOr<Connection> Connect(const ServerOptions& given) {
  Connection c;
  ServerOptions options = given;
  if (options.farm) {
    if (!options.address.empty()) return InvalidArgument("--server and --farm: name a server or lease one, not both");
    REMEX_ASSIGN_OR_RETURN(farm::RedisUrl url, farm::ParseRedisUrl(options.farm->url));
    farm::LeaseRequest request;
    request.pool = options.farm->pool;
    request.selector = options.farm->selector;
    request.wait = options.farm->wait;
    auto lease = farm::LeaseHolder::Acquire(url, request, options.connect_timeout);
    if (!lease.ok()) return lease.status().WithContext("leasing from " + url.ToString());
    c.lease = std::move(lease).value();
    options.address = c.lease->lease().device_id;
    options.token = c.lease->lease().token;
  }
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (options.address.empty()) {
    auto started = EmbeddedServer::Start(options.embedded_threads);
    if (!started.ok()) return started.status().WithContext("starting the embedded server");
    c.embedded = std::move(started).value();
    port = c.embedded->port();
    c.server = "embedded " + host + ":" + std::to_string(port);
  } else {
    REMEX_ASSIGN_OR_RETURN(auto address, ParseServerAddress(options.address));
    std::tie(host, port) = address;
    c.server = options.address;
    if (c.lease) c.server += " (leased from pool " + c.lease->lease().pool + ")";
  }
  client::ConnectOptions connect;
  connect.compression = options.compression;
  connect.connect_timeout = options.connect_timeout;
  connect.timeout = options.request_timeout;
  if (!c.embedded) {  // the embedded server needs neither
    connect.token = options.token;
    connect.tls = options.tls;
  }
  auto session = client::Session::Connect(host, port, connect);
  if (!session.ok()) return session.status().WithContext("connecting to " + host + ":" + std::to_string(port));
  c.session = std::move(session).value();
  const auto& info = c.session->server_info();
  c.device = info.devices.empty() ? "?" : info.devices[0].name + " (" + info.devices[0].description + ")";
  return c;
}

}  // namespace remex::tooling
