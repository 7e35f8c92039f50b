// Code generation: the graph IR lowered to one VM function ("main") of an executable.
//
// Each node becomes an InvokeKernel of a kernel-table entry (and an InvokeShapeFunc
// where its output shapes are known only at run time); host values live in host
// registers, and a device value read as data by a host node or a ShapeDep::kData input
// is copied by an explicit CopyToHost.
//
// Control flow. If and Loop regions are emitted inline in the function: branches
// behind If/Goto, the loop body between a LoopCheck and a back-edge Goto, with
// loop-carried values moved in parallel at the end of each iteration and scan
// outputs gathered into tensor lists and stacked.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

struct CodegenResult {
  vm::ExecutableDef executable;  // one function, "main"
  // Per instruction of "main": the most bytes the tensor it allocates can take, -1
  // when unbounded or when it allocates none; the memory planner's input
  // (bytecode/memory_plan.h).
  std::vector<int64_t> bound_bytes;
  int copies_to_host = 0;  // explicit CopyToHost instructions
};

// Lowers the graph (shapes inferred, passes run) to an executable. UNIMPLEMENTED when
// an input's rank is unknown; errors name the node.
StatusOr<CodegenResult> GenerateCode(const Graph& graph, const kernels::KernelRegistry& registry);

// GenerateCode's executable only.
StatusOr<vm::ExecutableDef> Codegen(const Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
