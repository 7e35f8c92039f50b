// The compiler pipeline: graph IR -> shape/type inference -> constant folding ->
// dead-code elimination -> codegen to a VM executable.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "host_client/graph.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

struct CompileOptions {
  // Overrides of graph input shapes (e.g. {"x", {1, 3, 48, 192}}); dims left dynamic
  // are computed at run time by shape functions.
  std::map<std::string, Shape> input_shapes;
  // Evaluate nodes whose inputs are all constants at compile time.
  bool fold_constants = true;
  // zstd level of the executable's constant chunks.
  int zstd_level = 3;
};

struct CompileStats {
  int nodes_in = 0;
  int nodes_folded = 0;
  int nodes_removed = 0;
  int kernels = 0;
  int runtime_shape_functions = 0;  // nodes whose output shapes are known only at run time
  uint64_t constant_bytes = 0;
};

// Infers dtypes and shapes through the graph, in order, with the registry's shape
// functions; with `fold_constants`, a node whose inputs are all constants is evaluated
// with its CPU kernel and replaced by its results, so that shape chains
// (Shape -> Slice -> Concat -> Reshape) fold away when the input shapes are static.
// Shapes stay unknown (-1 / unknown rank) where they depend on dynamic dims or on
// values only known at run time. Returns the number of nodes folded; errors name the
// node.
StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants);

// Removes nodes and constants that no graph output depends on. Returns nodes removed.
int EliminateDeadCode(Graph& graph);

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

}  // namespace remex::compiler
