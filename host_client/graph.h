// The compiler's graph IR: values and nodes in topological order, with ONNX op names
// and (normalised) attributes. Built by the ONNX frontend, rewritten by the passes,
// lowered to VM bytecode by codegen.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::compiler {

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  // Known rank with -1 for unknown dims; meaningful only when rank_known.
  Shape shape;
  bool rank_known = false;
  // Index into Graph::constants when the value is a compile-time constant.
  std::optional<size_t> constant;

  bool static_shape() const {
    if (!rank_known) return false;
    for (int64_t d : shape) if (d < 0) return false;
    return true;
  }
};

struct Node {
  std::string op;    // ONNX op_type
  std::string name;  // ONNX node name (or "<op>_<index>" when the model gives none)
  kernels::Attributes attrs;
  std::vector<int> inputs;   // value ids; -1 = absent optional input
  std::vector<int> outputs;  // value ids
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

}  // namespace remex::compiler
