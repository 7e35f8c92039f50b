#include "host_client/compiler/compiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include "host_client/compiler/passes/epilogue_fusion.h"
#include "host_client/compiler/passes/elementwise_fusion.h"
#include "host_client/compiler/onnx_import.h"

namespace remex::compiler {
namespace {

std::string Where(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

// Number of regular samples; two more evaluate the bounds' corners.
constexpr size_t kSamples = 3;
// Largest integer tensor whose values inference carries per sample.
constexpr int64_t kMaxSampleElements = 4096;
// Largest integer tensor the host computes.
constexpr int64_t kMaxHostElements = 64;

bool IsIndexType(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// Output dtypes of a node when its shapes cannot be inferred at compile time: the
// op's own OpDef::output_dtypes.
DType FallbackDType(const Graph& g, const kernels::OpDef& op, const Node& n, size_t output) {
  std::vector<DType> in;
  for (int v : n.inputs) in.push_back(v < 0 ? DType::kUndefined : g.values[v].dtype);
  return kernels::OutputDTypes(op, n.attrs, in, n.outputs.size())[output];
}

// Runs `node`'s CPU kernel on host buffers.
Status RunKernel(const Node& node, const kernels::KernelFactory& factory,
                 std::span<const kernels::TensorRef> ins, std::span<const kernels::TensorRef> outs) {
  auto kernel = factory(node.attrs);
  if (!kernel.ok()) return kernel.status().WithContext(Where(node));
  Status st = (*kernel)->Compute(ins, outs);
  if (!st.ok()) return st.WithContext("evaluating " + Where(node));
  return OkStatus();
}

struct Fraction {
  int64_t p = 0, q = 1;
};

std::string Affine(const std::string& x, Fraction a, int64_t b) {
  std::string s;
  if (a.q == 1) s = a.p == 1 ? x : std::to_string(a.p) + "*" + x;
  else s = (a.p == 1 ? x : std::to_string(a.p) + "*" + x) + "/" + std::to_string(a.q);
  if (b > 0) s += "+" + std::to_string(b);
  if (b < 0) s += "-" + std::to_string(-b);
  return s;
}

// Symbolic inference state: the input symbols and their sample values.
class ShapeInference {
 public:
  ShapeInference(Graph& g, const kernels::KernelRegistry& registry, bool fold,
                 const std::map<std::string, DimBounds>& bounds)
      : g_(g), registry_(registry), fold_(fold), bounds_(bounds) {}

  StatusOr<int> Run() {
    REMEX_RETURN_IF_ERROR(BindInputSymbols());
    REMEX_RETURN_IF_ERROR(InferNodes(g_.nodes));
    return folded_;
  }

 private:
  size_t NumSamples() const { return kSamples + (corners_ ? 2 : 0); }

  Status BindInputSymbols() {
    std::vector<std::string> order;
    for (int in : g_.inputs) {
      Value& v = g_.values[in];
      if (!v.rank_known) continue;
      v.dims.resize(v.shape.size());
      for (size_t d = 0; d < v.shape.size(); ++d) {
        if (v.shape[d] >= 0) {
          v.dims[d].clear();
          continue;
        }
        if (v.dims[d].empty()) v.dims[d] = v.name + ":" + std::to_string(d);
        if (!symbols_.count(v.dims[d])) {
          symbols_[v.dims[d]] = {};
          order.push_back(v.dims[d]);
        }
      }
    }
    for (const auto& [name, b] : bounds_) {
      if (!symbols_.count(name)) {
        return InvalidArgument("--bound names '" + name + "', which is no symbolic input dimension");
      }
      if (b.min < 0 || (b.max >= 0 && b.max < b.min)) {
        return InvalidArgument("bounds of '" + name + "' are empty or negative");
      }
    }
    corners_ = !order.empty();
    static const int64_t kNice[] = {224, 96, 352, 160, 288, 416, 480, 128, 320, 192};
    for (size_t i = 0; i < order.size(); ++i) {
      DimBounds b{1, -1};
      auto it = bounds_.find(order[i]);
      if (it != bounds_.end()) b = it->second;
      if (b.max < 0) corners_ = false;
      std::vector<int64_t>& vals = symbols_[order[i]];
      bool nice_fit = true;
      for (size_t k = 0; k < kSamples; ++k) {
        int64_t v = kNice[(i * 3 + k * 7) % 10];
        nice_fit = nice_fit && v >= b.min && (b.max < 0 || v <= b.max);
        vals.push_back(v);
      }
      if (!nice_fit) {
        // Spread over the range on the coarsest grid of multiples that has room
        // (models often need multiples of 32): [257, 512] gives 384, 448, 512;
        // [1, 2] gives 1, 2, 2.
        const int64_t hi = b.max >= 0 ? b.max : b.min + 1024;
        for (int64_t g : {64, 32, 16, 8, 4, 2, 1}) {
          const int64_t first = std::max<int64_t>((b.min + g - 1) / g * g, 1), last = hi / g * g;
          if (first > last) continue;
          const int64_t count = (last - first) / g + 1;
          if (count < static_cast<int64_t>(kSamples) && g > 1) continue;
          for (size_t k = 0; k < kSamples; ++k) {
            int64_t idx = std::min(count - 1, static_cast<int64_t>(k + 1) * count / static_cast<int64_t>(kSamples + 1));
            vals[k] = std::max(first + idx * g, b.min);
          }
          break;
        }
      }
      bounds_of_[order[i]] = b;
    }
    if (corners_) {
      for (auto& [name, vals] : symbols_) {
        vals.push_back(bounds_of_[name].min);
        vals.push_back(bounds_of_[name].max);
      }
    }
    for (int in : g_.inputs) {
      Value& v = g_.values[in];
      if (!v.rank_known || v.static_shape()) continue;
      for (size_t k = 0; k < NumSamples(); ++k) {
        Shape s = v.shape;
        for (size_t d = 0; d < s.size(); ++d) if (s[d] < 0) s[d] = symbols_[v.dims[d]][k];
        v.samples.push_back(std::move(s));
      }
      Describe(v);
      // An input's bounds are its symbols' own, corners or not.
      v.bounds.clear();
      for (size_t d = 0; d < v.shape.size(); ++d) {
        v.bounds.push_back(v.shape[d] >= 0 ? DimBounds{v.shape[d], v.shape[d]} : bounds_of_[v.dims[d]]);
      }
    }
    return OkStatus();
  }

  // Names the dynamic dims of `v` from its samples, and bounds them from the corners.
  void Describe(Value& v) {
    v.dims.assign(v.shape.size(), "");
    v.bounds.clear();
    if (v.samples.empty()) {
      for (size_t d = 0; d < v.shape.size(); ++d) if (v.shape[d] < 0) v.dims[d] = "?";
      return;
    }
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] >= 0) continue;
      std::vector<int64_t> f;
      for (size_t k = 0; k < kSamples; ++k) f.push_back(v.samples[k][d]);
      v.dims[d] = Fit(f);
    }
    // Bounds need both corners; a node whose evaluation at a corner failed has none.
    if (corners_ && v.samples.size() >= kSamples + 2) {
      for (size_t d = 0; d < v.shape.size(); ++d) {
        int64_t a = v.samples[kSamples][d], b = v.samples[kSamples + 1][d];
        v.bounds.push_back(v.shape[d] >= 0          ? DimBounds{v.shape[d], v.shape[d]}
                           : v.lower_corner_unknown ? DimBounds{0, std::max(a, b)}
                                                    : DimBounds{std::min(a, b), std::max(a, b)});
      }
    }
  }

