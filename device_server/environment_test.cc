#include "device_server/environment.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/version.h"
#include "vm/device/cpu_device.h"

namespace remex::server {
namespace environment_test {

namespace fs = std::filesystem;

// A fixture root with /proc and /sys files, removed at the end.
class FixtureRoot {
 public:
  FixtureRoot() {
    root_ = fs::temp_directory_path() / ("remex-env-test-" + std::to_string(getpid()) + "-" +
                                         std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(root_);
  }
  ~FixtureRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& path, const std::string& text) {
    const fs::path p = root_ / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
};

// Two packages of two cores with two threads each (8 logical CPUs, 4 cores), the
// shape /proc/cpuinfo has on x86.
std::string CpuInfo() {
  std::string text;
  for (int cpu = 0; cpu < 8; ++cpu) {
    text += "processor\t: " + std::to_string(cpu) + "\n";
    text += "vendor_id\t: GenuineIntel\n";
    text += "model name\t: Intel(R) Xeon(R) Test CPU @ 2.10GHz\n";
    text += "physical id\t: " + std::to_string(cpu / 4) + "\n";
    text += "core id\t\t: " + std::to_string(cpu % 2) + "\n";
    text += "flags\t\t: fpu vme\n\n";
  }
  return text;
}

TEST(EnvironmentTest, ReadsCpuFactsFromProcAndSys) {
  FixtureRoot root;
  root.Write("proc/cpuinfo", CpuInfo());
  root.Write("proc/meminfo", "MemTotal:       16314268 kB\nMemFree:         1234 kB\n");
  root.Write("proc/loadavg", "3.25 2.00 1.50 2/345 6789\n");
  root.Write("sys/devices/system/cpu/smt/active", "1\n");
  // cpu10 sorts after cpu2 numerically, not as text: the governors keep CPU order.
  for (int cpu : {0, 1, 2, 10}) {
    const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/";
    root.Write(dir + "scaling_governor", cpu < 2 ? "powersave\n" : "performance\n");
    root.Write(dir + "cpuinfo_max_freq", cpu == 10 ? "3900000\n" : "3500000\n");
  }
  root.Write("sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "schedutil\n");  // not a cpuN folder

  const CpuFacts f = ReadCpuFacts(root.path());
  EXPECT_EQ(f.model, "Intel(R) Xeon(R) Test CPU @ 2.10GHz");
  EXPECT_EQ(f.logical_cpus, 8u);
  EXPECT_EQ(f.physical_cores, 4u);
  EXPECT_EQ(f.smt, FeatureState::kEnabled);
  EXPECT_EQ(f.governor, "powersave,performance");
  EXPECT_EQ(f.max_mhz, 3900u);
  EXPECT_EQ(f.memory_bytes, uint64_t{16314268} * 1024);
  EXPECT_DOUBLE_EQ(ReadLoadAverage1m(root.path()), 3.25);
}

TEST(EnvironmentTest, SmtOffAndOneGovernor) {
  FixtureRoot root;
  root.Write("proc/cpuinfo", "processor : 0\nmodel name : Test\nprocessor : 1\nmodel name : Test\n");
  root.Write("sys/devices/system/cpu/smt/active", "0\n");
  root.Write("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n");
  root.Write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance\n");
  const CpuFacts f = ReadCpuFacts(root.path());
  EXPECT_EQ(f.logical_cpus, 2u);
  EXPECT_EQ(f.physical_cores, 0u);  // no "core id": unknown
  EXPECT_EQ(f.smt, FeatureState::kDisabled);
  EXPECT_EQ(f.governor, "performance");
}

TEST(EnvironmentTest, AnEmptyTreeIsAllUnknown) {
  FixtureRoot root;
  const CpuFacts f = ReadCpuFacts(root.path());
  EXPECT_EQ(f.model, "");
  EXPECT_EQ(f.logical_cpus, 0u);
  EXPECT_EQ(f.physical_cores, 0u);
  EXPECT_EQ(f.smt, FeatureState::kUnknown);
  EXPECT_EQ(f.governor, "");
  EXPECT_EQ(f.max_mhz, 0u);
  EXPECT_EQ(f.memory_bytes, 0u);
  EXPECT_EQ(ReadLoadAverage1m(root.path()), -1);
}

TEST(EnvironmentTest, FillsThisHostsEnvironmentForTheCpuDevice) {
  ServerConfig config;
  config.compute_threads = 3;
  config.server_args = {"remex-server", "--listen", "127.0.0.1:0", "--threads", "3"};
  auto device = vm::CreateCpuDevice(3);
  capnp::MallocMessageBuilder message;
  auto env = message.initRoot<wire::Environment>();
  FillEnvironment(config, *device, nullptr, env);

  EXPECT_EQ(std::string(env.getRemexVersion().cStr()), kRemexVersion);
  EXPECT_FALSE(env.getRemexCommit().size() == 0);
  ASSERT_EQ(env.getServerArgs().size(), 5u);
  EXPECT_EQ(std::string(env.getServerArgs()[4].cStr()), "3");
  EXPECT_EQ(std::string(env.getOs().cStr()).rfind("Linux ", 0), 0u) << env.getOs().cStr();
  EXPECT_GE(env.getLogicalCpus(), 1u);
  EXPECT_LE(env.getPhysicalCores(), env.getLogicalCpus());
  EXPECT_FALSE(env.getCpuModel().size() == 0);
  EXPECT_EQ(env.getComputeThreads(), 3u);
  EXPECT_GT(env.getMemoryBytes(), uint64_t{64} << 20);
  EXPECT_GE(env.getLoadAverage1m(), 0.0);  // Linux always has /proc/loadavg
  EXPECT_EQ(env.getGpus().size(), 0u);     // the CPU device uses no GPU
}

TEST(EnvironmentTest, HostLoadAverageIsKnownOnLinux) {
  const double load = HostLoadAverage1m();
  EXPECT_GE(load, 0.0);
  EXPECT_NEAR(load, ReadLoadAverage1m("/"), 1.0);  // both the kernel's figure, read moments apart
}

TEST(EnvironmentTest, NvmlAbsentIsUnavailable) {
  auto nvml = Nvml::Load("libremex-no-such-nvml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("libremex-no-such-nvml.so.1"), std::string::npos)
      << nvml.status().message();
}

TEST(EnvironmentTest, ALibraryWithoutNvmlIsUnavailable) {
  // libm loads, but has no NVML entry points: refused before anything is called.
  auto nvml = Nvml::Load("libm.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("lacks nvmlInit_v2"), std::string::npos) << nvml.status().message();
}

}  // namespace environment_test
}  // namespace remex::server
