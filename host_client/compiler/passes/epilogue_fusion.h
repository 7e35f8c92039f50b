// Epilogue fusion: replaces a Conv or a MatMul by a constant, the Add after it and the
// activation after that with one FusedConv or FusedMatMul node (kernels/ops/nn/conv.cc:
// Y = activation(Conv(X, W, B) + Z); kernels/ops/math/matmul.cc: Y = activation(MatMul(A, B) +
// bias)), so that the product's output is written once and its intermediates are never
// allocated.
//
// What fuses. Top-level nodes (not inside If/Loop regions), not placed on the host:
//   a Conv with float32 or float16 output of known rank, then
//     optionally an Add (two inputs) of the chain's value and another operand Z of
//     exactly its dtype and shape (same rank; each dim static and equal, or dynamic
//     with the same symbolic expression: no broadcasting);
//   or a MatMul with float32 or float16 output whose A has known rank >= 2 and whose B
//     is a constant (initializer) of static shape [K, N], then
//     optionally an Add (two inputs, either order) of the chain's value and a constant
//     of shape [N] and its dtype (the bias, broadcast along the last dim);
//   then, for both, optionally one activation: a node of one data input whose op is
//     marked for epilogues (kernels.h OpTraits::epilogue_activation; today Relu,
//     LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish and Gelu: the SiLU
//     and GELU that passes/activation_patterns.h recognises), its scalar parameters
//     (OpTraits::params) attributes or one-element constants (Clip's min and max);
// at least two nodes. Also a MatMulInteger with int32 output whose B has static shape
// [K, N], then a Cast of its output (to float32), then a Mul (either order) by a float32
// device value of one element or of shape [N] (the scale: DynamicQuantizeLinear's times
// the weights'), then optionally an Add of a constant float32 [N] (the bias), then
// optionally one activation as above, each output of the Cast's dtype and shape: the
// chain ONNX Runtime's dynamic quantizer writes for a MatMul, made one
// FusedMatMulInteger (A, B, a_zero_point, b_zero_point (absent: -1), scale, [bias];
// `activation`, `activation_params`; kernels/ops/quantization/qlinear.cc), which writes
// float32 once instead of int32 sums, their float32 copy and more passes.
// Each intermediate value (the product's output, the Add's output
// when an activation follows) must be read only by the next node of the chain,
// anywhere in the graph (regions included), and must not be a graph output. The fused
// node gets `activation` and `activation_params`; a FusedConv keeps the Conv's
// attributes (`layout` included) and reads X, W, B (absent: -1) and Z; a FusedMatMul
// reads A, B and the bias. It takes the last node's place in the node order, after
// Z's definition.
//
// The pass runs after the layout pass (NHWC Convs fuse with their layout) and the
// precision pass (float16 chains fuse; the fused kernels compute them in float32 and
// round once, where the unfused kernels round after each op), and before elementwise
// fusion, which then sees no Add or activation that a Conv or MatMul took.
#pragma once

#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

struct EpilogueFusionStats {
  int fused_convs = 0;     // FusedConv nodes created
  int fused_matmuls = 0;   // FusedMatMul nodes created
  int fused_matmul_integers = 0;  // FusedMatMulInteger nodes created
  int epilogue_nodes = 0;  // Add and activation nodes they absorbed
};

// Runs the pass on `graph` after shape inference (it reads value dtypes, shapes and
// symbolic dims). Conv chains fuse only when `registry` has the FusedConv op, MatMul
// chains only when it has FusedMatMul.
EpilogueFusionStats FuseEpilogues(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