  // The simplest expression over the symbols matching fingerprint `f`.
  std::string Fit(const std::vector<int64_t>& f) const {
    for (const auto& [name, x] : symbols_) {
      bool same = true;
      for (size_t k = 0; k < kSamples; ++k) same = same && f[k] == x[k];
      if (same) return name;
    }
    for (const auto& [name, x] : symbols_) {
      int64_t dx = x[1] - x[0], df = f[1] - f[0];
      if (dx == 0 || df == 0) continue;
      int64_t gcd = std::gcd(dx, df);
      Fraction a{df / gcd, dx / gcd};
      if (a.q < 0) a = {-a.p, -a.q};
      if ((f[0] * a.q - a.p * x[0]) % a.q != 0) continue;
      int64_t b = (f[0] * a.q - a.p * x[0]) / a.q;
      bool fits = a.p > 0;
      for (size_t k = 0; k < kSamples && fits; ++k) fits = f[k] * a.q == a.p * x[k] + b * a.q;
      if (fits) return Affine(name, a, b);
    }
    for (const auto& [n1, x1] : symbols_) {
      for (const auto& [n2, x2] : symbols_) {
        if (n2 < n1) continue;
        bool fits = true;
        for (size_t k = 0; k < kSamples && fits; ++k) fits = f[k] == x1[k] * x2[k];
        if (fits) return n1 + "*" + n2;
      }
    }
    return "?";
  }

  // A value's shape in sample k (its static shape when it has no samples).
  static const Shape& SampleShape(const Value& v, size_t k) { return v.samples.empty() ? v.shape : v.samples[k]; }
  static bool Sampled(const Value& v) { return v.rank_known && (v.static_shape() || !v.samples.empty()); }

  Status InferNodes(std::vector<Node>& nodes) {
    std::vector<Node> kept;
    for (Node& node : nodes) {
      bool folded = false;
      if (node.op == "If") {
        REMEX_RETURN_IF_ERROR(InferIf(node));
      } else if (node.op == "Loop") {
        REMEX_RETURN_IF_ERROR(InferLoop(node));
      } else {
        REMEX_ASSIGN_OR_RETURN(folded, InferNode(node));
      }
      if (folded) {
        ++folded_;
        continue;
      }
      kept.push_back(std::move(node));
    }
    nodes = std::move(kept);
    return OkStatus();
  }

  void SetUnknown(const Node& node, const kernels::OpDef& op) {
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      Value& out = g_.values[node.outputs[i]];
      out.dtype = FallbackDType(g_, op, node, i);
      out.samples.clear();
      out.sample_data.clear();
      // A graph output keeps the rank the model declares for it; others are unknown.
      if (!out.rank_known) out.shape.clear();
      Describe(out);
    }
  }

