#include "host_client/compiler/passes/layout.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <string>

namespace remex::compiler {
namespace {

// Output dim d of a Transpose with `perm` is input dim perm[d] (ONNX Transpose).
using Perm = std::array<int64_t, 4>;
constexpr Perm kToNhwc = {0, 2, 3, 1};
constexpr Perm kToNchw = {0, 3, 1, 2};

bool IsBlockOp(std::string_view op) { return op == "DepthToSpace" || op == "SpaceToDepth"; }

// The integer convolutions: oneDNN's int8 convolutions read and write channels-last.
bool IsIntegerConv(std::string_view op) { return op == "QLinearConv" || op == "ConvInteger"; }

// QuantizeLinear and DequantizeLinear: elementwise when their scale and zero point hold
// one value each (per axis, `axis` names a channels-first dim).
bool IsQuantizeOp(std::string_view op) { return op == "QuantizeLinear" || op == "DequantizeLinear"; }

template <typename T>
std::vector<T> Permuted(const std::vector<T>& v, const Perm& perm) {
  if (v.size() != 4) return v;
  std::vector<T> out(4);
  for (size_t d = 0; d < 4; ++d) out[d] = v[perm[d]];
  return out;
}

// A 4-D value with a known rank.
bool Is4D(const Value& v) { return v.rank_known && v.shape.size() == 4; }

// A static shape whose dims are all 1: broadcasts the same in either layout.
bool IsAllOnes(const Value& v) {
  if (!v.static_shape()) return false;
  return std::all_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d == 1; });
}

class NhwcPass {
 public:
  NhwcPass(Graph& g, const kernels::KernelRegistry& registry, LayoutOptions options)
      : g_(g), registry_(registry), options_(options) {}

