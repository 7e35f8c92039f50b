#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_build.h"
#include "host_client/compiler/onnx_order.h"
#include "host_client/compiler/onnx_scan.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace remex::compiler {
namespace {

// Remex implements the operator definitions in effect from opset 7 to opset 17. Each
// node binds to the registry entry (kernels::OpDef) of its op whose version range
// covers the model's opset; an older opset imports where every op it uses has such an
// entry (an op's first entry starts at the definition in effect at opset 7).
constexpr int kMaxOpset = 17;

// Older forms the frontend rewrites into a newer definition (Normalise): from opset
// `from` up to `to` - 1 the node is rewritten and binds to the entry starting at `to`.
struct Upgrade {
  std::string_view op;
  int from;
  int to;
};
constexpr Upgrade kUpgrades[] = {
    {"Clip", 1, 11},   // min/max attributes -> optional inputs 1 and 2.
    {"Slice", 1, 10},  // starts/ends/axes attributes -> inputs.
    // Opsets 1-6: the legacy `broadcast` / `axis` attributes (see LegacyBroadcast).
    {"Add", 1, 7}, {"Sub", 1, 7}, {"Mul", 1, 7}, {"Div", 1, 7}, {"Pow", 1, 7},
    {"Equal", 1, 7}, {"Less", 1, 7}, {"Greater", 1, 7}, {"And", 1, 7}, {"Or", 1, 7}, {"Xor", 1, 7},
    // Opsets 1-6: is_test / spatial (BatchNormalization), broadcast (Gemm), is_test
    // (Dropout) attributes that the opset-7 definitions dropped.
    {"BatchNormalization", 1, 7}, {"Gemm", 1, 7}, {"Dropout", 1, 7},
    // Opsets 1-5: `consumed_inputs`, the only difference from the opset-6 definitions.
    {"Relu", 1, 6}, {"Sigmoid", 1, 6}, {"Tanh", 1, 6}, {"Exp", 1, 6}, {"Log", 1, 6}, {"Neg", 1, 6},
    {"Abs", 1, 6}, {"Reciprocal", 1, 6}, {"Sqrt", 1, 6}, {"Ceil", 1, 6}, {"Floor", 1, 6}, {"Elu", 1, 6},
    {"LeakyRelu", 1, 6}, {"HardSigmoid", 1, 6}, {"Selu", 1, 6},
    // Opsets 1-3: Concat's axis was optional (default 1). Opsets 1-6: PRelu's slope of C
    // values applies along the channel axis 1 (numpy broadcasting from opset 7 aligns it
    // with the last).
    {"Concat", 1, 4}, {"PRelu", 1, 7},
    // Opset 1: Pad's `paddings` attribute is Pad-2's `pads` (same layout).
    {"Pad", 1, 2},
};

// The binary ops whose opsets 1-6 definitions broadcast only with broadcast = 1, B's
// dims aligned with A's from `axis` (default: A's last dims, as numpy aligns them).
bool LegacyBroadcast(std::string_view op) {
  for (std::string_view o : {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "And", "Or", "Xor"}) {
    if (o == op) return true;
  }
  return false;
}

// The ops of ONNX sequences and optionals, which the VM runs with its Seq/Opt
// instructions (vm/opcodes.def) rather than kernels: their first opset and arity.
// (ONNX operator specs: SequenceConstruct-11 ... SequenceLength-11, Optional-15,
// OptionalHasElement-15, OptionalGetElement-15.)
struct ValuesOp {
  std::string_view op;
  int since;
  int min_inputs;
  int max_inputs;  // -1: variadic
};
constexpr ValuesOp kValuesOps[] = {
    {"SequenceConstruct", 11, 1, -1}, {"SequenceEmpty", 11, 0, 0},   {"SequenceInsert", 11, 2, 3},
    {"SequenceAt", 11, 2, 2},         {"SequenceErase", 11, 1, 2},   {"SequenceLength", 11, 1, 1},
    {"Optional", 15, 0, 1},           {"OptionalHasElement", 15, 1, 1}, {"OptionalGetElement", 15, 1, 1},
};

std::optional<ValuesOp> ValuesOpOf(std::string_view op) {
  for (const ValuesOp& v : kValuesOps) {
    if (v.op == op) return v;
  }
  return std::nullopt;
}

const Upgrade* UpgradeOf(std::string_view op) {
  for (const Upgrade& u : kUpgrades) {
    if (u.op == op) return &u;
  }
  return nullptr;
}

template <typename Src, typename Dst>
void CopyConverted(const google::protobuf::RepeatedField<Src>& src, std::vector<std::byte>& out) {
  out.resize(src.size() * sizeof(Dst));
  Dst* dst = reinterpret_cast<Dst*>(out.data());
  for (int i = 0; i < src.size(); ++i) dst[i] = static_cast<Dst>(src.Get(i));
}

StatusOr<vm::ConstantDef> ConvertTensor(const onnx::TensorProto& t) {
  std::string what = "tensor '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return Unimplemented(what + " uses external data, which Remex does not read yet");
  }
  auto dtype = DTypeFromOnnx(t.data_type());
  if (!dtype) {
    return Unimplemented(what + " has ONNX data type " + std::to_string(t.data_type()) +
                         ", which Remex does not support");
  }
  vm::ConstantDef c;
  c.dtype = *dtype;
  for (int64_t d : t.dims()) {
    if (d < 0) return InvalidArgument(what + " has a negative dimension");
    c.shape.push_back(d);
  }
  auto n = NumElements(c.shape);
  if (!n || static_cast<uint64_t>(*n) > (uint64_t{1} << 36)) {
    return InvalidArgument(what + " has an invalid shape " + ShapeToString(c.shape));
  }
  size_t bytes = static_cast<size_t>(*n) * DTypeSize(c.dtype);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      return InvalidArgument(what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                             " bytes, shape " + ShapeToString(c.shape) + " needs " + std::to_string(bytes));
    }
    c.data.resize(bytes);
    if (bytes) std::memcpy(c.data.data(), t.raw_data().data(), bytes);
    if (c.dtype == DType::kBool) CanonicalizeBoolBytes(c.data.data(), c.data.size());
    return c;
  }
  switch (c.dtype) {
    case DType::kFloat32: CopyConverted<float, float>(t.float_data(), c.data); break;
    case DType::kFloat64: CopyConverted<double, double>(t.double_data(), c.data); break;
    case DType::kInt64: CopyConverted<int64_t, int64_t>(t.int64_data(), c.data); break;
    case DType::kUint64: CopyConverted<uint64_t, uint64_t>(t.uint64_data(), c.data); break;
    case DType::kUint32: CopyConverted<uint64_t, uint32_t>(t.uint64_data(), c.data); break;
    case DType::kInt32: CopyConverted<int32_t, int32_t>(t.int32_data(), c.data); break;
    case DType::kInt16: CopyConverted<int32_t, int16_t>(t.int32_data(), c.data); break;
    case DType::kUint16: CopyConverted<int32_t, uint16_t>(t.int32_data(), c.data); break;
    case DType::kFloat16: CopyConverted<int32_t, uint16_t>(t.int32_data(), c.data); break;
    case DType::kBFloat16: CopyConverted<int32_t, uint16_t>(t.int32_data(), c.data); break;
    case DType::kInt8: CopyConverted<int32_t, int8_t>(t.int32_data(), c.data); break;
    case DType::kUint8: CopyConverted<int32_t, uint8_t>(t.int32_data(), c.data); break;
    case DType::kBool:
      // int32_data holds any int32 per element (256 would wrap to 0): nonzero is true.
      c.data.resize(static_cast<size_t>(t.int32_data_size()));
      for (int i = 0; i < t.int32_data_size(); ++i) c.data[i] = static_cast<std::byte>(t.int32_data(i) != 0);
      break;
    default: return Unimplemented(what + ": unsupported data type");
  }
  if (c.data.size() != bytes) {
    return InvalidArgument(what + " holds " + std::to_string(c.data.size() / DTypeSize(c.dtype)) +
                           " values, shape " + ShapeToString(c.shape) + " needs " + std::to_string(*n));
  }
  return c;
}