  // Returns true when the node was folded into constants.
  StatusOr<bool> InferNode(Node& node) {
    const kernels::OpDef* op = registry_.FindOp(node.op);
    if (!op) return Unimplemented("unsupported op '" + node.op + "' in " + Where(node));
    bool all_static = true, all_constant = !node.inputs.empty(), sampled = true, data_known = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const Value& v = g_.values[node.inputs[i]];
      if (!v.static_shape()) all_static = false;
      if (!Sampled(v)) sampled = false;
      if (!v.constant && !op->reads_shapes_only) all_constant = false;
      if (!v.constant && v.sample_data.empty() && !op->reads_shapes_only) data_known = false;
      if (op->DepOf(i) == kernels::ShapeDep::kData && !v.constant) {
        all_static = false;
        if (v.sample_data.empty()) sampled = false;
      }
    }
    const kernels::KernelFactory* factory = registry_.FindKernel(node.op, kernels::DeviceKind::kCpu);
    std::vector<std::vector<kernels::TensorInfo>> per_sample;
    if (all_static) {
      // Exact: errors are the model's.
      REMEX_ASSIGN_OR_RETURN(auto infos, Evaluate(node, *op, 0));
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        Value& out = g_.values[node.outputs[i]];
        out.dtype = infos[i].dtype;
        out.shape = infos[i].shape;
        out.rank_known = true;
        out.samples.clear();
        Describe(out);
      }
      if (fold_ && all_constant && factory) {
        REMEX_RETURN_IF_ERROR(Fold(node, *factory));
        return true;
      }
      bool carries_samples = false;
      for (int in : node.inputs) carries_samples = carries_samples || (in >= 0 && !g_.values[in].sample_data.empty());
      if (!carries_samples || !data_known) return false;
      per_sample.assign(NumSamples(), infos);
    } else if (!sampled || NumSamples() == 0) {
      SetUnknown(node, *op);
      return false;
    }
    // (Static inputs filled per_sample above; this runs for symbolic ones only.)
    // An op may refuse the lower corner (a model that needs multiples of 32 at a
    // bucket starting at 257): the upper corner alone still bounds the outputs from
    // above, which is what memory planning needs. The lower corner then repeats the
    // upper one, and the outputs' lower bounds are marked unknown.
    bool lower_corner_unknown = false;
    for (int in : node.inputs) lower_corner_unknown = lower_corner_unknown || (in >= 0 && g_.values[in].lower_corner_unknown);
    for (size_t k = per_sample.size(); k < NumSamples(); ++k) {
      auto infos = Evaluate(node, *op, k);
      if (!infos.ok()) {
        if (k < kSamples) {
          SetUnknown(node, *op);
          return false;
        }
        if (k == kSamples) {
          lower_corner_unknown = true;
          per_sample.emplace_back();  // filled from the upper corner below
          continue;
        }
        if (lower_corner_unknown && per_sample.size() == kSamples + 1 && per_sample.back().empty()) per_sample.pop_back();
        break;  // the upper corner refused: the outputs get no bounds
      }
      per_sample.push_back(std::move(infos).value());
    }
    if (per_sample.size() == kSamples + 2 && per_sample[kSamples].empty()) per_sample[kSamples] = per_sample[kSamples + 1];
    bool with_corners = per_sample.size() == NumSamples() && corners_;
    for (int o : node.outputs) g_.values[o].lower_corner_unknown = with_corners && lower_corner_unknown;
    for (size_t i = 0; i < node.outputs.size() && !all_static; ++i) {
      Value& out = g_.values[node.outputs[i]];
      const auto& first = per_sample[0][i];
      out.dtype = first.dtype;
      out.rank_known = true;
      out.shape = first.shape;
      out.samples.clear();
      bool consistent = true;
      for (size_t k = 0; k < per_sample.size(); ++k) {
        const auto& s = per_sample[k][i];
        if (s.shape.size() != first.shape.size() || s.dtype != first.dtype) consistent = false;
      }
      if (!consistent) {
        out.shape.clear();
        out.rank_known = false;
        Describe(out);
        continue;
      }
      // A dim is static only if every sample, the corners included, agrees: with
      // shape functions monotone in their inputs, equal corners mean a constant dim
      // over the whole box, even where the samples happen to coincide.
      for (size_t k = 0; k < per_sample.size(); ++k) {
        for (size_t d = 0; d < out.shape.size(); ++d) {
          if (per_sample[k][i].shape[d] != out.shape[d]) out.shape[d] = -1;
        }
      }
      for (size_t k = 0; k < per_sample.size(); ++k) out.samples.push_back(per_sample[k][i].shape);
      if (!with_corners) out.samples.resize(kSamples);
      if (out.static_shape()) out.samples.clear();
      Describe(out);
    }
    // Carry the values of small integer results (shape arithmetic) per sample.
    bool small_ints = factory && data_known && with_corners == corners_;
    for (int o : node.outputs) {
      const Value& out = g_.values[o];
      if (!out.rank_known || !IsIndexType(out.dtype)) small_ints = false;
      for (size_t k = 0; small_ints && k < per_sample.size(); ++k) {
        auto n = NumElements(SampleShape(out, k));
        if (!n || *n > kMaxSampleElements) small_ints = false;
      }
    }
    if (small_ints) {
      std::vector<std::vector<std::vector<std::byte>>> results(node.outputs.size());
      for (size_t k = 0; k < NumSamples() && small_ints; ++k) {
        std::vector<kernels::TensorRef> ins(node.inputs.size()), outs(node.outputs.size());
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          if (node.inputs[i] < 0) continue;
          const Value& v = g_.values[node.inputs[i]];
          if ((!v.constant && !v.sample_data.empty() && k >= v.sample_data.size()) ||
              (!v.samples.empty() && k >= v.samples.size())) {
            small_ints = false;  // an input without this (corner) sample
            break;
          }
          const void* data = v.constant ? g_.constants[*v.constant].data.data()
                             : v.sample_data.empty() ? nullptr : v.sample_data[k].data();
          ins[i] = {const_cast<void*>(data), v.dtype, SampleShape(v, k)};
        }
        for (size_t i = 0; i < node.outputs.size(); ++i) {
          const Value& v = g_.values[node.outputs[i]];
          const Shape& s = SampleShape(v, k);
          results[i].emplace_back(static_cast<size_t>(*NumElements(s)) * DTypeSize(v.dtype));
          outs[i] = {results[i].back().data(), v.dtype, s};
        }
        if (!small_ints) break;
        if (!RunKernel(node, *factory, ins, outs).ok()) small_ints = false;
      }
      if (small_ints) {
        for (size_t i = 0; i < node.outputs.size(); ++i) g_.values[node.outputs[i]].sample_data = std::move(results[i]);
      }
    }
    return false;
  }

  // Runs the shape function on sample k.
  StatusOr<std::vector<kernels::TensorInfo>> Evaluate(const Node& node, const kernels::OpDef& op, size_t k) {
    std::vector<kernels::ShapeFnArg> args(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const Value& v = g_.values[node.inputs[i]];
      // An input left without corner samples (its own corner failed) has no sample k.
      if ((!v.samples.empty() && k >= v.samples.size()) ||
          (op.DepOf(i) == kernels::ShapeDep::kData && !v.constant && k >= v.sample_data.size())) {
        return FailedPrecondition(Where(node) + ": input '" + v.name + "' has no sample " + std::to_string(k));
      }
      args[i].present = true;
      args[i].dtype = v.dtype;
      args[i].shape = SampleShape(v, k);
      if (op.DepOf(i) == kernels::ShapeDep::kData) {
        args[i].data = v.constant ? g_.constants[*v.constant].data.data() : v.sample_data[k].data();
      }
    }
    auto infos = kernels::InferShapes(op, node.attrs, args);
    if (!infos.ok()) return infos.status().WithContext(Where(node));
    if (infos->size() < node.outputs.size()) {
      return Internal(Where(node) + ": shape function returned too few outputs");
    }
    return infos;
  }

  // Evaluates `node` (all inputs constant, outputs static) with its CPU kernel; its
  // outputs become constants.
  Status Fold(const Node& node, const kernels::KernelFactory& factory) {
    std::vector<kernels::TensorRef> ins(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const Value& v = g_.values[node.inputs[i]];
      if (!v.constant) {  // a shape-only input: the kernel reads its shape
        ins[i] = {nullptr, v.dtype, v.shape};
        continue;
      }
      auto& c = g_.constants[*v.constant];
      ins[i] = {c.data.data(), c.dtype, c.shape};
    }
    std::vector<vm::ConstantDef> results(node.outputs.size());
    std::vector<kernels::TensorRef> outs(node.outputs.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const Value& v = g_.values[node.outputs[i]];
      results[i].dtype = v.dtype;
      results[i].shape = v.shape;
      results[i].data.resize(static_cast<size_t>(*NumElements(v.shape)) * DTypeSize(v.dtype));
      outs[i] = {results[i].data.data(), v.dtype, v.shape};
    }
    REMEX_RETURN_IF_ERROR(RunKernel(node, factory, ins, outs));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      g_.values[node.outputs[i]].constant = g_.constants.size();
      g_.constants.push_back(std::move(results[i]));
    }
    return OkStatus();
  }

  // Joins the types of `a` and `b` into `out`: equal dims stay, others become dynamic;
  // ranks that differ leave the rank unknown.
  void Join(Value& out, const Value& a, const Value& b) {
    out.dtype = a.dtype != DType::kUndefined ? a.dtype : b.dtype;
    out.samples.clear();
    out.sample_data.clear();
    if (!a.rank_known || !b.rank_known || a.shape.size() != b.shape.size()) {
      if (!out.rank_known) out.shape.clear();
      Describe(out);
      return;
    }
    out.rank_known = true;
    out.shape = a.shape;
    for (size_t d = 0; d < out.shape.size(); ++d) if (a.shape[d] != b.shape[d]) out.shape[d] = -1;
    Describe(out);
  }

  Status InferIf(Node& node) {
    if (node.inputs.size() != 1 || node.inputs[0] < 0) return InvalidArgument(Where(node) + " needs one condition input");
    for (Region& r : node.regions) REMEX_RETURN_IF_ERROR(InferNodes(r.nodes));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const Value& t = g_.values[node.regions[0].outputs[i]];
      const Value& e = g_.values[node.regions[1].outputs[i]];
      if (t.dtype != e.dtype && t.dtype != DType::kUndefined && e.dtype != DType::kUndefined) {
        return InvalidArgument(Where(node) + ": branches give output " + std::to_string(i) + " dtypes " +
                               std::string(DTypeName(t.dtype)) + " and " + std::string(DTypeName(e.dtype)));
      }
      Join(g_.values[node.outputs[i]], t, e);
    }
    return OkStatus();
  }

  Status InferLoop(Node& node) {
    Region& body = node.regions[0];
    const size_t carried = node.inputs.size() - 2;
    auto set_input = [&](int id, DType dtype, const Value* like) {
      Value& v = g_.values[id];
      v.dtype = dtype;
      v.samples.clear();
      v.sample_data.clear();
      if (like) {
        v.rank_known = like->rank_known;
        v.shape = like->shape;
      } else {
        v.rank_known = true;
        v.shape = {};
      }
      Describe(v);
    };
    set_input(body.inputs[0], DType::kInt64, nullptr);
    set_input(body.inputs[1], DType::kBool, nullptr);
    // Where the code generator keeps them (EmitLoop): the iteration counter in host
    // memory (the VM's Increment makes it there), the condition in device memory.
    g_.values[body.inputs[0]].host = true;
    g_.values[body.inputs[1]].host = false;
    for (size_t k = 0; k < carried; ++k) {
      int init = node.inputs[2 + k];
      if (init < 0) return InvalidArgument(Where(node) + ": loop-carried input " + std::to_string(k) + " is absent");
      set_input(body.inputs[2 + k], g_.values[init].dtype, &g_.values[init]);
    }
    // Infer the body; where an iteration changes a carried value's shape, widen the
    // carried input to the join and infer again (twice at most: a join only loses dims).
    for (int pass = 0; pass < 3; ++pass) {
      REMEX_RETURN_IF_ERROR(InferNodes(body.nodes));
      bool stable = true;
      for (size_t k = 0; k < carried; ++k) {
        Value& in = g_.values[body.inputs[2 + k]];
        const Value& out = g_.values[body.outputs[1 + k]];
        if (in.rank_known != out.rank_known || in.shape != out.shape) {
          Value joined = in;
          Join(joined, in, out);
          if (pass == 1) joined.rank_known = false, joined.shape.clear();
          if (joined.rank_known != in.rank_known || joined.shape != in.shape) {
            in.rank_known = joined.rank_known;
            in.shape = joined.shape;
            Describe(in);
            stable = false;
          }
        }
      }
      if (stable) break;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      Value& out = g_.values[node.outputs[i]];
      const Value& src = g_.values[body.outputs[1 + i]];
      out.samples.clear();
      out.sample_data.clear();
      out.dtype = src.dtype;
      if (i < carried) {
        const Value& in = g_.values[body.inputs[2 + i]];
        Join(out, in, src);
      } else if (src.rank_known) {  // scan output: iterations stacked on a new axis 0
        out.rank_known = true;
        out.shape = src.shape;
        out.shape.insert(out.shape.begin(), -1);
        Describe(out);
      } else {
        if (!out.rank_known) out.shape.clear();
        Describe(out);
      }
    }
    return OkStatus();
  }

  Graph& g_;
  const kernels::KernelRegistry& registry_;
  bool fold_;
  const std::map<std::string, DimBounds>& bounds_;
  std::map<std::string, std::vector<int64_t>> symbols_;  // sample values per symbol
  std::map<std::string, DimBounds> bounds_of_;
  bool corners_ = false;
  int folded_ = 0;
};

