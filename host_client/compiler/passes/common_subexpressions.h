// Common-subexpression elimination over the graph IR.
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Removes every top-level node that computes what an earlier top-level node computes:
// the same op and registry entry, the same attributes (floats compared by their bits),
// the same inputs (value ids, absent ones included) and as many outputs. Its outputs'
// readers, inside If and Loop regions too, then read the earlier node's outputs. The
// common case: the DynamicQuantizeLinear that ONNX Runtime's dynamic quantizer writes
// before each of the query, key and value MatMuls of one input, computed once instead
// of three times; and the Shape, Gather and Concat chains exporters repeat.
//
// Like constant folding, the pass takes every op as a function of its inputs and
// attributes. Left alone: nodes with regions (If, Loop), sequence and optional ops
// (Node::values_op), and a node any of whose outputs is a graph output (the output keeps
// its own name). Run after shape inference and dead-code elimination, before the other
// rewrites, so that they see each value once. Returns the number of nodes removed.
int EliminateCommonSubexpressions(Graph& graph);

}  // namespace remex::compiler
