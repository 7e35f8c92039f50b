// Elementwise fusion (see fusion.h).

#include "host_client/compiler/passes/elementwise_fusion.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host_client/compiler/passes/dead_code.h"
#include "host_client/compiler/passes/scalar_params.h"
#include "kernels/float16.h"
#include "kernels/ops/fused/fused.h"

namespace remex::compiler {
namespace {

using kernels::FusedOpcode;

constexpr std::string_view kFusedOp = "FusedElementwise";
// Nodes per group: with one instruction per node (Min/Max: one per extra input), plus
// inputs and immediates, a group stays well below kFusedMaxSlots.
constexpr size_t kMaxGroupNodes = 64;

bool IsFloat(DType t) { return t == DType::kFloat16 || t == DType::kFloat32 || t == DType::kFloat64; }

// What a fusible node computes.
struct Op {
  FusedOpcode code;
  std::vector<int> data;      // Inputs read as values (a variadic op: all of them).
  std::vector<float> params;  // Fixed scalar operands after the data ones.
  bool fold = false;          // A variadic op: a left fold of the binary opcode over `data`.
};

// The node as a FusedElementwise instruction: its op's traits (OpTraits::fused_opcode
// and params) say which opcode and which scalar operands.
std::optional<Op> Classify(const Graph& g, const Node& n, const kernels::KernelRegistry& registry) {
  if (!n.regions.empty() || n.values_op || n.host || n.outputs.size() != 1) return std::nullopt;
  const Value& out = g.values[n.outputs[0]];
  if (!IsFloat(out.dtype) || !out.rank_known || out.host) return std::nullopt;
  const kernels::OpDef* def = registry.FindOp(n.op, n.version);
  if (!def || !def->traits.fused_opcode) return std::nullopt;
  Op op{*def->traits.fused_opcode, {}, {}};
  const int arity = kernels::FusedOperandCount(static_cast<int64_t>(op.code));
  if (def->max_inputs < 0) {
    if (arity != 2 || !def->traits.params.empty() || n.inputs.size() < 2) return std::nullopt;
    op.data = n.inputs;
    op.fold = true;
  } else {
    auto params = ReadScalarParams(g, n, *def);
    if (!params) return std::nullopt;
    op.data.assign(n.inputs.begin(), n.inputs.begin() + static_cast<std::ptrdiff_t>(DataOperandCount(n, *def)));
    op.params = std::move(*params);
    if (op.data.size() + op.params.size() != static_cast<size_t>(arity)) return std::nullopt;
  }
  size_t rank = 0;
  for (int v : op.data) {
    if (v < 0) return std::nullopt;
    const Value& in = g.values[v];
    if (in.dtype != out.dtype || !in.rank_known || in.host) return std::nullopt;
    rank = std::max(rank, in.shape.size());
  }
  // A parameter input of higher rank than the data (Pow's exponent) raises the output's
  // rank, which immediates cannot.
  if (rank != out.shape.size()) return std::nullopt;
  return op;
}

// An instruction operand before slots are numbered.
struct Operand {
  enum Kind { kInput, kImmediate, kResult } kind;
  int index;
};

struct Built {
  std::vector<int> inputs;  // External value ids, in slot order.
  std::vector<float> immediates;
  std::vector<std::array<Operand, 3>> code;
  std::vector<FusedOpcode> opcodes;
  std::vector<int> arity;
};

// The program of `members` (node indices in graph order; the last is the root). With
// `constants_as_inputs`, one-element constants read as data become inputs instead of
// immediates.
Built BuildProgram(const Graph& g, const std::vector<int>& members, const std::vector<Op>& ops,
                   bool constants_as_inputs) {
  Built b;
  std::map<int, int> result_of;  // Value id -> instruction index.
  std::map<int, int> input_of;   // Value id -> input index.
  std::map<uint32_t, int> immediate_of;
  auto immediate = [&](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    auto [it, inserted] = immediate_of.emplace(bits, static_cast<int>(b.immediates.size()));
    if (inserted) b.immediates.push_back(f);
    return Operand{Operand::kImmediate, it->second};
  };
  auto operand = [&](int v) {
    if (auto r = result_of.find(v); r != result_of.end()) return Operand{Operand::kResult, r->second};
    if (!constants_as_inputs) {
      if (auto f = AsImmediate(ScalarConstant(g, v))) return immediate(*f);
    }
    auto [it, inserted] = input_of.emplace(v, static_cast<int>(b.inputs.size()));
    if (inserted) b.inputs.push_back(v);
    return Operand{Operand::kInput, it->second};
  };
  auto emit = [&](FusedOpcode code, std::array<Operand, 3> operands, int arity) {
    b.code.push_back(operands);
    b.opcodes.push_back(code);
    b.arity.push_back(arity);
    return static_cast<int>(b.code.size()) - 1;
  };
  for (size_t m = 0; m < members.size(); ++m) {
    const Op& op = ops[m];
    const Operand none{Operand::kInput, -1};
    int last;
    if (op.fold) {
      // Variadic: a left fold of the binary opcode.
      Operand acc = operand(op.data[0]);
      last = -1;
      for (size_t i = 1; i < op.data.size(); ++i) {
        last = emit(op.code, {acc, operand(op.data[i]), none}, 2);
        acc = Operand{Operand::kResult, last};
      }
    } else {
      std::array<Operand, 3> operands{none, none, none};
      int k = 0;
      for (int v : op.data) operands[k++] = operand(v);
      for (float p : op.params) operands[k++] = immediate(p);
      last = emit(op.code, operands, k);
    }
    result_of[g.nodes[members[m]].outputs[0]] = last;
  }
  return b;
}

// The `program` attribute of `b`: slots are inputs, then immediates, then results.
std::vector<int64_t> Encode(const Built& b) {
  const int64_t nin = static_cast<int64_t>(b.inputs.size());
  const int64_t nimm = static_cast<int64_t>(b.immediates.size());
  std::vector<int64_t> program;
  for (size_t j = 0; j < b.code.size(); ++j) {
    program.push_back(static_cast<int64_t>(b.opcodes[j]));
    for (int t = 0; t < 3; ++t) {
      if (t >= b.arity[j]) {
        program.push_back(-1);
        continue;
      }
      const Operand& o = b.code[j][t];
      switch (o.kind) {
        case Operand::kInput:
          program.push_back(o.index);
          break;
        case Operand::kImmediate:
          program.push_back(nin + o.index);
          break;
        case Operand::kResult:
          program.push_back(nin + nimm + o.index);
          break;
      }
    }
  }
  return program;
}

// Whether the fused node's shape function gives the root's dtype and shape: at the
// static shapes, or at every sample of the symbolic shape inference. Where a shape
// was not sampled, the rank rule of the caller decides alone.
bool ShapesAgree(const Graph& g, const kernels::OpDef& def, const kernels::Attributes& attrs,
                 const std::vector<int>& inputs, int out) {
  const Value& r = g.values[out];
  if (!r.static_shape() && r.samples.empty()) return true;
  const size_t count = r.samples.empty() ? 1 : r.samples.size();
  for (size_t k = 0; k < count; ++k) {
    std::vector<kernels::ShapeFnArg> args;
    for (int in : inputs) {
      const Value& v = g.values[in];
      kernels::ShapeFnArg a;
      a.present = true;
      a.dtype = v.dtype;
      if (k < v.samples.size()) {
        a.shape = v.samples[k];
      } else if (v.static_shape()) {
        a.shape = v.shape;
      } else {
        return true;
      }
      args.push_back(std::move(a));
    }
    auto info = kernels::InferShapes(def, attrs, args);
    if (!info.ok() || info->size() != 1) return false;
    const Shape& expected = r.samples.empty() ? r.shape : r.samples[k];
    if ((*info)[0].dtype != r.dtype || (*info)[0].shape != expected) return false;
  }
  return true;
}

}  // namespace

FusionStats FuseElementwise(Graph& graph, const kernels::KernelRegistry& registry) {
  FusionStats stats;
  const kernels::OpDef* fused_def = registry.FindOp(kFusedOp);
  if (!fused_def) return stats;
  Graph& g = graph;
  const size_t count = g.nodes.size();
  std::vector<int> producer(g.values.size(), -1);
  std::vector<int> reads(g.values.size(), 0);
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[o] = true;
  std::vector<std::optional<Op>> ops(count);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes[i];
    for (int o : n.outputs) producer[o] = static_cast<int>(i);
    CountReads(n, reads);
    ops[i] = Classify(g, n, registry);
  }

