#include "host_client/compiler.h"

#include <algorithm>
#include <set>

#include "host_client/onnx_frontend.h"

namespace remex::compiler {
namespace {

std::string Where(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

// Output dtypes of a node when its shapes cannot be inferred at compile time.
DType FallbackDType(const Graph& g, const Node& n, size_t output) {
  if (n.op == "Shape") return DType::kInt64;
  if (n.op == "MaxPool" && output == 1) return DType::kInt64;
  if (n.op == "Cast") {
    auto to = n.attrs.Int("to");
    if (to.ok()) {
      auto dtype = DTypeFromOnnx(static_cast<int32_t>(*to));
      if (dtype) return *dtype;
    }
  }
  return n.inputs.empty() || n.inputs[0] < 0 ? DType::kUndefined : g.values[n.inputs[0]].dtype;
}

}  // namespace

namespace {

// Evaluates `node` (all inputs constant, outputs static) with its CPU kernel; its
// outputs become constants.
Status FoldNode(Graph& graph, const Node& node, const kernels::KernelFactory& factory) {
  auto kernel = factory(node.attrs);
  if (!kernel.ok()) return kernel.status().WithContext(Where(node));
  std::vector<kernels::TensorRef> ins(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] < 0) continue;
    const Value& v = graph.values[node.inputs[i]];
    if (!v.constant) {  // a shape-only input: the kernel reads its shape
      ins[i] = {nullptr, v.dtype, v.shape};
      continue;
    }
    auto& c = graph.constants[*v.constant];
    ins[i] = {c.data.data(), c.dtype, c.shape};
  }
  std::vector<vm::ConstantDef> results(node.outputs.size());
  std::vector<kernels::TensorRef> outs(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const Value& v = graph.values[node.outputs[i]];
    results[i].dtype = v.dtype;
    results[i].shape = v.shape;
    results[i].data.resize(static_cast<size_t>(*NumElements(v.shape)) * DTypeSize(v.dtype));
    outs[i] = {results[i].data.data(), v.dtype, v.shape};
  }
  Status st = (*kernel)->Compute(ins, outs);
  if (!st.ok()) return st.WithContext("folding " + Where(node));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    graph.values[node.outputs[i]].constant = graph.constants.size();
    graph.constants.push_back(std::move(results[i]));
  }
  return OkStatus();
}

}  // namespace

StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants) {
  int folded = 0;
  std::vector<Node> kept;
  std::vector<kernels::ShapeFnArg> args;
  for (Node& node : graph.nodes) {
    const kernels::OpDef* op = registry.FindOp(node.op);
    if (!op) return Unimplemented("unsupported op '" + node.op + "' in " + Where(node));
    args.assign(node.inputs.size(), {});
    bool computable = true;
    bool all_constant = !node.inputs.empty();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const Value& v = graph.values[node.inputs[i]];
      args[i].present = true;
      args[i].dtype = v.dtype;
      args[i].shape = v.shape;
      if (!v.static_shape()) computable = false;
      if (!v.constant && !op->reads_shapes_only) all_constant = false;
      if (op->DepOf(i) == kernels::ShapeDep::kData) {
        if (v.constant) {
          args[i].data = graph.constants[*v.constant].data.data();
        } else {
          computable = false;
        }
      }
    }
    if (computable) {
      auto infos = kernels::InferShapes(*op, node.attrs, args);
      if (!infos.ok()) return infos.status().WithContext(Where(node));
      if (infos->size() < node.outputs.size()) {
        return Internal(Where(node) + ": shape function returned too few outputs");
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        Value& out = graph.values[node.outputs[i]];
        out.dtype = (*infos)[i].dtype;
        out.shape = (*infos)[i].shape;
        out.rank_known = true;
      }
    } else {
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        Value& out = graph.values[node.outputs[i]];
        out.dtype = FallbackDType(graph, node, i);
        // A graph output keeps the rank the model declares for it; others are unknown.
        if (!out.rank_known) out.shape.clear();
      }
    }
    const kernels::KernelFactory* factory = registry.FindKernel(node.op, kernels::DeviceKind::kCpu);
    if (fold_constants && computable && all_constant && factory) {
      REMEX_RETURN_IF_ERROR(FoldNode(graph, node, *factory));
      ++folded;
      continue;
    }
    kept.push_back(std::move(node));
  }
  graph.nodes = std::move(kept);
  return folded;
}

