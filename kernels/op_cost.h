// The arithmetic of one kernel call, from its operands' shapes: the operations of the
// ops whose cost is arithmetic (convolutions and products; a multiply-add counts as
// two operations, float or integer), and the bytes of its operands, which bound from
// below the memory traffic of any kernel. The profile's per-node rates (achieved
// GOP/s and GB/s: host_client/tooling/profile.h) come from these. Semantics of the ops
// as ONNX defines them (Conv, ConvTranspose, ConvInteger, QLinearConv: opset 11+;
// MatMul, MatMulInteger, QLinearMatMul, Gemm: opset 13), and Remex's FusedConv and
// FusedMatMul (a Conv or MatMul with its epilogue, whose few operations per output are
// not counted). Plain header.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/dtype.h"

namespace remex::kernels {

// One operand of a call: absent for an omitted optional input.
struct OperandShape {
  bool present = false;
  DType dtype = DType::kUndefined;
  Shape shape;
};

namespace op_cost_internal {
inline double Count(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}
inline const OperandShape* At(std::span<const OperandShape> list, size_t i) {
  return i < list.size() && list[i].present ? &list[i] : nullptr;
}
}  // namespace op_cost_internal

// Operations of one call of `op` (0 for the ops not counted: elementwise, reductions,
// data movement, whose cost is memory traffic), from its inputs' and outputs' shapes:
//   Conv, FusedConv, ConvInteger, QLinearConv: 2 x |Y| x |W| / W[0] (each output takes
//     the C/group x kernel-window products of its output channel's filter);
//   ConvTranspose: 2 x |X| x |W| / W[0] (each input scatters into C_out/group x window);
//   MatMul, FusedMatMul, MatMulInteger, QLinearMatMul: 2 x |Y| x K, K the last dim of A;
//   Gemm: 2 x |Y| x |A| / M, M = Y[0].
// 0 when an operand it needs is missing or has rank 0.
inline double KernelOps(std::string_view op, std::span<const OperandShape> inputs,
                        std::span<const OperandShape> outputs) {
  using op_cost_internal::At;
  using op_cost_internal::Count;
  const OperandShape* y = At(outputs, 0);
  if (!y) return 0;
  auto conv = [&](size_t w_index, const OperandShape* per) {
    const OperandShape* w = At(inputs, w_index);
    if (!w || !per || w->shape.empty() || w->shape[0] <= 0) return 0.0;
    return 2.0 * Count(per->shape) * Count(w->shape) / static_cast<double>(w->shape[0]);
  };
  auto product = [&](size_t a_index) {
    const OperandShape* a = At(inputs, a_index);
    if (!a || a->shape.empty()) return 0.0;
    return 2.0 * Count(y->shape) * static_cast<double>(a->shape.back());
  };
  if (op == "Conv" || op == "FusedConv" || op == "ConvInteger") return conv(1, y);
  if (op == "QLinearConv") return conv(3, y);
  if (op == "ConvTranspose") return conv(1, At(inputs, 0));
  if (op == "MatMul" || op == "FusedMatMul" || op == "MatMulInteger" || op == "QLinearMatMul") return product(0);
  if (op == "Gemm") {
    const OperandShape* a = At(inputs, 0);
    if (!a || y->shape.empty() || y->shape[0] <= 0) return 0;
    return 2.0 * Count(y->shape) * Count(a->shape) / static_cast<double>(y->shape[0]);
  }
  return 0;
}

// Bytes of the operands present: each input read once, each output written once.
inline double OperandBytes(std::span<const OperandShape> inputs, std::span<const OperandShape> outputs) {
  double bytes = 0;
  for (auto list : {inputs, outputs}) {
    for (const OperandShape& o : list) {
      if (o.present) bytes += op_cost_internal::Count(o.shape) * static_cast<double>(DTypeSize(o.dtype));
    }
  }
  return bytes;
}

}  // namespace remex::kernels
