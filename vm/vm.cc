#include "vm/vm.h"

#include <chrono>
#include <variant>

namespace remex::vm {
namespace {

// What a register holds.
using Object = std::variant<std::monostate, TensorPtr, Shape>;

bool ShapeMatches(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i] >= 0 && declared[i] != actual[i]) return false;
  }
  return true;
}

uint64_t ElapsedNanos(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace

StatusOr<std::unique_ptr<VirtualMachine>> VirtualMachine::Create(
    std::shared_ptr<const Executable> executable, std::shared_ptr<Allocator> allocator,
    const kernels::KernelRegistry& registry) {
  std::unique_ptr<VirtualMachine> vm(new VirtualMachine(std::move(executable), std::move(allocator)));
  const ExecutableDef& def = vm->executable_->def();
  Device& device = vm->allocator_->device();
  for (const KernelEntry& entry : def.kernels) {
    std::string where = "op '" + entry.op + "'" +
                        (entry.node_name.empty() ? "" : " (node '" + entry.node_name + "')");
    const kernels::OpDef* op = registry.FindOp(entry.op);
    const kernels::KernelFactory* factory = registry.FindKernel(entry.op, device.kind());
    if (!op || !factory) {
      return Unimplemented(where + " has no kernel for device " + device.name());
    }
    auto kernel = (*factory)(entry.attrs);
    if (!kernel.ok()) return kernel.status().WithContext(where);
    vm->op_defs_.push_back(op);
    vm->kernels_.push_back(std::move(kernel).value());
  }
  for (const ConstantDef& c : def.constants) {
    REMEX_ASSIGN_OR_RETURN(TensorPtr t, AllocateTensor(*vm->allocator_, c.dtype, c.shape));
    REMEX_RETURN_IF_ERROR(device.CopyToDevice(t->data(), c.data.data(), c.data.size()));
    vm->copies_.host_to_device_count++;
    vm->copies_.host_to_device_bytes += c.data.size();
    vm->constants_.push_back(std::move(t));
  }
  vm->functions_.resize(def.functions.size());
  for (size_t i = 0; i < def.functions.size(); ++i) {
    vm->functions_[i].bound_outputs.resize(def.functions[i].outputs.size());
  }
  return vm;
}

Status VirtualMachine::SetInputs(int fn, std::vector<TensorPtr> inputs) {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) {
    return NotFound("function index " + std::to_string(fn));
  }
  const FunctionDef& def = executable_->def().functions[fn];
  if (inputs.size() != def.inputs.size()) {
    return InvalidArgument("function '" + def.name + "' takes " + std::to_string(def.inputs.size()) +
                           " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueDesc& want = def.inputs[i];
    const TensorPtr& t = inputs[i];
    if (!t) return InvalidArgument("input '" + want.name + "' is null");
    if (&t->buffer->device() != &allocator_->device()) {
      return InvalidArgument("input '" + want.name + "' lives on another device");
    }
    if (t->dtype != want.dtype) {
      return InvalidArgument("input '" + want.name + "' must be " + std::string(DTypeName(want.dtype)) +
                             ", got " + std::string(DTypeName(t->dtype)));
    }
    if (!ShapeMatches(want.shape, t->shape)) {
      return InvalidArgument("input '" + want.name + "' must have shape " +
                             ShapeToString(want.shape) + ", got " + ShapeToString(t->shape));
    }
  }
  functions_[fn].inputs = std::move(inputs);
  functions_[fn].inputs_set = true;
  return OkStatus();
}

Status VirtualMachine::SetOutput(int fn, int index, TensorPtr tensor) {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) {
    return NotFound("function index " + std::to_string(fn));
  }
  const FunctionDef& def = executable_->def().functions[fn];
  if (index < 0 || static_cast<size_t>(index) >= def.outputs.size()) {
    return InvalidArgument("function '" + def.name + "' has no output " + std::to_string(index));
  }
  if (tensor) {
    const ValueDesc& want = def.outputs[index];
    if (&tensor->buffer->device() != &allocator_->device()) {
      return InvalidArgument("buffer for output '" + want.name + "' lives on another device");
    }
    if (tensor->dtype != want.dtype || !ShapeMatches(want.shape, tensor->shape)) {
      return InvalidArgument("buffer for output '" + want.name + "' is " +
                             std::string(DTypeName(tensor->dtype)) + " " + ShapeToString(tensor->shape) +
                             ", output is " + std::string(DTypeName(want.dtype)) + " " +
                             ShapeToString(want.shape));
    }
  }
  functions_[fn].bound_outputs[index] = std::move(tensor);
  return OkStatus();
}

