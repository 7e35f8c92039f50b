// remex-server: the device server. Sessions (one per connection), a handle table per
// session, and the VM running executables on the server's device.
//
// Every request of a session is answered by a result or a structured error
// {code, message}; objects are named by server-issued 64-bit handles, unique across
// the server's sessions, so a handle of one session is NOT_FOUND in another. When a
// connection ends, however it ends, everything its session created is freed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace remex::rpc {
class Server;
}

namespace remex::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 9190;  // 0: an ephemeral port
  std::string device = "cpu";
  int threads = 4;       // I/O and request threads
};

struct ServerStats {
  uint64_t active_sessions = 0;
  uint64_t device_bytes_in_use = 0;
  uint64_t live_buffers = 0;
};

class DeviceServer {
 public:
  // Creates the device and starts listening. INVALID_ARGUMENT for an unknown device
  // name, UNAVAILABLE when the address cannot be bound.
  static StatusOr<std::unique_ptr<DeviceServer>> Start(const ServerConfig& config);
  ~DeviceServer();

  uint16_t port() const;
  std::string device_description() const;
  ServerStats stats() const;
  // Closes every session and stops serving. Idempotent.
  void Stop();

  // Registry, device and allocator, shared by the server's sessions (opaque).
  struct State;

 private:
  DeviceServer() = default;
  std::shared_ptr<State> state_;
  std::unique_ptr<rpc::Server> server_;
};

}  // namespace remex::server
