// The program format of FusedElementwise: one op that evaluates a small expression
// DAG of elementwise float ops in one pass over memory. Written by the compiler's
// fusion pass (host_client/compiler/passes/elementwise_fusion.h), read by the kernels (fused.cc).
//
// A node FusedElementwise(x0, ..., x{n-1}) -> y carries two attributes:
//   - `program` (ints): instructions of kFusedWidth entries each,
//     [opcode, a, b, c]; operands a, b, c index "slots", -1 where the opcode takes
//     fewer operands.
//   - `immediates` (floats, optional): scalar constants.
//   - `num_inputs` (int) and `dtype` (string, base/dtype.h's name: "float32"), optional:
//     the node's input count and dtype, which the compiler's fusion pass records so that
//     a kernel can be specialised when it is created, before any input is seen (the CUDA
//     kernel compiles its program with NVRTC then). When present, each must match the
//     node's inputs (the shape function checks them: INVALID_ARGUMENT otherwise).
// Slots are numbered: inputs 0..n-1, then immediates n..n+m-1, then the result of
// instruction j at n+m+j. An instruction reads only earlier slots. The op's result is
// the last instruction's slot. Inputs broadcast like numpy across each other (the
// output shape is their multidirectional broadcast, ONNX "Broadcasting in ONNX");
// immediates are scalars broadcast everywhere. All inputs share one float dtype
// (float16, float32, float64), which is the output's; arithmetic runs in float for
// float16 (rounded to float16 once, at the end) and in the input type otherwise.
//
// Each opcode has the semantics of the ONNX op it is named after (opset 13-17
// definitions; Swish-24, Gelu-20 with approximate "none"), with the same arithmetic as Remex's unfused CPU kernels for float32
// and float64: every implementation evaluates opcode X with the functor scalar::X of
// kernels/scalar_ops.h, its operands a, b, c in order.
#pragma once

#include <cstdint>
#include <string_view>

namespace remex::kernels {

enum class FusedOpcode : int64_t {
  // Binary: a, b.
  kAdd = 0,
  kSub = 1,
  kMul = 2,
  kDiv = 3,
  kPow = 4,  // a ** b.
  kMin = 5,  // NaN in either operand gives NaN (ONNX Min/Max).
  kMax = 6,
  // Unary: a.
  kRelu = 16,
  kSigmoid = 17,
  kTanh = 18,
  kExp = 19,
  kLog = 20,
  kSqrt = 21,
  kNeg = 22,
  kAbs = 23,
  kReciprocal = 24,
  kErf = 25,
  kHardSwish = 26,
  // With parameters given as slots (usually immediates).
  kLeakyRelu = 32,    // a, alpha = b.
  kHardSigmoid = 33,  // a, alpha = b, beta = c: clamp(alpha * a + beta, 0, 1).
  kClip = 34,         // a, min = b, max = c: min(max(a, b), c).
  kSwish = 35,        // a, alpha = b: a * sigmoid(alpha * a) (Swish-24).
  kGelu = 36,         // a: a * (1 + erf(a / sqrt(2))) / 2 (Gelu-20, approximate "none").
};

// Entries per instruction in `program`.
inline constexpr int64_t kFusedWidth = 4;
// Limits a FusedElementwise node accepts (the fusion pass stays below them).
inline constexpr int64_t kFusedMaxInputs = 32;
inline constexpr int64_t kFusedMaxSlots = 256;

// Operand count of `op` (1 to 3), or 0 when `op` is not an opcode.
int FusedOperandCount(int64_t op);
// The ONNX op name of `op` ("Add"), or "" when `op` is not an opcode.
std::string_view FusedOpcodeName(int64_t op);

}  // namespace remex::kernels
