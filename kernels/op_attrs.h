// Attribute parsing shared by the CPU kernels and the CUDA kernels' host code, so that
// both read a node's attributes (defaults, checks, error messages) the same way. Each
// function is defined next to its CPU kernel (the file named in its comment) and
// follows the ONNX operator spec as that kernel does. Errors: INVALID_ARGUMENT
// "<op>: <message>".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/conv_epilogue.h"
#include "kernels/op_enums.h"
#include "kernels/ops/rnn/rnn_activation.h"
#include "kernels/ops/math/einsum_ops.h"
#include "kernels/ops/nn/mvn_ops.h"
#include "kernels/ops/tensor/reverse_sequence_ops.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::internal {

// An integer attribute that must be 0 or 1, read as a bool (kernels/ops/reduction/reduce.cc).
StatusOr<bool> BoolAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                        int64_t default_value);

// Shape-15's start and end, clamped to [0, rank], end >= start (kernels/ops/tensor/tensor.cc).
struct ShapeRange {
  int64_t start, end;
};
StatusOr<ShapeRange> ShapeRangeOf(const Attributes& attrs, int64_t rank);

// ConstantOfShape's `value` as the frontend encodes it: float, int64, or {ONNX dtype,
// bits}; float32 zero when absent (kernels/ops/generator/generate.cc).
struct FillValue {
  DType dtype = DType::kFloat32;
  uint64_t bits = 0;  // The element's bytes, memcpy'd into a zeroed uint64.
};
StatusOr<FillValue> FillValueOf(const Attributes& attrs);

// The Reduce* ops: name, kind and whether only float dtypes are taken (ReduceL2,
// ReduceLogSum, ReduceLogSumExp), in ReduceKind order (kernels/ops/reduction/reduce.cc).
using ::remex::kernels::ReduceKind;  // kernels/op_enums.h
struct ReduceOpInfo {
  const char* name;
  ReduceKind kind;
  bool float_only;
};
std::span<const ReduceOpInfo> ReduceOps();

// DepthToSpace's and SpaceToDepth's attributes (kernels/ops/tensor/depth_space.cc): blocksize
// (required, >= 1), DepthToSpace's mode (DCR, the default, or CRD) and Remex's internal
// `layout` (NCHW, the default, or NHWC). INVALID_ARGUMENT "<op>: ..." naming the value.
struct BlockAttrs {
  int64_t blocksize = 0;
  bool crd = false;            // DepthToSpace mode CRD (else DCR).
  bool channels_last = false;  // `layout` "NHWC".
};
StatusOr<BlockAttrs> BlockAttrsOf(std::string_view op, const Attributes& attrs);

// Softmax, LogSoftmax and Hardmax (kernels/ops/math/softmax.cc): the [outer, n, inner] view of
// `shape` they normalise along n. `flatten`: the opsets 1-12 entries (the input seen as
// [prod(shape[:axis]), prod(shape[axis:])], axis default 1 in [-rank, rank]); else
// opset 13's (along axis, default -1 in [-rank, rank)). INVALID_ARGUMENT "<op>: ..."
// for a bad axis.
using ::remex::kernels::SoftmaxMode;  // kernels/op_enums.h
struct SoftmaxView {
  int64_t outer = 1, n = 1, inner = 1;
};
StatusOr<SoftmaxView> SoftmaxViewOf(std::string_view op, bool flatten, const Attributes& attrs, const Shape& shape);
// "Softmax", "LogSoftmax" or "Hardmax".
std::string_view SoftmaxOpName(SoftmaxMode mode);

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (kernels/ops/nn/loss.cc): `reduction`
// (none, sum or mean, the default) and the optional `ignore_index`. INVALID_ARGUMENT
// "<op>: ..." for another reduction or a non-int ignore_index.
using ::remex::kernels::LossReduction;  // kernels/op_enums.h
struct LossAttrs {
  LossReduction reduction = LossReduction::kMean;
  std::optional<int64_t> ignore_index;
};
StatusOr<LossAttrs> LossAttrsOf(std::string_view op, const Attributes& attrs);
// Their input viewed as [n, c, d] (d: the product of the dims after C, 1 for a 2-D
// input), after checking the inputs: input float, target int32/int64 of shape
// [N, d1, ...], the optional weight of the input's dtype and shape [C].
struct LossView {
  int64_t n = 0, c = 0, d = 1;
  bool weighted = false;
};
StatusOr<LossView> LossViewOf(std::string_view op, std::span<const ShapeFnArg> in);

