#include "vm/device/cpu_device.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/huge_pages.h"
#include "kernels/cpu_features.h"

namespace remex::vm {
namespace {

// Physical memory of this machine (bytes); 0 when it cannot be read.
uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::string name = "cpu", int compute_threads = 0)
      : name_(std::move(name)),
        memory_bytes_(PhysicalMemoryBytes() ? PhysicalMemoryBytes() : UINT64_MAX),
        compute_threads_(compute_threads) {}

  DeviceCapabilities capabilities() const override {
    DeviceCapabilities caps;
    caps.kernel_kind = kernels::DeviceKind::kCpu;
    caps.host_addressable = true;
    caps.inline_execution = true;
    caps.fault_recovery = true;
    // OpenMP's default is a process-wide setting: any thread that set none reads it.
    caps.compute_threads = compute_threads_ > 0 ? compute_threads_ : kernels::CpuComputeThreads();
    caps.int8_channels_last = kernels::CpuHasInt8DotProducts();
    caps.float_channels_last = kernels::CpuHasChannelsLastFloatConvolutions();
    return caps;
  }
  std::string name() const override { return name_; }
  std::string description() const override {
    std::string model = "cpu";
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("model name", 0) == 0) {
        auto colon = line.find(':');
        if (colon != std::string::npos) model = line.substr(colon + 2);
        break;
      }
    }
    // OpenMP's default is a process-wide setting: any thread that set none reads it.
    const int compute = compute_threads_ > 0 ? compute_threads_ : kernels::CpuComputeThreads();
    return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads, " +
           std::to_string(compute) + " compute threads";
  }
  uint64_t memory_bytes() const override { return memory_bytes_; }
  void PrepareKernelThread() override {
    if (compute_threads_ > 0) kernels::SetCpuComputeThreads(compute_threads_);
  }
  StatusOr<void*> Allocate(size_t bytes) override {
    // More than the machine's memory can never be served: refuse it up front rather
    // than count on the kernel's overcommit policy.
    if (bytes > memory_bytes_) {
      return ResourceExhausted("cpu: cannot allocate " + std::to_string(bytes) + " bytes; the device has " +
                               std::to_string(memory_bytes_) + " bytes of memory");
    }
    // Large blocks start on a 2 MiB boundary and are backed by huge pages: a model's
    // first invoke and a fresh tensor's upload touch them page by page otherwise.
    const size_t align = bytes >= kHugePageMinBytes ? kHugePageBytes : 64;
    const size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) return ResourceExhausted("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    AdviseHugePages(p, rounded);  // nothing below kHugePageMinBytes
    return p;
  }
  void Deallocate(void* ptr, size_t) override { std::free(ptr); }
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return OkStatus();
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return OkStatus();
  }
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
    return OkStatus();
  }
  Status Memset(void* dst, uint8_t value, size_t bytes) override {
    if (bytes) std::memset(dst, value, bytes);
    return OkStatus();
  }
  Status Synchronize() override { return OkStatus(); }
  // glibc keeps freed blocks below its (adaptive) mmap threshold in its heap.
  void ReleaseFreedMemory() override { malloc_trim(0); }

 private:
  std::string name_;
  const uint64_t memory_bytes_;
  const int compute_threads_;  // 0: OpenMP's default
};

}  // namespace

std::unique_ptr<Device> CreateCpuDevice(int compute_threads) {
  return std::make_unique<CpuDevice>("cpu", compute_threads);
}

Device& HostDevice() {
  static CpuDevice* host = new CpuDevice("host");
  return *host;
}

}  // namespace remex::vm
