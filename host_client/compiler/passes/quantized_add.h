// Quantized residual adds as one op: the QDQ form of an int8 residual connection.
#pragma once

#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

// Replaces QuantizeLinear(Relu?(Add(DequantizeLinear(A), DequantizeLinear(B)))) by one
// FusedQLinearAdd(A, a_scale, a_zero_point, B, b_scale, b_zero_point, y_scale,
// y_zero_point) node (kernels/ops/quantization/quantize.cc; `activation` "Relu" when
// the Relu is there): the residual connection of a QOperator model whose quantizer has
// no QLinearAdd, which otherwise widens both operands to float32, adds them, and
// narrows the sum again, four passes over memory instead of one. The results are the
// unfused kernels' bits (kernels/ops/quantization/quantize_ops.h QLinearAdd).
//
// What fuses, top-level nodes off the host: a QuantizeLinear of a float32 value with a
// scale and a zero point of one element each; that value the output of a Relu or of
// the Add; the Add of two DequantizeLinear outputs of one shape (static, or the same
// symbolic dims: no broadcasting); each DequantizeLinear of a uint8 or int8 value, with a
// scale and a zero point of one element each. Every intermediate (the two dequantized
// values, the sum, the Relu's output) read only by the next node and no graph output.
// The fused node takes the QuantizeLinear's place. Run before elementwise fusion, which
// would otherwise take the Add and the Relu. Returns the number of nodes made.
int FuseQuantizedAdds(Graph& graph, const kernels::KernelRegistry& registry);

}  // namespace remex::compiler