// Trilu (kernels/ops/tensor/diagonal.cc): the input as `batch` matrices of [rows, cols], the
// diagonal offset k (input 1, on the host; 0 when absent) and `upper` (0 or 1).
// INVALID_ARGUMENT "Trilu: ..." for a rank below 2, a k of other than one value or
// another upper.
struct TriluView {
  int64_t batch = 0, rows = 0, cols = 0, k = 0;
  bool upper = true;
};
StatusOr<TriluView> TriluViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);
// EyeLike (kernels/ops/tensor/diagonal.cc): the output dtype (attribute dtype, else the input's)
// and the diagonal k. INVALID_ARGUMENT "EyeLike: ..." for a dtype Remex does not hold.
struct EyeLikeAttrs {
  DType dtype = DType::kFloat32;
  int64_t k = 0;
};
StatusOr<EyeLikeAttrs> EyeLikeAttrsOf(const Attributes& attrs, DType input_dtype);

// CumSum (kernels/ops/math/cumsum.cc): x viewed as [outer, n, inner] around the axis (input 1,
// on the host), and the exclusive and reverse attributes. INVALID_ARGUMENT "CumSum: ..."
// for a dtype CumSum does not take, a bad axis or flag.
struct CumSumView {
  int64_t outer = 1, n = 1, inner = 1;
  bool exclusive = false, reverse = false;
};
StatusOr<CumSumView> CumSumViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// ScatterElements and Scatter (kernels/ops/tensor/scatter.cc): the normalised axis and the
// reduction, after checking the inputs (indices of data's rank and at most its dims,
// updates of the indices' shape and data's dtype). INVALID_ARGUMENT "<op>: ...".
using ::remex::kernels::ScatterReduction;  // kernels/op_enums.h
struct ScatterView {
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
};
StatusOr<ScatterView> ScatterViewOf(std::string_view op, const Attributes& attrs, std::span<const ShapeFnArg> in);

// OneHot (kernels/ops/generator/generate.cc): depth (input 1, read on the host), the output's shape
// (indices' with depth inserted at axis) and the indices seen as [outer, inner] around
// it. INVALID_ARGUMENT "OneHot: ..." for a depth below 1 or unknown, values of other
// than 2 elements, a bad axis.
struct OneHotView {
  int64_t depth = 0, outer = 1, inner = 1;
  Shape shape;
};
StatusOr<OneHotView> OneHotViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// HannWindow, HammingWindow and BlackmanWindow (kernels/ops/signal/window.cc): the window (from
// `op`), the output dtype (output_datatype), periodic and the size (input 0, one int32
// or int64 value on the host, >= 0). INVALID_ARGUMENT "<op>: ..." otherwise.
struct WindowView {
  window::WindowKind kind = window::WindowKind::kHann;
  DType dtype = DType::kFloat32;
  bool periodic = true;
  int64_t size = 0;
};
StatusOr<WindowView> WindowViewOf(std::string_view op, const Attributes& attrs, std::span<const ShapeFnArg> in);

// MeanVarianceNormalization (kernels/ops/nn/mvn.cc): X (float16/32/64, rank <= 8)
// split by `axes` (default [0, 2, 3]) into groups normalised on their own.
// INVALID_ARGUMENT "MeanVarianceNormalization: ..." for another dtype, a bad or
// repeated axis.
StatusOr<seqnorm::MvnPlan> MvnPlanOf(const Attributes& attrs, std::span<const ShapeFnArg> in);
// ReverseSequence (kernels/ops/tensor/reverse_sequence.cc): input [dim0, dim1, inner], the batch and
// time extents and the element count, after checking the axes (0 and 1), input's rank
// (>= 2) and sequence_lens (int64 [batch]). INVALID_ARGUMENT "ReverseSequence: ...".
struct ReverseSequenceView {
  seqnorm::ReversePlan plan;
  int64_t batch = 0, time = 0, total = 0;
};
StatusOr<ReverseSequenceView> ReverseSequenceViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// Det (kernels/ops/math/determinant.cc): X [*, M, M] (float16/32/64) as `batch` matrices of m x m; Y's
// shape is X's batch dims. INVALID_ARGUMENT "Det: ..." otherwise.
struct DetView {
  int64_t batch = 0, m = 0;
  Shape shape;
};
StatusOr<DetView> DetViewOf(std::span<const ShapeFnArg> in);

