#include "vm/bytecode.h"

#include <gtest/gtest.h>

namespace remex::vm {
namespace {

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

}  // namespace
}  // namespace remex::vm
