// Device graphs on the CUDA device (CUDA Graphs; under the host emulation in CI): the
// device's recording (Device::BeginCapture / EndCapture) and the VM's graphs
// (VirtualMachine::set_device_graphs): recorded at the second call with the same
// shapes, launched after, outputs as without graphs, refused where a kernel reads back.
// Each test skips itself when no CUDA GPU is visible.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/device/cuda_device.h"
#include "vm/device/cuda_device_test_util.h"
#include "vm/executable.h"
#include "vm/vm.h"
#include "vm/vm_test_util.h"

namespace remex::vm {
namespace cuda_graph_test {

TensorPtr Upload(Device& device, Allocator& allocator, DType dtype, const Shape& shape, const void* data) {
  auto t = AllocateTensor(allocator, dtype, shape);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(device.CopyToDevice((*t)->data(), data, (*t)->nbytes()).ok());
  return *t;
}

std::vector<float> Download(Device& device, const TensorPtr& t) {
  std::vector<float> v(t->nbytes() / 4);
  EXPECT_TRUE(device.CopyToHost(v.data(), t->data(), t->nbytes()).ok());
  return v;
}

TEST(CudaGraphs, TheDeviceRecordsItsQueuedWorkAndRefusesWaitsAndHostCopies) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  EXPECT_TRUE(device->capabilities().graphs);
  auto allocator = Allocator::Create(*device);
  const std::vector<float> ones(64, 1.0f);
  TensorPtr a = Upload(*device, *allocator, DType::kFloat32, {64}, ones.data());
  TensorPtr b = Upload(*device, *allocator, DType::kFloat32, {64}, ones.data());

  // A wait or a host copy while recording is refused and spoils the recording.
  ASSERT_TRUE(device->BeginCapture().ok());
  EXPECT_EQ(device->BeginCapture().code(), StatusCode::kFailedPrecondition);
  Status wait = device->Synchronize();
  EXPECT_EQ(wait.code(), StatusCode::kFailedPrecondition) << wait.ToString();
  std::vector<float> host(64);
  EXPECT_EQ(device->CopyToHost(host.data(), a->data(), 256).code(), StatusCode::kFailedPrecondition);
  auto spoiled = device->EndCapture();
  ASSERT_FALSE(spoiled.ok());
  EXPECT_EQ(spoiled.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(spoiled.status().message().find("Synchronize"), std::string::npos) << spoiled.status().ToString();
  EXPECT_EQ(device->EndCapture().status().code(), StatusCode::kFailedPrecondition);  // not recording

  // Memset and a copy on the device: recorded, not run, and run at each launch.
  ASSERT_TRUE(device->BeginCapture().ok());
  ASSERT_TRUE(device->Memset(a->data(), 0, 256).ok());
  ASSERT_TRUE(device->CopyOnDevice(b->data(), a->data(), 256).ok());
  // Memory allocated while recording is ordinary memory.
  auto scratch = allocator->Allocate(1 << 20);
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  auto graph = device->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_EQ((*graph)->size(), 2u);
  EXPECT_EQ(Download(*device, b), ones);
  ASSERT_TRUE((*graph)->Launch().ok());
  EXPECT_EQ(Download(*device, b), std::vector<float>(64, 0.0f));
  scratch->reset();
  allocator->Trim();
  EXPECT_TRUE(device->Synchronize().ok());
}

// A VM on the device with workspaces from its allocator, as the server makes it.
struct GraphVm {
  std::unique_ptr<Device> device;
  std::shared_ptr<Allocator> allocator;
  std::unique_ptr<kernels::KernelRegistry> registry;
  std::unique_ptr<VirtualMachine> vm;

