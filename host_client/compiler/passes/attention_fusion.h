// Scaled dot-product attention recognised from its decomposition at compile time and
// fused into one FusedAttention node (kernels/ops/math/attention.cc).
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Replaces each attention as exporters write it (torch.onnx.export's BERT and GPT-2
// style layers; "Attention Is All You Need", eq. 1),
//   s = MatMul(Q, Kt)
//   s = Div(s, c), Mul(s, c) or Mul(c, s)       optional; c a one-element float32 constant
//   s = Add(s, mask) or Add(mask, s)            optional; the mask does not grow s
//   p = Softmax(s) along the last axis          (Softmax-13 axis -1 or rank - 1; opsets
//                                                1-12 with axis rank - 1)
//   y = MatMul(p, V)
// by one FusedAttention(Q', K', V'[, mask]) node computing softmax(scale Q Kt + mask) V
// with scale 1 / c (Div) or c (Mul), 1 without the step. The Transposes around it go
// into the node as axis orders: Q, Kt and V are each followed back through the
// Transposes producing them (the heads split, [B, S, H, D] -> [B, H, S, D], and Kt's
// own last-two-axes swap), and y forward through the Transposes reading it (the heads
// merged back): Q', K', V' are the tensors before those Transposes, the node's q_perm,
// k_perm, v_perm the composed permutations (k_perm describing K, Kt with its last two
// axes swapped back), and y_perm the composed permutation of the Transposes after y,
// whose last output the node writes in that node's place. So the [B, H, S, S] scores,
// the probabilities and the head Transposes' copies are never made.
//
// Matches top-level float32 nodes off the host whose values have a known rank of 3 or 4
// (Q, Kt, V, s and y of one rank; the batch dims of Q, Kt and V, and the rows of V and
// columns of Kt, the same static size or the same symbol, so that no MatMul broadcasts).
// Every intermediate (s and each step after it, p, a Transpose taken in) is read once,
// by the next step, and is no graph output; Q', K', V' and the mask may be read
// anywhere. Results are the unfused kernels' up to float32 rounding (the products' sums
// in another order, the scale applied in the product, 1 / c for a Div).
//
// Run after shape inference and the precision pass, before epilogue and elementwise
// fusion (which would take the scale and mask Add), when CompileOptions::fuse_attention
// asks: tooling::CompileForDevice sets it for the CPU device. (The CUDA device has a
// FusedAttention kernel too, kernels/ops/math/cuda/attention.cc, not yet measured on a
// GPU against the unfused graph.) Returns the number of FusedAttention nodes made.
int FuseAttention(Graph& graph);

}  // namespace remex::compiler
