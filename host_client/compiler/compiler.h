// The compiler pipeline: graph IR -> symbolic shape/type inference with constant
// folding -> dead-code elimination -> placement (host or device) -> codegen to a VM
// executable.
//
// Symbolic shapes. Every dynamic dimension of a graph input is a symbol: its ONNX
// dim_param ("W"), or "<input>:<axis>" when the model gives none; inputs that share
// a dim_param share the symbol. Symbols may have bounds (CompileOptions::bounds).
// Inference evaluates each op's own shape function at a few assignments of the
// symbols ("samples", chosen inside the bounds), carrying the values of small integer
// tensors (Shape -> Gather -> Concat -> Reshape chains) along, so it reaches through
// data-dependent shape functions without a symbolic rewrite of each op. From the
// samples it knows per dimension whether it is static, and names dynamic ones by the
// simplest expression that fits every sample ("W/4", "N*W", "H+1"; "?" otherwise).
// Bounds of derived dims come from evaluating at the symbols' lower and upper bounds
// (exact for shape functions monotone in their input dims, which all ops here are).
// Compile-time shapes are never trusted at run time where an input dim is dynamic:
// the VM reruns the shape function (InvokeShapeFunc), so one executable serves every
// input shape.
//
// Placement. A node whose outputs are small integer tensors (at most 64 elements,
// static shape) and which reads only constants, host values or shapes (Shape, Size)
// runs on the host: shape arithmetic then costs no device-to-host copy. Inputs an
// op declares ShapeDep::kData are read from host memory; a device value feeding one
// is copied by an explicit, counted CopyToHost.
//
// Control flow. If and Loop regions are emitted inline in the function: branches
// behind If/Goto, the loop body between a LoopCheck and a back-edge Goto, with
// loop-carried values moved in parallel at the end of each iteration and scan
// outputs gathered into tensor lists and stacked.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "host_client/compiler/dispatch.h"
#include "host_client/compiler/graph.h"
#include "host_client/compiler/passes/layout.h"
#include "host_client/compiler/bytecode/memory_plan.h"
#include "host_client/compiler/passes/precision.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

struct CompileOptions {
  // Overrides of graph input shapes (e.g. {"x", {1, 3, 48, 192}}); dims left dynamic
  // are computed at run time by shape functions.
  std::map<std::string, Shape> input_shapes;
  // Bounds of input symbols by name (e.g. {"W", {32, 2048}}); checked by the VM at
  // every call, and used for the bounds of derived dims.
  std::map<std::string, DimBounds> bounds;
  // Evaluate nodes whose inputs are all constants at compile time.
  bool fold_constants = true;
  // Fuse chains of elementwise float ops into FusedElementwise nodes (fusion.h).
  bool fuse_elementwise = true;
  // Fuse Conv with the residual Add and the activation after it into FusedConv nodes,
  // and MatMul by a constant with the bias Add and the activation after it into
  // FusedMatMul nodes (epilogue_fusion.h); runs before elementwise fusion.
  bool fuse_epilogues = true;
  // Place small integer shape computations on the host.
  bool place_on_host = true;
  // zstd level of the executable's constant chunks.
  int zstd_level = 3;
  // Activation layout between convolutions (see host_client/compiler/passes/layout.h); graph inputs
  // and outputs stay NCHW either way.
  Layout layout = Layout::kNchw;
  // Activation and weight dtype: kFloat32 (as the model is) or kFloat16
  // (host_client/compiler/passes/precision.h; the graph's inputs and outputs stay float32).
  DType dtype = DType::kFloat32;
  // Shape buckets (host_client/compiler/dispatch.h): one clone of the function per bucket of
  // these symbols' values, behind a dispatcher. Empty: one generic function.
  std::vector<DispatchSpec> dispatch;
  // With `dispatch`: a shape outside every bucket is an error, not the generic path.
  bool strict_dispatch = false;
  // Plan the memory of tensors with bounded sizes statically (memory_plan.h). On in
  // bucket clones.
  bool plan_memory = false;
};

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
  int fused_kernels = 0;  // FusedElementwise nodes made by fusion
  int nodes_fused = 0;    // nodes they replace
  int fused_convs = 0;     // FusedConv nodes made by epilogue fusion
  int fused_matmuls = 0;   // FusedMatMul nodes made by epilogue fusion
  int epilogue_nodes = 0;  // Add and activation nodes both absorbed
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

// Infers dtypes and (symbolic) shapes through the graph and its regions with the
// registry's shape functions; with `fold_constants`, a node whose inputs are all
// constants is evaluated with its CPU kernel and replaced by its results. Dims stay
// unknown (-1, "?") where they depend on values only known at run time. Returns the
// number of nodes folded; errors name the node.
StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants,
                          const std::map<std::string, DimBounds>& bounds = {});

// Removes nodes and constants that no graph output depends on. Returns nodes removed.
int EliminateDeadCode(Graph& graph);

// Marks the nodes and values that run on the host (see the placement rule above).
// Returns the number of host nodes.
int PlaceOnHost(Graph& graph, const kernels::KernelRegistry& registry);

// Lowers the graph to an executable with one function, "main".
StatusOr<vm::ExecutableDef> Codegen(const Graph& graph, const kernels::KernelRegistry& registry);

// The whole pipeline from an ONNX file.
StatusOr<vm::ExecutableDef> CompileOnnxFile(const std::string& path,
                                            const kernels::KernelRegistry& registry,
                                            const CompileOptions& options,
                                            CompileStats* stats = nullptr);
// The whole pipeline from an imported graph.
StatusOr<vm::ExecutableDef> CompileGraph(Graph graph, const kernels::KernelRegistry& registry,
                                         const CompileOptions& options,
                                         CompileStats* stats = nullptr);

// CompileGraph with options.dispatch: the generic function, one clone per bucket and
// the dispatcher, linked into one executable with shared constants (dispatch.h).
// INVALID_ARGUMENT when a spec names no symbolic input dim or leaves no bucket.
StatusOr<vm::ExecutableDef> CompileDispatched(const Graph& graph, const kernels::KernelRegistry& registry,
                                              const CompileOptions& options, CompileStats* stats);

// Kernels, instructions, encoded bytes, shape functions and arenas of function
// `index` of `def`; INVALID_ARGUMENT when its code does not encode.
StatusOr<FunctionStats> DescribeFunction(const vm::ExecutableDef& def, size_t index, std::string role);

// "[N, 3, H/2, 64]" from a value's shape and symbolic dims.
std::string SymbolicShapeString(const Value& v);

}  // namespace remex::compiler
