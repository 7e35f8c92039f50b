// CUDA kernels of the operator library (kernels::DeviceKind::kCuda).
//
// Kernels read and write device memory through TensorRef::data (device pointers of
// the GPU `CudaKernelContext::device`) and queue their work on
// `CudaKernelContext::stream`, so that it is ordered with the device's copies; they
// return without waiting for the GPU. Errors of a launch are returned by Compute;
// errors of the kernel's execution surface at the device's next synchronizing call.
//
// Op groups: kernels/cuda/<group>.cc, each listed with its ops in kernels/cuda/README.md.
// Float ops take float32 and float16 (float16 is computed in float32 and rounded to
// nearest even on store, as the CPU kernels do). Other dtypes are UNIMPLEMENTED naming
// the op and dtype.
//
// This header is plain C++ (no CUDA headers).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "base/status.h"
#include "kernels/kernels.h"

namespace remex::kernels {

// Device memory for a kernel's scratch (cuDNN and cuBLASLt workspaces, padded copies):
// a held block of at least `bytes` bytes of the context's GPU, aligned to at least 256
// bytes (cudaMalloc's alignment, which cuBLASLt and cuDNN assume), or an error
// (RESOURCE_EXHAUSTED when out of memory). The block is given back when the last
// shared_ptr to it goes away; `bytes` may be 0.
//
// A kernel holds its blocks only while it queues work: it releases them before Compute
// returns, while that work may still be pending on the GPU. The provider may then hand
// the same memory to the next request at once. That is safe because every kernel,
// copy and memset of the device is queued on the one stream of the context, so any
// later user of the block runs after the work that used it (stream order: the rule of
// PyTorch's caching allocator for memory used on one stream). A provider serving
// several streams would have to record events instead.
using CudaWorkspaceFn = std::function<StatusOr<std::shared_ptr<void>>(size_t bytes)>;

struct CudaKernelContext {
  int device = 0;          // CUDA ordinal the kernels run on.
  void* stream = nullptr;  // cudaStream_t; nullptr: the legacy default stream.
  // Where the library-backed kernels (cuDNN Conv / FusedConv / ConvTranspose, cuBLASLt
  // MatMul / Gemm) take their workspaces; the device server passes its caching
  // allocator here, so that the memory shows in its statistics. Empty: they use
  // cudaMallocAsync / cudaFreeAsync on `stream` (the CUDA runtime's stream-ordered
  // pool).
  CudaWorkspaceFn workspace = nullptr;
};

// Registers the CUDA kernels of every op listed above; the ops' OpDefs must already be
// in `registry` (FAILED_PRECONDITION otherwise), ALREADY_EXISTS when registered twice,
// FAILED_PRECONDITION naming them when the kernels differ from the op table's kCpuCuda
// rows (kernels/ops/ops.def). UNIMPLEMENTED "built without CUDA" in a build without REMEX_HAVE_CUDA.
Status RegisterCudaKernels(KernelRegistry& registry, CudaKernelContext context = {});

// After GPU `device`'s context was reset (cudaDeviceReset, see vm::Device::Reset): drops
// what the CUDA kernels keep per GPU beyond their own instances (the FusedElementwise
// modules loaded on it), which belonged to the old context. Kernel instances made
// before the reset hold the old stream and library handles: destroy them before it,
// and register new ones. Not thread-safe with kernels running on `device`. Does
// nothing in a build without CUDA.
void ForgetCudaDeviceState(int device);

}  // namespace remex::kernels
