#include "host_client/compiler/onnx_scan.h"

#include "host_client/compiler/onnx_build.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace remex::compiler {
namespace {

// Writes nodes with fresh value names under one prefix.
class Emitter {
 public:
  Emitter(std::string prefix, int* counter) : prefix_(std::move(prefix)), counter_(counter) {}

  std::string Fresh(const std::string& what) { return prefix_ + "/" + what + std::to_string((*counter_)++); }

  // Appends a node of a fresh name to `out`; returns it for attributes.
  onnx::NodeProto& Node(std::vector<onnx::NodeProto>& out, const std::string& op,
                        const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
    return AddNode(out, op, Fresh(op), inputs, outputs);
  }

  // A Constant node of a fresh name holding int64 `values` (AddInt64Constant).
  std::string Int64s(std::vector<onnx::NodeProto>& out, const std::vector<int64_t>& values, bool scalar) {
    return AddInt64Constant(out, Fresh("const"), values, scalar);
  }

 private:
  std::string prefix_;
  int* counter_;
};

// The rank a value info declares, if it declares one.
std::optional<int64_t> DeclaredRank(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return std::nullopt;
  return v.type().tensor_type().shape().dim_size();
}

// What Scan-9 and later compute, for one Scan (or one batch element of Scan-8).
struct ScanSpec {
  std::vector<std::string> states;       // initial state values (outer names)
  std::vector<std::string> scan_inputs;  // outer names
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
  std::vector<std::string> outputs;  // N final states then K scan outputs; "" for unused
  const onnx::GraphProto* body = nullptr;
};

// Per-position attribute list: `count` values, `fallback` when the attribute is absent.
StatusOr<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& n, const std::string& name, size_t count,
                                        int64_t fallback, const std::string& where) {
  for (const auto& a : n.attribute()) {
    if (a.name() != name) continue;
    if (a.type() != onnx::AttributeProto::INTS || static_cast<size_t>(a.ints_size()) != count) {
      return InvalidArgument(where + ": attribute '" + name + "' must list " + std::to_string(count) + " ints");
    }
    return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  }
  return std::vector<int64_t>(count, fallback);
}

