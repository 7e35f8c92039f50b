// Test helpers of the VM tests (vm_test.cc, cuda_device_test.cc): small executables
// built by hand.
#pragma once

#include <cstring>
#include <vector>

#include "vm/executable.h"

namespace remex::vm {

inline ConstantDef FloatConstant(Shape shape, std::vector<float> values) {
  ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = std::move(shape);
  c.data.resize(values.size() * 4);
  std::memcpy(c.data.data(), values.data(), c.data.size());
  return c;
}

// main(x: float32[?, 3]) -> y = Relu(x + c), with a runtime shape function because
// the first dimension is dynamic.
inline ExecutableDef AddReluDef() {
  ExecutableDef def;
  def.producer = "vm_test";
  def.constants.push_back(FloatConstant({3}, {1.0f, -2.0f, 0.5f}));
  def.kernels.push_back({"Add", {}, 2, 1, "add0"});
  def.kernels.push_back({"Relu", {}, 1, 1, "relu0"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {-1, 3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {-1, 3}, {}}};
  fn.num_registers = 5;
  fn.code = {
      {Opcode::kLoadConst, {1, 0, 0}, {}},
      {Opcode::kInvokeShapeFunc, {0}, {{0, 1}, {2}}},
      {Opcode::kAllocTensorReg, {3, 1, 2, 0}, {}},
      {Opcode::kInvokeKernel, {0}, {{0, 1}, {3}}},
      {Opcode::kAllocOutput, {4, 0, 1, 2}, {{}}},
      {Opcode::kInvokeKernel, {1}, {{3}, {4}}},
      {Opcode::kKillRegister, {3}, {}},
      {Opcode::kRet, {}, {{4}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

// main(past: float32[2, S, 3], new: float32[2, N, 3]) -> (present = Concat(past, new)
// along axis 1 as ConcatAppend, y = Relu(present) or, with `relu_of_past`, Relu(past)):
// a decoder step's KV cache.
inline ExecutableDef AppendDef(bool relu_of_past) {
  const int64_t src = relu_of_past ? 0 : 2;
  ExecutableDef def;
  def.producer = "vm_test";
  def.kernels.push_back({"Relu", {}, 1, 1, "relu0"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"past", DType::kFloat32, {2, -1, 3}, {}}, {"new", DType::kFloat32, {2, -1, 3}, {}}};
  fn.outputs = {{"present", DType::kFloat32, {2, -1, 3}, {}}, {"y", DType::kFloat32, {2, -1, 3}, {}}};
  fn.num_registers = 5;
  fn.code = {
      {Opcode::kConcatAppend, {2, 0, 1}, {{0, 1}}},
      {Opcode::kInvokeShapeFunc, {0}, {{src}, {3}}},
      {Opcode::kAllocOutput, {4, 1, 1, 3}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{src}, {4}}},
      {Opcode::kRet, {}, {{2, 4}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

}  // namespace remex::vm
