// libremex_embedded.so: the device server behind the C interface of embedded_abi.h,
// for front ends that load it with dlopen (host_client/tooling/embedded_server.h). Only
// the remex_embedded_* functions are exported (device_server/CMakeLists.txt): the
// server's libraries inside it stay its own, apart from the copies the loading program
// may hold.
#include "device_server/embedded_abi.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "base/status.h"
#include "base/version.h"
#include "device_server/device_server.h"

struct remex_embedded_server {
  std::unique_ptr<remex::server::DeviceServer> server;
};

namespace {

int Fail(remex::StatusCode code, const std::string& message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return static_cast<int>(code);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int remex_embedded_abi_version(void) { return REMEX_EMBEDDED_ABI_VERSION; }

__attribute__((visibility("default"))) const char* remex_embedded_remex_version(void) { return remex::kRemexVersion; }

__attribute__((visibility("default"))) int remex_embedded_start(int compute_threads, int log_level,
                                                                remex_embedded_server** out, char* error,
                                                                size_t error_size) {
  if (out == nullptr) return Fail(remex::StatusCode::kInvalidArgument, "no place for the server", error, error_size);
  *out = nullptr;
  if (compute_threads < 0 || log_level < 0 || log_level > static_cast<int>(spdlog::level::off)) {
    return Fail(remex::StatusCode::kInvalidArgument,
                "compute_threads " + std::to_string(compute_threads) + " or log_level " + std::to_string(log_level) +
                    " out of range",
                error, error_size);
  }
  try {
    spdlog::set_level(static_cast<spdlog::level::level_enum>(log_level));
    remex::server::ServerConfig config;
    config.host = "127.0.0.1";
    config.port = 0;
    config.compute_threads = compute_threads;
    auto started = remex::server::DeviceServer::Start(config);
    if (!started.ok()) {
      return Fail(started.status().code(), started.status().message(), error, error_size);
    }
    *out = new remex_embedded_server{std::move(started).value()};
    return 0;
  } catch (const std::exception& e) {  // nothing may unwind through the C interface
    return Fail(remex::StatusCode::kInternal, e.what(), error, error_size);
  }
}

__attribute__((visibility("default"))) uint16_t remex_embedded_port(const remex_embedded_server* server) {
  return server == nullptr ? 0 : server->server->port();
}

__attribute__((visibility("default"))) void remex_embedded_stop(remex_embedded_server* server) { delete server; }

}  // extern "C"
