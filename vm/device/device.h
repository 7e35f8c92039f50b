// The device API: what the VM and the device server run on.
//
// A Device owns a memory space and a queue of work on it, and moves bytes between its
// memory and host memory. Even the CPU device is treated as a separate memory space by
// the VM: every transfer goes through CopyToDevice / CopyToHost and is counted, so
// placement is observable and testable without a GPU. A device says what it can do in
// its DeviceCapabilities; code outside the device implementations asks those, never
// which device it is. The devices are the CPU (cpu_device.h) and CUDA (cuda_device.h);
// the allocator over a device and the tensors in its memory are allocator.h.
// vm/device/README.md tells how to add a device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "kernels/kernels.h"

namespace remex::vm {

class Allocator;

// What a device can do, for the code that runs on it (the VM, the device server) to
// decide by instead of by which device it is. A value type: Device::capabilities()
// returns it; none of it changes over the device's life but compute_threads, which
// follows OpenMP's default while the CPU device has no count of its own.
struct DeviceCapabilities {
  // The kernels it runs: the KernelRegistry entries of this kind (the CPU kernels for
  // kCpu, the CUDA kernels for kCuda), which Device::RegisterKernels adds to a registry.
  kernels::DeviceKind kernel_kind = kernels::DeviceKind::kCpu;
  // Its memory is host memory: the host may read and write a buffer's bytes through its
  // pointer (Buffer::data()), once the device's work on them is done (Synchronize),
  // instead of copying them with CopyToHost / CopyToDevice. The CPU device.
  bool host_addressable = false;
  // Its work runs on the calling thread and is done when the call returns: nothing is
  // ever queued (Synchronize has nothing to wait for), so the device can be driven from
  // any thread, one at a time (the server runs a short invoke on the I/O thread). The
  // CPU device; a GPU queues its work on a stream.
  bool inline_execution = false;
  // It makes queues of its own on its memory that run beside its own queue
  // (Device::CreateStream: a CUDA stream), so that independent work runs concurrently.
  bool streams = false;
  // Device::Reset brings it back after a fault (Health ABORTED): the device server
  // resets it once the sessions the fault closed have released their objects. A CUDA
  // device (its context is reset) and the CPU device (which only has injected faults);
  // not a CUDA stream, whose device is the one reset.
  bool fault_recovery = false;
  // The size of the team of host threads its kernels run on: the CPU device's compute
  // threads (its own count, else OpenMP's default); 0 for a device whose kernels do not
  // run on host threads (a GPU).
  int compute_threads = 0;
  // Its int8 convolutions (QLinearConv, ConvInteger) run fastest with their activations
  // channels-last: the CPU device on a CPU with int8 dot products
  // (kernels::CpuHasInt8DotProducts). The server tells clients (DeviceInfo), whose
  // compile then defaults to NHWC for a model with them (tooling::CompileForDevice).
  bool int8_channels_last = false;
  // Its float32 convolutions run fastest channels-last and its MaxPool, AveragePool and
  // GlobalAveragePool kernels take NHWC: the CPU device on a CPU with AVX2 or AVX-512
  // (kernels::CpuHasChannelsLastFloatConvolutions). Clients compile float models with
  // convolutions NHWC for it by default (tooling::CompileForDevice).
  bool float_channels_last = false;

  // It records its queued work into graphs replayed by one launch each
  // (Device::BeginCapture / EndCapture: CUDA Graphs): the CUDA device and its streams.
  bool graphs = false;

  // Whether the host may read and write the device's memory in place whenever no call on
  // the device is running, on any thread: host-addressable memory and no queued work.
  // The server then receives tensor writes into, and sends tensor reads from, the
  // tensors' own memory on its I/O thread.
  bool host_access_in_place() const { return host_addressable && inline_execution; }
};

// A clock of the device's own: Start and Stop are recorded in the device's queue, so
// the elapsed time is the device's time between them (CUDA events on a GPU), not the
// calling thread's.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual Status Start() = 0;
  virtual Status Stop() = 0;
  // Seconds between the last Start and Stop; waits for Stop to be reached.
  virtual StatusOr<double> ElapsedSeconds() = 0;
  // "cuda_event".
  virtual std::string name() const = 0;
};

