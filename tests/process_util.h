// Test helpers that start real processes: a remex-server on an ephemeral loopback port
// and CLI commands whose output and exit status are captured.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <fcntl.h>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/built_path.h"

namespace remex::testing {

// The path of a binary the tests start: the environment variable `name` when set (a
// bundle unpacked elsewhere, scripts/gpu-bundle), else where the build put it.
inline std::string TestBinary(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : BuiltPath(built);
}

}  // namespace remex::testing

// remex-server and remex, as REMEX_SERVER_BIN / REMEX_CLI_BIN name them or as built, and
// the source tree (std::string each).
#define REMEX_SERVER_BIN ::remex::testing::TestBinary("REMEX_SERVER_BIN", REMEX_SERVER_BIN_BUILT)
#define REMEX_CLI_BIN ::remex::testing::TestBinary("REMEX_CLI_BIN", REMEX_CLI_BIN_BUILT)
#define REMEX_SOURCE_DIR ::remex::testing::BuiltPath(REMEX_SOURCE_DIR_BUILT)

namespace remex::testing {

// Resident set of process `pid` in bytes (VmRSS), 0 when unreadable.
inline uint64_t ResidentBytes(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtoull(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return kib << 10;
}

// A remex-server child process listening on 127.0.0.1:<ephemeral>. Stopped with
// SIGTERM (and reaped) on destruction.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& binary = REMEX_SERVER_BIN) : ServerProcess(std::vector<std::string>{}, binary) {}
  // With `extra_args` after the listen and quiet flags (e.g. {"--module-cache-bytes", "0"}).
  explicit ServerProcess(const std::vector<std::string>& extra_args, const std::string& binary = REMEX_SERVER_BIN)
      : ServerProcess(extra_args, binary, "") {}
  // A server that logs at info level (no --quiet) to `log_path` (its stderr, appended).
  static std::unique_ptr<ServerProcess> Logging(const std::string& log_path,
                                                const std::vector<std::string>& extra_args = {}) {
    return std::unique_ptr<ServerProcess>(new ServerProcess(extra_args, REMEX_SERVER_BIN, log_path));
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

 private:
  ServerProcess(const std::vector<std::string>& extra_args, const std::string& binary, const std::string& log_path) {
    std::vector<std::string> args = {binary, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"};
    if (log_path.empty()) args.push_back("--quiet");
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      // A test names its results store (--results), never the user's.
      unsetenv("REMEX_RESULTS");
      if (!log_path.empty()) {
        int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (log >= 0) dup2(log, STDERR_FILENO);
      }
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    // First line: "remex-server listening on 127.0.0.1:PORT (device ...), metrics on 127.0.0.1:PORT".
    FILE* out = fdopen(fds[0], "r");
    char line[512] = {0};
    if (out && std::fgets(line, sizeof line, out)) {
      std::string s(line);
      banner_ = s;
      auto colon = s.find("127.0.0.1:");
      if (colon != std::string::npos) port_ = static_cast<uint16_t>(std::atoi(s.c_str() + colon + 10));
      auto metrics = s.find("metrics on 127.0.0.1:");
      if (metrics != std::string::npos) metrics_port_ = static_cast<uint16_t>(std::atoi(s.c_str() + metrics + 21));
    }
    stdout_ = out;
  }

 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (stdout_) std::fclose(stdout_);
  }
  // True while the process has not exited.
  bool alive() const {
    if (pid_ <= 0) return false;
    int status = 0;
    return waitpid(pid_, &status, WNOHANG) == 0;
  }
  uint16_t port() const { return port_; }
  // The first line the server printed ("remex-server listening on ...").
  const std::string& banner() const { return banner_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  uint16_t metrics_port() const { return metrics_port_; }

  // GET `path` from the server's metrics endpoint: the HTTP status and the body
  // ({0, ""} when it cannot be reached). Plain POSIX sockets, HTTP/1.0. `headers`:
  // more header lines, each ending in "\r\n" (e.g. "Authorization: Bearer T\r\n").
  std::pair<int, std::string> HttpGet(const std::string& path, const std::string& headers = "") const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return {0, ""};
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(metrics_port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n";
      if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
        char buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0) response.append(buf, static_cast<size_t>(n));
      }
    }
    close(fd);
    auto space = response.find(' ');
    auto body = response.find("\r\n\r\n");
    if (space == std::string::npos || body == std::string::npos) return {0, ""};
    return {std::atoi(response.c_str() + space + 1), response.substr(body + 4)};
  }

  // The value of the sample `name` (with its labels, e.g. `remex_sessions` or
  // `remex_device_memory_bytes{device="cpu"}`) on /metrics; -1 when absent.
  double Metric(const std::string& name) const {
    auto [status, body] = HttpGet("/metrics");
    if (status != 200) return -1;
    size_t at = 0;
    while ((at = body.find(name + " ", at)) != std::string::npos) {
      if (at == 0 || body[at - 1] == '\n') return std::atof(body.c_str() + at + name.size() + 1);
      at += name.size();
    }
    return -1;
  }
  // Sends `sig` and waits up to `timeout` for the process to exit: true when it did
  // (it is then reaped), false when it is still running.
  bool SignalAndWait(int sig, std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return false;
    kill(pid_, sig);
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
  std::string banner_;
  FILE* stdout_ = nullptr;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
};

// Runs `command` through the shell, capturing stdout (stderr passes through).
inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The whole of the file at `path` ("" when it cannot be read): a server's log, a CLI's
// captured output.
inline std::string ReadText(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

inline std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace remex::testing
