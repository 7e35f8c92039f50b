#include "vm/vm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <mutex>
#include <thread>

#include "kernels/prepack.h"
#include "vm/vm_test_util.h"

namespace remex::vm {
namespace vm_test {

// Registry with the real op definitions and CPU kernels.
const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

class VmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = CreateCpuDevice();
    allocator_ = Allocator::Create(*device_);
  }
  TensorPtr Input(Shape shape, std::vector<float> values) {
    auto t = AllocateTensor(*allocator_, DType::kFloat32, shape);
    EXPECT_TRUE(t.ok());
    if (!values.empty()) std::memcpy((*t)->data(), values.data(), values.size() * 4);
    return *t;
  }
  // A VM of SpinDef (below) with its input bound, run under `control` (which must
  // outlive it); nullptr, and a test failure, when it cannot be made.
  std::unique_ptr<VirtualMachine> SpinVm(RunControl& control);

  std::unique_ptr<Device> device_;
  std::shared_ptr<Allocator> allocator_;
};

TEST_F(VmTest, RunsDynamicShapeFunctionAndKernels) {
  auto bytes = SerializeExecutable(AddReluDef());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto exe = Executable::Load(*bytes, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  for (int64_t rows : {1, 2}) {
    std::vector<float> x(rows * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 2.0f;
    ASSERT_TRUE((*vm)->SetInputs(0, {Input({rows, 3}, x)}).ok());
    auto out = (*vm)->Invoke(0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0]->shape, (Shape{rows, 3}));
    const float* y = static_cast<const float*>((*out)[0]->data());
    const float c[3] = {1.0f, -2.0f, 0.5f};
    for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], std::max(0.0f, x[i] + c[i % 3]));
  }
  // Add and Relu only need shapes: no device-to-host copy was made.
  EXPECT_EQ((*vm)->copy_stats().device_to_host_count, 0u);
}

TEST_F(VmTest, BoundOutputIsWrittenAndCheckedAndUnbound) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  TensorPtr bound = Input({2, 3}, std::vector<float>(6, -100.0f));
  ASSERT_TRUE((*vm)->SetOutput(0, 0, bound).ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 3}, std::vector<float>(6, 3.0f))}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].get(), bound.get());
  EXPECT_FLOAT_EQ(static_cast<float*>(bound->data())[0], 4.0f);
  // A call whose dynamic output shape differs from the bound buffer is an error.
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({1, 3}, std::vector<float>(3, 3.0f))}).ok());
  auto mismatch = (*vm)->Invoke(0);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("bound to output 'y'"), std::string::npos);
  // Unbound, a fresh buffer is used again.
  ASSERT_TRUE((*vm)->SetOutput(0, 0, nullptr).ok());
  out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok());
  EXPECT_NE((*out)[0].get(), bound.get());
}

TEST_F(VmTest, RejectsWrongInputs) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ((*vm)->Invoke(0).status().code(), StatusCode::kFailedPrecondition);
  Status wrong_shape = (*vm)->SetInputs(0, {Input({2, 4}, std::vector<float>(8))});
  EXPECT_EQ(wrong_shape.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_shape.message().find("input 'x'"), std::string::npos);
  auto i64 = AllocateTensor(*allocator_, DType::kInt64, {2, 3});
  ASSERT_TRUE(i64.ok());
  Status wrong_dtype = (*vm)->SetInputs(0, {*i64});
  EXPECT_EQ(wrong_dtype.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_dtype.message().find("float32"), std::string::npos);
  // Refused inputs unbind the good ones bound before: an invoke written behind a
  // refused setInput (a pipeline) must fail, not run on the old inputs.
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 3}, std::vector<float>(6, 1.0f))}).ok());
  ASSERT_TRUE((*vm)->Invoke(0).ok());
  EXPECT_EQ((*vm)->SetInputs(0, {*i64}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*vm)->bound_inputs(0).empty());
  EXPECT_EQ((*vm)->Invoke(0).status().code(), StatusCode::kFailedPrecondition);
}

// An instance shares the VM's constants and draws its memory from the allocator it is
// given (a queue's, CreateForQueue), which counts it; the VM's own allocator keeps
// nothing of the instance's once both are gone.
TEST_F(VmTest, AnInstanceRunsOnItsOwnAllocatorAndSharesTheConstants) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  TensorPtr x = Input({2, 3}, {-5, 0, 1, 2, -1, 3});
  ASSERT_TRUE((*vm)->SetInputs(0, {x}).ok());
  auto want = (*vm)->Invoke(0);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const uint64_t before = allocator_->stats().allocated_bytes;
  {
    auto queue = Allocator::CreateForQueue(allocator_, *device_);
    ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    auto instance = (*vm)->CreateInstance(Registry(), *queue);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    // The input lives in the VM's allocator: the same memory, so it binds.
    ASSERT_TRUE((*instance)->SetInputs(0, {x}).ok());
    auto got = (*instance)->Invoke(0);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(&(*got)[0]->buffer->device(), device_.get());
    EXPECT_GT((*queue)->stats().allocated_bytes, 0u);
    EXPECT_EQ(std::memcmp((*got)[0]->data(), (*want)[0]->data(), 24), 0);
    // No constant was uploaded again: the instance made only its own buffers.
    EXPECT_EQ((*instance)->copy_stats().host_to_device_count, 0u);
  }
  EXPECT_EQ(allocator_->stats().allocated_bytes, before);
  // Another device's memory cannot hold an instance of this VM.
  auto other = CreateCpuDevice();
  auto elsewhere = (*vm)->CreateInstance(Registry(), Allocator::Create(*other));
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(elsewhere.status().message().find("cannot share the constants"), std::string::npos)
      << elsewhere.status().ToString();
}

// A kernel that prepares constants at the load (kernels/prepack.h) is given, when the
// VM and each instance are created, the constants its InvokeKernel instructions read:
// the input a LoadConst last wrote, not a function input, nor a register written again
// after its LoadConst; before any call.
TEST_F(VmTest, KernelsThatPrepackAreGivenTheirConstantInputsAtTheLoad) {
  struct Call {
    size_t input;
    const void* data;
    bool constant;
  };
  static std::vector<Call> calls;
  static int computed = 0;
  calls.clear();
  computed = 0;
  class Probe final : public kernels::OpKernel, public kernels::ConstantPrepacker {
   public:
    Status Compute(std::span<const kernels::TensorRef> in, std::span<const kernels::TensorRef> out) override {
      ++computed;
      std::memcpy(out[0].data, in[0].data, 12);
      return OkStatus();
    }
    void Prepack(size_t input, const kernels::TensorRef& constant) override {
      calls.push_back({input, constant.data, constant.constant});
    }
  };
  auto registry = kernels::CreateCpuRegistry();
  ASSERT_TRUE(registry.ok());
  kernels::OpDef op;
  op.name = "PrepackProbe";
  op.domain = "test.remex";
  op.min_inputs = op.max_inputs = 3;
  op.infer = [](const kernels::Attributes&, std::span<const kernels::ShapeFnArg> in)
      -> StatusOr<std::vector<kernels::TensorInfo>> { return std::vector<kernels::TensorInfo>{{in[0].dtype, in[0].shape}}; };
  ASSERT_TRUE((*registry)->AddOp(op).ok());
  ASSERT_TRUE((*registry)
                  ->AddKernel("PrepackProbe", 1, kernels::DeviceKind::kCpu,
                              [](const kernels::OpDef&, const kernels::Attributes&)
                                  -> StatusOr<std::unique_ptr<kernels::OpKernel>> {
                                return std::unique_ptr<kernels::OpKernel>(new Probe);
                              })
                  .ok());
  ExecutableDef def;
  def.producer = "vm_test";
  def.constants.push_back(FloatConstant({3}, {1.0f, 2.0f, 3.0f}));
  def.constants.push_back(FloatConstant({3}, {4.0f, 5.0f, 6.0f}));
  def.kernels.push_back({"PrepackProbe", {}, 3, 1, "probe", false, 1});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {3}, {}}};
  fn.num_registers = 4;
  fn.code = {
      {Opcode::kLoadConst, {1, 0, 0}, {}},   // input 1: constant 0
      {Opcode::kLoadConst, {2, 1, 0}, {}},   // input 2: constant 1, then x instead
      {Opcode::kMove, {2, 0}, {}},
      {Opcode::kAllocOutput, {3, 0, 1, -1}, {{3}}},
      {Opcode::kInvokeKernel, {0}, {{0, 1, 2}, {3}}},
      {Opcode::kRet, {}, {{3}}},
  };
  def.functions.push_back(std::move(fn));
  auto exe = Executable::FromDef(def, **registry);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, **registry);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].input, 1u);
  EXPECT_TRUE(calls[0].constant);
  ASSERT_NE(calls[0].data, nullptr);
  EXPECT_EQ(static_cast<const float*>(calls[0].data)[0], 1.0f);
  EXPECT_EQ(computed, 0);
  // An instance has kernels of its own: they are given the same (shared) constant.
  auto instance = (*vm)->CreateInstance(**registry, allocator_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].input, 1u);
  EXPECT_EQ(calls[1].data, calls[0].data);
  // The calls run as before.
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({3}, {7, 8, 9})}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(static_cast<const float*>((*out)[0]->data())[2], 9.0f);
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(calls.size(), 2u);
}

