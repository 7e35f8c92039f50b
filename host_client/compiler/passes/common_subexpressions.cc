// Common-subexpression elimination (see common_subexpressions.h).
#include "host_client/compiler/passes/common_subexpressions.h"

#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace remex::compiler {
namespace {

// Appends `bytes` of `p` to `key`, length-prefixed so that no two sequences of fields
// give one key.
void Put(std::string& key, const void* p, size_t bytes) {
  const uint64_t n = bytes;
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(static_cast<const char*>(p), bytes);
}

void PutText(std::string& key, const std::string& s) { Put(key, s.data(), s.size()); }

// What two nodes must share to compute the same: op, entry, attributes, inputs and the
// number of outputs.
std::string KeyOf(const Node& n) {
  std::string key;
  PutText(key, n.op);
  Put(key, &n.version, sizeof n.version);
  for (const auto& [name, value] : n.attrs.all()) {
    PutText(key, name);
    const size_t kind = value.index();
    Put(key, &kind, sizeof kind);
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            PutText(key, v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            const size_t count = v.size();
            Put(key, &count, sizeof count);
            for (const std::string& s : v) PutText(key, s);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<float>>) {
            Put(key, v.data(), v.size() * sizeof(typename T::value_type));  // floats by their bits
          } else {
            Put(key, &v, sizeof v);
          }
        },
        value);
  }
  Put(key, n.inputs.data(), n.inputs.size() * sizeof(int));
  const size_t outputs = n.outputs.size();
  Put(key, &outputs, sizeof outputs);
  return key;
}

// Rewrites the reads of `node` (its regions' nodes and outputs included) through `to`.
void Redirect(Node& node, const std::vector<int>& to) {
  for (int& in : node.inputs) {
    if (in >= 0) in = to[in];
  }
  for (Region& r : node.regions) {
    for (Node& n : r.nodes) Redirect(n, to);
    for (int& out : r.outputs) {
      if (out >= 0) out = to[out];
    }
  }
}

}  // namespace

int EliminateCommonSubexpressions(Graph& graph) {
  std::vector<int> to(graph.values.size());
  for (size_t v = 0; v < to.size(); ++v) to[v] = static_cast<int>(v);
  std::vector<bool> is_output(graph.values.size(), false);
  for (int o : graph.outputs) is_output[o] = true;
  std::map<std::string, size_t> first;  // key -> the node computing it first
  std::vector<bool> removed(graph.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& n = graph.nodes[i];
    Redirect(n, to);  // nodes are in dependency order: what it reads is settled
    if (!n.regions.empty() || n.values_op) continue;
    const std::string key = KeyOf(n);
    auto [it, inserted] = first.emplace(key, i);
    if (inserted) continue;
    bool writes_output = false;
    for (int out : n.outputs) writes_output = writes_output || (out >= 0 && is_output[out]);
    if (writes_output) continue;
    const Node& kept = graph.nodes[it->second];
    bool same_outputs = true;  // absent optional outputs (-1) must match too
    for (size_t k = 0; k < n.outputs.size(); ++k) same_outputs = same_outputs && (n.outputs[k] < 0) == (kept.outputs[k] < 0);
    if (!same_outputs) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] >= 0) to[n.outputs[k]] = kept.outputs[k];
    }
    removed[i] = true;
    ++count;
  }
  if (count == 0) return 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size() - static_cast<size_t>(count));
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!removed[i]) nodes.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(nodes);
  return count;
}

}  // namespace remex::compiler
