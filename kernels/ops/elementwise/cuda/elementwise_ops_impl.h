// Launchers of the elementwise family's CUDA kernels beyond Add, Sub, Mul, Div, Relu and
// Sigmoid (elementwise_ops_impl.cu): the unary ops, Clip, the binary ops with
// broadcasting (Pow, PRelu, Max, Min, Sum and Mean, Mod, the comparisons and logical
// ops), Not, IsNaN, IsInf and BitShift, with ONNX opsets 6-18 semantics as
// kernels/ops/elementwise/elementwise.cc, kernels/ops/elementwise/unary.cc and
// kernels/ops/elementwise/bitshift.cc.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. A launcher that depends on the element type is a template on it, T
// (kernels/cuda/dtype.h), instantiated in elementwise_ops_impl.cu for the types its
// comment names: float and Half (float32, float16) unless it says otherwise. float16
// data is loaded as float, computed in float and stored rounded to nearest even. The
// host side (elementwise_ops.cc) has validated shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"

namespace remex::kernels::cuda {

// The unary ops, X(Name) each: the kernel of op Name computes the kernels/scalar_ops.h
// functor scalar::Name (with alpha, or alpha and beta, where the functor takes them:
// the op's OpTraits::params). This list is all a new unary op with a functor needs
// here: the enum, the launcher's dispatch and the registration come from it.
#define REMEX_NN_UNARY_OPS(X) \
  X(LeakyRelu) X(HardSigmoid) X(HardSwish) X(Swish) X(Gelu) X(Tanh) X(Exp) X(Log) X(Erf) X(Sqrt) X(Neg) X(Abs) X(Reciprocal) \
  X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Ceil) X(Floor)  \
  X(Round) X(Sign) X(Softplus) X(Softsign) X(Elu) X(Celu) X(Selu) X(ThresholdedRelu) X(Shrink)

enum class NnUnaryOp : uint8_t {
#define REMEX_NN_UNARY_ENUM(name) k##name,
  REMEX_NN_UNARY_OPS(REMEX_NN_UNARY_ENUM)
#undef REMEX_NN_UNARY_ENUM
};

// y[i] = op(x[i]). alpha, beta: the op's first and second scalar parameters
// (LeakyRelu's alpha, HardSigmoid's alpha and beta), 0 when it has none.
template <typename T>
cudaError_t LaunchNnUnary(NnUnaryOp op, const T* x, T* y, int64_t n, float alpha, float beta,
                          cudaStream_t stream);

// Clip: y = min(max(x, lo), hi), lo / hi read from the one-element device tensors
// `min` / `max` (null: unbounded).
template <typename T>
cudaError_t LaunchClip(const T* x, const T* min, const T* max, T* y, int64_t n, cudaStream_t stream);

// The binary ops and the element types T each takes (LaunchNnBinary<T>; Pow through
// LaunchPow).
enum class NnBinaryOp : uint8_t {
  kPow,    // LaunchPow: float base, float/Half/int32_t/int64_t exponent; exponent 2 is
           // x * x and exponent 1 is x, as on the CPU.
  kPRelu,  // a < 0 ? b * a : a. float, Half.
  kMax,    // NaN operand gives NaN. float, Half, int32_t, int64_t.
  kMin,
  kAdd,    // a + b: Sum and Mean, folded pairwise. float, Half.
  kMod,    // Mod with fmod = 0: the divisor's sign; an integer divisor of 0 gives 0.
           // float, Half, int32_t, int64_t.
  kFmod,   // Mod with fmod = 1: the dividend's sign. float, Half, int32_t, int64_t.
  kEqual,  // bool output. float, Half, int32_t, int64_t, bool.
  kLess,   // bool output. float, Half, int32_t, int64_t (and the three below).
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,  // bool inputs and output.
  kOr,
  kXor,
};

// out[i] = a[.] op b[.] over `n` output elements with the broadcast plan, for the ops
// but kPow. `out` has element type T, bool for the comparisons and logical ops. T:
// float, Half, int32_t, int64_t or bool (cudaErrorInvalidValue for an op that does not
// take T, above).
template <typename T>
cudaError_t LaunchNnBinary(NnBinaryOp op, const T* a, const T* b, void* out, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream);

// Pow: out[i] = a[.] ^ b[.] with the broadcast plan; A float or Half, B float, Half,
// int32_t or int64_t.
template <typename A, typename B>
cudaError_t LaunchPow(const A* a, const B* b, A* out, int64_t n, const BroadcastPlan& plan,
                      cudaStream_t stream);

// Not: y[i] = x[i] == 0 (bool bytes).
cudaError_t LaunchNot(const bool* x, bool* y, int64_t n, cudaStream_t stream);

// IsNaN (`inf` false) or IsInf: y[i] = scalar_ops.h's IsNaN()(x[i]) or
// IsInf()(x[i], negative, positive).
template <typename T>
cudaError_t LaunchClassify(bool inf, bool negative, bool positive, const T* x, bool* y, int64_t n,
                           cudaStream_t stream);

// y[i] = y[i] / divisor in float32 (Mean's last step).
template <typename T>
cudaError_t LaunchDivideInPlace(T* y, int64_t n, float divisor, cudaStream_t stream);

// BitShift of `n` elements (n > 0) of `elem_size` 1, 2, 4 or 8 bytes (uint8 to uint64)
// with the broadcast plan: z = kernels/ops/tensor/index_ops.h's index::BitShift(x, y, left).
cudaError_t LaunchBitShift(int elem_size, bool left, const void* x, const void* y, void* z, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream);

}  // namespace remex::kernels::cuda
