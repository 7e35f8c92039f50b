// What the pattern-matching passes share (activation_patterns.cc, attention_fusion.cc):
// scalar constants, plain nodes, single-use values and node removal.
#pragma once

#include <cstring>
#include <optional>
#include <vector>

#include "host_client/compiler/graph.h"

namespace remex::compiler::patterns {

// The value of one-element float32 constant `v` of rank at most `rank`.
inline std::optional<float> ScalarConstant(const Graph& g, int v, size_t rank) {
  if (v < 0 || !g.values[v].constant) return std::nullopt;
  const vm::ConstantDef& c = g.constants[*g.values[v].constant];
  if (c.dtype != DType::kFloat32 || c.shape.size() > rank || NumElements(c.shape) != 1 ||
      c.data.size() != sizeof(float)) {
    return std::nullopt;
  }
  float f;
  std::memcpy(&f, c.data.data(), sizeof f);
  return f;
}

// A top-level kernel node `op` with `inputs` inputs and one output, off the host.
inline bool Plain(const Node& n, const char* op, size_t inputs) {
  return n.op == op && !n.host && !n.values_op && n.regions.empty() && n.inputs.size() == inputs &&
         n.outputs.size() == 1;
}

// Each value's reads (a graph output counts as one, so that it is never an
// intermediate), the node producing it and the top-level node reading it.
class SingleUse {
 public:
  explicit SingleUse(const Graph& g)
      : reads_(g.values.size(), 0), producer_(g.values.size(), -1), reader_(g.values.size(), -1) {
    for (int o : g.outputs) ++reads_[o];
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      CountReads(g.nodes[i], reads_);
      for (int in : g.nodes[i].inputs) {
        if (in >= 0) reader_[in] = static_cast<int>(i);
      }
      for (int o : g.nodes[i].outputs) producer_[o] = static_cast<int>(i);
    }
  }
  // The node producing `v` when `v` is read once (by a pattern's next step), else null.
  Node* Producer(Graph& g, int v) const {
    if (v < 0 || reads_[v] != 1 || producer_[v] < 0) return nullptr;
    return &g.nodes[producer_[v]];
  }
  // The node reading `v` when `v` is read once, by a top-level node's input, and is no
  // graph output; else null.
  Node* Reader(Graph& g, int v) const {
    if (v < 0 || reads_[v] != 1 || reader_[v] < 0) return nullptr;
    Node& n = g.nodes[reader_[v]];
    int uses = 0;
    for (int in : n.inputs) uses += in == v ? 1 : 0;
    return uses == 1 ? &n : nullptr;
  }

 private:
  std::vector<int> reads_;
  std::vector<int> producer_;
  std::vector<int> reader_;
};

// Drops the nodes marked in `removed` (indexed as g.nodes), keeping the others' order.
inline void RemoveNodes(Graph& g, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

}  // namespace remex::compiler::patterns