  StatusOr<LayoutStats> Run() {
    bool any_seed = false;
    for (const Node& n : g_.nodes) any_seed = any_seed || IsSeed(n);
    if (!any_seed) return stats_;
    nhwc_of_.assign(g_.values.size(), -1);
    nchw_ready_.assign(g_.values.size(), true);
    for (int in : g_.inputs) inputs_.insert(in);
    for (int out : g_.outputs) outputs_.insert(out);
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& node : nodes) {
      if (IsSeed(node) || IsConvertiblePool(node) || IsConvertibleConcat(node) || IsConvertibleElementwise(node)) {
        REMEX_RETURN_IF_ERROR(Convert(node));
        continue;
      }
      // An NCHW reader: every value it reads (its regions' outer reads included) in NCHW.
      std::vector<int> reads;
      CollectReads(node, reads);
      for (int v : reads) EnsureNchw(v);
      g_.nodes.push_back(std::move(node));
    }
    for (int out : g_.outputs) EnsureNchw(out);
    return stats_;
  }

 private:
  // Conv on a 4-D float32 or float16 X (the dtypes its kernels take, NHWC included:
  // float16 exported as such runs channels-last like float32), QLinearConv, ConvInteger
  // and MaxPool (one output: no Indices) on a 4-D uint8 or int8 X, DepthToSpace,
  // SpaceToDepth on a 4-D value of any dtype.
  bool IsSeed(const Node& n) const {
    if (!n.regions.empty() || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
    if (n.attrs.Has("layout")) return false;
    const Value& x = g_.values[n.inputs[0]];
    if (!Is4D(x) || !Is4D(g_.values[n.outputs[0]])) return false;
    if (n.op == "Conv") return x.dtype == DType::kFloat32 || x.dtype == DType::kFloat16;
    if (IsIntegerConv(n.op)) return x.dtype == DType::kUint8 || x.dtype == DType::kInt8;
    // MaxPool of an int8 model, between its channels-last convolutions (its CPU kernel
    // takes NHWC; float MaxPool stays NCHW, as the CUDA kernel wants it).
    if (n.op == "MaxPool") return x.dtype == DType::kUint8 || x.dtype == DType::kInt8;
    return IsBlockOp(n.op);
  }

  bool HeldNhwc(int v) const { return v >= 0 && static_cast<size_t>(v) < nhwc_of_.size() && nhwc_of_[v] >= 0; }

  // With LayoutOptions::pooling: a float MaxPool (no Indices), AveragePool or
  // GlobalAveragePool whose 4-D X is held as NHWC.
  bool IsConvertiblePool(const Node& n) const {
    if (!options_.pooling || !n.regions.empty() || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    if (n.op != "MaxPool" && n.op != "AveragePool" && n.op != "GlobalAveragePool") return false;
    if (n.attrs.Has("layout") || !HeldNhwc(n.inputs[0])) return false;
    const Value& x = g_.values[n.inputs[0]];
    return Is4D(x) && Is4D(g_.values[n.outputs[0]]) &&
           (x.dtype == DType::kFloat32 || x.dtype == DType::kFloat16 || x.dtype == DType::kFloat64);
  }

  // A Concat of 4-D values, at least one of them held as NHWC (DenseNet's blocks): its
  // axis is renumbered for NHWC.
  bool IsConvertibleConcat(const Node& n) const {
    if (n.op != "Concat" || !n.regions.empty() || n.values_op || n.outputs.size() != 1) return false;
    const StatusOr<int64_t> axis = n.attrs.Int("axis");
    if (!Is4D(g_.values[n.outputs[0]]) || !axis.ok() || *axis < -4 || *axis > 3) return false;
    bool reads_nhwc = false;
    for (int in : n.inputs) {
      if (in < 0 || !Is4D(g_.values[in])) return false;
      reads_nhwc = reads_nhwc || HeldNhwc(in);
    }
    return reads_nhwc;
  }

  // An elementwise op with 4-D outputs reading at least one value held as NHWC, whose
  // other operands are 4-D, broadcast alike in both layouts, or are constants.
  bool IsConvertibleElementwise(const Node& n) const {
    if (!n.regions.empty() || n.values_op) return false;
    if (IsQuantizeOp(n.op)) {
      // X 4-D and held as NHWC, the scale and zero point one value each.
      if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        if (n.inputs[i] >= 0 && !IsAllOnes(g_.values[n.inputs[i]])) return false;
      }
      const int x = n.inputs[0];
      return Is4D(g_.values[x]) && Is4D(g_.values[n.outputs[0]]) && static_cast<size_t>(x) < nhwc_of_.size() &&
             nhwc_of_[x] >= 0;
    }
    if (n.op == "DynamicQuantizeLinear") {
      // Y like X; y_scale and y_zero_point are scalars of the whole tensor, any layout.
      if (n.inputs.size() != 1 || n.inputs[0] < 0 || n.outputs.empty()) return false;
      const int x = n.inputs[0];
      return Is4D(g_.values[x]) && Is4D(g_.values[n.outputs[0]]) && static_cast<size_t>(x) < nhwc_of_.size() &&
             nhwc_of_[x] >= 0;
    }
    const kernels::OpDef* def = registry_.FindOp(n.op, n.version);
    if (!def || !def->traits.layout_agnostic) return false;
    for (int o : n.outputs) if (!Is4D(g_.values[o])) return false;
    bool reads_nhwc = false;
    for (int in : n.inputs) {
      if (in < 0) continue;
      const Value& v = g_.values[in];
      if (v.constant) {
        if (!v.rank_known || v.shape.size() > 4) return false;
        continue;
      }
      if (Is4D(v)) {
        reads_nhwc = reads_nhwc || (static_cast<size_t>(in) < nhwc_of_.size() && nhwc_of_[in] >= 0);
      } else if (!IsAllOnes(v)) {
        return false;
      }
    }
    return reads_nhwc;
  }

  int AddValue(Value v) {
    int id = g_.AddValue(std::move(v));
    nhwc_of_.push_back(-1);
    nchw_ready_.push_back(true);
    return id;
  }

  // A copy of `v`'s type with every per-dim field permuted by `perm`.
  static Value PermutedType(const Value& v, const Perm& perm, const std::string& name) {
    Value out;
    out.name = name;
    out.dtype = v.dtype;
    out.rank_known = v.rank_known;
    out.shape = Permuted(v.shape, perm);
    out.dims = Permuted(v.dims, perm);
    out.bounds = Permuted(v.bounds, perm);
    for (const Shape& s : v.samples) out.samples.push_back(Permuted(s, perm));
    return out;
  }

  void EmitTranspose(int from, int to, const Perm& perm, const std::string& name) {
    Node t;
    t.op = "Transpose";
    t.name = name;
    t.attrs.Set("perm", std::vector<int64_t>(perm.begin(), perm.end()));
    t.inputs = {from};
    t.outputs = {to};
    g_.nodes.push_back(std::move(t));
  }

  // The NHWC twin of original value `v`, transposed from NCHW on first need.
  int EnsureNhwc(int v) {
    if (nhwc_of_[v] >= 0) return nhwc_of_[v];
    const std::string name = g_.values[v].name + "/nhwc";
    int twin = AddValue(PermutedType(g_.values[v], kToNhwc, name));
    EmitTranspose(v, twin, kToNhwc, "layout/to_nhwc/" + g_.values[v].name);
    (inputs_.count(v) ? stats_.transposes_at_edges : stats_.transposes_in_body)++;
    nhwc_of_[v] = twin;
    return twin;
  }

  // Makes original value `v` hold its NCHW data, transposing its NHWC twin on first need.
  void EnsureNchw(int v) {
    if (static_cast<size_t>(v) >= nchw_ready_.size() || nchw_ready_[v]) return;
    EmitTranspose(nhwc_of_[v], v, kToNchw, "layout/to_nchw/" + g_.values[v].name);
    (outputs_.count(v) ? stats_.transposes_at_edges : stats_.transposes_in_body)++;
    nchw_ready_[v] = true;
  }

  // Constant `v` (rank <= 4) as NHWC: left-padded to rank 4, then permuted.
  int PermutedConstant(int v) {
    auto it = permuted_const_.find(v);
    if (it != permuted_const_.end()) return it->second;
    const vm::ConstantDef& c = g_.constants[*g_.values[v].constant];
    Shape s4(4 - c.shape.size(), 1);
    s4.insert(s4.end(), c.shape.begin(), c.shape.end());
    const int64_t n = s4[0], ch = s4[1], h = s4[2], w = s4[3];
    const size_t es = DTypeSize(c.dtype);
    vm::ConstantDef out;
    out.dtype = c.dtype;
    out.shape = Permuted(s4, kToNhwc);
    out.data.resize(c.data.size());
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ic = 0; ic < ch; ++ic)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t iw = 0; iw < w; ++iw) {
            const size_t src = static_cast<size_t>(((in * ch + ic) * h + ih) * w + iw) * es;
            const size_t dst = static_cast<size_t>(((in * h + ih) * w + iw) * ch + ic) * es;
            std::memcpy(out.data.data() + dst, c.data.data() + src, es);
          }
    int id = g_.AddConstant(g_.values[v].name + "/nhwc", std::move(out));
    g_.values[id].dims.assign(4, "");
    nhwc_of_.push_back(-1);
    nchw_ready_.push_back(true);
    permuted_const_[v] = id;
    ++stats_.constants_permuted;
    return id;
  }

  Status Convert(Node& node) {
    // Seeds and pools read X as NHWC and take the `layout` attribute; the others read
    // every operand as NHWC.
    const bool elementwise = !IsSeed(node) && !IsConvertiblePool(node);
    if (node.op == "Concat") {
      // NCHW axis a is NHWC axis d where kToNhwc[d] == a.
      const int64_t axis = (*node.attrs.Int("axis") + 4) % 4;
      const auto it = std::find(kToNhwc.begin(), kToNhwc.end(), axis);
      node.attrs.Set("axis", static_cast<int64_t>(it - kToNhwc.begin()));
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int in = node.inputs[i];
      if (in < 0) continue;
      const Value& v = g_.values[in];
      if (!elementwise) {
        if (i == 0) node.inputs[i] = EnsureNhwc(in);  // W, B keep their layouts
      } else if (v.constant) {
        if (NumElements(v.shape).value_or(0) > 1) node.inputs[i] = PermutedConstant(in);
      } else if (Is4D(v)) {
        node.inputs[i] = EnsureNhwc(in);
      }
    }
    if (!elementwise) node.attrs.Set("layout", std::string("NHWC"));
    for (int& o : node.outputs) {
      if (!Is4D(g_.values[o])) continue;  // DynamicQuantizeLinear's scalars: any layout
      const int twin = AddValue(PermutedType(g_.values[o], kToNhwc, g_.values[o].name + "/nhwc"));
      nhwc_of_[o] = twin;
      nchw_ready_[o] = false;
      o = twin;
    }
    REMEX_RETURN_IF_ERROR(CheckTypes(node));
    ++stats_.nodes_nhwc;
    g_.nodes.push_back(std::move(node));
    return OkStatus();
  }

  // With static inputs, the op's shape function must give the permuted output types.
  Status CheckTypes(const Node& node) const {
    const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
    if (!op) return Internal("layout pass: no op definition for " + Where(node));
    std::vector<kernels::ShapeFnArg> args(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const Value& v = g_.values[node.inputs[i]];
      if (!v.static_shape()) return OkStatus();
      args[i].present = true;
      args[i].dtype = v.dtype;
      args[i].shape = v.shape;
      if (op->DepOf(i) == kernels::ShapeDep::kData) {
        if (!v.constant) return OkStatus();
        args[i].data = g_.constants[*v.constant].data.data();
      }
    }
    auto infos = kernels::InferShapes(*op, node.attrs, args);
    if (!infos.ok()) return Internal("layout pass: " + Where(node) + ": " + infos.status().ToString());
    for (size_t k = 0; k < node.outputs.size() && k < infos->size(); ++k) {
      const Value& out = g_.values[node.outputs[k]];
      if ((*infos)[k].shape != out.shape || (*infos)[k].dtype != out.dtype) {
        return Internal("layout pass: " + Where(node) + " gives " + ShapeToString((*infos)[k].shape) +
                        ", the permuted type is " + ShapeToString(out.shape));
      }
    }
    return OkStatus();
  }

  Graph& g_;
  const kernels::KernelRegistry& registry_;
  const LayoutOptions options_;
  LayoutStats stats_;
  std::vector<int> nhwc_of_;        // per value: its NHWC twin, -1 none
  std::vector<bool> nchw_ready_;    // per value: holds its NCHW data
  std::map<int, int> permuted_const_;
  std::set<int> inputs_, outputs_;
};