// Einsum (kernels/ops/math/einsum.cc): the index plan of `equation` for the inputs' shapes and
// the output's shape. INVALID_ARGUMENT "Einsum: ..." for a malformed equation, labels
// that do not fit the inputs, or a dtype other than float16/32/64, int32, int64.
struct EinsumView {
  einsum::EinsumPlan plan;
  Shape shape;
};
StatusOr<EinsumView> EinsumViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// Pad's `mode`: constant (the default), reflect or edge (kernels/ops/tensor/pad.cc).
// INVALID_ARGUMENT "Pad: unknown mode '<mode>' (constant, reflect or edge)".
using ::remex::kernels::PadMode;  // kernels/op_enums.h
StatusOr<PadMode> PadModeOf(const Attributes& attrs);
// Pad's float attribute `value` (before opset 11) as an element of `dtype`, as the CPU
// kernel converts it: float types converted (float16 from double directly), integers
// saturated (NaN: 0), bool v != 0. The element's bytes, zero-extended (kernels/ops/tensor/pad.cc).
// UNIMPLEMENTED "Pad: ..." for a dtype Remex does not hold.
StatusOr<uint64_t> PadValueBits(DType dtype, double v);

// Reduce*: which input dimensions a node reduces (from the axes attribute or input 1,
// whose data must be in host memory), and whether they stay as extent 1; the axes are
// checked (in range, not repeated) (kernels/ops/reduction/reduce.cc).
struct ReduceSpec {
  std::vector<bool> reduced;  // Per input dimension.
  bool keepdims = true;
};
StatusOr<ReduceSpec> ParseReduce(std::string_view op, const Attributes& attrs,
                                 std::span<const ShapeFnArg> in);

// TopK's axis, largest, sorted and (opset 1) k attributes (kernels/ops/reduction/reduce.cc).
Status CheckTopKAttrs(const Attributes& attrs);

// MaxPool's window attributes (kernel_shape required, ceil_mode read) and
// storage_order (0 or 1) (kernels/ops/nn/pool.cc). INVALID_ARGUMENT "MaxPool: ...".
struct MaxPoolAttrs {
  WindowAttrs window;
  int64_t storage_order = 0;
};
StatusOr<MaxPoolAttrs> ParseMaxPoolAttrs(const Attributes& attrs);

// AveragePool's window attributes (kernel_shape required, ceil_mode read) and
// count_include_pad (0 or 1) (kernels/ops/nn/pool.cc). INVALID_ARGUMENT "AveragePool: ...".
struct AveragePoolAttrs {
  WindowAttrs window;
  bool count_include_pad = false;
};
StatusOr<AveragePoolAttrs> ParseAveragePoolAttrs(const Attributes& attrs);

// GlobalLpPool-2's p: an integer in [1, 64], default 2 (kernels/ops/nn/pool.cc).
// INVALID_ARGUMENT "GlobalLpPool: ...".
StatusOr<int> ParseGlobalLpPoolP(const Attributes& attrs);

// LpNormalization-1 on X of `shape`: X seen as [outer, n, inner] around `axis`
// (default -1; negative from the end), p 1 or 2, the only orders ONNX defines
// (kernels/ops/nn/norm.cc). INVALID_ARGUMENT "LpNormalization: ...".
struct LpNormParams {
  int64_t outer = 1, n = 1, inner = 1;
  int p = 2;
};
StatusOr<LpNormParams> ParseLpNormalization(const Attributes& attrs, const Shape& shape);

// LRN's attributes; size must be positive (kernels/ops/nn/pool.cc).
struct LrnAttrs {
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
  int64_t size = 1;
};
StatusOr<LrnAttrs> ParseLrnAttrs(const Attributes& attrs);

// Gemm's alpha, beta, transA and transB (kernels/ops/math/matmul.cc).
struct GemmAttrs {
  float alpha = 1.0f, beta = 1.0f;
  bool trans_a = false, trans_b = false;
};
StatusOr<GemmAttrs> ParseGemmAttrs(const Attributes& attrs);

