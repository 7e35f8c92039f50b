#include "vm/vm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <variant>

#include "kernels/prepack.h"

namespace remex::vm {
namespace {

// FunctionDef::compute_threads while a function runs on this thread: OpenMP's team size
// for the CPU kernels it calls, lowered (never raised) and restored when it returns; a
// TailCall's callee sets its own inside its caller's.
class FunctionThreads {
 public:
  explicit FunctionThreads(uint32_t threads) : saved_(threads ? kernels::CpuComputeThreads() : 0) {
    if (threads && static_cast<int>(threads) < saved_) kernels::SetCpuComputeThreads(static_cast<int>(threads));
  }
  ~FunctionThreads() {
    if (saved_ && kernels::CpuComputeThreads() != saved_) kernels::SetCpuComputeThreads(saved_);
  }
  FunctionThreads(const FunctionThreads&) = delete;
  FunctionThreads& operator=(const FunctionThreads&) = delete;

 private:
  const int saved_;
};

// What a register holds.
using TensorList = std::shared_ptr<std::vector<TensorPtr>>;
// An optional holding nothing (std::monostate is a register holding nothing at all).
struct NoValue {};
using Object = std::variant<std::monostate, TensorPtr, Shape, TensorList, NoValue>;

// The register object of a function input.
Object ObjectOf(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kTensor: return v.tensor;
    // A fresh list per call: the function may append to its copy.
    case Value::Kind::kSequence: return std::make_shared<std::vector<TensorPtr>>(v.elements);
    case Value::Kind::kNone: return NoValue{};
  }
  return std::monostate{};
}

bool ShapeMatches(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i] >= 0 && declared[i] != actual[i]) return false;
  }
  return true;
}

// Gives the kernels that prepare constant inputs at the load (kernels/prepack.h) the
// constants their InvokeKernel instructions read; after the constants are loaded.
void PrepackConstants(const ExecutableDef& def, const std::vector<std::unique_ptr<kernels::OpKernel>>& kernels,
                      const std::vector<TensorPtr>& constants, const std::vector<TensorPtr>& host_constants) {
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> done;  // kernel, input, constant, memory
  for (const FunctionDef& fn : def.functions) {
    // Per register, the constant (index, memory space) a LoadConst last wrote to it
    // in instruction order; any other write forgets it. Jumps are ignored: the pairs
    // found are hints (kernels/prepack.h). Operands are bounded here too: a VM may run
    // an executable the verifier has not seen (tests), which then fails when it runs.
    std::vector<std::pair<int64_t, int64_t>> loaded(static_cast<size_t>(std::max(fn.num_registers, 0)), {-1, 0});
    auto reg = [&](int64_t r) { return r >= 0 && static_cast<size_t>(r) < loaded.size(); };
    for (const Instruction& inst : fn.code) {
      if (inst.op == Opcode::kLoadConst && inst.scalars.size() == 3 && reg(inst.scalars[0])) {
        const int64_t c = inst.scalars[1];
        const bool known = c >= 0 && static_cast<size_t>(c) < constants.size() && c < int64_t(host_constants.size());
        loaded[inst.scalars[0]] = {known ? c : -1, inst.scalars[2]};
        continue;
      }
      if (inst.op == Opcode::kInvokeKernel && !inst.scalars.empty() && !inst.lists.empty() &&
          inst.scalars[0] >= 0 && static_cast<size_t>(inst.scalars[0]) < kernels.size()) {
        const int64_t k = inst.scalars[0];
        auto* prepacker = dynamic_cast<kernels::ConstantPrepacker*>(kernels[k].get());
        const auto& ins = inst.lists[0];
        for (size_t i = 0; prepacker && i < ins.size(); ++i) {
          if (!reg(ins[i]) || loaded[ins[i]].first < 0) continue;
          const auto [c, memory] = loaded[ins[i]];
          const TensorPtr& t = memory == 1 ? host_constants[c] : constants[c];
          if (!t || !done.emplace(k, static_cast<int64_t>(i), c, memory).second) continue;
          prepacker->Prepack(i, t->Ref());
        }
      }
      VisitOperands(inst, [&](char kind, int64_t r) {
        if (kind == 'd' && reg(r)) loaded[r] = {-1, 0};
      });
    }
  }
}

uint64_t ElapsedNanos(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// The VM's host-memory allocator (host tensors: shape arithmetic, data-dependent
// inputs, host kernels' outputs), bounded by the quota over `device_allocator` (a
// session's) where there is one: an executable's host tensors can take no more host
// memory than its session may take on the device, RESOURCE_EXHAUSTED past it.
std::shared_ptr<Allocator> HostAllocatorFor(const Allocator& device_allocator) {
  std::shared_ptr<Allocator> host = Allocator::Create(HostDevice(), 64ull << 20);
  const uint64_t quota = device_allocator.bounding_quota_bytes();
  return quota ? Allocator::CreateWithQuota(std::move(host), quota, "host tensors") : host;
}

}  // namespace

StatusOr<std::unique_ptr<VirtualMachine>> VirtualMachine::Create(
    std::shared_ptr<const Executable> executable, std::shared_ptr<Allocator> allocator,
    const kernels::KernelRegistry& registry) {
  std::unique_ptr<VirtualMachine> vm(new VirtualMachine(std::move(executable), std::move(allocator)));
  vm->host_allocator_ = HostAllocatorFor(*vm->allocator_);
  const ExecutableDef& def = vm->executable_->def();
  Device& device = vm->allocator_->device();
  REMEX_RETURN_IF_ERROR(vm->CreateKernels(registry));
  // Each constant goes to the memory spaces its LoadConst instructions name.
  std::vector<bool> on_device(def.constants.size()), on_host(def.constants.size());
  for (const FunctionDef& fn : def.functions) {
    for (const Instruction& inst : fn.code) {
      if (inst.op != Opcode::kLoadConst) continue;
      (inst.scalars[2] == 1 ? on_host : on_device)[inst.scalars[1]] = true;
    }
  }
  vm->constants_.resize(def.constants.size());
  vm->host_constants_.resize(def.constants.size());
  for (size_t i = 0; i < def.constants.size(); ++i) {
    const ConstantDef& c = def.constants[i];
    if (on_device[i]) {
      REMEX_ASSIGN_OR_RETURN(TensorPtr t, vm->Allocate(*vm->allocator_, c.dtype, c.shape));
      REMEX_RETURN_IF_ERROR(device.CopyToDevice(t->data(), c.data.data(), c.data.size()));
      vm->copies_.host_to_device_count++;
      vm->copies_.host_to_device_bytes += c.data.size();
      t->constant = true;
      vm->constants_[i] = std::move(t);
    }
    if (on_host[i]) {
      REMEX_ASSIGN_OR_RETURN(TensorPtr t, vm->Allocate(*vm->host_allocator_, c.dtype, c.shape));
      if (!c.data.empty()) std::memcpy(t->data(), c.data.data(), c.data.size());
      t->constant = true;
      vm->host_constants_[i] = std::move(t);
    }
  }
  vm->functions_.resize(def.functions.size());
  for (size_t i = 0; i < def.functions.size(); ++i) {
    vm->functions_[i].bound_outputs.resize(def.functions[i].outputs.size());
  }
  PrepackConstants(vm->executable_->def(), vm->kernels_, vm->constants_, vm->host_constants_);
  return vm;
}