template <typename T>
vm::ConstantDef MakeConstant(DType dtype, Shape shape, const std::vector<T>& values) {
  vm::ConstantDef c;
  c.dtype = dtype;
  c.shape = std::move(shape);
  c.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(c.data.data(), values.data(), c.data.size());
  return c;
}

class Importer {
 public:
  Importer(const kernels::KernelRegistry& registry, const std::map<std::string, Shape>& shapes)
      : registry_(registry), input_shapes_(shapes) {}

  StatusOr<Graph> Import(const onnx::ModelProto& model) {
    REMEX_RETURN_IF_ERROR(ReadOpset(model));
    model_ = &model;
    const onnx::GraphProto& g = model.graph();
    std::set<std::string> initializer_names;
    for (const auto& init : g.initializer()) {
      auto c = ConvertTensor(init);
      if (!c.ok()) return c.status().WithContext("initializer '" + init.name() + "'");
      ids_[init.name()] = graph_.AddConstant(init.name(), std::move(c).value());
      initializer_names.insert(init.name());
    }
    std::set<std::string> used_overrides;
    for (const auto& in : g.input()) {
      if (initializer_names.count(in.name())) continue;
      REMEX_ASSIGN_OR_RETURN(Value v, ValueFromInfo(in));
      auto it = input_shapes_.find(in.name());
      if (it != input_shapes_.end()) {
        used_overrides.insert(in.name());
        REMEX_RETURN_IF_ERROR(ApplyOverride(v, it->second));
      }
      int id = graph_.AddValue(std::move(v));
      ids_[in.name()] = id;
      graph_.inputs.push_back(id);
    }
    for (const auto& [name, shape] : input_shapes_) {
      if (!used_overrides.count(name)) {
        return InvalidArgument("--shape names '" + name + "', which is not an input of the model");
      }
    }
    nodes_ = &graph_.nodes;
    for (int i : ImportOrder(g)) {
      REMEX_RETURN_IF_ERROR(ImportNode(g.node(i), i));
    }
    for (const auto& out : g.output()) {
      auto it = ids_.find(out.name());
      if (it == ids_.end()) {
        return InvalidArgument("graph output '" + out.name() + "' is produced by no node");
      }
      Value& v = graph_.values[it->second];
      // Keep the model's declared type where inference may not reach.
      if (!v.rank_known && v.kind == vm::ValueKind::kTensor && out.type().tensor_type().has_shape()) {
        auto declared = ValueFromInfo(out);
        if (declared.ok()) {
          v.shape = declared->shape;
          v.rank_known = true;
          if (v.dtype == DType::kUndefined) v.dtype = declared->dtype;
        }
      }
      graph_.outputs.push_back(it->second);
    }
    return std::move(graph_);
  }

 private:
  // The default domain's opset (graph_.opset) and the other domains' (domain_opsets_).
  // A model needs the default domain unless it imports another domain Remex has ops of
  // (ai.onnx.preview.training); its nodes of the default domain are then refused.
  Status ReadOpset(const onnx::ModelProto& model) {
    std::string domains;
    bool known_domain = false;
    for (const auto& imp : model.opset_import()) {
      if (imp.domain().empty() || imp.domain() == "ai.onnx") {
        graph_.opset = static_cast<int>(imp.version());
        continue;
      }
      domains += " '" + imp.domain() + "'";
      domain_opsets_[imp.domain()] = static_cast<int>(imp.version());
      for (const std::string& op : registry_.OpNames()) {
        const kernels::OpDef* def = registry_.FindOp(op);
        if (def && def->domain == imp.domain()) known_domain = true;
      }
    }
    if (graph_.opset == 0 && !known_domain) {
      return Unimplemented("model imports no default-domain opset (only" + domains + ")");
    }
    if (graph_.opset > kMaxOpset) {
      return Unimplemented("model uses opset " + std::to_string(graph_.opset) +
                           "; Remex supports opsets up to " + std::to_string(kMaxOpset));
    }
    return OkStatus();
  }

  // The registry entry of `op` at the model's opset (the entry of the newer form for
  // an older one the frontend rewrites). UNIMPLEMENTED naming the op, the opset and the
  // opsets Remex implements it for when no entry covers the opset (e.g. Reshape-1 with
  // its shape attribute, or Range before opset 11).
  StatusOr<const kernels::OpDef*> BindOp(const std::string& op, const std::string& where) {
    if (const kernels::OpDef* def = registry_.FindOp(op); def && !def->domain.empty()) {
      return Unimplemented("unsupported op '" + op + "' in " + where + " (Remex implements " + op + " of domain '" +
                           def->domain + "')");
    }
    int version = graph_.opset;
    std::string supported = registry_.SupportedVersions(op);
    if (const Upgrade* u = UpgradeOf(op)) {
      if (version >= u->from && version < u->to) version = u->to;
      supported = std::to_string(u->from) + "-" + std::to_string(u->to - 1) + " (as " + op + "-" +
                  std::to_string(u->to) + "), " + supported;
    }
    if (const kernels::OpDef* def = registry_.FindOp(op, version)) return def;
    return Unimplemented(where + ": " + op + " at opset " + std::to_string(graph_.opset) +
                         " is not supported; Remex implements " + op + " for opsets " + supported);
  }

  // The registry entry of `op` of `domain` (not the default one) at the opset the model
  // imports for that domain. UNIMPLEMENTED "unsupported op 'domain::op'" when Remex has
  // no such op of that domain or no entry covering the opset, or when the model imports
  // no opset of the domain.
  StatusOr<const kernels::OpDef*> BindDomainOp(const std::string& op, const std::string& domain,
                                               const std::string& where) {
    const std::string unsupported = "unsupported op '" + domain + "::" + op + "' in " + where;
    auto it = domain_opsets_.find(domain);
    if (it == domain_opsets_.end()) {
      return Unimplemented(unsupported + ": the model imports no opset of domain '" + domain + "'");
    }
    const kernels::OpDef* def = registry_.FindOp(op, it->second);
    if (def == nullptr || def->domain != domain) {
      const kernels::OpDef* newest = registry_.FindOp(op);
      if (newest && newest->domain == domain) {
        return Unimplemented(unsupported + ": opset " + std::to_string(it->second) + " of '" + domain +
                             "'; Remex implements " + op + " for its opsets " + registry_.SupportedVersions(op));
      }
      return Unimplemented(unsupported);
    }
    return def;
  }

  StatusOr<Value> ValueFromInfo(const onnx::ValueInfoProto& info) {
    Value v;
    v.name = info.name();
    // tensor, sequence(tensor), optional(tensor) or optional(sequence(tensor)).
    const onnx::TypeProto* type = &info.type();
    bool optional = false, sequence = false;
    if (type->has_optional_type()) {
      optional = true;
      type = &type->optional_type().elem_type();
    }
    if (type->has_sequence_type()) {
      sequence = true;
      type = &type->sequence_type().elem_type();
    }
    if (!type->has_tensor_type()) {
      return Unimplemented("value '" + info.name() + "' is not a tensor, a sequence of tensors or an optional of "
                           "either (maps, sparse tensors and sequences of sequences are not supported)");
    }
    v.kind = sequence ? (optional ? vm::ValueKind::kOptionalSequence : vm::ValueKind::kSequence)
                      : (optional ? vm::ValueKind::kOptionalTensor : vm::ValueKind::kTensor);
    const auto& tt = type->tensor_type();
    auto dtype = DTypeFromOnnx(tt.elem_type());
    if (!dtype) {
      return Unimplemented("value '" + info.name() + "' has ONNX data type " +
                           std::to_string(tt.elem_type()) + ", which Remex does not support");
    }
    v.dtype = *dtype;
    if (tt.has_shape()) {
      v.rank_known = true;
      for (const auto& d : tt.shape().dim()) {
        bool known = d.has_dim_value() && d.dim_value() >= 0;
        v.shape.push_back(known ? d.dim_value() : -1);
        v.dims.push_back(known ? "" : d.dim_param());
      }
    }
    return v;
  }