TEST_F(VmTest, KilledRegistersReturnMemoryForReuse) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({4, 3}, std::vector<float>(12, 1.0f))}).ok());
  ASSERT_TRUE((*vm)->Invoke(0).ok());
  uint64_t allocations = allocator_->stats().device_allocations;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*vm)->Invoke(0).ok());
  EXPECT_EQ(allocator_->stats().device_allocations, allocations);
}

TEST_F(VmTest, ProfilerCountsInstructionsKernelsAndCopies) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 3}, std::vector<float>(6, 1.0f))}).ok());
  Profiler profiler;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*vm)->Invoke(0, &profiler).ok());
  EXPECT_EQ(profiler.invokes, 2u);
  EXPECT_GT(profiler.total_nanos, 0u);
  auto count = [&](Opcode op) { return profiler.instructions[static_cast<int>(op)].calls; };
  EXPECT_EQ(count(Opcode::kInvokeKernel), 4u);
  EXPECT_EQ(count(Opcode::kRet), 2u);
  EXPECT_EQ(count(Opcode::kInvokeShapeFunc), 2u);
  auto rows = profiler.Rows((*exe)->def());
  // Kernel rows first (Add, Relu), then one row per opcode that ran.
  ASSERT_GE(rows.size(), 2u + 6u);
  EXPECT_EQ(rows[0].kind, "kernel");
  EXPECT_EQ(rows[1].kind, "kernel");
  uint64_t kernel_nanos = 0, instruction_nanos = 0;
  for (const auto& r : rows) {
    if (r.kind == "kernel") {
      EXPECT_TRUE(r.name == "Add" || r.name == "Relu") << r.name;
      EXPECT_EQ(r.counter.calls, 2u);
      kernel_nanos += r.counter.total_nanos;
    } else {
      EXPECT_EQ(r.kind, "instruction");
      instruction_nanos += r.counter.total_nanos;
    }
  }
  EXPECT_LE(kernel_nanos, instruction_nanos);
  EXPECT_LE(instruction_nanos, profiler.total_nanos);
  // Add and Relu need no data on the host: no copies recorded.
  for (const auto& r : rows) EXPECT_EQ(r.counter.copies, 0u) << r.name;
  // Invokes without a profiler still run and record nothing.
  ASSERT_TRUE((*vm)->Invoke(0).ok());
  EXPECT_EQ(profiler.invokes, 2u);
}

// Per kernel-table entry, the operands of its first call as they were at run time (the
// batch is dynamic: the shapes come from the call), and with tracing one event per
// instruction run, in run order, each kernel's naming its entry.
TEST_F(VmTest, ProfilerKeepsRunTimeShapesAndTraceEvents) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({5, 3}, std::vector<float>(15, 1.0f))}).ok());
  Profiler profiler;
  profiler.synchronize = true;
  profiler.trace = true;
  profiler.trace_limit = 1000;
  profiler.trace_origin = std::chrono::steady_clock::now();
  ASSERT_TRUE((*vm)->Invoke(0, &profiler).ok());
  const ExecutableDef& def = (*exe)->def();
  ASSERT_EQ(profiler.kernel_shapes.size(), def.kernels.size());
  for (size_t k = 0; k < def.kernels.size(); ++k) {
    if (profiler.kernels[k].calls == 0) continue;
    const KernelShapes& shapes = profiler.kernel_shapes[k];
    ASSERT_FALSE(shapes.inputs.empty()) << def.kernels[k].op;
    EXPECT_EQ(shapes.inputs[0], std::make_pair(DType::kFloat32, Shape{5, 3})) << def.kernels[k].op;
    ASSERT_EQ(shapes.outputs.size(), 1u);
    EXPECT_EQ(shapes.outputs[0], std::make_pair(DType::kFloat32, Shape{5, 3})) << def.kernels[k].op;
  }
  uint64_t instructions = 0;
  for (const auto& c : profiler.instructions) instructions += c.calls;
  ASSERT_EQ(profiler.events.size(), instructions);
  EXPECT_EQ(profiler.trace_dropped, 0u);
  size_t kernel_events = 0;
  for (size_t i = 0; i < profiler.events.size(); ++i) {
    const TraceEvent& e = profiler.events[i];
    if (i > 0) EXPECT_GE(e.start_nanos, profiler.events[i - 1].start_nanos + profiler.events[i - 1].nanos);
    if (e.op == Opcode::kInvokeKernel) {
      ++kernel_events;
      ASSERT_GE(e.kernel, 0);
      EXPECT_EQ(def.functions[e.function].code[e.pc].scalars[0], e.kernel);
    } else {
      EXPECT_EQ(e.kernel, -1);
    }
  }
  EXPECT_EQ(kernel_events, profiler.instructions[static_cast<int>(Opcode::kInvokeKernel)].calls);
  // Past the limit, events are counted, not kept.
  Profiler small;
  small.trace = true;
  small.trace_limit = 2;
  ASSERT_TRUE((*vm)->Invoke(0, &small).ok());
  EXPECT_EQ(small.events.size(), 2u);
  EXPECT_EQ(small.events.size() + small.trace_dropped, instructions);
}