Status VirtualMachine::CreateKernels(const kernels::KernelRegistry& registry) {
  const ExecutableDef& def = executable_->def();
  Device& device = allocator_->device();
  for (const KernelEntry& entry : def.kernels) {
    std::string where = "op '" + entry.op + "'" +
                        (entry.node_name.empty() ? "" : " (node '" + entry.node_name + "')");
    Device& runs_on = entry.host ? HostDevice() : device;
    const kernels::OpDef* op = registry.FindOp(entry.op, entry.version);
    const kernels::KernelFactory* factory = registry.FindKernel(entry.op, entry.version, runs_on.kernel_kind());
    if (!op || !factory) {
      return Unimplemented(where + " has no kernel for " + (entry.host ? "the host" : "device " + device.name()));
    }
    auto kernel = (*factory)(entry.attrs);
    if (!kernel.ok()) return kernel.status().WithContext(where);
    op_defs_.push_back(op);
    kernels_.push_back(std::move(kernel).value());
    kernel_devices_.push_back(&runs_on);
  }
  // A ConcatAppend whose result an instruction after it would read densely (a kernel
  // that takes no view, a copy, a list) gives a dense tensor: a view there would cost a
  // dense copy per reader on top of the append. Read by a kernel that takes views or
  // reads the shape alone, a shape function, or returned, it grows in place. One
  // backward pass per function: `dense_read[r]`, whether register r is read densely
  // after the instruction at hand and before it is next defined.
  dense_appends_.assign(def.functions.size(), {});
  for (size_t f = 0; f < def.functions.size(); ++f) {
    const FunctionDef& fn = def.functions[f];
    dense_appends_[f].assign(fn.code.size(), false);
    std::vector<char> dense_read(static_cast<size_t>(std::max(fn.num_registers, 0)), 0);
    for (size_t pc = fn.code.size(); pc-- > 0;) {
      const Instruction& inst = fn.code[pc];
      // Definitions first (an instruction reads its inputs before it writes).
      auto defines = [&](int64_t r) {
        if (inst.op == Opcode::kConcatAppend && r == inst.scalars[0]) {
          dense_appends_[f][pc] = dense_read[static_cast<size_t>(r)] != 0;
          grows_in_place_ = grows_in_place_ || !dense_appends_[f][pc];
        }
        dense_read[static_cast<size_t>(r)] = 0;
      };
      if (inst.op == Opcode::kInvokeKernel) {
        for (int64_t r : inst.lists[1]) defines(r);
        const int64_t k = inst.scalars[0];
        for (size_t i = 0; i < inst.lists[0].size(); ++i) {
          const int64_t r = inst.lists[0][i];
          if (r < 0) continue;
          if (!(kernels_[k]->ReadsViews() ||
                kernels::InputMemoryOf(*op_defs_[k], i, def.kernels[k].host) == kernels::InputMemory::kAny)) {
            dense_read[static_cast<size_t>(r)] = 1;
          }
        }
        continue;
      }
      VisitOperands(inst, [&](char kind, int64_t r) {
        if (kind == 'd' || (inst.op == Opcode::kKillRegister && kind == 'r')) defines(r);
      });
      if (inst.op == Opcode::kRet || inst.op == Opcode::kInvokeShapeFunc || inst.op == Opcode::kKillRegister)
        continue;
      VisitOperands(inst, [&](char kind, int64_t r) {
        if ((kind == 'r' || kind == 'o') && r >= 0) dense_read[static_cast<size_t>(r)] = 1;
      });
    }
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<VirtualMachine>> VirtualMachine::CreateInstance(
    const kernels::KernelRegistry& registry, std::shared_ptr<Allocator> allocator) const {
  if (!allocator) allocator = allocator_;
  if (&allocator->device().memory_space() != &allocator_->device().memory_space()) {
    return InvalidArgument("an instance on " + allocator->device().name() + " cannot share the constants on " +
                           allocator_->device().name());
  }
  std::unique_ptr<VirtualMachine> vm(new VirtualMachine(executable_, std::move(allocator)));
  vm->host_allocator_ = HostAllocatorFor(*vm->allocator_);
  REMEX_RETURN_IF_ERROR(vm->CreateKernels(registry));
  // The constants are read-only tensors (Tensor::constant): every instance reads the
  // same ones.
  vm->constants_ = constants_;
  vm->host_constants_ = host_constants_;
  PrepackConstants(vm->executable_->def(), vm->kernels_, vm->constants_, vm->host_constants_);
  vm->functions_.resize(functions_.size());
  for (size_t i = 0; i < functions_.size(); ++i) {
    vm->functions_[i].bound_outputs.resize(functions_[i].bound_outputs.size());
  }
  return vm;
}

const std::vector<Value>& VirtualMachine::bound_inputs(int fn) const {
  static const std::vector<Value> kNone;
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size() || !functions_[fn].inputs_set) return kNone;
  return functions_[fn].inputs;
}

StatusOr<TensorPtr> VirtualMachine::Allocate(Allocator& allocator, DType dtype, const Shape& shape) {
  ++allocations_;
  REMEX_ASSIGN_OR_RETURN(TensorPtr t, AllocateTensor(allocator, dtype, shape));
  if (&allocator == allocator_.get()) {
    ++device_allocations_;
    device_allocated_bytes_ += t->buffer->size_class();
  }
  return t;
}

StatusOr<TensorPtr> VirtualMachine::PlacedTensor(int fn, int64_t space, DType dtype, const Shape& shape,
                                                 int64_t offset, int64_t slot_bytes) {
  auto n = NumElements(shape);
  if (!n) return InvalidArgument("invalid shape " + ShapeToString(shape));
  const size_t esize = DTypeSize(dtype);
  if (esize && *n > slot_bytes / static_cast<int64_t>(esize)) {
    // The plan bounds each slot by the bucket's upper edge; a shape function that
    // grows past it would otherwise write over a neighbour. The executable's plan
    // does not fit the shapes it computes: its fault, not the server's.
    return InvalidArgument(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + " (" +
                    std::to_string(*n * static_cast<int64_t>(esize)) + " bytes) exceeds its planned slot of " +
                    std::to_string(slot_bytes) + " bytes");
  }
  std::shared_ptr<Buffer>& arena = functions_[fn].arenas[space];
  if (!arena) {
    Allocator& allocator = space == 1 ? *host_allocator_ : *allocator_;
    ++allocations_;
    REMEX_ASSIGN_OR_RETURN(arena, allocator.Allocate(executable_->def().functions[fn].arena_bytes[space]));
    if (&allocator == allocator_.get()) {
      ++device_allocations_;
      device_allocated_bytes_ += arena->size_class();
    }
  }
  auto t = std::make_shared<Tensor>();
  t->buffer = arena;
  t->dtype = dtype;
  t->shape = shape;
  t->offset = static_cast<size_t>(offset);
  return t;
}

StatusOr<TensorPtr> VirtualMachine::ToHost(const TensorPtr& given) {
  if (OnHost(*given)) return given;
  REMEX_ASSIGN_OR_RETURN(TensorPtr t, DenseTensor(*allocator_, given));
  REMEX_ASSIGN_OR_RETURN(TensorPtr h, Allocate(*host_allocator_, t->dtype, t->shape));
  REMEX_RETURN_IF_ERROR(allocator_->device().CopyToHost(h->data(), t->data(), t->nbytes()));
  copies_.device_to_host_count++;
  copies_.device_to_host_bytes += t->nbytes();
  return h;
}

StatusOr<TensorPtr> VirtualMachine::ToDevice(const TensorPtr& t) {
  if (!OnHost(*t)) return DenseTensor(*allocator_, t);  // a view: a dense copy
  REMEX_ASSIGN_OR_RETURN(TensorPtr d, Allocate(*allocator_, t->dtype, t->shape));
  REMEX_RETURN_IF_ERROR(allocator_->device().CopyToDevice(d->data(), t->data(), t->nbytes()));
  copies_.host_to_device_count++;
  copies_.host_to_device_bytes += t->nbytes();
  return d;
}

StatusOr<int64_t> VirtualMachine::ReadScalar(const TensorPtr& t, const char* what) {
  auto n = NumElements(t->shape);
  if (!n || *n != 1) {
    return InvalidArgument(std::string(what) + " must hold one element, got shape " + ShapeToString(t->shape));
  }
  REMEX_ASSIGN_OR_RETURN(TensorPtr h, ToHost(t));
  const void* p = h->data();
  switch (h->dtype) {
    case DType::kBool: case DType::kUint8: return *static_cast<const uint8_t*>(p);
    case DType::kInt8: return *static_cast<const int8_t*>(p);
    case DType::kInt32: return *static_cast<const int32_t*>(p);
    case DType::kInt64: return *static_cast<const int64_t*>(p);
    case DType::kUint32: return *static_cast<const uint32_t*>(p);
    case DType::kUint64: return static_cast<int64_t>(*static_cast<const uint64_t*>(p));
    default: break;
  }
  return InvalidArgument(std::string(what) + " must be bool or an integer, got " + std::string(DTypeName(h->dtype)));
}

Status VirtualMachine::SetInputs(int fn, std::vector<TensorPtr> inputs) {
  std::vector<Value> values;
  values.reserve(inputs.size());
  for (auto& t : inputs) values.push_back(Value::OfTensor(std::move(t)));
  return SetInputValues(fn, std::move(values));
}

Status VirtualMachine::SetInputValues(int fn, std::vector<Value> inputs) {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) {
    return NotFound("function index " + std::to_string(fn));
  }
  // Refused inputs unbind the previous ones too: an invoke pipelined behind a failed
  // setInput then fails instead of running on stale inputs.
  if (Status st = CheckInputValues(fn, inputs); !st.ok()) {
    functions_[fn].inputs.clear();
    functions_[fn].inputs_set = false;
    return st;
  }
  functions_[fn].inputs = std::move(inputs);
  functions_[fn].inputs_set = true;
  return OkStatus();
}