  Status ApplyOverride(Value& v, const Shape& shape) {
    if (v.rank_known) {
      bool ok = v.shape.size() == shape.size();
      for (size_t i = 0; ok && i < shape.size(); ++i) ok = v.shape[i] < 0 || v.shape[i] == shape[i];
      if (!ok) {
        return InvalidArgument("shape " + ShapeToString(shape) + " given for input '" + v.name +
                               "' does not fit its declared shape " + ShapeToString(v.shape));
      }
    }
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument("shape for input '" + v.name + "' has a negative dimension");
    }
    v.shape = shape;
    v.dims.assign(shape.size(), "");
    v.rank_known = true;
    return OkStatus();
  }

  StatusOr<kernels::AttrValue> ConvertAttribute(const onnx::AttributeProto& a, const std::string& where) {
    switch (a.type()) {
      case onnx::AttributeProto::INT: return kernels::AttrValue(static_cast<int64_t>(a.i()));
      case onnx::AttributeProto::FLOAT: return kernels::AttrValue(a.f());
      case onnx::AttributeProto::STRING: return kernels::AttrValue(a.s());
      case onnx::AttributeProto::INTS:
        return kernels::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      case onnx::AttributeProto::FLOATS:
        return kernels::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
      case onnx::AttributeProto::STRINGS:
        return kernels::AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
      case onnx::AttributeProto::TENSOR: {
        // ConstantOfShape's one-element `value` travels as the ints {onnx_dtype, bits}
        // (the element's bytes in a zeroed int64; see kernels/ops/generator/generate.cc).
        if (a.name() != "value") break;
        auto c = ConvertTensor(a.t());
        if (!c.ok()) return c.status().WithContext("attribute 'value' of " + where);
        if (NumElements(c->shape) != 1) {
          return InvalidArgument("attribute 'value' of " + where + " must hold one element");
        }
        int64_t bits = 0;
        std::memcpy(&bits, c->data.data(), c->data.size());
        return kernels::AttrValue(std::vector<int64_t>{static_cast<int64_t>(c->dtype), bits});
      }
      default:
        break;
    }
    return Unimplemented("attribute '" + a.name() + "' of " + where + " has a kind (" +
                         onnx::AttributeProto::AttributeType_Name(a.type()) +
                         ") Remex does not support");
  }

  Status ImportConstant(const onnx::NodeProto& n, const std::string& where) {
    if (n.output_size() != 1 || n.attribute_size() != 1) {
      return InvalidArgument(where + " must have one output and one value attribute");
    }
    const auto& a = n.attribute(0);
    vm::ConstantDef c;
    if (a.name() == "value") {
      REMEX_ASSIGN_OR_RETURN(c, ConvertTensor(a.t()));
    } else if (a.name() == "value_float") {
      c = MakeConstant<float>(DType::kFloat32, {}, {a.f()});
    } else if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      c = MakeConstant<float>(DType::kFloat32, {static_cast<int64_t>(v.size())}, v);
    } else if (a.name() == "value_int") {
      c = MakeConstant<int64_t>(DType::kInt64, {}, {a.i()});
    } else if (a.name() == "value_ints") {
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      c = MakeConstant<int64_t>(DType::kInt64, {static_cast<int64_t>(v.size())}, v);
    } else {
      return Unimplemented(where + ": Constant attribute '" + a.name() + "' is not supported");
    }
    ids_[n.output(0)] = graph_.AddConstant(n.output(0), std::move(c));
    return OkStatus();
  }

  // Rewrites the older forms of kUpgrades: attributes that later opsets turned into
  // inputs become inputs, and the opsets 1-6 attributes go where the opset-7
  // definition means the same without them (refused where it does not).
  Status Normalise(Node& node, const std::string& where) {
    if (graph_.opset < 7) REMEX_RETURN_IF_ERROR(NormaliseLegacy(node, where));
    auto take_ints = [&](const char* name) -> std::optional<std::vector<int64_t>> {
      auto it = node.attrs.all().find(name);
      if (it == node.attrs.all().end()) return std::nullopt;
      auto* v = std::get_if<std::vector<int64_t>>(&it->second);
      return v ? std::optional(*v) : std::nullopt;
    };
    if (node.op == "Clip" && graph_.opset < UpgradeOf("Clip")->to) {
      node.inputs.resize(1);
      for (const char* bound : {"min", "max"}) {
        if (node.attrs.Has(bound)) {
          REMEX_ASSIGN_OR_RETURN(float v, node.attrs.Float(bound));
          node.inputs.push_back(graph_.AddConstant(node.name + "." + bound,
                                                   MakeConstant<float>(DType::kFloat32, {}, {v})));
        } else {
          node.inputs.push_back(-1);
        }
      }
      node.attrs = kernels::Attributes();
    } else if (node.op == "Slice" && graph_.opset < UpgradeOf("Slice")->to) {
      auto starts = take_ints("starts");
      auto ends = take_ints("ends");
      if (!starts || !ends) return InvalidArgument(where + ": Slice needs starts and ends");
      auto axes = take_ints("axes");
      node.inputs.resize(1);
      auto add = [&](const char* name, const std::vector<int64_t>& v) {
        node.inputs.push_back(graph_.AddConstant(
            node.name + "." + name,
            MakeConstant<int64_t>(DType::kInt64, {static_cast<int64_t>(v.size())}, v)));
      };
      add("starts", *starts);
      add("ends", *ends);
      if (axes) add("axes", *axes);
      node.attrs = kernels::Attributes();
    }
    return OkStatus();
  }

  // The ranks ONNX's own shape inference gives the values of an opsets 1-6 model, for
  // the legacy broadcast axis (which needs A's rank before Remex's shape inference
  // runs). Computed on the first need only, over a copy of the graph whose
  // initializers carry their types but not their data. Values it cannot type are
  // left out.
  const std::map<std::string, int64_t>& LegacyRanks() {
    if (legacy_ranks_) return *legacy_ranks_;
    legacy_ranks_.emplace();
    onnx::ModelProto copy;
    copy.set_ir_version(model_->ir_version());
    *copy.mutable_opset_import() = model_->opset_import();
    const onnx::GraphProto& src = model_->graph();
    onnx::GraphProto* g = copy.mutable_graph();
    *g->mutable_node() = src.node();
    *g->mutable_input() = src.input();
    *g->mutable_output() = src.output();
    *g->mutable_value_info() = src.value_info();
    for (const auto& init : src.initializer()) {
      onnx::TensorProto* t = g->add_initializer();
      t->set_name(init.name());
      t->set_data_type(init.data_type());
      *t->mutable_dims() = init.dims();
    }
    try {
      onnx::shape_inference::InferShapes(copy);
    } catch (const std::exception&) {
      return *legacy_ranks_;  // The ranks stay unknown; NormaliseLegacy says so where it needs one.
    }
    for (const auto& vi : copy.graph().value_info()) {
      if (vi.type().tensor_type().has_shape()) (*legacy_ranks_)[vi.name()] = vi.type().tensor_type().shape().dim_size();
    }
    return *legacy_ranks_;
  }

  // Opsets 1-6 (ONNX's Changelog, the definitions before opset 7):
  //   - consumed_inputs (opsets 1-5) is a memory hint: dropped;
  //   - broadcast = 0 needs equal shapes and broadcast = 1 without axis aligns B with A's
  //     last dims: both are cases of numpy broadcasting, so the attributes are dropped;
  //     broadcast = 1 with an axis that is not A's default alignment reshapes B (a
  //     constant, A of known rank) to A's rank with trailing 1s, and is refused
  //     otherwise;
  //   - BatchNormalization's is_test = 1 and spatial = 1 are opset 7's semantics (other
  //     values are refused); Gemm's broadcast and Dropout's is_test are dropped;
  //   - Concat without axis (opsets 1-3) concatenates along axis 1; Pad-1's `paddings`
  //     is Pad-2's `pads`;
  //   - PRelu's slope of C > 1 values is aligned at axis 1 (as broadcast = 1, axis = 1
  //     above).
  Status NormaliseLegacy(Node& node, const std::string& where) {
    kernels::Attributes attrs;
    std::optional<int64_t> broadcast, axis;
    for (const auto& [name, value] : node.attrs.all()) {
      if (name == "consumed_inputs") continue;
      const int64_t* i = std::get_if<int64_t>(&value);
      if (LegacyBroadcast(node.op) && (name == "broadcast" || name == "axis")) {
        if (!i) return InvalidArgument(where + ": attribute '" + name + "' must be an int");
        (name == "broadcast" ? broadcast : axis) = *i;
        continue;
      }
      if (node.op == "BatchNormalization" && (name == "is_test" || name == "spatial")) {
        if (!i || *i != 1) {
          return Unimplemented(where + ": BatchNormalization with " + name + " = 0 (opset " +
                               std::to_string(graph_.opset) + ") is not supported");
        }
        continue;
      }
      if ((node.op == "Gemm" && name == "broadcast") || (node.op == "Dropout" && name == "is_test")) continue;
      if (node.op == "Pad" && name == "paddings") {
        attrs.Set("pads", value);
        continue;
      }
      attrs.Set(name, value);
    }
    node.attrs = std::move(attrs);
    if (node.op == "Concat" && !node.attrs.Has("axis")) node.attrs.Set("axis", int64_t{1});
    if (node.op == "PRelu" && node.inputs.size() == 2 && node.inputs[1] >= 0) {
      const Shape& slope = graph_.values[node.inputs[1]].shape;
      if (slope.size() == 1 && slope[0] != 1) {
        broadcast = 1;
        axis = 1;
      }
    }
    if (!axis || broadcast.value_or(0) == 0 || node.inputs.size() != 2) return OkStatus();
    // B aligned at `axis` of A: numpy's alignment when B reaches A's last dim.
    if (node.inputs[0] < 0 || node.inputs[1] < 0) return OkStatus();  // CheckArity refuses it.
    const Value& a = graph_.values[node.inputs[0]];
    const Value& b = graph_.values[node.inputs[1]];
    int64_t rank_a = static_cast<int64_t>(a.shape.size());
    if (!a.rank_known) {
      const std::map<std::string, int64_t>& ranks = LegacyRanks();
      auto it = ranks.find(a.name);
      if (it == ranks.end()) {
        return Unimplemented(where + ": " + node.op + " with broadcast axis " + std::to_string(*axis) +
                             " (opset " + std::to_string(graph_.opset) + ") needs the rank of its first input");
      }
      rank_a = it->second;
    }
    const int64_t rank_b = static_cast<int64_t>(b.shape.size());
    if (*axis < 0 || *axis + rank_b > rank_a) {
      return InvalidArgument(where + ": broadcast axis " + std::to_string(*axis) + " does not fit B of rank " +
                             std::to_string(rank_b) + " into A of rank " + std::to_string(rank_a));
    }
    const int64_t trailing = rank_a - *axis - rank_b;
    if (trailing == 0) return OkStatus();
    if (!b.constant) {
      return Unimplemented(where + ": " + node.op + " with broadcast axis " + std::to_string(*axis) +
                           " of a non-constant B (opset " + std::to_string(graph_.opset) + ") is not supported");
    }
    vm::ConstantDef c = graph_.constants[*b.constant];
    c.shape.insert(c.shape.end(), static_cast<size_t>(trailing), 1);
    node.inputs[1] = graph_.AddConstant(node.name + ".B", std::move(c));
    return OkStatus();
  }

  // The node's input and output counts against its OpDef, and its required inputs
  // present: checked here for every node, because shape inference may not reach a node
  // (dims known only at run time) and the executable verifier refuses a kernel of the
  // wrong arity.
  static Status CheckArity(const Node& node, const kernels::OpDef& op, const std::string& where) {
    auto range = [](int lo, int hi) {
      if (hi == lo) return std::to_string(lo);
      return std::to_string(lo) + (hi < 0 ? " or more" : " to " + std::to_string(hi));
    };
    const int inputs = static_cast<int>(node.inputs.size());
    const int outputs = static_cast<int>(node.outputs.size());
    if (inputs < op.min_inputs || (op.max_inputs >= 0 && inputs > op.max_inputs)) {
      return InvalidArgument(where + ": " + std::to_string(inputs) + " inputs; " + node.op + " takes " +
                             range(op.min_inputs, op.max_inputs));
    }
    for (int i = 0; i < op.min_inputs; ++i) {
      if (node.inputs[i] < 0) return InvalidArgument(where + ": required input " + std::to_string(i) + " is empty");
    }
    if (outputs < op.min_outputs || (op.max_outputs >= 0 && outputs > op.max_outputs)) {
      return InvalidArgument(where + ": " + std::to_string(outputs) + " outputs; " + node.op + " has " +
                             range(op.min_outputs, op.max_outputs));
    }
    return OkStatus();
  }

  Status ImportNode(const onnx::NodeProto& n, int index) {
    std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
    std::string where = "node '" + name + "' (" + n.op_type() + ", #" + std::to_string(index) + ")";
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    if (domain.empty() && graph_.opset == 0) {
      return Unimplemented(where + ": the model imports no default-domain opset");
    }
    const kernels::OpDef* domain_def = nullptr;  // The entry of an op of another domain.
    if (!domain.empty()) {
      REMEX_ASSIGN_OR_RETURN(domain_def, BindDomainOp(n.op_type(), domain, where));
    }
    if (!domain_def && n.op_type() == "Constant") return ImportConstant(n, where);
    if (!domain_def && n.op_type() == "Scan") {
      REMEX_ASSIGN_OR_RETURN(std::vector<onnx::NodeProto> lowered, LowerScan(n, graph_.opset, name));
      for (const auto& node : lowered) REMEX_RETURN_IF_ERROR(ImportNode(node, index));
      return OkStatus();
    }
    if (!domain_def && (n.op_type() == "SequenceMap" || n.op_type() == "SplitToSequence" ||
                        n.op_type() == "ConcatFromSequence")) {
      StatusOr<std::vector<onnx::NodeProto>> lowered =
          n.op_type() == "SequenceMap"       ? LowerSequenceMap(n, name, where)
          : n.op_type() == "SplitToSequence" ? LowerSplitToSequence(n, name, where)
                                             : LowerConcatFromSequence(n, name, where);
      if (!lowered.ok()) return lowered.status();
      for (const auto& node : *lowered) REMEX_RETURN_IF_ERROR(ImportNode(node, index));
      return OkStatus();
    }
    const bool control_flow = !domain_def && (n.op_type() == "If" || n.op_type() == "Loop");
    const std::optional<ValuesOp> values_op = domain_def ? std::nullopt : ValuesOpOf(n.op_type());
    if (values_op && graph_.opset < values_op->since) {
      return Unimplemented(where + ": " + n.op_type() + " at opset " + std::to_string(graph_.opset) +
                           " is not supported; Remex implements " + n.op_type() + " for opsets " +
                           std::to_string(values_op->since) + "-" + std::to_string(kMaxOpset));
    }
    // Upsample (opsets 7-9, deprecated at 10) is Resize-10 under another name: the same
    // inputs from opset 9 (X, scales), `mode` nearest or linear, the same asymmetric
    // coordinates. Upsample-7's `scales` attribute becomes the scales input below.
    const bool upsample = !domain_def && n.op_type() == "Upsample";
    // Ops the importer reads itself (ImportedWithoutEntry) need no registry entry.
    if (!domain_def && ImportedWithoutEntry(n.op_type()).empty() && registry_.OpVersions(n.op_type()).empty()) {
      return Unimplemented("unsupported op '" + n.op_type() + "' in " + where);
    }
    Node node;
    node.op = upsample ? "Resize" : n.op_type();
    node.name = name;
    const kernels::OpDef* def = domain_def;
    if (domain_def) {
      node.version = def->since_version;
    } else if (upsample) {
      if (graph_.opset < 7) {
        return Unimplemented(where + ": Upsample at opset " + std::to_string(graph_.opset) +
                             " (height_scale / width_scale) is not supported; Remex implements Upsample for opsets "
                             "7-17 (as Resize-10)");
      }
      def = registry_.FindOp("Resize", 10);
      if (def == nullptr || def->since_version != 10) return Internal("Resize-10 is not registered");
      node.version = def->since_version;
    } else if (!control_flow && !values_op) {
      REMEX_ASSIGN_OR_RETURN(def, BindOp(node.op, where));
      node.version = def->since_version;
    }
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH && control_flow) continue;
      if (values_op && a.name() == "type") continue;  // Optional's TypeProto: read below
      REMEX_ASSIGN_OR_RETURN(auto value, ConvertAttribute(a, where));
      node.attrs.Set(a.name(), std::move(value));
    }
    for (const auto& in : n.input()) {
      if (in.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      auto it = ids_.find(in);
      if (it == ids_.end()) {
        return InvalidArgument(where + " reads '" + in + "', which is not defined before it");
      }
      node.inputs.push_back(it->second);
    }
    // Split without `split` divides into one equal part per output (opset 18's
    // num_outputs), a count the shape function cannot see otherwise.
    if (node.op == "Split" && !node.attrs.Has("split") && !node.attrs.Has("num_outputs") &&
        (n.input_size() < 2 || n.input(1).empty())) {
      node.attrs.Set("num_outputs", static_cast<int64_t>(n.output_size()));
    }
    // Trailing optional outputs the model leaves unnamed are not produced.
    int num_outputs = n.output_size();
    while (num_outputs > 0 && n.output(num_outputs - 1).empty()) --num_outputs;
    for (int i = 0; i < num_outputs; ++i) {
      Value v;
      v.name = n.output(i).empty() ? name + ".unused" + std::to_string(i) : n.output(i);
      int id = graph_.AddValue(std::move(v));
      if (!n.output(i).empty()) ids_[n.output(i)] = id;
      node.outputs.push_back(id);
    }
    if (upsample && node.attrs.Has("scales")) {
      if (!node.inputs.empty() && node.inputs.size() != 1) {
        return InvalidArgument(where + ": Upsample takes scales as an attribute or as input 1, not both");
      }
      REMEX_ASSIGN_OR_RETURN(std::vector<float> scales, node.attrs.Floats("scales"));
      node.inputs.push_back(graph_.AddConstant(
          node.name + ".scales", MakeConstant<float>(DType::kFloat32, {static_cast<int64_t>(scales.size())}, scales)));
      kernels::Attributes kept;
      if (node.attrs.Has("mode")) {
        REMEX_ASSIGN_OR_RETURN(std::string mode, node.attrs.String("mode"));
        kept.Set("mode", mode);
      }
      node.attrs = std::move(kept);
    }
    if (!domain_def && !values_op) REMEX_RETURN_IF_ERROR(Normalise(node, where));
    if (def) REMEX_RETURN_IF_ERROR(CheckArity(node, *def, where));
    if (values_op) {
      REMEX_RETURN_IF_ERROR(ImportValuesOp(n, *values_op, node, where));
    } else if (node.op == "Identity" && !node.inputs.empty() && node.inputs[0] >= 0 &&
               graph_.values[node.inputs[0]].kind != vm::ValueKind::kTensor) {
      node.values_op = true;  // Identity of a sequence or optional: the VM moves it
      for (int o : node.outputs) graph_.values[o].kind = graph_.values[node.inputs[0]].kind;
    } else if (!control_flow) {
      // A kernel reads tensors only.
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] < 0) continue;
        const Value& v = graph_.values[node.inputs[i]];
        if (v.kind != vm::ValueKind::kTensor) {
          return InvalidArgument(where + ": input " + std::to_string(i) + " '" + v.name + "' is an ONNX " +
                                 vm::ValueKindName(v.kind) + ", and " + node.op + " takes tensors");
        }
      }
    }
    if (control_flow) {
      // Subgraphs are read after the node's inputs (outer scope) are resolved and
      // before its outputs become visible.
      std::vector<std::string> names = n.op_type() == "If" ? std::vector<std::string>{"then_branch", "else_branch"}
                                                           : std::vector<std::string>{"body"};
      for (const auto& attr_name : names) {
        const onnx::AttributeProto* attr = nullptr;
        for (const auto& a : n.attribute()) if (a.name() == attr_name) attr = &a;
        if (!attr || attr->type() != onnx::AttributeProto::GRAPH) {
          return InvalidArgument(where + " has no graph attribute '" + attr_name + "'");
        }
        // The node's own outputs must not be visible inside its subgraphs.
        std::map<std::string, int> outer = ids_;
        for (int i = 0; i < n.output_size(); ++i) outer.erase(n.output(i));
        std::swap(ids_, outer);
        // A Loop body's carried inputs have the kinds of the Loop's initial values.
        std::vector<vm::ValueKind> input_kinds;
        if (n.op_type() == "Loop") {
          input_kinds = {vm::ValueKind::kTensor, vm::ValueKind::kTensor};
          for (size_t k = 2; k < node.inputs.size(); ++k) {
            input_kinds.push_back(node.inputs[k] >= 0 ? graph_.values[node.inputs[k]].kind : vm::ValueKind::kTensor);
          }
        }
        auto region = ImportRegion(attr->g(), where + " " + attr_name, input_kinds);
        std::swap(ids_, outer);
        if (!region.ok()) return region.status();
        node.regions.push_back(std::move(region).value());
      }
      if (n.op_type() == "Loop") {
        const Region& body = node.regions[0];
        size_t carried = node.inputs.size() < 2 ? 0 : node.inputs.size() - 2;
        if (node.inputs.size() < 2 || body.inputs.size() != carried + 2 || body.outputs.size() < carried + 1 ||
            node.outputs.size() > body.outputs.size() - 1) {
          return InvalidArgument(where + ": Loop body signature does not match the node (" +
                                 std::to_string(body.inputs.size()) + " body inputs, " +
                                 std::to_string(node.inputs.size()) + " node inputs)");
        }
        for (size_t i = 0; i < node.outputs.size(); ++i) {
          // Carried values keep their kind; scan outputs stack tensors.
          vm::ValueKind kind = graph_.values[body.outputs[1 + i]].kind;
          if (i < carried && node.inputs[2 + i] >= 0 && kind != graph_.values[node.inputs[2 + i]].kind) {
            // Loop-16: an optional may enter and its value leave (or the other way):
            // the Loop's output is then the optional (no iteration gives the initial one).
            const vm::ValueKind init = graph_.values[node.inputs[2 + i]].kind;
            if (vm::IsSequenceKind(init) != vm::IsSequenceKind(kind)) {
              return InvalidArgument(where + ": loop-carried value " + std::to_string(i) + " enters as a " +
                                     vm::ValueKindName(init) + " and leaves the body as a " + vm::ValueKindName(kind));
            }
            kind = vm::IsSequenceKind(kind) ? vm::ValueKind::kOptionalSequence : vm::ValueKind::kOptionalTensor;
          }
          if (i >= carried && kind != vm::ValueKind::kTensor) {
            return InvalidArgument(where + ": scan output " + std::to_string(i - carried) + " is a " +
                                   vm::ValueKindName(kind) + "; Loop stacks tensors");
          }
          graph_.values[node.outputs[i]].kind = kind;
        }
      } else if (node.regions[0].outputs.size() != node.outputs.size() ||
                 node.regions[1].outputs.size() != node.outputs.size()) {
        return InvalidArgument(where + ": If branches must produce one value per output");
      } else {
        for (size_t i = 0; i < node.outputs.size(); ++i) {
          const vm::ValueKind a = graph_.values[node.regions[0].outputs[i]].kind;
          const vm::ValueKind b = graph_.values[node.regions[1].outputs[i]].kind;
          if (a != b) {
            return InvalidArgument(where + ": the branches give output " + std::to_string(i) + " as a " +
                                   vm::ValueKindName(a) + " and as a " + vm::ValueKindName(b));
          }
          graph_.values[node.outputs[i]].kind = a;
        }
      }
    }
    nodes_->push_back(std::move(node));
    return OkStatus();
  }

  // Checks a sequence or optional op's operands (count and kinds) and gives its output
  // its kind; the op then runs as VM instructions (codegen.cc EmitValuesOp).
  Status ImportValuesOp(const onnx::NodeProto& n, const ValuesOp& op, Node& node, const std::string& where) {
    const int inputs = static_cast<int>(node.inputs.size());
    if (inputs < op.min_inputs || (op.max_inputs >= 0 && inputs > op.max_inputs) || node.outputs.size() != 1) {
      return InvalidArgument(where + ": " + std::to_string(inputs) + " inputs and " +
                             std::to_string(node.outputs.size()) + " outputs do not fit " + node.op);
    }
    using vm::ValueKind;
    auto kind_of = [&](int i) { return node.inputs[i] < 0 ? ValueKind::kTensor : graph_.values[node.inputs[i]].kind; };
    auto need = [&](int i, bool ok, const char* what) -> Status {
      if (node.inputs[i] < 0) return InvalidArgument(where + ": input " + std::to_string(i) + " is empty");
      if (ok) return OkStatus();
      return InvalidArgument(where + ": input " + std::to_string(i) + " '" + graph_.values[node.inputs[i]].name +
                             "' is a " + vm::ValueKindName(kind_of(i)) + "; " + node.op + " takes " + what + " there");
    };
    ValueKind out = ValueKind::kTensor;
    if (node.op == "SequenceConstruct") {
      for (int i = 0; i < inputs; ++i) REMEX_RETURN_IF_ERROR(need(i, kind_of(i) == ValueKind::kTensor, "a tensor"));
      out = ValueKind::kSequence;
    } else if (node.op == "SequenceEmpty") {
      out = ValueKind::kSequence;
    } else if (node.op == "Optional") {
      out = ValueKind::kOptionalTensor;
      if (inputs == 1 && node.inputs[0] >= 0) {
        REMEX_RETURN_IF_ERROR(need(0, !vm::IsOptionalKind(kind_of(0)), "a tensor or a sequence"));
        if (kind_of(0) == ValueKind::kSequence) out = ValueKind::kOptionalSequence;
      } else {
        // Optional(): an empty optional of the type its `type` attribute gives.
        const onnx::AttributeProto* type = nullptr;
        for (const auto& a : n.attribute()) if (a.name() == "type") type = &a;
        if (!type || !type->has_tp()) return InvalidArgument(where + ": Optional without input needs its 'type' attribute");
        const onnx::TypeProto* tp = &type->tp();
        if (tp->has_sequence_type()) {
          out = ValueKind::kOptionalSequence;
          tp = &tp->sequence_type().elem_type();
        }
        if (!tp->has_tensor_type()) return Unimplemented(where + ": Optional of a type other than a tensor or a sequence of tensors");
        auto dtype = DTypeFromOnnx(tp->tensor_type().elem_type());
        if (!dtype) return Unimplemented(where + ": Optional of ONNX data type " + std::to_string(tp->tensor_type().elem_type()));
        node.attrs.Set("dtype", static_cast<int64_t>(tp->tensor_type().elem_type()));
      }
    } else if (node.op == "OptionalHasElement" || node.op == "OptionalGetElement") {
      REMEX_RETURN_IF_ERROR(need(0, vm::IsOptionalKind(kind_of(0)), "an optional"));
      out = node.op == "OptionalHasElement" ? ValueKind::kTensor
            : kind_of(0) == ValueKind::kOptionalSequence ? ValueKind::kSequence : ValueKind::kTensor;
    } else {  // SequenceInsert, SequenceAt, SequenceErase, SequenceLength
      REMEX_RETURN_IF_ERROR(need(0, kind_of(0) == ValueKind::kSequence, "a sequence"));
      for (int i = 1; i < inputs; ++i) {
        if (node.inputs[i] >= 0) REMEX_RETURN_IF_ERROR(need(i, kind_of(i) == ValueKind::kTensor, "a tensor"));
      }
      if ((node.op == "SequenceAt" || node.op == "SequenceInsert") && node.inputs[1] < 0) {
        return InvalidArgument(where + ": input 1 is empty");
      }
      out = node.op == "SequenceInsert" || node.op == "SequenceErase" ? ValueKind::kSequence : ValueKind::kTensor;
    }
    node.values_op = true;
    graph_.values[node.outputs[0]].kind = out;
    return OkStatus();
  }

  // SequenceMap-17 (https://onnx.ai/onnx/operators/onnx__SequenceMap.html) as the Loop
  // its ONNX function body describes: over the length of input 0, the body runs on
  // element i of every sequence input and on every tensor input as it is, and output k
  // collects the body's output k of each iteration (SequenceInsert at the end).
  StatusOr<std::vector<onnx::NodeProto>> LowerSequenceMap(const onnx::NodeProto& n, const std::string& name,
                                                          const std::string& where) {
    if (graph_.opset < 17) {
      return Unimplemented(where + ": SequenceMap at opset " + std::to_string(graph_.opset) +
                           " is not supported; Remex implements SequenceMap for opset 17");
    }
    const onnx::GraphProto* body = nullptr;
    for (const auto& a : n.attribute()) {
      if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH) body = &a.g();
    }
    if (!body) return InvalidArgument(where + " has no graph attribute 'body'");
    if (n.input_size() < 1 || body->input_size() != n.input_size() || body->output_size() != n.output_size() ||
        n.output_size() < 1) {
      return InvalidArgument(where + ": the body takes " + std::to_string(body->input_size()) + " inputs and gives " +
                             std::to_string(body->output_size()) + " outputs for a node of " +
                             std::to_string(n.input_size()) + " inputs and " + std::to_string(n.output_size()) +
                             " outputs");
    }
    std::vector<bool> sequence(n.input_size());
    for (int j = 0; j < n.input_size(); ++j) {
      auto it = ids_.find(n.input(j));
      if (it == ids_.end()) return InvalidArgument(where + " reads '" + n.input(j) + "', which is not defined before it");
      const vm::ValueKind kind = graph_.values[it->second].kind;
      if (vm::IsOptionalKind(kind)) return InvalidArgument(where + ": input '" + n.input(j) + "' is an optional");
      sequence[j] = kind == vm::ValueKind::kSequence;
    }
    if (!sequence[0]) return InvalidArgument(where + ": input 0 '" + n.input(0) + "' is not a sequence");
    const std::string p = name + "/map/";
    std::vector<onnx::NodeProto> out;
    AddNode(out, "SequenceLength", p + "length", {n.input(0)}, {p + "length"});
    std::vector<std::string> empties, accs, acc_outs;
    std::vector<onnx::NodeProto> nodes;
    for (int j = 0; j < n.input_size(); ++j) {
      AddNode(nodes, sequence[j] ? "SequenceAt" : "Identity", p + "arg" + std::to_string(j),
              sequence[j] ? std::vector<std::string>{n.input(j), p + "i"} : std::vector<std::string>{n.input(j)},
              {body->input(j).name()});
    }
    for (const auto& node : body->node()) nodes.push_back(node);
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string acc = p + "acc" + std::to_string(k);
      empties.push_back(p + "empty" + std::to_string(k));
      accs.push_back(acc);
      acc_outs.push_back(acc + "_out");
      // The body output's declared dtype, else 0: that of the first tensor inserted.
      const onnx::TypeProto& t = body->output(k).type();
      SetInt(AddNode(out, "SequenceEmpty", empties.back(), {}, {empties.back()}), "dtype",
             t.has_tensor_type() ? t.tensor_type().elem_type() : 0);
      AddNode(nodes, "SequenceInsert", acc + "_insert", {acc, body->output(k).name()}, {acc_outs.back()});
    }
    onnx::GraphProto& g = AddLoop(out, name, p, p + "length", empties,
                                  std::vector<std::string>(n.output().begin(), n.output().end()), accs,
                                  std::move(nodes), acc_outs);
    for (const auto& init : body->initializer()) *g.add_initializer() = init;
    return out;
  }

  // A Loop node `name` (trip count `count`, no condition) writing `outputs`, whose body
  // (named after prefix `p`) takes (p/i, p/cond, then the carried values named `carried`,
  // their initial values `inits`), runs `body` then passes p/cond through, and gives
  // `carried_out` as the carried values' next ones.
  static onnx::GraphProto& AddLoop(std::vector<onnx::NodeProto>& to, const std::string& name, const std::string& p,
                                   const std::string& count, const std::vector<std::string>& inits,
                                   const std::vector<std::string>& outputs, const std::vector<std::string>& carried,
                                   std::vector<onnx::NodeProto> body, const std::vector<std::string>& carried_out) {
    std::vector<std::string> inputs = {count, ""};
    inputs.insert(inputs.end(), inits.begin(), inits.end());
    onnx::NodeProto& loop = AddNode(to, "Loop", name, inputs, outputs);
    onnx::AttributeProto* attr = loop.add_attribute();
    attr->set_name("body");
    attr->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto& g = *attr->mutable_g();
    g.set_name(p + "body");
    *g.add_input() = ScalarInfo(p + "i", onnx::TensorProto::INT64);
    *g.add_input() = ScalarInfo(p + "cond", onnx::TensorProto::BOOL);
    for (const std::string& c : carried) g.add_input()->set_name(c);
    AddNode(body, "Identity", p + "cond_out", {p + "cond"}, {p + "cond_out"});
    for (auto& node : body) *g.add_node() = std::move(node);
    g.add_output()->set_name(p + "cond_out");
    for (const std::string& c : carried_out) g.add_output()->set_name(c);
    return g;
  }

  // SplitToSequence-11 (https://onnx.ai/onnx/operators/onnx__SplitToSequence.html) as a
  // Loop over the pieces: without `split`, one piece per index along `axis` (Gather:
  // the axis dropped when keepdims = 0, kept as 1 otherwise); with a constant scalar
  // `split` s, pieces [k*s, k*s + s) of the axis (Range; the last may be shorter, as
  // Slice clamps); with a constant 1-D `split`, pieces of those lengths. A computed
  // `split` is UNIMPLEMENTED (its rank, which is not known at import, picks the form).
  StatusOr<std::vector<onnx::NodeProto>> LowerSplitToSequence(const onnx::NodeProto& n, const std::string& name,
                                                              const std::string& where) {
    if (graph_.opset < 11) {
      return Unimplemented(where + ": SplitToSequence at opset " + std::to_string(graph_.opset) +
                           " is not supported; Remex implements SplitToSequence for opsets 11-17");
    }
    if (n.input_size() < 1 || n.input_size() > 2 || n.output_size() != 1) {
      return InvalidArgument(where + ": SplitToSequence takes 1 or 2 inputs and gives 1 output");
    }
    int64_t axis = 0, keepdims = 1;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axis") axis = a.i();
      if (a.name() == "keepdims") keepdims = a.i();
    }
    const std::string p = name + "/split/";
    const std::string& x = n.input(0);
    std::vector<onnx::NodeProto> out, body;
    const std::string axis_c = AddInt64Constant(out, p + "axis", {axis}, true);
    const std::string axes_c = AddInt64Constant(out, p + "axes", {axis}, false);
    const std::string one = AddInt64Constant(out, p + "one", {1}, true);
    AddNode(out, "Shape", p + "shape", {x}, {p + "shape"});
    AddNode(out, "Gather", p + "dim", {p + "shape", axis_c}, {p + "dim"});
    std::string count, starts, ends;
    const bool has_split = n.input_size() == 2 && !n.input(1).empty();
    if (!has_split && keepdims == 0) {
      count = p + "dim";
      SetInt(AddNode(body, "Gather", p + "piece", {x, p + "i"}, {p + "piece"}), "axis", axis);
    } else {
      if (!has_split) {
        AddNode(out, "Range", p + "starts", {AddInt64Constant(out, p + "zero", {0}, true), p + "dim", one}, {p + "starts"});
        AddNode(out, "Add", p + "ends", {p + "starts", one}, {p + "ends"});
      } else {
        auto it = ids_.find(n.input(1));
        if (it == ids_.end()) return InvalidArgument(where + " reads '" + n.input(1) + "', which is not defined before it");
        const Value& split = graph_.values[it->second];
        if (!split.constant) {
          return Unimplemented(where + ": SplitToSequence with a computed 'split' (Remex needs it constant)");
        }
        const vm::ConstantDef& c = graph_.constants[*split.constant];
        if (!IsIndexType(c.dtype) || c.shape.size() > 1) {
          return InvalidArgument(where + ": 'split' must be an int32 or int64 scalar or 1-D tensor");
        }
        std::vector<int64_t> lengths;
        for (size_t k = 0; k < c.data.size() / DTypeSize(c.dtype); ++k) {
          int64_t v = 0;
          if (c.dtype == DType::kInt64) std::memcpy(&v, c.data.data() + 8 * k, 8);
          else { int32_t w; std::memcpy(&w, c.data.data() + 4 * k, 4); v = w; }
          if (v < 0 || (c.shape.empty() && v == 0)) {
            return InvalidArgument(where + ": 'split' holds " + std::to_string(v) + "; lengths must be positive");
          }
          lengths.push_back(v);
        }
        if (c.shape.empty()) {  // chunks of lengths[0]
          const std::string s = AddInt64Constant(out, p + "chunk", {lengths[0]}, true);
          AddNode(out, "Range", p + "starts", {AddInt64Constant(out, p + "zero", {0}, true), p + "dim", s}, {p + "starts"});
          AddNode(out, "Add", p + "ends", {p + "starts", s}, {p + "ends"});
        } else {
          // A known number of pieces: Split (whose shape function checks that the
          // lengths add up to the axis) and SequenceConstruct, no Loop.
          if (lengths.empty()) return InvalidArgument(where + ": 'split' is empty");
          std::vector<onnx::NodeProto> direct;
          std::vector<std::string> pieces;
          for (size_t k = 0; k < lengths.size(); ++k) pieces.push_back(p + "piece" + std::to_string(k));
          onnx::NodeProto* split_node = nullptr;
          if (graph_.opset >= 13) {
            split_node = &AddNode(direct, "Split", p + "split", {x, AddInt64Constant(direct, p + "lengths", lengths, false)}, pieces);
          } else {
            split_node = &AddNode(direct, "Split", p + "split", {x}, pieces);
            SetInts(*split_node, "split", lengths);
          }
          SetInt(*split_node, "axis", axis);
          AddNode(direct, "SequenceConstruct", name, pieces, {n.output(0)});
          return direct;
        }
      }
      AddNode(out, "Size", p + "count", {p + "starts"}, {p + "count"});
      count = p + "count";
      const std::string shape1 = AddInt64Constant(body, p + "shape1", {1}, false);
      AddNode(body, "Reshape", p + "i1", {p + "i", shape1}, {p + "i1"});
      AddNode(body, "Gather", p + "from", {p + "starts", p + "i1"}, {p + "from"});
      AddNode(body, "Gather", p + "to", {p + "ends", p + "i1"}, {p + "to"});
      AddNode(body, "Slice", p + "piece", {x, p + "from", p + "to", axes_c}, {p + "piece"});
    }
    AddNode(body, "SequenceInsert", p + "insert", {p + "acc", p + "piece"}, {p + "acc_out"});
    onnx::NodeProto& empty = AddNode(out, "SequenceEmpty", p + "empty", {}, {p + "empty"});
    SetInt(empty, "dtype", 0);  // the elements' dtype: that of what is inserted
    AddLoop(out, name, p, count, {p + "empty"}, {n.output(0)}, {p + "acc"}, std::move(body), {p + "acc_out"});
    return out;
  }

  // ConcatFromSequence-11 (https://onnx.ai/onnx/operators/onnx__ConcatFromSequence.html)
  // as element 0 (unsqueezed at `axis` when new_axis = 1), then a Loop concatenating
  // elements 1.. along `axis`. An empty sequence is an OUT_OF_RANGE error of its
  // SequenceAt, naming the node.
  StatusOr<std::vector<onnx::NodeProto>> LowerConcatFromSequence(const onnx::NodeProto& n, const std::string& name,
                                                                 const std::string& where) {
    if (graph_.opset < 11) {
      return Unimplemented(where + ": ConcatFromSequence at opset " + std::to_string(graph_.opset) +
                           " is not supported; Remex implements ConcatFromSequence for opsets 11-17");
    }
    if (n.input_size() != 1 || n.output_size() != 1) {
      return InvalidArgument(where + ": ConcatFromSequence takes 1 input and gives 1 output");
    }
    std::optional<int64_t> axis;
    int64_t new_axis = 0;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axis") axis = a.i();
      if (a.name() == "new_axis") new_axis = a.i();
    }
    if (!axis) return InvalidArgument(where + ": ConcatFromSequence needs its 'axis' attribute");
    const std::string p = name + "/concat/";
    const std::string& seq = n.input(0);
    std::vector<onnx::NodeProto> out, body;
    // Element e, unsqueezed at `axis` for new_axis (Unsqueeze-13 takes its axes as an
    // input, Unsqueeze-11 as an attribute).
    auto element = [&](std::vector<onnx::NodeProto>& to, const std::string& at, const std::string& e) {
      if (!new_axis) {
        AddNode(to, "SequenceAt", e, {seq, at}, {e});
        return;
      }
      AddNode(to, "SequenceAt", e + "_at", {seq, at}, {e + "_at"});
      if (graph_.opset >= 13) {
        AddNode(to, "Unsqueeze", e, {e + "_at", AddInt64Constant(to, e + "_axes", {*axis}, false)}, {e});
      } else {
        onnx::NodeProto& u = AddNode(to, "Unsqueeze", e, {e + "_at"}, {e});
        SetInts(u, "axes", {*axis});
      }
    };
    element(out, AddInt64Constant(out, p + "zero", {0}, true), p + "first");
    AddNode(out, "SequenceLength", p + "length", {seq}, {p + "length"});
    AddNode(out, "Sub", p + "rest", {p + "length", AddInt64Constant(out, p + "one", {1}, true)}, {p + "rest"});
    AddNode(body, "Add", p + "next", {p + "i", AddInt64Constant(body, p + "one_b", {1}, true)}, {p + "next"});
    element(body, p + "next", p + "e");
    SetInt(AddNode(body, "Concat", p + "cat", {p + "acc", p + "e"}, {p + "acc_out"}), "axis", *axis);
    AddLoop(out, name, p, p + "rest", {p + "first"}, {n.output(0)}, {p + "acc"}, std::move(body), {p + "acc_out"});
    return out;
  }

  // Imports a subgraph of If or Loop. Its initializers become constants, its inputs
  // new values; names resolve innermost first, then in the enclosing scopes.
  StatusOr<Region> ImportRegion(const onnx::GraphProto& g, const std::string& where,
                                const std::vector<vm::ValueKind>& input_kinds = {}) {
    if (++depth_ > 16) return InvalidArgument(where + ": subgraphs nested more than 16 deep");
    Region region;
    for (const auto& init : g.initializer()) {
      auto c = ConvertTensor(init);
      if (!c.ok()) return c.status().WithContext(where + " initializer '" + init.name() + "'");
      ids_[init.name()] = graph_.AddConstant(init.name(), std::move(c).value());
    }
    for (int i = 0; i < g.input_size(); ++i) {
      const auto& in = g.input(i);
      Value v;
      v.name = in.name();
      if (static_cast<size_t>(i) < input_kinds.size()) v.kind = input_kinds[i];
      if (in.has_type() && in.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
        auto typed = ValueFromInfo(in);
        if (!typed.ok()) return typed.status().WithContext(where);
        if (static_cast<size_t>(i) < input_kinds.size() && typed->kind != input_kinds[i]) {
          return InvalidArgument(where + ": input '" + in.name() + "' is declared a " + vm::ValueKindName(typed->kind) +
                                 " but receives a " + vm::ValueKindName(input_kinds[i]));
        }
        v = std::move(typed).value();
      }
      int id = graph_.AddValue(std::move(v));
      ids_[in.name()] = id;
      region.inputs.push_back(id);
    }
    std::vector<Node>* saved = nodes_;
    nodes_ = &region.nodes;
    for (int i : ImportOrder(g)) {
      Status st = ImportNode(g.node(i), i);
      if (!st.ok()) {
        nodes_ = saved;
        return st.WithContext(where);
      }
    }
    nodes_ = saved;
    for (const auto& out : g.output()) {
      auto it = ids_.find(out.name());
      if (it == ids_.end()) return InvalidArgument(where + ": output '" + out.name() + "' is produced by no node");
      region.outputs.push_back(it->second);
    }
    --depth_;
    return region;
  }

  const onnx::ModelProto* model_ = nullptr;  // during Import
  std::optional<std::map<std::string, int64_t>> legacy_ranks_;  // LegacyRanks
  const kernels::KernelRegistry& registry_;
  const std::map<std::string, Shape>& input_shapes_;
  // Opsets of the domains other than the default one, by domain name.
  std::map<std::string, int> domain_opsets_;
  Graph graph_;
  std::map<std::string, int> ids_;
  std::vector<Node>* nodes_ = nullptr;  // where ImportNode appends
  int depth_ = 0;
};

}  // namespace