  bool Make(const ExecutableDef& def, std::string* why) {
    device = MustCreate(0);
    if (!device) return false;
    allocator = Allocator::Create(*device);
    registry = CudaRegistry(CudaKernelContextFor(allocator), why);
    if (!registry) return false;
    auto exe = Executable::FromDef(def, *registry);
    if (!exe.ok()) {
      *why = exe.status().ToString();
      return false;
    }
    auto made = VirtualMachine::Create(*exe, allocator, *registry);
    if (!made.ok()) {
      *why = made.status().ToString();
      return false;
    }
    vm = std::move(made).value();
    return true;
  }
};

// Relu(x + c) on x: float32[rows, 3] with every element `value`.
std::vector<float> AddRelu(float value, int64_t rows) {
  const float c[3] = {1.0f, -2.0f, 0.5f};
  std::vector<float> y(static_cast<size_t>(rows) * 3);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(0.0f, value + c[i % 3]);
  return y;
}

TEST(CudaGraphs, TheVmRecordsAtTheSecondCallWithTheSameShapesAndLaunchesAfter) {
  SKIP_WITHOUT_GPU();
  GraphVm g;
  std::string why;
  ASSERT_TRUE(g.Make(AddReluDef(), &why)) << why;
  VirtualMachine& vm = *g.vm;
  vm.set_device_graphs(true);
  ASSERT_TRUE(vm.device_graphs());
  auto call = [&](float value, int64_t rows) -> TensorPtr {
    std::vector<float> x(static_cast<size_t>(rows) * 3, value);
    EXPECT_TRUE(
        vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {rows, 3}, x.data())}).ok());
    auto out = vm.Invoke(0);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? (*out)[0] : nullptr;
  };

  std::vector<TensorPtr> outputs;
  outputs.push_back(call(0.0f, 5));  // runs plainly, and stayed on the device
  EXPECT_FALSE(vm.last_invoke_graph());
  EXPECT_EQ(vm.graph_stats().recordings, 0u);
  // A recording stopped from outside (here a cancel) is the call's error, and the next
  // call records again.
  RunControl control;
  control.reason = "test cancel";
  control.cancelled = true;
  vm.set_run_control(&control);
  std::vector<float> ones(15, 1.0f);
  ASSERT_TRUE(vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {5, 3}, ones.data())}).ok());
  EXPECT_EQ(vm.Invoke(0).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(vm.graph_stats().refusals, 0u);
  vm.set_run_control(nullptr);
  outputs.push_back(call(1.0f, 5));  // recorded, then launched
  EXPECT_TRUE(vm.last_invoke_graph());
  EXPECT_EQ(vm.graph_stats().recordings, 1u);
  EXPECT_GE(vm.graph_stats().nodes, 2u);  // the Add and Relu kernels at least
  for (float value : {2.0f, -1.0f, 3.0f}) {
    outputs.push_back(call(value, 5));
    EXPECT_TRUE(vm.last_invoke_graph());
  }
  EXPECT_EQ(vm.graph_stats().launches, 4u);
  EXPECT_EQ(vm.graph_stats().recordings, 1u);
  EXPECT_EQ(vm.last_invoke_function(), 0);
  // Every output is the caller's: later launches did not overwrite earlier ones.
  const float values[] = {0.0f, 1.0f, 2.0f, -1.0f, 3.0f};
  for (size_t i = 0; i < outputs.size(); ++i) {
    ASSERT_TRUE(outputs[i]);
    EXPECT_EQ(Download(*g.device, outputs[i]), AddRelu(values[i], 5)) << "call " << i;
  }
  // No transfer with the host in any call: the graph's copies are on the device.
  EXPECT_EQ(vm.last_invoke_copies().host_to_device_count + vm.last_invoke_copies().device_to_host_count, 0u);

  // Other shapes get their own graph; the first shapes keep theirs.
  EXPECT_EQ(Download(*g.device, call(4.0f, 7)), AddRelu(4.0f, 7));
  EXPECT_FALSE(vm.last_invoke_graph());
  EXPECT_EQ(Download(*g.device, call(5.0f, 5)), AddRelu(5.0f, 5));
  EXPECT_TRUE(vm.last_invoke_graph());
  EXPECT_EQ(Download(*g.device, call(6.0f, 7)), AddRelu(6.0f, 7));
  EXPECT_EQ(vm.graph_stats().recordings, 2u);
  EXPECT_EQ(vm.graph_stats().live, 2u);

  // A bound output receives the graph's output.
  auto bound = AllocateTensor(*g.allocator, DType::kFloat32, {5, 3});
  ASSERT_TRUE(bound.ok());
  ASSERT_TRUE(vm.SetOutput(0, 0, *bound).ok());
  TensorPtr into = call(7.0f, 5);
  EXPECT_TRUE(vm.last_invoke_graph());
  EXPECT_EQ(into.get(), bound->get());
  EXPECT_EQ(Download(*g.device, *bound), AddRelu(7.0f, 5));
  // ... and one of other shapes is refused as without graphs.
  std::vector<float> x7(21, 1.0f);
  ASSERT_TRUE(vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {7, 3}, x7.data())}).ok());
  auto wrong = vm.Invoke(0);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument) << wrong.status().ToString();
  ASSERT_TRUE(vm.SetOutput(0, 0, nullptr).ok());

  // Graphs hold memory of their own until they go.
  outputs.clear();
  into.reset();
  bound->reset();
  ASSERT_TRUE(vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {1, 3}, x7.data())}).ok());
  const uint64_t with_graphs = g.allocator->stats().allocated_bytes;
  vm.set_device_graphs(false);
  EXPECT_EQ(vm.graph_stats().live, 0u);
  EXPECT_LT(g.allocator->stats().allocated_bytes, with_graphs);
  EXPECT_EQ(Download(*g.device, call(8.0f, 5)), AddRelu(8.0f, 5));
  EXPECT_FALSE(vm.last_invoke_graph());
}

