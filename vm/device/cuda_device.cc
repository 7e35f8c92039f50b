#include "vm/device/cuda_device.h"

#include <string>
#include <string_view>

#if REMEX_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "kernels/cuda/cuda_faults.h"
#endif

namespace remex::vm {

#if REMEX_HAVE_CUDA
namespace {

// The function name of a call expression: "cudaMemcpyAsync(dst, ...)" -> "cudaMemcpyAsync".
std::string_view CallName(std::string_view call) { return call.substr(0, call.find('(')); }

// A device fault as a Status: ABORTED "<who>: device fault: <cudaErrorName>: <message>".
Status CudaDeviceFault(std::string_view who, cudaError_t error) {
  return Aborted(std::string(who) + ": device fault: " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

// A failed CUDA call as a Status: "<who>: <call> failed: <cudaErrorName>: <message>",
// ABORTED with "device fault" for an error that poisons the context. The runtime's
// per-thread last error is cleared, so that a later launch check does not see this one
// again.
Status CudaCallError(std::string_view who, std::string_view call, cudaError_t error) {
  (void)cudaGetLastError();
  std::string message = std::string(who) + ": " + std::string(CallName(call)) + " failed: " +
                        cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
  if (kernels::cuda::IsCudaDeviceFault(error)) return Aborted(std::move(message) + " (device fault)");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(std::move(message));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return Unavailable(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

#define REMEX_CUDA_RETURN_IF_ERROR(who, call)                                    \
  do {                                                                           \
    cudaError_t remex_cuda_error_ = (call);                                      \
    if (remex_cuda_error_ != cudaSuccess) return CudaCallError(who, #call, remex_cuda_error_); \
  } while (0)

// cudaStreamQuery as Device::Idle: true when the stream's work is done, false while
// some is pending, the error of the work otherwise.
StatusOr<bool> StreamIdle(const std::string& who, cudaStream_t stream) {
  const cudaError_t error = cudaStreamQuery(stream);
  if (error == cudaSuccess) return true;
  if (error == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  return CudaCallError(who, "cudaStreamQuery", error);
}

std::string VersionString(int version) {
  // CUDA encodes versions as 1000 * major + 10 * minor.
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The work of one CUDA stream on one GPU, as a Device: allocation (stream-ordered on
// the stream where the GPU has memory pools), copies, memsets, synchronization and the
// CUDA kernels bound to the stream. The device's own stream (CudaDevice) and a stream
// of its own beside it (CudaStreamDevice, CreateCudaStream) are both one.
class CudaQueue : public Device {
 public:
  std::string name() const override { return name_; }

  StatusOr<void*> Allocate(size_t bytes) override {
    if (bytes > memory_bytes()) {
      return ResourceExhausted(name_ + ": cannot allocate " + std::to_string(bytes) + " bytes; the device has " +
                               std::to_string(memory_bytes()) + " bytes of memory");
    }
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    void* ptr = nullptr;
    const size_t n = bytes == 0 ? 1 : bytes;
    // While recording, a stream-ordered allocation would be a node of the graph (memory
    // the graph owns); the block comes from cudaMalloc instead (permitted by the
    // relaxed capture mode) and is the caller's like any other.
    const bool pool = use_pool() && !capturing_.load(std::memory_order_acquire);
    const cudaError_t error = pool ? cudaMallocAsync(&ptr, n, stream_) : cudaMalloc(&ptr, n);
    if (error != cudaSuccess) {
      Status s = CudaCallError(name_, pool ? "cudaMallocAsync" : "cudaMalloc", error);
      return Status(s.code(), s.message() + " (" + std::to_string(bytes) + " bytes requested)");
    }
    if (use_pool() && !pool) {
      std::lock_guard<std::mutex> lock(plain_mu_);
      plain_blocks_.insert(ptr);
    }
    return ptr;
  }

  void Deallocate(void* ptr, size_t) override {
    if (!ptr || cudaSetDevice(ordinal_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    bool plain = !use_pool();
    if (!plain) {
      std::lock_guard<std::mutex> lock(plain_mu_);
      plain = plain_blocks_.erase(ptr) > 0;
    }
    // Deallocate cannot fail by contract: an error here (a device already in an error
    // state) leaves the block to the driver, which reclaims it with the context.
    if (plain) {
      (void)cudaFree(ptr);
    } else {
      (void)cudaFreeAsync(ptr, stream_);
    }
    (void)cudaGetLastError();
  }

  Status BeginCapture() override {
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    if (capturing_.load(std::memory_order_acquire)) return FailedPrecondition(name_ + ": already recording a graph");
    // Relaxed: cudaMalloc stays permitted (Allocate above), and other threads' CUDA
    // calls do not spoil the recording.
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    {
      std::lock_guard<std::mutex> lock(plain_mu_);
      spoiled_ = OkStatus();
    }
    capturing_.store(true, std::memory_order_release);
    return OkStatus();
  }

  StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() override;

  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return OkStatus();
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return OkStatus();
  }

  Status Memset(void* dst, uint8_t value, size_t bytes) override {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaMemsetAsync(dst, value, bytes, stream_));
    return OkStatus();
  }

  Status Synchronize() override {
    REMEX_RETURN_IF_ERROR(RefuseWhileCapturing("Synchronize"));
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamSynchronize(stream_));
    return OkStatus();
  }

  StatusOr<bool> Idle() override {
    REMEX_RETURN_IF_ERROR(RefuseWhileCapturing("Idle"));
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    return StreamIdle(name_, stream_);
  }

  // The CUDA kernels, their work on this queue's stream (CudaKernelContextFor).
  Status RegisterKernels(kernels::KernelRegistry& registry,
                         const std::shared_ptr<Allocator>& allocator) const override {
    return kernels::RegisterCudaKernels(registry, CudaKernelContextFor(allocator));
  }

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  virtual const CudaDeviceFacts& facts() const = 0;

  Status MakeCurrent() {
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaSetDevice(ordinal_));
    return OkStatus();
  }

  // FAILED_PRECONDITION, which spoils the recording, for `what` (a wait for the device
  // or a transfer with the host) while recording a graph; OK otherwise.
  Status RefuseWhileCapturing(std::string_view what) {
    if (!capturing_.load(std::memory_order_acquire)) return OkStatus();
    Status refused = FailedPrecondition(name_ + ": " + std::string(what) +
                                        " while recording a graph: a graph holds device work only");
    std::lock_guard<std::mutex> lock(plain_mu_);
    if (spoiled_.ok()) spoiled_ = refused;
    return refused;
  }

 protected:
  CudaQueue(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {}

  // Whether allocations are stream-ordered (cudaMallocAsync): the GPU has memory pools.
  virtual bool use_pool() const = 0;

  // A copy of `bytes` in direction `kind` on the stream, returning once it is done (the
  // source may be pinned memory, which cudaMemcpyAsync reads after returning).
  Status DirectTransfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(
        RefuseWhileCapturing(kind == cudaMemcpyHostToDevice ? "a copy to the device" : "a copy to the host"));
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamSynchronize(stream_));
    return OkStatus();
  }

  // The device fault a query of the stream (which does not wait) reports: a sticky
  // error shows in every call once the context is poisoned. cudaSuccess when none.
  cudaError_t StreamFault() const {
    cudaError_t error = cudaSetDevice(ordinal_);
    if (error == cudaSuccess) error = cudaStreamQuery(stream_);
    (void)cudaGetLastError();
    return kernels::cuda::IsCudaDeviceFault(error) ? error : cudaSuccess;
  }

  const int ordinal_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;

  // Recording a graph (BeginCapture .. EndCapture).
  std::atomic<bool> capturing_{false};
  std::mutex plain_mu_;
  Status spoiled_;                 // the first refusal of this recording (guarded by plain_mu_)
  std::set<void*> plain_blocks_;  // cudaMalloc blocks made while recording, on a pool device
};

// An instantiated CUDA Graph of a queue's recorded work.
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(CudaQueue& queue, cudaGraphExec_t exec, size_t nodes) : queue_(queue), exec_(exec), nodes_(nodes) {}
  ~CudaGraph() override {
    (void)cudaSetDevice(queue_.ordinal());
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGetLastError();
  }
  Status Launch() override {
    REMEX_RETURN_IF_ERROR(queue_.MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(queue_.name(), cudaGraphLaunch(exec_, queue_.stream()));
    return OkStatus();
  }
  size_t size() const override { return nodes_; }

 private:
  CudaQueue& queue_;
  cudaGraphExec_t exec_;
  size_t nodes_;
};

StatusOr<std::unique_ptr<DeviceGraph>> CudaQueue::EndCapture() {
  if (!capturing_.load(std::memory_order_acquire)) return FailedPrecondition(name_ + ": not recording a graph");
  REMEX_RETURN_IF_ERROR(MakeCurrent());
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  capturing_.store(false, std::memory_order_release);
  Status spoiled;
  {
    std::lock_guard<std::mutex> lock(plain_mu_);
    spoiled = std::exchange(spoiled_, OkStatus());
  }
  if (ended != cudaSuccess) {
    Status s = CudaCallError(name_, "cudaStreamEndCapture", ended);
    if (!spoiled.ok()) return FailedPrecondition(spoiled.message() + " (" + s.message() + ")");
    if (ended == cudaErrorStreamCaptureInvalidated) return FailedPrecondition(s.message());
    return s;
  }
  std::unique_ptr<CUgraph_st, cudaError_t (*)(cudaGraph_t)> owned(graph, cudaGraphDestroy);
  if (!spoiled.ok()) return FailedPrecondition(spoiled.message());
  size_t nodes = 0;
  REMEX_CUDA_RETURN_IF_ERROR(name_, cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphExec_t exec = nullptr;
  REMEX_CUDA_RETURN_IF_ERROR(name_, cudaGraphInstantiate(&exec, graph, 0));
  return std::unique_ptr<DeviceGraph>(new CudaGraph(*this, exec, nodes));
}

class CudaDevice final : public CudaQueue {
 public:
  static StatusOr<std::unique_ptr<Device>> Create(int ordinal) {
    const std::string name = "cuda:" + std::to_string(ordinal);
    if (ordinal < 0) return InvalidArgument(name + ": a CUDA device ordinal must be >= 0");
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      Status s = CudaCallError(name, "cudaGetDeviceCount", error);
      return Unavailable(s.message() + " (no usable CUDA driver or GPU on this machine)");
    }
    if (count == 0) return Unavailable(name + ": no CUDA GPU is visible to this process");
    if (ordinal >= count) {
      return InvalidArgument(name + ": only " + std::to_string(count) + " CUDA GPU(s) are visible (cuda:0 to cuda:" +
                             std::to_string(count - 1) + ")");
    }
    std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal, name));
    REMEX_RETURN_IF_ERROR(device->Init());
    return std::unique_ptr<Device>(std::move(device));
  }

  ~CudaDevice() override {
    // Errors cannot be reported from here; a device in an error state is released as
    // far as CUDA allows.
    if (cudaSetDevice(ordinal_) != cudaSuccess) return;
    if (stream_) (void)cudaStreamSynchronize(stream_);
    ReleaseStreamAndStaging();
  }

  DeviceCapabilities capabilities() const override {
    DeviceCapabilities caps;
    caps.kernel_kind = kernels::DeviceKind::kCuda;
    caps.streams = true;
    caps.fault_recovery = true;
    caps.graphs = true;
    return caps;
  }
  std::string description() const override { return description_; }
  uint64_t memory_bytes() const override { return memory_bytes_; }

  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(RefuseWhileCapturing("a copy to the device"));
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    if (bytes > kCudaStagingThreshold) {
      std::lock_guard<std::mutex> lock(staging_mu_);
      REMEX_ASSIGN_OR_RETURN(bool staged, EnsureStagingLocked());
      if (staged) return StagedCopyToDeviceLocked(dst, src, bytes);
    }
    return DirectTransfer(dst, src, bytes, cudaMemcpyHostToDevice);
  }

  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(RefuseWhileCapturing("a copy to the host"));
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    if (bytes > kCudaStagingThreshold) {
      std::lock_guard<std::mutex> lock(staging_mu_);
      REMEX_ASSIGN_OR_RETURN(bool staged, EnsureStagingLocked());
      if (staged) return StagedCopyToHostLocked(dst, src, bytes);
    }
    return DirectTransfer(dst, src, bytes, cudaMemcpyDeviceToHost);
  }

  StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer() override;
  StatusOr<std::unique_ptr<Device>> CreateStream() override;

  const CudaDeviceFacts& facts() const override { return facts_; }
  bool use_pool() const override { return use_pool_; }

 protected:
  Status DeviceHealth() override {
    {
      std::lock_guard<std::mutex> lock(fault_mu_);
      if (!fault_.ok()) return fault_;
    }
    const cudaError_t error = StreamFault();
    if (error == cudaSuccess) return OkStatus();
    std::lock_guard<std::mutex> lock(fault_mu_);
    fault_ = CudaDeviceFault(name_, error);
    return fault_;
  }

  // Destroys the stream and the staging buffers (which fails quietly on a poisoned
  // context), resets the device's primary context, which frees everything allocated in
  // it, forgets the kernels' per-GPU state of the old context, and makes a new stream.
  Status ResetDevice() override {
    std::lock_guard<std::mutex> staging_lock(staging_mu_);
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    ReleaseStreamAndStaging();
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaDeviceReset());
    {
      std::lock_guard<std::mutex> lock(plain_mu_);  // the reset freed them
      plain_blocks_.clear();
    }
    capturing_.store(false, std::memory_order_release);
    kernels::ForgetCudaDeviceState(ordinal_);
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamCreate(&stream_));
    std::lock_guard<std::mutex> lock(fault_mu_);
    fault_ = OkStatus();
    return OkStatus();
  }