// The memory columns: each allocating instruction shows its buffer in the allocator's
// size classes, KillRegister shows the freed intermediate, and the invoke's live bytes
// grow by its output alone.
TEST_F(VmTest, ProfilerCountsAllocatedAndLiveBytes) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok());
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  // float32[1000, 3]: 12000 bytes, 12288 in the allocator's 512-byte classes.
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({1000, 3}, std::vector<float>(3000, 1.0f))}).ok());
  constexpr uint64_t kTensorBytes = 12288;
  const uint64_t live_before = allocator_->stats().allocated_bytes;
  Profiler profiler;
  auto out = (*vm)->Invoke(0, &profiler);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto at = [&](Opcode op) { return profiler.instructions[static_cast<int>(op)]; };
  EXPECT_EQ(at(Opcode::kAllocTensorReg).allocations, 1u);
  EXPECT_EQ(at(Opcode::kAllocTensorReg).allocated_bytes, kTensorBytes);
  EXPECT_EQ(at(Opcode::kAllocTensorReg).peak_live_bytes, live_before + kTensorBytes);
  EXPECT_EQ(at(Opcode::kAllocOutput).allocations, 1u);
  EXPECT_EQ(at(Opcode::kAllocOutput).allocated_bytes, kTensorBytes);
  EXPECT_EQ(at(Opcode::kAllocOutput).peak_live_bytes, live_before + 2 * kTensorBytes);
  // Kernels write into buffers allocated before them; KillRegister frees the Add result.
  EXPECT_EQ(at(Opcode::kInvokeKernel).allocations, 0u);
  EXPECT_EQ(at(Opcode::kInvokeKernel).allocated_bytes, 0u);
  EXPECT_EQ(at(Opcode::kKillRegister).allocations, 0u);
  EXPECT_EQ(at(Opcode::kKillRegister).peak_live_bytes, live_before + kTensorBytes);
  EXPECT_EQ(at(Opcode::kRet).allocations, 0u);
  EXPECT_EQ(profiler.live_bytes_before, live_before);
  EXPECT_EQ(profiler.live_bytes_after, live_before + kTensorBytes);  // the output, held
  EXPECT_EQ(profiler.peak_live_bytes, live_before + 2 * kTensorBytes);
  // Each kernel row shows the buffer allocated for its output: Add's intermediate,
  // Relu's output.
  std::map<std::string, ProfileCounter> rows;
  for (const auto& row : profiler.Rows((*exe)->def())) rows[row.kind + " " + row.name] = row.counter;
  EXPECT_EQ(rows["kernel Add"].allocations, 1u);
  EXPECT_EQ(rows["kernel Add"].allocated_bytes, kTensorBytes);
  EXPECT_EQ(rows["kernel Add"].peak_live_bytes, live_before + kTensorBytes);
  EXPECT_EQ(rows["kernel Relu"].allocated_bytes, kTensorBytes);
  EXPECT_EQ(rows["kernel Relu"].peak_live_bytes, live_before + 2 * kTensorBytes);
  EXPECT_EQ(rows["instruction AllocOutput"].allocated_bytes, kTensorBytes);
  EXPECT_EQ(rows["instruction InvokeKernel"].allocated_bytes, 0u);
  // A second invoke allocates again (the allocator serves the freed block from its
  // cache, but the VM asked for it): the rows sum both invokes.
  out->clear();
  ASSERT_TRUE((*vm)->Invoke(0, &profiler).ok());
  EXPECT_EQ(at(Opcode::kAllocTensorReg).calls, 2u);
  EXPECT_EQ(at(Opcode::kAllocTensorReg).allocations, 2u);
  EXPECT_EQ(at(Opcode::kAllocTensorReg).allocated_bytes, 2 * kTensorBytes);
}

// A bool constant's bytes other than 0 and 1 (from a file: any byte may be there) load
// as true, as NumPy reads them, so kernels only ever see valid bool values.
TEST_F(VmTest, BoolConstantBytesLoadAsZeroOrOne) {
  ExecutableDef def;
  def.producer = "vm_test";
  ConstantDef c;
  c.dtype = DType::kBool;
  c.shape = {4};
  c.data = {std::byte{0}, std::byte{7}, std::byte{1}, std::byte{255}};
  def.constants.push_back(std::move(c));
  KernelEntry cast{"Cast", {}, 1, 1, "cast0"};
  cast.attrs.Set("to", int64_t{1});
  def.kernels.push_back(std::move(cast));
  FunctionDef fn;
  fn.name = "main";
  fn.outputs = {{"y", DType::kFloat32, {4}, {}}};
  fn.num_registers = 3;
  fn.code = {
      {Opcode::kLoadConst, {0, 0, 0}, {}},
      {Opcode::kInvokeShapeFunc, {0}, {{0}, {1}}},
      {Opcode::kAllocOutput, {2, 0, 1, 1}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{0}, {2}}},
      {Opcode::kRet, {}, {{2}}},
  };
  def.functions.push_back(std::move(fn));
  auto bytes = SerializeExecutable(def);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto exe = Executable::Load(*bytes, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  const auto& data = (*exe)->def().constants[0].data;
  EXPECT_EQ(data, (std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{1}, std::byte{1}}));
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float* y = static_cast<const float*>((*out)[0]->data());
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 1, 1, 1}));
}

// A tensor output is always a tensor AllocOutput made: the verifier refuses an
// executable that would return its constant (which every VM of it shares) as one, so
// a caller writing into its output can never change the executable.
TEST(ExecutableTest, VerifierRefusesAConstantReturnedAsATensorOutput) {
  ExecutableDef def;
  def.producer = "vm_test";
  ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = {4};
  c.data.resize(16);
  def.constants.push_back(std::move(c));
  FunctionDef fn;
  fn.name = "main";
  fn.outputs = {{"y", DType::kFloat32, {4}, {}}};
  fn.num_registers = 1;
  fn.code = {
      {Opcode::kLoadConst, {0, 0, 0}, {}},
      {Opcode::kRet, {}, {{0}}},
  };
  def.functions.push_back(std::move(fn));
  auto bytes = SerializeExecutable(def);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto exe = Executable::Load(*bytes, Registry());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exe.status().message().find("AllocOutput did not make"), std::string::npos) << exe.status().ToString();
}

TEST(ExecutableTest, CorruptFilesAreRejected) {
  auto bytes = SerializeExecutable(AddReluDef());
  ASSERT_TRUE(bytes.ok());
  std::vector<std::byte> bad_magic = *bytes;
  bad_magic[0] = std::byte{'X'};
  EXPECT_EQ(ParseExecutable(bad_magic).status().code(), StatusCode::kInvalidArgument);

  std::vector<std::byte> bad_version = *bytes;
  bad_version[4] = std::byte{99};
  EXPECT_EQ(ParseExecutable(bad_version).status().code(), StatusCode::kFailedPrecondition);

  std::vector<std::byte> truncated(bytes->begin(), bytes->begin() + bytes->size() / 2);
  EXPECT_EQ(ParseExecutable(truncated).status().code(), StatusCode::kInvalidArgument);

  // Flip every byte after the header in turn (metadata and constants): each file must
  // be refused with an error, or load and then run (to a result or an error) without
  // crashing: what the verifier lets through, the interpreter must survive.
  auto device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device);
  int refused = 0, ran = 0;
  for (size_t i = 24; i < bytes->size(); ++i) {
    std::vector<std::byte> flipped = *bytes;
    flipped[i] ^= std::byte{0x5a};
    auto exe = Executable::Load(flipped, Registry());
    if (!exe.ok()) {
      ++refused;
      continue;
    }
    auto vm = VirtualMachine::Create(*exe, allocator, Registry());
    if (!vm.ok()) continue;
    auto x = AllocateTensor(*allocator, DType::kFloat32, {2, 3});
    ASSERT_TRUE(x.ok());
    std::memset((*x)->data(), 0, (*x)->nbytes());
    if ((*vm)->SetInputs(0, {*x}).ok()) {
      (void)(*vm)->Invoke(0);
      ++ran;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(ran, 0);  // some flips land in values that do not matter (names, constants)
}

TEST(ExecutableTest, VerifierRejectsOutOfRangeOperands) {
  ExecutableDef def = AddReluDef();
  def.functions[0].code[0].scalars[1] = 7;  // constant index out of range
  auto exe = Executable::FromDef(def, Registry());
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exe.status().message().find("constant 7 out of range"), std::string::npos);

  def = AddReluDef();
  def.functions[0].code[3].lists[0] = {0};  // Add with one input
  EXPECT_EQ(Executable::FromDef(def, Registry()).status().code(), StatusCode::kInvalidArgument);

  def = AddReluDef();
  def.kernels[1].op = "NoSuchOp";
  auto unknown = Executable::FromDef(def, Registry());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("NoSuchOp"), std::string::npos);

  def = AddReluDef();
  def.functions[0].code[5].lists[1] = {1};  // Relu writing into the constant's register
  auto writes_constant = Executable::FromDef(def, Registry());
  EXPECT_EQ(writes_constant.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(writes_constant.status().message().find("not a tensor this function allocated"), std::string::npos);

  def = AddReluDef();
  def.functions[0].code.back().lists[0] = {0};  // returning the caller's input as the output
  EXPECT_EQ(Executable::FromDef(def, Registry()).status().code(), StatusCode::kInvalidArgument);

  def = AddReluDef();
  def.functions[0].code.pop_back();  // no Ret
  EXPECT_EQ(Executable::FromDef(def, Registry()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace vm_test
}  // namespace remex::vm

namespace remex::vm {
namespace vm_test {

// Every attribute kind survives the .rmx round trip, string lists (LSTM's
// `activations`) included, along with kernel placement and symbols.
// FunctionDef::compute_threads survives the file, within kMaxCpuComputeThreads; a
// function that asks for 1 computes what the device's own threads compute, and the
// running thread's compute threads are restored after the call.
TEST_F(VmTest, ComputeThreadsRoundTripAreBoundedAndKeepTheResult) {
  ExecutableDef def = AddReluDef();
  def.functions[0].compute_threads = 1;
  auto bytes = SerializeExecutable(def);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto parsed = ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->functions[0].compute_threads, 1u);
  auto exe = Executable::Load(*bytes, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  const int before = kernels::CpuComputeThreads();
  std::vector<float> x = {-3.0f, -1.0f, 0.25f, 2.0f, -0.5f, 4.0f};
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 3}, x)}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(kernels::CpuComputeThreads(), before);
  const float* y = static_cast<const float*>((*out)[0]->data());
  const float c[3] = {1.0f, -2.0f, 0.5f};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], std::max(0.0f, x[i] + c[i % 3]));

  def.functions[0].compute_threads = static_cast<uint32_t>(kernels::kMaxCpuComputeThreads) + 1;
  auto too_many = ParseExecutable(*SerializeExecutable(def));
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("compute threads"), std::string::npos) << too_many.status().ToString();
}

