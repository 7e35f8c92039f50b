// The emulated CUDA runtime (runtime.h): device memory, streams, events, errors.
#include "kernels/cuda/emulation/runtime.h"

#include "kernels/cuda/emulation/capture.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace remex::cuda_emulation {
namespace {

// The emulated device's memory (what cudaGetDeviceProperties reports) and the part of
// it its context holds, which no allocation can have: as on a GPU, asking for all of
// totalGlobalMem fails.
constexpr size_t kDeviceMemoryBytes = size_t{4} << 30;
constexpr size_t kContextBytes = size_t{256} << 20;
// Allocations up to this size start filled with a garbage pattern; larger ones stay
// as the host gives them (zero pages, touched only where used).
constexpr size_t kMaxFilledBytes = size_t{1} << 30;
constexpr size_t kAlignment = 256;  // cudaMalloc's guaranteed alignment.

struct Allocation {
  size_t bytes;
  MemoryKind kind;
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocations;  // By start address.
  size_t device_bytes = 0;
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
};

State& GlobalState() {
  static State* state = new State();  // Never destroyed: outlives static destructors.
  return *state;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t Ok() { return cudaSuccess; }

// The allocation containing `p` (its end counts as inside, for one-past-the-end
// pointers of empty ranges), or allocations.end(). Caller holds mu.
std::map<uintptr_t, Allocation>::const_iterator Find(const State& s, const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(a);
  if (it == s.allocations.begin()) return s.allocations.end();
  --it;
  if (a <= it->first + it->second.bytes) return it;
  return s.allocations.end();
}

}  // namespace

cudaError_t Fail(cudaError_t error, const char* call, const char* detail) {
  t_last_error = error;
  if (detail && *detail) {
    std::fprintf(stderr, "remex cuda emulation: %s: %s: %s\n", call, cudaGetErrorName(error), detail);
  }
  return error;
}

MemoryKind KindOf(const void* ptr) {
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = Find(s, ptr);
  return it == s.allocations.end() ? MemoryKind::kUnknown : it->second.kind;
}

bool IsDeviceRange(const void* ptr, size_t bytes) {
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = Find(s, ptr);
  if (it == s.allocations.end()) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  return bytes <= it->first + it->second.bytes - a;
}

bool IsValidStream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.streams.count(stream) > 0;
}

namespace {

cudaError_t Allocate(void** ptr, size_t bytes, MemoryKind kind, const char* call) {
  if (!ptr) return Fail(cudaErrorInvalidValue, call, "null result pointer");
  *ptr = nullptr;
  if (bytes == 0) return Ok();
  State& s = GlobalState();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (kind == MemoryKind::kDevice && bytes > kDeviceMemoryBytes - kContextBytes - s.device_bytes) {
      char detail[160];
      std::snprintf(detail, sizeof(detail), "%zu bytes asked, %zu of the emulated device's %zu free", bytes,
                    kDeviceMemoryBytes - kContextBytes - s.device_bytes, kDeviceMemoryBytes);
      return Fail(cudaErrorMemoryAllocation, call, detail);
    }
  }
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes) != 0)
    return Fail(cudaErrorMemoryAllocation, call, "host allocation failed");
  // Device memory starts with garbage, as on a GPU: a kernel reading what nothing wrote
  // reads this pattern, not zeros.
  if (bytes <= kMaxFilledBytes) std::memset(p, 0xa5, bytes);
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, kind};
  if (kind == MemoryKind::kDevice) s.device_bytes += bytes;
  *ptr = p;
  return Ok();
}

cudaError_t Release(void* ptr, MemoryKind kind, const char* call) {
  if (!ptr) return Ok();
  State& s = GlobalState();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.allocations.end() || it->second.kind != kind) {
      char detail[160];
      std::snprintf(detail, sizeof(detail), "%p is not the start of a live %s allocation", ptr,
                    kind == MemoryKind::kDevice ? "device" : "pinned host");
      return Fail(cudaErrorInvalidValue, call, detail);
    }
    if (kind == MemoryKind::kDevice) s.device_bytes -= it->second.bytes;
    s.allocations.erase(it);
  }
  std::free(ptr);
  return Ok();
}

