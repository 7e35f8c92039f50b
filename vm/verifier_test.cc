// The verifier's rules beyond operand kinds: memory spaces of kernel operands, one
// space per register on every path, bounded state.
#include "vm/vm.h"

#include <gtest/gtest.h>

#include "vm/vm_test_util.h"

namespace remex::vm {
namespace verifier_test {

// Registry with the real op definitions and CPU kernels.
const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

// main(x: float32 [3]) -> y = Relu(x) by a device or host kernel, with x first copied to
// the host when `copy_to_host`.
ExecutableDef ReluDef(bool host_kernel, bool copy_to_host) {
  ExecutableDef def;
  def.producer = "vm_test";
  KernelEntry relu{"Relu", {}, 1, 1, "relu"};
  relu.host = host_kernel;
  def.kernels.push_back(relu);
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {3}, {}}};
  fn.num_registers = 4;
  const int64_t in = copy_to_host ? 3 : 0;
  fn.code = {
      {Opcode::kCopyToHost, {3, 0}, {}},
      {Opcode::kInvokeShapeFunc, {0}, {{in}, {1}}},
      {Opcode::kAllocOutput, {2, 0, static_cast<int64_t>(DType::kFloat32), 1}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{in}, {2}}},
      {Opcode::kRet, {}, {{2}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

TEST(VerifierTest, KernelOperandsMustLiveInTheKernelsMemorySpace) {
  // A device kernel on a device input into a device output: fine.
  EXPECT_TRUE(Executable::FromDef(ReluDef(false, false), Registry()).ok());
  // A device kernel handed a host tensor: an illegal address on a GPU.
  auto host_in = Executable::FromDef(ReluDef(false, true), Registry());
  ASSERT_FALSE(host_in.ok());
  EXPECT_NE(host_in.status().message().find("input 0 %3 of device kernel 0 (Relu) holds host memory"),
            std::string::npos)
      << host_in.status().ToString();
  // A host kernel handed a device input: a device pointer dereferenced on the host.
  auto host_kernel = Executable::FromDef(ReluDef(true, false), Registry());
  ASSERT_FALSE(host_kernel.ok());
  EXPECT_NE(host_kernel.status().message().find("of host kernel 0 (Relu) holds device memory"), std::string::npos)
      << host_kernel.status().ToString();
}

TEST(VerifierTest, ARegisterInDifferentSpacesOnTwoPathsIsRefused) {
  // %3 is a host copy on one path of an If and a device tensor on the other; a device
  // kernel then reads it.
  ExecutableDef def = ReluDef(false, false);
  FunctionDef& fn = def.functions[0];
  fn.inputs.push_back({"c", DType::kBool, {}, {}});
  fn.num_registers = 5;
  // %1 is the condition; %4 the shape.
  fn.code = {
      {Opcode::kIf, {1, 3}, {}},
      {Opcode::kCopyToHost, {3, 0}, {}},
      {Opcode::kGoto, {4}, {}},
      {Opcode::kMove, {3, 0}, {}},
      {Opcode::kInvokeShapeFunc, {0}, {{3}, {4}}},
      {Opcode::kAllocOutput, {2, 0, static_cast<int64_t>(DType::kFloat32), 4}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{3}, {2}}},
      {Opcode::kRet, {}, {{2}}},
  };
  auto exe = Executable::FromDef(def, Registry());
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("device or host memory, depending on the path taken"), std::string::npos)
      << exe.status().ToString();
}

// main(x: float32 [3], c: bool) -> y = Relu(x), where the If on c skips instruction 1,
// which computes y's shape into %4 (instruction 3, on the other path, computes it again
// when `both_paths`), and AllocOutput then reads %4.
ExecutableDef ShapeOnOnePathDef(bool both_paths) {
  ExecutableDef def = ReluDef(false, false);
  FunctionDef& fn = def.functions[0];
  fn.inputs.push_back({"c", DType::kBool, {}, {}});
  fn.num_registers = 5;
  const Instruction shape{Opcode::kInvokeShapeFunc, {0}, {{0}, {4}}};
  fn.code = {
      {Opcode::kIf, {1, 3}, {}},
      shape,
      {Opcode::kGoto, {4}, {}},
      both_paths ? shape : Instruction{Opcode::kKillRegister, {3}, {}},
      {Opcode::kAllocOutput, {2, 0, static_cast<int64_t>(DType::kFloat32), 4}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{0}, {2}}},
      {Opcode::kRet, {}, {{2}}},
  };
  return def;
}