 private:
  // Frees the stream, the staging buffers and their events; errors are dropped.
  void ReleaseStreamAndStaging() {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = nullptr;
    for (cudaEvent_t& event : staging_done_) {
      if (event) (void)cudaEventDestroy(event);
      event = nullptr;
    }
    if (staging_) (void)cudaFreeHost(staging_);
    staging_ = nullptr;
    staging_failed_ = false;
    staging_used_[0] = staging_used_[1] = false;
    (void)cudaGetLastError();
  }

  CudaDevice(int ordinal, std::string name) : CudaQueue(ordinal, std::move(name)) {}

  Status Init() {
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof(prop));
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaGetDeviceProperties(&prop, ordinal_));
    int driver = 0;
    int runtime = 0;
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaDriverGetVersion(&driver));
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaRuntimeGetVersion(&runtime));
    int pools = 0;
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal_));
    use_pool_ = pools != 0;
    // A blocking stream: work a kernel queues on the legacy default stream is still
    // ordered with the device's own.
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamCreate(&stream_));
    memory_bytes_ = prop.totalGlobalMem;
    char memory[32];
    std::snprintf(memory, sizeof(memory), "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
    facts_.name = prop.name;
    facts_.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    facts_.runtime_version = VersionString(runtime);
    facts_.driver_version = VersionString(driver);
    char bus_id[32];
    std::snprintf(bus_id, sizeof(bus_id), "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                  static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
    facts_.pci_bus_id = bus_id;
    description_ = std::string(prop.name) + ", compute capability " + std::to_string(prop.major) + "." +
                   std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " + memory +
                   ", driver " + VersionString(driver) + ", runtime " + VersionString(runtime);
    return OkStatus();
  }

  // Allocates the two pinned staging buffers on first use. false when pinned memory
  // cannot be had: transfers then go directly, which is slower but correct.
  StatusOr<bool> EnsureStagingLocked() {
    if (staging_) return true;
    if (staging_failed_) return false;
    void* p = nullptr;
    if (cudaHostAlloc(&p, 2 * kCudaStagingChunk, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();
      staging_failed_ = true;
      return false;
    }
    for (cudaEvent_t& event : staging_done_) {
      cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      if (error != cudaSuccess) {
        Status s = CudaCallError(name_, "cudaEventCreateWithFlags", error);
        for (cudaEvent_t& e : staging_done_) {
          if (e) (void)cudaEventDestroy(e);
          e = nullptr;
        }
        (void)cudaFreeHost(p);
        return s;
      }
    }
    staging_ = static_cast<uint8_t*>(p);
    staging_used_[0] = staging_used_[1] = false;
    return true;
  }

  // Host -> pinned chunk -> device, alternating between the two buffers: the DMA of
  // one chunk runs while the host fills the other. Returns when every source byte is
  // in a staging buffer; the last DMAs may still be running (the buffers' events
  // guard their reuse).
  Status StagedCopyToDeviceLocked(void* dst, const void* src, size_t bytes) {
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t done = 0, k = 0; done < bytes; done += kCudaStagingChunk, k ^= 1) {
      const size_t n = std::min(kCudaStagingChunk, bytes - done);
      uint8_t* buffer = staging_ + k * kCudaStagingChunk;
      if (staging_used_[k]) REMEX_CUDA_RETURN_IF_ERROR(name_, cudaEventSynchronize(staging_done_[k]));
      std::memcpy(buffer, in + done, n);
      REMEX_CUDA_RETURN_IF_ERROR(name_, cudaMemcpyAsync(out + done, buffer, n, cudaMemcpyHostToDevice, stream_));
      REMEX_CUDA_RETURN_IF_ERROR(name_, cudaEventRecord(staging_done_[k], stream_));
      staging_used_[k] = true;
    }
    return OkStatus();
  }

  // Device -> pinned chunk -> host: chunk i+1 is in flight while the host copies out
  // chunk i. Returns when every byte is in `dst`.
  Status StagedCopyToHostLocked(void* dst, const void* src, size_t bytes) {
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    const size_t chunks = (bytes + kCudaStagingChunk - 1) / kCudaStagingChunk;
    auto issue = [&](size_t i) -> Status {
      const size_t k = i & 1;
      const size_t offset = i * kCudaStagingChunk;
      const size_t n = std::min(kCudaStagingChunk, bytes - offset);
      REMEX_CUDA_RETURN_IF_ERROR(
          name_, cudaMemcpyAsync(staging_ + k * kCudaStagingChunk, in + offset, n, cudaMemcpyDeviceToHost, stream_));
      REMEX_CUDA_RETURN_IF_ERROR(name_, cudaEventRecord(staging_done_[k], stream_));
      staging_used_[k] = true;
      return OkStatus();
    };
    REMEX_RETURN_IF_ERROR(issue(0));
    for (size_t i = 0; i < chunks; ++i) {
      // Buffer (i+1)&1 held chunk i-1, which the host has already copied out.
      if (i + 1 < chunks) REMEX_RETURN_IF_ERROR(issue(i + 1));
      const size_t k = i & 1;
      const size_t offset = i * kCudaStagingChunk;
      REMEX_CUDA_RETURN_IF_ERROR(name_, cudaEventSynchronize(staging_done_[k]));
      std::memcpy(out + offset, staging_ + k * kCudaStagingChunk, std::min(kCudaStagingChunk, bytes - offset));
    }
    return OkStatus();
  }

  std::string description_;
  CudaDeviceFacts facts_;
  uint64_t memory_bytes_ = 0;
  bool use_pool_ = false;

  std::mutex staging_mu_;
  uint8_t* staging_ = nullptr;  // 2 * kCudaStagingChunk pinned bytes
  bool staging_failed_ = false;
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};  // recorded after each buffer's last DMA
  bool staging_used_[2] = {false, false};

  std::mutex fault_mu_;
  Status fault_;  // the sticky error seen by DeviceHealth, until ResetDevice
};