std::string_view ImportedWithoutEntry(std::string_view op) {
  if (op == "Constant") return "constant";
  if (op == "If" || op == "Loop") return "VM control flow";
  if (op == "Scan") return "lowered to Loop";
  if (op == "Upsample") return "as Resize-10";
  if (ValuesOpOf(op)) return "VM sequence and optional instructions";
  if (op == "SequenceMap" || op == "SplitToSequence" || op == "ConcatFromSequence") return "lowered to Loop";
  return {};
}

StatusOr<Graph> ImportOnnxBytes(std::span<const std::byte> bytes,
                                const kernels::KernelRegistry& registry,
                                const std::map<std::string, Shape>& input_shapes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Unimplemented("ONNX models over 2 GiB (external data) are not supported");
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not a valid ONNX model (protobuf parse failed)");
  }
  return Importer(registry, input_shapes).Import(model);
}

StatusOr<Graph> ImportOnnxFile(const std::string& path, const kernels::KernelRegistry& registry,
                               const std::map<std::string, Shape>& input_shapes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open ONNX model '" + path + "'");
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto graph = ImportOnnxBytes(std::as_bytes(std::span(data)), registry, input_shapes);
  if (!graph.ok()) return graph.status().WithContext(path);
  return graph;
}

StatusOr<vm::ConstantDef> TensorFromProtoBytes(std::span<const std::byte> bytes) {
  onnx::TensorProto t;
  if (!t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not a valid ONNX TensorProto");
  }
  return ConvertTensor(t);
}

