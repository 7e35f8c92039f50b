// Symbolic shape and dtype inference with constant folding (see shape_inference.h).
#include "host_client/compiler/shape_inference.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

namespace remex::compiler {
namespace {

// Number of regular samples; two more evaluate the bounds' corners.
constexpr size_t kSamples = 3;
// Largest integer tensor whose values inference carries per sample.
constexpr int64_t kMaxSampleElements = 4096;
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
      // The element dims of a sequence or optional input bind no symbol: each call may
      // give elements of other sizes.
      if (!v.rank_known || v.kind != vm::ValueKind::kTensor) continue;
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
      // Without --bound a symbol admits every size, 0 included (an empty KV cache before a
      // decoder's first step), as ONNX Runtime does: ONNX's dim_param says nothing of a minimum.
      DimBounds b{0, -1};
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
      if (!v.rank_known || v.static_shape() || v.kind != vm::ValueKind::kTensor) continue;
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
      } else if (node.values_op) {
        REMEX_RETURN_IF_ERROR(InferValuesOp(node));
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
    const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
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
    const kernels::KernelFactory* factory = registry_.FindKernel(node.op, node.version, kernels::DeviceKind::kCpu);
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

  // Sequence and optional ops (Node::values_op): the element dtype and shape of what
  // they make. A sequence's element shape is the join of its elements' (unknown rank for
  // one built from SequenceEmpty); positions and lengths are data the VM reads.
  Status InferValuesOp(Node& node) {
    Value& out = g_.values[node.outputs[0]];
    auto in = [&](size_t i) -> const Value* {
      return i < node.inputs.size() && node.inputs[i] >= 0 ? &g_.values[node.inputs[i]] : nullptr;
    };
    auto set_like = [&](const Value& v) {
      out.dtype = v.dtype;
      out.rank_known = v.rank_known;
      out.shape = v.rank_known ? v.shape : Shape{};
    };
    auto scalar = [&](DType dtype) {
      out.dtype = dtype;
      out.rank_known = true;
      out.shape = {};
      out.host = true;  // SeqLength and OptHas make host scalars
    };
    auto check_position = [&](size_t i) -> Status {
      const Value* p = in(i);
      if (p && p->dtype != DType::kInt64 && p->dtype != DType::kInt32 && p->dtype != DType::kUndefined) {
        return InvalidArgument(Where(node) + ": the position must be int32 or int64, got " +
                               std::string(DTypeName(p->dtype)));
      }
      return OkStatus();
    };
    // A graph output keeps the rank the model declares for it where inference has none.
    const bool declared_rank =
        out.rank_known && std::find(g_.outputs.begin(), g_.outputs.end(), node.outputs[0]) != g_.outputs.end();
    const Shape declared = out.shape;
    out.samples.clear();
    out.sample_data.clear();
    const std::string& op = node.op;
    if (op == "SequenceConstruct") {
      set_like(*in(0));
      for (size_t i = 1; i < node.inputs.size(); ++i) {
        if (in(i)->dtype != out.dtype) {
          return InvalidArgument(Where(node) + ": elements of dtypes " + std::string(DTypeName(out.dtype)) + " and " +
                                 std::string(DTypeName(in(i)->dtype)) + "; a sequence's elements share one dtype");
        }
        Value joined = out;
        Join(joined, out, *in(i));
        set_like(joined);
      }
    } else if (op == "SequenceEmpty" || (op == "Optional" && !in(0))) {
      auto onnx_dtype = node.attrs.Int("dtype", 1);  // ONNX: float32 by default
      if (!onnx_dtype.ok()) return onnx_dtype.status().WithContext(Where(node));
      // 0 (UNDEFINED), which the SplitToSequence and SequenceMap lowerings give an
      // empty sequence to fill: the dtype of the first tensor inserted.
      auto dtype = *onnx_dtype == 0 ? std::optional<DType>(DType::kUndefined)
                                    : DTypeFromOnnx(static_cast<int32_t>(*onnx_dtype));
      if (!dtype) return Unimplemented(Where(node) + ": ONNX data type " + std::to_string(*onnx_dtype));
      out.dtype = *dtype;
      out.rank_known = false;
      out.shape.clear();
    } else if (op == "SequenceInsert") {
      REMEX_RETURN_IF_ERROR(check_position(2));
      const Value& seq = *in(0);
      const Value& t = *in(1);
      if (seq.dtype != t.dtype && seq.dtype != DType::kUndefined) {
        return InvalidArgument(Where(node) + ": inserts a " + std::string(DTypeName(t.dtype)) +
                               " tensor into a sequence of " + std::string(DTypeName(seq.dtype)));
      }
      if (!seq.rank_known) {
        set_like(seq);  // the sequence may hold elements of any rank already
        out.dtype = t.dtype;
      } else {
        Value joined = out;
        Join(joined, seq, t);
        set_like(joined);
      }
    } else if (op == "SequenceAt") {
      REMEX_RETURN_IF_ERROR(check_position(1));
      if (!in(1)) return InvalidArgument(Where(node) + " needs a position");
      set_like(*in(0));
    } else if (op == "SequenceErase" || op == "Optional" || op == "OptionalGetElement" || op == "Identity") {
      if (op == "SequenceErase") REMEX_RETURN_IF_ERROR(check_position(1));
      set_like(*in(0));
    } else if (op == "SequenceLength") {
      scalar(DType::kInt64);
    } else if (op == "OptionalHasElement") {
      scalar(DType::kBool);
    } else {
      return Internal("no type rule for " + Where(node));
    }
    if (!out.rank_known && declared_rank) {
      out.rank_known = true;
      out.shape = declared;
    }
    Describe(out);
    return OkStatus();
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


}  // namespace

std::string SymbolicShapeString(const Value& v) {
  return v.rank_known ? ShapeToString(v.shape, v.dims) : "[?]";
}

StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants,
                          const std::map<std::string, DimBounds>& bounds) {
  return ShapeInference(graph, registry, fold_constants, bounds).Run();
}

}  // namespace remex::compiler