Status VirtualMachine::CheckInputValues(int fn, const std::vector<Value>& inputs) const {
  const FunctionDef& def = executable_->def().functions[fn];
  if (inputs.size() != def.inputs.size()) {
    return InvalidArgument("function '" + def.name + "' takes " + std::to_string(def.inputs.size()) +
                           " inputs, got " + std::to_string(inputs.size()));
  }
  // One tensor of input `want` (`what`: "input 'x'" or "element 3 of input 'x'").
  auto check_tensor = [&](const ValueDesc& want, const TensorPtr& t, const std::string& what) -> Status {
    if (!t) return InvalidArgument(what + " is null");
    if (&t->buffer->device().memory_space() != &allocator_->device().memory_space()) {
      return InvalidArgument(what + " lives on another device");
    }
    if (t->dtype != want.dtype) {
      return InvalidArgument(what + " must be " + std::string(DTypeName(want.dtype)) + ", got " +
                             std::string(DTypeName(t->dtype)));
    }
    if (want.rank_known && !ShapeMatches(want.shape, t->shape)) {
      return InvalidArgument(what + " must have shape " + ShapeToString(want.shape) + ", got " +
                             ShapeToString(t->shape));
    }
    return OkStatus();
  };
  static constexpr const char* kKindNames[] = {"a tensor", "a sequence", "an empty optional"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueDesc& want = def.inputs[i];
    const Value& v = inputs[i];
    const std::string what = "input '" + want.name + "'";
    const bool none_ok = IsOptionalKind(want.kind);
    const Value::Kind expected = IsSequenceKind(want.kind) ? Value::Kind::kSequence : Value::Kind::kTensor;
    if (v.kind != expected && !(none_ok && v.kind == Value::Kind::kNone)) {
      return InvalidArgument(what + " is " + (want.kind == ValueKind::kTensor ? "a tensor" : std::string("an ONNX ") +
                             ValueKindName(want.kind)) + " of " + std::string(DTypeName(want.dtype)) + ", got " +
                             kKindNames[static_cast<int>(v.kind)]);
    }
    if (v.kind == Value::Kind::kTensor) REMEX_RETURN_IF_ERROR(check_tensor(want, v.tensor, what));
    for (size_t k = 0; v.kind == Value::Kind::kSequence && k < v.elements.size(); ++k) {
      REMEX_RETURN_IF_ERROR(check_tensor(want, v.elements[k], "element " + std::to_string(k) + " of " + what));
    }
  }
  // Symbolic dimensions: one value per symbol across all inputs, within its bounds.
  const auto& symbols = executable_->def().symbols;
  if (!symbols.empty()) {
    std::map<std::string_view, std::pair<int64_t, std::string_view>> bound;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ValueDesc& want = def.inputs[i];
      if (inputs[i].kind != Value::Kind::kTensor) continue;  // the compiler names no symbol in sequences
      for (size_t d = 0; d < want.dims.size() && d < inputs[i].tensor->shape.size(); ++d) {
        const std::string& name = want.dims[d];
        if (name.empty()) continue;
        int64_t value = inputs[i].tensor->shape[d];
        auto it = std::find_if(symbols.begin(), symbols.end(), [&](const SymbolDef& s) { return s.name == name; });
        if (it != symbols.end() && (value < it->min || (it->max >= 0 && value > it->max))) {
          return InvalidArgument("input '" + want.name + "' dimension " + std::to_string(d) + " (" + name +
                                 ") is " + std::to_string(value) + ", outside its bounds [" +
                                 std::to_string(it->min) + ", " +
                                 (it->max >= 0 ? std::to_string(it->max) : std::string("inf")) + "]");
        }
        auto [pos, inserted] = bound.try_emplace(name, value, want.name);
        if (!inserted && pos->second.first != value) {
          return InvalidArgument("symbol " + name + " is " + std::to_string(pos->second.first) + " in input '" +
                                 std::string(pos->second.second) + "' but " + std::to_string(value) +
                                 " in input '" + want.name + "'");
        }
      }
    }
  }
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
  if (def.outputs[index].kind != ValueKind::kTensor) {
    return InvalidArgument("output '" + def.outputs[index].name + "' is an ONNX " +
                           ValueKindName(def.outputs[index].kind) + ": only tensor outputs take a buffer");
  }
  if (tensor) {
    const ValueDesc& want = def.outputs[index];
    if (&tensor->buffer->device().memory_space() != &allocator_->device().memory_space()) {
      return InvalidArgument("buffer for output '" + want.name + "' lives on another device");
    }
    if (tensor->view()) {
      return InvalidArgument("buffer for output '" + want.name + "' is a view of a tensor grown in place (" +
                             ShapeToString(tensor->shape) + " of " + ShapeToString(tensor->physical) +
                             "): bind a tensor of its own");
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

Status RunControl::Check(std::chrono::steady_clock::time_point now) const {
  if (cancelled.load(std::memory_order_acquire)) return Cancelled(reason);
  if (shutdown_at && now.time_since_epoch().count() >= shutdown_at->load(std::memory_order_relaxed)) {
    return Unavailable("the server is shutting down");
  }
  if (deadline != std::chrono::steady_clock::time_point::max() && now > deadline) {
    return DeadlineExceeded("the run passed its deadline of " + std::to_string(budget.count()) + " ms");
  }
  return OkStatus();
}

StatusOr<std::vector<TensorPtr>> VirtualMachine::Invoke(int fn, Profiler* profiler) {
  if (fn >= 0 && static_cast<size_t>(fn) < functions_.size()) {
    for (const ValueDesc& out : executable_->def().functions[fn].outputs) {
      if (out.kind != ValueKind::kTensor) {
        return FailedPrecondition("output '" + out.name + "' is an ONNX " + ValueKindName(out.kind) +
                                  ": run the function with InvokeValues");
      }
    }
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<Value> values, InvokeValues(fn, profiler));
  std::vector<TensorPtr> outputs;
  outputs.reserve(values.size());
  for (Value& v : values) outputs.push_back(std::move(v.tensor));
  return outputs;
}

StatusOr<TensorPtr> VirtualMachine::CopyOf(const TensorPtr& t) {
  REMEX_ASSIGN_OR_RETURN(TensorPtr d, Allocate(*allocator_, t->dtype, t->shape));
  REMEX_RETURN_IF_ERROR(CopyBox(allocator_->device(), *t, *d, 0, 0));
  return d;
}

StatusOr<TensorPtr> VirtualMachine::ConcatAppend(const std::vector<TensorPtr>& parts, int64_t axis,
                                                 const TensorPtr& bound, const ValueDesc& desc, bool dense) {
  const std::string& output = desc.name;
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("Concat for output '" + output + "': " + why);
  };
  if (parts.empty()) return refuse("no inputs");
  const TensorPtr& first = parts[0];
  if (first->dtype != desc.dtype) {
    return refuse("input 0 is " + std::string(DTypeName(first->dtype)) + ", the output " +
                  std::string(DTypeName(desc.dtype)));
  }
  const size_t rank = first->shape.size();
  if (static_cast<size_t>(axis) >= rank) {
    return refuse("axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) + " input");
  }
  const size_t a = static_cast<size_t>(axis);
  Shape out = first->shape;
  for (size_t i = 1; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    bool fits = t.dtype == first->dtype && t.shape.size() == rank;
    for (size_t d = 0; fits && d < rank; ++d) fits = d == a || t.shape[d] == out[d];
    if (!fits) {
      return refuse("input " + std::to_string(i) + " is " + std::string(DTypeName(t.dtype)) + " " +
                    ShapeToString(t.shape) + ", input 0 " + std::string(DTypeName(first->dtype)) + " " +
                    ShapeToString(first->shape) + ": the dims but the axis must agree");
    }
    if (__builtin_add_overflow(out[a], t.shape[a], &out[a])) return refuse("the axis overflows");
  }
  for (const TensorPtr& t : parts) {
    if (OnHost(*t)) return refuse("an input in host memory");
  }
  Device& device = allocator_->device();
  auto write_parts = [&](const Tensor& dst, size_t from, int64_t at) -> Status {
    for (size_t i = from; i < parts.size(); ++i) {
      REMEX_RETURN_IF_ERROR(CopyBox(device, *parts[i], dst, static_cast<int>(axis), at));
      at += parts[i]->shape[a];
    }
    return OkStatus();
  };
  if (dense && !bound) {
    REMEX_ASSIGN_OR_RETURN(TensorPtr t, Allocate(*allocator_, first->dtype, out));
    REMEX_RETURN_IF_ERROR(write_parts(*t, 0, 0));
    return t;
  }
  if (bound) {
    if (bound->dtype != first->dtype || bound->shape != out) {
      return InvalidArgument("buffer bound to output '" + output + "' is " +
                             std::string(DTypeName(bound->dtype)) + " " + ShapeToString(bound->shape) +
                             " but this call produces " + std::string(DTypeName(first->dtype)) + " " +
                             ShapeToString(out));
    }
    REMEX_RETURN_IF_ERROR(write_parts(*bound, 0, 0));
    return bound;
  }
  // In place: after the first input's rows, which end where its buffer's filled rows
  // do (no other view has grown past them), inside its room.
  if (first->view() && first->axis == static_cast<int>(axis) && first->filled &&
      *first->filled == first->shape[a] && first->physical[a] >= out[a] &&
      first->buffer->owner() == allocator_.get()) {
    auto grown = std::make_shared<Tensor>(*first);
    grown->shape = out;
    REMEX_RETURN_IF_ERROR(write_parts(*grown, 1, first->shape[a]));
    *grown->filled = out[a];
    return grown;
  }
  // A new buffer with room to grow: twice the rows, 16 more at least; the rows alone
  // where that much memory is not there.
  Shape physical = out;
  physical[a] = out[a] > (int64_t{1} << 40) ? out[a] : std::max(out[a] * 2, out[a] + 16);
  StatusOr<TensorPtr> room = Allocate(*allocator_, first->dtype, physical);
  if (!room.ok() && room.status().code() == StatusCode::kResourceExhausted) {
    physical = out;
    room = Allocate(*allocator_, first->dtype, physical);
  }
  if (!room.ok()) return room.status();
  TensorPtr grown = std::move(room).value();
  grown->shape = out;
  grown->physical = std::move(physical);
  grown->axis = static_cast<int>(axis);
  grown->filled = std::make_shared<int64_t>(out[a]);
  REMEX_RETURN_IF_ERROR(write_parts(*grown, 0, 0));
  return grown;
}

StatusOr<std::vector<Value>> VirtualMachine::InvokeValues(int fn, Profiler* profiler) {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) {
    return NotFound("function index " + std::to_string(fn));
  }
  if (!functions_[fn].inputs_set) {
    return FailedPrecondition("inputs of function '" + executable_->def().functions[fn].name +
                              "' are not set");
  }
  std::vector<Value> outputs;
  const CopyStats before = copies_;
  const uint64_t allocations_before = allocations_;
  const FunctionState& state = functions_[fn];
  last_function_ = -1;
  last_invoke_graph_ = false;
  if (control_) {
    turn_started_ = std::chrono::steady_clock::now();
    unchecked_ = 0;
  }
  if (profiler) {
    profiler->kernels.resize(executable_->def().kernels.size());
    profiler->kernel_shapes.resize(executable_->def().kernels.size());
    profiler->live_bytes_before = allocator_->stats().allocated_bytes;
    auto start = std::chrono::steady_clock::now();
    Status st = Run(fn, state.inputs, state.bound_outputs, outputs, profiler);
    profiler->total_nanos += ElapsedNanos(start);
    profiler->invokes++;
    profiler->live_bytes_after = allocator_->stats().allocated_bytes;
    last_copies_ = copies_ - before;
    last_allocations_ = allocations_ - allocations_before;
    REMEX_RETURN_IF_ERROR(st);
  } else {
    last_invoke_graph_ = false;
    Status st = device_graphs_ ? RunWithGraphs(fn, outputs) : Run(fn, state.inputs, state.bound_outputs, outputs, nullptr);
    last_copies_ = copies_ - before;
    last_allocations_ = allocations_ - allocations_before;
    REMEX_RETURN_IF_ERROR(st);
  }
  ++invokes_;
  return outputs;
}

Status VirtualMachine::Run(int fn_index, const std::vector<Value>& inputs,
                           const std::vector<TensorPtr>& bound_outputs, std::vector<Value>& outputs,
                           Profiler* profiler) {
  const FunctionDef& fn = executable_->def().functions[fn_index];
  Device& device = allocator_->device();
  last_function_ = fn_index;
  FunctionThreads threads(fn.compute_threads);
  std::vector<Object> regs(fn.num_registers);
  for (size_t i = 0; i < inputs.size(); ++i) regs[i] = ObjectOf(inputs[i]);

  std::vector<kernels::TensorRef> in_refs, out_refs;
  std::vector<TensorPtr> dense_inputs;  // an InvokeKernel's dense copies of views
  std::vector<kernels::ShapeFnArg> args;
  std::vector<TensorPtr> host_copies;

  // Profiling state, used only with a profiler.
  std::chrono::steady_clock::time_point start;
  CopyStats copies_before;
  uint64_t allocations_before = 0, allocated_bytes_before = 0;
  // Per register, the buffer an AllocTensor, AllocTensorReg or AllocOutput made for it
  // and no kernel has written yet: the kernel whose output it is shows it in its row.
  std::vector<std::pair<uint64_t, uint64_t>> pending_allocations(profiler ? fn.num_registers : 0);
  // Records the instruction `inst` (at `pc`) that started at `start`: its opcode's row,
  // and an InvokeKernel's kernel row, which also gets the buffers allocated for its
  // outputs, and the operands' shapes of its first call; its trace event. With
  // profiler->synchronize it first waits for the device (its error is returned).
  auto record = [&](const Instruction& inst, size_t pc) -> Status {
    if (profiler->synchronize) REMEX_RETURN_IF_ERROR(device.Synchronize());
    ProfileSample sample;
    sample.nanos = ElapsedNanos(start);
    if (profiler->trace) {
      if (profiler->events.size() < profiler->trace_limit) {
        TraceEvent e;
        const auto since = start - profiler->trace_origin;
        e.start_nanos = static_cast<uint64_t>(
            std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(since).count()));
        e.nanos = sample.nanos;
        e.op = inst.op;
        e.kernel = inst.op == Opcode::kInvokeKernel ? static_cast<int32_t>(inst.scalars[0]) : -1;
        e.function = fn_index;
        e.pc = static_cast<uint32_t>(pc);
        profiler->events.push_back(e);
      } else {
        ++profiler->trace_dropped;
      }
    }
    sample.copies = copies_.host_to_device_count + copies_.device_to_host_count -
                    copies_before.host_to_device_count - copies_before.device_to_host_count;
    sample.copy_bytes = copies_.host_to_device_bytes + copies_.device_to_host_bytes -
                        copies_before.host_to_device_bytes - copies_before.device_to_host_bytes;
    sample.allocations = device_allocations_ - allocations_before;
    sample.allocated_bytes = device_allocated_bytes_ - allocated_bytes_before;
    sample.live_bytes = allocator_->stats().allocated_bytes;
    profiler->instructions[static_cast<int>(inst.op)].Add(sample);
    profiler->peak_live_bytes = std::max(profiler->peak_live_bytes, sample.live_bytes);
    const int64_t dst = inst.scalars.empty() ? -1 : inst.scalars[0];
    switch (inst.op) {
      case Opcode::kAllocTensor:
      case Opcode::kAllocTensorReg:
      case Opcode::kAllocOutput:
        if (dst >= 0 && static_cast<size_t>(dst) < pending_allocations.size()) {
          pending_allocations[dst] = {sample.allocations, sample.allocated_bytes};
        }
        break;
      case Opcode::kInvokeKernel:
        for (int64_t r : inst.lists[1]) {
          if (r < 0 || static_cast<size_t>(r) >= pending_allocations.size()) continue;
          sample.allocations += pending_allocations[r].first;
          sample.allocated_bytes += pending_allocations[r].second;
          pending_allocations[r] = {};
        }
        if (profiler->kernels[dst].calls == 0) {
          // The operands as this call saw them (dynamic shapes resolved).
          auto operands = [&](const std::vector<int64_t>& list) {
            std::vector<std::pair<DType, Shape>> out;
            out.reserve(list.size());
            for (int64_t r : list) {
              const TensorPtr* t =
                  r >= 0 && static_cast<size_t>(r) < regs.size() ? std::get_if<TensorPtr>(&regs[r]) : nullptr;
              if (t && *t) {
                out.emplace_back((*t)->dtype, (*t)->shape);
              } else {
                out.emplace_back(DType::kUndefined, Shape{});
              }
            }
            return out;
          };
          profiler->kernel_shapes[dst] = {operands(inst.lists[0]), operands(inst.lists[1])};
        }
        profiler->kernels[dst].Add(sample);
        break;
      default:
        break;
    }
    return OkStatus();
  };

  size_t next = 0;
  size_t last_pc = 0;
  bool first = true;
  for (size_t pc = 0; pc < fn.code.size(); last_pc = pc, pc = next) {
    next = pc + 1;
    const Instruction& inst = fn.code[pc];
    const bool backward = !first && pc <= last_pc;
    first = false;
    if (control_ && (backward || ++unchecked_ >= RunControl::kInstructionsPerCheck)) {
      // A backward jump (a Loop iteration, or any Goto back), or a long stretch without
      // a kernel: a run that loops, however legitimately, still stops when cancelled or
      // late, and lets other work run once its slice has passed.
      unchecked_ = 0;
      auto now = std::chrono::steady_clock::now();
      Status st = control_->Check(now);
      if (st.ok() && control_->yield && !recording_ && now - turn_started_ >= control_->slice) {
        control_->yield();
        now = std::chrono::steady_clock::now();
        turn_started_ = now;
        st = control_->Check(now);
      }
      if (!st.ok()) {
        return st.WithContext("function '" + fn.name + "', instruction " + std::to_string(pc) +
                              (backward ? " (after a backward jump)"
                                        : " (after " + std::to_string(RunControl::kInstructionsPerCheck) +
                                              " instructions without a kernel)"));
      }
    }
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
      const TensorPtr* t = std::get_if<TensorPtr>(&regs[r]);
      return t && *t ? t : nullptr;
    };
    auto not_tensor = [&](int64_t r) {
      return fail(Internal("register %" + std::to_string(r) + " holds no tensor"));
    };
    auto alloc_in = [&](int64_t space) -> Allocator& { return space == 1 ? *host_allocator_ : *allocator_; };
    if (profiler) {
      copies_before = copies_;
      allocations_before = device_allocations_;
      allocated_bytes_before = device_allocated_bytes_;
      start = std::chrono::steady_clock::now();
    }

    switch (inst.op) {
      case Opcode::kMove:
        regs[s[0]] = regs[s[1]];
        break;
      case Opcode::kKillRegister:
        regs[s[0]] = std::monostate{};
        break;
      case Opcode::kLoadConst: {
        const TensorPtr& c = s[2] == 1 ? host_constants_[s[1]] : constants_[s[1]];
        if (!c) return fail(Internal("constant " + std::to_string(s[1]) + " was not loaded"));
        regs[s[0]] = c;
        break;
      }
      case Opcode::kAllocTensor: {
        auto t = Allocate(alloc_in(s[2]), static_cast<DType>(s[1]), inst.lists[0]);
        if (!t.ok()) return fail(t.status());
        regs[s[0]] = std::move(t).value();
        break;
      }
      case Opcode::kAllocTensorReg: {
        const Shape* shape = std::get_if<Shape>(&regs[s[2]]);
        if (!shape) return fail(Internal("register %" + std::to_string(s[2]) + " holds no shape"));
        auto t = Allocate(alloc_in(s[3]), static_cast<DType>(s[1]), *shape);
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
        const TensorPtr& bound = bound_outputs[s[1]];
        if (bound) {
          if (bound->dtype != dtype || bound->shape != *shape) {
            return fail(InvalidArgument(
                "buffer bound to output '" + fn.outputs[s[1]].name + "' is " +
                std::string(DTypeName(bound->dtype)) + " " + ShapeToString(bound->shape) +
                " but this call produces " + std::string(DTypeName(dtype)) + " " + ShapeToString(*shape)));
          }
          regs[s[0]] = bound;
        } else {
          auto t = Allocate(*allocator_, dtype, *shape);
          if (!t.ok()) return fail(t.status());
          regs[s[0]] = std::move(t).value();
        }
        break;
      }
      case Opcode::kConcatAppend: {
        std::vector<TensorPtr> parts;
        parts.reserve(inst.lists[0].size());
        for (int64_t r : inst.lists[0]) {
          const TensorPtr* t = tensor_at(r);
          if (!t) return not_tensor(r);
          parts.push_back(*t);
        }
        auto grown = ConcatAppend(parts, s[2], bound_outputs[s[1]], fn.outputs[s[1]],
                                  dense_appends_[static_cast<size_t>(fn_index)][pc]);
        if (!grown.ok()) return fail(grown.status());
        regs[s[0]] = std::move(grown).value();
        break;
      }
      case Opcode::kAllocPlanned: {
        const Shape* shape = &inst.lists[0];
        if (s[2] >= 0) {
          shape = std::get_if<Shape>(&regs[s[2]]);
          if (!shape) return fail(Internal("register %" + std::to_string(s[2]) + " holds no shape"));
        }
        auto t = PlacedTensor(fn_index, s[3], static_cast<DType>(s[1]), *shape, s[4], s[5]);
        if (!t.ok()) return fail(t.status());
        regs[s[0]] = std::move(t).value();
        break;
      }
      case Opcode::kIfDimIn: {
        const TensorPtr* t = tensor_at(s[0]);
        if (!t) return not_tensor(s[0]);
        if (static_cast<size_t>(s[1]) >= (*t)->shape.size()) {
          // Ranks are only known at run time: the executable tests a dimension its
          // tensor lacks.
          return fail(InvalidArgument("tensor %" + std::to_string(s[0]) + " of shape " +
                                      ShapeToString((*t)->shape) + " has no dimension " + std::to_string(s[1])));
        }
        const int64_t dim = (*t)->shape[s[1]];
        if (dim < s[2] || dim > s[3]) next = static_cast<size_t>(s[4]);
        break;
      }
      case Opcode::kTailCall: {
        const FunctionDef& callee = executable_->def().functions[s[0]];
        std::vector<Value> args;
        for (size_t i = 0; i < inst.lists[0].size(); ++i) {
          const Object& o = regs[inst.lists[0][i]];
          if (const TensorList* list = std::get_if<TensorList>(&o); list && *list) {
            args.push_back(Value::OfSequence(**list));
            continue;
          }
          if (std::holds_alternative<NoValue>(o)) {
            args.push_back(Value::None());
            continue;
          }
          const TensorPtr* t = tensor_at(inst.lists[0][i]);
          if (!t) return not_tensor(inst.lists[0][i]);
          if (!ShapeMatches(callee.inputs[i].shape, (*t)->shape)) {
            return fail(InvalidArgument("input '" + callee.inputs[i].name + "' of shape " +
                                        ShapeToString((*t)->shape) + " does not fit function '" + callee.name +
                                        "', which takes " + ShapeToString(callee.inputs[i].shape)));
          }
          args.push_back(Value::OfTensor(*t));
        }
        regs.clear();  // the caller's registers are done with
        if (profiler) {
          if (Status st = record(inst, pc); !st.ok()) return fail(st);
        }
        return Run(static_cast<int>(s[0]), args, bound_outputs, outputs, profiler);
      }
      case Opcode::kInvokeShapeFunc: {
        const kernels::OpDef& op = *op_defs_[s[0]];
        const KernelEntry& entry = executable_->def().kernels[s[0]];
        const auto& ins = inst.lists[0];
        args.assign(ins.size(), {});
        host_copies.clear();
        for (size_t i = 0; i < ins.size(); ++i) {
          if (ins[i] < 0) continue;
          const TensorPtr* t = tensor_at(ins[i]);
          if (!t) return not_tensor(ins[i]);
          args[i].present = true;
          args[i].dtype = (*t)->dtype;
          args[i].shape = (*t)->shape;
          if (op.DepOf(i) == kernels::ShapeDep::kData) {
            // Only data-dependent inputs are read; a device-resident one is copied.
            auto h = ToHost(*t);
            if (!h.ok()) return fail(h.status());
            args[i].data = (*h)->data();
            host_copies.push_back(std::move(h).value());
          }
        }
        auto infos = kernels::InferShapes(op, entry.attrs, args);
        if (!infos.ok()) return fail(infos.status());
        if (infos->size() < inst.lists[1].size()) {
          // The count follows the kernel's attributes: the executable asks for more.
          return fail(InvalidArgument("the shape function gives " + std::to_string(infos->size()) +
                                      " outputs, the instruction takes " + std::to_string(inst.lists[1].size())));
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
        dense_inputs.clear();
        for (size_t i = 0; i < ins.size(); ++i) {
          if (ins[i] < 0) continue;
          const TensorPtr* t = tensor_at(ins[i]);
          if (!t) return not_tensor(ins[i]);
          if ((*t)->view() && !kernels_[s[0]]->ReadsViews() &&
              kernels::InputMemoryOf(*op_defs_[s[0]], i, executable_->def().kernels[s[0]].host) !=
                  kernels::InputMemory::kAny) {
            // A view (a KV cache grown in place) for a kernel that reads dense tensors;
            // one that reads the shape alone (kAny) takes it as it is.
            auto dense = DenseTensor(*allocator_, *t);
            if (!dense.ok()) return fail(dense.status());
            in_refs[i] = (*dense)->Ref();
            dense_inputs.push_back(std::move(dense).value());
            continue;
          }
          in_refs[i] = (*t)->Ref();
        }
        for (size_t i = 0; i < outs.size(); ++i) {
          const TensorPtr* t = tensor_at(outs[i]);
          if (!t) return not_tensor(outs[i]);
          if ((*t)->view()) {
            // Its rows are other views' too (an executable built so by hand).
            return fail(InvalidArgument("a kernel output is a tensor grown in place (ConcatAppend)"));
          }
          out_refs[i] = (*t)->Ref();
        }
        Status st = kernel_devices_[s[0]]->BeforeKernelLaunch();
        if (st.ok()) st = kernels_[s[0]]->Compute(in_refs, out_refs);
        if (!st.ok()) return fail(st);
        // Between kernels: a cancelled or late run stops here, and again after other
        // work had its turn (it may have cancelled this run meanwhile).
        if (control_) {
          unchecked_ = 0;
          st = control_->Check();
          if (!st.ok()) return fail(st);
          // Not while recording a graph: other work would be recorded with it.
          if (control_->yield && !recording_) {
            control_->yield();
            turn_started_ = std::chrono::steady_clock::now();
            st = control_->Check(turn_started_);
            if (!st.ok()) return fail(st);
          }
        }
        break;
      }
      case Opcode::kCopyToHost:
      case Opcode::kCopyToDevice: {
        const TensorPtr* t = tensor_at(s[1]);
        if (!t) return not_tensor(s[1]);
        auto c = inst.op == Opcode::kCopyToHost ? ToHost(*t) : ToDevice(*t);
        if (!c.ok()) return fail(c.status());
        regs[s[0]] = std::move(c).value();
        break;
      }
      case Opcode::kIf: {
        const TensorPtr* t = tensor_at(s[0]);
        if (!t) return not_tensor(s[0]);
        auto v = ReadScalar(*t, "If condition");
        if (!v.ok()) return fail(v.status());
        if (*v == 0) next = static_cast<size_t>(s[1]);
        break;
      }
      case Opcode::kGoto:
        next = static_cast<size_t>(s[0]);
        break;
      case Opcode::kLoopCheck: {
        const TensorPtr* it = tensor_at(s[0]);
        if (!it) return not_tensor(s[0]);
        auto i = ReadScalar(*it, "Loop iteration");
        if (!i.ok()) return fail(i.status());
        bool done = false;
        if (s[1] >= 0) {
          const TensorPtr* m = tensor_at(s[1]);
          if (!m) return not_tensor(s[1]);
          auto max = ReadScalar(*m, "Loop trip count M");
          if (!max.ok()) return fail(max.status());
          done = *i >= *max;
        }
        if (!done && s[2] >= 0) {
          const TensorPtr* c = tensor_at(s[2]);
          if (!c) return not_tensor(s[2]);
          auto cond = ReadScalar(*c, "Loop condition");
          if (!cond.ok()) return fail(cond.status());
          done = *cond == 0;
        }
        if (done) next = static_cast<size_t>(s[3]);
        break;
      }
      case Opcode::kIncrement: {
        const TensorPtr* t = tensor_at(s[1]);
        if (!t) return not_tensor(s[1]);
        auto v = ReadScalar(*t, "Increment operand");
        if (!v.ok()) return fail(v.status());
        if (*v == std::numeric_limits<int64_t>::max()) {
          return fail(OutOfRange("Increment of the largest int64 (the Loop counter would overflow)"));
        }
        auto n = Allocate(*host_allocator_, DType::kInt64, {});
        if (!n.ok()) return fail(n.status());
        *static_cast<int64_t*>((*n)->data()) = *v + 1;
        regs[s[0]] = std::move(n).value();
        break;
      }
      case Opcode::kListNew:
        regs[s[0]] = std::make_shared<std::vector<TensorPtr>>();
        break;
      case Opcode::kListAppend: {
        const TensorList* list = std::get_if<TensorList>(&regs[s[0]]);
        if (!list || !*list) return fail(Internal("register %" + std::to_string(s[0]) + " holds no list"));
        const TensorPtr* t = tensor_at(s[1]);
        if (!t) return not_tensor(s[1]);
        auto d = ToDevice(*t);
        if (!d.ok()) return fail(d.status());
        (*list)->push_back(std::move(d).value());
        break;
      }
      case Opcode::kListStack: {
        const TensorList* list = std::get_if<TensorList>(&regs[s[2]]);
        if (!list || !*list) return fail(Internal("register %" + std::to_string(s[2]) + " holds no list"));
        const auto& items = **list;
        Shape shape = inst.lists[0];
        DType dtype = static_cast<DType>(s[1]);
        if (!items.empty()) {
          shape = items[0]->shape;
          for (const auto& t : items) {
            if (t->shape != shape || t->dtype != dtype) {
              return fail(InvalidArgument("Loop scan output changes from " + std::string(DTypeName(dtype)) + " " +
                                          ShapeToString(shape) + " to " + std::string(DTypeName(t->dtype)) +
                                          " " + ShapeToString(t->shape) + " between iterations"));
            }
          }
        }
        shape.insert(shape.begin(), static_cast<int64_t>(items.size()));
        auto out = Allocate(*allocator_, dtype, shape);
        if (!out.ok()) return fail(out.status());
        size_t offset = 0;
        for (const auto& item : items) {
          auto t = DenseTensor(*allocator_, item);  // a view (an executable built so by hand)
          if (!t.ok()) return fail(t.status());
          Status st = device.CopyOnDevice(static_cast<std::byte*>((*out)->data()) + offset, (*t)->data(),
                                          (*t)->nbytes());
          if (!st.ok()) return fail(st);
          offset += (*t)->nbytes();
        }
        regs[s[0]] = std::move(out).value();
        break;
      }
      case Opcode::kSeqConstruct: {
        auto list = std::make_shared<std::vector<TensorPtr>>();
        for (int64_t r : inst.lists[0]) {
          const TensorPtr* t = tensor_at(r);
          if (!t) return not_tensor(r);
          if (!list->empty() && (*t)->dtype != list->front()->dtype) {
            return fail(InvalidArgument("SequenceConstruct of " + std::string(DTypeName((*t)->dtype)) + " and " +
                                        std::string(DTypeName(list->front()->dtype)) +
                                        " tensors: a sequence's elements share one dtype"));
          }
          list->push_back(*t);
        }
        regs[s[0]] = std::move(list);
        break;
      }
      case Opcode::kSeqInsert:
      case Opcode::kSeqAt:
      case Opcode::kSeqErase:
      case Opcode::kSeqLength: {
        const TensorList* list = std::get_if<TensorList>(&regs[s[1]]);
        if (!list || !*list) return fail(InvalidArgument("register %" + std::to_string(s[1]) + " holds no sequence"));
        const std::vector<TensorPtr>& items = **list;
        const int64_t size = static_cast<int64_t>(items.size());
        if (inst.op == Opcode::kSeqLength) {
          auto n = Allocate(*host_allocator_, DType::kInt64, {});
          if (!n.ok()) return fail(n.status());
          *static_cast<int64_t*>((*n)->data()) = size;
          regs[s[0]] = std::move(n).value();
          break;
        }
        // The position operand: SeqAt's second register, SeqInsert's third, SeqErase's
        // second (absent: -1).
        const int64_t pos_reg = inst.op == Opcode::kSeqInsert ? s[3] : s[2];
        // ONNX: positions in [-n, n-1] (SequenceInsert: [-n, n]); absent: the end.
        const int64_t hi = inst.op == Opcode::kSeqInsert ? size : size - 1;
        int64_t pos = inst.op == Opcode::kSeqInsert ? size : size - 1;
        if (pos_reg >= 0) {
          const TensorPtr* p = tensor_at(pos_reg);
          if (!p) return not_tensor(pos_reg);
          if ((*p)->dtype != DType::kInt64 && (*p)->dtype != DType::kInt32) {
            return fail(InvalidArgument("sequence position must be int32 or int64, got " +
                                        std::string(DTypeName((*p)->dtype))));
          }
          auto v = ReadScalar(*p, "sequence position");
          if (!v.ok()) return fail(v.status());
          pos = *v;
          if (pos < -size || pos > hi) {
            return fail(OutOfRange("sequence position " + std::to_string(pos) + " is outside [" +
                                   std::to_string(-size) + ", " + std::to_string(hi) + "] for a sequence of " +
                                   std::to_string(size) + " elements"));
          }
          if (pos < 0) pos += size;
        } else if (size == 0 && inst.op == Opcode::kSeqErase) {
          return fail(OutOfRange("SequenceErase of an empty sequence"));
        }
        if (inst.op == Opcode::kSeqAt) {
          regs[s[0]] = items[static_cast<size_t>(pos)];
          break;
        }
        auto out = std::make_shared<std::vector<TensorPtr>>(items);
        if (inst.op == Opcode::kSeqErase) {
          out->erase(out->begin() + pos);
        } else {
          const TensorPtr* t = tensor_at(s[2]);
          if (!t) return not_tensor(s[2]);
          if (!items.empty() && (*t)->dtype != items.front()->dtype) {
            return fail(InvalidArgument("SequenceInsert of a " + std::string(DTypeName((*t)->dtype)) +
                                        " tensor into a sequence of " +
                                        std::string(DTypeName(items.front()->dtype))));
          }
          out->insert(out->begin() + pos, *t);
        }
        regs[s[0]] = std::move(out);
        break;
      }
      case Opcode::kOptNone:
        regs[s[0]] = NoValue{};
        break;
      case Opcode::kOptHas: {
        const Object& o = regs[s[1]];
        if (std::holds_alternative<std::monostate>(o) || std::holds_alternative<Shape>(o)) {
          return fail(Internal("register %" + std::to_string(s[1]) + " holds no optional"));
        }
        auto b = Allocate(*host_allocator_, DType::kBool, {});
        if (!b.ok()) return fail(b.status());
        *static_cast<uint8_t*>((*b)->data()) = std::holds_alternative<NoValue>(o) ? 0 : 1;
        regs[s[0]] = std::move(b).value();
        break;
      }
      case Opcode::kOptGet:
        if (std::holds_alternative<NoValue>(regs[s[1]])) {
          return fail(InvalidArgument("OptionalGetElement of an optional that holds no value"));
        }
        regs[s[0]] = regs[s[1]];
        break;
      case Opcode::kRet: {
        outputs.clear();
        for (size_t k = 0; k < inst.lists[0].size(); ++k) {
          const int64_t r = inst.lists[0][k];
          const ValueKind kind = fn.outputs[k].kind;
          const Object& o = regs[r];
          if (IsOptionalKind(kind) && std::holds_alternative<NoValue>(o)) {
            outputs.push_back(Value::None());
            continue;
          }
          if (IsSequenceKind(kind)) {
            const TensorList* list = std::get_if<TensorList>(&o);
            if (!list || !*list) return fail(Internal("output " + std::to_string(k) + " holds no sequence"));
            std::vector<TensorPtr> elements;
            for (const TensorPtr& t : **list) {
              auto c = CopyOf(t);
              if (!c.ok()) return fail(c.status());
              elements.push_back(std::move(c).value());
            }
            outputs.push_back(Value::OfSequence(std::move(elements)));
            continue;
          }
          const TensorPtr* t = tensor_at(r);
          if (!t) return not_tensor(r);
          if (kind == ValueKind::kTensor) {
            outputs.push_back(Value::OfTensor(*t));
            continue;
          }
          auto c = CopyOf(*t);  // an optional tensor: its value may be an input or constant
          if (!c.ok()) return fail(c.status());
          outputs.push_back(Value::OfTensor(std::move(c).value()));
        }
        if (profiler) {  // the copies of optional and sequence outputs included
          if (Status st = record(inst, pc); !st.ok()) return fail(st);
        }
        return OkStatus();
      }
      case Opcode::kCount:
        return fail(Internal("invalid opcode"));
    }
    if (profiler) {
      if (Status st = record(inst, pc); !st.ok()) return fail(st);
    }
  }
  return Internal("function '" + fn.name + "' fell off its end");
}

