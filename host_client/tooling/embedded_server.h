// The embedded server: a device server on the CPU, in this process, on a loopback port,
// for commands run without --server or --farm (connection.h). It lives in
// libremex_embedded.so (device_server/embedded_abi.h), loaded with dlopen on first use,
// so that the CLI, the shell and the Python module link neither the server nor CUDA.
//
// Where the library is looked for, first found wins:
//   1. $REMEX_EMBEDDED_LIBRARY, a path (set: only there);
//   2. libremex_embedded.so beside the program or shared object holding this code (the
//      remex executable; the Python module remex/_native*.so), then in ../lib from it
//      (an installed bin/ and lib/ layout, the GPU bundle);
//   3. the build tree it was built in (REMEX_EMBEDDED_BUILD_PATH, which
//      embedded_build_path.cc holds), while it exists.
// The library stays loaded until the process ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

struct remex_embedded_server;

namespace remex::tooling {

class EmbeddedServer {
 public:
  // Loads the library (once per process) and starts a server with `compute_threads`
  // CPU compute threads (0: the device's default; negative: INVALID_ARGUMENT), logging
  // at the process's spdlog level. UNAVAILABLE (the installation is broken: the CLI
  // exits 3) when the library is not found, cannot be loaded (a library it needs is
  // missing: named in the message), is not Remex's or was built from another Remex
  // version or interface; the server's own errors otherwise. A failure to load is kept:
  // every later call returns it.
  static StatusOr<std::unique_ptr<EmbeddedServer>> Start(int compute_threads);
  // Stops the server: its sessions are closed and everything they held is freed.
  ~EmbeddedServer();
  EmbeddedServer(const EmbeddedServer&) = delete;
  EmbeddedServer& operator=(const EmbeddedServer&) = delete;

  uint16_t port() const { return port_; }
  // The path of the library the server came from.
  const std::string& library() const { return library_; }

 private:
  EmbeddedServer() = default;
  remex_embedded_server* server_ = nullptr;
  void (*stop_)(remex_embedded_server*) = nullptr;
  uint16_t port_ = 0;
  std::string library_;
};

}  // namespace remex::tooling