cudaError_t Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                 const char* call) {
  if (!IsValidStream(stream))
    return Fail(cudaErrorInvalidResourceHandle, call, "stream was destroyed or never created");
  if (bytes == 0) return Ok();
  if (!dst || !src) return Fail(cudaErrorInvalidValue, call, "null pointer");
  const bool dst_device = KindOf(dst) == MemoryKind::kDevice;
  const bool src_device = KindOf(src) == MemoryKind::kDevice;
  if (kind == cudaMemcpyDefault) {
    kind = src_device ? (dst_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                      : (dst_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return Fail(cudaErrorInvalidMemcpyDirection, call, "unknown cudaMemcpyKind");
  }
  char detail[200];
  if (want_dst_device != dst_device || want_src_device != src_device) {
    std::snprintf(
        detail, sizeof(detail), "kind %d but the destination %p is %s memory and the source %p is %s memory",
        static_cast<int>(kind), dst, dst_device ? "device" : "host", src, src_device ? "device" : "host");
    return Fail(cudaErrorInvalidValue, call, detail);
  }
  if ((want_dst_device && !IsDeviceRange(dst, bytes)) || (want_src_device && !IsDeviceRange(src, bytes))) {
    std::snprintf(detail, sizeof(detail), "%zu bytes run past the end of a device allocation", bytes);
    return Fail(cudaErrorInvalidValue, call, detail);
  }
  if (AnyCapture()) {
    if (stream == nullptr) {  // cudaMemcpy: synchronous, on the legacy stream
      if (cudaError_t e = RefuseDuringUnsafeCapture(call, cudaErrorStreamCaptureImplicit)) return e;
    } else if ((!want_dst_device && KindOf(dst) != MemoryKind::kPinned) ||
               (!want_src_device && KindOf(src) != MemoryKind::kPinned)) {
      if (cudaError_t e = RefuseOnCapturingStream(stream, call, cudaErrorStreamCaptureUnsupported,
                                                  "a copy with pageable host memory cannot be captured")) {
        return e;
      }
    }
    std::function<cudaError_t()> work = [dst, src, bytes] {
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    };
    cudaError_t result;
    if (RecordIfCapturing(stream, call, work, &result)) return result;
  }
  std::memmove(dst, src, bytes);
  return Ok();
}

cudaError_t Set(void* dst, int value, size_t bytes, cudaStream_t stream, const char* call) {
  if (!IsValidStream(stream))
    return Fail(cudaErrorInvalidResourceHandle, call, "stream was destroyed or never created");
  if (bytes == 0) return Ok();
  if (KindOf(dst) != MemoryKind::kDevice || !IsDeviceRange(dst, bytes)) {
    char detail[120];
    std::snprintf(detail, sizeof(detail), "[%p, +%zu bytes) is not inside one device allocation", dst, bytes);
    return Fail(cudaErrorInvalidValue, call, detail);
  }
  if (AnyCapture()) {
    if (stream == nullptr) {  // cudaMemset: synchronous, on the legacy stream
      if (cudaError_t e = RefuseDuringUnsafeCapture(call, cudaErrorStreamCaptureImplicit)) return e;
    }
    std::function<cudaError_t()> work = [dst, value, bytes] {
      std::memset(dst, value, bytes);
      return cudaSuccess;
    };
    cudaError_t result;
    if (RecordIfCapturing(stream, call, work, &result)) return result;
  }
  std::memset(dst, value, bytes);
  return Ok();
}

struct ErrorText {
  cudaError_t error;
  const char* name;
  const char* text;
};
// Names and messages as the CUDA runtime gives them.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {cudaErrorECCUncorrectable, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorHardwareStackError, "cudaErrorHardwareStackError", "hardware stack error"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorInvalidAddressSpace, "cudaErrorInvalidAddressSpace",
     "operation not supported on global/shared address space"},
    {cudaErrorInvalidPc, "cudaErrorInvalidPc", "invalid program counter"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorSystemDriverMismatch, "cudaErrorSystemDriverMismatch",
     "system has unsupported display driver / cuda driver combination"},
    {cudaErrorCompatNotSupportedOnDevice, "cudaErrorCompatNotSupportedOnDevice",
     "forward compatibility was attempted on non supported HW"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const ErrorText* FindError(cudaError_t error) {
  for (const ErrorText& e : kErrors) {
    if (e.error == error) return &e;
  }
  return nullptr;
}

}  // namespace
}  // namespace remex::cuda_emulation

using namespace remex::cuda_emulation;  // NOLINT: the runtime's C-style API is global.

struct CUstream_st {
  unsigned flags;
};
struct CUevent_st {
  unsigned flags;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return t_last_error; }
