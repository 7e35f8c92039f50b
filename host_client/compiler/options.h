// What a compile is asked to do (CompileOptions) and what it did (CompileStats): the
// one definition shared by every stage, the tooling layer and the front ends.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "host_client/compiler/buckets.h"
#include "host_client/compiler/bytecode/memory_plan.h"
#include "host_client/compiler/graph.h"
#include "host_client/compiler/passes/layout.h"
#include "host_client/compiler/passes/precision.h"

namespace remex::compiler {

// Per node, by its name in the compiled graph (KernelEntry::node_name, as the profiler
// names it): the op's tunable attributes (kernels::OpTraits::tunable) and their values.
using NodeAttrs = std::map<std::string, std::map<std::string, int64_t>>;

// The choices tuning makes per shape bucket (`remex tune`, host_client/tooling/tuning.h),
// each one of CompileOptions' own fields below, which hold their meaning.
struct TunedChoices {
  Layout layout = Layout::kNchw;
  DType dtype = DType::kUndefined;
  bool fold_batchnorm = true;
  bool fuse_epilogues = true;
  bool fuse_elementwise = true;
  int compute_threads = 0;
  NodeAttrs node_attrs;
  bool operator==(const TunedChoices&) const = default;
};

struct CompileOptions {
  // Overrides of graph input shapes (e.g. {"x", {1, 3, 48, 192}}); dims left dynamic
  // are computed at run time by shape functions.
  std::map<std::string, Shape> input_shapes;
  // Bounds of input symbols by name (e.g. {"W", {32, 2048}}); checked by the VM at
  // every call, and used for the bounds of derived dims.
  std::map<std::string, DimBounds> bounds;
  // Evaluate nodes whose inputs are all constants at compile time.
  bool fold_constants = true;
  // Compute once what several nodes compute alike (passes/common_subexpressions.h).
  bool eliminate_common_subexpressions = true;
  // Fold inference BatchNormalization into the Conv before it (its weights and bias;
  // passes/batchnorm_folding.h), which then takes the activation after it as its
  // epilogue; with fuse_elementwise, the others become a Mul and an Add that fuse with
  // the ops around them.
  bool fold_batchnorm = true;
  // Fuse chains of elementwise float ops into FusedElementwise nodes (passes/elementwise_fusion.h),
  // after recognising decomposed HardSwish, SiLU / Swish and GELU activations
  // (passes/activation_patterns.h), which epilogue fusion can then take too.
  bool fuse_elementwise = true;
  // Fuse Conv with the residual Add and the activation after it into FusedConv nodes,
  // and MatMul by a constant with the bias Add and the activation after it into
  // FusedMatMul nodes (passes/epilogue_fusion.h); runs before elementwise fusion.
  bool fuse_epilogues = true;
  // With fuse_epilogues: fuse scaled dot-product attention (MatMul, scale, mask Add,
  // Softmax, MatMul, and the head Transposes around them) into FusedAttention nodes
  // (passes/attention_fusion.h). tooling::CompileForDevice sets it for the CPU device;
  // the CUDA device's FusedAttention kernel is not yet measured against the unfused graph.
  bool fuse_attention = false;
  // Place small integer shape computations on the host.
  bool place_on_host = true;
  // zstd level of the executable's constant chunks.
  int zstd_level = 3;
  // Activation layout between convolutions (see host_client/compiler/passes/layout.h); graph inputs
  // and outputs stay NCHW either way.
  Layout layout = Layout::kNchw;
  // With layout NHWC: float MaxPool, AveragePool and GlobalAveragePool reading a value
  // held channels-last run on it (LayoutOptions::pooling: their CPU kernels take NHWC,
  // the CUDA device's do not). tooling::CompileForDevice sets it for the CPU device.
  bool nhwc_pooling = false;
  // Activation and weight dtype (host_client/compiler/passes/precision.h): kUndefined, the
  // model's own; kFloat16, a float32 model's activations and weights in float16
  // (ConvertToFloat16); kFloat32, a float16 model's in float32 (ConvertToFloat32, before
  // every other rewrite). The graph's inputs and outputs keep their dtypes.
  DType dtype = DType::kUndefined;
  // Shape buckets (buckets.h, dispatch.h): one clone of the function per bucket of
  // these symbols' values, behind a dispatcher. Empty: one generic function.
  std::vector<DispatchSpec> dispatch;
  // With `dispatch`: a shape outside every bucket is an error, not the generic path.
  bool strict_dispatch = false;
  // Plan the memory of tensors with bounded sizes statically (bytecode/memory_plan.h). On in
  // bucket clones.
  bool plan_memory = false;
  // The CPU compute threads the function's kernels use at most (vm::FunctionDef::
  // compute_threads); 0: the device's own. 0 to kernels::kMaxCpuComputeThreads.
  int compute_threads = 0;
  // Written into the named nodes' attributes after every rewrite, before code
  // generation: per-node choices of one device's kernels (cuDNN's or oneDNN's algorithm, ...).
  // INVALID_ARGUMENT for a node the compiled graph lacks, an attribute its op does not
  // list as tunable, or a value out of the op's range.
  NodeAttrs node_attrs;
  // Per function, by its name: a bucket's ("main[W=33..64]", Bucket::FunctionName), or
  // "main" for a model compiled without `dispatch`: the choices it compiles with in
  // place of the fields above (`remex tune` and `remex compile --tuning-log` set them).
  // The generic function behind the buckets keeps the fields' own. INVALID_ARGUMENT
  // for a name that is no such function.
  std::map<std::string, TunedChoices> bucket_choices;
};

// The tunable fields of `options`, and `choices` written into them.
inline TunedChoices ChoicesOf(const CompileOptions& options) {
  return {options.layout,           options.dtype,           options.fold_batchnorm, options.fuse_epilogues,
          options.fuse_elementwise, options.compute_threads, options.node_attrs};
}
inline void ApplyChoices(const TunedChoices& choices, CompileOptions& options) {
  options.layout = choices.layout;
  options.dtype = choices.dtype;
  options.fold_batchnorm = choices.fold_batchnorm;
  options.fuse_epilogues = choices.fuse_epilogues;
  options.fuse_elementwise = choices.fuse_elementwise;
  options.compute_threads = choices.compute_threads;
  options.node_attrs = choices.node_attrs;
}

// One function of a compiled executable, as `remex compile --stats` lists it.
struct FunctionStats {
  std::string name;
  std::string role;  // "dispatcher", "bucket", "generic"
  int kernels = 0;   // kernel-table entries the function uses
  int instructions = 0;
  uint64_t code_bytes = 0;  // encoded bytecode
  int runtime_shape_functions = 0;
  MemoryPlanStats memory;
};

struct CompileStats {
  int nodes_in = 0;
  int nodes_folded = 0;
  int nodes_removed = 0;
  int common_subexpressions = 0;  // nodes dropped for an earlier one computing the same
  int batchnorms_folded = 0;  // BatchNormalization nodes folded into Conv weights
  int batchnorms_decomposed = 0;  // the others, rewritten as Mul and Add (DecomposeBatchNormalization)
  int hardswish_recognized = 0;  // decomposed HardSwish chains made one HardSwish node
  int swish_recognized = 0;      // decomposed SiLU / Swish (Sigmoid, Mul) made one Swish node
  int gelu_recognized = 0;       // decomposed erf GELU (Div, Erf, Add, Mul) made one Gelu node
  int activation_nodes_absorbed = 0;  // nodes those recognised activations replace, less one each
  int fused_kernels = 0;  // FusedElementwise nodes made by fusion
  int quantized_adds = 0;  // FusedQLinearAdd nodes (passes/quantized_add.h), each of 4 or 5 nodes
  int nodes_fused = 0;    // nodes they replace
  int fused_convs = 0;     // FusedConv nodes made by epilogue fusion
  int fused_matmuls = 0;   // FusedMatMul nodes made by epilogue fusion
  int fused_matmul_integers = 0;  // FusedMatMulInteger nodes made by epilogue fusion
  int epilogue_nodes = 0;  // Add and activation nodes both absorbed
  int fused_attentions = 0;  // FusedAttention nodes (passes/attention_fusion.h)
  int attention_nodes = 0;   // nodes they replace, Transposes included
  int kernels = 0;
  int host_kernels = 0;             // kernels placed on the host
  int runtime_shape_functions = 0;  // nodes whose output shapes are known only at run time
  int copies_to_host = 0;           // explicit CopyToHost instructions
  uint64_t constant_bytes = 0;
  int transposes = 0;           // Transpose kernels, the model's own included
  int transposes_at_edges = 0;  // of those, reading a graph input or writing an output
  LayoutStats layout;           // what the layout pass did (CompileOptions::layout)
  MemoryPlanStats memory;       // CompileOptions::plan_memory
  PrecisionStats precision;     // CompileOptions::dtype
  // Every function of the executable, and with dispatch: the bucket count, the bytes
  // the constants would take if each clone kept its own, and the compile's wall time.
  std::vector<FunctionStats> functions;
  int buckets = 0;
  uint64_t constant_bytes_unshared = 0;
  double compile_seconds = 0;
};

}  // namespace remex::compiler