int EliminateDeadCode(Graph& graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (int out : graph.outputs) live[out] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    bool needed = std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return live[v]; });
    if (!needed) continue;
    keep[i] = true;
    for (int in : n.inputs) if (in >= 0) live[in] = true;
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

class CodeGenerator {
 public:
  CodeGenerator(const Graph& g, const kernels::KernelRegistry& registry) : g_(g), registry_(registry) {}

  StatusOr<vm::ExecutableDef> Run() {
    def_.producer = "remex compiler";
    def_.constants = g_.constants;
    vm::FunctionDef& fn = fn_;
    fn.name = "main";
    for (int in : g_.inputs) {
      const Value& v = g_.values[in];
      if (!v.rank_known) {
        return Unimplemented("the model does not give the rank of input '" + v.name +
                             "': give its shape (--shape " + v.name + "=DIMS)");
      }
      fn.inputs.push_back({v.name, v.dtype, v.shape});
      reg_[in] = next_reg_++;
    }
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      const Value& v = g_.values[g_.outputs[k]];
      if (!v.rank_known) {
        return Unimplemented("the rank of output '" + v.name + "' is not known at compile time");
      }
      if (DTypeSize(v.dtype) == 0) return Internal("output '" + v.name + "' has no dtype");
      fn.outputs.push_back({v.name, v.dtype, v.shape});
      // The first position of a value among the outputs is produced in place.
      if (!output_index_.count(g_.outputs[k])) output_index_[g_.outputs[k]] = static_cast<int>(k);
    }
    ComputeLastUses();
    for (size_t i = 0; i < g_.nodes.size(); ++i) REMEX_RETURN_IF_ERROR(EmitNode(g_.nodes[i], i));
    // Outputs that are not produced in place by a node (inputs, constants, repeats)
    // are copied into their own output buffer.
    std::vector<int64_t> ret;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      int v = g_.outputs[k];
      bool in_place = output_index_[v] == static_cast<int>(k) && produced_.count(v);
      if (in_place) {
        ret.push_back(reg_[v]);
        continue;
      }
      REMEX_ASSIGN_OR_RETURN(int64_t src, Use(v));
      REMEX_ASSIGN_OR_RETURN(int64_t dst, EmitCopyToOutput(v, static_cast<int>(k), src));
      ret.push_back(dst);
    }
    Emit(vm::Opcode::kRet, {}, {ret});
    fn.num_registers = next_reg_;
    def_.functions.push_back(std::move(fn));
    return std::move(def_);
  }

 private:
  void Emit(vm::Opcode op, std::vector<int64_t> scalars, std::vector<std::vector<int64_t>> lists) {
    fn_.code.push_back({op, std::move(scalars), std::move(lists)});
  }

  void ComputeLastUses() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (int in : g_.nodes[i].inputs) if (in >= 0) last_use_[in] = i;
    }
  }

  // Register of value `v`, loading a constant on first use.
  StatusOr<int64_t> Use(int v) {
    auto it = reg_.find(v);
    if (it != reg_.end()) return it->second;
    const Value& value = g_.values[v];
    if (!value.constant) return Internal("value '" + value.name + "' is used before it is defined");
    int64_t r = next_reg_++;
    Emit(vm::Opcode::kLoadConst, {r, static_cast<int64_t>(*value.constant)}, {});
    reg_[v] = r;
    return r;
  }

  int64_t KernelIndex(const Node& node) {
    vm::KernelEntry entry;
    entry.op = node.op;
    entry.attrs = node.attrs;
    entry.num_inputs = static_cast<int32_t>(node.inputs.size());
    entry.num_outputs = static_cast<int32_t>(node.outputs.size());
    entry.node_name = node.name;
    def_.kernels.push_back(std::move(entry));
    return static_cast<int64_t>(def_.kernels.size() - 1);
  }

  // Copies value `v` (an input, a constant or an output produced elsewhere) into the
  // buffer of output `k` with an Identity kernel; a dynamic shape is taken from the
  // source at run time.
  StatusOr<int64_t> EmitCopyToOutput(int v, int k, int64_t src) {
    const Value& value = g_.values[v];
    vm::KernelEntry entry{"Identity", {}, 1, 1, "copy to output '" + value.name + "'"};
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

  Status EmitNode(const Node& node, size_t index) {
    if (!registry_.FindOp(node.op)) return Unimplemented("unsupported op '" + node.op + "' in " + Where(node));
    std::vector<int64_t> ins;
    for (int in : node.inputs) {
      if (in < 0) {
        ins.push_back(-1);
        continue;
      }
      REMEX_ASSIGN_OR_RETURN(int64_t r, Use(in));
      ins.push_back(r);
    }
    int64_t kernel = KernelIndex(node);
    bool all_static = std::all_of(node.outputs.begin(), node.outputs.end(),
                                  [&](int v) { return g_.values[v].static_shape(); });
    std::vector<int64_t> shape_regs;
    if (!all_static) {
      for (size_t i = 0; i < node.outputs.size(); ++i) shape_regs.push_back(next_reg_++);
      Emit(vm::Opcode::kInvokeShapeFunc, {kernel}, {ins, shape_regs});
    }
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
      if (out != output_index_.end()) {
        Emit(vm::Opcode::kAllocOutput,
             {dst, out->second, dtype, all_static ? -1 : shape_regs[i]},
             {all_static ? value.shape : Shape{}});
      } else if (all_static) {
        Emit(vm::Opcode::kAllocTensor, {dst, dtype}, {value.shape});
      } else {
        Emit(vm::Opcode::kAllocTensorReg, {dst, dtype, shape_regs[i]}, {});
      }
      reg_[v] = dst;
      produced_.insert(v);
      outs.push_back(dst);
    }
    Emit(vm::Opcode::kInvokeKernel, {kernel}, {ins, outs});
    for (int64_t r : shape_regs) Emit(vm::Opcode::kKillRegister, {r}, {});
    // Release intermediates whose last reader this node was.
    std::set<int> released;
    for (int in : node.inputs) {
      if (in < 0 || released.count(in) || last_use_[in] != index || output_index_.count(in)) continue;
      released.insert(in);
      Emit(vm::Opcode::kKillRegister, {reg_[in]}, {});
    }
    for (int v : node.outputs) {
      if (!last_use_.count(v) && !output_index_.count(v)) Emit(vm::Opcode::kKillRegister, {reg_[v]}, {});
    }
    return OkStatus();
  }

  const Graph& g_;
  const kernels::KernelRegistry& registry_;
  vm::ExecutableDef def_;
  vm::FunctionDef fn_;
  std::map<int, int64_t> reg_;
  std::map<int, size_t> last_use_;
  std::map<int, int> output_index_;
  std::set<int> produced_;
  int64_t next_reg_ = 0;
};

}  // namespace

