#include "vm/bytecode.h"

#include <cctype>

namespace remex::vm {
namespace {

struct OpInfo {
  std::string_view name;
  std::string_view signature;
};

constexpr OpInfo kOps[] = {
#define REMEX_OPCODE(name, sig, doc) {#name, sig},
#include "vm/opcodes.def"
#undef REMEX_OPCODE
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpcodeCount);

size_t CountScalars(std::string_view sig) {
  size_t n = 0;
  for (char c : sig) n += std::islower(static_cast<unsigned char>(c)) ? 1 : 0;
  return n;
}

}  // namespace

std::string_view OpcodeName(Opcode op) {
  auto i = static_cast<int64_t>(op);
  return (i >= 0 && i < kOpcodeCount) ? kOps[i].name : "Invalid";
}

std::string_view OpcodeSignature(Opcode op) {
  auto i = static_cast<int64_t>(op);
  return (i >= 0 && i < kOpcodeCount) ? kOps[i].signature : "";
}

bool IsOperandLetter(char letter) {
  const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(letter)));
  return std::string_view("drokctnimjf").find(c) != std::string_view::npos;
}

bool TransfersControl(Opcode op) {
  for (char c : OpcodeSignature(op)) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == 'j' || lower == 'f') return true;
  }
  return false;
}

Status Encode(const Instruction& inst, std::vector<int64_t>& out) {
  if (static_cast<int64_t>(inst.op) < 0 || static_cast<int64_t>(inst.op) >= kOpcodeCount) {
    return InvalidArgument("encode: invalid opcode");
  }
  std::string_view sig = OpcodeSignature(inst.op);
  size_t num_scalars = CountScalars(sig);
  if (inst.scalars.size() != num_scalars || inst.lists.size() != sig.size() - num_scalars) {
    return InvalidArgument("encode: operands of " + std::string(OpcodeName(inst.op)) +
                           " do not match signature \"" + std::string(sig) + "\"");
  }
  out.push_back(static_cast<int64_t>(inst.op));
  size_t s = 0, l = 0;
  for (char c : sig) {
    if (std::islower(static_cast<unsigned char>(c))) {
      out.push_back(inst.scalars[s++]);
    } else {
      const auto& list = inst.lists[l++];
      out.push_back(static_cast<int64_t>(list.size()));
      out.insert(out.end(), list.begin(), list.end());
    }
  }
  return OkStatus();
}

StatusOr<std::vector<Instruction>> Decode(std::span<const int64_t> code) {
  std::vector<Instruction> result;
  size_t pc = 0;
  auto truncated = [&](size_t at) {
    return InvalidArgument("bytecode truncated at word " + std::to_string(at));
  };
  while (pc < code.size()) {
    int64_t raw = code[pc];
    if (raw < 0 || raw >= kOpcodeCount) {
      return InvalidArgument("unknown opcode " + std::to_string(raw) + " at word " +
                             std::to_string(pc));
    }
    Instruction inst;
    inst.op = static_cast<Opcode>(raw);
    ++pc;
    for (char c : OpcodeSignature(inst.op)) {
      if (pc >= code.size()) return truncated(pc);
      if (std::islower(static_cast<unsigned char>(c))) {
        inst.scalars.push_back(code[pc++]);
        continue;
      }
      int64_t count = code[pc++];
      if (count < 0 || static_cast<uint64_t>(count) > code.size() - pc) {
        return InvalidArgument("bad list length " + std::to_string(count) + " at word " +
                               std::to_string(pc - 1));
      }
      inst.lists.emplace_back(code.begin() + pc, code.begin() + pc + count);
      pc += count;
    }
    result.push_back(std::move(inst));
  }
  return result;
}

std::string Disassemble(const Instruction& inst) {
  std::string s(OpcodeName(inst.op));
  size_t si = 0, li = 0;
  auto reg = [](int64_t r) { return r < 0 ? std::string("_") : "%" + std::to_string(r); };
  for (char c : OpcodeSignature(inst.op)) {
    s += ' ';
    char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool is_reg = lower == 'd' || lower == 'r' || lower == 'o';
    if (std::islower(static_cast<unsigned char>(c))) {
      if (si >= inst.scalars.size()) break;
      int64_t v = inst.scalars[si++];
      s += c;
      s += '=';
      s += is_reg ? reg(v) : std::to_string(v);
    } else {
      if (li >= inst.lists.size()) break;
      s += c;
      s += "=[";
      const auto& list = inst.lists[li++];
      for (size_t k = 0; k < list.size(); ++k) {
        if (k) s += ", ";
        s += is_reg ? reg(list[k]) : std::to_string(list[k]);
      }
      s += ']';
    }
  }
  return s;
}

}  // namespace remex::vm
