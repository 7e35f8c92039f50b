// The device self-test (device_server/self_test.h).
#include "device_server/self_test.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "vm/vm.h"

namespace remex::server {
namespace {

constexpr int64_t kRows = 8, kInner = 32, kCols = 16;
// The seeds of x, W and b.
constexpr uint32_t kSeedX = 3, kSeedW = 7, kSeedB = 11;

std::vector<float> Fill(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 9) % 2001 - 1000) / 1000.0f;  // [-1, 1]
  }
  return v;
}

vm::ConstantDef Constant(Shape shape, const std::vector<float>& values) {
  vm::ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = std::move(shape);
  c.data.resize(values.size() * sizeof(float));
  std::memcpy(c.data.data(), values.data(), c.data.size());
  return c;
}

vm::ExecutableDef SelfTestDef() {
  const int64_t f32 = static_cast<int64_t>(DType::kFloat32);
  vm::ExecutableDef def;
  def.producer = "remex-server self-test";
  def.constants.push_back(Constant({kInner, kCols}, Fill(kInner * kCols, kSeedW)));
  def.constants.push_back(Constant({kCols}, Fill(kCols, kSeedB)));
  def.kernels.push_back({"MatMul", {}, 2, 1, "self-test matmul"});
  def.kernels.push_back({"Add", {}, 2, 1, "self-test add"});
  def.kernels.push_back({"Relu", {}, 1, 1, "self-test relu"});
  kernels::Attributes softmax;
  softmax.Set("axis", int64_t{-1});
  def.kernels.push_back({"Softmax", softmax, 1, 1, "self-test softmax"});
  vm::FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {kRows, kInner}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {kRows, kCols}, {}}};
  fn.num_registers = 8;
  const Shape out = {kRows, kCols};
  fn.code = {
      {vm::Opcode::kLoadConst, {1, 0, 0}, {}},
      {vm::Opcode::kLoadConst, {2, 1, 0}, {}},
      {vm::Opcode::kAllocTensor, {3, f32, 0}, {out}},
      {vm::Opcode::kInvokeKernel, {0}, {{0, 1}, {3}}},
      {vm::Opcode::kAllocTensor, {4, f32, 0}, {out}},
      {vm::Opcode::kInvokeKernel, {1}, {{3, 2}, {4}}},
      {vm::Opcode::kAllocTensor, {5, f32, 0}, {out}},
      {vm::Opcode::kInvokeKernel, {2}, {{4}, {5}}},
      {vm::Opcode::kAllocOutput, {6, 0, f32, -1}, {out}},
      {vm::Opcode::kInvokeKernel, {3}, {{5}, {6}}},
      {vm::Opcode::kRet, {}, {{6}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

// Runs the self-test model on `device`: with `samples_ms`, kSelfTestWarmupRuns +
// kSelfTestTimedRuns times (the input written once), the timed runs' latencies appended
// to it; without, once. The last run's output values.
StatusOr<std::vector<float>> RunOn(vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator,
                                   const kernels::KernelRegistry& registry, std::vector<double>* samples_ms) {
  const int runs = samples_ms ? kSelfTestWarmupRuns + kSelfTestTimedRuns : 1;
  REMEX_ASSIGN_OR_RETURN(auto exe, vm::Executable::FromDef(SelfTestDef(), registry));
  REMEX_ASSIGN_OR_RETURN(auto machine, vm::VirtualMachine::Create(exe, allocator, registry));
  const std::vector<float> x = Fill(kRows * kInner, kSeedX);
  REMEX_ASSIGN_OR_RETURN(vm::TensorPtr input, vm::AllocateTensor(*allocator, DType::kFloat32, {kRows, kInner}));
  REMEX_RETURN_IF_ERROR(device.CopyToDevice(input->data(), x.data(), x.size() * sizeof(float)));
  // Work queued before (another session's kernels, the input's copy) is not timed.
  REMEX_RETURN_IF_ERROR(device.Synchronize());
  std::vector<vm::TensorPtr> outputs;
  for (int run = 0; run < runs; ++run) {
    REMEX_RETURN_IF_ERROR(machine->SetInputs(0, {input}));
    const auto start = std::chrono::steady_clock::now();
    REMEX_ASSIGN_OR_RETURN(outputs, machine->Invoke(0));
    REMEX_RETURN_IF_ERROR(device.Synchronize());
    const auto end = std::chrono::steady_clock::now();
    if (samples_ms && run >= kSelfTestWarmupRuns) {
      samples_ms->push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
  }
  std::vector<float> y(static_cast<size_t>(kRows * kCols));
  REMEX_RETURN_IF_ERROR(device.CopyToHost(y.data(), outputs[0]->data(), y.size() * sizeof(float)));
  REMEX_RETURN_IF_ERROR(device.Health());
  return y;
}

}  // namespace

std::string SelfTestDescription() {
  auto dims = [](std::initializer_list<int64_t> d) {
    std::string s = "[";
    for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
    return s + "]";
  };
  return "remex self-test: y = Softmax(Relu(x W + b)), float32, x " + dims({kRows, kInner}) + " seed " +
         std::to_string(kSeedX) + ", W " + dims({kInner, kCols}) + " seed " + std::to_string(kSeedW) + ", b " +
         dims({kCols}) + " seed " + std::to_string(kSeedB) +
         "; MatMul, Add, Relu, Softmax-13 axis -1; compared with the CPU device at |a - b| <= 1e-5 + 1e-4 |b|; " +
         std::to_string(kSelfTestWarmupRuns) + " warmup + " + std::to_string(kSelfTestTimedRuns) +
         " timed runs, each an invoke up to the device's synchronize, host wall time";
}

SelfTestResult RunSelfTest(vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator,
                           const kernels::KernelRegistry& registry, bool corrupt) {
  SelfTestResult result;
  auto got = RunOn(device, allocator, registry, &result.samples_ms);
  allocator->Trim();  // the test leaves nothing cached in the device's allocator
  if (!got.ok()) {
    result.samples_ms.clear();
    result.status = got.status().WithContext("self-test on " + device.name());
    return result;
  }
  std::unique_ptr<vm::Device> cpu = vm::CreateCpuDevice();
  auto cpu_allocator = vm::Allocator::Create(*cpu);
  auto cpu_registry = kernels::CreateCpuRegistry();
  if (!cpu_registry.ok()) {
    result.status = cpu_registry.status().WithContext("self-test: the CPU reference");
    return result;
  }
  auto want = RunOn(*cpu, cpu_allocator, **cpu_registry, nullptr);
  if (!want.ok()) {
    result.status = want.status().WithContext("self-test on the CPU");
    return result;
  }
  if (corrupt) (*got)[5] += 0.25f;
  double worst = 0;
  size_t at = 0;
  bool ok = true;
  for (size_t i = 0; i < got->size(); ++i) {
    const double a = (*got)[i], b = (*want)[i];
    const double err = std::fabs(a - b);
    if (!(err <= 1e-5 + 1e-4 * std::fabs(b))) ok = false;  // NaN fails too
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  if (!ok) {
    result.status = FailedPrecondition("self-test: " + device.name() + " computes Softmax(Relu(x W + b)) unlike the "
                                       "CPU: largest error " + std::to_string(worst) + " at element " +
                                       std::to_string(at));
  }
  return result;
}

}  // namespace remex::server