// main(x: float32[4, 3]) -> Compress(x, condition, axis 0): float32[3, 3], the
// condition a host constant. The CUDA Compress uploads the kept indices from pageable
// host memory at each call, which a capture refuses; the calls themselves move nothing
// between the host and the device, so only the recording finds out.
ExecutableDef CompressDef() {
  ExecutableDef def;
  def.producer = "cuda_graph_test";
  ConstantDef condition;
  condition.dtype = DType::kBool;
  condition.shape = {4};
  condition.data = {std::byte{1}, std::byte{0}, std::byte{1}, std::byte{1}};
  def.constants.push_back(condition);
  kernels::Attributes attrs;
  attrs.Set("axis", int64_t{0});
  def.kernels.push_back({"Compress", attrs, 2, 1, "compress0"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {4, 3}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {3, 3}, {}}};
  fn.num_registers = 3;
  fn.code = {
      {Opcode::kLoadConst, {1, 0, 1}, {}},
      {Opcode::kAllocOutput, {2, 0, static_cast<int64_t>(DType::kFloat32), -1}, {{3, 3}}},
      {Opcode::kInvokeKernel, {0}, {{0, 1}, {2}}},
      {Opcode::kRet, {}, {{2}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

TEST(CudaGraphs, AFunctionWhoseKernelCannotBeRecordedRunsWithoutAGraph) {
  SKIP_WITHOUT_GPU();
  GraphVm g;
  std::string why;
  ASSERT_TRUE(g.Make(CompressDef(), &why)) << why;
  VirtualMachine& vm = *g.vm;
  vm.set_device_graphs(true);
  for (int call = 0; call < 4; ++call) {
    std::vector<float> x(12);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 100 * call);
    ASSERT_TRUE(vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {4, 3}, x.data())}).ok());
    auto out = vm.Invoke(0);
    ASSERT_TRUE(out.ok()) << "call " << call << ": " << out.status().ToString();
    EXPECT_FALSE(vm.last_invoke_graph());
    const std::vector<float> y = Download(*g.device, (*out)[0]);
    const int kept[3] = {0, 2, 3};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) EXPECT_EQ(y[r * 3 + c], x[kept[r] * 3 + c]) << "call " << call;
    }
  }
  EXPECT_EQ(vm.graph_stats().recordings, 0u);
  EXPECT_EQ(vm.graph_stats().refusals, 1u);
  EXPECT_EQ(vm.graph_stats().launches, 0u);
  const std::string reason = vm.graph_refusal(0, {{4, 3}});
  EXPECT_NE(reason.find("cudaMemcpyAsync"), std::string::npos) << reason;
}

// A KV cache the VM may grow in place (ConcatAppend giving a view, vm/README.md) writes
// another buffer at each call: its executable is never recorded. Where the
// concatenation is read densely (by Relu), it is a new dense tensor each call, which
// a graph records like any other output.
TEST(CudaGraphs, AnExecutableThatGrowsACacheInPlaceRunsWithoutAGraph) {
  SKIP_WITHOUT_GPU();
  for (bool relu_of_past : {true, false}) {
    SCOPED_TRACE(relu_of_past ? "present returned alone: a view" : "present read by Relu: dense");
    GraphVm g;
    std::string why;
    ASSERT_TRUE(g.Make(AppendDef(relu_of_past), &why)) << why;
    VirtualMachine& vm = *g.vm;
    vm.set_device_graphs(true);
    std::vector<float> past(12), next(6), want;
    for (size_t i = 0; i < past.size(); ++i) past[i] = static_cast<float>(i);
    for (size_t i = 0; i < next.size(); ++i) next[i] = static_cast<float>(100 + i);
    for (int b = 0; b < 2; ++b) {
      want.insert(want.end(), past.begin() + b * 6, past.begin() + b * 6 + 6);
      want.insert(want.end(), next.begin() + b * 3, next.begin() + b * 3 + 3);
    }
    for (int call = 0; call < 3; ++call) {
      ASSERT_TRUE(vm.SetInputs(0, {Upload(*g.device, *g.allocator, DType::kFloat32, {2, 2, 3}, past.data()),
                                   Upload(*g.device, *g.allocator, DType::kFloat32, {2, 1, 3}, next.data())})
                      .ok());
      auto out = vm.Invoke(0);
      ASSERT_TRUE(out.ok()) << "call " << call << ": " << out.status().ToString();
      EXPECT_EQ((*out)[0]->view(), relu_of_past);
      auto present = DenseTensor(*g.allocator, (*out)[0]);
      ASSERT_TRUE(present.ok()) << present.status().ToString();
      EXPECT_EQ(Download(*g.device, *present), want) << "call " << call;
    }
    EXPECT_EQ(vm.graph_stats().recordings, relu_of_past ? 0u : 1u);
    EXPECT_EQ(vm.graph_stats().launches == 0, relu_of_past);
    if (relu_of_past) {
      EXPECT_EQ(vm.graph_stats().refusals, 1u);
      const std::string reason = vm.graph_refusal(0, {{2, 2, 3}, {2, 1, 3}});
      EXPECT_NE(reason.find("ConcatAppend"), std::string::npos) << reason;
    }
  }
}