TEST(ExecutableTest, AttributesPlacementAndSymbolsRoundTrip) {
  ExecutableDef def = AddReluDef();
  kernels::Attributes& a = def.kernels[0].attrs;
  a.Set("i", int64_t{-7});
  a.Set("f", 0.25f);
  a.Set("s", std::string("half_pixel"));
  a.Set("ints", std::vector<int64_t>{1, -2});
  a.Set("floats", std::vector<float>{0.5f});
  a.Set("strings", std::vector<std::string>{"Sigmoid", "", "Tanh"});
  def.kernels[1].host = true;
  def.symbols = {{"N", 1, 64}};
  def.functions[0].inputs[0].dims = {"N", ""};
  auto bytes = SerializeExecutable(def);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto parsed = ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->kernels[0].attrs.all(), a.all());
  EXPECT_EQ(*parsed->kernels[0].attrs.Strings("strings"), (std::vector<std::string>{"Sigmoid", "", "Tanh"}));
  EXPECT_FALSE(parsed->kernels[0].host);
  EXPECT_TRUE(parsed->kernels[1].host);
  ASSERT_EQ(parsed->symbols.size(), 1u);
  EXPECT_EQ(parsed->symbols[0].name, "N");
  EXPECT_EQ(parsed->symbols[0].max, 64);
  EXPECT_EQ(parsed->functions[0].inputs[0].dims, (std::vector<std::string>{"N", ""}));
}


// main(x: float32[?, 3]) -> y = Relu(Relu(x)), where the intermediate lives in a
// planned arena slot of `slot_bytes` (device arena of `arena_bytes`).
ExecutableDef PlannedDef(int64_t slot_bytes, uint64_t arena_bytes) {
  ExecutableDef def;
  def.producer = "vm_test";
  def.kernels.push_back({"Relu", {}, 1, 1, "relu0"});
  def.kernels.push_back({"Relu", {}, 1, 1, "relu1"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {-1, 3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {-1, 3}, {}}};
  fn.num_registers = 4;
  fn.arena_bytes[0] = arena_bytes;
  fn.code = {
      {Opcode::kInvokeShapeFunc, {0}, {{0}, {1}}},
      {Opcode::kAllocPlanned, {2, 1, 1, 0, 0, slot_bytes}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{0}, {2}}},
      {Opcode::kAllocOutput, {3, 0, 1, 1}, {{}}},
      {Opcode::kInvokeKernel, {1}, {{2}, {3}}},
      {Opcode::kRet, {}, {{3}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

TEST_F(VmTest, PlannedSlotsAreReusedAndOverflowIsAnError) {
  auto exe = Executable::FromDef(PlannedDef(64, 64), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  // 4 rows of float32[3] = 48 bytes fit the 64-byte slot.
  std::vector<float> x = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12};
  std::vector<uint64_t> allocations;
  for (int call = 0; call < 3; ++call) {
    ASSERT_TRUE((*vm)->SetInputs(0, {Input({4, 3}, x)}).ok());
    auto out = (*vm)->Invoke(0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const float* y = static_cast<const float*>((*out)[0]->data());
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[11], 12.0f);
    allocations.push_back((*vm)->last_invoke_allocations());
  }
  EXPECT_EQ(allocations[0], 2u);  // the arena, then the output
  EXPECT_EQ(allocations[1], 1u);  // the output only: the arena is reused
  EXPECT_EQ(allocations[2], 1u);
  EXPECT_EQ((*vm)->last_invoke_function(), 0);
  // 6 rows (72 bytes) exceed the slot: an error, not a write past it.
  std::vector<float> big(18, 1.0f);
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({6, 3}, big)}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("exceeds its planned slot of 64 bytes"), std::string::npos)
      << out.status().ToString();
}

// A planned arena is allocated once, by the AllocPlanned that first needs it; the
// tensors placed in it are not allocations.
TEST_F(VmTest, ProfilerShowsThePlannedArenaOnce) {
  auto exe = Executable::FromDef(PlannedDef(64, 64), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({4, 3}, std::vector<float>(12, 1.0f))}).ok());
  for (int call = 0; call < 2; ++call) {
    Profiler profiler;
    ASSERT_TRUE((*vm)->Invoke(0, &profiler).ok());
    const ProfileCounter& planned = profiler.instructions[static_cast<int>(Opcode::kAllocPlanned)];
    EXPECT_EQ(planned.calls, 1u);
    EXPECT_EQ(planned.allocations, call == 0 ? 1u : 0u) << "call " << call;
    EXPECT_EQ(planned.allocated_bytes, call == 0 ? 512u : 0u) << "call " << call;  // 64 bytes, one class
    EXPECT_EQ(profiler.instructions[static_cast<int>(Opcode::kAllocOutput)].allocated_bytes, 512u);
    // relu0 writes into the arena: no allocation of its own; relu1's output is one.
    ASSERT_EQ(profiler.kernels.size(), 2u);
    EXPECT_EQ(profiler.kernels[0].allocations, 0u);
    EXPECT_EQ(profiler.kernels[1].allocations, 1u);
  }
}

