// The linker remaps operands by their signature letters (vm/opcodes.def), for every
// opcode, with no list of opcodes of its own.
#include "host_client/compiler/bytecode/link.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>

#include "vm/bytecode.h"

namespace remex::compiler {
namespace link_test {

vm::ConstantDef Constant(float value) {
  vm::ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = {1};
  c.data.resize(sizeof value);
  std::memcpy(c.data.data(), &value, sizeof value);
  return c;
}

// An executable of one function whose code is one `op` with every operand 0 (lists of
// one 0), two kernels and one constant.
vm::ExecutableDef OneInstruction(vm::Opcode op, float constant) {
  vm::ExecutableDef def;
  def.kernels.resize(2);
  def.kernels[0].op = "Relu";
  def.kernels[1].op = "Add";
  def.constants.push_back(Constant(constant));
  vm::FunctionDef fn;
  fn.name = "main";
  vm::Instruction inst{op, {}, {}};
  for (char c : vm::OpcodeSignature(op)) {
    if (std::islower(static_cast<unsigned char>(c))) inst.scalars.push_back(0);
    else inst.lists.push_back({0});
  }
  fn.code.push_back(inst);
  def.functions.push_back(fn);
  return def;
}

TEST(LinkerTest, RemapsTheTableOperandsOfEveryOpcodeByItsSignature) {
  for (int i = 0; i < vm::kOpcodeCount; ++i) {
    const auto op = static_cast<vm::Opcode>(i);
    SCOPED_TRACE(std::string(vm::OpcodeName(op)));
    vm::ExecutableDef out;
    Linker linker(out);
    ASSERT_TRUE(linker.Add(OneInstruction(op, 1.0f), "a").ok());
    // The second part's tables land after the first's: kernels at 2, a different
    // constant at 1, its function at 1.
    auto second = linker.Add(OneInstruction(op, 2.0f), "b");
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(*second, 1u);
    ASSERT_EQ(out.functions.size(), 2u);
    EXPECT_EQ(out.functions[1].name, "b");
    EXPECT_EQ(out.kernels.size(), 4u);
    const vm::Instruction& linked = out.functions[1].code[0];
    std::string sig(vm::OpcodeSignature(op));
    size_t visited = 0;
    vm::VisitOperands(linked, [&](char kind, int64_t v) {
      ++visited;
      switch (kind) {
        case 'k': EXPECT_EQ(v, 2) << "kernel operand"; break;
        case 'c': EXPECT_EQ(v, 1) << "constant operand"; break;
        case 'f': EXPECT_EQ(v, 1) << "function operand"; break;
        default: EXPECT_EQ(v, 0) << "operand '" << kind << "' is local and must not change";
      }
    });
    EXPECT_EQ(visited, sig.size());
    // The constant is kept only where some function loads it.
    const bool loads = sig.find_first_of("cC") != std::string::npos;
    EXPECT_EQ(out.constants.size(), loads ? 2u : 0u);
  }
}

TEST(LinkerTest, SharesEqualConstantsAndCountsWhatSharingSaved) {
  vm::ExecutableDef out;
  Linker linker(out);
  ASSERT_TRUE(linker.Add(OneInstruction(vm::Opcode::kLoadConst, 3.0f), "a").ok());
  ASSERT_TRUE(linker.Add(OneInstruction(vm::Opcode::kLoadConst, 3.0f), "b").ok());
  ASSERT_EQ(out.constants.size(), 1u);
  EXPECT_EQ(out.functions[1].code[0].scalars[1], 0);
  EXPECT_EQ(linker.unshared_bytes(), 2 * sizeof(float));
}

TEST(LinkerTest, RefusesAnOperandOutsideThePartsTables) {
  vm::ExecutableDef out;
  Linker linker(out);
  vm::ExecutableDef part = OneInstruction(vm::Opcode::kInvokeKernel, 1.0f);
  part.functions[0].code[0].scalars[0] = 5;  // two kernels
  auto r = linker.Add(std::move(part), "bad");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kernel index 5"), std::string::npos) << r.status().ToString();
  EXPECT_TRUE(out.functions.empty());
  EXPECT_TRUE(out.kernels.empty());
}

}  // namespace link_test
}  // namespace remex::compiler
