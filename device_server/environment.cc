#include "device_server/environment.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "base/version.h"
#include "kernels/kernels.h"
#include "vm/device/cuda_device.h"

namespace remex::server {

namespace fs = std::filesystem;

namespace {

// The first line of a file, without surrounding white space; "" when unreadable.
std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const auto begin = line.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return line.substr(begin, line.find_last_not_of(" \t\r") + 1 - begin);
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") + 1 - begin);
}

// The logical CPUs listed under sys/devices/system/cpu: cpu0, cpu1, ... in order.
std::vector<fs::path> CpuDirs(const fs::path& cpu_root) {
  std::vector<std::pair<int, fs::path>> cpus;
  std::error_code ec;
  for (fs::directory_iterator it(cpu_root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0) continue;
    if (!std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    cpus.emplace_back(std::atoi(name.c_str() + 3), it->path());
  }
  std::sort(cpus.begin(), cpus.end());
  std::vector<fs::path> dirs;
  for (auto& c : cpus) dirs.push_back(std::move(c.second));
  return dirs;
}

}  // namespace

CpuFacts ReadCpuFacts(const std::string& root) {
  CpuFacts f;
  const fs::path base(root);
  {
    std::ifstream cpuinfo(base / "proc/cpuinfo");
    std::string line, physical_id;
    std::set<std::pair<std::string, std::string>> cores;
    std::string fallback_model;  // "Hardware" or "Model" lines (some ARM kernels)
    while (std::getline(cpuinfo, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = Trim(line.substr(0, colon));
      const std::string value = Trim(line.substr(colon + 1));
      if (key == "processor") {
        ++f.logical_cpus;
        physical_id.clear();
      } else if (key == "model name" && f.model.empty()) {
        f.model = value;
      } else if ((key == "Hardware" || key == "Model") && fallback_model.empty()) {
        fallback_model = value;
      } else if (key == "physical id") {
        physical_id = value;
      } else if (key == "core id") {
        cores.emplace(physical_id, value);
      }
    }
    if (f.model.empty()) f.model = fallback_model;
    f.physical_cores = static_cast<uint32_t>(cores.size());
  }
  const fs::path cpu_root = base / "sys/devices/system/cpu";
  const std::string smt = ReadLine(cpu_root / "smt/active");
  if (smt == "1") f.smt = FeatureState::kEnabled;
  if (smt == "0") f.smt = FeatureState::kDisabled;
  std::vector<std::string> governors;
  uint64_t max_khz = 0;
  for (const fs::path& cpu : CpuDirs(cpu_root)) {
    const std::string governor = ReadLine(cpu / "cpufreq/scaling_governor");
    if (!governor.empty() && std::find(governors.begin(), governors.end(), governor) == governors.end()) {
      governors.push_back(governor);
    }
    const std::string khz = ReadLine(cpu / "cpufreq/cpuinfo_max_freq");
    if (!khz.empty()) max_khz = std::max<uint64_t>(max_khz, std::strtoull(khz.c_str(), nullptr, 10));
  }
  for (const std::string& g : governors) f.governor += (f.governor.empty() ? "" : ",") + g;
  f.max_mhz = static_cast<uint32_t>(std::min<uint64_t>(max_khz / 1000, UINT32_MAX));
  {
    std::ifstream meminfo(base / "proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
      if (line.rfind("MemTotal:", 0) != 0) continue;
      std::istringstream fields(line.substr(9));
      uint64_t kib = 0;
      std::string unit;
      if (fields >> kib >> unit && unit == "kB") f.memory_bytes = kib * 1024;
      break;
    }
  }
  return f;
}

double ReadLoadAverage1m(const std::string& root) {
  std::ifstream in(fs::path(root) / "proc/loadavg");
  double load = -1;
  if (!(in >> load) || load < 0) return -1;
  return load;
}

// ---- NVML ---------------------------------------------------------------------------
//
// The few NVML entry points used, declared here from NVML's documented C API (nvml.h)
// so that no NVML header is needed to build: return codes are int (NVML_SUCCESS = 0),
// enums int, a device an opaque pointer.

namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;   // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;  // NVML_CLOCK_MEM
constexpr int kNvmlFeatureEnabled = 1;
// nvmlClocksEventReasonApplicationsClocksSetting (formerly ...ThrottleReason...).
constexpr unsigned long long kNvmlReasonApplicationsClocks = 0x2ULL;

FeatureState State(int nvml_enable_state) {
  return nvml_enable_state == kNvmlFeatureEnabled ? FeatureState::kEnabled : FeatureState::kDisabled;
}

}  // namespace

struct Nvml::Functions {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*applications_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*default_applications_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*persistence_mode)(NvmlDevice, int*) = nullptr;
  int (*ecc_mode)(NvmlDevice, int*, int*) = nullptr;
  int (*clock_reasons)(NvmlDevice, unsigned long long*) = nullptr;
};

