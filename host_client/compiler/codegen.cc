// Lowering of the graph to VM bytecode (see codegen.h).
#include "host_client/compiler/codegen.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace remex::compiler {
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
      const bool tensor = v.kind == vm::ValueKind::kTensor;
      if (!v.rank_known && tensor) {
        return Unimplemented("the model does not give the rank of input '" + v.name +
                             "': give its shape (--shape " + v.name + "=DIMS)");
      }
      if (DTypeSize(v.dtype) == 0) return Unimplemented("the model does not give the dtype of input '" + v.name + "'");
      vm::ValueDesc desc{v.name, v.dtype, v.rank_known ? v.shape : Shape{}, {}, v.kind, v.rank_known};
      if (tensor && !v.static_shape()) {
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
      const bool tensor = v.kind == vm::ValueKind::kTensor;
      if (!v.rank_known && tensor) {
        return Unimplemented("the rank of output '" + v.name + "' is not known at compile time");
      }
      if (DTypeSize(v.dtype) == 0) return Internal("output '" + v.name + "' has no dtype");
      vm::ValueDesc desc{v.name, v.dtype, v.rank_known ? v.shape : Shape{}, {}, v.kind, v.rank_known};
      if (tensor && !v.static_shape() && v.dims.size() == v.shape.size()) desc.dims = v.dims;
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
      if (g_.values[v].kind != vm::ValueKind::kTensor) {
        // A sequence or optional is returned as it is: the VM copies its elements.
        REMEX_ASSIGN_OR_RETURN(int64_t r, Use(v, /*host=*/false));
        ret.push_back(r);
        continue;
      }
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
    // EmitNode has found the node's entry.
    entry.version = registry_.FindOp(node.op, node.version)->since_version;
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
      } else if (node.values_op) {
        REMEX_RETURN_IF_ERROR(EmitValuesOp(node));
      } else {
        REMEX_RETURN_IF_ERROR(EmitNode(node, [&](int v) {
          return last.count(v) && last[v] == i && !keep.count(v) && !output_index_.count(v);
        }));
      }
      // Release values defined in this region whose last reader this node was.
      std::vector<int> reads;
      CollectReads(node, reads);
      std::set<int> released;
      for (int in : reads) {
        if (released.count(in) || last[in] != i || output_index_.count(in) || keep.count(in)) continue;
        if (overwritten_.count(in)) continue;  // its register is the node's output now
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

  // The axis of a Concat the VM grows in place (ConcatAppend), -1 for none: a device
  // Concat at the top level whose output is a graph output and whose first input a
  // graph input of a length along the axis known only at run time (a decoder step's
  // `present = Concat(past, new)` along the sequence axis, the present fed back as the
  // next step's past).
  int64_t AppendAxis(const Node& node) const {
    if (node.op != "Concat" || node.host || depth_ != 0 || node.outputs.size() != 1 ||
        node.inputs.size() < 2 || !node.regions.empty() || !output_index_.count(node.outputs[0])) {
      return -1;
    }
    for (int in : node.inputs) {
      if (in < 0 || g_.values[in].kind != vm::ValueKind::kTensor) return -1;
    }
    const Value& past = g_.values[node.inputs[0]];
    if (!past.rank_known || past.constant || past.host ||
        std::find(g_.inputs.begin(), g_.inputs.end(), node.inputs[0]) == g_.inputs.end()) {
      return -1;
    }
    auto axis = node.attrs.Int("axis");
    if (!axis.ok()) return -1;
    const int64_t rank = static_cast<int64_t>(past.shape.size());
    const int64_t a = *axis < 0 ? *axis + rank : *axis;
    if (a < 0 || a >= rank || past.shape[static_cast<size_t>(a)] >= 0) return -1;
    return a;
  }

  // `dies_here(v)`: the node is value v's last reader, and v is no region's or graph's
  // output.
  template <typename DiesHere>
  Status EmitNode(const Node& node, DiesHere dies_here) {
    const kernels::OpDef* op = registry_.FindOp(node.op, node.version);
    if (!op) return Unimplemented("unsupported op '" + node.op + "' in " + Where(node));
    if (const int64_t axis = AppendAxis(node); axis >= 0) {
      std::vector<int64_t> ins;
      for (int in : node.inputs) {
        REMEX_ASSIGN_OR_RETURN(int64_t r, Use(in, /*host=*/false));
        ins.push_back(r);
      }
      const int v = node.outputs[0];
      const int64_t dst = next_reg_++;
      Emit(vm::Opcode::kConcatAppend, {dst, output_index_.at(v), axis}, {ins});
      produced_.insert(v);
      Define(v, dst);
      return OkStatus();
    }
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
    const int overwritten = OverwrittenInput(node, *op, ins, all_static, dies_here);
    std::vector<int64_t> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int v = node.outputs[i];
      const Value& value = g_.values[v];
      if (DTypeSize(value.dtype) == 0) {
        return Internal("cannot determine the dtype of '" + value.name + "' in " + Where(node));
      }
      if (i == 0 && overwritten >= 0) {
        // Output 0 takes over the input's buffer (OpTraits::output_overwrites_input).
        const int64_t dst = reg_[overwritten];
        overwritten_.insert(overwritten);
        allocated_.insert(v);
        Define(v, dst);
        outs.push_back(dst);
        continue;
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
        allocated_.insert(v);
      } else {
        Emit(vm::Opcode::kAllocTensorReg, {dst, dtype, shape_regs[i], space}, {});
        bound_bytes_.back() = BoundBytes(value);
        allocated_.insert(v);
      }
      Define(v, dst);
      outs.push_back(dst);
    }
    Emit(vm::Opcode::kInvokeKernel, {kernel}, {ins, outs});
    for (int64_t r : shape_regs) Emit(vm::Opcode::kKillRegister, {r}, {});
    return OkStatus();
  }

  // The value whose buffer the node's output 0 may take over (OpTraits::
  // output_overwrites_input), or -1: an input its kernel node allocated at this region
  // depth (never a graph input, a constant, a copy between memory spaces, or a loop's
  // or branch's result), read once by the node and never after it, with output 0's
  // dtype and static shape, on the device, output 0 being no graph output.
  template <typename DiesHere>
  int OverwrittenInput(const Node& node, const kernels::OpDef& op, const std::vector<int64_t>& ins, bool all_static,
                       DiesHere dies_here) {
    const int k = op.traits.output_overwrites_input;
    if (k < 0 || static_cast<size_t>(k) >= node.inputs.size() || node.outputs.empty() || !all_static || node.host) {
      return -1;
    }
    const int in = node.inputs[k];
    if (in < 0 || !allocated_.count(in) || !dies_here(in) || output_index_.count(node.outputs[0])) return -1;
    if (!defined_here_.count(in) || defined_here_[in] != depth_ || ins[k] != reg_[in]) return -1;
    if (std::count(node.inputs.begin(), node.inputs.end(), in) != 1) return -1;
    const Value& z = g_.values[in];
    const Value& y = g_.values[node.outputs[0]];
    if (z.host || z.kind != vm::ValueKind::kTensor || z.dtype != y.dtype || !z.static_shape() || z.shape != y.shape) {
      return -1;
    }
    return in;
  }

  // A sequence or optional op (Node::values_op) as the VM's Seq/Opt instructions.
  Status EmitValuesOp(const Node& node) {
    const std::string& op = node.op;
    auto in = [&](size_t i) { return Use(node.inputs[i], /*host=*/false); };
    // A position: read by the VM wherever it lives (a constant is loaded in host memory).
    auto position = [&](size_t i) -> StatusOr<int64_t> {
      if (i >= node.inputs.size() || node.inputs[i] < 0) return -1;
      const Value& p = g_.values[node.inputs[i]];
      return Use(node.inputs[i], p.constant ? true : p.host);
    };
    const int64_t dst = next_reg_++;
    if (op == "SequenceConstruct") {
      std::vector<int64_t> elements;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        REMEX_ASSIGN_OR_RETURN(int64_t r, in(i));
        elements.push_back(r);
      }
      Emit(vm::Opcode::kSeqConstruct, {dst}, {elements});
    } else if (op == "SequenceEmpty") {
      Emit(vm::Opcode::kListNew, {dst}, {});
    } else if (op == "SequenceInsert") {
      REMEX_ASSIGN_OR_RETURN(int64_t seq, in(0));
      REMEX_ASSIGN_OR_RETURN(int64_t t, in(1));
      REMEX_ASSIGN_OR_RETURN(int64_t pos, position(2));
      Emit(vm::Opcode::kSeqInsert, {dst, seq, t, pos}, {});
    } else if (op == "SequenceAt" || op == "SequenceErase") {
      REMEX_ASSIGN_OR_RETURN(int64_t seq, in(0));
      REMEX_ASSIGN_OR_RETURN(int64_t pos, position(1));
      if (op == "SequenceAt") Emit(vm::Opcode::kSeqAt, {dst, seq, pos}, {});
      else Emit(vm::Opcode::kSeqErase, {dst, seq, pos}, {});
    } else if (op == "SequenceLength" || op == "OptionalHasElement" || op == "OptionalGetElement") {
      REMEX_ASSIGN_OR_RETURN(int64_t r, in(0));
      const vm::Opcode code = op == "SequenceLength"       ? vm::Opcode::kSeqLength
                              : op == "OptionalHasElement" ? vm::Opcode::kOptHas
                                                           : vm::Opcode::kOptGet;
      Emit(code, {dst, r}, {});
    } else if (op == "Optional" && (node.inputs.empty() || node.inputs[0] < 0)) {
      Emit(vm::Opcode::kOptNone, {dst}, {});
    } else if (op == "Optional" || op == "Identity") {
      REMEX_ASSIGN_OR_RETURN(int64_t r, in(0));
      Emit(vm::Opcode::kMove, {dst, r}, {});
    } else {
      return Internal("no VM instruction for " + Where(node));
    }
    Define(node.outputs[0], dst);
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
  std::set<int> allocated_;    // values whose buffer a kernel node's AllocTensor made
  std::set<int> overwritten_;  // values whose buffer a node's output took over
  std::vector<std::map<std::pair<int, bool>, int64_t>> scopes_;
  std::map<int, int> output_index_;
  std::set<int> produced_;
  int64_t next_reg_ = 0;
  int depth_ = 0;
  int copies_to_host_ = 0;
  std::vector<int64_t> bound_bytes_;
};

}  // namespace

StatusOr<CodegenResult> GenerateCode(const Graph& graph, const kernels::KernelRegistry& registry) {
  CodeGenerator gen(graph, registry);
  CodegenResult result;
  REMEX_ASSIGN_OR_RETURN(result.executable, gen.Run());
  result.bound_bytes = gen.bound_bytes();
  result.copies_to_host = gen.copies_to_host();
  return result;
}

StatusOr<vm::ExecutableDef> Codegen(const Graph& graph, const kernels::KernelRegistry& registry) {
  REMEX_ASSIGN_OR_RETURN(CodegenResult result, GenerateCode(graph, registry));
  return std::move(result.executable);
}

}  // namespace remex::compiler
