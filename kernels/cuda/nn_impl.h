// Launchers of the CUDA kernels of the "nn" op group: reductions, ArgMax/ArgMin,
// Softmax, pooling, Resize, normalisation (nn_reduce_impl.cu, nn_pool_impl.cu) and the
// elementwise ops beyond Add/Sub/Mul/Div/Relu/Sigmoid (nn_elementwise_impl.cu).
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers unless a comment says otherwise. A launcher that depends on the element type
// is a template on it, T (kernels/cuda/dtype.h), instantiated in its .cu file for the
// types its comment names: float and Half (float32, float16) unless it says otherwise.
// float16 data is loaded as float, computed and accumulated in float and stored rounded
// to nearest even. The host side (nn*.cc) has validated shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"
#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

// ---------------------------------------------------------------------------
// Reductions (ONNX Reduce*, opsets 1-18).

// The kind of reduction: the CPU kernels' own enum (kernels/op_enums.h).
using ::remex::kernels::ReduceKind;

inline constexpr int kMaxReduceGroups = 8;

// The input seen as kept and reduced groups of dims (extent-1 dims dropped, adjacent
// dims of one kind merged), outermost first, strides in elements. Output element o
// (row-major over the kept groups) reduces the red_count elements at
// kept_offset(o) + red_offset(r). `inner_reduced`: the innermost group is reduced.
struct ReducePlan {
  int64_t out_count = 0;
  int64_t red_count = 1;
  int num_kept = 0;
  int num_red = 0;
  bool inner_reduced = false;
  int64_t kept_dims[kMaxReduceGroups] = {};
  int64_t kept_strides[kMaxReduceGroups] = {};
  int64_t red_dims[kMaxReduceGroups] = {};
  int64_t red_strides[kMaxReduceGroups] = {};
};

// y[o] = reduction of x over the plan. out_count > 0.
template <typename T>
cudaError_t LaunchReduce(ReduceKind kind, const T* x, T* y, const ReducePlan& plan, cudaStream_t stream);

// ArgMax (is_max) / ArgMin of x viewed as [outer, n, inner] along n (n >= 1): int64 y
// of [outer, inner]. NaN counts as the extremum; ties pick the first index, or the
// last with select_last. outer * inner > 0.
template <typename T>
cudaError_t LaunchArgExtremum(bool is_max, bool select_last, const T* x, int64_t* y, int64_t outer, int64_t n,
                              int64_t inner, cudaStream_t stream);

// Softmax, LogSoftmax or Hardmax of x viewed as [outer, n, inner] along n (as
// kernels/softmax.cc): exp(x - max) / sum, (x - max) - log(sum), or 1 at the first
// maximum and 0 elsewhere. outer * n * inner > 0.
template <typename T>
cudaError_t LaunchSoftmax(SoftmaxMode mode, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream);

// NegativeLogLikelihoodLoss (softmax false: x holds log-probabilities) or
// SoftmaxCrossEntropyLoss (softmax true: x holds scores; log_prob, when not null,
// gets their LogSoftmax along C) of x viewed as [n, c, d], as kernels/loss.cc: per
// position loss = -logp[target] * w with w = weight[target] (1 without weight, 0 for
// ignore_index); "none" writes n * d losses, "sum" and "mean" one value. A target
// outside [0, c) counts as ignored (the CPU kernel refuses it; targets are not read
// back). x, weight, loss and log_prob have element type T (float or Half), target I
// (int32_t or int64_t).
using ::remex::kernels::LossReduction;  // kernels/op_enums.h
template <typename T, typename I>
struct LossLaunch {
  const T* x = nullptr;
  const I* target = nullptr;
  const T* weight = nullptr;  // [c] or null
  T* loss = nullptr;
  T* log_prob = nullptr;  // [n, c, d] or null
  int64_t n = 0, c = 0, d = 1;
  LossReduction reduction = LossReduction::kMean;
  bool softmax = false;
  bool has_ignore = false;
  int64_t ignore_index = 0;
};
template <typename T, typename I>
cudaError_t LaunchLoss(const LossLaunch<T, I>& launch, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Pooling (ONNX MaxPool-12, AveragePool-11/19, GlobalAveragePool-1).

// A 1-D to 3-D window over [planes, in0, in1, in2] (missing leading spatial dims have
// extent 1, kernel 1, stride 1, no pads).
struct PoolGeometry {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad_begin[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};
  // Column-major strides of the real spatial dims (MaxPool storage_order = 1).
  int64_t col_stride[3] = {0, 0, 0};
};

// MaxPool: y = max over the window's positions inside x (first maximum; -inf for a
// window with none). `indices` (may be null): int64 flat index of the maximum in x
// (row-major, or column-major within the plane when storage_order = 1), -1 when none.
template <typename T>
cudaError_t LaunchMaxPool(const T* x, T* y, int64_t* indices, bool column_major, const PoolGeometry& g,
                          cudaStream_t stream);

// AveragePool: sum over the window's positions inside x divided by their count, or
// with count_include_pad by the count of positions inside x or its pads; NaN for a
// zero count.
template <typename T>
cudaError_t LaunchAveragePool(const T* x, T* y, bool count_include_pad, const PoolGeometry& g,
                              cudaStream_t stream);

// GlobalMaxPool: y[p] = the maximum of the `size` elements of plane p; NaN when the
// plane holds a NaN or is empty (as kernels/pool.cc).
template <typename T>
cudaError_t LaunchGlobalMaxPool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream);