TEST(ExecutableTest, VerifierChecksSlotsAndTailCalls) {
  // A slot past the arena's end.
  auto bad_slot = Executable::FromDef(PlannedDef(128, 64), Registry());
  ASSERT_FALSE(bad_slot.ok());
  EXPECT_NE(bad_slot.status().message().find("outside the arena"), std::string::npos) << bad_slot.status().ToString();
  // The arena size survives the file format.
  auto bytes = SerializeExecutable(PlannedDef(64, 64));
  ASSERT_TRUE(bytes.ok());
  auto parsed = ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->functions[0].arena_bytes[0], 64u);

  // A dispatcher: main tail-calls "bucket" when dim 0 is in [1, 4], else "generic".
  auto dispatcher = [](std::vector<Instruction> code) {
    ExecutableDef def = AddReluDef();
    FunctionDef generic = def.functions[0];
    generic.name = "generic";
    FunctionDef bucket = def.functions[0];
    bucket.name = "bucket";
    FunctionDef main;
    main.name = "main";
    main.inputs = generic.inputs;
    main.outputs = generic.outputs;
    main.num_registers = 1;
    main.code = std::move(code);
    def.functions = {main, bucket, generic};
    return def;
  };
  auto good = Executable::FromDef(dispatcher({{Opcode::kIfDimIn, {0, 0, 1, 4, 2}, {}},
                                              {Opcode::kTailCall, {1}, {{0}}},
                                              {Opcode::kTailCall, {2}, {{0}}}}),
                                  Registry());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device);
  auto vm = VirtualMachine::Create(*good, allocator, Registry());
  ASSERT_TRUE(vm.ok());
  for (int64_t rows : {4, 5}) {
    auto x = AllocateTensor(*allocator, DType::kFloat32, {rows, 3});
    ASSERT_TRUE(x.ok());
    std::memset((*x)->data(), 0, (*x)->nbytes());
    ASSERT_TRUE((*vm)->SetInputs(0, {*x}).ok());
    auto out = (*vm)->Invoke(0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0]->shape, (Shape{rows, 3}));
    const float* y = static_cast<const float*>((*out)[0]->data());
    EXPECT_EQ(y[0], 1.0f);  // Relu(0 + 1)
    EXPECT_EQ((*vm)->last_invoke_function(), rows <= 4 ? 1 : 2);
  }

  auto refused = [&](std::vector<Instruction> code, const std::string& what) {
    auto exe = Executable::FromDef(dispatcher(std::move(code)), Registry());
    ASSERT_FALSE(exe.ok()) << what;
    EXPECT_NE(exe.status().message().find(what), std::string::npos) << exe.status().ToString();
  };
  refused({{Opcode::kTailCall, {0}, {{0}}}}, "cannot call itself");
  refused({{Opcode::kTailCall, {1}, {{0, 0}}}}, "passes 2 inputs");
  refused({{Opcode::kTailCall, {3}, {{0}}}}, "function 3 out of range");
  refused({{Opcode::kIfDimIn, {0, 0, 1, 4, 9}, {}}, {Opcode::kTailCall, {1}, {{0}}}}, "jump target 9 out of range");
  refused({{Opcode::kIfDimIn, {0, 0, 1, 4, 1}, {}}}, "does not end with Ret or TailCall");
}

}  // namespace vm_test
}  // namespace remex::vm

namespace remex::vm {
namespace vm_test {

// main(c: int64 []) -> Identity(CopyToDevice(Increment(c))).
ExecutableDef IncrementDef() {
  ExecutableDef def;
  def.producer = "vm_test";
  def.kernels.push_back({"Identity", {}, 1, 1, "identity"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"c", DType::kInt64, {}, {}}};
  fn.outputs = {{"d", DType::kInt64, {}, {}}};
  fn.num_registers = 5;
  fn.code = {
      {Opcode::kIncrement, {1, 0}, {}},
      {Opcode::kCopyToDevice, {4, 1}, {}},
      {Opcode::kInvokeShapeFunc, {0}, {{4}, {2}}},
      {Opcode::kAllocOutput, {3, 0, static_cast<int64_t>(DType::kInt64), 2}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{4}, {3}}},
      {Opcode::kRet, {}, {{3}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

TEST_F(VmTest, IncrementOfTheLargestInt64IsAnErrorNotAnOverflow) {
  auto exe = Executable::FromDef(IncrementDef(), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto run = [&](int64_t v) {
    auto t = AllocateTensor(*allocator_, DType::kInt64, {});
    EXPECT_TRUE(t.ok());
    std::memcpy((*t)->data(), &v, 8);
    EXPECT_TRUE((*vm)->SetInputs(0, {*t}).ok());
    return (*vm)->Invoke(0);
  };
  auto six = run(5);
  ASSERT_TRUE(six.ok()) << six.status().ToString();
  EXPECT_EQ(*static_cast<const int64_t*>((*six)[0]->data()), 6);
  auto over = run(std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfRange) << over.status().ToString();
}

// main(x: float32 [3]) -> x, after `Goto 0` for ever (a verified executable may loop).
ExecutableDef SpinDef() {
  ExecutableDef def;
  def.producer = "vm_test";
  def.kernels.push_back({"Relu", {}, 1, 1, "relu"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {3}, {}}};
  fn.num_registers = 3;
  fn.code = {
      {Opcode::kInvokeShapeFunc, {0}, {{0}, {1}}},
      {Opcode::kAllocOutput, {2, 0, static_cast<int64_t>(DType::kFloat32), 1}, {{}}},
      {Opcode::kInvokeKernel, {0}, {{0}, {2}}},
      {Opcode::kGoto, {2}, {}},
      {Opcode::kRet, {}, {{2}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

std::unique_ptr<VirtualMachine> VmTest::SpinVm(RunControl& control) {
  auto exe = Executable::FromDef(SpinDef(), Registry());
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  if (!exe.ok()) return nullptr;
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  EXPECT_TRUE(vm.ok()) << vm.status().ToString();
  if (!vm.ok()) return nullptr;
  (*vm)->set_run_control(&control);
  Status bound = (*vm)->SetInputs(0, {Input({3}, {-1, 0, 1})});
  EXPECT_TRUE(bound.ok()) << bound.ToString();
  return bound.ok() ? std::move(vm).value() : nullptr;
}

TEST_F(VmTest, RunControlStopsABackwardJumpLoopAtItsDeadlineOrWhenCancelled) {
  RunControl control;
  std::unique_ptr<VirtualMachine> vm = SpinVm(control);
  ASSERT_NE(vm, nullptr);

  control.budget = std::chrono::milliseconds(50);
  control.deadline = std::chrono::steady_clock::now() + control.budget;
  auto late = vm->Invoke(0);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().ToString() << " ";
  EXPECT_NE(late.status().message().find("deadline of 50 ms"), std::string::npos);

  // Cancelled from another thread while it spins.
  control.deadline = std::chrono::steady_clock::time_point::max();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    control.reason = "stopped by the test";
    control.cancelled.store(true);
  });
  auto cancelled = vm->Invoke(0);
  canceller.join();
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled) << cancelled.status().ToString();
  EXPECT_NE(cancelled.status().message().find("stopped by the test"), std::string::npos);

  // Server shutdown: a deadline on the clock shared by every run.
  control.cancelled = false;
  std::atomic<int64_t> shutdown_at{std::chrono::steady_clock::now().time_since_epoch().count()};
  control.shutdown_at = &shutdown_at;
  auto stopped = vm->Invoke(0);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kUnavailable) << stopped.status().ToString();
}

TEST_F(VmTest, RunControlIsCheckedAgainAfterTheYieldSoWorkThatRanMeanwhileCanStopTheRun) {
  auto exe = Executable::FromDef(AddReluDef(), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  // The "other work" of the yield after Add cancels the run: it stops there, before
  // Relu, whose launch would meet the fault armed here.
  static RunControl* control = nullptr;
  static int turns = 0;
  RunControl c;
  control = &c;
  turns = 0;
  c.yield = [] {
    ++turns;
    control->reason = "cancelled while other work ran";
    control->cancelled.store(true);
  };
  (*vm)->set_run_control(&c);
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({1, 3}, {-1, 0, 1})}).ok());
  device_->InjectFaultAtKernel(2);
  auto out = (*vm)->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().ToString();
  EXPECT_NE(out.status().message().find("cancelled while other work ran"), std::string::npos);
  EXPECT_EQ(turns, 1);
  EXPECT_TRUE(device_->Health().ok()) << "a kernel ran after the run was cancelled";
  device_->InjectFaultAtKernel(0);
  control = nullptr;
}

// main(x: float32 [3]) -> (): `code`, on two registers (x in %0), then Ret.
ExecutableDef NoKernelDef(std::vector<Instruction> code) {
  ExecutableDef def;
  def.producer = "vm_test";
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {3}, {}}};
  fn.num_registers = 2;
  fn.code = std::move(code);
  fn.code.push_back({Opcode::kRet, {}, {{}}});
  def.functions.push_back(std::move(fn));
  return def;
}

// Counts the yields of a run and cancels it at the `cancel_at`th (0: never).
struct YieldCounter {
  static inline RunControl* control = nullptr;
  static inline int turns = 0;
  static inline int cancel_at = 0;
  static void Yield() {
    if (++turns == cancel_at) {
      control->reason = "cancelled at a yield";
      control->cancelled.store(true);
    }
  }
};

TEST_F(VmTest, ALoopWithoutKernelsYieldsOnceItsSliceHasPassed) {
  // `Goto 0` for ever: no kernel to yield after.
  auto exe = Executable::FromDef(NoKernelDef({{Opcode::kGoto, {0}, {}}}), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({3}, {1, 2, 3})}).ok());
  RunControl control;
  (*vm)->set_run_control(&control);
  YieldCounter::control = &control;
  YieldCounter::turns = 0;
  YieldCounter::cancel_at = 3;
  control.yield = &YieldCounter::Yield;
  // A slice of zero: the run yields at every backward jump, and the third yield's
  // work cancels it.
  control.slice = std::chrono::nanoseconds(0);
  auto out = (*vm)->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().ToString();
  EXPECT_NE(out.status().message().find("cancelled at a yield"), std::string::npos);
  EXPECT_NE(out.status().message().find("after a backward jump"), std::string::npos) << out.status().ToString();
  EXPECT_EQ(YieldCounter::turns, 3);
  // Within its slice it does not yield: an hour's slice, stopped by a 50 ms deadline.
  control.cancelled = false;
  YieldCounter::turns = 0;
  YieldCounter::cancel_at = 0;
  control.slice = std::chrono::hours(1);
  control.budget = std::chrono::milliseconds(50);
  control.deadline = std::chrono::steady_clock::now() + control.budget;
  out = (*vm)->Invoke(0);
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded) << out.status().ToString();
  EXPECT_EQ(YieldCounter::turns, 0);
  // A slice of 1 ms: it yields every millisecond or so while it spins.
  control.slice = std::chrono::milliseconds(1);
  control.deadline = std::chrono::steady_clock::now() + control.budget;
  out = (*vm)->Invoke(0);
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded) << out.status().ToString();
  EXPECT_GE(YieldCounter::turns, 1);
  EXPECT_LE(YieldCounter::turns, 50);
  YieldCounter::control = nullptr;
}

