// Folding BatchNormalization into the convolution before it, at compile time.
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Folds each inference BatchNormalization (ONNX BatchNormalization-15 with
// training_mode 0, or an earlier version with spatial 1; one output) whose input is
// the only read of a float32 Conv's output into that Conv:
//   BN(conv(x, W) + b) = conv(x, W * mul) + (b * mul + add)   per output channel m,
//   mul = scale / sqrt(var + epsilon), add = B - mean * mul   (kernels/ops/nn/batchnorm_ops.h),
// where W [M, C/group, k...] and b [M] (absent: 0) are constants, as are BN's scale,
// B, mean and var [M]. The Conv then writes BN's output and the BN node is removed; the
// folded weights are new constants (the old ones go when nothing else reads them). Run
// after shape inference, before the layout and precision passes. Graph outputs, Convs
// read elsewhere and non-constant parameters are left as they are. Returns the number
// of BatchNormalization nodes folded.
int FoldBatchNormalization(Graph& graph);

}  // namespace remex::compiler
