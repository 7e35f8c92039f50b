// Fuzz target: the executable loader and verifier (vm/executable.h), and the VM running
// what they accept.
//
// The input is an .rmx file. Executable::Load parses and verifies it against the CPU
// kernel registry; an executable it accepts is run: a VM on the CPU device under a
// 64 MiB quota, each function (up to 4) with inputs of its declared dtypes and shapes
// (dynamic dimensions 1 to 3, taken from the input), under a 100 ms run deadline. The
// verifier's promise is that nothing it accepts can crash the VM ("verify once, then
// trust"): an error Status is fine, a crash or sanitizer report is a finding. So is
// INTERNAL from loading, creating a VM for or running an accepted executable: the VM
// returns it for a register holding the wrong kind of object, which the verifier must
// have refused at load (INVALID_ARGUMENT).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "kernels/kernels.h"
#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/executable.h"
#include "vm/vm.h"

namespace {

struct Context {
  std::unique_ptr<remex::kernels::KernelRegistry> registry;
  std::unique_ptr<remex::vm::Device> device;
  std::shared_ptr<remex::vm::Allocator> allocator;
};

Context& Shared() {
  static Context* context = [] {
    auto* c = new Context;
    auto registry = remex::kernels::CreateCpuRegistry();
    if (!registry.ok()) __builtin_trap();
    c->registry = std::move(registry).value();
    c->device = remex::vm::CreateCpuDevice();
    c->allocator = remex::vm::Allocator::Create(*c->device, 0);
    return c;
  }();
  return *context;
}

// INTERNAL from executable contents is a verifier gap: abort, so that libFuzzer keeps
// the input as a finding.
void AbortOnInternal(const remex::Status& status, const char* step) {
  if (status.code() != remex::StatusCode::kInternal) return;
  std::fprintf(stderr, "fuzz_executable: %s of a verified executable returned %s\n", step,
               status.ToString().c_str());
  std::abort();
}

constexpr uint64_t kQuotaBytes = uint64_t{64} << 20;
constexpr int kMaxFunctions = 4;
constexpr int64_t kMaxInputElements = int64_t{1} << 16;

void RunFunction(remex::vm::VirtualMachine& vm, int fn, std::span<const std::byte> fill,
                 remex::vm::Allocator& allocator) {
  const remex::vm::FunctionDef& def = vm.executable().def().functions[fn];
  std::vector<remex::vm::TensorPtr> inputs;
  for (size_t i = 0; i < def.inputs.size(); ++i) {
    remex::Shape shape = def.inputs[i].shape;
    int64_t elements = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) shape[d] = fill.empty() ? 1 : 1 + static_cast<int64_t>(fill[(i + d) % fill.size()]) % 3;
      if (shape[d] > kMaxInputElements) return;
      elements *= shape[d];
      if (elements > kMaxInputElements) return;
    }
    auto tensor = remex::vm::AllocateTensor(allocator, def.inputs[i].dtype, shape);
    if (!tensor.ok()) return;
    auto* out = static_cast<std::byte*>((*tensor)->data());
    const size_t bytes = (*tensor)->nbytes();
    for (size_t b = 0; b < bytes; ++b) out[b] = fill.empty() ? std::byte{0} : fill[b % fill.size()];
    // As the server's tensorWrite does with bytes from the wire.
    if (def.inputs[i].dtype == remex::DType::kBool) remex::CanonicalizeBoolBytes(out, bytes);
    inputs.push_back(*std::move(tensor));
  }
  const remex::Status set = vm.SetInputs(fn, std::move(inputs));
  AbortOnInternal(set, "SetInputs");
  if (!set.ok()) return;
  remex::vm::RunControl control;
  control.budget = std::chrono::milliseconds(100);
  control.deadline = std::chrono::steady_clock::now() + control.budget;
  vm.set_run_control(&control);
  auto outputs = vm.Invoke(fn);
  if (!outputs.ok()) AbortOnInternal(outputs.status(), "Invoke");
  vm.set_run_control(nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Context& context = Shared();
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto executable = remex::vm::Executable::Load(bytes, *context.registry, kQuotaBytes);
  if (!executable.ok()) {
    AbortOnInternal(executable.status(), "Load");
    return 0;
  }
  auto quota = remex::vm::Allocator::CreateWithQuota(context.allocator, kQuotaBytes, "fuzz session");
  auto vm = remex::vm::VirtualMachine::Create(*executable, quota, *context.registry);
  if (!vm.ok()) {
    AbortOnInternal(vm.status(), "VirtualMachine::Create");
    return 0;
  }
  const int functions = static_cast<int>((*executable)->def().functions.size());
  for (int fn = 0; fn < functions && fn < kMaxFunctions; ++fn) {
    RunFunction(**vm, fn, bytes.last(std::min<size_t>(size, 64)), *quota);
  }
  return 0;
}