// Resize-10/11/13 (kernels/ops/image/resize.cc), one registry entry each: `definition` is the
// entry's since_version (10, 11 or 13; others refused); the attributes are mode,
// coordinate_transformation_mode (tf_half_pixel_for_nn in Resize-11 only),
// nearest_mode, cubic_coeff_a (finite), exclude_outside (0 or 1) and
// extrapolation_value, with ONNX's defaults. Resize-10 takes mode nearest or linear
// only; its coordinates are asymmetric and its nearest is ResizeNearest::kSimple.
// INVALID_ARGUMENT "Resize: ...".
using ::remex::kernels::ResizeCoord;    // kernels/op_enums.h
using ::remex::kernels::ResizeMode;     // kernels/op_enums.h
using ::remex::kernels::ResizeNearest;  // kernels/op_enums.h
struct ResizeAttrs {
  int64_t version = 13;  // The definition: 10, 11 or 13.
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};
StatusOr<ResizeAttrs> ParseResizeAttrs(int definition, const Attributes& attrs);
// The extrapolation value as an element of `dtype`, as the CPU kernel stores it: float
// types converted (float16 through float32), integers rounded to nearest and saturated
// (NaN: 0), bool v != 0. The element's bytes, zero-extended; 0 for a dtype Remex does
// not hold (kernels/ops/image/resize.cc).
uint64_t ResizeExtrapolationBits(DType dtype, double v);

// LSTM, GRU and RNN (kernels/ops/rnn/rnn_def.cc): an activation function with its alpha and beta
// (ONNX's defaults where the node gives none).
using ::remex::kernels::RnnAct;  // kernels/ops/rnn/rnn_activation.h
struct RnnActivation {
  RnnAct kind = RnnAct::kTanh;
  float alpha = 0;
  float beta = 0;
};
// The attributes of an LSTM, GRU or RNN node. `acts` holds the activations per
// direction (RNN 1, GRU 2, LSTM 3), forward's first; a bidirectional node's single
// list is repeated for the reverse direction.
using ::remex::kernels::RnnCell;  // kernels/op_enums.h
struct RnnAttrs {
  RnnCell cell = RnnCell::kRnn;  // From `op`.
  int gates = 1;                 // G: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
  int num_acts = 1;              // Activations per direction: RNN 1, GRU 2, LSTM 3.
  int64_t hidden_size = -1;  // -1: taken from W.
  int num_directions = 1;
  bool reverse = false;  // direction == "reverse".
  std::vector<RnnActivation> acts;
  bool has_clip = false;
  float clip = 0;
  bool linear_before_reset = false;  // GRU only.
  bool input_forget = false;         // LSTM only.
  int64_t layout = 0;
};
// `op` is "LSTM", "GRU" or "RNN" (INVALID_ARGUMENT otherwise). UNIMPLEMENTED for
// output_sequence != 0 (opset 1).
StatusOr<RnnAttrs> ParseRnnAttrs(std::string_view op, const Attributes& attrs);

// FusedConv (kernels/ops/nn/conv.cc): the epilogue attributes `activation` and
// `activation_params` (kernels/conv_epilogue.h). INVALID_ARGUMENT naming `op` for an
// unknown activation or a wrong parameter count (LeakyRelu [alpha], Clip [min, max],
// HardSigmoid [alpha, beta], Swish [alpha], the others (Gelu among them) none).
struct ConvEpilogue {
  ConvActivation activation = ConvActivation::kNone;
  float alpha = 0;
  float beta = 0;
};
StatusOr<ConvEpilogue> ParseConvEpilogue(std::string_view op, const Attributes& attrs);

// BitShift (kernels/ops/elementwise/bitshift.cc): `direction`, required, "LEFT" (true) or "RIGHT"
// (false). INVALID_ARGUMENT "BitShift: ..." when absent, not a string or another value.
StatusOr<bool> BitShiftLeftOf(const Attributes& attrs);