StatusOr<std::vector<TensorPtr>> VirtualMachine::Invoke(int fn, Profiler* profiler) {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) {
    return NotFound("function index " + std::to_string(fn));
  }
  if (!functions_[fn].inputs_set) {
    return FailedPrecondition("inputs of function '" + executable_->def().functions[fn].name +
                              "' are not set");
  }
  std::vector<TensorPtr> outputs;
  if (profiler) {
    profiler->kernels.resize(executable_->def().kernels.size());
    auto start = std::chrono::steady_clock::now();
    Status st = Run(fn, outputs, profiler);
    profiler->total_nanos += ElapsedNanos(start);
    profiler->invokes++;
    REMEX_RETURN_IF_ERROR(st);
  } else {
    REMEX_RETURN_IF_ERROR(Run(fn, outputs, nullptr));
  }
  ++invokes_;
  return outputs;
}

Status VirtualMachine::Run(int fn_index, std::vector<TensorPtr>& outputs, Profiler* profiler) {
  const FunctionDef& fn = executable_->def().functions[fn_index];
  FunctionState& state = functions_[fn_index];
  Device& device = allocator_->device();
  std::vector<Object> regs(fn.num_registers);
  for (size_t i = 0; i < state.inputs.size(); ++i) regs[i] = state.inputs[i];

  std::vector<kernels::TensorRef> in_refs, out_refs;
  std::vector<kernels::ShapeFnArg> args;
  std::vector<std::vector<std::byte>> host_copies;

  // Profiling state, used only with a profiler.
  std::chrono::steady_clock::time_point start;
  CopyStats copies_before;

  for (size_t pc = 0; pc < fn.code.size(); ++pc) {
    const Instruction& inst = fn.code[pc];
    const auto& s = inst.scalars;
    auto fail = [&](const Status& status) {
      std::string where = "function '" + fn.name + "', instruction " + std::to_string(pc) + " (" +
                          std::string(OpcodeName(inst.op));
      if (inst.op == Opcode::kInvokeKernel || inst.op == Opcode::kInvokeShapeFunc) {
        const KernelEntry& k = executable_->def().kernels[s[0]];
        where += " " + k.op + (k.node_name.empty() ? "" : " node '" + k.node_name + "'");
      }
      return status.WithContext(where + ")");
    };
    auto tensor_at = [&](int64_t r) -> const TensorPtr* {
      return std::get_if<TensorPtr>(&regs[r]);
    };
    auto not_tensor = [&](int64_t r) {
      return fail(Internal("register %" + std::to_string(r) + " holds no tensor"));
    };
    if (profiler) {
      copies_before = copies_;
      start = std::chrono::steady_clock::now();
    }

    switch (inst.op) {
      case Opcode::kMove:
        regs[s[0]] = regs[s[1]];
        break;
      case Opcode::kKillRegister:
        regs[s[0]] = std::monostate{};
        break;
      case Opcode::kLoadConst:
        regs[s[0]] = constants_[s[1]];
        break;
      case Opcode::kAllocTensor: {
        auto t = AllocateTensor(*allocator_, static_cast<DType>(s[1]), inst.lists[0]);
        if (!t.ok()) return fail(t.status());
        regs[s[0]] = std::move(t).value();
        break;
      }
      case Opcode::kAllocTensorReg: {
        const Shape* shape = std::get_if<Shape>(&regs[s[2]]);
        if (!shape) return fail(Internal("register %" + std::to_string(s[2]) + " holds no shape"));
        auto t = AllocateTensor(*allocator_, static_cast<DType>(s[1]), *shape);
        if (!t.ok()) return fail(t.status());
        regs[s[0]] = std::move(t).value();
        break;
      }
      case Opcode::kAllocOutput: {
        const Shape* shape = &inst.lists[0];
        if (s[3] >= 0) {
          shape = std::get_if<Shape>(&regs[s[3]]);
          if (!shape) return fail(Internal("register %" + std::to_string(s[3]) + " holds no shape"));
        }
        DType dtype = static_cast<DType>(s[2]);
        const TensorPtr& bound = state.bound_outputs[s[1]];
        if (bound) {
          if (bound->dtype != dtype || bound->shape != *shape) {
            return fail(InvalidArgument(
                "buffer bound to output '" + fn.outputs[s[1]].name + "' is " +
                std::string(DTypeName(bound->dtype)) + " " + ShapeToString(bound->shape) +
                " but this call produces " + std::string(DTypeName(dtype)) + " " + ShapeToString(*shape)));
          }
          regs[s[0]] = bound;
        } else {
          auto t = AllocateTensor(*allocator_, dtype, *shape);
          if (!t.ok()) return fail(t.status());
          regs[s[0]] = std::move(t).value();
        }
        break;
      }
      case Opcode::kInvokeShapeFunc: {
        const kernels::OpDef& op = *op_defs_[s[0]];
        const KernelEntry& entry = executable_->def().kernels[s[0]];
        const auto& ins = inst.lists[0];
        args.assign(ins.size(), {});
        host_copies.clear();
        host_copies.reserve(ins.size());
        for (size_t i = 0; i < ins.size(); ++i) {
          if (ins[i] < 0) continue;
          const TensorPtr* t = tensor_at(ins[i]);
          if (!t) return not_tensor(ins[i]);
          args[i].present = true;
          args[i].dtype = (*t)->dtype;
          args[i].shape = (*t)->shape;
          if (op.DepOf(i) == kernels::ShapeDep::kData) {
            // Only data-dependent inputs cross to the host.
            auto& copy = host_copies.emplace_back((*t)->nbytes());
            Status st = device.CopyToHost(copy.data(), (*t)->data(), copy.size());
            if (!st.ok()) return fail(st);
            copies_.device_to_host_count++;
            copies_.device_to_host_bytes += copy.size();
            args[i].data = copy.data();
          }
        }
        auto infos = kernels::InferShapes(op, entry.attrs, args);
        if (!infos.ok()) return fail(infos.status());
        if (infos->size() < inst.lists[1].size()) {
          return fail(Internal("shape function returned too few outputs"));
        }
        for (size_t i = 0; i < inst.lists[1].size(); ++i) {
          regs[inst.lists[1][i]] = std::move((*infos)[i].shape);
        }
        break;
      }
      case Opcode::kInvokeKernel: {
        const auto& ins = inst.lists[0];
        const auto& outs = inst.lists[1];
        in_refs.assign(ins.size(), {});
        out_refs.assign(outs.size(), {});
        for (size_t i = 0; i < ins.size(); ++i) {
          if (ins[i] < 0) continue;
          const TensorPtr* t = tensor_at(ins[i]);
          if (!t) return not_tensor(ins[i]);
          in_refs[i] = (*t)->Ref();
        }
        for (size_t i = 0; i < outs.size(); ++i) {
          const TensorPtr* t = tensor_at(outs[i]);
          if (!t) return not_tensor(outs[i]);
          out_refs[i] = (*t)->Ref();
        }
        Status st = kernels_[s[0]]->Compute(in_refs, out_refs);
        if (!st.ok()) return fail(st);
        break;
      }
      case Opcode::kRet: {
        if (profiler) profiler->instructions[static_cast<int>(inst.op)].Add(ElapsedNanos(start), 0, 0);
        outputs.clear();
        for (int64_t r : inst.lists[0]) {
          const TensorPtr* t = tensor_at(r);
          if (!t) return not_tensor(r);
          outputs.push_back(*t);
        }
        return OkStatus();
      }
      case Opcode::kCount:
        return fail(Internal("invalid opcode"));
    }
    if (profiler) {
      uint64_t nanos = ElapsedNanos(start);
      uint64_t n_copies = copies_.host_to_device_count + copies_.device_to_host_count -
                          copies_before.host_to_device_count - copies_before.device_to_host_count;
      uint64_t n_bytes = copies_.host_to_device_bytes + copies_.device_to_host_bytes -
                         copies_before.host_to_device_bytes - copies_before.device_to_host_bytes;
      profiler->instructions[static_cast<int>(inst.op)].Add(nanos, n_copies, n_bytes);
      if (inst.op == Opcode::kInvokeKernel) profiler->kernels[s[0]].Add(nanos, n_copies, n_bytes);
    }
  }
  return Internal("function '" + fn.name + "' fell off its end");
}

}  // namespace remex::vm
