// VM bytecode: opcodes (from opcodes.def), decoded instructions, encoder, decoder and
// disassembler. The encoded form is a flat int64 stream: opcode, then operands in
// signature order, lists as a count followed by their items.
#pragma once

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

// Appends the encoding of `inst` to `out`; INVALID_ARGUMENT when operand counts do
// not match the opcode's signature.
Status Encode(const Instruction& inst, std::vector<int64_t>& out);
// Decodes a whole function body. INVALID_ARGUMENT (with the word offset) for an
// unknown opcode, a negative or overlong list count, or a truncated stream.
StatusOr<std::vector<Instruction>> Decode(std::span<const int64_t> code);
// "AllocOutput d=%3 n=0 t=1 o=-1 I=[1, 2]"
std::string Disassemble(const Instruction& inst);

}  // namespace remex::vm
