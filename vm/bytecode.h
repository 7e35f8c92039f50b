// VM bytecode: opcodes (from opcodes.def), decoded instructions, encoder, decoder and
// disassembler. The encoded form is a flat int64 stream: opcode, then operands in
// signature order, lists as a count followed by their items.
#pragma once

#include <cctype>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace remex::vm {

enum class Opcode : int64_t {
#define REMEX_OPCODE(name, sig, doc) k##name,
#include "vm/opcodes.def"
#undef REMEX_OPCODE
  kCount,
};

inline constexpr int kOpcodeCount = static_cast<int>(Opcode::kCount);

std::string_view OpcodeName(Opcode op);
std::string_view OpcodeSignature(Opcode op);

// One instruction, decoded. Scalar operands in `scalars` and list operands in
// `lists`, each in signature order (e.g. AllocOutput "dntoI": scalars {d, n, t, o},
// lists {I}).
struct Instruction {
  Opcode op = Opcode::kCount;
  std::vector<int64_t> scalars;
  std::vector<std::vector<int64_t>> lists;
};

// Whether `letter` (either case) is an operand kind opcodes.def defines: d r o k c t n
// i m j f.
bool IsOperandLetter(char letter);

// Whether the opcode can transfer control: its signature names a jump target (j) or a
// function (f). Passes that assume straight-line code (the memory planner) test this
// rather than list opcodes.
bool TransfersControl(Opcode op);

// Calls visit(kind, operand) for every operand of `inst` in signature order, the
// items of a list included; `kind` is the operand's signature letter in lower case
// and `operand` an int64_t (a reference when `inst` is mutable). Passes that rewrite
// operands (the linker remaps k, c and f) walk instructions with this, so a new opcode
// is handled by its letters alone. Operands missing against the signature are not
// visited (Encode and the verifier refuse such instructions).
template <typename InstructionT, typename Visit>
void VisitOperands(InstructionT& inst, Visit&& visit) {
  size_t s = 0, l = 0;
  for (char c : OpcodeSignature(inst.op)) {
    if (std::islower(static_cast<unsigned char>(c))) {
      if (s < inst.scalars.size()) visit(c, inst.scalars[s++]);
    } else if (l < inst.lists.size()) {
      const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (auto& v : inst.lists[l++]) visit(kind, v);
    }
  }
}

// Appends the encoding of `inst` to `out`; INVALID_ARGUMENT when operand counts do
// not match the opcode's signature.
Status Encode(const Instruction& inst, std::vector<int64_t>& out);
// Decodes a whole function body. INVALID_ARGUMENT (with the word offset) for an
// unknown opcode, a negative or overlong list count, or a truncated stream.
StatusOr<std::vector<Instruction>> Decode(std::span<const int64_t> code);
// "AllocOutput d=%3 n=0 t=1 o=-1 I=[1, 2]"
std::string Disassemble(const Instruction& inst);

}  // namespace remex::vm
