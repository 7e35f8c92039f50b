// The layout pass: runs convolution-heavy graphs channels-last (NHWC) end to end.
//
// ONNX defines Conv, DepthToSpace and SpaceToDepth on NCHW tensors. Channels-last
// activations let oneDNN's (and, later, cuDNN's tensor-core) convolutions run without
// reordering X and Y around every call. The pass rewrites the top-level graph so that
// 4-D values between such ops are held as NHWC ([N, H, W, C]) and the layout changes
// only where the graph meets the outside:
//   - Conv with a 4-D float32 or float16 X (2-D convolution; a model exported in
//     float16 runs channels-last as its float32 twin does), QLinearConv and ConvInteger
//     with a 4-D uint8 or int8 X (oneDNN's int8 convolutions read and write
//     channels-last: kernels/ops/quantization/int8_dnnl.h), DepthToSpace and
//     SpaceToDepth get the internal attribute `layout` = "NHWC" (see kernels/ops/nn/conv.cc,
//     kernels/ops/quantization/qlinear.cc, kernels/ops/tensor/depth_space.cc); W, B and
//     the quantization parameters stay as they are (ONNX layouts). The CUDA device's
//     integer convolutions refuse the attribute (UNIMPLEMENTED).
//   - QuantizeLinear and DequantizeLinear whose scale and zero point hold one value, and
//     DynamicQuantizeLinear (its y_scale and y_zero_point are scalars in any layout),
//     reading a value held as NHWC, run on it unchanged.
//   - Layout-agnostic ops (kernels.h OpTraits::layout_agnostic: the elementwise ones,
//     Add, Mul, Relu, LeakyRelu, Clip, Where, Cast, ...) whose non-constant
//     inputs are all 4-D (or scalars) and at least one of them NHWC run on the NHWC
//     values unchanged: same-layout operands broadcast exactly as the NCHW ones did.
//     A constant operand of rank 1 to 4 with more than one element (a per-channel
//     [C, 1, 1] bias) is transformed at compile time: padded to rank 4 on the left
//     (ONNX broadcasting aligns trailing dims) and permuted to NHWC ([1, 1, 1, C]).
//   - Concat of 4-D values, at least one held as NHWC, runs on the NHWC values with its
//     axis renumbered (1, the channels, becomes 3): DenseNet's blocks stay channels-last.
//   - With LayoutOptions::pooling, float MaxPool (without Indices), AveragePool and
//     GlobalAveragePool whose X is held as NHWC get `layout` = "NHWC" too
//     (kernels/ops/nn/pool.cc; the CPU device's kernels take it, the CUDA device's
//     refuse it, so that tooling::CompileForDevice asks for it on the CPU device only).
//   - A Transpose NCHW->NHWC (perm [0, 2, 3, 1]) is inserted where an NHWC op reads an
//     NCHW value (a graph input, or the result of an op that cannot run NHWC), and a
//     Transpose NHWC->NCHW (perm [0, 3, 1, 2]) where an NCHW reader (any other op, an
//     If/Loop region, a graph output) needs an NHWC value. Each such value is
//     transposed once, however many readers it has.
// Value shapes (static dims, symbolic dims, bounds, inference samples) are permuted
// with the data, and every rewritten node with static inputs is checked against its
// op's shape function, so codegen sees consistent types. Ops inside If/Loop regions
// are left NCHW.
#pragma once

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

enum class Layout : uint8_t {
  kNchw = 0,  // ONNX's layout; the pass does nothing.
  kNhwc = 1,  // Channels-last between convolutions (see above).
  // Not chosen (no --layout): the device the model runs on decides
  // (tooling::CompileForDevice: NHWC for int8 convolutions on a device whose int8
  // kernels are channels-last, for float convolutions on one whose float kernels are,
  // else NCHW). The compiler itself compiles it as kNchw.
  kAuto = 2,
};

// "NCHW" / "NHWC" (case-insensitive); "" and "auto" give kAuto; INVALID_ARGUMENT
// otherwise.
StatusOr<Layout> ParseLayout(std::string_view text);
// "NCHW", "NHWC", "auto": what ParseLayout reads back.
const char* LayoutName(Layout layout);

struct LayoutOptions {
  // Float pooling follows its NHWC input (see above); off: it reads NCHW.
  bool pooling = false;
};

struct LayoutStats {
  int nodes_nhwc = 0;          // nodes rewritten to run on NHWC values
  int constants_permuted = 0;  // constant operands transformed at compile time
  int transposes_at_edges = 0;  // layout changes of graph inputs and outputs
  int transposes_in_body = 0;   // layout changes around ops that cannot run NHWC
};

// Rewrites `graph` (after shape inference and dead-code elimination, before
// placement) to run channels-last; does nothing to a graph without a 2-D Conv on a
// float32 or float16 X, a 2-D QLinearConv, ConvInteger or MaxPool on a uint8 or int8 X
// (MaxPool's CPU kernel only: an int8 model runs NHWC on the CPU alone), or a DepthToSpace or
// SpaceToDepth on a 4-D value. INTERNAL when a rewritten node's
// shape function disagrees with the permuted types (a bug in the pass, never the
// model's).
StatusOr<LayoutStats> ConvertToNhwc(Graph& graph, const kernels::KernelRegistry& registry,
                                    LayoutOptions options = {});

// Transpose nodes of a graph (top level and regions), and how many of them read a
// graph input or write a graph output.
struct TransposeCount {
  int total = 0;
  int at_edges = 0;
};
TransposeCount CountTransposes(const Graph& graph);

}  // namespace remex::compiler