// A device's queued work recorded once (Device::BeginCapture .. EndCapture) and run
// again by one launch: kernels with the arguments they were launched with, copies and
// memsets within device memory, in their recorded order. On a GPU a CUDA Graph,
// instantiated once (CUDA Programming Guide, "CUDA Graphs"; capture by
// cudaStreamBeginCapture): a launch costs one submission instead of one per kernel.
// The recorded work reads and writes the same addresses at every launch, so whoever
// launches it keeps that memory allocated to it while it lives (the VM's graphs hold
// the buffers). Destroy it before the device is reset; the device must outlive it.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues the recorded work on the device's queue; returns once it is queued, as a
  // kernel launch does. Errors of the launch, device faults as the device reports them.
  virtual Status Launch() = 0;
  // The recorded operations (graph nodes): kernels, copies, memsets, library calls.
  virtual size_t size() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  // What the device can do (see DeviceCapabilities). Cheap; thread-safe.
  virtual DeviceCapabilities capabilities() const = 0;
  // The kind of kernels it runs (capabilities().kernel_kind): the registry entries the
  // VM creates its kernels from.
  kernels::DeviceKind kernel_kind() const { return capabilities().kernel_kind; }
  // "cpu", "cuda:0".
  virtual std::string name() const = 0;
  // Human-readable model and capacity, e.g. "x86_64, 2 cores".
  virtual std::string description() const = 0;
  virtual uint64_t memory_bytes() const = 0;
  // Prepares the calling thread to launch this device's kernels: called on the thread
  // that runs them (a server's device worker), before the first. The CPU device sets
  // its compute threads there (kernels::SetCpuComputeThreads: OpenMP's team size is a
  // per-thread setting); other devices need nothing.
  virtual void PrepareKernelThread() {}
  // Adds the kernels of this device's kernel_kind to `registry`, bound to this device's
  // queue with workspaces from `allocator` (an allocator over this device, which counts
  // them). `registry` already holds the CPU kernels (kernels::CreateCpuRegistry: host
  // kernels run them), which are the CPU device's own, so the default adds nothing. The
  // CUDA devices add the CUDA kernels (kernels::RegisterCudaKernels). Called at the
  // server's start and again after a Reset, whose new queue the kernels must use.
  // Errors of the kernels' registration.
  virtual Status RegisterKernels(kernels::KernelRegistry& registry, const std::shared_ptr<Allocator>& allocator) const;
  // A queue of its own on this device's memory (capabilities().streams), as a Device
  // whose memory_space() is this one: its copies and kernels run beside this device's,
  // unordered with them. UNIMPLEMENTED for a device without streams (the default);
  // errors of creating the queue. This device must outlive it.
  virtual StatusOr<std::unique_ptr<Device>> CreateStream();

  // Recording (capabilities().graphs). After BeginCapture the work the calling thread
  // queues on the device (kernels, CopyOnDevice, Memset) is recorded, not run, until
  // EndCapture returns it as a DeviceGraph. While recording, what would wait for the
  // device or move bytes to or from the host (Synchronize, Idle, CopyToDevice,
  // CopyToHost) fails with FAILED_PRECONDITION and spoils the recording, as does a
  // kernel that does so itself: EndCapture then fails with the reason, and nothing of
  // the recorded work ran. Memory allocated while recording stays usable outside the
  // graph (it is not the graph's own). The caller queues nothing else on the device
  // meanwhile (the device server's worker runs one request at a time).
  // UNIMPLEMENTED for a device without graphs (the default); FAILED_PRECONDITION when
  // already recording; errors of the CUDA calls.
  virtual Status BeginCapture();
  // Ends the recording BeginCapture started and instantiates it. FAILED_PRECONDITION
  // when not recording, or naming what spoiled the recording; UNIMPLEMENTED without
  // graphs.
  virtual StatusOr<std::unique_ptr<DeviceGraph>> EndCapture();

  // Allocates `bytes` (> 0) of device memory, 64-byte aligned.
  // RESOURCE_EXHAUSTED when the device cannot provide it.
  virtual StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Deallocate(void* ptr, size_t bytes) = 0;
  virtual Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual Status CopyOnDevice(void* dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` of device memory at `dst` to `value` (the time evaluator's cache
  // flush writes a buffer with it). The default copies from a host buffer in chunks;
  // devices override it with their own fill.
  virtual Status Memset(void* dst, uint8_t value, size_t bytes);
  // Waits for all work queued on the device.
  virtual Status Synchronize() = 0;
  // Whether all work queued on the device has completed, without waiting (a CUDA
  // device: cudaStreamQuery on its stream): lets a caller that has other work do it
  // meanwhile (the load generator's lanes poll it and yield). Errors of the queued work
  // as Synchronize reports them. The default waits (Synchronize) and says true: the CPU
  // device runs its work on the calling thread.
  virtual StatusOr<bool> Idle();
  // The device whose memory this one's pointers address: the device itself, or, for a
  // queue of its own on another device's memory (a stream, CreateStream), that
  // device. Tensors of one memory space may be used by every device of it, with the
  // ordering their queues give them (see CreateCudaStream in cuda_device.h).
  virtual const Device& memory_space() const { return *this; }
  // Hands memory freed with Deallocate back to the system where the device's heap keeps
  // it (the CPU device: malloc_trim). Called after an allocator drops its cache.
  virtual void ReleaseFreedMemory() {}
  // A timer on the device's queue, or nullptr when the device has none (the CPU
  // device: its work runs on the calling thread, which a steady clock times).
  virtual StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer() { return std::unique_ptr<DeviceTimer>(); }

  // Device faults. A fault leaves the device unusable until Reset: on a GPU, a CUDA
  // error that poisons the context (an illegal address, a launch failure, a failed
  // device-side assertion, ...; see cuda_device.h), after which every CUDA call on it
  // fails with that error. The work that meets it fails; the device's owner then
  // releases everything allocated on the device and calls Reset.
  //
  // OK while the device is usable; ABORTED "<name>: device fault: <what>" from a fault
  // (a real one, or one injected with InjectFaultAtKernel) until Reset. Thread-safe;
  // cheap enough to ask after every failed request (the CUDA device queries its
  // stream, without waiting).
  Status Health();
  // Brings the device back after a fault: the CUDA device resets its context
  // (cudaDeviceReset) and re-creates its stream and staging buffers; every device
  // clears an injected fault. Every pointer the device handed out before is invalid
  // afterwards, and so is its stream: release all device memory first (Deallocate
  // on a faulted CUDA device frees nothing; the reset reclaims it) and drop whatever
  // holds the old stream. Not thread-safe with any other use of the device. An error
  // (the device stays faulted) when the device cannot be brought back.
  Status Reset();

  // Test-only fault injection: the `n`th kernel launched on the device from now on
  // (1: the next) fails with a device fault instead of running, as one that hit an
  // illegal address would, and the device is faulted (Health) until Reset. Fires
  // once; 0 disarms it. Thread-safe.
  void InjectFaultAtKernel(uint64_t n);
  // Called by the VM before each kernel it launches on the device: OK, or the
  // injected fault when it fires (the kernel must then not run). One atomic load
  // while no fault is armed.
  Status BeforeKernelLaunch();

 protected:
  // The device's own part of Health and Reset: OK, nothing to do (the CPU device has
  // no faults of its own).
  virtual Status DeviceHealth() { return OkStatus(); }
  virtual Status ResetDevice() { return OkStatus(); }

 private:
  std::atomic<uint64_t> fault_countdown_{0};  // launches to the injected fault; 0: none armed
  std::mutex fault_mu_;
  Status injected_fault_;  // guarded by fault_mu_
};

}  // namespace remex::vm
