#include "host_client/compiler/passes/precision.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/float16.h"

namespace remex::compiler {
namespace {

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

int64_t OnnxCode(DType d) { return d == DType::kFloat16 ? kOnnxFloat16 : kOnnxFloat; }

// Converts the activations of dtype `from` (the values that depend on a graph input of
// that dtype) to `to` (float32 <-> float16), as precision.h describes.
class PrecisionConverter {
 public:
  PrecisionConverter(Graph& g, const kernels::KernelRegistry& registry, DType from, DType to)
      : g_(g), registry_(registry), from_(from), to_(to), to_name_(DTypeName(to)), flag_("--dtype " + to_name_) {}

  StatusOr<PrecisionStats> Run() {
    active_.assign(g_.values.size(), false);
    std::vector<Node> nodes;
    // Inputs: cast once, every reader reads the cast.
    std::map<int, int> input_cast;
    for (int in : g_.inputs) {
      if (g_.values[in].dtype != from_) continue;
      int cast = AddValue(Retyped(g_.values[in], to_, g_.values[in].name + "/" + to_name_));
      nodes.push_back(CastNode(in, cast, OnnxCode(to_), "precision/to_" + to_name_ + "/" + g_.values[in].name));
      input_cast[in] = cast;
      active_[cast] = true;
    }
    for (Node& node : g_.nodes) RenameInputs(node, input_cast);

    for (Node& node : g_.nodes) {
      if (node.values_op) {
        for (int in : node.inputs) {
          if (in >= 0 && active_[in]) {
            return Unimplemented(flag_ + " does not convert sequences and optionals yet (node '" + node.name + "', " +
                                 node.op + ")");
          }
        }
        nodes.push_back(std::move(node));
        continue;
      }
      const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
      if (!op) return Unimplemented("unsupported op '" + node.op + "' in node '" + node.name + "'");
      const StatusOr<int64_t> cast_to = node.op == "Cast" ? node.attrs.Int("to", 0) : StatusOr<int64_t>(int64_t{0});
      if (to_ == DType::kFloat32 && cast_to.ok() && *cast_to == kOnnxFloat16 && node.outputs.size() == 1 &&
          g_.values[node.outputs[0]].dtype == DType::kFloat16) {
        // A float16 model with float32 inputs, as converters that keep the interface write
        // it: its Casts to float16 start activations too, now in float32.
        node.attrs.Set("to", kOnnxFloat);
        g_.values[node.outputs[0]].dtype = DType::kFloat32;
        active_[node.outputs[0]] = true;
        stats_.nodes_converted++;
        nodes.push_back(std::move(node));
        continue;
      }
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
          return Unimplemented(flag_ + " does not convert " + node.op + " regions yet (node '" + node.name + "')");
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
        if (in < 0 || active_[in] || !ReadsAsTensor(*op, i) || g_.values[in].dtype != from_) continue;
        node.inputs[i] = g_.values[in].constant ? ConvertedConstant(in) : ConvertedCast(in, nodes);
      }
      if (node.op == "Cast") {
        auto to = node.attrs.Int("to", 0);
        if (to.ok() && *to == OnnxCode(from_)) node.attrs.Set("to", OnnxCode(to_));
      }
      for (int out : node.outputs) {
        if (g_.values[out].dtype != from_) continue;
        g_.values[out].dtype = to_;
        active_[out] = true;
      }
      stats_.nodes_converted++;
      nodes.push_back(std::move(node));
    }
    // Outputs: back to `from` under their own names.
    const std::string from_name(DTypeName(from_));
    for (int& out : g_.outputs) {
      if (!active_[out]) continue;
      const std::string name = g_.values[out].name;
      g_.values[out].name = name + "/" + to_name_;
      int back = AddValue(Retyped(g_.values[out], from_, name));
      nodes.push_back(CastNode(out, back, OnnxCode(from_), "precision/to_" + from_name + "/" + name));
      out = back;
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

  // A copy in `to_` of constant `v` (of `from_`), made once: float32 to float16 rounded
  // to nearest even, float16 to float32 exactly.
  int ConvertedConstant(int v) {
    auto it = converted_.find(v);
    if (it != converted_.end()) return it->second;
    const vm::ConstantDef& c = g_.constants[*g_.values[v].constant];
    vm::ConstantDef h;
    h.dtype = to_;
    h.shape = c.shape;
    if (to_ == DType::kFloat16) {
      const size_t n = c.data.size() / sizeof(float);
      h.data.resize(n * sizeof(uint16_t));
      for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, c.data.data() + i * sizeof(float), sizeof f);
        const uint16_t bits = kernels::FloatToHalf(f).bits;
        std::memcpy(h.data.data() + i * sizeof bits, &bits, sizeof bits);
      }
    } else {
      const size_t n = c.data.size() / sizeof(uint16_t);
      h.data.resize(n * sizeof(float));
      for (size_t i = 0; i < n; ++i) {
        kernels::Half half;
        std::memcpy(&half.bits, c.data.data() + i * sizeof(uint16_t), sizeof half.bits);
        const float f = kernels::HalfToFloat(half);
        std::memcpy(h.data.data() + i * sizeof f, &f, sizeof f);
      }
    }
    int out = g_.AddConstant(g_.values[v].name + "/" + to_name_, std::move(h));
    active_.resize(g_.values.size(), false);
    converted_[v] = out;
    stats_.constants_converted++;
    return out;
  }

  // A cast to `to_` of computed value `v`, emitted once before its first reader.
  int ConvertedCast(int v, std::vector<Node>& nodes) {
    auto it = converted_.find(v);
    if (it != converted_.end()) return it->second;
    int out = AddValue(Retyped(g_.values[v], to_, g_.values[v].name + "/" + to_name_));
    nodes.push_back(CastNode(v, out, OnnxCode(to_), "precision/to_" + to_name_ + "/" + g_.values[v].name));
    converted_[v] = out;
    return out;
  }

  Graph& g_;
  const kernels::KernelRegistry& registry_;
  const DType from_, to_;
  const std::string to_name_, flag_;
  std::vector<bool> active_;  // value -> is an activation (of `to_` once converted)
  std::map<int, int> converted_;
  PrecisionStats stats_;
};

}  // namespace

StatusOr<PrecisionStats> ConvertToFloat16(Graph& graph, const kernels::KernelRegistry& registry) {
  return PrecisionConverter(graph, registry, DType::kFloat32, DType::kFloat16).Run();
}

StatusOr<PrecisionStats> ConvertToFloat32(Graph& graph, const kernels::KernelRegistry& registry) {
  return PrecisionConverter(graph, registry, DType::kFloat16, DType::kFloat32).Run();
}

}  // namespace remex::compiler
