// Helpers of the bench/ programs: raw TCP sockets on loopback (the baseline the Remex
// transport is measured against), CPU pinning, timing.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace remex::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline Status Errno(const std::string& what) { return Unavailable(what + ": " + std::strerror(errno)); }

// A connected or listening POSIX socket, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~Socket() { Close(); }
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Writes all of `bytes`.
  Status SendAll(std::span<const std::byte> bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Errno("send");
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }
  // Fills all of `bytes`.
  Status RecvAll(std::span<std::byte> bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::recv(fd_, bytes.data() + done, bytes.size() - done, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return Unavailable("recv: peer closed");
      if (n < 0) return Errno("recv");
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }

 private:
  int fd_ = -1;
};

// TCP_NODELAY, as the Remex transport sets it.
inline void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Listens on 127.0.0.1:<ephemeral>; *port receives the port.
inline StatusOr<Socket> Listen(uint16_t* port) {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  if (s.fd() < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return Errno("bind");
  if (::listen(s.fd(), 4) != 0) return Errno("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return Errno("getsockname");
  *port = ntohs(addr.sin_port);
  return s;
}

inline StatusOr<Socket> Accept(const Socket& listener) {
  Socket s(::accept(listener.fd(), nullptr, nullptr));
  if (s.fd() < 0) return Errno("accept");
  SetNoDelay(s.fd());
  return s;
}

inline StatusOr<Socket> ConnectLoopback(uint16_t port) {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  if (s.fd() < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return Errno("connect");
  SetNoDelay(s.fd());
  return s;
}

// Pins the calling thread to `cpu`; threads it creates afterwards inherit the mask.
inline Status PinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) return Unavailable("pthread_setaffinity_np(" + std::to_string(cpu) + "): " + std::strerror(rc));
  return OkStatus();
}

// The calling thread's CPU mask, e.g. "0" or "0-1" style list "0,1".
inline std::string ThisThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return "?";
  std::string out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out += (out.empty() ? "" : ",") + std::to_string(i);
  }
  return out;
}

}  // namespace remex::bench
