// DeviceServer::Start's choice of device: "cpu", "cuda:N", and the errors for the
// rest; and what the server does by its device's capabilities (vm/device/device.h). The
// CUDA cases depend on whether a GPU is visible and are checked either way.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <span>
#include <vector>

#include "device_server/device_server.h"
#include "host_client/client/client.h"
#include "kernels/kernels.h"
#include "vm/device/cuda_device.h"

namespace remex::server {
namespace device_choice_test {

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

// A CPU server answers tensorRead on its I/O thread, from the tensor's own memory
// (host_access_in_place): a read completes while the device worker is held by other
// work.
TEST(ServerOnCapabilities, HostAddressableDeviceReadsTensorsWhileItsWorkerIsBusy) {
  auto server = DeviceServer::Start(LoopbackConfig("cpu"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  client::ConnectOptions options;
  options.timeout = std::chrono::milliseconds(20000);  // a read queued behind the worker fails here
  auto session = client::Session::Connect("127.0.0.1", (*server)->port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<float> values = {1.5f, -2, 3, 4};
  auto tensor = (*session)->Upload(DType::kFloat32, {4}, std::as_bytes(std::span<const float>(values)));
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();

  // Hold the worker: the self-test's completion waits until the read is done.
  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  (*server)->PostSelfTest([&holding, released](std::optional<SelfTestResult>) {
    holding.set_value();
    released.wait();
  });
  holding.get_future().wait();
  auto read = (*session)->Download(tensor->handle);
  release.set_value();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->data.size(), sizeof(float) * values.size());
  EXPECT_EQ(std::memcmp(read->data.data(), values.data(), read->data.size()), 0);
  (*server)->Stop();
}

// The environment fingerprint reports the device's compute threads (its capability), and
// the farm's summary names the device's kind by its kernels.
TEST(ServerOnCapabilities, ReportsTheDevicesComputeThreadsAndKind) {
  ServerConfig config = LoopbackConfig("cpu");
  config.compute_threads = 2;
  auto server = DeviceServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->device_summary().kind, "cpu");
  auto session = client::Session::Connect("127.0.0.1", (*server)->port());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const client::ServerEnvironment& env = (*session)->server_info().environment;
  ASSERT_TRUE(env.known);
  EXPECT_EQ(env.compute_threads, 2u);
  (*server)->Stop();
}

TEST(ServerOnCapabilities, GpuServerReportsNoComputeThreads) {
  if (vm::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU visible (or Remex built without CUDA)";
  auto server = DeviceServer::Start(LoopbackConfig("cuda:0"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->device_summary().kind, "cuda");
  auto session = client::Session::Connect("127.0.0.1", (*server)->port());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->server_info().environment.compute_threads, 0u);
  (*server)->Stop();
}

}  // namespace device_choice_test
}  // namespace remex::server
