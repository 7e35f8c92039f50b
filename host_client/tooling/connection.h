// A session with a device server for the front ends: a remote remex-server, or one
// embedded in this process on a loopback port (spoken to over the same protocol).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/tooling/embedded_server.h"
#include "rpc/farm_lease.h"
#include "rpc/tls.h"

namespace remex::tooling {

// A device to lease from a farm (docs/farm.md) instead of naming a server.
struct FarmLeaseOptions {
  std::string url;               // redis://HOST:PORT[/DB]
  std::string pool = "default";
  std::string selector;          // farm::ParseLabelSelector's grammar; "": any device
  std::chrono::milliseconds wait{0};  // how long to wait in the pool's queue
};

struct ServerOptions {
  // "HOST:PORT" of a remex-server; empty: start an embedded server (unless `farm`).
  std::string address;
  // Set: lease a device of the farm, held while the connection lives; its address and
  // lease token replace `address` and `token`.
  std::optional<FarmLeaseOptions> farm;
  // The server's token (rpc/auth.h); empty: none. TokenFromFileOrEnvironment finds it.
  std::string token;
  std::optional<rpc::TlsClientConfig> tls;  // remote servers only
  client::CompressionOptions compression;
  std::chrono::milliseconds connect_timeout{10000};   // TCP and TLS handshake
  // Per request (an upload, a run, a whole benchmark): a benchmark of a large model
  // or one on a busy machine takes minutes.
  std::chrono::milliseconds request_timeout{600000};
  // The embedded server's CPU compute threads (remex-server --threads); 0: its default.
  int embedded_threads = 0;
};

// The token for a server: the file's (rpc::ReadTokenFile) when `token_file` is set,
// else the REMEX_TOKEN environment variable's, else none. INVALID_ARGUMENT for a token
// too short; the file's errors.
StatusOr<std::string> TokenFromFileOrEnvironment(const std::string& token_file);

// The TLS settings of --tls-ca/--tls-cert/--tls-key/--tls-server-name; none without a
// CA. INVALID_ARGUMENT when they do not go together or name no remote server.
StatusOr<std::optional<rpc::TlsClientConfig>> TlsFromFlags(const std::string& address, const std::string& ca,
                                                          const std::string& cert, const std::string& key,
                                                          const std::string& server_name);

// A connected session. The embedded server (if any) and the lease (if any) outlive the
// session; the lease is released when the connection is destroyed.
struct Connection {
  std::unique_ptr<farm::LeaseHolder> lease;
  std::unique_ptr<EmbeddedServer> embedded;
  std::unique_ptr<client::Session> session;
  std::string server;  // "HOST:PORT" or "embedded 127.0.0.1:PORT"
  std::string device;  // "cpu (description)"
  ~Connection();
  Connection() = default;
  Connection(Connection&&) = default;
  Connection& operator=(Connection&&) = default;
};

// Connects (starting the embedded server first when options.address is empty, leasing
// a farm device first when options.farm is set). INVALID_ARGUMENT for a bad address,
// farm URL, pool or selector; the lease's errors (NOT_FOUND: no device matches;
// DEADLINE_EXCEEDED: none became free within the wait; UNAVAILABLE: Redis) with
// "leasing from ..."; the session's errors (UNAVAILABLE, DEADLINE_EXCEEDED,
// PERMISSION_DENIED, FAILED_PRECONDITION) with "connecting to ...".
StatusOr<Connection> Connect(const ServerOptions& options);

}  // namespace remex::tooling
