#include "vm/device/device.h"

#include <algorithm>
#include <vector>

namespace remex::vm {

Status Device::Memset(void* dst, uint8_t value, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<uint8_t> chunk(std::min(bytes, kChunk), value);
  for (size_t done = 0; done < bytes; done += chunk.size()) {
    size_t n = std::min(chunk.size(), bytes - done);
    REMEX_RETURN_IF_ERROR(CopyToDevice(static_cast<uint8_t*>(dst) + done, chunk.data(), n));
  }
  return OkStatus();
}

Status Device::BeginCapture() { return Unimplemented(name() + " does not record graphs"); }

StatusOr<std::unique_ptr<DeviceGraph>> Device::EndCapture() {
  return Unimplemented(name() + " does not record graphs");
}

StatusOr<bool> Device::Idle() {
  REMEX_RETURN_IF_ERROR(Synchronize());
  return true;
}

Status Device::Health() {
  {
    std::lock_guard<std::mutex> lock(fault_mu_);
    if (!injected_fault_.ok()) return injected_fault_;
  }
  return DeviceHealth();
}

Status Device::Reset() {
  REMEX_RETURN_IF_ERROR(ResetDevice());
  std::lock_guard<std::mutex> lock(fault_mu_);
  injected_fault_ = OkStatus();
  return OkStatus();
}

void Device::InjectFaultAtKernel(uint64_t n) { fault_countdown_.store(n, std::memory_order_relaxed); }

Status Device::BeforeKernelLaunch() {
  uint64_t left = fault_countdown_.load(std::memory_order_relaxed);
  while (left != 0) {
    if (!fault_countdown_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) continue;
    if (left != 1) return OkStatus();
    Status fault = Aborted(name() +
                           ": device fault: injected at a kernel launch (test-only fault injection), as a kernel "
                           "that hit an illegal address would fail");
    std::lock_guard<std::mutex> lock(fault_mu_);
    injected_fault_ = fault;
    return fault;
  }
  return OkStatus();
}

Status Device::RegisterKernels(kernels::KernelRegistry&, const std::shared_ptr<Allocator>&) const {
  return OkStatus();
}

StatusOr<std::unique_ptr<Device>> Device::CreateStream() {
  return Unimplemented(name() + ": the device has no streams of its own");
}

}  // namespace remex::vm
