// Shape-bucket dispatch: the single-function pipeline (pipeline.h) run once per bucket
// of input sizes (buckets.h), the clones linked (bytecode/link.h) behind a dispatcher
// in bytecode.
//
// The executable's "main" is a dispatcher: per bucket, IfDimIn tests of the input
// dims and a TailCall of the clone. A shape outside every bucket goes to
// "main.generic", the unspecialised function, or, with `strict_dispatch`, is refused
// by the VM's bound check (the symbols' bounds become the buckets' span).
#pragma once

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "host_client/compiler/options.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

// The generic function, one clone per bucket of options.dispatch and the dispatcher,
// linked into one executable with shared constants. INVALID_ARGUMENT when a spec names
// no symbolic input dim or leaves no bucket; a clone's error names its bucket.
StatusOr<vm::ExecutableDef> CompileDispatched(const Graph& graph, const kernels::KernelRegistry& registry,
                                              const CompileOptions& options, CompileStats* stats);

}  // namespace remex::compiler