const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* e = FindError(error);
  return e ? e->name : "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* e = FindError(error);
  return e ? e->text : "unrecognized error code";
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return Fail(cudaErrorInvalidValue, "cudaGetDeviceCount", "null count");
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return Fail(cudaErrorInvalidDevice, "cudaSetDevice", "the emulation has device 0 only");
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (!device) return Fail(cudaErrorInvalidValue, "cudaGetDevice", "null device");
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return Fail(cudaErrorInvalidValue, "cudaGetDeviceProperties", "null prop");
  if (device != 0)
    return Fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties", "the emulation has device 0 only");
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "Remex CUDA emulation (host)");
  prop->totalGlobalMem = kDeviceMemoryBytes;
  prop->sharedMemPerBlock = 48 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return Fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute", "null value");
  if (device != 0)
    return Fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute", "the emulation has device 0 only");
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = 48 << 10;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 1;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMemoryPoolsSupported:
      *value = 1;
      return cudaSuccess;
  }
  return Fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute", "attribute not emulated");
}
cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return Fail(cudaErrorInvalidValue, "cudaDriverGetVersion", "null version");
  *version = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return Fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion", "null version");
  *version = 13000;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  return RefuseDuringUnsafeCapture("cudaDeviceSynchronize", cudaErrorStreamCaptureUnsupported);
}
cudaError_t cudaDeviceReset() {
  ForgetGraphs();
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [address, allocation] : s.allocations) std::free(reinterpret_cast<void*>(address));
  s.allocations.clear();
  s.device_bytes = 0;
  for (cudaStream_t stream : s.streams) delete stream;
  s.streams.clear();
  for (cudaEvent_t event : s.events) delete event;
  s.events.clear();
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t e = RefuseDuringUnsafeCapture("cudaMalloc", cudaErrorStreamCaptureUnsupported)) return e;
  return Allocate(ptr, bytes, MemoryKind::kDevice, "cudaMalloc");
}
cudaError_t cudaFree(void* ptr) {
  if (cudaError_t e = RefuseDuringUnsafeCapture("cudaFree", cudaErrorStreamCaptureUnsupported)) return e;
  return Release(ptr, MemoryKind::kDevice, "cudaFree");
}
// CUDA records these on a capturing stream as graph memory nodes, which the emulation
// does not have: it refuses them there.
constexpr const char* kNoMemoryNodes = "graph memory nodes (stream-ordered allocation in a capture) are not emulated";
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync", "stream was destroyed or never created");
  }
  if (cudaError_t e = RefuseOnCapturingStream(stream, "cudaMallocAsync", cudaErrorNotSupported, kNoMemoryNodes)) {
    return e;
  }
  return Allocate(ptr, bytes, MemoryKind::kDevice, "cudaMallocAsync");
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync", "stream was destroyed or never created");
  }
  if (cudaError_t e = RefuseOnCapturingStream(stream, "cudaFreeAsync", cudaErrorNotSupported, kNoMemoryNodes)) {
    return e;
  }
  return Release(ptr, MemoryKind::kDevice, "cudaFreeAsync");
}
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (cudaError_t e = RefuseDuringUnsafeCapture("cudaHostAlloc", cudaErrorStreamCaptureUnsupported)) return e;
  return Allocate(ptr, bytes, MemoryKind::kPinned, "cudaHostAlloc");
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  if (cudaError_t e = RefuseDuringUnsafeCapture("cudaMallocHost", cudaErrorStreamCaptureUnsupported)) return e;
  return Allocate(ptr, bytes, MemoryKind::kPinned, "cudaMallocHost");
}
cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = RefuseDuringUnsafeCapture("cudaFreeHost", cudaErrorStreamCaptureUnsupported)) return e;
  return Release(ptr, MemoryKind::kPinned, "cudaFreeHost");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return Copy(dst, src, bytes, kind, nullptr, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return Copy(dst, src, bytes, kind, stream, "cudaMemcpyAsync");
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  return Set(dst, value, bytes, nullptr, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return Set(dst, value, bytes, stream, "cudaMemsetAsync");
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream) return Fail(cudaErrorInvalidValue, "cudaStreamCreate", "null stream");
  *stream = new CUstream_st{flags};
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.streams.insert(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& s = GlobalState();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!stream || s.streams.erase(stream) == 0) {
      return Fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy",
                  "stream was destroyed or never created");
    }
  }
  ForgetCapture(stream);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize",
                "stream was destroyed or never created");
  }
  return RefuseOnCapturingStream(stream, "cudaStreamSynchronize", cudaErrorStreamCaptureUnsupported,
                                 "a capturing stream cannot be synchronized");
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery", "stream was destroyed or never created");
  }
  return RefuseOnCapturingStream(stream, "cudaStreamQuery", cudaErrorStreamCaptureUnsupported,
                                 "a capturing stream cannot be queried");
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent",
                "stream was destroyed or never created");
  }
  return cudaEventQuery(event) == cudaErrorInvalidResourceHandle ? cudaErrorInvalidResourceHandle
                                                                 : cudaSuccess;
}

namespace {
bool IsValidEvent(cudaEvent_t event) {
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  return event && s.events.count(event) > 0;
}
}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event) return Fail(cudaErrorInvalidValue, "cudaEventCreate", "null event");
  *event = new CUevent_st{flags, false, {}};
  State& s = GlobalState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.events.insert(*event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State& s = GlobalState();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!event || s.events.erase(event) == 0) {
      return Fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy", "event was destroyed or never created");
    }
  }
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!IsValidEvent(event)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventRecord", "event was destroyed or never created");
  }
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventRecord", "stream was destroyed or never created");
  }
  // In a capture, an event node: the event is recorded at each launch of the graph.
  std::function<cudaError_t()> work = [event] {
    event->recorded = true;
    event->at = std::chrono::steady_clock::now();
    return cudaSuccess;
  };
  cudaError_t result;
  if (RecordIfCapturing(stream, "cudaEventRecord", work, &result)) return result;
  return work();
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!IsValidEvent(event)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize",
                "event was destroyed or never created");
  }
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return Fail(cudaErrorInvalidValue, "cudaEventElapsedTime", "null ms");
  if (!IsValidEvent(start) || !IsValidEvent(end)) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                "event was destroyed or never created");
  }
  if ((start->flags | end->flags) & cudaEventDisableTiming) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                "an event was created with cudaEventDisableTiming");
  }
  if (!start->recorded || !end->recorded) {
    return Fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime", "an event was never recorded");
  }
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  if (fn) *fn = nullptr;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