// Normalises `axis` of a tensor whose rank is the declared rank of `info` plus 1.
StatusOr<int64_t> ScanAxis(int64_t axis, const onnx::ValueInfoProto& info, const std::string& what,
                           const std::string& where) {
  std::optional<int64_t> rank = DeclaredRank(info);
  if (axis >= 0 && (!rank || axis <= *rank)) return axis;
  if (!rank) {
    return Unimplemented(where + ": " + what + " axis " + std::to_string(axis) +
                         " needs the rank of body value '" + info.name() + "', which the body does not declare");
  }
  const int64_t full = *rank + 1;
  if (axis < -full || axis >= full) {
    return InvalidArgument(where + ": " + what + " axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(full));
  }
  return axis < 0 ? axis + full : axis;
}

Status EmitScan(const ScanSpec& s, Emitter& e, std::vector<onnx::NodeProto>& out, const std::string& where) {
  const size_t n_states = s.states.size(), n_scan = s.scan_inputs.size();
  const onnx::GraphProto& body = *s.body;
  if (n_scan == 0) return InvalidArgument(where + ": Scan needs at least one scan input");
  if (static_cast<size_t>(body.input_size()) != n_states + n_scan ||
      static_cast<size_t>(body.output_size()) < n_states || s.outputs.size() > static_cast<size_t>(body.output_size())) {
    return InvalidArgument(where + ": the body's " + std::to_string(body.input_size()) + " inputs and " +
                           std::to_string(body.output_size()) + " outputs do not match " + std::to_string(n_states) +
                           " states and " + std::to_string(n_scan) + " scan inputs");
  }
  const size_t n_scan_out = body.output_size() - n_states;
  std::vector<int64_t> in_axes(n_scan), out_axes(n_scan_out);
  for (size_t j = 0; j < n_scan; ++j) {
    if (s.in_dirs[j] != 0 && s.in_dirs[j] != 1) return InvalidArgument(where + ": scan input direction must be 0 or 1");
    REMEX_ASSIGN_OR_RETURN(in_axes[j], ScanAxis(s.in_axes[j], body.input(n_states + j), "scan input", where));
  }
  for (size_t k = 0; k < n_scan_out; ++k) {
    if (s.out_dirs[k] != 0 && s.out_dirs[k] != 1) {
      return InvalidArgument(where + ": scan output direction must be 0 or 1");
    }
    REMEX_ASSIGN_OR_RETURN(out_axes[k], ScanAxis(s.out_axes[k], body.output(n_states + k), "scan output", where));
  }

  // Trip count: the length of scan input 0 along its axis (an int64 scalar).
  std::string shape = e.Fresh("shape");
  e.Node(out, "Shape", {s.scan_inputs[0]}, {shape});
  std::string len = e.Fresh("length");
  SetInt(e.Node(out, "Gather", {shape, e.Int64s(out, {in_axes[0]}, true)}, {len}), "axis", 0);
  std::string last;  // length - 1, for reversed scan inputs
  for (int64_t d : s.in_dirs) {
    if (d != 0 && last.empty()) {
      last = e.Fresh("last");
      e.Node(out, "Sub", {len, e.Int64s(out, {1}, true)}, {last});
    }
  }

  // The Loop body: (iteration, condition, states...) -> (condition, states..., scan outputs...).
  onnx::GraphProto loop_body;
  loop_body.set_name(e.Fresh("body"));
  std::string iter = e.Fresh("iteration"), cond = e.Fresh("condition");
  *loop_body.add_input() = ScalarInfo(iter, onnx::TensorProto::INT64);
  *loop_body.add_input() = ScalarInfo(cond, onnx::TensorProto::BOOL);
  for (size_t i = 0; i < n_states; ++i) *loop_body.add_input() = body.input(i);
  std::vector<onnx::NodeProto> inner;
  for (size_t j = 0; j < n_scan; ++j) {
    std::string index = iter;
    if (s.in_dirs[j]) {
      index = e.Fresh("index");
      e.Node(inner, "Sub", {last, iter}, {index});
    }
    SetInt(e.Node(inner, "Gather", {s.scan_inputs[j], index}, {body.input(n_states + j).name()}), "axis", in_axes[j]);
  }
  for (const auto& init : body.initializer()) *loop_body.add_initializer() = init;
  for (auto& n : inner) *loop_body.add_node() = std::move(n);
  for (const auto& n : body.node()) *loop_body.add_node() = n;
  std::string cond_out = e.Fresh("condition_out");
  std::vector<onnx::NodeProto> tail;
  e.Node(tail, "Identity", {cond}, {cond_out});
  for (auto& n : tail) *loop_body.add_node() = std::move(n);
  loop_body.add_output()->set_name(cond_out);
  for (const auto& o : body.output()) *loop_body.add_output() = o;

  // The Loop, then each stacked scan output reversed and moved to its axis as asked.
  std::vector<std::string> loop_outputs;
  std::vector<onnx::NodeProto> post;
  for (size_t i = 0; i < n_states; ++i) {
    loop_outputs.push_back(i < s.outputs.size() && !s.outputs[i].empty() ? s.outputs[i] : e.Fresh("state"));
  }
  for (size_t k = 0; k < n_scan_out; ++k) {
    const size_t at = n_states + k;
    const bool wanted = at < s.outputs.size() && !s.outputs[at].empty();
    const bool reverse = s.out_dirs[k] != 0, move = out_axes[k] != 0;
    if (!wanted || (!reverse && !move)) {
      loop_outputs.push_back(wanted ? s.outputs[at] : e.Fresh("stacked"));
      continue;
    }
    std::string v = e.Fresh("stacked");
    loop_outputs.push_back(v);
    if (reverse) {
      std::string r = move ? e.Fresh("reversed") : s.outputs[at];
      e.Node(post, "Slice",
             {v, e.Int64s(post, {-1}, false), e.Int64s(post, {std::numeric_limits<int64_t>::min()}, false),
              e.Int64s(post, {0}, false), e.Int64s(post, {-1}, false)},
             {r});
      v = r;
    }
    if (move) {
      const int64_t rank = *DeclaredRank(body.output(static_cast<int>(at))) + 1;  // ScanAxis checked it
      std::vector<int64_t> perm;
      for (int64_t p = 0; p < rank; ++p) perm.push_back(p < out_axes[k] ? p + 1 : p == out_axes[k] ? 0 : p);
      SetInts(e.Node(post, "Transpose", {v}, {s.outputs[at]}), "perm", perm);
    }
  }
  std::vector<std::string> loop_inputs = {len, ""};
  loop_inputs.insert(loop_inputs.end(), s.states.begin(), s.states.end());
  onnx::NodeProto& loop = e.Node(out, "Loop", loop_inputs, loop_outputs);
  onnx::AttributeProto* a = loop.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(loop_body);
  for (auto& n : post) out.push_back(std::move(n));
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<onnx::NodeProto>> LowerScan(const onnx::NodeProto& scan, int opset, const std::string& name) {
  const std::string where = "node '" + name + "' (Scan)";
  const onnx::GraphProto* body = nullptr;
  std::optional<int64_t> num_scan_inputs;
  for (const auto& a : scan.attribute()) {
    if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH) body = &a.g();
    if (a.name() == "num_scan_inputs" && a.type() == onnx::AttributeProto::INT) num_scan_inputs = a.i();
  }
  if (!body) return InvalidArgument(where + " has no graph attribute 'body'");
  if (!num_scan_inputs) return InvalidArgument(where + " has no int attribute 'num_scan_inputs'");
  int counter = 0;
  Emitter e(name + "/scan", &counter);
  std::vector<onnx::NodeProto> out;
  const bool scan8 = opset < 9;
  const int first = scan8 ? 1 : 0;  // Scan-8's input 0 is sequence_lens
  const int64_t m = *num_scan_inputs;
  if (m < 1 || m > scan.input_size() - first) {
    return InvalidArgument(where + ": num_scan_inputs " + std::to_string(m) + " does not fit its " +
                           std::to_string(scan.input_size()) + " inputs");
  }
  const size_t n_states = static_cast<size_t>(scan.input_size() - first - m);
  ScanSpec s;
  s.body = body;
  for (int i = first; i < scan.input_size(); ++i) {
    if (scan.input(i).empty()) return InvalidArgument(where + ": input " + std::to_string(i) + " is empty");
    (static_cast<size_t>(i - first) < n_states ? s.states : s.scan_inputs).push_back(scan.input(i));
  }
  const size_t n_scan_out = body->output_size() >= static_cast<int>(n_states) ? body->output_size() - n_states : 0;
  for (const auto& o : scan.output()) s.outputs.push_back(o);
  if (!scan8) {
    REMEX_ASSIGN_OR_RETURN(s.in_axes, IntsAttr(scan, "scan_input_axes", m, 0, where));
    REMEX_ASSIGN_OR_RETURN(s.in_dirs, IntsAttr(scan, "scan_input_directions", m, 0, where));
    REMEX_ASSIGN_OR_RETURN(s.out_axes, IntsAttr(scan, "scan_output_axes", n_scan_out, 0, where));
    REMEX_ASSIGN_OR_RETURN(s.out_dirs, IntsAttr(scan, "scan_output_directions", n_scan_out, 0, where));
    REMEX_RETURN_IF_ERROR(EmitScan(s, e, out, where));
    return out;
  }

  // Scan-8: a Loop over the batch (axis 0 of every state and scan input) whose body is
  // the Scan-9 lowering of one batch element; its results, stacked per batch element,
  // are Scan-8's outputs (final states [B, ...], scan outputs [B, sequence, ...]).
  if (!scan.input(0).empty()) {
    return Unimplemented(where + ": Scan-8 with sequence_lens is not supported (Remex runs every batch element "
                         "over the whole sequence)");
  }
  ScanSpec inner = s;
  inner.in_axes.assign(m, 0);
  REMEX_ASSIGN_OR_RETURN(inner.in_dirs, IntsAttr(scan, "directions", m, 0, where));
  inner.out_axes.assign(n_scan_out, 0);
  inner.out_dirs.assign(n_scan_out, 0);
  std::string shape = e.Fresh("shape");
  e.Node(out, "Shape", {s.scan_inputs[0]}, {shape});
  std::string batch = e.Fresh("batch");
  SetInt(e.Node(out, "Gather", {shape, e.Int64s(out, {0}, true)}, {batch}), "axis", 0);

  onnx::GraphProto outer_body;
  outer_body.set_name(e.Fresh("batch_body"));
  std::string b = e.Fresh("batch_index"), cond = e.Fresh("condition");
  *outer_body.add_input() = ScalarInfo(b, onnx::TensorProto::INT64);
  *outer_body.add_input() = ScalarInfo(cond, onnx::TensorProto::BOOL);
  std::vector<onnx::NodeProto> nodes;
  auto slice = [&](std::string& v) {
    std::string one = e.Fresh("element");
    SetInt(e.Node(nodes, "Gather", {v, b}, {one}), "axis", 0);
    v = one;
  };
  for (auto& v : inner.states) slice(v);
  for (auto& v : inner.scan_inputs) slice(v);
  inner.outputs.clear();
  for (size_t i = 0; i < n_states + n_scan_out; ++i) inner.outputs.push_back(e.Fresh("per_element"));
  REMEX_RETURN_IF_ERROR(EmitScan(inner, e, nodes, where));
  std::string cond_out = e.Fresh("condition_out");
  e.Node(nodes, "Identity", {cond}, {cond_out});
  for (auto& n : nodes) *outer_body.add_node() = std::move(n);
  outer_body.add_output()->set_name(cond_out);
  for (const auto& o : inner.outputs) outer_body.add_output()->set_name(o);

  std::vector<std::string> loop_outputs;
  for (size_t i = 0; i < n_states + n_scan_out; ++i) {
    loop_outputs.push_back(i < s.outputs.size() && !s.outputs[i].empty() ? s.outputs[i] : e.Fresh("unused"));
  }
  onnx::NodeProto& loop = e.Node(out, "Loop", {batch, ""}, loop_outputs);
  onnx::AttributeProto* a = loop.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(outer_body);
  return out;
}

}  // namespace remex::compiler