TEST_F(VmTest, ALongStretchWithoutKernelsOrJumpsIsCheckedAndYieldsEveryFewInstructions) {
  // 1000 Moves straight through, then Ret: 1001 instructions, no jump, no kernel.
  const int kMoves = 1000;
  std::vector<Instruction> code(kMoves, Instruction{Opcode::kMove, {1, 0}, {}});
  auto exe = Executable::FromDef(NoKernelDef(code), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({3}, {1, 2, 3})}).ok());
  RunControl control;
  (*vm)->set_run_control(&control);
  YieldCounter::control = &control;
  YieldCounter::turns = 0;
  YieldCounter::cancel_at = 0;
  control.yield = &YieldCounter::Yield;
  control.slice = std::chrono::nanoseconds(0);
  ASSERT_TRUE((*vm)->Invoke(0).ok());
  EXPECT_EQ(YieldCounter::turns, (kMoves + 1) / static_cast<int>(RunControl::kInstructionsPerCheck));
  // The same checks stop it when cancelled, before its end.
  YieldCounter::turns = 0;
  YieldCounter::cancel_at = 2;
  auto out = (*vm)->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().ToString();
  EXPECT_NE(out.status().message().find("instruction " + std::to_string(2 * RunControl::kInstructionsPerCheck - 1)),
            std::string::npos)
      << out.status().ToString();
  YieldCounter::control = nullptr;
}

// The values of `t`, a view or dense, in row-major order of its shape.
std::vector<float> Values(Allocator& allocator, const TensorPtr& t) {
  auto dense = DenseTensor(allocator, t);
  EXPECT_TRUE(dense.ok()) << dense.status().ToString();
  if (!dense.ok()) return {};
  const float* p = static_cast<const float*>((*dense)->data());
  return std::vector<float>(p, p + *NumElements(t->shape));
}

// [2, rows, 3] holding row r of batch b as 100 b + 10 (first + r) + channel.
std::vector<float> Rows(int64_t first, int64_t rows) {
  std::vector<float> v;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < 3; ++c) v.push_back(static_cast<float>(100 * b + 10 * (first + r) + c));
    }
  }
  return v;
}

TEST_F(VmTest, ConcatAppendGrowsTheFirstInputsBufferInPlaceOnlyWhileNothingGrewPastIt) {
  auto exe = Executable::FromDef(AppendDef(/*relu_of_past=*/true), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto step = [&](const TensorPtr& past, int64_t first, int64_t rows) -> std::vector<TensorPtr> {
    EXPECT_TRUE((*vm)->SetInputs(0, {past, Input({2, rows, 3}, Rows(first, rows))}).ok());
    auto out = (*vm)->Invoke(0);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? *out : std::vector<TensorPtr>{};
  };
  // From an empty cache: a new buffer with room, the present a view of it.
  std::vector<TensorPtr> one = step(Input({2, 0, 3}, {}), 0, 1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_TRUE(one[0]->view());
  EXPECT_EQ(one[0]->shape, (Shape{2, 1, 3}));
  EXPECT_GT(one[0]->physical[1], 1);
  EXPECT_EQ(Values(*allocator_, one[0]), Rows(0, 1));
  // Fed back: two rows appended in the same buffer; Relu read a dense copy of the past.
  std::vector<TensorPtr> two = step(one[0], 1, 2);
  EXPECT_FALSE(two[1]->view());
  EXPECT_EQ(Values(*allocator_, two[1]), Rows(0, 1));
  EXPECT_EQ(two[0]->buffer.get(), one[0]->buffer.get());
  EXPECT_EQ(two[0]->shape, (Shape{2, 3, 3}));
  EXPECT_EQ(Values(*allocator_, two[0]), Rows(0, 3));
  EXPECT_EQ(Values(*allocator_, one[0]), Rows(0, 1)) << "the earlier view keeps its rows";
  // The earlier step's cache again (a branch): its rows end before the buffer's filled
  // ones, so the append gets a buffer of its own and the later cache stays as it was.
  std::vector<float> branch_rows = Rows(0, 1);
  for (float& v : branch_rows) v = -v - 1.0f;
  ASSERT_TRUE((*vm)->SetInputs(0, {one[0], Input({2, 1, 3}, branch_rows)}).ok());
  auto branch = (*vm)->Invoke(0);
  ASSERT_TRUE(branch.ok()) << branch.status().ToString();
  EXPECT_NE((*branch)[0]->buffer.get(), one[0]->buffer.get());
  EXPECT_EQ(Values(*allocator_, two[0]), Rows(0, 3));
  std::vector<float> want = Values(*allocator_, one[0]);
  std::vector<float> got = Values(*allocator_, (*branch)[0]);
  ASSERT_EQ(got.size(), 12u);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(got[static_cast<size_t>(b * 6 + c)], want[static_cast<size_t>(b * 3 + c)]);
      EXPECT_EQ(got[static_cast<size_t>(b * 6 + 3 + c)], branch_rows[static_cast<size_t>(b * 3 + c)]);
    }
  }
  // Growing past its room moves the cache to a larger buffer, values kept.
  TensorPtr cache = two[0];
  int64_t rows = 3;
  const Buffer* first_buffer = cache->buffer.get();
  while (cache->buffer.get() == first_buffer) {
    cache = step(cache, rows, 1)[0];
    ++rows;
    ASSERT_LT(rows, 100);
  }
  EXPECT_EQ(cache->shape, (Shape{2, rows, 3}));
  EXPECT_EQ(Values(*allocator_, cache), Rows(0, rows));
  // A view is no buffer to bind an output to.
  Status bind = (*vm)->SetOutput(0, 0, cache);
  EXPECT_EQ(bind.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bind.message().find("view"), std::string::npos) << bind.message();
}

