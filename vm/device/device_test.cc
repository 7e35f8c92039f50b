// The device layer's contract: what each device says it can do (DeviceCapabilities),
// and that the VM's tensor operations behave by it. On the real CPU device; the CUDA
// device's cases skip themselves without a GPU (and in a build without CUDA). The device
// server's behaviour by capabilities is in device_server/device_choice_test.cc.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "base/tensor_fill.h"
#include "kernels/kernels.h"
#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/device/cuda_device.h"
#include "vm/device/device.h"
#include "vm/tensor_ops.h"

namespace remex::vm {
namespace {

TEST(CpuDevice, DescribesItsCapabilities) {
  std::unique_ptr<Device> device = CreateCpuDevice(3);
  const DeviceCapabilities caps = device->capabilities();
  EXPECT_EQ(caps.kernel_kind, kernels::DeviceKind::kCpu);
  EXPECT_EQ(device->kernel_kind(), kernels::DeviceKind::kCpu);
  EXPECT_TRUE(caps.host_addressable);
  EXPECT_TRUE(caps.inline_execution);
  EXPECT_TRUE(caps.host_access_in_place());
  EXPECT_FALSE(caps.streams);
  EXPECT_TRUE(caps.fault_recovery);
  EXPECT_EQ(caps.compute_threads, 3);
  // Without a count of its own, OpenMP's default.
  EXPECT_EQ(CreateCpuDevice()->capabilities().compute_threads, kernels::CpuComputeThreads());
  // Host memory, the VM's second memory space, is a CPU device too.
  const DeviceCapabilities host = HostDevice().capabilities();
  EXPECT_EQ(host.kernel_kind, kernels::DeviceKind::kCpu);
  EXPECT_TRUE(host.host_access_in_place());
}

TEST(CpuDevice, ItsMemoryIsReadAndWrittenByTheHostInPlace) {
  std::unique_ptr<Device> device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device);
  auto buffer = allocator->Allocate(256);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  std::memset((*buffer)->data(), 0x5a, 256);
  std::vector<std::byte> read(256);
  ASSERT_TRUE(device->CopyToHost(read.data(), (*buffer)->data(), read.size()).ok());
  EXPECT_EQ(read, std::vector<std::byte>(256, std::byte{0x5a}));
  const std::vector<std::byte> written(256, std::byte{0x21});
  ASSERT_TRUE(device->CopyToDevice((*buffer)->data(), written.data(), written.size()).ok());
  EXPECT_EQ(std::memcmp((*buffer)->data(), written.data(), written.size()), 0);
}

TEST(CpuDevice, HasNoStreams) {
  std::unique_ptr<Device> device = CreateCpuDevice();
  auto stream = device->CreateStream();
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kUnimplemented) << stream.status().ToString();
}

TEST(CpuDevice, RegistersNoKernelsBeyondTheCpuRegistrys) {
  std::unique_ptr<Device> device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device);
  auto registry = kernels::CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  ASSERT_TRUE(device->RegisterKernels(**registry, allocator).ok());
  EXPECT_NE((*registry)->FindKernel("Add", kernels::DeviceKind::kCpu), nullptr);
  EXPECT_EQ((*registry)->FindKernel("Add", kernels::DeviceKind::kCuda), nullptr);
}

TEST(CpuDevice, RecoversFromAFault) {
  std::unique_ptr<Device> device = CreateCpuDevice();
  ASSERT_TRUE(device->capabilities().fault_recovery);
  device->InjectFaultAtKernel(1);
  EXPECT_EQ(device->BeforeKernelLaunch().code(), StatusCode::kAborted);
  EXPECT_EQ(device->Health().code(), StatusCode::kAborted);
  ASSERT_TRUE(device->Reset().ok());
  EXPECT_TRUE(device->Health().ok());
}

