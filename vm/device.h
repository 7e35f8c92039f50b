// The device API and the memory manager the VM runs on.
//
// A Device owns a memory space and moves bytes between it and host memory. Even the
// CPU device is treated as a separate memory space by the VM: every transfer goes
// through CopyToDevice / CopyToHost and is counted, so placement is observable and
// testable without a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/kernels.h"

namespace remex::vm {

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

class Device {
 public:
  virtual ~Device() = default;
  virtual kernels::DeviceKind kind() const = 0;
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
  // queue of its own on another device's memory (a CUDA stream, CreateCudaStream), that
  // device. Tensors of one memory space may be used by every device of it, with the
  // ordering their queues give them (see CreateCudaStream).
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

// The host CPU as a device (kernels::DeviceKind::kCpu). `compute_threads`: the team
// size of its oneDNN kernels on the thread PrepareKernelThread is called on, 1 to
// kernels::kMaxCpuComputeThreads; 0 leaves OpenMP's default (OMP_NUM_THREADS, else one
// per CPU this process may run on). The description names the count.
std::unique_ptr<Device> CreateCpuDevice(int compute_threads = 0);

// Host memory, as the VM's second memory space: a process-wide CPU device named
// "host". Tensors the VM keeps on the host (host kernels' values, copies of kData
// inputs) live here, distinct from any device's memory, the CPU device's included.
Device& HostDevice();

struct AllocatorStats {
  uint64_t allocated_bytes = 0;  // held by live buffers (rounded to size classes)
  uint64_t reserved_bytes = 0;   // allocated + cached for reuse
  uint64_t peak_allocated_bytes = 0;
  uint64_t device_allocations = 0;  // calls that reached Device::Allocate
  uint64_t live_buffers = 0;
};

class Allocator;

// A block of device memory. Returned to its allocator's cache when the last
// shared_ptr to it goes away.
class Buffer {
 public:
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The bytes it holds of its allocator: size() rounded up to the allocator's size
  // class, as AllocatorStats counts it.
  size_t size_class() const { return size_class_; }
  Device& device() const;
  // The allocator it came from (and goes back to), whose stats count it.
  const Allocator* owner() const { return owner_.get(); }

 private:
  friend class Allocator;
  Buffer(std::shared_ptr<Allocator> owner, void* data, size_t size, size_t size_class)
      : owner_(std::move(owner)), data_(data), size_(size), size_class_(size_class) {}
  std::shared_ptr<Allocator> owner_;
  void* data_;
  size_t size_;
  size_t size_class_;
};

// Caching allocator over one device: blocks are rounded up to size classes (512 B
// steps below 1 MiB, then quarter-powers of two) and freed blocks are kept for reuse,
// up to `max_cached_bytes`: past it the blocks freed longest ago go back to the device
// until the cache fits again, so a working set near the bound keeps most of its
// blocks (each block back on the device costs a fresh allocation, and on the CPU a
// page fault per page of its first touch). Thread-safe.
//
// An allocator made with CreateWithQuota takes its blocks from a parent allocator (its
// cache and the device's capacity) and charges each block's size class to its own
// quota: a session's allocator, so that one session cannot take the memory of all.
// Its stats() count its own blocks only (reserved_bytes = allocated_bytes there).
class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  static std::shared_ptr<Allocator> Create(Device& device, uint64_t max_cached_bytes = 1ull << 30);
  // An allocator drawing on `parent` whose live blocks may total at most `quota_bytes`
  // (size classes). `owner` names it in errors ("session 7"), and `quota_name` what set
  // the quota ("--session-memory-bytes"), when given.
  static std::shared_ptr<Allocator> CreateWithQuota(std::shared_ptr<Allocator> parent, uint64_t quota_bytes,
                                                    std::string owner, std::string quota_name = {});
  // An allocator for the work of one queue, `queue` (a CUDA stream of parent's device,
  // CreateCudaStream; `queue.memory_space()` must be parent's device's, else
  // INVALID_ARGUMENT): its buffers report `queue` as their device, so the VM and the
  // CUDA kernels queue their work on it. Its blocks come from `parent` (charged to
  // parent's quota, counted in its stats) and, once freed, are kept for this
  // allocator's reuse only, never handed to another queue: work of `queue` still pending
  // on a freed block runs before anything queued after on the same queue (stream
  // order, PyTorch's caching allocator rule for one stream), but not before another
  // queue's. They go back to `parent` when the allocator goes away, after waiting for
  // `queue` (which must outlive it). A block new to it is taken once parent's queue has
  // drained (parent's device Synchronize: on a GPU the block may come from the stream-
  // ordered pool on that queue), so take blocks while parent's queue is idle, as the
  // load generator does after its reference call. RESOURCE_EXHAUSTED as parent's
  // Allocate, errors of that Synchronize; Trim keeps the blocks held (they are this
  // queue's until it is gone).
  static StatusOr<std::shared_ptr<Allocator>> CreateForQueue(std::shared_ptr<Allocator> parent, Device& queue);
  ~Allocator();

