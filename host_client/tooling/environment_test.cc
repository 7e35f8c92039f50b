#include "host_client/tooling/environment.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace remex::tooling {
namespace environment_test {

// A quiet environment: a known server with the performance governor and a low load,
// and an idle client host.
EnvironmentReport Quiet() {
  EnvironmentReport e;
  e.server.known = true;
  e.server.logical_cpus = 4;
  e.server.governor = "performance";
  e.server.load_average_1m = 0.5;
  e.host.logical_cpus = 8;
  e.host.load_average_1m = 1.0;
  return e;
}

std::vector<std::string> Codes(const EnvironmentReport& e) {
  std::vector<std::string> codes;
  for (const auto& w : EnvironmentWarnings(e)) {
    EXPECT_FALSE(w.message.empty());
    EXPECT_FALSE(w.fix.empty()) << w.code;
    codes.push_back(w.code);
  }
  return codes;
}

TEST(EnvironmentWarningsTest, AQuietEnvironmentHasNone) { EXPECT_TRUE(Codes(Quiet()).empty()); }

TEST(EnvironmentWarningsTest, GovernorNotPerformance) {
  auto e = Quiet();
  e.server.governor = "powersave";
  EXPECT_EQ(Codes(e), std::vector<std::string>{"cpu_governor"});
  e.server.governor = "performance,powersave";  // CPUs that differ
  EXPECT_EQ(Codes(e), std::vector<std::string>{"cpu_governor"});
  e.server.governor = "";  // no cpufreq: unknown, no warning
  EXPECT_TRUE(Codes(e).empty());
}

TEST(EnvironmentWarningsTest, GpuClocksUnlockedOnlyWhenKnown) {
  auto e = Quiet();
  client::GpuEnvironment gpu;
  gpu.name = "NVIDIA H200";
  gpu.max_sm_clock_mhz = 1980;
  gpu.max_mem_clock_mhz = 3201;
  e.server.gpus.push_back(gpu);  // clocks_locked unknown (no NVML)
  EXPECT_TRUE(Codes(e).empty());
  e.server.gpus[0].clocks_locked = client::FeatureState::kEnabled;
  EXPECT_TRUE(Codes(e).empty());
  e.server.gpus[0].clocks_locked = client::FeatureState::kDisabled;
  const auto warnings = EnvironmentWarnings(e);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].code, "gpu_clocks_unlocked");
  EXPECT_NE(warnings[0].message.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(warnings[0].fix.find("--applications-clocks=3201,1980"), std::string::npos) << warnings[0].fix;
}

TEST(EnvironmentWarningsTest, LoadAboveOnePerCpu) {
  auto e = Quiet();
  e.server.load_average_1m = 4.0;  // exactly 1 per CPU: not above
  EXPECT_TRUE(Codes(e).empty());
  e.server.load_average_1m = 4.5;
  EXPECT_EQ(Codes(e), std::vector<std::string>{"server_load"});
  // After a benchmark its own sample wins over hello's.
  e.server_load_after_benchmark_1m = 1.0;
  EXPECT_TRUE(Codes(e).empty());
  e.server_load_after_benchmark_1m = 9.0;
  EXPECT_EQ(Codes(e), std::vector<std::string>{"server_load"});
  e = Quiet();
  e.host.load_average_1m = 8.01;
  EXPECT_EQ(Codes(e), std::vector<std::string>{"client_load"});
  e.host.load_average_1m = -1;  // unknown
  EXPECT_TRUE(Codes(e).empty());
}

TEST(EnvironmentWarningsTest, AServerThatSendsNoEnvironmentGetsNoServerWarnings) {
  auto e = Quiet();
  e.server.known = false;
  e.server.governor = "powersave";
  e.server.load_average_1m = 100;
  EXPECT_TRUE(Codes(e).empty());
}

TEST(EnvironmentWarningsTest, ThisHostIsDescribed) {
  const HostEnvironment h = ReadHostEnvironment();
  EXPECT_FALSE(h.remex_version.empty());
  EXPECT_FALSE(h.remex_commit.empty());
  EXPECT_GE(h.logical_cpus, 1u);
  EXPECT_GE(h.load_average_1m, 0.0);
}

}  // namespace environment_test
}  // namespace remex::tooling