// The CPU device with the capabilities a test gives it, counting the copies in each
// direction: the VM's behaviour for a device that is not host-addressable, without one.
class CountingDevice final : public Device {
 public:
  explicit CountingDevice(DeviceCapabilities caps) : caps_(caps), cpu_(CreateCpuDevice()) {}
  DeviceCapabilities capabilities() const override { return caps_; }
  std::string name() const override { return "counting"; }
  std::string description() const override { return "the CPU device, copies counted"; }
  uint64_t memory_bytes() const override { return cpu_->memory_bytes(); }
  StatusOr<void*> Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Deallocate(void* ptr, size_t bytes) override { cpu_->Deallocate(ptr, bytes); }
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    to_device++;
    return cpu_->CopyToDevice(dst, src, bytes);
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    to_host++;
    return cpu_->CopyToHost(dst, src, bytes);
  }
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    return cpu_->CopyOnDevice(dst, src, bytes);
  }
  Status Synchronize() override {
    synchronizes++;
    return OkStatus();
  }

  int to_device = 0, to_host = 0, synchronizes = 0;

 private:
  DeviceCapabilities caps_;
  std::unique_ptr<Device> cpu_;
};

DeviceCapabilities WithHostAddressable(bool host_addressable) {
  DeviceCapabilities caps;
  caps.host_addressable = host_addressable;
  return caps;
}

TEST(TensorOpsOnCapabilities, StatsReadAHostAddressableDevicesTensorInPlace) {
  for (bool host_addressable : {true, false}) {
    SCOPED_TRACE(host_addressable ? "host-addressable" : "not host-addressable");
    CountingDevice device(WithHostAddressable(host_addressable));
    auto allocator = Allocator::Create(device);
    auto tensor = AllocateTensor(*allocator, DType::kFloat32, {4});
    ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
    const float values[4] = {1, 2, 3, 6};
    ASSERT_TRUE(device.CopyToDevice((*tensor)->data(), values, sizeof(values)).ok());
    auto stats = ComputeStats(device, **tensor);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->count, 4u);
    EXPECT_EQ(stats->min, 1);
    EXPECT_EQ(stats->max, 6);
    EXPECT_EQ(stats->mean, 3);
    // In place after waiting for the device's work, else through one host copy.
    EXPECT_EQ(device.to_host, host_addressable ? 0 : 1);
    if (host_addressable) EXPECT_GE(device.synchronizes, 1);
  }
}

TEST(TensorOpsOnCapabilities, FillWritesAHostAddressableDevicesTensorInPlace) {
  TensorFill fill;
  fill.kind = TensorFill::Kind::kUniform;
  fill.seed = 7;
  std::vector<float> filled[2];
  for (bool host_addressable : {true, false}) {
    SCOPED_TRACE(host_addressable ? "host-addressable" : "not host-addressable");
    CountingDevice device(WithHostAddressable(host_addressable));
    auto allocator = Allocator::Create(device);
    auto tensor = AllocateTensor(*allocator, DType::kFloat32, {64});
    ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
    ASSERT_TRUE(FillTensor(device, **tensor, fill).ok());
    EXPECT_EQ(device.to_device, host_addressable ? 0 : 1);
    const auto* data = static_cast<const float*>((*tensor)->data());
    filled[host_addressable].assign(data, data + 64);
  }
  // The same values either way.
  EXPECT_EQ(filled[0], filled[1]);
}

// The CUDA device, when a GPU is visible: its own stream's queue, streams of its own.
TEST(CudaDeviceCapabilities, AGpuQueuesItsWorkAndMakesStreams) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU visible (or Remex built without CUDA)";
  auto device = CreateCudaDevice(0);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const DeviceCapabilities caps = (*device)->capabilities();
  EXPECT_EQ(caps.kernel_kind, kernels::DeviceKind::kCuda);
  EXPECT_FALSE(caps.host_addressable);
  EXPECT_FALSE(caps.inline_execution);
  EXPECT_FALSE(caps.host_access_in_place());
  EXPECT_TRUE(caps.streams);
  EXPECT_TRUE(caps.fault_recovery);
  EXPECT_EQ(caps.compute_threads, 0);

  auto allocator = Allocator::Create(**device);
  auto registry = kernels::CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  ASSERT_TRUE((*device)->RegisterKernels(**registry, allocator).ok());
  EXPECT_NE((*registry)->FindKernel("Add", kernels::DeviceKind::kCuda), nullptr);

  auto stream = (*device)->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(&(*stream)->memory_space(), device->get());
  const DeviceCapabilities stream_caps = (*stream)->capabilities();
  EXPECT_EQ(stream_caps.kernel_kind, kernels::DeviceKind::kCuda);
  EXPECT_FALSE(stream_caps.host_addressable);
  EXPECT_FALSE(stream_caps.streams);
  EXPECT_FALSE(stream_caps.fault_recovery);
  EXPECT_EQ((*stream)->CreateStream().status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace remex::vm
