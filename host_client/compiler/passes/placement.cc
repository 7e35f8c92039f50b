// Placement of shape arithmetic on the host (see placement.h).
#include "host_client/compiler/passes/placement.h"

#include <optional>

namespace remex::compiler {
namespace {

// Largest integer tensor the host computes.
constexpr int64_t kMaxHostElements = 64;

int PlaceNodes(Graph& g, std::vector<Node>& nodes, const kernels::KernelRegistry& registry) {
  int placed = 0;
  for (Node& node : nodes) {
    for (Region& r : node.regions) placed += PlaceNodes(g, r.nodes, registry);
    if (!node.regions.empty() || node.values_op) continue;
    const kernels::OpDef* op = registry.FindOp(node.op, node.version);
    if (!op || !registry.FindKernel(node.op, node.version, kernels::DeviceKind::kCpu)) continue;
    bool host = true;
    for (int o : node.outputs) {
      const Value& v = g.values[o];
      auto n = v.static_shape() ? NumElements(v.shape) : std::nullopt;
      if (!IsIndexType(v.dtype) || !n || *n > kMaxHostElements) host = false;
    }
    for (int in : node.inputs) {
      if (in < 0 || op->reads_shapes_only) continue;
      const Value& v = g.values[in];
      if (!v.constant && !v.host) host = false;
    }
    if (!host) continue;
    node.host = true;
    for (int o : node.outputs) g.values[o].host = true;
    ++placed;
  }
  return placed;
}

}  // namespace

int PlaceOnHost(Graph& graph, const kernels::KernelRegistry& registry) {
  return PlaceNodes(graph, graph.nodes, registry);
}

}  // namespace remex::compiler
