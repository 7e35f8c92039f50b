// The executable verifier: run once at load so that the interpreter can trust indices.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "vm/executable.h"

namespace remex::vm {
namespace {

// Block-register states the dataflow pass may keep for one function (3 bytes each):
// beyond it the executable is refused rather than verified with gigabytes.
constexpr size_t kMaxVerifierStates = size_t{1} << 26;
// Work the pass may do for one function (instructions walked plus registers copied):
// a fixpoint is linear for real executables, but a crafted one (a chain of Moves around
// a loop) could make it quadratic; it is refused past this bound (about a second).
constexpr uint64_t kMaxVerifierSteps = uint64_t{1} << 28;

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
    return CheckDataflow();
  }

  // What a register holds at a point of the code.
  // kList: a sequence (ListNew, the Seq opcodes, a sequence input); kNone: an empty
  // optional (OptNone, or an optional input the caller left empty).
  enum class Holds : uint8_t { kNothing, kReadOnly, kAllocated, kOutput, kList, kNone };
  // Where a register's tensor lives: the VM's two memory spaces (the device's memory,
  // and host memory for host kernels and data-dependent values). kMixed: different
  // spaces on different paths into this point.
  enum class Space : uint8_t { kNone, kDevice, kHost, kMixed };
  // What a register may hold at run time, one bit per kind of the VM's register objects
  // (vm.cc's Object), joined over all paths into a point. The VM reads a register as a
  // tensor, a shape or a list and fails (INTERNAL) when it holds anything else, so every
  // such read must see exactly that kind on every path.
  static constexpr uint8_t kMayBeUnset = 1;    // not written on some path (or killed)
  static constexpr uint8_t kMayBeTensor = 2;
  static constexpr uint8_t kMayBeShape = 4;    // an InvokeShapeFunc output
  static constexpr uint8_t kMayBeList = 8;     // a sequence
  static constexpr uint8_t kMayBeNoValue = 16; // an empty optional
  struct Reg {
    Holds holds = Holds::kNothing;
    Space space = Space::kNone;
    uint8_t may = kMayBeUnset;
    // On some path the register is an empty optional instead (an If whose branches give
    // an optional with and without a value): OptGet checks it at run time.
    bool maybe_none() const { return (may & kMayBeNoValue) != 0; }
    bool operator==(const Reg&) const = default;
  };
  static Reg TensorReg(Holds holds, Space space) { return {holds, space, kMayBeTensor}; }
  static Reg ListReg() { return {Holds::kList, Space::kNone, kMayBeList}; }

