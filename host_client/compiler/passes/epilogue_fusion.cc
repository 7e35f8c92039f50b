// Epilogue fusion (see epilogue_fusion.h).

#include "host_client/compiler/passes/epilogue_fusion.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host_client/compiler/passes/scalar_params.h"

namespace remex::compiler {
namespace {

constexpr std::string_view kFusedConv = "FusedConv";
constexpr std::string_view kFusedMatMul = "FusedMatMul";
constexpr std::string_view kFusedMatMulInteger = "FusedMatMulInteger";

// An activation node's FusedConv / FusedMatMul attributes: the name and its parameters.
struct Activation {
  std::string name;
  std::vector<float> params;
};

// An activation whose op is marked for epilogues (kernels.h
// OpTraits::epilogue_activation), applied to `in` alone, its scalar parameters
// (OpTraits::params) read from its attributes or constant inputs.
std::optional<Activation> ClassifyActivation(const Graph& g, const Node& n, int in,
                                             const kernels::KernelRegistry& registry) {
  if (n.values_op || n.inputs.empty() || n.inputs[0] != in || n.outputs.size() != 1) return std::nullopt;
  const kernels::OpDef* def = registry.FindOp(n.op, n.version);
  if (!def || !def->traits.epilogue_activation || DataOperandCount(n, *def) != 1) return std::nullopt;
  auto params = ReadScalarParams(g, n, *def);
  if (!params) return std::nullopt;
  return Activation{n.op, std::move(*params)};
}

// A float32 or float16 device value of known rank.
bool FloatOutput(const Value& y) {
  return (y.dtype == DType::kFloat32 || y.dtype == DType::kFloat16) && y.rank_known && !y.host;
}

bool IsFusibleConv(const Graph& g, const Node& n) {
  if (n.op != "Conv" || n.host || !n.regions.empty() || n.outputs.size() != 1) return false;
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.inputs[0] < 0 || n.inputs[1] < 0) return false;
  return FloatOutput(g.values[n.outputs[0]]);
}

// A MatMul of A (known rank >= 2) by a constant B of static shape [K, N].
bool IsFusibleMatMul(const Graph& g, const Node& n) {
  if (n.op != "MatMul" || n.host || !n.regions.empty() || n.outputs.size() != 1) return false;
  if (n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return false;
  const Value& a = g.values[n.inputs[0]];
  const Value& b = g.values[n.inputs[1]];
  if (!a.rank_known || a.shape.size() < 2 || a.host) return false;
  if (!b.constant || !b.static_shape() || b.shape.size() != 2 || b.dtype != a.dtype) return false;
  return FloatOutput(g.values[n.outputs[0]]);
}

// A MatMulInteger with an int32 device output whose B has static shape [K, N]: N, else -1.
int64_t FusibleMatMulIntegerColumns(const Graph& g, const Node& n) {
  if (n.op != "MatMulInteger" || n.host || !n.regions.empty() || n.outputs.size() != 1) return -1;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return -1;
  const Value& b = g.values[n.inputs[1]];
  const Value& y = g.values[n.outputs[0]];
  if (!b.static_shape() || b.shape.size() != 2 || y.dtype != DType::kInt32 || !y.rank_known || y.host) return -1;
  return b.shape[1];
}

// Whether `v` is a float32 device value holding one element (any rank), or, when
// `columns` >= 0, exactly [columns].
bool ScalarOrColumns(const Value& v, int64_t columns) {
  if (v.dtype != DType::kFloat32 || v.host || !v.static_shape()) return false;
  int64_t count = 1;
  for (int64_t d : v.shape) count *= d;
  return count == 1 || (columns >= 0 && v.shape == Shape{columns});
}

// Whether the fused op's shape function (`def`) gives `node`'s output dtype and
// shape, where the shapes are static (elsewhere the chain's checks decide alone).
bool ShapeAgrees(const Graph& g, const kernels::OpDef& def, const Node& node) {
  const Value& y = g.values[node.outputs[0]];
  if (!y.static_shape()) return true;
  std::vector<kernels::ShapeFnArg> args;
  for (int v : node.inputs) {
    kernels::ShapeFnArg a;
    if (v >= 0) {
      if (!g.values[v].static_shape()) return true;
      a.present = true;
      a.dtype = g.values[v].dtype;
      a.shape = g.values[v].shape;
    }
    args.push_back(std::move(a));
  }
  auto info = kernels::InferShapes(def, node.attrs, args);
  return info.ok() && info->size() == 1 && (*info)[0].dtype == y.dtype && (*info)[0].shape == y.shape;
}

}  // namespace

EpilogueFusionStats FuseEpilogues(Graph& graph, const kernels::KernelRegistry& registry) {
  EpilogueFusionStats stats;
  const kernels::OpDef* conv_def = registry.FindOp(kFusedConv);
  const kernels::OpDef* matmul_def = registry.FindOp(kFusedMatMul);
  const kernels::OpDef* integer_def = registry.FindOp(kFusedMatMulInteger);
  if (!conv_def && !matmul_def && !integer_def) return stats;
  Graph& g = graph;
  const size_t count = g.nodes.size();
  std::vector<int> reads(g.values.size(), 0);
  std::vector<int> reader(g.values.size(), -1);  // A top-level node reading the value.
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[o] = true;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes[i];
    CountReads(n, reads);
    for (int in : n.inputs) {
      if (in >= 0) reader[in] = static_cast<int>(i);
    }
  }
  std::vector<bool> removed(count, false);  // Taken by a fused node.
  // The node reading `v` when that is its only read (a top-level node not yet taken)
  // and `v` is not a graph output; -1 otherwise.
  auto sole_reader = [&](int v) {
    if (is_output[v] || reads[v] != 1 || reader[v] < 0 || removed[reader[v]]) return -1;
    const Node& n = g.nodes[reader[v]];
    if (n.host || !n.regions.empty() || n.outputs.size() != 1) return -1;
    return reader[v];
  };