namespace {

StatusOr<std::vector<vm::ConstantDef>> SequenceElements(const onnx::SequenceProto& seq) {
  if (seq.sequence_values_size() || seq.map_values_size() || seq.optional_values_size() ||
      seq.sparse_tensor_values_size()) {
    return InvalidArgument("sequence '" + seq.name() + "' holds other than tensors");
  }
  std::vector<vm::ConstantDef> out;
  for (const auto& t : seq.tensor_values()) {
    auto c = ConvertTensor(t);
    if (!c.ok()) return c.status().WithContext("element " + std::to_string(out.size()) + " of sequence '" + seq.name() + "'");
    out.push_back(std::move(c).value());
  }
  return out;
}

}  // namespace

StatusOr<ValueData> ValueFromProtoBytes(std::span<const std::byte> bytes, vm::ValueKind kind) {
  ValueData v;
  v.kind = kind;
  const int size = static_cast<int>(bytes.size());
  switch (kind) {
    case vm::ValueKind::kTensor: {
      REMEX_ASSIGN_OR_RETURN(vm::ConstantDef c, TensorFromProtoBytes(bytes));
      v.elements.push_back(std::move(c));
      return v;
    }
    case vm::ValueKind::kSequence: {
      onnx::SequenceProto seq;
      if (!seq.ParseFromArray(bytes.data(), size)) return InvalidArgument("not a valid ONNX SequenceProto");
      REMEX_ASSIGN_OR_RETURN(v.elements, SequenceElements(seq));
      return v;
    }
    case vm::ValueKind::kOptionalTensor:
    case vm::ValueKind::kOptionalSequence: {
      onnx::OptionalProto opt;
      if (!opt.ParseFromArray(bytes.data(), size)) return InvalidArgument("not a valid ONNX OptionalProto");
      if (kind == vm::ValueKind::kOptionalTensor && opt.has_tensor_value()) {
        REMEX_ASSIGN_OR_RETURN(vm::ConstantDef c, ConvertTensor(opt.tensor_value()));
        v.elements.push_back(std::move(c));
      } else if (kind == vm::ValueKind::kOptionalSequence && opt.has_sequence_value()) {
        REMEX_ASSIGN_OR_RETURN(v.elements, SequenceElements(opt.sequence_value()));
      } else if (opt.has_tensor_value() || opt.has_sequence_value() || opt.has_map_value() ||
                 opt.has_optional_value() || opt.has_sparse_tensor_value()) {
        return InvalidArgument("optional '" + opt.name() + "' holds a value of another kind than " +
                               vm::ValueKindName(kind));
      } else {
        v.none = true;
      }
      return v;
    }
  }
  return InvalidArgument("unknown value kind");
}

}  // namespace remex::compiler
