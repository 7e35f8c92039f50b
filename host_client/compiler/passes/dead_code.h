// Dead-code elimination over the graph IR.
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Removes nodes and constants that no graph output depends on (reads inside If and
// Loop regions count). Returns the number of nodes removed.
int EliminateDeadCode(Graph& graph);

}  // namespace remex::compiler