StatusOr<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Unavailable("NVML (" + library + ") is not available: " + (why ? why : "dlopen failed"));
  }
  std::unique_ptr<Nvml> nvml(new Nvml());
  nvml->library_ = handle;
  nvml->fn_ = std::make_unique<Functions>();
  Functions& fn = *nvml->fn_;
  bool missing = false;
  std::string missing_name;
  auto bind = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
    if (!slot && !missing) {
      missing = true;
      missing_name = name;
    }
  };
  bind(fn.init, "nvmlInit_v2");
  bind(fn.shutdown, "nvmlShutdown");
  bind(fn.error_string, "nvmlErrorString");
  bind(fn.driver_version, "nvmlSystemGetDriverVersion");
  bind(fn.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  bind(fn.clock, "nvmlDeviceGetClockInfo");
  bind(fn.max_clock, "nvmlDeviceGetMaxClockInfo");
  bind(fn.applications_clock, "nvmlDeviceGetApplicationsClock");
  bind(fn.default_applications_clock, "nvmlDeviceGetDefaultApplicationsClock");
  bind(fn.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  bind(fn.persistence_mode, "nvmlDeviceGetPersistenceMode");
  bind(fn.ecc_mode, "nvmlDeviceGetEccMode");
  // Renamed in newer drivers; the old name stays as an alias.
  fn.clock_reasons = reinterpret_cast<decltype(fn.clock_reasons)>(dlsym(handle, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (!fn.clock_reasons) bind(fn.clock_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (missing) {
    nvml->fn_.reset();  // no shutdown: never initialized
    return Unavailable("NVML (" + library + ") lacks " + missing_name + ": the NVIDIA driver is too old");
  }
  if (const int rc = fn.init(); rc != kNvmlSuccess) {
    const std::string why = fn.error_string(rc);
    nvml->fn_.reset();
    return Unavailable("NVML (" + library + ") did not initialize: " + why);
  }
  return nvml;
}

Nvml::~Nvml() {
  if (fn_) fn_->shutdown();
  if (library_) dlclose(library_);
}

StatusOr<NvmlGpuFacts> Nvml::Query(const std::string& pci_bus_id) {
  std::lock_guard<std::mutex> lock(mu_);
  const Functions& fn = *fn_;
  NvmlDevice device = nullptr;
  if (const int rc = fn.by_pci_bus_id(pci_bus_id.c_str(), &device); rc != kNvmlSuccess) {
    return NotFound("NVML knows no GPU at PCI bus id " + pci_bus_id + ": " + fn.error_string(rc));
  }
  NvmlGpuFacts f;
  char version[96] = {};
  if (fn.driver_version(version, sizeof(version)) == kNvmlSuccess) f.driver_version = version;
  unsigned value = 0;
  if (fn.clock(device, kNvmlClockSm, &value) == kNvmlSuccess) f.sm_clock_mhz = value;
  if (fn.clock(device, kNvmlClockMem, &value) == kNvmlSuccess) f.mem_clock_mhz = value;
  if (fn.max_clock(device, kNvmlClockSm, &value) == kNvmlSuccess) f.max_sm_clock_mhz = value;
  if (fn.max_clock(device, kNvmlClockMem, &value) == kNvmlSuccess) f.max_mem_clock_mhz = value;
  if (fn.power_limit(device, &value) == kNvmlSuccess) f.power_limit_w = value / 1000.0;  // milliwatts
  int state = 0, pending = 0;
  if (fn.persistence_mode(device, &state) == kNvmlSuccess) f.persistence_mode = State(state);
  if (fn.ecc_mode(device, &state, &pending) == kNvmlSuccess) f.ecc_mode = State(state);
  unsigned app_sm = 0, default_sm = 0, app_mem = 0, default_mem = 0;
  const bool app_known = fn.applications_clock(device, kNvmlClockSm, &app_sm) == kNvmlSuccess &&
                         fn.default_applications_clock(device, kNvmlClockSm, &default_sm) == kNvmlSuccess &&
                         fn.applications_clock(device, kNvmlClockMem, &app_mem) == kNvmlSuccess &&
                         fn.default_applications_clock(device, kNvmlClockMem, &default_mem) == kNvmlSuccess;
  if (app_known) f.applications_sm_clock_mhz = app_sm;
  unsigned long long reasons = 0;
  const bool reasons_known = fn.clock_reasons(device, &reasons) == kNvmlSuccess;
  if ((app_known && (app_sm != default_sm || app_mem != default_mem)) ||
      (reasons_known && (reasons & kNvmlReasonApplicationsClocks) != 0)) {
    f.clocks_locked = FeatureState::kEnabled;
  } else if (app_known || reasons_known) {
    f.clocks_locked = FeatureState::kDisabled;
  }
  return f;
}

// ---- The fingerprint ----------------------------------------------------------------

namespace {

wire::FeatureState ToWire(FeatureState s) {
  switch (s) {
    case FeatureState::kEnabled: return wire::FeatureState::ENABLED;
    case FeatureState::kDisabled: return wire::FeatureState::DISABLED;
    case FeatureState::kUnknown: break;
  }
  return wire::FeatureState::UNKNOWN;
}

}  // namespace

void FillEnvironment(const ServerConfig& config, const vm::Device& device, Nvml* nvml,
                     wire::Environment::Builder out, const std::string& root) {
  out.setRemexVersion(kRemexVersion);
  out.setRemexCommit(kRemexCommit);
  auto args = out.initServerArgs(static_cast<unsigned>(config.server_args.size()));
  for (size_t i = 0; i < config.server_args.size(); ++i) args.set(static_cast<unsigned>(i), config.server_args[i]);
  out.setOs(OsDescription());
  const CpuFacts cpu = ReadCpuFacts(root);
  out.setCpuModel(cpu.model);
  out.setLogicalCpus(cpu.logical_cpus);
  out.setPhysicalCores(cpu.physical_cores);
  out.setSmt(ToWire(cpu.smt));
  out.setGovernor(cpu.governor);
  out.setCpuMaxMhz(cpu.max_mhz);
  out.setMemoryBytes(cpu.memory_bytes);
  out.setLoadAverage1m(root == "/" ? HostLoadAverage1m() : ReadLoadAverage1m(root));
  // The team its kernels run on host threads with (the CPU device's compute threads;
  // none on a GPU, which leaves the field 0).
  const int compute_threads = device.capabilities().compute_threads;
  if (compute_threads > 0) out.setComputeThreads(static_cast<uint32_t>(compute_threads));
  const auto cuda = vm::CudaDeviceFactsOf(device);
  if (!cuda) {
    out.initGpus(0);
    return;
  }
  auto gpu = out.initGpus(1)[0];
  gpu.setName(cuda->name);
  gpu.setComputeCapability(cuda->compute_capability);
  gpu.setCudaRuntimeVersion(cuda->runtime_version);
  if (!nvml) return;
  auto facts = nvml->Query(cuda->pci_bus_id);
  if (!facts.ok()) return;
  gpu.setDriverVersion(facts->driver_version);
  gpu.setSmClockMhz(facts->sm_clock_mhz);
  gpu.setMemClockMhz(facts->mem_clock_mhz);
  gpu.setMaxSmClockMhz(facts->max_sm_clock_mhz);
  gpu.setMaxMemClockMhz(facts->max_mem_clock_mhz);
  gpu.setPowerLimitW(facts->power_limit_w);
  gpu.setPersistenceMode(ToWire(facts->persistence_mode));
  gpu.setEccMode(ToWire(facts->ecc_mode));
  gpu.setClocksLocked(ToWire(facts->clocks_locked));
  gpu.setApplicationsSmClockMhz(facts->applications_sm_clock_mhz);
}

}  // namespace remex::server