// Read by a kernel that takes no view, the concatenation is a dense tensor (a view
// would cost a copy per such reader); a bound output takes it densely too.
TEST_F(VmTest, ConcatAppendIsDenseForADenseReaderAndABoundOutput) {
  auto exe = Executable::FromDef(AppendDef(/*relu_of_past=*/false), Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 1, 3}, Rows(0, 1)), Input({2, 1, 3}, Rows(1, 1))}).ok());
  auto dense = (*vm)->Invoke(0);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_FALSE((*dense)[0]->view());
  EXPECT_EQ(Values(*allocator_, (*dense)[0]), Rows(0, 2));
  EXPECT_EQ(Values(*allocator_, (*dense)[1]), Rows(0, 2));
  TensorPtr bound = Input({2, 3, 3}, std::vector<float>(18, -1.0f));
  ASSERT_TRUE((*vm)->SetOutput(0, 0, bound).ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 2, 3}, Rows(0, 2)), Input({2, 1, 3}, Rows(2, 1))}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].get(), bound.get());
  EXPECT_FALSE(bound->view());
  EXPECT_EQ(Values(*allocator_, bound), Rows(0, 3));
  EXPECT_EQ(Values(*allocator_, (*out)[1]), Rows(0, 3));
  // The bound buffer's shape must be the call's.
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 1, 3}, Rows(0, 1)), Input({2, 1, 3}, Rows(1, 1))}).ok());
  auto mismatch = (*vm)->Invoke(0);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("bound to output 'present'"), std::string::npos);
}

// What only a hand-built executable does with ConcatAppend is an error, not a write
// into other views' rows: a kernel writing its result, an output of another dtype.
TEST_F(VmTest, ConcatAppendRefusesAKernelWritingItsResultAndAnotherDtype) {
  ExecutableDef overwrite = AppendDef(/*relu_of_past=*/true);
  overwrite.functions[0].code[3] = {Opcode::kInvokeKernel, {0}, {{0}, {2}}};  // Relu(past) -> present
  auto exe = Executable::FromDef(overwrite, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 1, 3}, Rows(0, 1)), Input({2, 1, 3}, Rows(1, 1))}).ok());
  auto out = (*vm)->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("grown in place"), std::string::npos) << out.status().ToString();

  ExecutableDef other_dtype = AppendDef(/*relu_of_past=*/true);
  other_dtype.functions[0].outputs[0].dtype = DType::kInt8;
  exe = Executable::FromDef(other_dtype, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  vm = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  ASSERT_TRUE((*vm)->SetInputs(0, {Input({2, 1, 3}, Rows(0, 1)), Input({2, 1, 3}, Rows(1, 1))}).ok());
  out = (*vm)->Invoke(0);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("int8"), std::string::npos) << out.status().ToString();
}

TEST_F(VmTest, InjectedDeviceFaultFailsTheKernelAndHoldsUntilReset) {
  RunControl control;
  std::unique_ptr<VirtualMachine> vm = SpinVm(control);
  ASSERT_NE(vm, nullptr);
  EXPECT_TRUE(device_->Health().ok());
  // The spin loop launches one Relu per turn until something stops it: the 5th launch.
  device_->InjectFaultAtKernel(5);
  auto out = vm->Invoke(0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kAborted) << out.status().ToString();
  EXPECT_NE(out.status().message().find("cpu: device fault"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("node 'relu'"), std::string::npos) << out.status().ToString();
  Status health = device_->Health();
  EXPECT_EQ(health.code(), StatusCode::kAborted) << health.ToString();
  EXPECT_NE(health.message().find("device fault"), std::string::npos);
  // The fault fired once; the device stays faulted until it is reset.
  EXPECT_FALSE(device_->Health().ok());
  ASSERT_TRUE(device_->Reset().ok());
  EXPECT_TRUE(device_->Health().ok());
  control.budget = std::chrono::milliseconds(20);
  control.deadline = std::chrono::steady_clock::now() + control.budget;
  auto again = vm->Invoke(0);
  EXPECT_EQ(again.status().code(), StatusCode::kDeadlineExceeded) << again.status().ToString();
  EXPECT_TRUE(device_->Health().ok());
  // Host kernels run on the host device, which the injection does not touch.
  EXPECT_TRUE(HostDevice().Health().ok());
}

// A device whose allocations are slow (1 ms) and whose memory is 4 blocks of 1 MiB.
class SlowSmallDevice final : public Device {
 public:
  DeviceCapabilities capabilities() const override { return {}; }
  std::string name() const override { return "slow"; }
  std::string description() const override { return "slow small test device"; }
  uint64_t memory_bytes() const override { return 4u << 20; }
  StatusOr<void*> Allocate(size_t bytes) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return std::malloc(bytes);
  }
  void Deallocate(void* ptr, size_t) override { std::free(ptr); }
  Status CopyToDevice(void*, const void*, size_t) override { return OkStatus(); }
  Status CopyToHost(void*, const void*, size_t) override { return OkStatus(); }
  Status CopyOnDevice(void*, const void*, size_t) override { return OkStatus(); }
  Status Synchronize() override { return OkStatus(); }
};

TEST(AllocatorTest, ConcurrentAllocationsNeverExceedTheDevicesCapacity) {
  SlowSmallDevice device;
  auto allocator = Allocator::Create(device);
  std::mutex mu;
  std::vector<std::shared_ptr<Buffer>> held;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        auto b = allocator->Allocate(1u << 20);
        if (b.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          held.push_back(*b);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  // 32 requests of 1 MiB from 8 threads against 4 MiB: exactly 4 succeed, however the
  // threads interleave (a check and a reservation under separate locks let all 8 of
  // the first round through while each waits on the slow device).
  EXPECT_EQ(held.size(), 4u);
  EXPECT_LE(allocator->stats().reserved_bytes, device.memory_bytes());
}

TEST(AllocatorTest, PastItsBoundTheCacheReturnsTheLongestFreedBlocksOnly) {
  auto device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device, 3u << 20);
  std::vector<std::shared_ptr<Buffer>> held;
  for (size_t mib : {1, 2, 1, 1}) {
    auto b = allocator->Allocate(mib << 20);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    held.push_back(*b);
  }
  EXPECT_EQ(allocator->stats().device_allocations, 4u);
  // Freed in order 1 MiB, 2 MiB, 1 MiB, 1 MiB: 5 MiB against a 3 MiB bound. The first
  // two go back to the device; the last two stay cached, not the whole cache dropped.
  for (auto& b : held) b.reset();
  EXPECT_EQ(allocator->stats().reserved_bytes, 2u << 20);
  EXPECT_EQ(allocator->stats().allocated_bytes, 0u);
  auto again = allocator->Allocate(1u << 20);
  auto again2 = allocator->Allocate(1u << 20);
  ASSERT_TRUE(again.ok() && again2.ok());
  EXPECT_EQ(allocator->stats().device_allocations, 4u) << "the cached 1 MiB blocks were not reused";
  auto big = allocator->Allocate(2u << 20);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(allocator->stats().device_allocations, 5u) << "the evicted 2 MiB block was still cached";
  EXPECT_EQ(allocator->stats().reserved_bytes, 4u << 20);
}