// Every value a node reads, those read inside its regions included.
void CollectReads(const Node& node, std::vector<int>& out) {
  for (int in : node.inputs) if (in >= 0) out.push_back(in);
  for (const Region& r : node.regions) {
    for (const Node& n : r.nodes) CollectReads(n, out);
    for (int o : r.outputs) out.push_back(o);
  }
}

}  // namespace

std::string SymbolicShapeString(const Value& v) {
  return v.rank_known ? ShapeToString(v.shape, v.dims) : "[?]";
}

StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants,
                          const std::map<std::string, DimBounds>& bounds) {
  return ShapeInference(graph, registry, fold_constants, bounds).Run();
}

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

namespace {

int PlaceNodes(Graph& g, std::vector<Node>& nodes, const kernels::KernelRegistry& registry) {
  int placed = 0;
  for (Node& node : nodes) {
    for (Region& r : node.regions) placed += PlaceNodes(g, r.nodes, registry);
    if (!node.regions.empty()) continue;
    const kernels::OpDef* op = registry.FindOp(node.op);
    if (!op || !registry.FindKernel(node.op, kernels::DeviceKind::kCpu)) continue;
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

namespace {

class CodeGenerator {
 public:
  CodeGenerator(const Graph& g, const kernels::KernelRegistry& registry) : g_(g), registry_(registry) {}

  StatusOr<vm::ExecutableDef> Run() {
    def_.producer = "remex compiler";
    def_.constants = g_.constants;
    vm::FunctionDef& fn = fn_;
    fn.name = "main";
    std::set<std::string> symbols;
    for (int in : g_.inputs) {
      const Value& v = g_.values[in];
      if (!v.rank_known) {
        return Unimplemented("the model does not give the rank of input '" + v.name +
                             "': give its shape (--shape " + v.name + "=DIMS)");
      }
      vm::ValueDesc desc{v.name, v.dtype, v.shape, {}};
      if (!v.static_shape()) {
        desc.dims = v.dims;
        for (size_t d = 0; d < v.shape.size(); ++d) {
          if (v.shape[d] >= 0 || !symbols.insert(v.dims[d]).second) continue;
          DimBounds b = d < v.bounds.size() ? v.bounds[d] : DimBounds{};
          def_.symbols.push_back({v.dims[d], b.min, b.max});
        }
      }
      fn.inputs.push_back(std::move(desc));
      reg_[in] = next_reg_++;
    }
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      const Value& v = g_.values[g_.outputs[k]];
      if (!v.rank_known) {
        return Unimplemented("the rank of output '" + v.name + "' is not known at compile time");
      }
      if (DTypeSize(v.dtype) == 0) return Internal("output '" + v.name + "' has no dtype");
      vm::ValueDesc desc{v.name, v.dtype, v.shape, {}};
      if (!v.static_shape() && v.dims.size() == v.shape.size()) desc.dims = v.dims;
      fn.outputs.push_back(std::move(desc));
      // The first position of a value among the outputs is produced in place.
      if (!output_index_.count(g_.outputs[k])) output_index_[g_.outputs[k]] = static_cast<int>(k);
    }
    scopes_.emplace_back();
    REMEX_RETURN_IF_ERROR(EmitNodes(g_.nodes));
    // Outputs that are not produced in place by a node (inputs, constants, host
    // values, control-flow results, repeats) are copied into their own output buffer.
    std::vector<int64_t> ret;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      int v = g_.outputs[k];
      bool in_place = output_index_[v] == static_cast<int>(k) && produced_.count(v);
      if (in_place) {
        ret.push_back(reg_[v]);
        continue;
      }
      REMEX_ASSIGN_OR_RETURN(int64_t src, Use(v, /*host=*/false));
      REMEX_ASSIGN_OR_RETURN(int64_t dst, EmitCopyToOutput(v, static_cast<int>(k), src));
      ret.push_back(dst);
    }
    Emit(vm::Opcode::kRet, {}, {ret});
    fn.num_registers = static_cast<int32_t>(next_reg_);
    def_.functions.push_back(std::move(fn));
    return std::move(def_);
  }

  int copies_to_host() const { return copies_to_host_; }

 private:
  void Emit(vm::Opcode op, std::vector<int64_t> scalars, std::vector<std::vector<int64_t>> lists) {
    fn_.code.push_back({op, std::move(scalars), std::move(lists)});
    bound_bytes_.push_back(-1);
  }

 public:
  // Per instruction: for an AllocTensor / AllocTensorReg, an upper bound on the bytes
  // of the tensor it makes (-1: unbounded); -1 for the others. For PlanMemory.
  const std::vector<int64_t>& bound_bytes() const { return bound_bytes_; }

 private:
  // Upper bound on the bytes of `v` from its static dims and the bounds of its
  // dynamic ones; -1 when a dim is unbounded.
  static int64_t BoundBytes(const Value& v) {
    if (!v.rank_known) return -1;
    int64_t n = static_cast<int64_t>(DTypeSize(v.dtype));
    for (size_t d = 0; d < v.shape.size(); ++d) {
      int64_t dim = v.shape[d];
      if (dim < 0) dim = d < v.bounds.size() ? v.bounds[d].max : -1;
      if (dim < 0) return -1;
      if (dim > 0 && n > std::numeric_limits<int64_t>::max() / dim) return -1;
      n *= dim;
    }
    return n;
  }
  int64_t Here() const { return static_cast<int64_t>(fn_.code.size()); }

  // Register of value `v` in the memory space a reader needs: constants are loaded on
  // first use in that space; values in the other space are copied (counted by the
  // VM). Loads and copies are cached per region scope: code after a branch or loop
  // cannot rely on what only one path made.
  StatusOr<int64_t> Use(int v, bool host) {
    const Value& value = g_.values[v];
    bool lives_on_host = value.host;
    if (value.constant) {
      auto key = std::make_pair(v, host);
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        auto f = it->find(key);
        if (f != it->end()) return f->second;
      }
      int64_t r = next_reg_++;
      Emit(vm::Opcode::kLoadConst, {r, static_cast<int64_t>(*value.constant), host ? 1 : 0}, {});
      scopes_.back()[key] = r;
      return r;
    }
    auto it = reg_.find(v);
    if (it == reg_.end()) return Internal("value '" + value.name + "' is used before it is defined");
    if (lives_on_host == host) return it->second;
    auto key = std::make_pair(v, host);
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto f = s->find(key);
      if (f != s->end()) return f->second;
    }
    int64_t r = next_reg_++;
    Emit(host ? vm::Opcode::kCopyToHost : vm::Opcode::kCopyToDevice, {r, it->second}, {});
    if (host) ++copies_to_host_;
    scopes_.back()[key] = r;
    return r;
  }

