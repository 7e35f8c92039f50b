// Test helper of the compiler tests: an executable on a CPU VM of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "host_client/onnx_test_util.h"
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
    return vm->Invoke(0);
  }
};

}  // namespace remex::testing