// main(x: float32[1, 3, 9, 8]) -> Conv(x, w, b, pads 0 1 1 2): float32[1, 4, 8, 9]. The
// CUDA Conv pads X into a workspace block (asymmetric pads), taken from the allocator
// its registry was made with: the server's, not the session's.
ExecutableDef PaddedConvDef() {
  ExecutableDef def;
  def.producer = "cuda_graph_test";
  std::vector<float> w(4 * 3 * 3 * 3), b(4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 8.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) / 4.0f;
  def.constants.push_back(FloatConstant({4, 3, 3, 3}, w));
  def.constants.push_back(FloatConstant({4}, b));
  kernels::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{0, 1, 1, 2});
  def.kernels.push_back({"Conv", attrs, 3, 1, "conv0"});
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {1, 3, 9, 8}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {1, 4, 8, 9}, {}}};
  fn.num_registers = 4;
  fn.code = {
      {Opcode::kLoadConst, {1, 0, 0}, {}},
      {Opcode::kLoadConst, {2, 1, 0}, {}},
      {Opcode::kAllocOutput, {3, 0, static_cast<int64_t>(DType::kFloat32), -1}, {{1, 4, 8, 9}}},
      {Opcode::kInvokeKernel, {0}, {{0, 1, 2}, {3}}},
      {Opcode::kRet, {}, {{3}}},
  };
  def.functions.push_back(std::move(fn));
  return def;
}

TEST(CudaGraphs, WhatAGraphHoldsIsChargedToTheVmsAllocator) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  // As in the server: the kernels' workspaces from the server's allocator, the VM's
  // memory from a session's quota over it.
  auto server = Allocator::Create(*device);
  auto session = Allocator::CreateWithQuota(server, uint64_t{1} << 30, "session 1");
  std::string why;
  auto registry = CudaRegistry(CudaKernelContextFor(server), &why);
  ASSERT_TRUE(registry) << why;
  if (!registry->FindKernel("Conv", kernels::DeviceKind::kCuda)) GTEST_SKIP() << "no CUDA Conv (built without cuDNN)";
  auto exe = Executable::FromDef(PaddedConvDef(), *registry);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto made = VirtualMachine::Create(*exe, session, *registry);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  VirtualMachine& vm = **made;
  std::vector<float> x(3 * 9 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 11) / 11.0f;
  std::vector<std::vector<float>> results;
  for (bool graphs : {false, true}) {
    vm.set_device_graphs(graphs);
    for (int call = 0; call < 3; ++call) {
      ASSERT_TRUE(vm.SetInputs(0, {Upload(*device, *session, DType::kFloat32, {1, 3, 9, 8}, x.data())}).ok());
      auto out = vm.Invoke(0);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ(vm.last_invoke_graph(), graphs && call > 0);
      results.push_back(Download(*device, (*out)[0]));
    }
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << "call " << i;
  ASSERT_EQ(vm.graph_stats().recordings, 1u);
  // The graph holds the padded copy's workspace block among its buffers, and every
  // buffer it holds is the session's.
  std::vector<const Buffer*> held;
  vm.HeldBuffers(held);
  size_t of_session = 0;
  for (const Buffer* b : held) {
    if (&b->device() != &HostDevice()) {
      EXPECT_EQ(b->owner(), session.get()) << b->size() << " bytes held from another allocator";
      ++of_session;
    }
  }
  EXPECT_GT(of_session, 4u);  // constants, the graph's input and output, the workspace
}

}  // namespace cuda_graph_test
}  // namespace remex::vm
