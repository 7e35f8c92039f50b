// Fuzz target: a whole device server behind its socket: the transport's frame and
// attachment reading, the request handler and every request kind behind it
// (device_server/device_server.h), on the CPU device.
//
// One DeviceServer runs in the fuzzer's process on a loopback port for the whole run,
// with tight limits so that no request can hold it long (below). Each input is the byte
// stream one client sends on one connection (a recorded session is a seed): it is
// written, the write side shut, and every reply read until the server closes the
// connection. Findings besides crashes and sanitizer reports (each traps):
//  - the server does not close the connection within 20 s of the client's last byte;
//  - once the session is gone, device memory is still in use (a leak across sessions);
//  - the server no longer accepts a connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "device_server/device_server.h"

namespace {

using Clock = std::chrono::steady_clock;

remex::server::DeviceServer& Server() {
  static remex::server::DeviceServer* server = [] {
    spdlog::set_level(spdlog::level::warn);  // a log line per session would drown the fuzzer's output
    remex::server::ServerConfig config;
    config.port = 0;
    config.device = "cpu";
    config.module_cache_bytes = uint64_t{64} << 20;
    config.allocator_cache_bytes = uint64_t{16} << 20;
    config.session_memory_bytes = uint64_t{128} << 20;
    config.max_handles_per_session = 256;
    config.max_frame_bytes = uint64_t{32} << 20;
    config.benchmark_time_limit = std::chrono::milliseconds(500);
    config.max_invoke_time = std::chrono::milliseconds(200);
    config.read_timeout = std::chrono::seconds(2);
    config.idle_timeout = std::chrono::seconds(2);
    config.drain_timeout = std::chrono::milliseconds(100);
    auto started = remex::server::DeviceServer::Start(config);
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz_server: %s\n", started.status().ToString().c_str());
      __builtin_trap();
    }
    return started->release();
  }();
  return *server;
}

int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, 5000) != 1 || (p.revents & (POLLERR | POLLHUP))) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `data` and reads until the server closes; false if it has not closed 20 s
// after the last byte was sent.
bool Exchange(int fd, const uint8_t* data, size_t size) {
  size_t sent = 0;
  bool write_open = true;
  char sink[65536];
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (write_open && sent == size) {
      shutdown(fd, SHUT_WR);
      write_open = false;
      deadline = Clock::now() + std::chrono::seconds(20);
    }
    pollfd p{fd, static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 100) < 0 && errno != EINTR) return true;
    if (p.revents & POLLIN) {
      ssize_t n = recv(fd, sink, sizeof(sink), 0);
      if (n == 0) return true;  // the server closed
      if (n < 0 && errno != EAGAIN && errno != EINTR) return true;  // reset
    }
    if (write_open && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) write_open = false;  // the server closed first
    }
    if (p.revents & (POLLERR | POLLHUP)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  remex::server::DeviceServer& server = Server();
  int fd = Connect(server.port());
  if (fd < 0) {
    std::fprintf(stderr, "fuzz_server: the server accepts no connection\n");
    __builtin_trap();
  }
  bool closed = Exchange(fd, data, size);
  close(fd);
  if (!closed) {
    std::fprintf(stderr, "fuzz_server: the server kept the connection 20 s after the client's last byte\n");
    __builtin_trap();
  }
  // The session ends once the server has seen the connection close.
  auto deadline = Clock::now() + std::chrono::seconds(20);
  remex::server::ServerStats stats = server.stats();
  while (stats.active_sessions != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    stats = server.stats();
  }
  if (stats.active_sessions != 0) {
    std::fprintf(stderr, "fuzz_server: a session outlived its connection by 20 s\n");
    __builtin_trap();
  }
  if (stats.device_bytes_in_use != 0 || stats.live_buffers != 0) {
    std::fprintf(stderr, "fuzz_server: %llu device bytes in %llu buffers still in use with no session\n",
                 static_cast<unsigned long long>(stats.device_bytes_in_use),
                 static_cast<unsigned long long>(stats.live_buffers));
    __builtin_trap();
  }
  return 0;
}
