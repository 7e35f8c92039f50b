// Activations recognised from their decomposition, at compile time.
#pragma once

#include "host_client/compiler/graph.h"

namespace remex::compiler {

// Replaces each decomposed HardSwish, as exporters write it (PaddlePaddle's
// hardswish, PyTorch's x * relu6(x + 3) / 6),
//   c = Clip(Add(x, 3), 0, 6)   then   Div(Mul(x, c), 6)   or   Mul(x, Div(c, 6)),
// with Mul's and Add's operands in either order and Div by 6 also written as Mul by
// 1/6, by one HardSwish(x) node (ONNX HardSwish-14: x * max(0, min(1, x / 6 + 0.5))),
// which the elementwise kernels compute in one step and epilogue fusion can take into
// the Conv or MatMul before it. The same function up to rounding: a few float32 ulps
// (HardSwish multiplies by 1/6 where the decomposition divides by 6).
//
// Matches top-level float32 nodes off the host: 3, 0, 6 and 1/6 are one-element float32
// constants (Clip's min and max its inputs 1 and 2, as the frontend writes Clip-6's
// attributes) of rank at most x's, so that every step keeps x's shape; the Add, Clip
// and inner Mul or Div outputs are read once, by the next step, and are no graph
// outputs. The HardSwish writes the last node's output in that node's place. Run after
// shape inference, before the layout, precision and fusion passes. Returns the number
// of HardSwish nodes made.
int RecognizeHardSwish(Graph& graph);

// Replaces each decomposed SiLU / Swish, as exporters write it (PyTorch's SiLU, YOLO-style
// detectors' Conv + Sigmoid + Mul),
//   Mul(x, Sigmoid(x))   or   Mul(x, Sigmoid(Mul(x, alpha))),
// with Mul's operands in either order, by one Swish(x) node with that `alpha` (1 for the
// first form; ONNX Swish-24: x * sigmoid(alpha * x)), which the elementwise kernels
// compute in one step and epilogue fusion can take into the Conv or MatMul before it.
// float32 results are the unfused kernels' to a few ulps (the same Sigmoid formula,
// kernels/scalar_ops.h); float16 ones round once instead of after each op.
//
// Matches top-level float32 or float16 nodes off the host (the `alpha` form: float32,
// alpha a one-element float32 constant of rank at most x's, x of known rank); the
// Sigmoid's output and the inner Mul's are read once, by the next step, and are no
// graph outputs (x itself may be read anywhere). The Swish writes the outer Mul's output
// in that node's place. Run where RecognizeHardSwish runs. Returns the number of Swish
// nodes made.
int RecognizeSwish(Graph& graph);

// Replaces each decomposed GELU, as exporters write it (PyTorch's erf GELU, BERT-style
// models' x * 0.5 * (1 + erf(x / sqrt(2)))),
//   e = Add(Erf(Div(x, sqrt(2))), 1)   (or Erf(Mul(x, 1 / sqrt(2))))
//   then   Mul(Mul(x, e), 0.5),   Div(Mul(x, e), 2),   Mul(Mul(x, 0.5), e)   or   Mul(x, Mul(e, 0.5)),
// with every Mul's and the Add's operands in either order, by one Gelu(x) node (ONNX
// Gelu-20, approximate "none": x * (1 + erf(x / sqrt(2))) / 2), which the elementwise
// kernels compute in one step and epilogue fusion can take into the MatMul (or Conv)
// before it. float32 results are the unfused kernels' to a few ulps (the same erf,
// kernels/scalar_ops.h; x / sqrt(2) as x times 1 / sqrt(2)).
//
// Matches top-level float32 nodes off the host: sqrt(2) and 1 / sqrt(2) are one-element
// float32 constants within 2e-6 of those values, 1, 0.5 and 2 exactly those, each of
// rank at most x's (x of known rank); every intermediate (the scaled x, the Erf, the
// Add, the partial product) is read once, by the next step, and is no graph output
// (x itself may be read anywhere). The Gelu writes the last node's output in that
// node's place. Run where RecognizeHardSwish runs. Returns the number of Gelu nodes made.
int RecognizeGelu(Graph& graph);

}  // namespace remex::compiler
