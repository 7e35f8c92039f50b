// The load scenarios of `remex bench --scenario` on a real `remex-server --device
// cuda:0`: every scenario runs, its audit passes, its instances (each on a CUDA stream
// of its own) share the device's weights. Label `cuda`: without a GPU every test skips itself; in an emulation build
// (label `cuda-emu`) the server's cuda:0 is the host emulation of CUDA.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>

#include "tests/cli_test_util.h"
#include "tests/mlp_model.h"
#include "vm/device/cuda_device.h"

namespace remex {
namespace {

using remex::testing::RunCommand;
using remex::testing::ServerProcess;

constexpr int64_t kSide = 32;

class CudaLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (vm::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU visible: load scenarios on the GPU not run";
    gpu_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--device", "cuda:0"});
    ASSERT_NE(gpu_->port(), 0) << "remex-server --device cuda:0 did not start";
    dir_ = ::testing::TempDir() + "/remex_cuda_load_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    model_ = remex::testing::SaveMlpModel(dir_, kSide);
  }

  nlohmann::json Bench(const std::string& args) {
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " bench " + model_ + " --server " + gpu_->address() + " " +
                        args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  }

  std::unique_ptr<ServerProcess> gpu_;
  std::string dir_, model_;
};

TEST_F(CudaLoadTest, EveryScenarioRunsAndPassesItsAudit) {
  for (const std::string args : {"--scenario single-stream --concurrency 1:2 --audit",
                                 "--scenario multi-stream --samples-per-query 2 --audit",
                                 "--scenario server --target-qps 50", "--scenario offline --concurrency 2"}) {
    auto j = Bench(args + " --min-duration-s 0.3 --max-trials 2");
    if (j.is_discarded()) continue;
    ASSERT_TRUE(j.contains("load")) << args;
    EXPECT_NE(j["device"].get<std::string>().find("cuda"), std::string::npos) << j["device"];
    for (const auto& level : j["load"]["levels"]) {
      EXPECT_GT(level["completed"].get<uint64_t>(), 0u) << args;
      EXPECT_EQ(level["dropped"].get<uint64_t>(), 0u) << args;
      EXPECT_GT(level["throughput_qps"].get<double>(), 0.0) << args;
      EXPECT_GT(level["audit"]["checked"].get<int>(), 0) << args;
      EXPECT_TRUE(level["audit"]["passed"].get<bool>()) << args << ": " << level["audit"].dump();
    }
    // Weights held once on the device, whatever the instances.
    EXPECT_EQ(j["memory"]["weights_bytes"].get<uint64_t>(), (kSide * kSide + kSide) * 4u) << args;
  }
}

}  // namespace
}  // namespace remex
