// What the sessions of one DeviceServer share (DeviceServer::State), and the device
// fault recovery that acts on it (internal to device_server/).
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "base/status.h"
#include "device_server/device_server.h"
#include "device_server/device_worker.h"
#include "device_server/environment.h"
#include "device_server/metrics.h"
#include "device_server/module_cache.h"
#include "kernels/kernels.h"
#include "vm/device/allocator.h"

namespace remex::server {

class Session;

struct DeviceServer::State {
  // Op definitions and this device's kernels. Replaced when the device is reset (the
  // CUDA kernels hold the device's stream): take it with Registry().
  std::shared_ptr<const kernels::KernelRegistry> registry;
  std::mutex registry_mu;
  std::unique_ptr<vm::Device> device;
  std::shared_ptr<vm::Allocator> allocator;
  std::atomic<uint64_t> next_handle{1};
  std::atomic<uint64_t> next_session{1};
  std::atomic<uint64_t> active_sessions{0};
  std::unique_ptr<ModuleCache> module_cache;
  std::chrono::milliseconds benchmark_time_limit{0};
  ServerConfig config;
  uint64_t session_memory_bytes = 0;  // config's, resolved against the device
  // Set by Stop(): new requests are refused, and runs stop once `shutdown_at` (steady
  // clock ticks; max: not stopping) has passed.
  std::atomic<bool> draining{false};
  std::atomic<int64_t> shutdown_at{std::numeric_limits<int64_t>::max()};
  // Host-only request work (module parsing and verification), off the device thread.
  boost::asio::thread_pool host_pool{2};
  RequestMetrics requests;
  // NVML, for the GPU facts of the environment fingerprint (environment.h); loaded at
  // start for a GPU device, null for the CPU device or where the driver has none.
  std::unique_ptr<Nvml> nvml;

  // Device faults (see HandleDeviceFault): every open session, and the fault the
  // server is recovering from. Guarded by sessions_mu, with each Session's fault
  // fields.
  std::mutex sessions_mu;
  std::unordered_set<Session*> sessions;
  Status fault;                       // non-OK from a fault until the device is reset
  bool reset_failed = false;          // the reset failed: the device stays unusable
  uint64_t sessions_to_release = 0;   // closed sessions still holding objects
  std::atomic<bool> faulted{false};   // !fault.ok(), read without the lock
  std::atomic<uint64_t> device_faults{0};
  std::atomic<uint64_t> device_resets{0};

  DeviceWorker worker;  // last: destroyed first, running what is still queued

  std::shared_ptr<const kernels::KernelRegistry> Registry() {
    std::lock_guard<std::mutex> lock(registry_mu);
    return registry;
  }
};

// The kernel registry of `device`: the CPU kernels (host kernels run them, so a GPU's
// registry holds both) and, for a GPU, the CUDA kernels, whose workspaces come from
// `allocator` (so it counts them) and whose work goes on the device's stream.
StatusOr<std::shared_ptr<const kernels::KernelRegistry>> CreateRegistry(
    const vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator);

// Device faults (device_server/device_fault.cc).
//
// Device faults: called on the device worker when a request there failed and the
// device reports a fault (Device::Health). Closes every session (see
// Session::CloseLocked) and, once all of them have released their objects, resets the
// device on the worker (ResetAfterFault). Does nothing while a fault is being handled.
void HandleDeviceFault(DeviceServer::State& state, const Status& fault);
// A session closed by a fault has released its objects: the last one posts the reset.
void SessionReleasedAfterFault(DeviceServer::State& state);

}  // namespace remex::server
