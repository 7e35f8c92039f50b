// StreamWorkspace: the workspace and scratch memory of one CUDA kernel call (host side,
// workspace.cc), used by the cuDNN and cuBLASLt kernels and by every kernel that needs
// device scratch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string_view>

#include "base/status.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

// Workspace memory of one library call. With a provider (CudaKernelContext::workspace,
// the device server's caching allocator) the block is held from Allocate to Release;
// without one it is stream-ordered: allocated with cudaMallocAsync on `stream` before
// the launch and released with cudaFreeAsync on the same stream right after it, so that
// it is reused by the next call in stream order (the stream-ordered allocator's pool
// keeps it) and freed without a synchronization. Either way the memory is released
// while the launch may still be pending: safe because every user of it is queued on
// the same stream (see CudaWorkspaceFn).
class StreamWorkspace {
 public:
  // `provider`: null or empty for cudaMallocAsync; otherwise it must outlive this.
  StreamWorkspace(std::string_view op, cudaStream_t stream, const CudaWorkspaceFn* provider = nullptr)
      : op_(op), stream_(stream), provider_(provider && *provider ? provider : nullptr) {}
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  ~StreamWorkspace() { (void)Release(); }

  // `bytes` of device memory (nullptr for 0); at most one allocation per workspace.
  // INTERNAL when a provider returns a null or not 256-byte-aligned block.
  StatusOr<void*> Allocate(size_t bytes);
  // Gives the memory back (done by the destructor too; errors there are dropped).
  Status Release();

 private:
  std::string_view op_;
  cudaStream_t stream_;
  const CudaWorkspaceFn* provider_;
  void* ptr_ = nullptr;             // cudaMallocAsync's block
  std::shared_ptr<void> held_;      // the provider's block
};

}  // namespace remex::kernels::cuda
