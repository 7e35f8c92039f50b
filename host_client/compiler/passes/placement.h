// Placement: which nodes run on the host.
//
// A node whose outputs are small integer tensors (at most 64 elements, static shape)
// and which reads only constants, host values or shapes (Shape, Size) runs on the
// host: shape arithmetic then costs no device-to-host copy. Inputs an op declares
// ShapeDep::kData are read from host memory; a device value feeding one is copied by
// an explicit, counted CopyToHost (codegen.h).
#pragma once

#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

// Marks the nodes and values that run on the host (the rule above). Returns the
// number of host nodes.
int PlaceOnHost(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