void CountIn(const Graph& g, const std::vector<Node>& nodes, const std::set<int>& edges_in,
             const std::set<int>& edges_out, TransposeCount& count) {
  for (const Node& n : nodes) {
    for (const Region& r : n.regions) CountIn(g, r.nodes, edges_in, edges_out, count);
    if (n.op != "Transpose") continue;
    ++count.total;
    bool edge = (!n.inputs.empty() && edges_in.count(n.inputs[0])) ||
                (!n.outputs.empty() && edges_out.count(n.outputs[0]));
    if (edge) ++count.at_edges;
  }
}

}  // namespace

StatusOr<Layout> ParseLayout(std::string_view text) {
  std::string t(text);
  for (char& c : t) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (t == "NCHW") return Layout::kNchw;
  if (t == "NHWC") return Layout::kNhwc;
  if (t.empty() || t == "AUTO") return Layout::kAuto;
  return InvalidArgument("unknown layout '" + std::string(text) + "' (NCHW, NHWC or auto)");
}

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kNhwc:
      return "NHWC";
    case Layout::kAuto:
      return "auto";
    case Layout::kNchw:
      break;
  }
  return "NCHW";
}

StatusOr<LayoutStats> ConvertToNhwc(Graph& graph, const kernels::KernelRegistry& registry, LayoutOptions options) {
  return NhwcPass(graph, registry, options).Run();
}

TransposeCount CountTransposes(const Graph& graph) {
  TransposeCount count;
  std::set<int> in(graph.inputs.begin(), graph.inputs.end());
  std::set<int> out(graph.outputs.begin(), graph.outputs.end());
  CountIn(graph, graph.nodes, in, out, count);
  return count;
}

}  // namespace remex::compiler