  std::vector<int> group_of(count, -1);  // Node index -> index into `fused`.
  std::vector<Node> fused;
  std::vector<int> fused_root;
  for (size_t root = count; root-- > 0;) {
    if (!ops[root] || group_of[root] >= 0) continue;
    std::set<int> members = {static_cast<int>(root)};
    std::map<int, int> group_reads;  // Value id -> reads by members.
    for (int v : ops[root]->data) ++group_reads[v];
    // Grow towards the inputs until no producer can join.
    for (bool changed = true; changed && members.size() < kMaxGroupNodes;) {
      changed = false;
      for (int m : std::vector<int>(members.begin(), members.end())) {
        for (int v : ops[m]->data) {
          const int p = producer[v];
          if (p < 0 || members.count(p) || group_of[p] >= 0 || !ops[p]) continue;
          if (is_output[v] || group_reads[v] != reads[v]) continue;
          if (members.size() >= kMaxGroupNodes) break;
          members.insert(p);
          for (int w : ops[p]->data) ++group_reads[w];
          changed = true;
        }
      }
    }
    if (members.size() < 2) continue;
    std::vector<int> order(members.begin(), members.end());  // Graph order; root last.
    std::vector<Op> member_ops;
    for (int m : order) member_ops.push_back(*ops[m]);
    const Node& root_node = g.nodes[root];
    const int out = root_node.outputs[0];
    const size_t out_rank = g.values[out].shape.size();
    // The inputs' broadcast must reach the root's rank: an immediate must not be the
    // only operand of the highest rank.
    auto max_rank = [&](const Built& b) {
      size_t r = 0;
      for (int v : b.inputs) r = std::max(r, g.values[v].shape.size());
      return r;
    };
    Built b = BuildProgram(g, order, member_ops, /*constants_as_inputs=*/false);
    if (b.inputs.empty() || max_rank(b) != out_rank) {
      b = BuildProgram(g, order, member_ops, /*constants_as_inputs=*/true);
    }
    if (b.inputs.empty() || max_rank(b) != out_rank) continue;
    if (static_cast<int64_t>(b.inputs.size()) > kernels::kFusedMaxInputs ||
        static_cast<int64_t>(b.inputs.size() + b.immediates.size() + b.code.size()) >
            kernels::kFusedMaxSlots) {
      continue;
    }
    Node node;
    node.op = std::string(kFusedOp);
    for (int m : order) node.name += (node.name.empty() ? "" : "+") + g.nodes[m].name;
    node.attrs.Set("program", Encode(b));
    if (!b.immediates.empty()) node.attrs.Set("immediates", b.immediates);
    // The signature, for kernels that specialise when created (kernels/ops/fused/fused.h).
    node.attrs.Set("num_inputs", static_cast<int64_t>(b.inputs.size()));
    node.attrs.Set("dtype", std::string(DTypeName(g.values[out].dtype)));
    node.inputs = b.inputs;
    node.outputs = {out};
    if (!ShapesAgree(g, *fused_def, node.attrs, node.inputs, out)) continue;
    for (int m : order) group_of[m] = static_cast<int>(fused.size());
    fused.push_back(std::move(node));
    fused_root.push_back(static_cast<int>(root));
    stats.nodes_fused += static_cast<int>(order.size());
  }
  if (fused.empty()) return stats;

  std::vector<Node> nodes;
  for (size_t i = 0; i < count; ++i) {
    const int gi = group_of[i];
    if (gi < 0) {
      nodes.push_back(std::move(g.nodes[i]));
    } else if (fused_root[gi] == static_cast<int>(i)) {
      nodes.push_back(std::move(fused[gi]));
    }
  }
  g.nodes = std::move(nodes);
  stats.fused_kernels = static_cast<int>(fused.size());
  // Constants now held as immediates are no longer read.
  EliminateDeadCode(g);
  return stats;
}

}  // namespace remex::compiler
