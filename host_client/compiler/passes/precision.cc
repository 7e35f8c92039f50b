#include "host_client/compiler/passes/precision.h"

#include <cstring>
#include <map>
#include <vector>

#include "kernels/float16.h"

namespace remex::compiler {
namespace {

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

class Float16Converter {
 public:
  Float16Converter(Graph& g, const kernels::KernelRegistry& registry) : g_(g), registry_(registry) {}

  StatusOr<PrecisionStats> Run() {
    active_.assign(g_.values.size(), false);
    std::vector<Node> nodes;
    // Inputs: cast to float16 once, every reader reads the cast.
    std::map<int, int> input_cast;
    for (int in : g_.inputs) {
      if (g_.values[in].dtype != DType::kFloat32) continue;
      int half = AddValue(Retyped(g_.values[in], DType::kFloat16, g_.values[in].name + "/float16"));
      nodes.push_back(CastNode(in, half, kOnnxFloat16, "precision/to_float16/" + g_.values[in].name));
      input_cast[in] = half;
      active_[half] = true;
    }
    for (Node& node : g_.nodes) RenameInputs(node, input_cast);

    for (Node& node : g_.nodes) {
      if (node.values_op) {
        for (int in : node.inputs) {
          if (in >= 0 && active_[in]) {
            return Unimplemented("--dtype float16 does not convert sequences and optionals yet (node '" + node.name +
                                 "', " + node.op + ")");
          }
        }
        nodes.push_back(std::move(node));
        continue;
      }
      const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
      if (!op) return Unimplemented("unsupported op '" + node.op + "' in node '" + node.name + "'");
      bool reads_activation = false;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] >= 0 && active_[node.inputs[i]] && ReadsAsTensor(*op, i)) reads_activation = true;
      }
      if (!node.regions.empty()) {
        std::vector<int> reads;
        CollectRegionReads(node, reads);
        for (int v : reads) {
          if (v >= 0 && static_cast<size_t>(v) < active_.size() && active_[v]) reads_activation = true;
        }
        if (reads_activation) {
          return Unimplemented("--dtype float16 does not convert " + node.op + " regions yet (node '" + node.name +
                               "')");
        }
        nodes.push_back(std::move(node));
        continue;
      }
      if (!reads_activation) {
        nodes.push_back(std::move(node));
        continue;
      }
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const int in = node.inputs[i];
        if (in < 0 || active_[in] || !ReadsAsTensor(*op, i) || g_.values[in].dtype != DType::kFloat32) continue;
        node.inputs[i] = g_.values[in].constant ? HalfConstant(in) : HalfCast(in, nodes);
      }
      if (node.op == "Cast") {
        auto to = node.attrs.Int("to", 0);
        if (to.ok() && *to == kOnnxFloat) node.attrs.Set("to", kOnnxFloat16);
      }
      for (int out : node.outputs) {
        if (g_.values[out].dtype != DType::kFloat32) continue;
        g_.values[out].dtype = DType::kFloat16;
        active_[out] = true;
      }
      stats_.nodes_converted++;
      nodes.push_back(std::move(node));
    }
    // Outputs: back to float32 under their own names.
    for (int& out : g_.outputs) {
      if (!active_[out]) continue;
      const std::string name = g_.values[out].name;
      g_.values[out].name = name + "/float16";
      int single = AddValue(Retyped(g_.values[out], DType::kFloat32, name));
      nodes.push_back(CastNode(out, single, kOnnxFloat, "precision/to_float32/" + name));
      out = single;
    }
    g_.nodes = std::move(nodes);
    return stats_;
  }

 private:
  // Whether input `i` of `op` is read as a tensor of the op's type: not a shape
  // parameter read as data, and not an input whose shape alone matters.
  static bool ReadsAsTensor(const kernels::OpDef& op, size_t i) {
    return !op.reads_shapes_only && op.DepOf(i) != kernels::ShapeDep::kData;
  }

  static void CollectRegionReads(const Node& node, std::vector<int>& out) {
    for (const Region& r : node.regions) {
      for (const Node& n : r.nodes) {
        out.insert(out.end(), n.inputs.begin(), n.inputs.end());
        CollectRegionReads(n, out);
      }
      out.insert(out.end(), r.outputs.begin(), r.outputs.end());
    }
  }

  // Renames the reads of `node` (and of its regions) at inputs read as tensors.
  void RenameInputs(Node& node, const std::map<int, int>& rename) const {
    const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto it = rename.find(node.inputs[i]);
      if (it != rename.end() && (!op || ReadsAsTensor(*op, i))) node.inputs[i] = it->second;
    }
    for (Region& r : node.regions) {
      for (Node& n : r.nodes) RenameInputs(n, rename);
      for (int& o : r.outputs) {
        auto it = rename.find(o);
        if (it != rename.end()) o = it->second;
      }
    }
  }

  static Value Retyped(const Value& v, DType dtype, std::string name) {
    Value out;
    out.name = std::move(name);
    out.dtype = dtype;
    out.shape = v.shape;
    out.rank_known = v.rank_known;
    out.dims = v.dims;
    out.bounds = v.bounds;
    out.samples = v.samples;
    out.lower_corner_unknown = v.lower_corner_unknown;
    return out;
  }

  int AddValue(Value v) {
    active_.push_back(false);
    return g_.AddValue(std::move(v));
  }

  Node CastNode(int from, int to, int64_t onnx_dtype, std::string name) {
    Node n;
    n.op = "Cast";
    n.name = std::move(name);
    n.attrs.Set("to", onnx_dtype);
    n.inputs = {from};
    n.outputs = {to};
    stats_.casts_inserted++;
    return n;
  }

  // A float16 copy of float32 constant `v`, made once.
  int HalfConstant(int v) {
    auto it = half_of_.find(v);
    if (it != half_of_.end()) return it->second;
    const vm::ConstantDef& c = g_.constants[*g_.values[v].constant];
    vm::ConstantDef h;
    h.dtype = DType::kFloat16;
    h.shape = c.shape;
    const size_t n = c.data.size() / sizeof(float);
    h.data.resize(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, c.data.data() + i * sizeof(float), sizeof f);
      const uint16_t bits = kernels::FloatToHalf(f).bits;
      std::memcpy(h.data.data() + i * sizeof bits, &bits, sizeof bits);
    }
    int half = g_.AddConstant(g_.values[v].name + "/float16", std::move(h));
    active_.resize(g_.values.size(), false);
    half_of_[v] = half;
    stats_.constants_converted++;
    return half;
  }

  // A float16 cast of computed float32 value `v`, emitted once before its first reader.
  int HalfCast(int v, std::vector<Node>& nodes) {
    auto it = half_of_.find(v);
    if (it != half_of_.end()) return it->second;
    int half = AddValue(Retyped(g_.values[v], DType::kFloat16, g_.values[v].name + "/float16"));
    nodes.push_back(CastNode(v, half, kOnnxFloat16, "precision/to_float16/" + g_.values[v].name));
    half_of_[v] = half;
    return half;
  }

  Graph& g_;
  const kernels::KernelRegistry& registry_;
  std::vector<bool> active_;  // value -> is a float16 activation
  std::map<int, int> half_of_;
  PrecisionStats stats_;
};

}  // namespace

StatusOr<PrecisionStats> ConvertToFloat16(Graph& graph, const kernels::KernelRegistry& registry) {
  return Float16Converter(graph, registry).Run();
}

}  // namespace remex::compiler