void VirtualMachine::HeldBuffers(std::vector<const Buffer*>& out) const {
  auto add = [&](const TensorPtr& t) {
    if (t && t->buffer) out.push_back(t->buffer.get());
  };
  for (const auto& c : constants_) add(c);
  for (const auto& c : host_constants_) add(c);
  for (const auto& f : functions_) {
    for (const auto& v : f.inputs) {
      add(v.tensor);
      for (const auto& e : v.elements) add(e);
    }
    for (const auto& o : f.bound_outputs) add(o);
    for (const auto& a : f.arenas) {
      if (a) out.push_back(a.get());
    }
    for (const auto& [shapes, g] : f.graphs) {
      for (const auto& b : g.held) out.push_back(b.get());
    }
  }
}

void VirtualMachine::set_device_graphs(bool on) {
  device_graphs_ = on && allocator_->device().capabilities().graphs;
  if (!device_graphs_) {
    for (FunctionState& f : functions_) f.graphs.clear();
    graph_stats_.live = 0;
  }
}

std::string VirtualMachine::graph_refusal(int fn, const std::vector<Shape>& input_shapes) const {
  if (fn < 0 || static_cast<size_t>(fn) >= functions_.size()) return {};
  auto it = functions_[fn].graphs.find(input_shapes);
  return it == functions_[fn].graphs.end() ? std::string() : it->second.reason;
}