  int64_t KernelIndex(const Node& node) {
    vm::KernelEntry entry;
    entry.op = node.op;
    entry.attrs = node.attrs;
    entry.num_inputs = static_cast<int32_t>(node.inputs.size());
    entry.num_outputs = static_cast<int32_t>(node.outputs.size());
    entry.node_name = node.name;
    entry.host = node.host;
    def_.kernels.push_back(std::move(entry));
    return static_cast<int64_t>(def_.kernels.size() - 1);
  }

  // Copies value `v` (an input, a constant or an output produced elsewhere) into the
  // buffer of output `k` with an Identity kernel; a dynamic shape is taken from the
  // source at run time.
  StatusOr<int64_t> EmitCopyToOutput(int v, int k, int64_t src) {
    const Value& value = g_.values[v];
    vm::KernelEntry entry{"Identity", {}, 1, 1, "copy to output '" + value.name + "'", false};
    def_.kernels.push_back(std::move(entry));
    int64_t kernel = static_cast<int64_t>(def_.kernels.size() - 1);
    int64_t dst = next_reg_++;
    if (value.static_shape()) {
      Emit(vm::Opcode::kAllocOutput, {dst, k, static_cast<int64_t>(value.dtype), -1}, {value.shape});
    } else {
      int64_t shape_reg = next_reg_++;
      Emit(vm::Opcode::kInvokeShapeFunc, {kernel}, {{src}, {shape_reg}});
      Emit(vm::Opcode::kAllocOutput, {dst, k, static_cast<int64_t>(value.dtype), shape_reg}, {{}});
    }
    Emit(vm::Opcode::kInvokeKernel, {kernel}, {{src}, {dst}});
    return dst;
  }

