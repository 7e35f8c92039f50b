// A real PostgreSQL server for tests and benchmarks of the results store: Debian's
// postgresql binaries (/usr/lib/postgresql/VERSION/bin: initdb, pg_ctl) run on a fresh
// cluster in a temporary folder, listening on a free TCP port of 127.0.0.1 only, trust
// authentication for the user "remex". When this process runs as root (initdb refuses
// root) the cluster is created and run as the unprivileged user "nobody" through
// runuser(1). The server is stopped (pg_ctl stop -m immediate) and its folder removed
// on destruction.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace remex::testing {

class TempPostgres {
 public:
  TempPostgres() = default;
  TempPostgres(const TempPostgres&) = delete;
  TempPostgres& operator=(const TempPostgres&) = delete;
  ~TempPostgres() { Stop(); }

  // The folder of the newest installed initdb and pg_ctl, or "" when PostgreSQL's server
  // binaries are not installed (Debian: postgresql).
  static std::string BinDir() {
    std::vector<std::string> dirs;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      if (std::filesystem::exists(e.path() / "bin/initdb") &&
          std::filesystem::exists(e.path() / "bin/pg_ctl")) {
        dirs.push_back((e.path() / "bin").string());
      }
    }
    if (dirs.empty()) return "";
    std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    return dirs.back();
  }

  // Creates and starts the cluster; false with `error()` saying why.
  bool Start() {
    bin_ = BinDir();
    if (bin_.empty())
      return Failed("PostgreSQL's server binaries (/usr/lib/postgresql/*/bin/initdb) are not installed");
    char tmpl[] = "/tmp/remex_pg_XXXXXX";
    if (!mkdtemp(tmpl)) return Failed("mkdtemp failed");
    dir_ = tmpl;
    port_ = FreePort();
    if (port_ == 0) return Failed("no free TCP port on 127.0.0.1");
    std::string as_user;
    if (geteuid() == 0) {
      // initdb refuses root: the cluster belongs to nobody, in a folder it owns.
      if (std::system(("chown nobody '" + dir_ + "'").c_str()) != 0) return Failed("chown nobody failed");
      as_user = "runuser -u nobody -- ";
    }
    const std::string data = dir_ + "/data", log = dir_ + "/log";
    std::string init = as_user + bin_ + "/initdb -D '" + data + "' -U remex -A trust -E UTF8 --no-sync > '" +
                       dir_ + "/initdb.out' 2>&1";
    if (std::system(init.c_str()) != 0) return Failed("initdb failed: " + Read(dir_ + "/initdb.out"));
    started_ = true;
    std::string start = as_user + bin_ + "/pg_ctl -D '" + data + "' -l '" + log +
                        "' -w -t 60 -o \"-h 127.0.0.1 -p " + std::to_string(port_) + " -k '" + dir_ +
                        "' -c fsync=on -c max_connections=100\" start > /dev/null 2>&1";
    if (std::system(start.c_str()) != 0) return Failed("pg_ctl start failed: " + Read(log));
    as_user_ = as_user;
    return true;
  }

  // Stops the server at once (as a crash would: open connections break) and starts it
  // again on the same port and data; false with `error()` saying why.
  bool Restart() {
    const std::string data = dir_ + "/data", log = dir_ + "/log";
    std::string restart = as_user_ + bin_ + "/pg_ctl -D '" + data + "' -l '" + log +
                          "' -m immediate -w -t 60 -o \"-h 127.0.0.1 -p " + std::to_string(port_) + " -k '" +
                          dir_ + "' -c fsync=on -c max_connections=100\" restart > /dev/null 2>&1";
    if (std::system(restart.c_str()) != 0) return Failed("pg_ctl restart failed: " + Read(log));
    return true;
  }

  void Stop() {
    if (started_) {
      std::system(
          (as_user_ + bin_ + "/pg_ctl -D '" + dir_ + "/data' -m immediate -w stop > /dev/null 2>&1").c_str());
      started_ = false;
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  // postgresql://remex@127.0.0.1:PORT/DB
  std::string Url(const std::string& db = "postgres") const {
    return "postgresql://remex@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }
  const std::string& error() const { return error_; }

 private:
  bool Failed(const std::string& why) {
    error_ = why;
    return false;
  }

  static std::string Read(const std::string& path) {
    std::string out;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buffer[4096];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
      std::fclose(f);
    }
    return out;
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
  }

  std::string bin_, dir_, as_user_, error_;
  int port_ = 0;
  bool started_ = false;
};

}  // namespace remex::testing
