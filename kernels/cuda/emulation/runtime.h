// The CUDA runtime API subset that Remex calls, emulated on the host (build option
// REMEX_CUDA_EMULATION). Names, signatures, error codes and messages follow the CUDA
// Runtime API reference (CUDA 12); what the emulation does differently:
//   - One device, "cuda:0", with compute capability 9.0 and 4 GiB of memory, of which
//     256 MiB are held by the context.
//   - Device memory is host memory that the emulation tags: a host pointer where a
//     device pointer belongs (a kernel's pointer parameter, a copy's direction) is
//     refused with cudaErrorInvalidValue / cudaErrorIllegalAddress and reported on
//     stderr, and the sanitizers see every device buffer as its own heap block.
//   - Streams run their work when it is queued: every asynchronous call has finished
//     when it returns. Stream order is therefore always kept, and a missing
//     synchronisation is not detected. Events hold the host time they were recorded at.
//   - Stream capture (cudaStreamBeginCapture .. cudaStreamEndCapture) records the
//     stream's work instead of running it: kernel launches with their parameters,
//     asynchronous copies and memsets, and the libraries' calls (Enqueue). A graph
//     instantiated from the capture runs that work again, in order, at every
//     cudaGraphLaunch. The calls CUDA refuses during a capture are refused as CUDA
//     does, and invalidate it: synchronizing or querying the capturing stream, a copy
//     between the device and pageable host memory on it, cudaMalloc or cudaFree or a
//     synchronous copy or memset while a capture of mode global is under way. Unlike
//     CUDA, a stream-ordered allocation or free on a capturing stream (a graph memory
//     node) is refused (cudaErrorNotSupported); captures are of one stream (no event
//     joins other streams into them).
// Include as <cuda_runtime_api.h> (emulation/include shadows the toolkit's headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

// ---- Errors (values as in the CUDA runtime's driver_types.h) ----------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorDevicesUnavailable = 46,
  cudaErrorECCUncorrectable = 214,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorSystemDriverMismatch = 803,
  cudaErrorCompatNotSupportedOnDevice = 804,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorUnknown = 999,
};

// ---- Handles -------------------------------------------------------------------
struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
using cudaGraphNode_t = CUgraphNode_st*;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventBlockingSync = 0x1;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0;

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMemoryPoolsSupported = 115,
};

// The fields of cudaDeviceProp that Remex reads.
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int pciDomainID;  // 0 in the emulation
  int pciBusID;
  int pciDeviceID;
};

enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2,
};
constexpr unsigned long long cudaEnableDefault = 0x0;

// ---- Runtime calls ---------------------------------------------------------------
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDeviceSynchronize();
// Frees every live allocation (device and pinned) and destroys every stream and event,
// as resetting the device's primary context does.
cudaError_t cudaDeviceReset();

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Stream capture and graphs (see the header's comment). A graph's nodes are the
// captured calls in stream order; cudaGraphGetNodes counts them (with a null `nodes`)
// or returns opaque handles. cudaGraphLaunch runs the nodes in order and returns the
// first error of one (the error a kernel of the graph would report).
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);

// No driver API exists under emulation: every symbol is reported not found.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status);

namespace remex::cuda_emulation {

// What a pointer is to the emulated device.
enum class MemoryKind : uint8_t {
  kUnknown,  // Not from the emulated runtime: plain host memory.
  kDevice,   // cudaMalloc / cudaMallocAsync.
  kPinned,   // cudaHostAlloc / cudaMallocHost: host memory the device may also read.
};
// The kind of the allocation holding `ptr` (any byte of it).
MemoryKind KindOf(const void* ptr);
// Whether [ptr, ptr + bytes) lies inside one device (or pinned) allocation.
bool IsDeviceRange(const void* ptr, size_t bytes);
// Sets the calling thread's last error (as a failed call does) and returns `error`;
// `detail` is printed on stderr with the "remex cuda emulation:" prefix.
cudaError_t Fail(cudaError_t error, const char* call, const char* detail);
// Whether `stream` is the default stream or one created and not destroyed.
bool IsValidStream(cudaStream_t stream);

// Queues `work`, device work computed on the host (a library call's reference loop, a
// kernel the emulation runs with the CPU kernel), on `stream`, after the caller checked
// its arguments: runs it now and returns its error, or, while `stream` is capturing,
// records it as a node of the capture (`name` names it) and returns cudaSuccess
// (cudaErrorStreamCaptureInvalidated when the capture was invalidated). A recorded
// node runs at every launch of a graph made from the capture, so `work` must own
// copies of whatever it reads besides device memory (descriptors, scalars).
cudaError_t Enqueue(cudaStream_t stream, const char* name, std::function<cudaError_t()> work);

}  // namespace remex::cuda_emulation
