// Precision conversion: `remex compile --dtype float16` runs a float32 model's
// activations and weights in float16.
//
// The graph's interface stays float32: each float32 input is cast to float16 at the
// start and each output that became float16 is cast back at the end, so callers feed
// and read the same tensors as before. Inside, "activations" are the float values that
// depend on a float32 graph input. A node reading an activation (at an input that is
// not a shape parameter, i.e. not ShapeDep::kData) is converted: its other float32
// inputs become float16 (constants get a float16 copy, computed values a Cast), its
// float32 outputs become float16 activations, and a Cast to float32 becomes a Cast to
// float16. Everything else keeps its dtype: shape arithmetic on the host (Shape ->
// Cast -> Mul -> Cast -> Resize sizes) and parameters read as data (Resize's scales)
// stay float32, so no size is computed in float16.
//
// Numerics are the kernels': float16 kernels compute in float32 and round once on
// store (reductions and Softmax accumulate in float32; see kernels/float16.h), and
// constants are rounded to nearest even. Graphs with If or Loop regions reading
// activations are refused (UNIMPLEMENTED).
#pragma once

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

struct PrecisionStats {
  int nodes_converted = 0;      // nodes whose float outputs became float16
  int constants_converted = 0;  // float16 copies made of float32 constants
  int casts_inserted = 0;       // at the inputs and outputs, and before converted nodes
};

// Converts `graph` (shapes and dtypes inferred) as described above.
StatusOr<PrecisionStats> ConvertToFloat16(Graph& graph, const kernels::KernelRegistry& registry);

// The reverse, `remex compile --dtype float32` of a float16 model: its float16
// activations (the values that depend on a float16 graph input or on a Cast to float16,
// the start of a model whose interface was kept float32) and the float16
// constants they meet computed in float32, each float16 input cast to float32 at the
// start and each output cast back to float16 at the end, so callers feed and read the
// model's own float16 tensors. Constants are widened exactly, once, at compile time; each
// value is rounded to float16 once, at the outputs, not after every op (as ONNX Runtime's
// CPU provider computes float16 nodes it has no float16 kernel for). For a CPU without
// float16 arithmetic, where every float16 kernel would widen its inputs and round its
// output, and so that the float32 rewrites (BatchNormalization folding, epilogue
// fusion) apply. Same limits (If and Loop regions, sequences) as ConvertToFloat16.
StatusOr<PrecisionStats> ConvertToFloat32(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
