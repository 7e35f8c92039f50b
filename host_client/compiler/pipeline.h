// The single-function pipeline: shape inference -> dead-code elimination -> layout ->
// precision -> epilogue and elementwise fusion -> placement -> codegen -> memory plan.
// Shape-bucket dispatch (dispatch.h) runs it once per bucket; CompileGraph
// (compiler.h) chooses between the two.
#pragma once

#include <string>

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "host_client/compiler/options.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

// Compiles `graph` to an executable with one function, "main". options.dispatch must be
// empty (INVALID_ARGUMENT otherwise). Errors name the node or the option.
StatusOr<vm::ExecutableDef> CompileFunction(Graph graph, const kernels::KernelRegistry& registry,
                                            const CompileOptions& options, CompileStats* stats = nullptr);

// Kernels, instructions, encoded bytes, shape functions and arenas of function
// `index` of `def`; INVALID_ARGUMENT when its code does not encode.
StatusOr<FunctionStats> DescribeFunction(const vm::ExecutableDef& def, size_t index, std::string role);

}  // namespace remex::compiler