Status VirtualMachine::RunWithGraphs(int fn, std::vector<Value>& outputs) {
  FunctionState& state = functions_[fn];
  const FunctionDef& def = executable_->def().functions[fn];
  auto plain = [&] { return Run(fn, state.inputs, state.bound_outputs, outputs, nullptr); };
  for (const ValueDesc& d : def.inputs) {
    if (d.kind != ValueKind::kTensor) return plain();
  }
  for (const ValueDesc& d : def.outputs) {
    if (d.kind != ValueKind::kTensor) return plain();
  }
  std::vector<Shape> key;
  key.reserve(state.inputs.size());
  for (const Value& v : state.inputs) key.push_back(v.tensor->shape);
  auto it = state.graphs.find(key);
  if (it == state.graphs.end()) {
    if (state.graphs.size() >= kMaxGraphShapes) {
      auto oldest = state.graphs.begin();
      for (auto g = state.graphs.begin(); g != state.graphs.end(); ++g) {
        if (g->second.last_used < oldest->second.last_used) oldest = g;
      }
      if (oldest->second.graph) --graph_stats_.live;
      state.graphs.erase(oldest);
    }
    it = state.graphs.emplace(std::move(key), GraphEntry{}).first;
  }
  GraphEntry& entry = it->second;
  entry.last_used = ++graph_clock_;
  if (entry.refused) return plain();
  if (!entry.graph) {
    if (entry.plain_runs == 0) {
      // The first call with these shapes runs plainly; it also tells whether the
      // function stays on the device for them: no transfer between the host and the
      // device. Host kernels may run: without a transfer their inputs are host
      // constants and values of the shapes, the same at every call with these shapes,
      // and so is what they decide (a shape, a branch taken).
      const CopyStats before = copies_;
      REMEX_RETURN_IF_ERROR(plain());
      const CopyStats moved = copies_ - before;
      if (moved.host_to_device_count || moved.device_to_host_count) {
        entry.refused = true;
        entry.reason = "the call copied " + std::to_string(moved.host_to_device_count) + " tensors to the device and " +
                       std::to_string(moved.device_to_host_count) + " to the host";
        ++graph_stats_.refusals;
        if (graph_observer_) graph_observer_(fn, it->first, false, entry.reason);
      } else {
        entry.plain_runs = 1;
      }
      return OkStatus();
    }
    if (Status recorded = RecordGraph(fn, entry); !recorded.ok()) {
      entry = GraphEntry{};
      entry.last_used = graph_clock_;
      entry.plain_runs = 1;
      // A run stopped from outside (cancelled, past its deadline, the server stopping)
      // or a device fault is the call's error, not the recording's: the next call
      // with these shapes records again.
      const StatusCode code = recorded.code();
      if (code == StatusCode::kCancelled || code == StatusCode::kDeadlineExceeded ||
          code == StatusCode::kUnavailable || code == StatusCode::kAborted) {
        return recorded;
      }
      entry.refused = true;
      entry.reason = recorded.message();
      ++graph_stats_.refusals;
      if (graph_observer_) graph_observer_(fn, it->first, false, entry.reason);
      return plain();
    }
    if (graph_observer_) graph_observer_(fn, it->first, true, std::to_string(entry.graph->size()) + " operations");
  }
  return LaunchGraph(fn, entry, outputs);
}

