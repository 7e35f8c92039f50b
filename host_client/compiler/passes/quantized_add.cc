// Quantized residual adds (see quantized_add.h).
#include "host_client/compiler/passes/quantized_add.h"

#include <optional>
#include <vector>

namespace remex::compiler {
namespace {

// A value holding one element of static shape.
bool OneElement(const Value& v) {
  if (!v.static_shape()) return false;
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n == 1;
}

bool QuantType(DType t) { return t == DType::kUint8 || t == DType::kInt8; }

}  // namespace

int FuseQuantizedAdds(Graph& g, const kernels::KernelRegistry& registry) {
  if (registry.FindOp("FusedQLinearAdd") == nullptr) return 0;
  const size_t count = g.nodes.size();
  std::vector<int> reads(g.values.size(), 0), writer(g.values.size(), -1);
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[o] = true;
  for (size_t i = 0; i < count; ++i) {
    CountReads(g.nodes[i], reads);
    for (int out : g.nodes[i].outputs) {
      if (out >= 0) writer[out] = static_cast<int>(i);
    }
  }
  std::vector<bool> removed(count, false);
  // The top-level node writing `v`, when it is a plain `op` node off the host whose
  // only output `v` is read once and is no graph output; -1 otherwise.
  auto sole_writer = [&](int v, std::string_view op) {
    if (v < 0 || is_output[v] || reads[v] != 1 || writer[v] < 0 || removed[writer[v]]) return -1;
    const Node& n = g.nodes[writer[v]];
    if (n.op != op || n.host || !n.regions.empty() || n.values_op || n.outputs.size() != 1) return -1;
    return writer[v];
  };
  // Per-tensor scale and zero point of a QuantizeLinear / DequantizeLinear node.
  auto per_tensor = [&](const Node& n) {
    return n.inputs.size() == 3 && n.inputs[1] >= 0 && n.inputs[2] >= 0 && OneElement(g.values[n.inputs[1]]) &&
           OneElement(g.values[n.inputs[2]]);
  };
  int made = 0;
  for (size_t i = 0; i < count; ++i) {
    const Node& q = g.nodes[i];
    if (q.op != "QuantizeLinear" || q.host || q.outputs.size() != 1 || !per_tensor(q)) continue;
    if (g.values[q.inputs[0]].dtype != DType::kFloat32 || !QuantType(g.values[q.outputs[0]].dtype)) continue;
    int relu = sole_writer(q.inputs[0], "Relu");
    const int add = sole_writer(relu >= 0 ? g.nodes[relu].inputs[0] : q.inputs[0], "Add");
    if (add < 0 || g.nodes[add].inputs.size() != 2) continue;
    const int da = sole_writer(g.nodes[add].inputs[0], "DequantizeLinear");
    const int db = sole_writer(g.nodes[add].inputs[1], "DequantizeLinear");
    if (da < 0 || db < 0 || da == db || !per_tensor(g.nodes[da]) || !per_tensor(g.nodes[db])) continue;
    const Value& a = g.values[g.nodes[da].inputs[0]];
    const Value& b = g.values[g.nodes[db].inputs[0]];
    if (!QuantType(a.dtype) || !QuantType(b.dtype)) continue;
    // One shape throughout (static, or the same symbolic dims): no broadcasting.
    const Value& sum = g.values[g.nodes[add].outputs[0]];
    if (!SameTensorType(g.values[g.nodes[da].outputs[0]], sum) || !SameTensorType(g.values[g.nodes[db].outputs[0]], sum) ||
        !SameTensorType(g.values[q.inputs[0]], sum)) {
      continue;
    }
    Node node;
    node.op = "FusedQLinearAdd";
    for (int m : {da, db, add, relu, static_cast<int>(i)}) {
      if (m >= 0) node.name += (node.name.empty() ? "" : "+") + g.nodes[m].name;
    }
    const Node& na = g.nodes[da];
    const Node& nb = g.nodes[db];
    node.inputs = {na.inputs[0], na.inputs[1], na.inputs[2], nb.inputs[0], nb.inputs[1], nb.inputs[2],
                   q.inputs[1],  q.inputs[2]};
    if (relu >= 0) node.attrs.Set("activation", std::string("Relu"));
    node.outputs = q.outputs;
    for (int m : {da, db, add, relu}) {
      if (m >= 0) removed[m] = true;
    }
    g.nodes[i] = std::move(node);
    ++made;
  }
  if (made == 0) return 0;
  std::vector<Node> nodes;
  for (size_t i = 0; i < count; ++i) {
    if (!removed[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
  return made;
}

}  // namespace remex::compiler