TEST(VerifierTest, ARegisterReadBeforeItIsWrittenOnSomePathIsRefused) {
  // Written on both paths of the If: fine, and it runs.
  auto both = Executable::FromDef(ShapeOnOnePathDef(true), Registry());
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  // Written on one path only: the VM would find no shape in %4 (INTERNAL) when c is
  // false; the verifier refuses it at load, naming the function, instruction and
  // register.
  auto one = Executable::FromDef(ShapeOnOnePathDef(false), Registry());
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kInvalidArgument) << one.status().ToString();
  EXPECT_NE(one.status().message().find(
                "function 'main', instruction 4: register %4 is read (as a shape) before it is written on some path"),
            std::string::npos)
      << one.status().ToString();
}

TEST(VerifierTest, ARegisterReadAsATensorMustHoldOneOnEveryPath) {
  // The If's condition in a register nothing writes.
  ExecutableDef unset = ShapeOnOnePathDef(true);
  unset.functions[0].num_registers = 6;
  unset.functions[0].code[0].scalars[0] = 5;
  auto refused = Executable::FromDef(unset, Registry());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "instruction 0: register %5 is read (as a tensor) before it is written on some path"),
            std::string::npos)
      << refused.status().ToString();
  // A shape where a tensor is read: the kernel's input is the shape register.
  ExecutableDef shape = ShapeOnOnePathDef(true);
  shape.functions[0].code[5].lists[0][0] = 4;
  auto shape_as_tensor = Executable::FromDef(shape, Registry());
  ASSERT_FALSE(shape_as_tensor.ok());
  EXPECT_NE(shape_as_tensor.status().message().find(
                "instruction 5: register %4 is read as a tensor but may hold a shape on some path"),
            std::string::npos)
      << shape_as_tensor.status().ToString();
  // An empty optional on one path, read as a tensor (instruction 3 is OptNone into the
  // kernel's input %3, instruction 1 a Move of x).
  ExecutableDef none = ShapeOnOnePathDef(true);
  FunctionDef& fn = none.functions[0];
  fn.code[1] = {Opcode::kMove, {3, 0}, {}};
  fn.code[3] = {Opcode::kOptNone, {3}, {}};
  fn.code[4].scalars[3] = -1;  // AllocOutput of the static shape
  fn.code[4].lists[0] = {3};
  fn.code[5].lists[0][0] = 3;
  auto maybe_none = Executable::FromDef(none, Registry());
  ASSERT_FALSE(maybe_none.ok());
  EXPECT_NE(maybe_none.status().message().find(
                "register %3 is read as a tensor but may hold an empty optional on some path"),
            std::string::npos)
      << maybe_none.status().ToString();
}

TEST(VerifierTest, StateIsBoundedAndAHugeRegisterFileIsRefusedNotAllocated) {
  // 2^24 registers across 8 blocks (a Goto ladder): 2^27 block-register states, over the
  // verifier's bound, refused at once instead of taking hundreds of megabytes.
  ExecutableDef def = ReluDef(false, false);
  FunctionDef& fn = def.functions[0];
  fn.num_registers = 1 << 24;
  std::vector<Instruction> code;
  for (int64_t i = 0; i < 7; ++i) code.push_back({Opcode::kGoto, {i + 1}, {}});
  for (const auto& inst : fn.code) code.push_back(inst);
  fn.code = code;
  auto exe = Executable::FromDef(def, Registry());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kResourceExhausted) << exe.status().ToString();
  EXPECT_NE(exe.status().message().find("block-register states"), std::string::npos);
}

}  // namespace verifier_test
}  // namespace remex::vm
