// Test helpers that start real processes: a remex-server on an ephemeral loopback port
// and CLI commands whose output and exit status are captured.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace remex::testing {

// The path of a binary the tests start: the environment variable `name` when set (a
// bundle unpacked elsewhere, scripts/gpu-bundle), else where the build put it.
inline const char* TestBinary(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? v : built;
}

}  // namespace remex::testing

// remex-server and remex, as REMEX_SERVER_BIN / REMEX_CLI_BIN name them or as built.
#define REMEX_SERVER_BIN ::remex::testing::TestBinary("REMEX_SERVER_BIN", REMEX_SERVER_BIN_BUILT)
#define REMEX_CLI_BIN ::remex::testing::TestBinary("REMEX_CLI_BIN", REMEX_CLI_BIN_BUILT)

namespace remex::testing {

// A remex-server child process listening on 127.0.0.1:<ephemeral>. Stopped with
// SIGTERM (and reaped) on destruction.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& binary = REMEX_SERVER_BIN) : ServerProcess(std::vector<std::string>{}, binary) {}
  // With `extra_args` after the listen and quiet flags (e.g. {"--module-cache-bytes", "0"}).
  explicit ServerProcess(const std::vector<std::string>& extra_args, const std::string& binary = REMEX_SERVER_BIN) {
    std::vector<std::string> args = {binary, "--listen", "127.0.0.1:0", "--quiet"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    // First line: "remex-server listening on 127.0.0.1:PORT (device ...)".
    FILE* out = fdopen(fds[0], "r");
    char line[512] = {0};
    if (out && std::fgets(line, sizeof line, out)) {
      std::string s(line);
      auto colon = s.find("127.0.0.1:");
      if (colon != std::string::npos) port_ = static_cast<uint16_t>(std::atoi(s.c_str() + colon + 10));
    }
    stdout_ = out;
  }
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
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
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

inline std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace remex::testing
