// The compiler: an ONNX model to a Remex executable (VM bytecode, vm/executable.h).
//
// One file per stage, each with its own header:
//   onnx_import.h            ONNX protobuf -> graph IR (graph.h), arity checked against
//                            each op's OpDef
//   shape_inference.h        symbolic shapes and dtypes, constant folding
//   passes/dead_code.h       dead-code elimination
//   passes/layout.h          NCHW -> NHWC between convolutions (--layout)
//   passes/precision.h       float32 -> float16 activations and weights (--dtype)
//   passes/epilogue_fusion.h Conv/MatMul + bias/residual Add + activation
//   passes/elementwise_fusion.h chains of elementwise ops -> FusedElementwise
//   passes/placement.h       small integer shape arithmetic on the host
//   codegen.h                graph -> one VM function
//   bytecode/memory_plan.h   static memory plan of a function (a pass over bytecode)
//   pipeline.h               the stages above in order: one function
//   buckets.h, dispatch.h    shape-bucket dispatch: the pipeline once per bucket
//   bytecode/link.h          linking separately compiled functions into one
//                            executable (a pass over bytecode)
// This header is the entry point: CompileGraph runs the pipeline, or dispatch when
// CompileOptions::dispatch names buckets. Dependencies run one way: compiler.cc ->
// dispatch.cc -> pipeline.cc -> the stages.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "host_client/compiler/options.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

// A symbolic dim of a graph input: its symbol (the ONNX dim_param, or "INPUT:AXIS"
// when the model gives none) and its site "INPUT:AXIS".
struct InputSymbol {
  std::string name;
  std::string site;
};

// The symbolic dims of the graph's inputs, in input then axis order; a symbol shared
// by several dims appears once per dim.
std::vector<InputSymbol> InputSymbols(const Graph& graph);

// Rewrites the symbols options.bounds and options.dispatch name into the model's own:
// each may be named by its symbol ("W", "p2o.DynamicDimension.1") or by a site
// ("x:3"). INVALID_ARGUMENT naming the flag and listing the model's symbols when one
// names no symbolic input dim, or when two bounds name one symbol.
Status ResolveSymbolNames(const Graph& graph, CompileOptions& options);

// The whole pipeline from an imported graph (symbol names resolved first): one function ("main"), or with
// options.dispatch a dispatcher, one clone per bucket and the generic function.
// Errors (INVALID_ARGUMENT, UNIMPLEMENTED) name the node, the input or the option.
StatusOr<vm::ExecutableDef> CompileGraph(Graph graph, const kernels::KernelRegistry& registry,
                                         const CompileOptions& options,
                                         CompileStats* stats = nullptr);

// The whole pipeline from an ONNX file (onnx_import.h, then CompileGraph).
StatusOr<vm::ExecutableDef> CompileOnnxFile(const std::string& path,
                                            const kernels::KernelRegistry& registry,
                                            const CompileOptions& options,
                                            CompileStats* stats = nullptr);

}  // namespace remex::compiler
