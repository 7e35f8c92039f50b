// The executable verifier: run once at load so that the interpreter can trust indices.
#include <cctype>
#include <string>
#include <vector>

#include "vm/executable.h"

namespace remex::vm {
namespace {

class FunctionVerifier {
 public:
  FunctionVerifier(const ExecutableDef& def, const FunctionDef& fn,
                   const kernels::KernelRegistry& registry)
      : def_(def), fn_(fn), registry_(registry) {}

  Status Run() {
    if (fn_.num_registers < 0) return Error(0, "negative register count");
    for (const auto& v : fn_.inputs) REMEX_RETURN_IF_ERROR(CheckDesc(v, "input"));
    for (const auto& v : fn_.outputs) REMEX_RETURN_IF_ERROR(CheckDesc(v, "output"));
    if (fn_.inputs.size() > static_cast<size_t>(fn_.num_registers)) {
      return Error(0, "fewer registers than inputs");
    }
    if (fn_.code.empty() || (fn_.code.back().op != Opcode::kRet && fn_.code.back().op != Opcode::kTailCall)) {
      return Error(fn_.code.size(), "function does not end with Ret or TailCall");
    }
    for (size_t pc = 0; pc < fn_.code.size(); ++pc) {
      REMEX_RETURN_IF_ERROR(CheckInstruction(pc, fn_.code[pc]));
    }
    return CheckWrites();
  }

  // What a register holds at a point of the code.
  enum class Holds : uint8_t { kNothing, kReadOnly, kAllocated, kOutput, kList };

  // Kernels write only into tensors the function allocated itself, and the function
  // returns only tensors made by AllocOutput: a hostile executable can neither
  // overwrite its constants or the caller's inputs nor return them in place of an
  // output (which would leave a bound output buffer unwritten). A forward dataflow
  // pass over the control-flow graph (If, Goto and LoopCheck jump): where paths join,
  // a register that holds different things on them holds "nothing" for the check.
  Status CheckWrites() const {
    const size_t n = fn_.code.size();
    const size_t nregs = static_cast<size_t>(fn_.num_registers);
    std::vector<std::vector<Holds>> in_state(n);
    std::vector<bool> seen(n, false);
    std::vector<size_t> work;
    std::vector<Holds> entry(nregs, Holds::kNothing);
    for (size_t i = 0; i < fn_.inputs.size(); ++i) entry[i] = Holds::kReadOnly;
    auto flow = [&](size_t to, const std::vector<Holds>& state) {
      if (!seen[to]) {
        seen[to] = true;
        in_state[to] = state;
        work.push_back(to);
        return;
      }
      bool changed = false;
      for (size_t r = 0; r < nregs; ++r) {
        if (in_state[to][r] != state[r] && in_state[to][r] != Holds::kNothing) {
          in_state[to][r] = Holds::kNothing;
          changed = true;
        }
      }
      if (changed) work.push_back(to);
    };
    flow(0, entry);
    while (!work.empty()) {
      size_t pc = work.back();
      work.pop_back();
      std::vector<Holds> regs = in_state[pc];
      const Instruction& inst = fn_.code[pc];
      const auto& s = inst.scalars;
      switch (inst.op) {
        case Opcode::kMove: regs[s[0]] = regs[s[1]]; break;
        case Opcode::kLoadConst: regs[s[0]] = Holds::kReadOnly; break;
        case Opcode::kAllocTensor:
        case Opcode::kAllocTensorReg:
        case Opcode::kAllocPlanned:
        case Opcode::kCopyToHost:
        case Opcode::kCopyToDevice:
        case Opcode::kIncrement:
        case Opcode::kListStack: regs[s[0]] = Holds::kAllocated; break;
        case Opcode::kAllocOutput: regs[s[0]] = Holds::kOutput; break;
        case Opcode::kKillRegister: regs[s[0]] = Holds::kNothing; break;
        case Opcode::kListNew: regs[s[0]] = Holds::kList; break;
        case Opcode::kListAppend:
          if (regs[s[0]] != Holds::kList) return Error(pc, "ListAppend to %" + std::to_string(s[0]) + ", which holds no list");
          break;
        case Opcode::kInvokeShapeFunc:
          for (int64_t r : inst.lists[1]) regs[r] = Holds::kNothing;
          break;
        case Opcode::kInvokeKernel:
          for (int64_t r : inst.lists[1]) {
            if (regs[r] != Holds::kAllocated && regs[r] != Holds::kOutput) {
              return Error(pc, "kernel output %" + std::to_string(r) + " is not a tensor this function allocated");
            }
          }
          break;
        case Opcode::kRet:
          for (int64_t r : inst.lists[0]) {
            if (regs[r] != Holds::kOutput) {
              return Error(pc, "Ret of %" + std::to_string(r) + ", which AllocOutput did not make");
            }
          }
          continue;  // no successor
        case Opcode::kTailCall:
          continue;  // no successor: the callee's outputs are this function's
        case Opcode::kGoto:
          flow(static_cast<size_t>(s[0]), regs);
          continue;
        case Opcode::kIfDimIn:
          flow(static_cast<size_t>(s[4]), regs);
          break;
        case Opcode::kIf:
          flow(static_cast<size_t>(s[1]), regs);
          break;
        case Opcode::kLoopCheck:
          flow(static_cast<size_t>(s[3]), regs);
          break;
        case Opcode::kCount: break;
      }
      if (pc + 1 >= n) return Error(pc, "control falls off the end of the function");
      flow(pc + 1, regs);
    }
    return OkStatus();
  }