  // Last reader of each value among `nodes` (reads inside a node's regions count as
  // reads by the node).
  std::map<int, size_t> LastUses(const std::vector<Node>& nodes) {
    std::map<int, size_t> last;
    std::vector<int> reads;
    for (size_t i = 0; i < nodes.size(); ++i) {
      reads.clear();
      CollectReads(nodes[i], reads);
      for (int in : reads) last[in] = i;
    }
    return last;
  }

  Status EmitNodes(const std::vector<Node>& nodes, const std::vector<int>& keep_alive = {}) {
    std::map<int, size_t> last = LastUses(nodes);
    std::set<int> keep(keep_alive.begin(), keep_alive.end());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& node = nodes[i];
      if (node.op == "If") {
        REMEX_RETURN_IF_ERROR(EmitIf(node));
      } else if (node.op == "Loop") {
        REMEX_RETURN_IF_ERROR(EmitLoop(node));
      } else {
        REMEX_RETURN_IF_ERROR(EmitNode(node));
      }
      // Release values defined in this region whose last reader this node was.
      std::vector<int> reads;
      CollectReads(node, reads);
      std::set<int> released;
      for (int in : reads) {
        if (released.count(in) || last[in] != i || output_index_.count(in) || keep.count(in)) continue;
        if (!defined_here_.count(in) || defined_here_[in] != depth_) continue;
        released.insert(in);
        Emit(vm::Opcode::kKillRegister, {reg_[in]}, {});
      }
      for (int v : node.outputs) {
        if (!last.count(v) && !output_index_.count(v) && !keep.count(v)) Emit(vm::Opcode::kKillRegister, {reg_[v]}, {});
      }
    }
    return OkStatus();
  }

  Status EmitNode(const Node& node) {
    const kernels::OpDef* op = registry_.FindOp(node.op);
    if (!op) return Unimplemented("unsupported op '" + node.op + "' in " + Where(node));
    std::vector<int64_t> ins;
    bool inputs_static = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int in = node.inputs[i];
      if (in < 0) {
        ins.push_back(-1);
        continue;
      }
      const Value& v = g_.values[in];
      if (!v.static_shape()) inputs_static = false;
      bool data = op->DepOf(i) == kernels::ShapeDep::kData;
      if (data && !v.constant) inputs_static = false;
      // Where the reader needs the value (kernels::InputMemoryOf); a shape-only
      // reader takes a computed value where it is, a constant where a data reader would.
      const kernels::InputMemory where = kernels::InputMemoryOf(*op, i, node.host);
      bool host = where == kernels::InputMemory::kHost;
      if (where == kernels::InputMemory::kAny) host = v.constant ? (node.host || data) : v.host;
      REMEX_ASSIGN_OR_RETURN(int64_t r, Use(in, host));
      ins.push_back(r);
    }
    int64_t kernel = KernelIndex(node);
    bool all_static = inputs_static && std::all_of(node.outputs.begin(), node.outputs.end(),
                                                   [&](int v) { return g_.values[v].static_shape(); });
    std::vector<int64_t> shape_regs;
    if (!all_static) {
      for (size_t i = 0; i < node.outputs.size(); ++i) shape_regs.push_back(next_reg_++);
      Emit(vm::Opcode::kInvokeShapeFunc, {kernel}, {ins, shape_regs});
    }
    const int64_t space = node.host ? 1 : 0;
    std::vector<int64_t> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int v = node.outputs[i];
      const Value& value = g_.values[v];
      if (DTypeSize(value.dtype) == 0) {
        return Internal("cannot determine the dtype of '" + value.name + "' in " + Where(node));
      }
      int64_t dst = next_reg_++;
      int64_t dtype = static_cast<int64_t>(value.dtype);
      auto out = output_index_.find(v);
      if (out != output_index_.end() && !node.host && depth_ == 0) {
        Emit(vm::Opcode::kAllocOutput, {dst, out->second, dtype, all_static ? -1 : shape_regs[i]},
             {all_static ? value.shape : Shape{}});
        produced_.insert(v);
      } else if (all_static) {
        Emit(vm::Opcode::kAllocTensor, {dst, dtype, space}, {value.shape});
        bound_bytes_.back() = BoundBytes(value);
      } else {
        Emit(vm::Opcode::kAllocTensorReg, {dst, dtype, shape_regs[i], space}, {});
        bound_bytes_.back() = BoundBytes(value);
      }
      Define(v, dst);
      outs.push_back(dst);
    }
    Emit(vm::Opcode::kInvokeKernel, {kernel}, {ins, outs});
    for (int64_t r : shape_regs) Emit(vm::Opcode::kKillRegister, {r}, {});
    return OkStatus();
  }

  void Define(int v, int64_t r) {
    reg_[v] = r;
    defined_here_[v] = depth_;
  }

  // Emits a region's nodes in a fresh scope; `results` receive its outputs' registers.
  Status EmitRegion(const Region& region, std::vector<int64_t>& results) {
    ++depth_;
    scopes_.emplace_back();
    std::vector<int> keep = region.outputs;
    keep.insert(keep.end(), region.inputs.begin(), region.inputs.end());
    Status st = EmitNodes(region.nodes, keep);
    results.clear();
    for (int o : region.outputs) {
      if (!st.ok()) break;
      auto r = Use(o, false);
      if (!r.ok()) st = r.status();
      else results.push_back(*r);
    }
    scopes_.pop_back();
    --depth_;
    return st;
  }

  Status EmitIf(const Node& node) {
    REMEX_ASSIGN_OR_RETURN(int64_t cond, Use(node.inputs[0], g_.values[node.inputs[0]].host));
    std::vector<int64_t> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) outs.push_back(next_reg_++);
    size_t if_pc = fn_.code.size();
    Emit(vm::Opcode::kIf, {cond, 0}, {});
    std::vector<int64_t> results;
    REMEX_RETURN_IF_ERROR(EmitRegion(node.regions[0], results));
    for (size_t i = 0; i < outs.size(); ++i) Emit(vm::Opcode::kMove, {outs[i], results[i]}, {});
    size_t goto_pc = fn_.code.size();
    Emit(vm::Opcode::kGoto, {0}, {});
    fn_.code[if_pc].scalars[1] = Here();
    REMEX_RETURN_IF_ERROR(EmitRegion(node.regions[1], results));
    for (size_t i = 0; i < outs.size(); ++i) Emit(vm::Opcode::kMove, {outs[i], results[i]}, {});
    fn_.code[goto_pc].scalars[0] = Here();
    for (size_t i = 0; i < outs.size(); ++i) Define(node.outputs[i], outs[i]);
    return OkStatus();
  }

  StatusOr<int64_t> HostScalarConstant(DType dtype, int64_t value) {
    vm::ConstantDef c;
    c.dtype = dtype;
    c.data.resize(DTypeSize(dtype));
    if (dtype == DType::kBool) c.data[0] = static_cast<std::byte>(value != 0);
    else std::memcpy(c.data.data(), &value, sizeof(int64_t));
    def_.constants.push_back(std::move(c));
    int64_t r = next_reg_++;
    Emit(vm::Opcode::kLoadConst, {r, static_cast<int64_t>(def_.constants.size() - 1), 1}, {});
    return r;
  }

  Status EmitLoop(const Node& node) {
    const Region& body = node.regions[0];
    const size_t carried = node.inputs.size() - 2;
    const size_t scans = body.outputs.size() - 1 - carried;
    int64_t max_trips = -1, cond = -1;
    if (node.inputs[0] >= 0) {
      REMEX_ASSIGN_OR_RETURN(max_trips, Use(node.inputs[0], g_.values[node.inputs[0]].host));
    }
    REMEX_ASSIGN_OR_RETURN(int64_t iter, HostScalarConstant(DType::kInt64, 0));
    // The condition stays in device memory on every path into the loop head (the body's
    // results are, see EmitRegion), the counter in host memory (Increment makes it
    // there): the body's readers get each where the verifier checks it.
    int64_t cond_reg = next_reg_++;
    if (node.inputs[1] >= 0) {
      REMEX_ASSIGN_OR_RETURN(int64_t c, Use(node.inputs[1], /*host=*/false));
      Emit(vm::Opcode::kMove, {cond_reg, c}, {});
      cond = cond_reg;
    } else {
      REMEX_ASSIGN_OR_RETURN(int64_t c, HostScalarConstant(DType::kBool, 1));
      Emit(vm::Opcode::kCopyToDevice, {cond_reg, c}, {});
    }
    std::vector<int64_t> state;
    for (size_t k = 0; k < carried; ++k) {
      REMEX_ASSIGN_OR_RETURN(int64_t init, Use(node.inputs[2 + k], false));
      int64_t r = next_reg_++;
      Emit(vm::Opcode::kMove, {r, init}, {});
      state.push_back(r);
    }
    std::vector<int64_t> lists;
    for (size_t j = 0; j < scans; ++j) {
      lists.push_back(next_reg_++);
      Emit(vm::Opcode::kListNew, {lists.back()}, {});
    }
    int64_t head = Here();
    size_t check_pc = fn_.code.size();
    Emit(vm::Opcode::kLoopCheck, {iter, max_trips, cond, 0}, {});
    // The body reads the counter, the condition and the carried values in place.
    ++depth_;
    Define(body.inputs[0], iter);
    Define(body.inputs[1], cond_reg);
    for (size_t k = 0; k < carried; ++k) Define(body.inputs[2 + k], state[k]);
    --depth_;
    std::vector<int64_t> results;
    REMEX_RETURN_IF_ERROR(EmitRegion(body, results));
    // Parallel move: every result is read before any carried register is written.
    std::vector<int64_t> temps;
    for (size_t k = 0; k < carried + 1; ++k) {
      temps.push_back(next_reg_++);
      Emit(vm::Opcode::kMove, {temps.back(), results[k]}, {});
    }
    for (size_t j = 0; j < scans; ++j) Emit(vm::Opcode::kListAppend, {lists[j], results[1 + carried + j]}, {});
    if (cond >= 0) Emit(vm::Opcode::kMove, {cond_reg, temps[0]}, {});
    for (size_t k = 0; k < carried; ++k) Emit(vm::Opcode::kMove, {state[k], temps[1 + k]}, {});
    for (int64_t t : temps) Emit(vm::Opcode::kKillRegister, {t}, {});
    int64_t next_iter = next_reg_++;
    Emit(vm::Opcode::kIncrement, {next_iter, iter}, {});
    Emit(vm::Opcode::kMove, {iter, next_iter}, {});
    Emit(vm::Opcode::kGoto, {head}, {});
    fn_.code[check_pc].scalars[3] = Here();
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (i < carried) {
        Define(node.outputs[i], state[i]);
        continue;
      }
      const Value& elem = g_.values[body.outputs[1 + i]];
      if (DTypeSize(elem.dtype) == 0) return Internal(Where(node) + ": scan output " + std::to_string(i) + " has no dtype");
      Shape dims = elem.shape;
      for (int64_t& d : dims) d = std::max<int64_t>(d, 0);
      int64_t r = next_reg_++;
      Emit(vm::Opcode::kListStack, {r, static_cast<int64_t>(elem.dtype), lists[i - carried]}, {dims});
      Define(node.outputs[i], r);
    }
    return OkStatus();
  }

  const Graph& g_;
  const kernels::KernelRegistry& registry_;
  vm::ExecutableDef def_;
  vm::FunctionDef fn_;
  std::map<int, int64_t> reg_;
  std::map<int, int> defined_here_;  // value -> region depth it was defined at
  std::vector<std::map<std::pair<int, bool>, int64_t>> scopes_;
  std::map<int, int> output_index_;
  std::set<int> produced_;
  int64_t next_reg_ = 0;
  int depth_ = 0;
  int copies_to_host_ = 0;
  std::vector<int64_t> bound_bytes_;
};

}  // namespace