// GlobalAveragePool: y[p] = mean of the `size` elements of plane p (NaN when size is 0).
template <typename T>
cudaError_t LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t size, cudaStream_t stream);

// GlobalLpPool-2: y[p] = the Lp norm of the `size` elements of plane p, order `p_order`
// (kernels/lp_ops.h).
template <typename T>
cudaError_t LaunchGlobalLpPool(const T* x, T* y, int64_t planes, int64_t size, int p_order,
                               cudaStream_t stream);

// LpNormalization-1 of x seen as [outer, n, inner]: each of the outer x inner vectors of
// n elements (stride inner) divided by its Lp norm, one thread per vector, summed in
// order as kernels/norm.cc does (kernels/lp_ops.h).
template <typename T>
cudaError_t LaunchLpNormalization(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int p_order,
                                  cudaStream_t stream);

// ---------------------------------------------------------------------------
// Resize (ONNX Resize-10/11/13).

inline constexpr int kMaxResizeRank = 8;

// Mode, coordinate transform and nearest rounding: the CPU kernel's own enums
// (kernels/op_enums.h).
using ::remex::kernels::ResizeCoord;
using ::remex::kernels::ResizeMode;
using ::remex::kernels::ResizeNearest;

struct ResizeParams {
  int rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool exclude_outside = false;
  double cubic_a = -0.75;
  int64_t in[kMaxResizeRank] = {};
  int64_t out[kMaxResizeRank] = {};
  double scale[kMaxResizeRank] = {};
  double length[kMaxResizeRank] = {};  // length_resized of the coordinate transform.
  double roi_start[kMaxResizeRank] = {};
  double roi_end[kMaxResizeRank] = {};
};

// Nearest: any element of `elem_size` bytes (1, 2, 4 or 8); `extrapolation` holds the
// bytes of the value written outside the roi (tf_crop_and_resize).
cudaError_t LaunchResizeNearest(int elem_size, const void* x, void* y, int64_t n_out, const ResizeParams& p,
                                uint64_t extrapolation, cudaStream_t stream);
// Linear and cubic: accumulated in float; taps whose weight is 0 are skipped (an axis
// that is not resized thus reads its own index with weight 1).
template <typename T>
cudaError_t LaunchResizeInterp(const T* x, T* y, int64_t n_out, const ResizeParams& p, float extrapolation,
                               cudaStream_t stream);

// ---------------------------------------------------------------------------
// Normalisation (ONNX BatchNormalization-15 inference, InstanceNormalization-6,
// LayerNormalization-17).

// y = x * m + a, m = scale / sqrt(var + eps), a = B - mean * m per channel; x is
// [n, c, inner]; scale, bias, mean and var are [c], all of element type T.
template <typename T>
cudaError_t LaunchBatchNorm(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                            int64_t n, int64_t c, int64_t inner, float epsilon, cudaStream_t stream);

// BatchNormalization in training mode over x [n, c, inner]: one block per channel
// computes the batch mean and biased variance over its n * inner values (two passes, in
// float for every dtype, as InstanceNormalization), normalises y with them, and writes running_mean /
// running_var (null: not wanted) = mean / var inputs * momentum + batch statistic *
// (1 - momentum).
template <typename T>
cudaError_t LaunchBatchNormTraining(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                                    T* y, T* running_mean, T* running_var, int64_t n, int64_t c,
                                    int64_t inner, float epsilon, float momentum, cudaStream_t stream);

// Per (n, c) plane of `inner` elements: y = scale * (x - mean) / sqrt(var + eps) + B.
template <typename T>
cudaError_t LaunchInstanceNorm(const T* x, const T* scale, const T* bias, T* y, int64_t n, int64_t c,
                               int64_t inner, float epsilon, cudaStream_t stream);

inline constexpr int kMaxLayerNormRank = 8;

// Offsets of a parameter broadcast to X: X's dims and the parameter's strides (0 where
// it broadcasts).
struct ParamBroadcast {
  int rank = 0;
  int64_t dims[kMaxLayerNormRank] = {};
  int64_t scale_strides[kMaxLayerNormRank] = {};
  int64_t bias_strides[kMaxLayerNormRank] = {};
  // The parameter holds exactly one row of `inner` values, the same for every row:
  // element i of a row reads parameter element i.
  bool scale_is_row = false;
  bool bias_is_row = false;
};

// Per row of `inner` elements (X as [outer, inner]): Y = (X - mean) * inv * Scale + B,
// inv = 1 / sqrt(var + eps). `bias`, `mean_out`, `inv_out` (float32 [outer]) may be null.
template <typename T>
cudaError_t LaunchLayerNorm(const T* x, const T* scale, const T* bias, T* y, float* mean_out, float* inv_out,
                            int64_t outer, int64_t inner, const ParamBroadcast& params, float epsilon,
                            cudaStream_t stream);

// ---------------------------------------------------------------------------
// Elementwise (ONNX opsets 6-18 as kernels/elementwise.cc and kernels/unary.cc).

// The unary ops, X(Name) each: the kernel of op Name computes the kernels/scalar_ops.h
// functor scalar::Name (with alpha, or alpha and beta, where the functor takes them:
// the op's OpTraits::params). This list is all a new unary op with a functor needs
// here: the enum, the launcher's dispatch and the registration come from it.
#define REMEX_NN_UNARY_OPS(X) \
  X(LeakyRelu) X(HardSigmoid) X(HardSwish) X(Tanh) X(Exp) X(Log) X(Erf) X(Sqrt) X(Neg) X(Abs) X(Reciprocal) \
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

}  // namespace remex::kernels::cuda