  // One forward dataflow pass over the control-flow graph (If, IfDimIn, Goto and
  // LoopCheck jump) checks that
  //  - kernels write only into tensors the function allocated itself, and the function
  //    returns only tensors made by AllocOutput: a hostile executable can neither
  //    overwrite its constants or the caller's inputs nor return them in place of an
  //    output (which would leave a bound output buffer unwritten);
  //  - every tensor a kernel reads or writes lives where the kernel reads or writes it
  //    (kernels::InputMemoryOf: host kernels and kData inputs in host memory, the rest
  //    in the device's; outputs in the kernel's own), and every tensor a Loop scan list
  //    collects is in device memory: a device pointer handed to a host kernel would be
  //    dereferenced on the host, and a host pointer in a device kernel is an illegal
  //    address that breaks a GPU context for every session. (Shape functions' data
  //    inputs, If and Loop conditions are read through a counted copy wherever they live.)
  //  - every register the VM reads as a tensor, a shape or a list holds one on every
  //    path (Reg::may): a register read before any write on some path, or holding a
  //    shape where a tensor is read, would fail at run time as INTERNAL.
  // Where paths join, a register that holds different things on them holds "nothing",
  // and one in different spaces is kMixed, which no kernel accepts. State is kept at
  // the entries of basic blocks only; each (block, register) can only go down the
  // lattice, so the propagation ends after at most blocks x registers changes; then
  // each reachable block is walked once more from its final entry state to check.
  Status CheckDataflow() const {
    const size_t n = fn_.code.size();
    const size_t nregs = static_cast<size_t>(fn_.num_registers);
    // Block leaders: the entry, every jump target, and every instruction after a jump.
    std::vector<int32_t> block_of(n, -1);
    auto lead = [&](size_t pc) {
      if (pc < n) block_of[pc] = 0;
    };
    lead(0);
    for (size_t pc = 0; pc < n; ++pc) {
      const Instruction& inst = fn_.code[pc];
      const auto& s = inst.scalars;
      switch (inst.op) {
        case Opcode::kGoto: lead(static_cast<size_t>(s[0])); lead(pc + 1); break;
        case Opcode::kIf: lead(static_cast<size_t>(s[1])); lead(pc + 1); break;
        case Opcode::kLoopCheck: lead(static_cast<size_t>(s[3])); lead(pc + 1); break;
        case Opcode::kIfDimIn: lead(static_cast<size_t>(s[4])); lead(pc + 1); break;
        case Opcode::kRet:
        case Opcode::kTailCall: lead(pc + 1); break;
        default: break;
      }
    }
    size_t blocks = 0;
    for (size_t pc = 0; pc < n; ++pc) {
      if (block_of[pc] == 0) block_of[pc] = static_cast<int32_t>(blocks++);
    }
    if (blocks * nregs > kMaxVerifierStates) {
      return ResourceExhausted("function '" + fn_.name + "': " + std::to_string(blocks) + " blocks x " +
                               std::to_string(nregs) + " registers exceed what the verifier tracks (" +
                               std::to_string(kMaxVerifierStates) + " block-register states)");
    }
    std::vector<Reg> in_state(blocks * nregs);
    std::vector<bool> seen(blocks, false);
    std::vector<size_t> work;  // block leaders' pcs
    std::vector<size_t> leader(blocks);
    for (size_t pc = 0; pc < n; ++pc) {
      if (block_of[pc] >= 0) leader[static_cast<size_t>(block_of[pc])] = pc;
    }
    std::vector<Reg> entry(nregs);
    for (size_t i = 0; i < fn_.inputs.size(); ++i) {
      const ValueKind kind = fn_.inputs[i].kind;
      // A sequence input is a fresh list per call (the VM copies the caller's), so the
      // function may append to it; its elements, like tensor inputs, are read-only.
      entry[i] = IsSequenceKind(kind) ? ListReg() : TensorReg(Holds::kReadOnly, Space::kDevice);
      if (IsOptionalKind(kind)) entry[i].may |= kMayBeNoValue;
    }
    auto flow = [&](size_t to, const std::vector<Reg>& state) {
      const size_t b = static_cast<size_t>(block_of[to]);
      // data() + offset, not &in_state[...]: a function may have no registers at all.
      Reg* into = in_state.data() + b * nregs;
      if (!seen[b]) {
        seen[b] = true;
        std::copy(state.begin(), state.end(), into);
        work.push_back(b);
        return;
      }
      bool changed = false;
      for (size_t r = 0; r < nregs; ++r) {
        Reg& have = into[r];
        const Reg& got = state[r];
        const Reg before = have;
        // `may` only grows; holds goes kNone -> a value -> kNothing at most, space
        // towards kMixed: the propagation ends.
        have.may |= got.may;
        if (have.holds == Holds::kNone && got.holds != Holds::kNone && got.holds != Holds::kNothing) {
          // An empty optional on one path and a value on the other: the value, maybe
          // none (kMayBeNoValue, from the union above).
          have.holds = got.holds;
          have.space = got.space;
        } else if (got.holds == Holds::kNone && have.holds != Holds::kNone) {
          // A value, and an empty optional on this path: the value, maybe none.
        } else {
          if (have.holds != got.holds) have.holds = Holds::kNothing;
          if (have.space != got.space) have.space = Space::kMixed;
        }
        if (!(have == before)) changed = true;
      }
      if (changed) work.push_back(b);
    };
    auto space_of = [](int64_t m) { return m == 1 ? Space::kHost : Space::kDevice; };
    auto space_name = [](Space sp) {
      switch (sp) {
        case Space::kDevice: return "device memory";
        case Space::kHost: return "host memory";
        case Space::kMixed: return "device or host memory, depending on the path taken";
        default: return "no tensor";
      }
    };
    flow(0, entry);
    std::vector<Reg> regs(nregs);
    // The VM reads register r as one of the kinds in `want` (a tensor, a shape, a list;
    // an empty optional where it takes one): refused unless it holds one on every path.
    auto need = [&](size_t pc, int64_t r, uint8_t want) -> Status {
      const uint8_t may = regs[static_cast<size_t>(r)].may;
      if ((may & ~want) == 0) return OkStatus();
      const std::string reg = "register %" + std::to_string(r);
      if (may & kMayBeUnset) {
        return Error(pc, reg + " is read (as " + KindNames(want) + ") before it is written on some path");
      }
      return Error(pc, reg + " is read as " + KindNames(want) + " but may hold " +
                           KindNames(static_cast<uint8_t>(may & ~want)) + " on some path");
    };
    uint64_t steps = 0;
    // Walks block b from its entry state: with `check`, every rule is checked (on the
    // final states, after the fixpoint); without, the state only flows to successors.
    auto walk = [&](size_t b, bool check) -> Status {
      std::copy(in_state.data() + b * nregs, in_state.data() + (b + 1) * nregs, regs.begin());
      steps += nregs;
      for (size_t pc = leader[b];; ++pc) {
        if (++steps > kMaxVerifierSteps) {
          return ResourceExhausted("function '" + fn_.name + "': verification needs more than " +
                                   std::to_string(kMaxVerifierSteps) + " steps (" + std::to_string(blocks) +
                                   " blocks, " + std::to_string(nregs) + " registers)");
        }
        const Instruction& inst = fn_.code[pc];
        const auto& s = inst.scalars;
        bool falls_through = true;
        auto jump = [&](int64_t to) {
          if (!check) flow(static_cast<size_t>(to), regs);
        };
        switch (inst.op) {
          case Opcode::kMove: regs[s[0]] = regs[s[1]]; break;
          case Opcode::kLoadConst: regs[s[0]] = TensorReg(Holds::kReadOnly, space_of(s[2])); break;
          case Opcode::kAllocTensor: regs[s[0]] = TensorReg(Holds::kAllocated, space_of(s[2])); break;
          case Opcode::kAllocTensorReg:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeShape));
            regs[s[0]] = TensorReg(Holds::kAllocated, space_of(s[3]));
            break;
          case Opcode::kAllocPlanned:
            if (check && s[2] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeShape));
            regs[s[0]] = TensorReg(Holds::kAllocated, space_of(s[3]));
            break;
          case Opcode::kCopyToHost:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kHost);
            break;
          case Opcode::kCopyToDevice:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kDevice);
            break;
          case Opcode::kIncrement:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kHost);
            break;
          case Opcode::kListStack:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeList));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kDevice);
            break;
          case Opcode::kAllocOutput:
            if (check && s[3] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[3], kMayBeShape));
            regs[s[0]] = TensorReg(Holds::kOutput, Space::kDevice);
            break;
          case Opcode::kConcatAppend:
            for (int64_t r : inst.lists[0]) {
              if (!check) break;
              REMEX_RETURN_IF_ERROR(need(pc, r, kMayBeTensor));
              if (regs[r].space != Space::kDevice) {
                return Error(pc, "ConcatAppend of %" + std::to_string(r) + ", which holds " +
                                     space_name(regs[r].space) + ", not device memory");
              }
            }
            regs[s[0]] = TensorReg(Holds::kOutput, Space::kDevice);
            break;
          case Opcode::kKillRegister: regs[s[0]] = {}; break;
          case Opcode::kListNew: regs[s[0]] = ListReg(); break;
          case Opcode::kListAppend:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[0], kMayBeList));
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor));
            if (check && regs[s[0]].holds != Holds::kList) {
              return Error(pc, "ListAppend to %" + std::to_string(s[0]) + ", which holds no list");
            }
            if (check && regs[s[1]].space != Space::kDevice) {
              return Error(pc, "ListAppend of %" + std::to_string(s[1]) + ", which holds " +
                                   space_name(regs[s[1]].space) + ", to a list stacked in device memory");
            }
            break;
          case Opcode::kSeqConstruct:
          case Opcode::kSeqInsert: {
            const bool insert = inst.op == Opcode::kSeqInsert;
            if (check && insert) REMEX_RETURN_IF_ERROR(check_list(pc, regs, s[1]));
            std::vector<int64_t> elements = insert ? std::vector<int64_t>{s[2]} : inst.lists[0];
            if (check && insert && s[3] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[3], kMayBeTensor));
            for (int64_t r : elements) {
              if (check) REMEX_RETURN_IF_ERROR(need(pc, r, kMayBeTensor));
              if (check && (regs[r].space != Space::kDevice || regs[r].maybe_none() ||
                            (regs[r].holds != Holds::kReadOnly && regs[r].holds != Holds::kAllocated &&
                             regs[r].holds != Holds::kOutput))) {
                return Error(pc, std::string(OpcodeName(inst.op)) + " of %" + std::to_string(r) +
                                     ", which is not a tensor in device memory");
              }
            }
            regs[s[0]] = ListReg();
            break;
          }
          case Opcode::kSeqAt:
            if (check) REMEX_RETURN_IF_ERROR(check_list(pc, regs, s[1]));
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeTensor));
            regs[s[0]] = TensorReg(Holds::kReadOnly, Space::kDevice);
            break;
          case Opcode::kSeqErase:
            if (check) REMEX_RETURN_IF_ERROR(check_list(pc, regs, s[1]));
            if (check && s[2] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeTensor));
            regs[s[0]] = ListReg();
            break;
          case Opcode::kSeqLength:
            if (check) REMEX_RETURN_IF_ERROR(check_list(pc, regs, s[1]));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kHost);
            break;
          case Opcode::kOptNone: regs[s[0]] = {Holds::kNone, Space::kNone, kMayBeNoValue}; break;
          case Opcode::kOptHas:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor | kMayBeList | kMayBeNoValue));
            regs[s[0]] = TensorReg(Holds::kAllocated, Space::kHost);
            break;
          case Opcode::kOptGet: {
            // At run time an empty optional stops here (INVALID_ARGUMENT); anything
            // else is copied.
            Reg got = regs[s[1]];
            got.may &= static_cast<uint8_t>(~kMayBeNoValue);
            regs[s[0]] = got.holds == Holds::kNone || got.may == 0 ? Reg{} : got;
            break;
          }
          case Opcode::kInvokeShapeFunc:
            for (size_t i = 0; check && i < inst.lists[0].size(); ++i) {
              if (inst.lists[0][i] >= 0) REMEX_RETURN_IF_ERROR(need(pc, inst.lists[0][i], kMayBeTensor));
            }
            for (int64_t r : inst.lists[1]) regs[r] = {Holds::kNothing, Space::kNone, kMayBeShape};
            break;
          case Opcode::kInvokeKernel: {
            if (!check) break;
            for (int64_t r : inst.lists[0]) {
              if (r >= 0) REMEX_RETURN_IF_ERROR(need(pc, r, kMayBeTensor));
            }
            for (int64_t r : inst.lists[1]) REMEX_RETURN_IF_ERROR(need(pc, r, kMayBeTensor));
            const KernelEntry& k = def_.kernels[s[0]];
            const kernels::OpDef& op = *registry_.FindOp(k.op, k.version);  // checked by CheckKernelArity
            auto check_space = [&](int64_t r, Space want, const std::string& role) -> Status {
              if (regs[r].space == want) return OkStatus();
              return Error(pc, role + " %" + std::to_string(r) + " of " + (k.host ? "host" : "device") + " kernel " +
                                   std::to_string(s[0]) + " (" + k.op + ") holds " + space_name(regs[r].space) +
                                   ", not " + space_name(want));
            };
            const auto& ins = inst.lists[0];
            for (size_t i = 0; i < ins.size(); ++i) {
              if (ins[i] < 0) continue;
              switch (kernels::InputMemoryOf(op, i, k.host)) {
                case kernels::InputMemory::kHost:
                  REMEX_RETURN_IF_ERROR(check_space(ins[i], Space::kHost, "input " + std::to_string(i)));
                  break;
                case kernels::InputMemory::kDevice:
                  REMEX_RETURN_IF_ERROR(check_space(ins[i], Space::kDevice, "input " + std::to_string(i)));
                  break;
                case kernels::InputMemory::kAny:  // its data is never read
                  break;
              }
            }
            for (int64_t r : inst.lists[1]) {
              if (regs[r].holds != Holds::kAllocated && regs[r].holds != Holds::kOutput) {
                return Error(pc, "kernel output %" + std::to_string(r) + " is not a tensor this function allocated");
              }
              REMEX_RETURN_IF_ERROR(check_space(r, k.host ? Space::kHost : Space::kDevice, "output"));
            }
            break;
          }
          case Opcode::kRet:
            for (size_t k = 0; check && k < inst.lists[0].size(); ++k) {
              const int64_t r = inst.lists[0][k];
              const Reg& reg = regs[r];
              // The VM copies every element of a returned sequence or optional into a
              // new tensor (Run's kRet): only tensor outputs must be AllocOutput's.
              const ValueKind kind = fn_.outputs[k].kind;
              const bool tensor = reg.holds == Holds::kReadOnly || reg.holds == Holds::kAllocated ||
                                  reg.holds == Holds::kOutput;
              bool ok = false;
              switch (kind) {
                case ValueKind::kTensor: ok = reg.holds == Holds::kOutput && !reg.maybe_none(); break;
                case ValueKind::kSequence: ok = reg.holds == Holds::kList && !reg.maybe_none(); break;
                case ValueKind::kOptionalTensor: ok = (tensor && reg.space == Space::kDevice) || reg.holds == Holds::kNone; break;
                case ValueKind::kOptionalSequence: ok = reg.holds == Holds::kList || reg.holds == Holds::kNone; break;
              }
              if (!ok) {
                return Error(pc, "Ret of %" + std::to_string(r) + " as output " + std::to_string(k) + " (" +
                                     ValueKindName(kind) + "), which " +
                                     (kind == ValueKind::kTensor ? "AllocOutput did not make"
                                                                 : "does not hold a value of that kind on every path"));
              }
              // Implied by the above (holds is one kind on every path); kept as the rule
              // the VM's reads need.
              REMEX_RETURN_IF_ERROR(need(pc, r, KindsOf(kind)));
            }
            falls_through = false;
            break;
          case Opcode::kTailCall: {
            // The callee starts from its inputs as this function's entry does: each
            // must hold a value of the callee's input kind on every path, a tensor in
            // device memory.
            const FunctionDef& callee = def_.functions[s[0]];
            for (size_t i = 0; check && i < inst.lists[0].size(); ++i) {
              const int64_t r = inst.lists[0][i];
              const ValueKind kind = callee.inputs[i].kind;
              REMEX_RETURN_IF_ERROR(need(pc, r, KindsOf(kind)));
              if (!IsSequenceKind(kind) && (regs[r].may & kMayBeTensor) && regs[r].space != Space::kDevice) {
                return Error(pc, "TailCall passes %" + std::to_string(r) + ", which holds " +
                                     space_name(regs[r].space) + ", as input " + std::to_string(i) +
                                     " (inputs are in device memory)");
              }
            }
            falls_through = false;  // the callee's outputs are this function's
            break;
          }
          case Opcode::kGoto:
            jump(s[0]);
            falls_through = false;
            break;
          case Opcode::kIfDimIn:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[0], kMayBeTensor));
            jump(s[4]);
            break;
          case Opcode::kIf:
            if (check) REMEX_RETURN_IF_ERROR(need(pc, s[0], kMayBeTensor));
            jump(s[1]);
            break;
          case Opcode::kLoopCheck:
            if (check) {
              REMEX_RETURN_IF_ERROR(need(pc, s[0], kMayBeTensor));
              if (s[1] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[1], kMayBeTensor));
              if (s[2] >= 0) REMEX_RETURN_IF_ERROR(need(pc, s[2], kMayBeTensor));
            }
            jump(s[3]);
            break;
          case Opcode::kCount: break;
        }
        if (!falls_through) return OkStatus();
        if (pc + 1 >= n) return Error(pc, "control falls off the end of the function");
        if (block_of[pc + 1] >= 0) {  // the next block starts: hand the state over
          jump(static_cast<int64_t>(pc + 1));
          return OkStatus();
        }
      }
    };
    while (!work.empty()) {
      const size_t b = work.back();
      work.pop_back();
      REMEX_RETURN_IF_ERROR(walk(b, /*check=*/false));
    }
    for (size_t b = 0; b < blocks; ++b) {
      if (seen[b]) REMEX_RETURN_IF_ERROR(walk(b, /*check=*/true));
    }
    return OkStatus();
  }

 private:
  Status Error(size_t pc, const std::string& what) const {
    return InvalidArgument("function '" + fn_.name + "', instruction " + std::to_string(pc) +
                           ": " + what);
  }

  // The register kinds a value of `kind` may be (Reg::may).
  static uint8_t KindsOf(ValueKind kind) {
    switch (kind) {
      case ValueKind::kTensor: return kMayBeTensor;
      case ValueKind::kSequence: return kMayBeList;
      case ValueKind::kOptionalTensor: return kMayBeTensor | kMayBeNoValue;
      case ValueKind::kOptionalSequence: return kMayBeList | kMayBeNoValue;
    }
    return 0;
  }

  // "a tensor or an empty optional", for error messages.
  static std::string KindNames(uint8_t kinds) {
    static constexpr std::pair<uint8_t, const char*> kNames[] = {
        {kMayBeUnset, "nothing"}, {kMayBeTensor, "a tensor"}, {kMayBeShape, "a shape"},
        {kMayBeList, "a sequence"}, {kMayBeNoValue, "an empty optional"}};
    std::string out;
    for (const auto& [bit, name] : kNames) {
      if (!(kinds & bit)) continue;
      if (!out.empty()) out += " or ";
      out += name;
    }
    return out;
  }

  // A Seq opcode's sequence operand must be a list on every path.
  template <typename Regs>
  Status check_list(size_t pc, const Regs& regs, int64_t r) const {
    if (regs[r].holds == Holds::kList && !regs[r].maybe_none()) return OkStatus();
    return Error(pc, std::string(OpcodeName(fn_.code[pc].op)) + " of %" + std::to_string(r) +
                         ", which does not hold a sequence on every path");
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
    const kernels::OpDef* op = registry_.FindOp(entry.op, entry.version);
    if (!op) {
      return Unimplemented("unsupported op '" + entry.op + "' version " + std::to_string(entry.version) + " in " +
                           name);
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
    // The decoder refuses unknown opcodes; a hand-built ExecutableDef may still hold one.
    if (static_cast<int>(inst.op) < 0 || static_cast<int>(inst.op) >= kOpcodeCount) {
      return Error(pc, "invalid opcode " + std::to_string(static_cast<int>(inst.op)));
    }
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
      case Opcode::kConcatAppend: {
        const ValueDesc& out = fn_.outputs[inst.scalars[1]];
        if (out.kind != ValueKind::kTensor) {
          return Error(pc,
                       "ConcatAppend for output '" + out.name + "', which is a " + ValueKindName(out.kind));
        }
        if (inst.lists[0].empty()) return Error(pc, "ConcatAppend of no tensors");
        break;
      }
      case Opcode::kAllocOutput: {
        const ValueDesc& out = fn_.outputs[inst.scalars[1]];
        if (out.kind != ValueKind::kTensor) {
          return Error(pc, "AllocOutput for output '" + out.name + "', which is a " + ValueKindName(out.kind));
        }
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
      if (callee.inputs[i].dtype != fn_.inputs[i].dtype || callee.inputs[i].shape.size() != fn_.inputs[i].shape.size() ||
          callee.inputs[i].kind != fn_.inputs[i].kind) {
        return Error(pc, name + ": input " + std::to_string(i) + " differs in kind, dtype or rank");
      }
    }
    if (callee.outputs.size() != fn_.outputs.size()) {
      return Error(pc, name + ": the callee has " + std::to_string(callee.outputs.size()) + " outputs, this function " +
                           std::to_string(fn_.outputs.size()));
    }
    for (size_t i = 0; i < callee.outputs.size(); ++i) {
      if (callee.outputs[i].dtype != fn_.outputs[i].dtype ||
          callee.outputs[i].shape.size() != fn_.outputs[i].shape.size() || callee.outputs[i].kind != fn_.outputs[i].kind) {
        return Error(pc, name + ": output " + std::to_string(i) + " differs in kind, dtype or rank");
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
    if (!registry.FindOp(k.op, k.version)) {
      const std::string known = registry.SupportedVersions(k.op);
      return Unimplemented("unsupported op '" + k.op + "' version " + std::to_string(k.version) +
                           (k.node_name.empty() ? "" : " in node '" + k.node_name + "'") +
                           (known.empty() ? "" : " (this server implements opsets " + known + ")"));
    }
  }
  for (const auto& fn : def.functions) {
    REMEX_RETURN_IF_ERROR(FunctionVerifier(def, fn, registry).Run());
  }
  return OkStatus();
}

}  // namespace remex::vm