// A stream of its own on a CudaDevice's GPU (CreateCudaStream).
class CudaStreamDevice final : public CudaQueue {
 public:
  CudaStreamDevice(CudaDevice& parent, std::string name)
      : CudaQueue(parent.ordinal(), std::move(name)), parent_(parent) {}

  ~CudaStreamDevice() override {
    if (!stream_ || cudaSetDevice(ordinal_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  Status Init() {
    REMEX_RETURN_IF_ERROR(MakeCurrent());
    // Blocking, as the device's own: ordered with work on the legacy default stream,
    // concurrent with every other stream.
    REMEX_CUDA_RETURN_IF_ERROR(name_, cudaStreamCreate(&stream_));
    return OkStatus();
  }

  // The device's kernels and graphs; no streams of its own, and no reset (its
  // device's is).
  DeviceCapabilities capabilities() const override {
    DeviceCapabilities caps;
    caps.kernel_kind = kernels::DeviceKind::kCuda;
    caps.graphs = true;
    return caps;
  }
  std::string description() const override { return parent_.description(); }
  uint64_t memory_bytes() const override { return parent_.memory_bytes(); }
  const Device& memory_space() const override { return parent_; }

  // Direct transfers (no staging buffers: those are the device's own stream's).
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    return DirectTransfer(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return DirectTransfer(dst, src, bytes, cudaMemcpyDeviceToHost);
  }

  const CudaDeviceFacts& facts() const override { return parent_.facts(); }
  // Stream-ordered on this stream where the GPU has pools, as the device's own.
  bool use_pool() const override { return parent_.use_pool(); }

 protected:
  // A sticky error poisons the whole context: the device's own Health sees it, and so
  // does this stream's query.
  Status DeviceHealth() override {
    REMEX_RETURN_IF_ERROR(parent_.Health());
    const cudaError_t error = StreamFault();
    if (error == cudaSuccess) return OkStatus();
    return CudaDeviceFault(name_, error);
  }
  Status ResetDevice() override {
    return FailedPrecondition(name_ + ": a stream is not reset; reset " + parent_.name() + " once its streams are gone");
  }

 private:
  CudaDevice& parent_;
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

// CUDA events recorded on the device's stream around the timed work
// (cudaEventElapsedTime: milliseconds, about 0.5 us resolution).
class CudaTimer final : public DeviceTimer {
 public:
  explicit CudaTimer(CudaDevice& device) : device_(device) {}
  ~CudaTimer() override {
    if (start_) (void)cudaEventDestroy(start_);
    if (stop_) (void)cudaEventDestroy(stop_);
  }
  Status Init() {
    REMEX_RETURN_IF_ERROR(device_.MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventCreate(&start_));
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventCreate(&stop_));
    return OkStatus();
  }
  Status Start() override {
    REMEX_RETURN_IF_ERROR(device_.MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventRecord(start_, device_.stream()));
    return OkStatus();
  }
  Status Stop() override {
    REMEX_RETURN_IF_ERROR(device_.MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventRecord(stop_, device_.stream()));
    return OkStatus();
  }
  StatusOr<double> ElapsedSeconds() override {
    REMEX_RETURN_IF_ERROR(device_.MakeCurrent());
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventSynchronize(stop_));
    float ms = 0;
    REMEX_CUDA_RETURN_IF_ERROR(device_.name(), cudaEventElapsedTime(&ms, start_, stop_));
    return ms / 1000.0;
  }
  std::string name() const override { return "cuda_event"; }

 private:
  CudaDevice& device_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

StatusOr<std::unique_ptr<DeviceTimer>> CudaDevice::CreateTimer() {
  auto timer = std::make_unique<CudaTimer>(*this);
  REMEX_RETURN_IF_ERROR(timer->Init());
  return std::unique_ptr<DeviceTimer>(std::move(timer));
}

StatusOr<std::unique_ptr<Device>> CudaDevice::CreateStream() { return CreateCudaStream(*this); }

StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) { return CudaDevice::Create(ordinal); }

StatusOr<std::unique_ptr<Device>> CreateCudaStream(Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (!cuda) return InvalidArgument(device.name() + ": CUDA streams are made on a CUDA device");
  static std::atomic<uint64_t> next_stream{1};
  auto stream = std::make_unique<CudaStreamDevice>(
      *cuda, cuda->name() + " stream " + std::to_string(next_stream.fetch_add(1, std::memory_order_relaxed)));
  REMEX_RETURN_IF_ERROR(stream->Init());
  return std::unique_ptr<Device>(std::move(stream));
}

void* CudaStreamOf(const Device& device) {
  const auto* queue = dynamic_cast<const CudaQueue*>(&device);
  return queue ? static_cast<void*>(queue->stream()) : nullptr;
}

int CudaOrdinalOf(const Device& device) {
  const auto* queue = dynamic_cast<const CudaQueue*>(&device);
  return queue ? queue->ordinal() : -1;
}

std::optional<CudaDeviceFacts> CudaDeviceFactsOf(const Device& device) {
  const auto* queue = dynamic_cast<const CudaQueue*>(&device);
  if (!queue) return std::nullopt;
  return queue->facts();
}

#else  // !REMEX_HAVE_CUDA

int CudaDeviceCount() { return 0; }

StatusOr<std::unique_ptr<Device>> CreateCudaStream(Device& device) {
  return Unimplemented(device.name() + ": Remex was built without CUDA (REMEX_CUDA=OFF or no nvcc)");
}

StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
  return Unimplemented("cuda:" + std::to_string(ordinal) + ": Remex was built without CUDA (REMEX_CUDA=OFF or no nvcc)");
}

void* CudaStreamOf(const Device&) { return nullptr; }

int CudaOrdinalOf(const Device&) { return -1; }

std::optional<CudaDeviceFacts> CudaDeviceFactsOf(const Device&) { return std::nullopt; }

#endif  // REMEX_HAVE_CUDA

kernels::CudaWorkspaceFn AllocatorWorkspace(const std::shared_ptr<Allocator>& allocator) {
  return [weak = std::weak_ptr<Allocator>(allocator)](size_t bytes) -> StatusOr<std::shared_ptr<void>> {
    std::shared_ptr<Allocator> owner = weak.lock();
    if (!owner) return FailedPrecondition("kernel workspace: the device's allocator no longer exists");
    REMEX_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer, owner->Allocate(bytes));
    void* data = buffer->data();
    return std::shared_ptr<void>(std::move(buffer), data);  // Shares the buffer's ownership.
  };
}

kernels::CudaKernelContext CudaKernelContextFor(const std::shared_ptr<Allocator>& allocator) {
  kernels::CudaKernelContext context;
  context.device = CudaOrdinalOf(allocator->device());
  context.stream = CudaStreamOf(allocator->device());
  context.workspace = AllocatorWorkspace(allocator);
  return context;
}

}  // namespace remex::vm
