#include "host_client/tooling/environment.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "base/host.h"
#include "base/version.h"

namespace remex::tooling {

namespace {

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The load average per logical CPU above 1 (more runnable tasks than CPUs).
bool Overloaded(double load, uint32_t cpus) { return load >= 0 && cpus > 0 && load / cpus > 1.0; }

}  // namespace

HostEnvironment ReadHostEnvironment() {
  HostEnvironment h;
  h.remex_version = kRemexVersion;
  h.remex_commit = kRemexCommit;
  h.os = OsDescription();
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  h.logical_cpus = cpus > 0 ? static_cast<uint32_t>(cpus) : 0;
  h.load_average_1m = HostLoadAverage1m();
  return h;
}

EnvironmentReport DescribeEnvironment(const client::Session& session,
                                      std::optional<compiler::CompileOptions> compile_options) {
  EnvironmentReport e;
  e.server = session.server_info().environment;
  e.host = ReadHostEnvironment();
  e.compile_options = std::move(compile_options);
  return e;
}

std::vector<EnvironmentWarning> EnvironmentWarnings(const EnvironmentReport& env) {
  std::vector<EnvironmentWarning> warnings;
  const client::ServerEnvironment& s = env.server;
  if (s.known && !s.governor.empty() && s.governor != "performance") {
    warnings.push_back(
        {"cpu_governor",
         "the server's CPU frequency governor is '" + s.governor +
             "', not 'performance': the clock follows the load, so times vary from run to run",
         "on the server host: sudo cpupower frequency-set -g performance (or write 'performance' to "
         "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)"});
  }
  for (size_t i = 0; s.known && i < s.gpus.size(); ++i) {
    const client::GpuEnvironment& g = s.gpus[i];
    if (g.clocks_locked != client::FeatureState::kDisabled) continue;
    const std::string clocks = g.max_mem_clock_mhz && g.max_sm_clock_mhz
                                   ? std::to_string(g.max_mem_clock_mhz) + "," + std::to_string(g.max_sm_clock_mhz)
                                   : "MEM,SM (nvidia-smi -q -d SUPPORTED_CLOCKS lists them)";
    warnings.push_back({"gpu_clocks_unlocked",
                        "GPU " + std::to_string(i) + " (" + g.name +
                            ") runs with unlocked clocks: it boosts and throttles with temperature and power, so "
                            "times vary from run to run",
                        "on the server host: sudo nvidia-smi --persistence-mode=1 && sudo nvidia-smi "
                        "--applications-clocks=" + clocks});
  }
  const double server_load = env.server_load_after_benchmark_1m >= 0 ? env.server_load_after_benchmark_1m
                                                                      : (s.known ? s.load_average_1m : -1);
  if (s.known && Overloaded(server_load, s.logical_cpus)) {
    warnings.push_back({"server_load",
                        "the server host's load average was " + Format("%.2f", server_load) + " on " +
                            std::to_string(s.logical_cpus) +
                            " CPUs while measuring: other work competed with the model for the CPUs",
                        "stop other work on the server host, or measure on an idle one (the load average is over "
                        "the last minute: wait a minute after heavy work)"});
  }
  if (Overloaded(env.host.load_average_1m, env.host.logical_cpus)) {
    warnings.push_back({"client_load",
                        "this host's load average was " + Format("%.2f", env.host.load_average_1m) + " on " +
                            std::to_string(env.host.logical_cpus) +
                            " CPUs: the client's own times (upload, round trips) are skewed",
                        "stop other work on this host, or run the client on an idle one"});
  }
  return warnings;
}

}  // namespace remex::tooling