 private:
  Status Error(size_t pc, const std::string& what) const {
    return InvalidArgument("function '" + fn_.name + "', instruction " + std::to_string(pc) +
                           ": " + what);
  }

  Status CheckDesc(const ValueDesc& v, const char* kind) const {
    if (DTypeSize(v.dtype) == 0) return Error(0, std::string(kind) + " '" + v.name + "' has no dtype");
    return OkStatus();
  }

  Status CheckOperand(size_t pc, char kind, int64_t v) const {
    auto bad = [&](const std::string& what) {
      return Error(pc, what + " " + std::to_string(v) + " out of range");
    };
    switch (kind) {
      case 'd':
      case 'r':
        if (v < 0 || v >= fn_.num_registers) return bad("register");
        break;
      case 'o':
        if (v < -1 || v >= fn_.num_registers) return bad("register");
        break;
      case 'k':
        if (v < 0 || static_cast<size_t>(v) >= def_.kernels.size()) return bad("kernel");
        break;
      case 'c':
        if (v < 0 || static_cast<size_t>(v) >= def_.constants.size()) return bad("constant");
        break;
      case 't':
        if (v < 0 || v > 64 || !DTypeFromOnnx(static_cast<int32_t>(v))) return bad("dtype");
        break;
      case 'n':
        if (v < 0 || static_cast<size_t>(v) >= fn_.outputs.size()) return bad("output index");
        break;
      case 'i':
        if (v < 0) return bad("dimension");
        break;
      case 'm':
        if (v != 0 && v != 1) return bad("memory space");
        break;
      case 'j':
        if (v < 0 || static_cast<size_t>(v) >= fn_.code.size()) return bad("jump target");
        break;
      case 'f':
        if (v < 0 || static_cast<size_t>(v) >= def_.functions.size()) return bad("function");
        break;
      default:
        return Error(pc, "unknown operand kind");
    }
    return OkStatus();
  }

  Status CheckKernelArity(size_t pc, int64_t k, size_t num_inputs, size_t num_outputs) const {
    const KernelEntry& entry = def_.kernels[k];
    std::string name = "kernel " + std::to_string(k) + " (" + entry.op +
                       (entry.node_name.empty() ? "" : ", node '" + entry.node_name + "'") + ")";
    const kernels::OpDef* op = registry_.FindOp(entry.op);
    if (!op) {
      return Unimplemented("unsupported op '" + entry.op + "' in " + name);
    }
    if (num_inputs != static_cast<size_t>(entry.num_inputs) ||
        num_outputs != static_cast<size_t>(entry.num_outputs)) {
      return Error(pc, name + ": operand counts do not match the kernel table");
    }
    if (static_cast<int>(num_inputs) < op->min_inputs ||
        (op->max_inputs >= 0 && static_cast<int>(num_inputs) > op->max_inputs) ||
        static_cast<int>(num_outputs) < op->min_outputs ||
        (op->max_outputs >= 0 && static_cast<int>(num_outputs) > op->max_outputs)) {
      return Error(pc, name + ": " + std::to_string(num_inputs) + " inputs and " +
                           std::to_string(num_outputs) + " outputs is not a valid arity");
    }
    return OkStatus();
  }