StatusOr<vm::ExecutableDef> Codegen(const Graph& graph, const kernels::KernelRegistry& registry) {
  return CodeGenerator(graph, registry).Run();
}

StatusOr<vm::ExecutableDef> CompileGraph(Graph graph, const kernels::KernelRegistry& registry,
                                         const CompileOptions& options, CompileStats* stats) {
  if (!options.dispatch.empty()) return CompileDispatched(graph, registry, options, stats);
  const auto start = std::chrono::steady_clock::now();
  CompileStats local;
  local.nodes_in = static_cast<int>(graph.nodes.size());
  REMEX_ASSIGN_OR_RETURN(local.nodes_folded,
                         InferShapes(graph, registry, options.fold_constants, options.bounds));
  local.nodes_removed = EliminateDeadCode(graph);
  if (options.layout == Layout::kNhwc) {
    REMEX_ASSIGN_OR_RETURN(local.layout, ConvertToNhwc(graph, registry));
    EliminateDeadCode(graph);  // constants replaced by their NHWC forms
  }
  // Counted before the precision pass, whose casts would sit between a transpose
  // and the graph's edge.
  const TransposeCount transposes = CountTransposes(graph);
  local.transposes = transposes.total;
  local.transposes_at_edges = transposes.at_edges;
  if (options.dtype == DType::kFloat16) {
    REMEX_ASSIGN_OR_RETURN(local.precision, ConvertToFloat16(graph, registry));
    EliminateDeadCode(graph);  // casts of inputs only shape readers use
  } else if (options.dtype != DType::kFloat32) {
    return InvalidArgument("--dtype must be float32 or float16, got " + std::string(DTypeName(options.dtype)));
  }
  if (options.fuse_epilogues) {
    EpilogueFusionStats epilogues = FuseEpilogues(graph, registry);
    local.fused_convs = epilogues.fused_convs;
    local.fused_matmuls = epilogues.fused_matmuls;
    local.epilogue_nodes = epilogues.epilogue_nodes;
  }
  if (options.fuse_elementwise) {
    FusionStats fusion = FuseElementwise(graph, registry);
    local.fused_kernels = fusion.fused_kernels;
    local.nodes_fused = fusion.nodes_fused;
  }
  if (options.place_on_host) PlaceOnHost(graph, registry);
  CodeGenerator gen(graph, registry);
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef def, gen.Run());
  if (options.plan_memory) local.memory = PlanMemory(def.functions[0], gen.bound_bytes());
  local.copies_to_host = gen.copies_to_host();
  local.kernels = static_cast<int>(def.kernels.size());
  for (const auto& k : def.kernels) local.host_kernels += k.host ? 1 : 0;
  for (const auto& inst : def.functions[0].code) {
    if (inst.op == vm::Opcode::kInvokeShapeFunc) local.runtime_shape_functions++;
  }
  for (const auto& c : def.constants) local.constant_bytes += c.data.size();
  local.constant_bytes_unshared = local.constant_bytes;
  REMEX_ASSIGN_OR_RETURN(FunctionStats fs, DescribeFunction(def, 0, "generic"));
  fs.memory = local.memory;
  local.functions = {fs};
  local.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats) *stats = local;
  return def;
}

