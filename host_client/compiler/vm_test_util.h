// Test helper of the compiler tests: an executable on a CPU VM of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "host_client/compiler/onnx_test_util.h"
#include "vm/vm.h"

namespace remex::testing {

// A CPU device, its allocator and a VM over `def` (creation failures are test
// failures), with helpers to make input tensors and run function 0.
struct CpuMachine {
  std::unique_ptr<vm::Device> device = vm::CreateCpuDevice();
  std::shared_ptr<vm::Allocator> allocator = vm::Allocator::Create(*device);
  std::unique_ptr<vm::VirtualMachine> vm;

  explicit CpuMachine(const vm::ExecutableDef& def) {
    auto exe = vm::Executable::FromDef(def, Registry());
    EXPECT_TRUE(exe.ok()) << exe.status().ToString();
    if (!exe.ok()) return;
    auto m = vm::VirtualMachine::Create(*exe, allocator, Registry());
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) vm = std::move(m).value();
  }
  // A tensor of `dtype` and `shape` holding `values` (left zero-filled when empty).
  template <typename T>
  vm::TensorPtr Tensor(DType dtype, const Shape& shape, const std::vector<T>& values) {
    auto t = vm::AllocateTensor(*allocator, dtype, shape);
    EXPECT_TRUE(t.ok());
    std::memset((*t)->data(), 0, (*t)->nbytes());
    if (!values.empty()) std::memcpy((*t)->data(), values.data(), values.size() * sizeof(T));
    return *t;
  }
  StatusOr<std::vector<vm::TensorPtr>> Run(std::vector<vm::TensorPtr> inputs) {
    if (!vm) return FailedPrecondition("the VM was not created");
    REMEX_RETURN_IF_ERROR(vm->SetInputs(0, std::move(inputs)));
    REMEX_ASSIGN_OR_RETURN(std::vector<vm::TensorPtr> out, vm->Invoke(0));
    // Outputs the VM grows in place (ConcatAppend) are views: each as a dense tensor.
    for (vm::TensorPtr& t : out) {
      REMEX_ASSIGN_OR_RETURN(t, vm::DenseTensor(*allocator, t));
    }
    return out;
  }
};

// Runs function 0 of `def` on a CPU machine of its own with float32 inputs (input i of
// shape `shapes[i]` holding `inputs[i]`). Returns each output's values, which must be
// float32, and their shapes in `out_shapes` when given. Failures are test failures and
// return {}.
// Kernel table entries of `def` whose op is `op` ("FusedConv", "BatchNormalization").
inline int CountKernels(const vm::ExecutableDef& def, const std::string& op) {
  int n = 0;
  for (const auto& k : def.kernels) n += k.op == op;
  return n;
}

inline std::vector<std::vector<float>> RunFloat32Outputs(const vm::ExecutableDef& def, const std::vector<Shape>& shapes,
                                                         const std::vector<std::vector<float>>& inputs,
                                                         std::vector<Shape>* out_shapes = nullptr) {
  CpuMachine m(def);
  std::vector<vm::TensorPtr> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back(m.Tensor(DType::kFloat32, shapes[i], inputs[i]));
  auto out = m.Run(std::move(in));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  std::vector<std::vector<float>> result;
  for (const vm::TensorPtr& t : *out) {
    EXPECT_EQ(t->dtype, DType::kFloat32);
    const float* p = static_cast<const float*>(t->data());
    result.emplace_back(p, p + t->nbytes() / sizeof(float));
    if (out_shapes) out_shapes->push_back(t->shape);
  }
  return result;
}

// RunFloat32Outputs with one input; returns output 0 (and its shape in `out_shape`).
inline std::vector<float> RunFloat32(const vm::ExecutableDef& def, const Shape& shape, const std::vector<float>& x,
                                     Shape* out_shape = nullptr) {
  std::vector<Shape> shapes;
  std::vector<std::vector<float>> out = RunFloat32Outputs(def, {shape}, {x}, &shapes);
  if (out.empty()) return {};
  if (out_shape) *out_shape = shapes[0];
  return out[0];
}

}  // namespace remex::testing