  Status CheckInstruction(size_t pc, const Instruction& inst) const {
    std::string_view sig = OpcodeSignature(inst.op);
    size_t s = 0, l = 0;
    for (char c : sig) {
      if (std::islower(static_cast<unsigned char>(c))) {
        if (s >= inst.scalars.size()) return Error(pc, "missing operand");
        REMEX_RETURN_IF_ERROR(CheckOperand(pc, c, inst.scalars[s++]));
      } else {
        if (l >= inst.lists.size()) return Error(pc, "missing operand list");
        char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (int64_t v : inst.lists[l++]) REMEX_RETURN_IF_ERROR(CheckOperand(pc, kind, v));
      }
    }
    switch (inst.op) {
      case Opcode::kInvokeKernel:
      case Opcode::kInvokeShapeFunc:
        return CheckKernelArity(pc, inst.scalars[0], inst.lists[0].size(), inst.lists[1].size());
      case Opcode::kRet:
        if (inst.lists[0].size() != fn_.outputs.size()) {
          return Error(pc, "Ret returns " + std::to_string(inst.lists[0].size()) +
                               " values for " + std::to_string(fn_.outputs.size()) + " outputs");
        }
        break;
      case Opcode::kAllocOutput: {
        const ValueDesc& out = fn_.outputs[inst.scalars[1]];
        if (static_cast<int32_t>(out.dtype) != inst.scalars[2]) {
          return Error(pc, "AllocOutput dtype differs from output '" + out.name + "'");
        }
        break;
      }
      case Opcode::kAllocPlanned: {
        const auto& s = inst.scalars;  // d t o m offset size
        const uint64_t arena = fn_.arena_bytes[s[3]];
        if (static_cast<uint64_t>(s[4]) > arena || static_cast<uint64_t>(s[5]) > arena - static_cast<uint64_t>(s[4])) {
          return Error(pc, "slot [" + std::to_string(s[4]) + ", +" + std::to_string(s[5]) +
                               ") lies outside the arena of " + std::to_string(arena) + " bytes");
        }
        if (s[2] < 0) {
          auto n = NumElements(inst.lists[0]);
          size_t esize = DTypeSize(static_cast<DType>(s[1]));
          if (!n || (esize && *n > s[5] / static_cast<int64_t>(esize))) {
            return Error(pc, "static shape " + ShapeToString(inst.lists[0]) + " does not fit its slot of " +
                                 std::to_string(s[5]) + " bytes");
          }
        }
        break;
      }
      case Opcode::kTailCall:
        return CheckTailCall(pc, inst);
      default:
        break;
    }
    return OkStatus();
  }

  // The callee takes this function's inputs (same count, dtypes and ranks; it may fix
  // dims this function leaves dynamic, checked at run time), returns the same outputs,
  // and makes no TailCall itself, so calls cannot recurse.
  Status CheckTailCall(size_t pc, const Instruction& inst) const {
    const FunctionDef& callee = def_.functions[inst.scalars[0]];
    const std::string name = "TailCall of '" + callee.name + "'";
    if (&callee == &fn_) return Error(pc, name + ": a function cannot call itself");
    for (const Instruction& i : callee.code) {
      if (i.op == Opcode::kTailCall) return Error(pc, name + ", which makes TailCalls itself");
    }
    if (inst.lists[0].size() != callee.inputs.size() || callee.inputs.size() != fn_.inputs.size()) {
      return Error(pc, name + ": passes " + std::to_string(inst.lists[0].size()) + " inputs; the callee takes " +
                           std::to_string(callee.inputs.size()) + " and this function " +
                           std::to_string(fn_.inputs.size()));
    }
    for (size_t i = 0; i < callee.inputs.size(); ++i) {
      if (callee.inputs[i].dtype != fn_.inputs[i].dtype || callee.inputs[i].shape.size() != fn_.inputs[i].shape.size()) {
        return Error(pc, name + ": input " + std::to_string(i) + " differs in dtype or rank");
      }
    }
    if (callee.outputs.size() != fn_.outputs.size()) {
      return Error(pc, name + ": the callee has " + std::to_string(callee.outputs.size()) + " outputs, this function " +
                           std::to_string(fn_.outputs.size()));
    }
    for (size_t i = 0; i < callee.outputs.size(); ++i) {
      if (callee.outputs[i].dtype != fn_.outputs[i].dtype ||
          callee.outputs[i].shape.size() != fn_.outputs[i].shape.size()) {
        return Error(pc, name + ": output " + std::to_string(i) + " differs in dtype or rank");
      }
    }
    return OkStatus();
  }

  const ExecutableDef& def_;
  const FunctionDef& fn_;
  const kernels::KernelRegistry& registry_;
};

}  // namespace

Status VerifyExecutable(const ExecutableDef& def, const kernels::KernelRegistry& registry) {
  if (def.functions.empty()) return InvalidArgument("executable has no functions");
  for (size_t i = 0; i < def.kernels.size(); ++i) {
    const KernelEntry& k = def.kernels[i];
    if (!registry.FindOp(k.op)) {
      return Unimplemented("unsupported op '" + k.op + "'" +
                           (k.node_name.empty() ? "" : " in node '" + k.node_name + "'"));
    }
  }
  for (const auto& fn : def.functions) {
    REMEX_RETURN_IF_ERROR(FunctionVerifier(def, fn, registry).Run());
  }
  return OkStatus();
}

}  // namespace remex::vm
