// The order the importer reads a graph's nodes in (onnx_order.h).

#include "host_client/compiler/onnx_order.h"

#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

namespace remex::compiler {
namespace {

// Every value name a node reads: its inputs, and the names its subgraphs (If / Loop
// bodies, at any depth) read, which may come from the enclosing graph.
void CollectReads(const onnx::NodeProto& n, std::vector<std::string>* reads) {
  for (const auto& in : n.input()) {
    if (!in.empty()) reads->push_back(in);
  }
  for (const auto& a : n.attribute()) {
    if (a.type() != onnx::AttributeProto::GRAPH || !a.has_g()) continue;
    for (const auto& sub : a.g().node()) CollectReads(sub, reads);
  }
}

}  // namespace

std::vector<int> ImportOrder(const onnx::GraphProto& g) {
  const int n = g.node_size();
  std::map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const auto& out : g.node(i).output()) {
      if (!out.empty()) producer.emplace(out, i);
    }
  }
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> pending(static_cast<size_t>(n), 0);
  bool sorted = true;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> reads;
    CollectReads(g.node(i), &reads);
    std::set<int> deps;
    for (const auto& name : reads) {
      auto it = producer.find(name);
      if (it != producer.end() && it->second != i) deps.insert(it->second);
    }
    for (int d : deps) {
      users[d].push_back(i);
      ++pending[i];
      sorted = sorted && d < i;
    }
  }
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  if (sorted) {
    for (int i = 0; i < n; ++i) order.push_back(i);
    return order;
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<bool> done(static_cast<size_t>(n), false);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    done[i] = true;
    for (int u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!done[i]) order.push_back(i);
  }
  return order;
}


}  // namespace remex::compiler