// GatherND and ScatterND (kernels/ops/tensor/gather_nd.cc): data seen as `batch` blocks of
// `batch_stride` elements, each indexed by `tuples` index tuples of `k` int64 values
// (the last dim of indices) naming a slice of `slice` elements (data's dims after
// batch_dims + k) through the data dims [batch_dims, batch_dims + k) (`extents`, with
// element `strides` inside a block). `shape`: GatherND's output, which is also
// ScatterND's updates shape (indices.shape[:-1] + data.shape[batch_dims + k:]).
// Checks: data rank >= 1, indices int64 of rank >= 1 with 1 <= k <= rank - batch_dims,
// 0 <= batch_dims < min(ranks), the first batch_dims dims equal. INVALID_ARGUMENT
// "<op>: ...".
struct GatherNdView {
  int64_t batch = 1, batch_stride = 0, tuples = 0, slice = 1;
  int k = 0;
  std::vector<int64_t> extents, strides;
  Shape shape;
};
StatusOr<GatherNdView> GatherNdViewOf(std::string_view op, int64_t batch_dims, const ShapeFnArg& data,
                                      const ShapeFnArg& indices);
// ScatterND's `reduction`: none (the default), add or mul (opset 16); add and mul take
// numeric dtypes only. INVALID_ARGUMENT "ScatterND: ..." otherwise.
StatusOr<ScatterReduction> ScatterNdReductionOf(const Attributes& attrs, DType dtype);

// NonZero (kernels/ops/tensor/nonzero.cc): the coordinates of x's nonzero elements (x in host
// memory; NaN is nonzero, -0.0 zero), row-major [max(rank, 1), nnz]: a scalar counts as
// a 1-element vector. UNIMPLEMENTED for a dtype Remex does not hold.
StatusOr<std::vector<int64_t>> NonZeroCoordinates(const ShapeFnArg& x);

// Unique (kernels/ops/tensor/unique.cc): everything Unique-11 outputs for X (host memory) and the
// `axis` / `sorted` attributes: Y's bytes and shape, indices, inverse_indices and counts.
// INVALID_ARGUMENT "Unique: ..." for a bad axis or sorted, UNIMPLEMENTED for a dtype
// Remex does not hold.
struct UniqueResult {
  std::vector<uint8_t> y;
  Shape y_shape;
  std::vector<int64_t> indices, inverse, counts;
};
StatusOr<UniqueResult> UniqueOf(const Attributes& attrs, const ShapeFnArg& x);

// Compress (kernels/ops/tensor/nonzero.cc): input seen as [outer, extent, inner] around the axis
// (flattened to [1, size, 1] without one), the positions along it that condition (bool,
// 1-D, host memory) keeps, ascending, and the output's shape. Condition entries past the
// extent must be false ("out of range" otherwise); the extent's positions past the
// condition are dropped. `negative_axis`: Compress-11's axis in [-rank, rank) (else
// Compress-9's [0, rank)). INVALID_ARGUMENT "Compress: ...".
struct CompressView {
  int64_t outer = 1, extent = 0, inner = 1;
  std::vector<int64_t> kept;
  Shape shape;
};
StatusOr<CompressView> CompressViewOf(bool negative_axis, const Attributes& attrs, std::span<const ShapeFnArg> in);


// FusedAttention (kernels/ops/math/attention.cc): `scale` (float, default 1) and the
// four axis orders q_perm, k_perm, v_perm, y_perm, each empty (the identity) or a
// permutation of [0, its size).
struct AttentionAttrs {
  float scale = 1.0f;
  std::vector<int64_t> perm[4];  // q, k, v, y
};
StatusOr<AttentionAttrs> AttentionAttrsOf(const Attributes& attrs);
// One call's geometry (FusedAttention's inputs Q, K, V and the optional mask, checked as
// its shape function does): the logical dims and, per operand, the element strides of
// its logical axes in the stored tensor. The perms are filled in (the identity where
// empty); the output is stored as Transpose(Y [batch..., Sq, Dv], y_perm).
struct AttentionGeometry {
  AttentionAttrs attrs;
  size_t rank = 0;  // 3 or 4
  Shape batch;      // the logical batch dims
  int64_t batches = 1, sq = 0, sk = 0, d = 0, dv = 0;
  Shape y_shape;                     // the stored output
  std::vector<int64_t> stride[4];    // q, k, v, y: per logical axis
  std::vector<int64_t> mask_stride;  // per logical axis of [batch..., Sq, Sk]; 0 where it broadcasts
  bool has_mask = false;
};
StatusOr<AttentionGeometry> AttentionGeometryOf(const AttentionAttrs& attrs, std::span<const ShapeFnArg> in);

}  // namespace remex::kernels::internal
