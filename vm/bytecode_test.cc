#include "vm/bytecode.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace remex::vm {
namespace bytecode_test {

TEST(BytecodeTest, EncodeDecodeRoundTrip) {
  std::vector<Instruction> prog = {
      {Opcode::kAllocOutput, {3, 0, 1, -1}, {{1, 2, 3}}},
      {Opcode::kInvokeKernel, {0}, {{0, -1, 2}, {3}}},
      {Opcode::kRet, {}, {{3}}},
  };
  std::vector<int64_t> code;
  for (const auto& inst : prog) ASSERT_TRUE(Encode(inst, code).ok());
  auto decoded = Decode(code);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), prog.size());
  for (size_t i = 0; i < prog.size(); ++i) {
    EXPECT_EQ((*decoded)[i].op, prog[i].op);
    EXPECT_EQ((*decoded)[i].scalars, prog[i].scalars);
    EXPECT_EQ((*decoded)[i].lists, prog[i].lists);
  }
  EXPECT_EQ(Disassemble(prog[1]), "InvokeKernel k=0 O=[%0, _, %2] R=[%3]");
}

TEST(BytecodeTest, EncodeRejectsWrongOperandCount) {
  std::vector<int64_t> code;
  Instruction bad{Opcode::kMove, {1}, {}};
  EXPECT_EQ(Encode(bad, code).code(), StatusCode::kInvalidArgument);
}

TEST(BytecodeTest, DecodeRejectsGarbage) {
  std::vector<int64_t> unknown_opcode = {999};
  EXPECT_EQ(Decode(unknown_opcode).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> truncated = {static_cast<int64_t>(Opcode::kMove), 1};
  EXPECT_EQ(Decode(truncated).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> overlong_list = {static_cast<int64_t>(Opcode::kRet), 1000, 1};
  EXPECT_EQ(Decode(overlong_list).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> negative_list = {static_cast<int64_t>(Opcode::kRet), -5};
  EXPECT_EQ(Decode(negative_list).status().code(), StatusCode::kInvalidArgument);
}

// Every pass that walks bytecode (encoder, decoder, verifier, linker, memory planner)
// reads an instruction's operands from its signature letters, so an opcode whose
// letters are missing or unknown would be mishandled everywhere: refuse it here.
TEST(BytecodeTest, EveryOpcodeHasAKnownSignatureAndVisitsEachOperand) {
  for (int i = 0; i < kOpcodeCount; ++i) {
    const Opcode op = static_cast<Opcode>(i);
    const std::string_view sig = OpcodeSignature(op);
    SCOPED_TRACE(std::string(OpcodeName(op)));
    EXPECT_NE(OpcodeName(op), "Invalid");
    for (char c : sig) EXPECT_TRUE(IsOperandLetter(c)) << "letter '" << c << "'";
    EXPECT_FALSE(sig.empty()) << "every instruction has operands: give the new opcode its letters";
    // One scalar per lower-case letter, a two-item list per upper-case one.
    Instruction inst{op, {}, {}};
    size_t expected = 0;
    for (char c : sig) {
      if (std::islower(static_cast<unsigned char>(c))) {
        inst.scalars.push_back(0);
        expected += 1;
      } else {
        inst.lists.push_back({0, 0});
        expected += 2;
      }
    }
    std::vector<int64_t> words;
    EXPECT_TRUE(Encode(inst, words).ok());
    size_t visited = 0;
    VisitOperands(inst, [&](char kind, int64_t& v) {
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(kind)));
      v = 7;
      ++visited;
    });
    EXPECT_EQ(visited, expected);
    for (int64_t v : inst.scalars) EXPECT_EQ(v, 7);
    for (const auto& l : inst.lists) for (int64_t v : l) EXPECT_EQ(v, 7);
    const bool jumps = sig.find_first_of("jJfF") != std::string_view::npos;
    EXPECT_EQ(TransfersControl(op), jumps);
  }
  EXPECT_FALSE(IsOperandLetter('x'));
  EXPECT_TRUE(TransfersControl(Opcode::kGoto));
  EXPECT_TRUE(TransfersControl(Opcode::kTailCall));
  EXPECT_FALSE(TransfersControl(Opcode::kInvokeKernel));
}

}  // namespace bytecode_test
}  // namespace remex::vm