Status VirtualMachine::RecordGraph(int fn, GraphEntry& entry) {
  FunctionState& state = functions_[fn];
  Device& device = allocator_->device();
  if (grows_in_place_) {
    // Each call may write another buffer (a KV cache grown in place, or a new one).
    return FailedPrecondition("the executable grows tensors in place (ConcatAppend)");
  }
  // The graph's own inputs, filled before each launch.
  std::vector<Value> inputs;
  inputs.reserve(state.inputs.size());
  for (const Value& v : state.inputs) {
    REMEX_ASSIGN_OR_RETURN(TensorPtr t, Allocate(*allocator_, v.tensor->dtype, v.tensor->shape));
    REMEX_RETURN_IF_ERROR(CopyBox(device, *v.tensor, *t, 0, 0));
    entry.inputs.push_back(t);
    inputs.push_back(Value::OfTensor(std::move(t)));
  }
  const std::vector<TensorPtr> unbound(state.bound_outputs.size());
  std::vector<Value> outputs;
  Status ran;
  StatusOr<std::unique_ptr<DeviceGraph>> graph = Internal("not recorded");
  {
    // Every buffer allocated while recording (intermediates, outputs, the kernels'
    // workspaces) is the graph's until it goes: each launch writes them again.
    AllocationHold hold(allocator_);
    REMEX_RETURN_IF_ERROR(device.BeginCapture());
    recording_ = true;
    ran = Run(fn, inputs, unbound, outputs, nullptr);
    recording_ = false;
    graph = device.EndCapture();
    entry.held = hold.buffers();
  }
  if (!ran.ok()) return ran;
  if (!graph.ok()) return graph.status();
  // The planned arenas it writes (made by an earlier call, or while recording).
  for (const FunctionState& f : functions_) {
    for (const auto& arena : f.arenas) {
      if (arena && &arena->device() == &device) entry.held.push_back(arena);
    }
  }
  for (Value& v : outputs) entry.outputs.push_back(std::move(v.tensor));
  entry.body = last_function_;
  entry.graph = std::move(graph).value();
  ++graph_stats_.recordings;
  ++graph_stats_.live;
  graph_stats_.nodes += entry.graph->size();
  return OkStatus();
}

