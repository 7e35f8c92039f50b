// Device fault recovery: closing every session, then resetting the device once they
// have released their objects (see "Device faults" in device_server.h).
#include <spdlog/spdlog.h>

#include <mutex>
#include <string>
#include <utility>

#include "device_server/self_test.h"
#include "device_server/server_state.h"
#include "device_server/session.h"
#include "kernels/kernels.h"

namespace remex::server {

// The kernel registry of `device`: the CPU kernels (host kernels run them, so a GPU's
// registry holds both) and the device's own (Device::RegisterKernels: for a GPU, the
// CUDA kernels, whose workspaces come from `allocator` (so it counts them) and whose
// work goes on the device's stream).
StatusOr<std::shared_ptr<const kernels::KernelRegistry>> CreateRegistry(
    const vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator) {
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<kernels::KernelRegistry> registry, kernels::CreateCpuRegistry());
  REMEX_RETURN_IF_ERROR(device.RegisterKernels(*registry, allocator));
  return std::shared_ptr<const kernels::KernelRegistry>(std::move(registry));
}

namespace {

// Runs on the device worker once every session the fault closed has released its
// objects: nothing refers to the device's memory or stream any more. Drops the
// allocator's cache, resets the device, checks it is healthy and makes a new kernel
// registry on its new stream. On failure the device stays faulted: device requests
// are refused (UNAVAILABLE) and /healthz reports it, for a supervisor to restart the
// server.
void ResetAfterFault(DeviceServer::State& state) {
  if (state.draining.load()) return;  // stopping: nothing left to serve
  const std::string name = state.device->name();
  state.allocator->Trim();
  Status reset = state.device->capabilities().fault_recovery
                     ? state.device->Reset()
                     : FailedPrecondition(name + ": the device has no recovery from a fault (no reset)");
  if (reset.ok()) reset = state.device->Health();
  StatusOr<std::shared_ptr<const kernels::KernelRegistry>> registry = reset.ok()
      ? CreateRegistry(*state.device, state.allocator)
      : StatusOr<std::shared_ptr<const kernels::KernelRegistry>>(reset);
  if (registry.ok()) {
    std::lock_guard<std::mutex> lock(state.registry_mu);
    state.registry = *std::move(registry);
  }
  {
    std::unique_lock<std::mutex> lock(state.sessions_mu);
    if (!registry.ok()) {
      state.reset_failed = true;
      state.fault = Unavailable(name + ": the device could not be reset after a device fault (" +
                                registry.status().message() + "); restart the server");
      spdlog::error("{}", state.fault.message());
      const Status unusable = state.fault;
      lock.unlock();
      // Not to be trusted either: as a failed self-test (a farm quarantines it).
      if (state.config.on_self_test) state.config.on_self_test(SelfTestResult{unusable, {}});
      return;
    }
    state.fault = OkStatus();
    state.faulted.store(false);
    state.device_resets++;
    spdlog::warn("{}: device reset after the fault; serving again", name);
  }
  if (state.config.on_self_test) {
    // The device faulted once: is it still to be trusted? (A farm quarantines it if not.)
    SelfTestResult health =
        RunSelfTest(*state.device, state.allocator, *state.Registry(), state.config.inject_self_test_failure);
    if (!health.status.ok()) spdlog::error("{}", health.status.ToString());
    state.config.on_self_test(health);
  }
}

}  // namespace

void HandleDeviceFault(DeviceServer::State& state, const Status& fault) {
  std::lock_guard<std::mutex> lock(state.sessions_mu);
  if (state.faulted.load()) return;
  state.device_faults++;
  spdlog::error("{}; closing {} session(s) and resetting the device", fault.message(), state.sessions.size());
  // What the sessions' clients are told, and (UNAVAILABLE) new sessions' device
  // requests until the reset is done.
  const Status why = Aborted(fault.message() + "; the server closed every session on " + state.device->name() +
                             " and resets the device: reconnect");
  state.fault = Unavailable(fault.message() + "; the server is resetting " + state.device->name() +
                            ": retry shortly");
  state.faulted.store(true);
  for (Session* session : state.sessions) session->CloseLocked(why);
  if (state.sessions_to_release == 0) {
    state.worker.Post([&state] { ResetAfterFault(state); }, /*exclusive=*/true);
  }
}

void SessionReleasedAfterFault(DeviceServer::State& state) {
  std::lock_guard<std::mutex> lock(state.sessions_mu);
  if (--state.sessions_to_release == 0 && state.faulted.load() && !state.reset_failed) {
    state.worker.Post([&state] { ResetAfterFault(state); }, /*exclusive=*/true);
  }
}

}  // namespace remex::server
