// The compiler's graph IR: values and nodes in topological order, with ONNX op names
// and (normalised) attributes. Built by the ONNX frontend, rewritten by the passes,
// lowered to VM bytecode by codegen.
//
// Control flow: an ONNX If or Loop node holds its subgraphs as Regions (If:
// then_branch, else_branch; Loop: body). All values of the model, those of every
// region included, live in the one Graph::values table, so a region's nodes name
// outer-scope values directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

// Inclusive bounds of a dimension; max -1: unbounded.
struct DimBounds {
  int64_t min = 0;
  int64_t max = -1;
};

struct Value {
  std::string name;
  // A tensor, or an ONNX sequence or optional (known from the import on: the frontend
  // gives every value its kind). For a sequence or optional, dtype, shape and rank are
  // those of its elements (of its value).
  vm::ValueKind kind = vm::ValueKind::kTensor;
  DType dtype = DType::kUndefined;
  // Known rank with -1 for dims not known at compile time; meaningful only when
  // rank_known.
  Shape shape;
  bool rank_known = false;
  // Index into Graph::constants when the value is a compile-time constant.
  std::optional<size_t> constant;

  // Symbolic view of the dims (one entry per dim when rank_known; "" for static
  // dims): a graph input's symbol ("W"), or the expression the compiler found for a
  // derived dim ("W/4", "N*W"), or "?" when it has no closed form.
  std::vector<std::string> dims;
  // Per-dim bounds when the input symbols have bounds (empty otherwise).
  std::vector<DimBounds> bounds;
  // Symbolic shape inference evaluates the graph at a few assignments of the input
  // symbols ("samples"): the value's shape in each (empty: not evaluated), and the
  // values of small integer tensors (shape computations) in each.
  std::vector<Shape> samples;
  std::vector<std::vector<std::byte>> sample_data;
  // The lower-corner sample repeats the upper one (an op refused the lower corner):
  // `bounds` then hold upper bounds only, with min 0.
  bool lower_corner_unknown = false;
  // Placement: computed on the host (small integer shape arithmetic) rather than on
  // the device.
  bool host = false;

  bool static_shape() const {
    if (!rank_known) return false;
    for (int64_t d : shape) if (d < 0) return false;
    return true;
  }
};

// Whether a and b have the same dtype and the same shape, dim by dim: static and equal,
// or both dynamic with one known symbolic expression (the fusion passes' test that an
// elementwise op does not broadcast).
inline bool SameTensorType(const Value& a, const Value& b) {
  if (a.dtype != b.dtype || !a.rank_known || !b.rank_known || a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (a.shape[i] >= 0 || b.shape[i] >= 0) {
      if (a.shape[i] != b.shape[i]) return false;
      continue;
    }
    if (a.dims.size() != a.shape.size() || b.dims.size() != b.shape.size()) return false;
    const std::string& s = a.dims[i];
    if (s.empty() || s == "?" || s != b.dims[i]) return false;
  }
  return true;
}

struct Node;

// A subgraph: its nodes, its formal inputs (Loop body: iteration number, condition,
// loop-carried values) and its outputs (value ids, which may be outer values).
struct Region {
  std::vector<Node> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

struct Node {
  std::string op;    // ONNX op_type
  std::string name;  // ONNX node name (or "<op>_<index>" when the model gives none)
  kernels::Attributes attrs;
  std::vector<int> inputs;   // value ids; -1 = absent optional input
  std::vector<int> outputs;  // value ids
  // If: {then_branch, else_branch}; Loop: {body}; empty for other ops.
  std::vector<Region> regions;
  bool host = false;  // placed on the host (see Value::host)
  // An ONNX sequence or optional op (SequenceInsert, OptionalGetElement, ... and
  // Identity of a sequence), run by the VM's Seq/Opt instructions rather than by a
  // kernel: passes that rewrite kernels leave it alone.
  bool values_op = false;
  // The op's registry entry (kernels::KernelRegistry::FindOp): the frontend sets the
  // since_version of the entry covering the model's opset; nodes that passes create
  // keep the default, the op's newest entry.
  int version = kernels::kNewestVersion;
};

struct Graph {
  int opset = 0;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<vm::ConstantDef> constants;

  int AddValue(Value v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
  int AddConstant(std::string name, vm::ConstantDef c) {
    Value v;
    v.name = std::move(name);
    v.dtype = c.dtype;
    v.shape = c.shape;
    v.rank_known = true;
    v.constant = constants.size();
    constants.push_back(std::move(c));
    return AddValue(std::move(v));
  }
};

// Adds to `reads[v]` each read of value v by `node`: its inputs, and the inputs and
// outputs of the nodes of its regions (If branches, Loop bodies), recursively. `reads`
// holds one entry per value of the graph.
inline void CountReads(const Node& node, std::vector<int>& reads) {
  for (int in : node.inputs) {
    if (in >= 0) ++reads[in];
  }
  for (const Region& r : node.regions) {
    for (const Node& n : r.nodes) CountReads(n, reads);
    for (int o : r.outputs) ++reads[o];
  }
}

// Appends to `out` every value `node` reads, those read inside its regions included.
inline void CollectReads(const Node& node, std::vector<int>& out) {
  for (int in : node.inputs) if (in >= 0) out.push_back(in);
  for (const Region& r : node.regions) {
    for (const Node& n : r.nodes) CollectReads(n, out);
    for (int o : r.outputs) out.push_back(o);
  }
}

// "node 'NAME' (OP)", for error messages.
inline std::string Where(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

// Whether a dtype is an index type (int64, int32): the dtypes of shape arithmetic.
inline bool IsIndexType(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

}  // namespace remex::compiler
