// The CUDA device: one GPU as a vm::Device (kernels::DeviceKind::kCuda), named "cuda:N".
//
// Memory comes from the CUDA runtime (cudaMallocAsync on the device's stream where the
// GPU supports stream-ordered pools, cudaMalloc otherwise). Every copy, memset and
// kernel of the device runs on one CUDA stream per device, in issue order (work meant to
// run beside it goes on streams of its own, CreateCudaStream / Device::CreateStream):
//   - CopyToDevice returns once the source bytes have been read (the caller may reuse
//     them); the transfer itself may still be in flight on the stream.
//   - CopyToHost returns once the bytes are in host memory.
//   - CopyOnDevice and Memset are queued on the stream and return at once.
//   - Synchronize waits for the stream.
// Host <-> device transfers above kCudaStagingThreshold go through two pinned staging
// buffers (kCudaStagingChunk bytes each) so that the DMA of one chunk overlaps the
// host copy of the next; smaller ones are single cudaMemcpyAsync calls.
//
// Errors: every CUDA call is checked where it is made; a failure is a Status naming the
// call and carrying CUDA's own message (cudaGetErrorString). Out of device memory is
// RESOURCE_EXHAUSTED. An error raised by an earlier asynchronous kernel surfaces at the
// next checked call (CUDA reports it there).
//
// Device faults: an error that poisons the context (kernels::cuda::IsCudaDeviceFault:
// an illegal address, a launch failure, a device-side assertion, ...) is ABORTED
// "device fault" wherever it surfaces, and Health() reports it ("cuda:N: device fault:
// <cudaErrorName>: <message>", found by querying the stream) until Reset(), which
// resets the GPU's primary context (cudaDeviceReset: every allocation of the process
// on that GPU is gone), forgets the kernels' per-GPU state (ForgetCudaDeviceState) and
// creates a new stream: kernels must be registered again with the new one
// (Device::RegisterKernels, which uses CudaKernelContextFor). CUDA's documentation asks for a process restart after these
// errors; where the reset does not bring the context back, Reset or the Health check
// after it fails, and the device stays unusable.
//
// Capabilities (DeviceCapabilities): kernel_kind kCuda, streams, fault_recovery; its
// memory is not host-addressable and its work is queued (not inline). A stream of it
// (CreateCudaStream) has the CUDA kernels too, but no streams and no reset of its own.
// The device and its streams share one implementation of a queue on a CUDA stream
// (allocation, copies, memset, synchronization, kernel registration); the device adds
// the staging buffers, the timer and the context reset.
//
// Thread-safety: all methods may be called from any thread; staging buffers are
// guarded by a mutex. Each call makes the device current on the calling thread.
//
// This header is plain C++ (no CUDA headers); without REMEX_HAVE_CUDA the factory
// returns UNIMPLEMENTED and CudaDeviceCount() returns 0.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "kernels/cuda/cuda_kernels.h"
#include "vm/device/allocator.h"

namespace remex::vm {

// Transfers of more bytes than this go through the pinned staging buffers.
inline constexpr size_t kCudaStagingThreshold = size_t{1} << 20;
// Size of each of the two pinned staging buffers.
inline constexpr size_t kCudaStagingChunk = size_t{8} << 20;

// Number of CUDA GPUs visible to this process; 0 without a GPU, without a driver, or
// in a build without CUDA.
int CudaDeviceCount();

// Creates the device for GPU `ordinal` ("cuda:<ordinal>"). INVALID_ARGUMENT for a
// negative ordinal or one past the visible GPUs; UNAVAILABLE (with CUDA's reason) when
// there is no GPU or no usable driver; UNIMPLEMENTED "built without CUDA" in a build
// without REMEX_HAVE_CUDA.
StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal);

// A stream of its own on CUDA device `device`'s GPU, as a Device ("cuda:0 stream 3"): its
// copies, memsets and synchronization go on that stream, and so do the kernels of a
// registry made for it (CudaKernelContextFor an allocator over it), so that work on two
// streams runs concurrently on the GPU. It shares `device`'s memory (memory_space() is
// `device`) with no ordering between the two streams: whoever hands a buffer from one
// stream to the other waits for the first (Synchronize) before, and a caching allocator
// must not pass freed blocks between them (Allocator::CreateForQueue keeps them apart).
// Its own Allocate / Deallocate are stream-ordered on it where the GPU has memory pools
// (cudaMallocAsync; whose pool makes reuse across streams safe). Health reports
// `device`'s faults and its own; Reset is FAILED_PRECONDITION (reset `device`, after
// destroying its streams). Destroying it waits for its work. `device` must outlive it.
// INVALID_ARGUMENT when `device` is not a CUDA device (a stream of a stream included);
// errors of cudaStreamCreate; UNIMPLEMENTED in a build without CUDA.
StatusOr<std::unique_ptr<Device>> CreateCudaStream(Device& device);

// The CUDA stream (a cudaStream_t) on which `device` (a CUDA device or a stream of one)
// queues its work, for kernels that must be ordered with it; nullptr when `device` is
// not a CUDA device.
void* CudaStreamOf(const Device& device);

// The GPU ordinal of `device` (a CUDA device or a stream of one); -1 otherwise.
int CudaOrdinalOf(const Device& device);

// What CUDA says of a CUDA device's GPU, read once when the device was created.
struct CudaDeviceFacts {
  std::string name;                // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
  std::string runtime_version;     // the CUDA runtime linked in ("12.4")
  std::string driver_version;      // the newest CUDA version the driver supports ("12.4")
  std::string pci_bus_id;          // "0000:41:00.0": the GPU for NVML (domain:bus:device.function)
};

// The facts of `device`'s GPU; nullopt when `device` is not a CUDA device.
std::optional<CudaDeviceFacts> CudaDeviceFactsOf(const Device& device);

// A workspace provider for the CUDA kernels (kernels::CudaWorkspaceFn) over `allocator`:
// each block is one of its buffers (whole device blocks: 256-byte aligned on a CUDA
// device), counted in its stats while held and returned to its cache when released.
// Reuse right after release is safe because all the work on `allocator`'s device goes on
// one stream: the CUDA device's own, or, for an allocator of a stream of it
// (Allocator::CreateForQueue over CreateCudaStream), that stream, whose blocks never go
// to another while it lives (see CudaWorkspaceFn). The provider refers to the allocator weakly (kernel
// factories may outlive it): FAILED_PRECONDITION once the allocator is gone; a held
// block keeps it alive. RESOURCE_EXHAUSTED as Allocator::Allocate.
kernels::CudaWorkspaceFn AllocatorWorkspace(const std::shared_ptr<Allocator>& allocator);

// The context of the CUDA kernels running on `allocator`'s device: its ordinal and
// stream, workspaces from `allocator` (AllocatorWorkspace).
kernels::CudaKernelContext CudaKernelContextFor(const std::shared_ptr<Allocator>& allocator);

}  // namespace remex::vm
