// Conv-epilogue fusion: replaces a Conv, the residual Add after it and the activation
// after that with one FusedConv node (kernels/conv.cc: Y = activation(Conv(X, W, B) +
// Z)), so that the convolution's output is written once and its intermediates are
// never allocated.
//
// What fuses. Top-level nodes (not inside If/Loop regions), not placed on the host:
//   a Conv with float32 or float16 output of known rank, then
//   optionally an Add (two inputs) of the chain's value and another operand Z of
//     exactly its dtype and shape (same rank; each dim static and equal, or dynamic with
//     the same symbolic expression: no broadcasting), then
//   optionally one activation: Relu, LeakyRelu (alpha), Clip (min/max absent or
//     one-element constants of the output's dtype, min <= max), Sigmoid, Tanh,
//     HardSigmoid (alpha, beta), HardSwish;
// at least two nodes. Each intermediate value (the Conv's output, the Add's output
// when an activation follows) must be read only by the next node of the chain, anywhere
// in the graph (regions included), and must not be a graph output. The FusedConv keeps
// the Conv's attributes (`layout` included), adds `activation` and
// `activation_params`, reads X, W, B (absent: -1) and Z, and takes the last node's
// place in the node order, after Z's definition.
//
// The pass runs after the layout pass (NHWC Convs fuse with their layout) and the
// precision pass (float16 chains fuse; FusedConv computes them in float32 and rounds
// once, where the unfused kernels round after each op), and before elementwise
// fusion, which then sees no Add or activation that a Conv took.
#pragma once

#include "host_client/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

struct ConvFusionStats {
  int fused_convs = 0;     // FusedConv nodes created
  int epilogue_nodes = 0;  // Add and activation nodes they absorbed
};

// Runs the pass on `graph` after shape inference (it reads value dtypes, shapes and
// symbolic dims). Does nothing when `registry` has no FusedConv op.
ConvFusionStats FuseConvEpilogues(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
