// Elementwise fusion: replaces chains and small DAGs of elementwise device ops with one
// FusedElementwise node (program format: kernels/ops/fused/fused.h), so that the chain makes one
// pass over memory and its intermediate values are never allocated.
//
// What fuses. Top-level nodes (not inside If/Loop regions, and not If/Loop nodes
// themselves) of the ops whose OpDef names a FusedElementwise opcode (kernels.h
// OpTraits::fused_opcode; today Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs,
// Reciprocal, Erf, HardSwish, Swish, Gelu, HardSigmoid, LeakyRelu, Clip, Add, Sub, Mul, Div, Pow, and
// the variadic Min and Max with two or more inputs), whose scalar parameters
// (OpTraits::params) are attributes or one-element constants (Clip's min and max, Pow's
// exponent), whose inputs and output share one float dtype (float16, float32, float64), whose
// values all have a known rank, and which are not placed on the host. A group grows
// from a root (the last node of the chain) towards its inputs: a producer joins when
// every read of its output, anywhere in the graph (regions included), is by a node of
// the group and the output is not a graph output. Only the root's output leaves the
// group, so the fused node can take the root's place in the node order. Groups of one
// node are left as they are.
//
// One-element float constants read by the group become immediates of the program (when
// exactly representable as float32, which the `immediates` attribute holds); other
// constants and values become inputs. A group is left unfused when the broadcast of its
// inputs would not give the root's shape (an immediate of higher rank than every input),
// or when it would pass the op's limits (kFusedMaxInputs, kFusedMaxSlots).
//
// Numerics: float32 and float64 results are those of the unfused kernels; float16
// chains compute in float32 and round once at the end (the unfused kernels round after
// every op), so they can differ in the last float16 bit.
#pragma once

#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

struct FusionStats {
  int fused_kernels = 0;  // FusedElementwise nodes created
  int nodes_fused = 0;    // nodes they replace
};

// Runs the pass on `graph` after shape inference (it reads value dtypes, ranks and
// shapes). Does nothing when `registry` has no FusedElementwise op. Constants that only
// fused nodes read (now immediates) are removed (EliminateDeadCode).
FusionStats FuseElementwise(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
