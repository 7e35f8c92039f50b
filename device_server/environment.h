// The environment fingerprint of a server (wire::Environment, sent in an authenticated
// session's hello): Remex's version and commit, the server's command line, the host's
// CPU, memory and load, and the served GPU's clocks, power limit and modes. Every figure
// a benchmark reports is only comparable with another taken in the same environment;
// clients put this next to their results and warn of what skews them (docs/cli.md,
// "Environment").
//
// Where each fact comes from:
//   - CPU: /proc/cpuinfo (model, logical CPUs, (package, core) pairs), /proc/meminfo,
//     /sys/devices/system/cpu (smt/active, cpuN/cpufreq/scaling_governor and
//     cpuinfo_max_freq), uname. The readers take the root of the tree, so that tests feed
//     them fixture files.
//   - GPU: the CUDA device (vm::CudaDeviceFactsOf) and NVML, the driver's management
//     library, loaded at run time with dlopen (libnvidia-ml.so.1): never a link
//     dependency, and a host without it reports those facts unknown.
// Nothing here fails: what cannot be read is reported unknown (empty text, 0, -1 for a
// load average, FeatureState::kUnknown).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/host.h"
#include "base/status.h"
#include "device_server/device_server.h"
#include "rpc/remex.capnp.h"
#include "vm/device/device.h"

namespace remex::server {

namespace wire = rpc::wire;

// Whether a feature is on; kUnknown where it could not be read (wire::FeatureState).
enum class FeatureState { kUnknown, kDisabled, kEnabled };

// The host's CPU and memory.
struct CpuFacts {
  std::string model;            // "model name" of /proc/cpuinfo; "" unknown
  uint32_t logical_cpus = 0;    // "processor" entries of /proc/cpuinfo (online CPUs)
  uint32_t physical_cores = 0;  // distinct ("physical id", "core id") pairs; 0 unknown
  FeatureState smt = FeatureState::kUnknown;  // /sys/devices/system/cpu/smt/active
  // The scaling governor of the CPUs ("performance"); distinct ones joined by ','
  // in CPU order ("powersave,performance"); "" without cpufreq (common in VMs).
  std::string governor;
  uint32_t max_mhz = 0;       // highest cpuinfo_max_freq of the CPUs, in MHz; 0 unknown
  uint64_t memory_bytes = 0;  // MemTotal of /proc/meminfo; 0 unknown
};

// Reads the CPU facts from `root`/proc and `root`/sys ("/" for this host).
CpuFacts ReadCpuFacts(const std::string& root);
// The 1-minute load average in `root`/proc/loadavg; -1 when unreadable.
double ReadLoadAverage1m(const std::string& root);
// This host's load average and uname: HostLoadAverage1m, OsDescription (base/host.h).

// What NVML tells of one GPU. Numbers are 0 and states kUnknown where the query failed
// (NVML_ERROR_NOT_SUPPORTED on some GPUs, or no permission).
struct NvmlGpuFacts {
  std::string driver_version;  // "550.54.15"
  uint32_t sm_clock_mhz = 0, mem_clock_mhz = 0;
  uint32_t max_sm_clock_mhz = 0, max_mem_clock_mhz = 0;
  uint32_t applications_sm_clock_mhz = 0;
  double power_limit_w = 0;  // enforced power limit
  FeatureState persistence_mode = FeatureState::kUnknown;
  FeatureState ecc_mode = FeatureState::kUnknown;
  // Applications clocks set away from their defaults, or the clock event reason
  // "applications clocks setting" active.
  FeatureState clocks_locked = FeatureState::kUnknown;
};

// NVML, loaded at run time. Thread-safe (one call at a time).
class Nvml {
 public:
  // Loads `library` and initializes NVML. UNAVAILABLE (with dlerror's or NVML's reason)
  // when the library is absent (no NVIDIA driver), lacks a function used here, or NVML
  // cannot initialize.
  static StatusOr<std::unique_ptr<Nvml>> Load(const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // The facts of the GPU at `pci_bus_id` ("0000:41:00.0"). NOT_FOUND when NVML knows no
  // such GPU.
  StatusOr<NvmlGpuFacts> Query(const std::string& pci_bus_id);

  struct Functions;  // the NVML entry points (environment.cc)

 private:
  Nvml() = default;
  std::mutex mu_;
  void* library_ = nullptr;  // dlopen's handle
  std::unique_ptr<Functions> fn_;
};

// Fills `out` with the environment of a server started with `config` serving `device`.
// `nvml`: NVML for a GPU device's clocks and modes; nullptr reports them unknown.
// The CPU facts are read from `root` ("/"; tests pass a fixture tree).
void FillEnvironment(const ServerConfig& config, const vm::Device& device, Nvml* nvml,
                     wire::Environment::Builder out, const std::string& root = "/");

}  // namespace remex::server
