// Dead-code elimination (see dead_code.h).
#include "host_client/compiler/passes/dead_code.h"

#include <algorithm>

namespace remex::compiler {

int EliminateDeadCode(Graph& graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (int out : graph.outputs) live[out] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  std::vector<int> reads;
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    bool needed = std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return live[v]; });
    if (!needed) continue;
    keep[i] = true;
    reads.clear();
    CollectReads(n, reads);
    for (int in : reads) live[in] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(graph.nodes[i]));
  }
  int removed = static_cast<int>(graph.nodes.size() - kept.size());
  graph.nodes = std::move(kept);
  // Drop constants no live value refers to, renumbering the rest.
  std::vector<vm::ConstantDef> constants;
  for (Value& v : graph.values) {
    if (!v.constant) continue;
    if (!live[&v - graph.values.data()]) {
      v.constant.reset();
      continue;
    }
    constants.push_back(std::move(graph.constants[*v.constant]));
    v.constant = constants.size() - 1;
  }
  graph.constants = std::move(constants);
  return removed;
}

}  // namespace remex::compiler
