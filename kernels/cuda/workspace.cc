// StreamWorkspace (workspace.h): the workspace and scratch memory of one CUDA kernel call.

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/workspace.h"

namespace remex::kernels::cuda {

StatusOr<void*> StreamWorkspace::Allocate(size_t bytes) {
  if (ptr_ || held_) return Internal(std::string(op_) + " on cuda: workspace allocated twice");
  if (bytes == 0) return nullptr;
  if (!provider_) {
    REMEX_RETURN_IF_ERROR(CudaCheck(op_, "cudaMallocAsync", cudaMallocAsync(&ptr_, bytes, stream_)));
    return ptr_;
  }
  StatusOr<std::shared_ptr<void>> block = (*provider_)(bytes);
  if (!block.ok()) {
    return block.status().WithContext(std::string(op_) + " on cuda: workspace of " + std::to_string(bytes) + " bytes");
  }
  if (!*block || reinterpret_cast<uintptr_t>(block->get()) % 256 != 0) {
    return Internal(std::string(op_) + " on cuda: the workspace provider returned a null or misaligned block");
  }
  held_ = std::move(*block);
  return held_.get();
}

Status StreamWorkspace::Release() {
  held_.reset();
  if (!ptr_) return OkStatus();
  void* p = ptr_;
  ptr_ = nullptr;
  return CudaCheck(op_, "cudaFreeAsync", cudaFreeAsync(p, stream_));
}

}  // namespace remex::kernels::cuda
