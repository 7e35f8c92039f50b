// The environment fingerprint of a result (docs/cli.md, "Environment"): the server's
// (client::ServerEnvironment, from its hello), this client host's, and the compile
// options of the executable; and the warnings of what likely skewed the measurement,
// each with how to fix it. A warning never fails a command.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "host_client/client/client.h"
#include "host_client/compiler/options.h"

namespace remex::tooling {

// This client's host, read when a report is made.
struct HostEnvironment {
  std::string remex_version, remex_commit;  // of this client (base/version.h)
  std::string os;                           // uname: "Linux 6.1.0-18-amd64 x86_64"
  uint32_t logical_cpus = 0;                // online; 0 unknown
  double load_average_1m = -1;              // getloadavg(3); -1 unknown
};
HostEnvironment ReadHostEnvironment();

struct EnvironmentReport {
  client::ServerEnvironment server;  // the session's hello (known: false from older servers)
  HostEnvironment host;
  // bench: the server host's 1-minute load average right after the benchmark; -1
  // otherwise (run, check) or unknown.
  double server_load_after_benchmark_1m = -1;
  // The options an .onnx model was compiled with for this run; nullopt for an .rmx,
  // whose executable does not record them.
  std::optional<compiler::CompileOptions> compile_options;
};

// The report of `session`'s environment now: its server's, this host's, and
// `compile_options` when the model was compiled for this run.
EnvironmentReport DescribeEnvironment(const client::Session& session,
                                      std::optional<compiler::CompileOptions> compile_options);

// A measurement likely skewed, and what to do about it.
struct EnvironmentWarning {
  std::string code;     // "cpu_governor", "gpu_clocks_unlocked", "server_load", "client_load"
  std::string message;  // what is wrong and why it matters
  std::string fix;      // a command or step that removes it
};

// The rules: a CPU frequency governor that is known and not "performance"; a GPU whose
// clocks are known not to be locked; a 1-minute load average above 1 per logical CPU
// on the server (after the benchmark when known, else at hello) or on this host.
std::vector<EnvironmentWarning> EnvironmentWarnings(const EnvironmentReport& env);

}  // namespace remex::tooling