Status VirtualMachine::LaunchGraph(int fn, GraphEntry& entry, std::vector<Value>& outputs) {
  FunctionState& state = functions_[fn];
  const FunctionDef& def = executable_->def().functions[fn];
  Device& device = allocator_->device();
  for (size_t i = 0; i < entry.inputs.size(); ++i) {
    const TensorPtr& given = state.inputs[i].tensor;
    REMEX_RETURN_IF_ERROR(CopyBox(device, *given, *entry.inputs[i], 0, 0));
  }
  REMEX_RETURN_IF_ERROR(device.BeforeKernelLaunch());
  REMEX_RETURN_IF_ERROR(entry.graph->Launch().WithContext("function '" + def.name + "': device graph"));
  outputs.clear();
  for (size_t k = 0; k < entry.outputs.size(); ++k) {
    const TensorPtr& produced = entry.outputs[k];
    TensorPtr out = state.bound_outputs[k];
    if (out) {
      if (out->dtype != produced->dtype || out->shape != produced->shape) {
        return InvalidArgument("buffer bound to output '" + def.outputs[k].name + "' is " +
                               std::string(DTypeName(out->dtype)) + " " + ShapeToString(out->shape) +
                               " but this call produces " + std::string(DTypeName(produced->dtype)) + " " +
                               ShapeToString(produced->shape));
      }
    } else {
      REMEX_ASSIGN_OR_RETURN(out, Allocate(*allocator_, produced->dtype, produced->shape));
    }
    REMEX_RETURN_IF_ERROR(device.CopyOnDevice(out->data(), produced->data(), produced->nbytes()));
    outputs.push_back(Value::OfTensor(std::move(out)));
  }
  last_function_ = entry.body;
  last_invoke_graph_ = true;
  ++graph_stats_.launches;
  return OkStatus();
}

}  // namespace remex::vm
