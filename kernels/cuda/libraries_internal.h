// Private declarations of the library-backed CUDA kernels (host side): the cuDNN
// convolutions (libraries_conv.cc) and the cuBLASLt matrix products
// (libraries_gemm.cc), registered by AddLibraryCudaKernels (libraries.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

#include "base/status.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

Status AddConvCudaKernels(KernelRegistry& registry, CudaKernelContext context);
Status AddGemmCudaKernels(KernelRegistry& registry, CudaKernelContext context);

// Workspace memory of one library call, stream-ordered: allocated with cudaMallocAsync
// on `stream` before the launch and released with cudaFreeAsync on the same stream
// right after it, so that it is reused by the next call in stream order (the
// stream-ordered allocator's pool keeps it) and freed without a synchronization.
class StreamWorkspace {
 public:
  StreamWorkspace(std::string_view op, cudaStream_t stream) : op_(op), stream_(stream) {}
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  ~StreamWorkspace() { (void)Release(); }

  // `bytes` of device memory (nullptr for 0); at most one allocation per workspace.
  StatusOr<void*> Allocate(size_t bytes);
  // Queues the free (done by the destructor too; errors there are dropped).
  Status Release();

 private:
  std::string_view op_;
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace remex::kernels::cuda