  // A buffer of at least `bytes` (0 is allowed and yields a 1-byte-class block).
  // RESOURCE_EXHAUSTED when the device is out of memory even after dropping the cache,
  // or when the block would take a quota past its bound (the message names the quota,
  // its bound and what is in use).
  StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes);
  AllocatorStats stats() const;
  // Starts a new high-water mark: peak_allocated_bytes becomes allocated_bytes (the
  // benchmark requests measure a run's peak on the session's allocator with it).
  void ResetPeak();
  // Returns every cached block to the device (the parent's cache, for a quota).
  void Trim();
  Device& device() const { return device_; }
  // The bound of a quota allocator; 0 for a root one.
  uint64_t quota_bytes() const { return quota_bytes_; }

 private:
  friend class Buffer;
  Allocator(Device& device, uint64_t max_cached_bytes)
      : device_(device), max_cached_bytes_(max_cached_bytes) {}
  // A block of `size_class` bytes from the cache or the device, counted in stats_.
  // `from_device` tells which.
  StatusOr<void*> AllocateBlock(size_t size_class, bool* from_device);
  void Release(void* data, size_t size_class);
  void TrimLocked();
  // Returns cached blocks, oldest first, until at most `keep_bytes` stay cached.
  void EvictLocked(uint64_t keep_bytes);

  Device& device_;
  const uint64_t max_cached_bytes_;
  std::shared_ptr<Allocator> parent_;  // quota and queue allocators only
  // Queue allocators (CreateForQueue): parent's buffers held by live buffers of this
  // one (by address) and those freed, kept for reuse (by size class).
  bool queue_ = false;
  std::map<void*, std::shared_ptr<Buffer>> queue_held_;
  std::multimap<size_t, std::shared_ptr<Buffer>> queue_free_;
  uint64_t quota_bytes_ = 0;
  std::string owner_;
  std::string quota_name_;
  mutable std::mutex mu_;
  // Cached blocks in the order they were freed (oldest first), and by size class.
  struct CachedBlock {
    size_t size_class;
    void* data;
  };
  std::list<CachedBlock> lru_;
  std::multimap<size_t, std::list<CachedBlock>::iterator> cache_;
  uint64_t cached_bytes_ = 0;
  AllocatorStats stats_;
};

// A dense row-major tensor in device memory: its own buffer, or a slot of a larger one
// (a function's planned arena) at byte `offset`.
struct Tensor {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::kUndefined;
  Shape shape;
  size_t offset = 0;
  // An executable constant, loaded once by VirtualMachine::Create and never written
  // (see kernels::TensorRef::constant).
  bool constant = false;

  void* data() const { return buffer ? static_cast<std::byte*>(buffer->data()) + offset : nullptr; }
  size_t nbytes() const;
  kernels::TensorRef Ref() const { return {data(), dtype, shape, constant}; }
};
using TensorPtr = std::shared_ptr<Tensor>;

// Allocates a tensor of `dtype` and `shape`; INVALID_ARGUMENT for a negative or
// overflowing shape, RESOURCE_EXHAUSTED when out of memory.
StatusOr<TensorPtr> AllocateTensor(Allocator& allocator, DType dtype, const Shape& shape);

}  // namespace remex::vm
