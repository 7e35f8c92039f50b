// The one-op model the bench/ programs drive a server with: y = Relu(x), float32
// [1, elements], compiled and serialized (a .rmx's bytes).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::bench {

inline StatusOr<std::vector<std::byte>> ReluExecutable(const kernels::KernelRegistry& registry, int64_t elements) {
  compiler::Graph g;
  g.opset = 13;
  compiler::Value x, y;
  x.name = "x";
  y.name = "y";
  for (compiler::Value* v : {&x, &y}) {
    v->dtype = DType::kFloat32;
    v->shape = {1, elements};
    v->rank_known = true;
  }
  int xi = g.AddValue(x), yi = g.AddValue(y);
  compiler::Node relu;
  relu.op = "Relu";
  relu.name = "relu";
  relu.inputs = {xi};
  relu.outputs = {yi};
  g.nodes.push_back(relu);
  g.inputs = {xi};
  g.outputs = {yi};
  REMEX_ASSIGN_OR_RETURN(auto def, compiler::CompileGraph(std::move(g), registry, {}));
  return vm::SerializeExecutable(def);
}

}  // namespace remex::bench
