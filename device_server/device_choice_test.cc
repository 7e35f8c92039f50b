// DeviceServer::Start's choice of device: "cpu", "cuda:N", and the errors for the
// rest. The CUDA cases depend on whether a GPU is visible and are checked either way.

#include <gtest/gtest.h>

#include "device_server/device_server.h"
#include "kernels/kernels.h"
#include "vm/device/cuda_device.h"

namespace remex::server {
namespace {

ServerConfig LoopbackConfig(std::string device) {
  ServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.device = std::move(device);
  return config;
}

TEST(DeviceChoice, UnknownDeviceNamesAreInvalidArgument) {
  for (const char* name : {"tpu", "cuda:", "cuda:x", "cuda:-1", "cuda:0x", "gpu:0", ""}) {
    auto server = DeviceServer::Start(LoopbackConfig(name));
    ASSERT_FALSE(server.ok()) << name;
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument) << name << ": " << server.status().ToString();
  }
}

TEST(DeviceChoice, CudaWithoutGpuFailsWithReason) {
  if (vm::CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA GPU is visible: the no-GPU path is not reachable";
  auto server = DeviceServer::Start(LoopbackConfig("cuda:0"));
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(server.status().code() == StatusCode::kUnavailable ||
              server.status().code() == StatusCode::kUnimplemented)
      << server.status().ToString();
  EXPECT_NE(server.status().message().find("cuda:0"), std::string::npos) << server.status().ToString();
}

TEST(DeviceChoice, CudaServesTheGpu) {
  if (vm::CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA GPU visible (or Remex built without CUDA): GPU test not run";
  }
  auto server = DeviceServer::Start(LoopbackConfig("cuda:0"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->device_description().rfind("cuda:0 (", 0), 0u) << (*server)->device_description();
  (*server)->Stop();
  auto past = DeviceServer::Start(LoopbackConfig("cuda:" + std::to_string(vm::CudaDeviceCount())));
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument) << past.status().ToString();
}

TEST(DeviceChoice, ComputeThreadsAreACpuDeviceSetting) {
  ServerConfig gpu = LoopbackConfig("cuda:0");
  gpu.compute_threads = 2;
  auto refused = DeviceServer::Start(gpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("cpu device"), std::string::npos) << refused.status().ToString();

  for (int bad : {-1, kernels::kMaxCpuComputeThreads + 1}) {
    ServerConfig cpu = LoopbackConfig("cpu");
    cpu.compute_threads = bad;
    auto out_of_range = DeviceServer::Start(cpu);
    ASSERT_FALSE(out_of_range.ok()) << bad;
    EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument) << out_of_range.status().ToString();
  }

  ServerConfig cpu = LoopbackConfig("cpu");
  cpu.compute_threads = 2;
  auto server = DeviceServer::Start(cpu);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_NE((*server)->device_description().find(", 2 compute threads"), std::string::npos)
      << (*server)->device_description();
  (*server)->Stop();
}

}  // namespace
}  // namespace remex::server