  std::vector<std::optional<Node>> replacement(count);
  // The sole reader of `v` when it is a top-level `op` node of two inputs, one of them
  // `v`; its other input in *other. -1 otherwise.
  auto binary_reader = [&](int v, std::string_view op, int* other) {
    const int next = sole_reader(v);
    if (next < 0 || g.nodes[next].op != op || g.nodes[next].inputs.size() != 2) return -1;
    const Node& n = g.nodes[next];
    *other = n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
    return *other >= 0 && *other != v ? next : -1;
  };
  for (size_t i = 0; integer_def && i < count; ++i) {
    // MatMulInteger -> Cast to float32 -> Mul by a scale [-> Add of a constant bias].
    const Node& head = g.nodes[i];
    const int64_t columns = FusibleMatMulIntegerColumns(g, head);
    if (columns < 0) continue;
    const int cast = sole_reader(head.outputs[0]);
    if (cast < 0 || g.nodes[cast].op != "Cast" || g.nodes[cast].inputs.size() != 1) continue;
    const Value& cast_out = g.values[g.nodes[cast].outputs[0]];
    if (cast_out.dtype != DType::kFloat32 || cast_out.host) continue;
    int scale = -1, bias = -1;
    const int mul = binary_reader(g.nodes[cast].outputs[0], "Mul", &scale);
    if (mul < 0 || !ScalarOrColumns(g.values[scale], columns) ||
        !SameTensorType(g.values[g.nodes[mul].outputs[0]], cast_out)) {
      continue;
    }
    std::vector<int> chain = {static_cast<int>(i), cast, mul};
    const int add = binary_reader(g.nodes[mul].outputs[0], "Add", &bias);
    if (add >= 0 && g.values[bias].constant && g.values[bias].dtype == DType::kFloat32 &&
        g.values[bias].static_shape() && g.values[bias].shape == Shape{columns} &&
        SameTensorType(g.values[g.nodes[add].outputs[0]], cast_out)) {
      chain.push_back(add);
    } else {
      bias = -1;
    }
    const int last = g.nodes[chain.back()].outputs[0];
    const int next = sole_reader(last);
    std::optional<Activation> act;
    if (next >= 0) act = ClassifyActivation(g, g.nodes[next], last, registry);
    if (act && SameTensorType(g.values[g.nodes[next].outputs[0]], cast_out)) {
      chain.push_back(next);
    } else {
      act.reset();
    }
    Node node;
    node.op = std::string(kFusedMatMulInteger);
    for (int m : chain) node.name += (node.name.empty() ? "" : "+") + g.nodes[m].name;
    if (act) {
      node.attrs.Set("activation", act->name);
      if (!act->params.empty()) node.attrs.Set("activation_params", act->params);
    }
    node.inputs = {head.inputs[0], head.inputs[1], head.inputs.size() > 2 ? head.inputs[2] : -1,
                   head.inputs.size() > 3 ? head.inputs[3] : -1, scale};
    if (bias >= 0) node.inputs.push_back(bias);
    node.outputs = g.nodes[chain.back()].outputs;
    if (!ShapeAgrees(g, *integer_def, node)) continue;
    for (int m : chain) removed[m] = true;
    replacement[chain.back()] = std::move(node);
    ++stats.fused_matmul_integers;
    stats.epilogue_nodes += static_cast<int>(chain.size()) - 1;
  }
  for (size_t i = 0; i < count; ++i) {
    if (removed[i]) continue;
    const Node& head = g.nodes[i];
    const bool conv = conv_def && IsFusibleConv(g, head);
    const bool matmul = !conv && matmul_def && IsFusibleMatMul(g, head);
    if (!conv && !matmul) continue;
    std::vector<int> chain = {static_cast<int>(i)};
    int cur = head.outputs[0], addend = -1;  // Z of a Conv, the bias of a MatMul.
    int next = sole_reader(cur);
    if (next >= 0 && g.nodes[next].op == "Add" && g.nodes[next].inputs.size() == 2) {
      const Node& add = g.nodes[next];
      const int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[0];
      bool fits = other >= 0 && other != cur && !g.values[other].host &&
                  SameTensorType(g.values[add.outputs[0]], g.values[cur]);
      if (fits && conv) fits = SameTensorType(g.values[other], g.values[cur]);
      if (fits && matmul) {
        const Value& bias = g.values[other];
        const int64_t n = g.values[head.inputs[1]].shape[1];
        fits = bias.constant && bias.dtype == g.values[cur].dtype && bias.static_shape() && bias.shape == Shape{n};
      }
      if (fits) {
        addend = other;
        chain.push_back(next);
        cur = add.outputs[0];
        next = sole_reader(cur);
      }
    }
    std::optional<Activation> act;
    if (next >= 0) act = ClassifyActivation(g, g.nodes[next], cur, registry);
    if (act && SameTensorType(g.values[g.nodes[next].outputs[0]], g.values[cur])) {
      chain.push_back(next);
    } else {
      act.reset();
    }
    if (chain.size() < 2) continue;
    Node node;
    node.op = std::string(conv ? kFusedConv : kFusedMatMul);
    for (int m : chain) node.name += (node.name.empty() ? "" : "+") + g.nodes[m].name;
    if (conv) node.attrs = head.attrs;
    if (act) {
      node.attrs.Set("activation", act->name);
      if (!act->params.empty()) node.attrs.Set("activation_params", act->params);
    }
    if (conv) {
      node.inputs = {head.inputs[0], head.inputs[1], head.inputs.size() > 2 ? head.inputs[2] : -1};
      if (addend >= 0) {
        node.inputs.push_back(addend);
      } else if (node.inputs[2] < 0) {
        node.inputs.pop_back();
      }
    } else {
      node.inputs = {head.inputs[0], head.inputs[1]};
      if (addend >= 0) node.inputs.push_back(addend);
    }
    node.outputs = g.nodes[chain.back()].outputs;
    if (!ShapeAgrees(g, conv ? *conv_def : *matmul_def, node)) continue;
    for (int m : chain) removed[m] = true;
    replacement[chain.back()] = std::move(node);
    ++(conv ? stats.fused_convs : stats.fused_matmuls);
    stats.epilogue_nodes += static_cast<int>(chain.size()) - 1;
  }
  if (stats.fused_convs + stats.fused_matmuls + stats.fused_matmul_integers == 0) return stats;
  std::vector<Node> nodes;
  for (size_t i = 0; i < count; ++i) {
    if (replacement[i]) {
      nodes.push_back(std::move(*replacement[i]));
    } else if (!removed[i]) {
      nodes.push_back(std::move(g.nodes[i]));
    }
  }
  g.nodes = std::move(nodes);
  return stats;
}

}  // namespace remex::compiler