StatusOr<vm::ExecutableDef> Codegen(const Graph& graph, const kernels::KernelRegistry& registry) {
  return CodeGenerator(graph, registry).Run();
}

StatusOr<vm::ExecutableDef> CompileGraph(Graph graph, const kernels::KernelRegistry& registry,
                                         const CompileOptions& options, CompileStats* stats) {
  CompileStats local;
  local.nodes_in = static_cast<int>(graph.nodes.size());
  REMEX_ASSIGN_OR_RETURN(local.nodes_folded, InferShapes(graph, registry, options.fold_constants));
  local.nodes_removed = EliminateDeadCode(graph);
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef def, Codegen(graph, registry));
  local.kernels = static_cast<int>(def.kernels.size());
  for (const auto& inst : def.functions[0].code) {
    if (inst.op == vm::Opcode::kInvokeShapeFunc) local.runtime_shape_functions++;
  }
  for (const auto& c : def.constants) local.constant_bytes += c.data.size();
  if (stats) *stats = local;
  return def;
}

StatusOr<vm::ExecutableDef> CompileOnnxFile(const std::string& path,
                                            const kernels::KernelRegistry& registry,
                                            const CompileOptions& options, CompileStats* stats) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(path, registry, options.input_shapes));
  return CompileGraph(std::move(graph), registry, options, stats);
}

}  // namespace remex::compiler
