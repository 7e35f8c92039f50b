// Test helper: a real redis-server child process on a free loopback port (Debian's
// redis-server, or the binary REMEX_REDIS_SERVER names), with no persistence. Stopped
// with SIGTERM (and reaped) on destruction. Test-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rpc/farm.h"

namespace remex::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
inline uint16_t FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

// Whether `port` on 127.0.0.1 can be bound now.
inline bool LoopbackPortFree(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool free = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) close(fd);
  return free;
}

// A free port for a Redis Cluster node, whose cluster bus listens on the port + 10000:
// below 55536, and with that port free too (0 when none was found).
inline uint16_t FreeClusterPort() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint16_t port = FreeLoopbackPort();
    if (port != 0 && port < 55536 && LoopbackPortFree(static_cast<uint16_t>(port + 10000))) return port;
  }
  return 0;
}

class RedisProcess {
 public:
  // On a free port (another one when that port was taken meanwhile, up to 5 tries).
  RedisProcess() {
    for (int attempt = 0; attempt < 5 && !ready_; ++attempt) Launch(FreeLoopbackPort());
  }
  // On `port` (a Redis started again where one was), with `extra` arguments.
  explicit RedisProcess(uint16_t port, std::vector<std::string> extra = {}) : extra_(std::move(extra)) { Launch(port); }
  // On a free port, with `extra` arguments (e.g. {"--replicaof", "127.0.0.1", "6379"}); or,
  // with `sentinel_config` (a writable file, which Sentinel rewrites), a Sentinel.
  RedisProcess(std::vector<std::string> extra, std::string sentinel_config = "")
      : extra_(std::move(extra)), sentinel_config_(std::move(sentinel_config)) {
    for (int attempt = 0; attempt < 5 && !ready_; ++attempt) Launch(FreeLoopbackPort());
  }
  ~RedisProcess() { Stop(); }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Whether it answered within 10 s of starting.
  bool ready() const { return ready_; }
  farm::RedisUrl url() const {
    farm::RedisUrl u;
    u.host = "127.0.0.1";
    u.port = port_;
    return u;
  }
  std::string url_text() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  // SIGKILL: gone at once, as a crashed machine.
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

 private:
  void Launch(uint16_t port) {
    port_ = port;
    const char* env = std::getenv("REMEX_REDIS_SERVER");
    const std::string binary = env && *env ? env : "redis-server";
    std::vector<std::string> args = {binary, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--loglevel", "warning"};
    if (!sentinel_config_.empty()) {
      args = {binary, sentinel_config_, "--sentinel", "--port", std::to_string(port_), "--bind", "127.0.0.1",
              "--loglevel", "warning"};
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      execvp(binary.c_str(), argv.data());
      _exit(127);
    }
    // Ready once it answers; a redis-server that exits (missing, or its port taken) is
    // not.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      if (farm::RedisClient::Connect(url(), std::chrono::milliseconds(200)).ok()) {
        ready_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::vector<std::string> extra_;
  std::string sentinel_config_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace remex::testing