StatusOr<FunctionStats> DescribeFunction(const vm::ExecutableDef& def, size_t index, std::string role) {
  const vm::FunctionDef& fn = def.functions[index];
  FunctionStats fs;
  fs.name = fn.name;
  fs.role = std::move(role);
  fs.instructions = static_cast<int>(fn.code.size());
  std::set<int64_t> kernels;
  std::vector<int64_t> words;
  for (const auto& inst : fn.code) {
    REMEX_RETURN_IF_ERROR(vm::Encode(inst, words));
    if (inst.op == vm::Opcode::kInvokeShapeFunc) fs.runtime_shape_functions++;
    if (inst.op == vm::Opcode::kInvokeShapeFunc || inst.op == vm::Opcode::kInvokeKernel) kernels.insert(inst.scalars[0]);
  }
  fs.code_bytes = words.size() * sizeof(int64_t);
  fs.kernels = static_cast<int>(kernels.size());
  fs.memory.arena_bytes[0] = fn.arena_bytes[0];
  fs.memory.arena_bytes[1] = fn.arena_bytes[1];
  return fs;
}

StatusOr<vm::ExecutableDef> CompileOnnxFile(const std::string& path,
                                            const kernels::KernelRegistry& registry,
                                            const CompileOptions& options, CompileStats* stats) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(path, registry, options.input_shapes));
  return CompileGraph(std::move(graph), registry, options, stats);
}

}  // namespace remex::compiler