// A tensor that grows by 1 KiB a call, each call's new one allocated before the last is
// freed (a decoder step's KV cache): the freed blocks serve the next calls, instead of
// one new block from the device per call.
TEST(AllocatorTest, ATensorThatGrowsALittleEachCallReusesFreedBlocks) {
  auto device = CreateCpuDevice();
  auto allocator = Allocator::Create(*device);
  std::shared_ptr<Buffer> previous;
  constexpr int kCalls = 256;
  for (int call = 0; call < kCalls; ++call) {
    auto b = allocator->Allocate((size_t{128} << 10) + (size_t(call) << 10));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    previous = *b;  // the last call's block freed
  }
  // 128 to 383 KiB: the size classes 128, 160, 192, 224, 256, 320 and 384 KiB, each
  // drawn from the device at most twice (the new block is allocated while the last is
  // held); in 512 B classes it was one block a call.
  EXPECT_LE(allocator->stats().device_allocations, 14u);
  EXPECT_GE(allocator->stats().allocated_bytes, previous->size());
  EXPECT_LE(allocator->stats().allocated_bytes, previous->size() * 5 / 4) << "more than 25 % rounding";
}

// The VmFlags of the mapping of /proc/self/smaps that holds `p` ("" when none does).
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    // A mapping's first line is "BEGIN-END perms ..."; its fields are "Name: value".
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {
      inside = addr >= begin && addr < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(CpuDeviceTest, LargeBlocksAreAdvisedHugePagesSmallOnesAreNot) {
  auto device = CreateCpuDevice();
  auto big = device->Allocate(8u << 20);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*big) % (2u << 20), 0u) << "a large block starts on a 2 MiB boundary";
  const std::string flags = VmFlagsOf(*big);
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the block";
  // "hg": the mapping carries MADV_HUGEPAGE, whatever the system's THP mode.
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  auto small = device->Allocate(64u << 10);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(VmFlagsOf(*small).find(" hg"), std::string::npos) << VmFlagsOf(*small);
  device->Deallocate(*big, 8u << 20);
  device->Deallocate(*small, 64u << 10);
}

// Host tensors (AllocTensor in memory space 1) are bounded by the quota over the VM's
// device allocator (a session's), for the VM and its instances: a host tensor past it is
// RESOURCE_EXHAUSTED naming them, never a host allocation the session is not charged
// for (a fuzzed executable asked for 4 GiB).
TEST_F(VmTest, HostTensorsAreBoundedByTheSessionsQuota) {
  ExecutableDef def = AddReluDef();
  FunctionDef& fn = def.functions[0];
  fn.num_registers = 6;
  fn.code.insert(fn.code.begin(), {Opcode::kAllocTensor, {5, 1, 1}, {{1024, 1024, 16}}});  // 64 MiB on the host
  fn.code.insert(fn.code.begin() + 1, {Opcode::kKillRegister, {5}, {}});
  auto exe = Executable::FromDef(def, Registry());
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto session = Allocator::CreateWithQuota(allocator_, 4u << 20, "session 1");
  auto vm = VirtualMachine::Create(*exe, session, Registry());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto instance = (*vm)->CreateInstance(Registry(), session);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  for (VirtualMachine* v : {vm->get(), instance->get()}) {
    ASSERT_TRUE(v->SetInputs(0, {Input({1, 3}, {1, 2, 3})}).ok());
    auto out = v->Invoke(0);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
    EXPECT_NE(out.status().message().find("host tensors"), std::string::npos) << out.status().ToString();
  }
  // Without a quota (a VM of its own), the same executable runs.
  auto unbounded = VirtualMachine::Create(*exe, allocator_, Registry());
  ASSERT_TRUE(unbounded.ok());
  ASSERT_TRUE((*unbounded)->SetInputs(0, {Input({1, 3}, {1, 2, 3})}).ok());
  auto out = (*unbounded)->Invoke(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
}

TEST(AllocatorTest, QuotaBoundsItsOwnBlocksAndGivesThemBack) {
  auto device = CreateCpuDevice();
  auto root = Allocator::Create(*device);
  auto a = Allocator::CreateWithQuota(root, 4u << 20, "session 1");
  auto b = Allocator::CreateWithQuota(root, 4u << 20, "session 2");
  auto x = a->Allocate(3u << 20);
  ASSERT_TRUE(x.ok());
  auto over = a->Allocate(2u << 20);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("session 1"), std::string::npos) << over.status().ToString();
  EXPECT_NE(over.status().message().find("memory quota of 4194304 bytes"), std::string::npos);
  // The other quota is its own; the root sees both.
  auto y = b->Allocate(3u << 20);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(a->stats().allocated_bytes, 3u << 20);
  EXPECT_EQ(root->stats().allocated_bytes, 6u << 20);
  // Freed blocks are refunded to the quota and cached by the root.
  x->reset();
  EXPECT_EQ(a->stats().allocated_bytes, 0u);
  EXPECT_EQ(a->stats().live_buffers, 0u);
  EXPECT_TRUE(a->Allocate(4u << 20).ok());
  EXPECT_EQ(root->stats().allocated_bytes, 3u << 20);
}

// A queue's allocator (CreateForQueue) keeps what it frees for its own reuse, charges
// its blocks to the parent's quota, and gives them back only when it goes.
TEST(AllocatorTest, AQueueKeepsItsFreedBlocksUntilItGoes) {
  auto device = CreateCpuDevice();
  auto root = Allocator::Create(*device);
  auto session = Allocator::CreateWithQuota(root, 4u << 20, "session 1");
  auto made = Allocator::CreateForQueue(session, *device);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::shared_ptr<Allocator> queue = std::move(*made);
  EXPECT_EQ(&queue->device(), device.get());
  void* first = nullptr;
  {
    auto a = queue->Allocate(3u << 20);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    first = (*a)->data();
    EXPECT_EQ(queue->stats().allocated_bytes, 3u << 20);
    EXPECT_EQ(session->stats().allocated_bytes, 3u << 20);
    // Over the session's quota.
    auto over = queue->Allocate(2u << 20);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(over.status().message().find("session 1"), std::string::npos) << over.status().ToString();
  }
  // Freed: the queue's no longer, still the session's, and reused by the queue.
  EXPECT_EQ(queue->stats().allocated_bytes, 0u);
  EXPECT_EQ(queue->stats().live_buffers, 0u);
  EXPECT_EQ(session->stats().allocated_bytes, 3u << 20);
  const uint64_t device_allocations = root->stats().device_allocations;
  {
    auto again = queue->Allocate(3u << 20);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->data(), first);
    EXPECT_EQ(root->stats().device_allocations, device_allocations);
  }
  // Trim leaves the queue's blocks with it.
  queue->Trim();
  EXPECT_EQ(session->stats().allocated_bytes, 3u << 20);
  // Gone: every block back to the session, refunded to its quota, cached by the root.
  queue.reset();
  EXPECT_EQ(session->stats().allocated_bytes, 0u);
  EXPECT_EQ(session->stats().live_buffers, 0u);
  EXPECT_TRUE(session->Allocate(4u << 20).ok());
  // A queue must be on the parent's memory.
  auto other = CreateCpuDevice();
  auto elsewhere = Allocator::CreateForQueue(session, *other);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace vm_test
}  // namespace remex::vm
