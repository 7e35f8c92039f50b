// Folding BatchNormalization into the convolution before it, at compile time.
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Folds each inference BatchNormalization (ONNX BatchNormalization-15 with
// training_mode 0, or an earlier version with spatial 1; one output) whose input is
// the only read of a float32 or float16 Conv's output into that Conv:
//   BN(conv(x, W) + b) = conv(x, W * mul) + (b * mul + add)   per output channel m,
//   mul = scale / sqrt(var + epsilon), add = B - mean * mul   (kernels/ops/nn/batchnorm_ops.h),
// where W [M, C/group, k...] and b [M] (absent: 0) are constants, as are BN's scale,
// B, mean and var [M] (float32 or float16 each). The Conv then writes BN's output and
// the BN node is removed; the folded weights are new constants in the Conv's dtype (the
// old ones go when nothing else reads them): computed in float32, for float16 rounded
// to nearest even once (as ONNX Runtime's Conv+BatchNormalization fusion of a float16
// model rounds them), where the unfolded ops round the Conv's output. Run
// after shape inference, before the layout and precision passes. Graph outputs, Convs
// read elsewhere and non-constant parameters are left as they are. Returns the number
// of BatchNormalization nodes folded.
int FoldBatchNormalization(Graph& graph);

// Rewrites each inference BatchNormalization left after FoldBatchNormalization (one
// output; X float32 or float16 of known rank >= 2 with a static channel dim C; scale,
// B, mean and var float32 or float16 constants [C]) as the same affine map in two
// elementwise nodes (mul and add in X's dtype),
//   Y = Mul(X, mul) then Add(., add),   mul, add constants [C, 1, ...] (X's rank - 1),
// with mul and add as FoldBatchNormalization computes them. Elementwise fusion then
// runs them, and the activation after them, in one pass over X (DenseNet's
// BatchNormalization and Relu before each convolution), and the layout pass holds them
// channels-last with their constants permuted. Run after FoldBatchNormalization, before
// the layout pass. Returns the number of BatchNormalization nodes rewritten.
int DecomposeBatchNormalization(Graph& graph);

}  // namespace remex::compiler
