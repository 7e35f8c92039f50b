// Tests of the CUDA device and kernels that need a GPU (they skip themselves when none
// is visible): memory, streams and timing, whole kernels against the CPU's.

#include "vm/device/cuda_device.h"
#include "vm/device/cuda_device_test_util.h"
#include "vm/vm_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/executable.h"
#include "vm/vm.h"

namespace remex::vm {
namespace cuda_device_gpu_test {

using kernels::DeviceKind;
using kernels::TensorRef;

// ---------------------------------------------------------------------------
// With a GPU.

TEST(CudaDevice, DescribesItself) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  EXPECT_EQ(device->kernel_kind(), DeviceKind::kCuda);
  EXPECT_EQ(device->name(), "cuda:0");
  EXPECT_GT(device->memory_bytes(), 0u);
  EXPECT_NE(device->description().find("compute capability"), std::string::npos) << device->description();
  EXPECT_NE(device->description().find("driver"), std::string::npos) << device->description();
  EXPECT_NE(CudaStreamOf(*device), nullptr);
  EXPECT_EQ(CudaOrdinalOf(*device), 0);
  EXPECT_EQ(CudaStreamOf(HostDevice()), nullptr);
}

// What the server and the VM decide by: a GPU's memory is not the host's, its work is
// queued, it makes streams and is reset after a fault; a stream of it shares its kernels
// but makes no streams and is not reset. Its kernels are the CUDA kernels, on its stream.
TEST(CudaDevice, DescribesItsCapabilities) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  const DeviceCapabilities caps = device->capabilities();
  EXPECT_EQ(caps.kernel_kind, DeviceKind::kCuda);
  EXPECT_FALSE(caps.host_addressable);
  EXPECT_FALSE(caps.inline_execution);
  EXPECT_FALSE(caps.host_access_in_place());
  EXPECT_TRUE(caps.streams);
  EXPECT_TRUE(caps.fault_recovery);
  EXPECT_EQ(caps.compute_threads, 0);

  auto allocator = Allocator::Create(*device);
  auto registry = kernels::CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  EXPECT_EQ((*registry)->FindKernel("Relu", DeviceKind::kCuda), nullptr);
  ASSERT_TRUE(device->RegisterKernels(**registry, allocator).ok());
  EXPECT_NE((*registry)->FindKernel("Relu", DeviceKind::kCuda), nullptr);

  auto stream = device->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(&(*stream)->memory_space(), device.get());
  EXPECT_NE(CudaStreamOf(**stream), CudaStreamOf(*device));
  const DeviceCapabilities stream_caps = (*stream)->capabilities();
  EXPECT_EQ(stream_caps.kernel_kind, DeviceKind::kCuda);
  EXPECT_FALSE(stream_caps.host_addressable);
  EXPECT_FALSE(stream_caps.inline_execution);
  EXPECT_FALSE(stream_caps.streams);
  EXPECT_FALSE(stream_caps.fault_recovery);
  EXPECT_EQ((*stream)->CreateStream().status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*stream)->Reset().code(), StatusCode::kFailedPrecondition);
}

TEST(CudaDevice, CopiesRoundTrip) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::mt19937 rng(1);
  // Direct copies, one staged chunk, several staged chunks with a partial last one.
  for (size_t bytes : {size_t{1}, size_t{4097}, kCudaStagingThreshold, kCudaStagingThreshold + 1,
                       3 * kCudaStagingChunk + 12345}) {
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> src(bytes + 3);
    for (auto& v : src) v = static_cast<uint8_t>(rng());
    auto d1 = device->Allocate(bytes);
    auto d2 = device->Allocate(bytes);
    ASSERT_TRUE(d1.ok() && d2.ok());
    // Unaligned host pointers on both sides.
    ASSERT_TRUE(device->CopyToDevice(*d1, src.data() + 3, bytes).ok());
    ASSERT_TRUE(device->CopyOnDevice(*d2, *d1, bytes).ok());
    std::vector<uint8_t> back(bytes + 1, 0);
    ASSERT_TRUE(device->CopyToHost(back.data() + 1, *d2, bytes).ok());
    EXPECT_EQ(std::memcmp(back.data() + 1, src.data() + 3, bytes), 0);

    ASSERT_TRUE(device->Memset(*d2, 0xA5, bytes).ok());
    ASSERT_TRUE(device->CopyToHost(back.data(), *d2, bytes).ok());
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(back[i], 0xA5) << i;
    // d1 is untouched by the memset of d2.
    ASSERT_TRUE(device->CopyToHost(back.data(), *d1, bytes).ok());
    EXPECT_EQ(std::memcmp(back.data(), src.data() + 3, bytes), 0);
    device->Deallocate(*d1, bytes);
    device->Deallocate(*d2, bytes);
  }
  EXPECT_TRUE(device->Synchronize().ok());
}

TEST(CudaDevice, BackToBackStagedUploadsDoNotOverwriteEachOther) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  // Two staged uploads in a row reuse the staging buffers while the first one's DMA
  // may still run; the source is overwritten right after each call returns.
  const size_t bytes = 2 * kCudaStagingChunk + 100;
  std::vector<uint8_t> src(bytes);
  std::vector<std::vector<uint8_t>> expected;
  std::vector<void*> blocks;
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + k * 13);
    expected.push_back(src);
    auto d = device->Allocate(bytes);
    ASSERT_TRUE(d.ok());
    blocks.push_back(*d);
    ASSERT_TRUE(device->CopyToDevice(*d, src.data(), bytes).ok());
    std::fill(src.begin(), src.end(), 0);
  }
  std::vector<uint8_t> back(bytes);
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(device->CopyToHost(back.data(), blocks[k], bytes).ok());
    EXPECT_EQ(back, expected[k]) << "upload " << k;
    device->Deallocate(blocks[k], bytes);
  }
}

TEST(CudaDevice, OutOfMemoryIsResourceExhausted) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  // More than the device has: refused before CUDA is asked.
  auto too_big = device->Allocate(device->memory_bytes() + 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted) << too_big.status().ToString();
  // All of the device's memory: CUDA itself refuses (the context holds some).
  auto all = device->Allocate(device->memory_bytes());
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kResourceExhausted) << all.status().ToString();
  // The device still works afterwards.
  auto small = device->Allocate(256);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  uint32_t v = 0xDEADBEEF;
  uint32_t back = 0;
  ASSERT_TRUE(device->CopyToDevice(*small, &v, 4).ok());
  ASSERT_TRUE(device->CopyToHost(&back, *small, 4).ok());
  EXPECT_EQ(back, v);
  device->Deallocate(*small, 256);

  // Through the caching allocator as the VM uses it.
  auto allocator = Allocator::Create(*device);
  auto buffer = allocator->Allocate(device->memory_bytes());
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted) << buffer.status().ToString();
}

// Host values for an elementwise test: float32 bits, or float16 bits of values that
// are exactly representable in float16.
struct HostValues {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
  float At(size_t i) const {
    if (dtype == DType::kFloat32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    kernels::Half h;
    std::memcpy(&h.bits, bytes.data() + 2 * i, 2);
    return kernels::HalfToFloat(h);
  }
};

HostValues RandomValues(DType dtype, const Shape& shape, bool away_from_zero, std::mt19937& rng) {
  HostValues v{dtype, shape, {}};
  const size_t n = static_cast<size_t>(*NumElements(shape));
  v.bytes.resize(n * DTypeSize(dtype));
  std::uniform_real_distribution<float> mag(away_from_zero ? 0.5f : 0.0f, 4.0f);
  for (size_t i = 0; i < n; ++i) {
    float f = mag(rng) * (rng() & 1 ? 1.0f : -1.0f);
    if (dtype == DType::kFloat32) {
      std::memcpy(v.bytes.data() + 4 * i, &f, 4);
    } else {
      kernels::Half h = kernels::FloatToHalf(f);
      std::memcpy(v.bytes.data() + 2 * i, &h.bits, 2);
    }
  }
  return v;
}

// Runs `op` on the CPU kernel (host memory) and on the CUDA kernel (device memory)
// and returns both outputs.
struct Outputs {
  HostValues cpu;
  HostValues gpu;
};

Outputs RunBoth(kernels::KernelRegistry& registry, Device& device, Allocator& allocator, const std::string& op,
                const std::vector<HostValues>& inputs, const Shape& out_shape) {
  const DType dtype = inputs[0].dtype;
  Outputs r{{dtype, out_shape, {}}, {dtype, out_shape, {}}};
  const size_t out_bytes = static_cast<size_t>(*NumElements(out_shape)) * DTypeSize(dtype);
  r.cpu.bytes.resize(out_bytes);
  r.gpu.bytes.resize(out_bytes);

  std::vector<std::vector<uint8_t>> cpu_in;
  std::vector<TensorRef> cpu_refs;
  for (const HostValues& v : inputs) cpu_in.push_back(v.bytes);
  for (size_t i = 0; i < inputs.size(); ++i) cpu_refs.push_back({cpu_in[i].data(), dtype, inputs[i].shape});
  std::vector<TensorRef> cpu_out = {{r.cpu.bytes.data(), dtype, out_shape}};
  auto cpu_kernel = (*registry.FindKernel(op, DeviceKind::kCpu))(kernels::Attributes());
  EXPECT_TRUE(cpu_kernel.ok());
  Status s = (*cpu_kernel)->Compute(cpu_refs, cpu_out);
  EXPECT_TRUE(s.ok()) << s.ToString();

  std::vector<TensorPtr> dev_in;
  std::vector<TensorRef> dev_refs;
  for (const HostValues& v : inputs) {
    auto t = AllocateTensor(allocator, dtype, v.shape);
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE(device.CopyToDevice((*t)->data(), v.bytes.data(), v.bytes.size()).ok());
    dev_refs.push_back((*t)->Ref());
    dev_in.push_back(*t);
  }
  auto out = AllocateTensor(allocator, dtype, out_shape);
  EXPECT_TRUE(out.ok());
  std::vector<TensorRef> dev_out = {(*out)->Ref()};
  auto cuda_kernel = (*registry.FindKernel(op, DeviceKind::kCuda))(kernels::Attributes());
  EXPECT_TRUE(cuda_kernel.ok());
  s = (*cuda_kernel)->Compute(dev_refs, dev_out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = device.CopyToHost(r.gpu.bytes.data(), (*out)->data(), out_bytes);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

void ExpectClose(const Outputs& r, float rtol, float atol, const std::string& what) {
  const size_t n = static_cast<size_t>(*NumElements(r.cpu.shape));
  for (size_t i = 0; i < n; ++i) {
    const float want = r.cpu.At(i);
    const float got = r.gpu.At(i);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::fabs(got - want), atol + rtol * std::fabs(want)) << what << " at " << i << ": cuda " << got
                                                                       << ", cpu " << want;
  }
}

TEST(CudaKernels, ElementwiseMatchesCpuOnRandomBroadcasts) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::string why;
  auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
  ASSERT_TRUE(registry) << why;
  auto allocator = Allocator::Create(*device);
  std::mt19937 rng(11);
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    // float16: both sides compute in float32 and round to nearest even, so results
    // should agree to the last bit; the tolerance allows one float16 ulp.
    const float rtol = dtype == DType::kFloat32 ? 1e-6f : 1e-3f;
    const float atol = dtype == DType::kFloat32 ? 1e-6f : 1e-3f;
    for (int trial = 0; trial < 40; ++trial) {
      Shape out = RandomOutputShape(rng);
      Shape a = RandomInputShape(out, rng);
      Shape b = RandomInputShape(out, rng);
      if (rng() & 1) std::swap(a, b);
      Shape full(out.size(), 1);
      for (const Shape* in : {&a, &b}) {
        for (size_t k = 0; k < in->size(); ++k) {
          int64_t& f = full[out.size() - 1 - k];
          f = std::max(f, (*in)[in->size() - 1 - k]);
        }
      }
      // Drop leading 1s the inputs do not have: the output rank is the larger input rank.
      const size_t rank = std::max(a.size(), b.size());
      full.erase(full.begin(), full.end() - static_cast<std::ptrdiff_t>(rank));
      for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
        const bool div = std::string(op) == "Div";
        std::vector<HostValues> in = {RandomValues(dtype, a, false, rng), RandomValues(dtype, b, div, rng)};
        Outputs r = RunBoth(*registry, *device, *allocator, op, in, full);
        ExpectClose(r, rtol, atol,
                    std::string(op) + " " + std::string(DTypeName(dtype)) + " " + ShapeToString(a) + " " +
                        ShapeToString(b));
      }
    }
    // Unary ops on random shapes, and a large tensor (many blocks, grid-stride loop).
    for (Shape shape : {Shape{}, Shape{7}, Shape{3, 5, 2}, Shape{1 << 22}}) {
      for (const char* op : {"Relu", "Sigmoid"}) {
        HostValues x = RandomValues(dtype, shape, false, rng);
        Outputs r = RunBoth(*registry, *device, *allocator, op, {x}, shape);
        // The CPU's Sigmoid uses a polynomial exp (a few ulps); CUDA's expf differs.
        const bool sigmoid = std::string(op) == "Sigmoid";
        ExpectClose(r, sigmoid && dtype == DType::kFloat32 ? 1e-5f : rtol, atol, std::string(op) + " " + std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
      }
    }
    // A large broadcast with the general (multi-dim) kernel.
    {
      Shape a = {64, 1, 1024};
      Shape b = {1, 96, 1};
      std::vector<HostValues> in = {RandomValues(dtype, a, false, rng), RandomValues(dtype, b, false, rng)};
      Outputs r = RunBoth(*registry, *device, *allocator, "Mul", in, {64, 96, 1024});
      ExpectClose(r, rtol, atol, "large Mul");
    }
  }
}

TEST(CudaKernels, SigmoidSaturatesAndReluKeepsNan) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::string why;
  auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
  ASSERT_TRUE(registry) << why;
  auto allocator = Allocator::Create(*device);
  const std::vector<float> xs = {-1000.0f, -100.0f, 0.0f, 100.0f, 1000.0f, NAN, INFINITY, -INFINITY};
  HostValues x{DType::kFloat32, {static_cast<int64_t>(xs.size())}, std::vector<uint8_t>(xs.size() * 4)};
  std::memcpy(x.bytes.data(), xs.data(), x.bytes.size());
  Outputs sig = RunBoth(*registry, *device, *allocator, "Sigmoid", {x}, x.shape);
  EXPECT_EQ(sig.gpu.At(0), 0.0f);
  EXPECT_EQ(sig.gpu.At(2), 0.5f);
  EXPECT_EQ(sig.gpu.At(4), 1.0f);
  EXPECT_TRUE(std::isnan(sig.gpu.At(5)));
  EXPECT_EQ(sig.gpu.At(6), 1.0f);
  EXPECT_EQ(sig.gpu.At(7), 0.0f);
  Outputs relu = RunBoth(*registry, *device, *allocator, "Relu", {x}, x.shape);
  EXPECT_EQ(relu.gpu.At(0), 0.0f);
  EXPECT_EQ(relu.gpu.At(3), 100.0f);
  EXPECT_TRUE(std::isnan(relu.gpu.At(5)));
  EXPECT_EQ(relu.gpu.At(6), INFINITY);
  EXPECT_EQ(relu.gpu.At(7), 0.0f);
}

// main(x: float32[?, 3]) -> y = Relu(x + c) (vm_test_util.h), run by the VM on the
// GPU: constants uploaded, a runtime shape function, the CUDA kernels, a bound-free
// output read back.

TEST(CudaVm, RunsAddReluOnTheGpu) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::string why;
  auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
  ASSERT_TRUE(registry) << why;
  auto allocator = Allocator::Create(*device);
  auto exe = Executable::FromDef(AddReluDef(), *registry);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator, *registry);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  for (int64_t rows : {1, 5, 1000}) {
    std::vector<float> x(rows * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    auto input = AllocateTensor(*allocator, DType::kFloat32, {rows, 3});
    ASSERT_TRUE(input.ok());
    ASSERT_TRUE(device->CopyToDevice((*input)->data(), x.data(), x.size() * 4).ok());
    ASSERT_TRUE((*vm)->SetInputs(0, {*input}).ok());
    auto out = (*vm)->Invoke(0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0]->shape, (Shape{rows, 3}));
    std::vector<float> y(x.size());
    ASSERT_TRUE(device->CopyToHost(y.data(), (*out)[0]->data(), y.size() * 4).ok());
    const float c[3] = {1.0f, -2.0f, 0.5f};
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], std::max(0.0f, x[i] + c[i % 3])) << i;
  }
  EXPECT_EQ((*vm)->copy_stats().device_to_host_count, 0u);
}

// ONNX sequences on the GPU: main(s: sequence<float32>, x: float32[2], p: int64[]) ->
// (SequenceInsert(s, x, p): sequence, SequenceAt(that, p): optional tensor). The
// returned elements are new device tensors, copied on the device.
TEST(CudaVm, SequencesKeepTheirElementsOnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::string why;
  auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
  ASSERT_TRUE(registry) << why;
  auto allocator = Allocator::Create(*device);
  ExecutableDef def;
  FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"s", DType::kFloat32, {}, {}, ValueKind::kSequence, false},
               {"x", DType::kFloat32, {2}, {}},
               {"p", DType::kInt64, {}, {}}};
  fn.outputs = {{"t", DType::kFloat32, {}, {}, ValueKind::kSequence, false},
                {"e", DType::kFloat32, {2}, {}, ValueKind::kOptionalTensor, true}};
  fn.num_registers = 5;
  fn.code = {
      {Opcode::kSeqInsert, {3, 0, 1, 2}, {}},
      {Opcode::kSeqAt, {4, 3, 2}, {}},
      {Opcode::kRet, {}, {{3, 4}}},
  };
  def.functions.push_back(std::move(fn));
  auto exe = Executable::FromDef(def, *registry);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator, *registry);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto upload = [&](DType dtype, const Shape& shape, const void* data, size_t bytes) {
    auto t = AllocateTensor(*allocator, dtype, shape);
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE(device->CopyToDevice((*t)->data(), data, bytes).ok());
    return *t;
  };
  const float a[3] = {1, 2, 3}, x[2] = {4, 5};
  const int64_t p = 1;
  TensorPtr ta = upload(DType::kFloat32, {3}, a, sizeof a);
  TensorPtr tx = upload(DType::kFloat32, {2}, x, sizeof x);
  ASSERT_TRUE((*vm)->SetInputValues(0, {Value::OfSequence({ta}), Value::OfTensor(tx),
                                        Value::OfTensor(upload(DType::kInt64, {}, &p, sizeof p))}).ok());
  auto out = (*vm)->InvokeValues(0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].elements.size(), 2u);
  float got[2] = {0, 0};
  ASSERT_TRUE(device->CopyToHost(got, (*out)[0].elements[1]->data(), sizeof got).ok());
  EXPECT_EQ(got[0], 4.0f);
  EXPECT_EQ(got[1], 5.0f);
  EXPECT_NE((*out)[0].elements[1]->data(), tx->data());
  float e[2] = {0, 0};
  ASSERT_TRUE(device->CopyToHost(e, (*out)[1].tensor->data(), sizeof e).ok());
  EXPECT_EQ(e[1], 5.0f);
  // The two position reads went through counted device-to-host copies.
  EXPECT_EQ((*vm)->copy_stats().device_to_host_count, 2u);
}

// A stream of the device (CreateCudaStream): a queue of its own, on the device's memory,
// whose copies and waits are its own.
TEST(CudaDevice, AStreamIsAQueueOfItsOwnOnTheDevicesMemory) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  auto made = CreateCudaStream(*device);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Device> stream = std::move(*made);
  EXPECT_EQ(stream->kernel_kind(), DeviceKind::kCuda);
  EXPECT_EQ(stream->name().rfind("cuda:0 stream ", 0), 0u) << stream->name();
  EXPECT_EQ(&stream->memory_space(), device.get());
  EXPECT_EQ(&device->memory_space(), device.get());
  EXPECT_EQ(CudaOrdinalOf(*stream), 0);
  ASSERT_NE(CudaStreamOf(*stream), nullptr);
  EXPECT_NE(CudaStreamOf(*stream), CudaStreamOf(*device));
  ASSERT_TRUE(CudaDeviceFactsOf(*stream).has_value());
  EXPECT_EQ(CudaDeviceFactsOf(*stream)->name, CudaDeviceFactsOf(*device)->name);
  // Memory of the device, written and read on the stream.
  auto allocator = Allocator::Create(*device);
  auto block = allocator->Allocate(3 * kCudaStagingThreshold);
  ASSERT_TRUE(block.ok());
  std::vector<uint8_t> src(3 * kCudaStagingThreshold), back(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(stream->CopyToDevice((*block)->data(), src.data(), src.size()).ok());
  ASSERT_TRUE(stream->Memset((*block)->data(), 0xee, 5).ok());
  ASSERT_TRUE(stream->CopyToHost(back.data(), (*block)->data(), back.size()).ok());
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(back[i], 0xee) << i;
  EXPECT_EQ(std::memcmp(back.data() + 5, src.data() + 5, src.size() - 5), 0);
  auto idle = stream->Idle();
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_TRUE(*idle);
  auto device_idle = device->Idle();
  ASSERT_TRUE(device_idle.ok());
  EXPECT_TRUE(*device_idle);
  EXPECT_TRUE(stream->Health().ok());
  // A stream is neither reset nor the parent of another stream.
  EXPECT_EQ(stream->Reset().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(CreateCudaStream(*stream).status().code(), StatusCode::kInvalidArgument);
}

// Instances of one VM, each on a stream of its own with kernels bound to it and memory
// from a queue allocator, compute what the VM computes, read its constants without a
// copy, and leave the VM's allocator as it was once they are gone.
TEST(CudaVm, InstancesOnStreamsOfTheirOwnMatchTheVm) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::string why;
  auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
  ASSERT_TRUE(registry) << why;
  auto allocator = Allocator::Create(*device);
  auto exe = Executable::FromDef(AddReluDef(), *registry);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto vm = VirtualMachine::Create(*exe, allocator, *registry);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  const int64_t rows = 4096;
  std::vector<float> x(rows * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 11) - 5.0f;
  auto input = AllocateTensor(*allocator, DType::kFloat32, {rows, 3});
  ASSERT_TRUE(input.ok());
  ASSERT_TRUE(device->CopyToDevice((*input)->data(), x.data(), x.size() * 4).ok());
  ASSERT_TRUE((*vm)->SetInputs(0, {*input}).ok());
  auto want = (*vm)->Invoke(0);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  std::vector<float> expected(x.size());
  ASSERT_TRUE(device->CopyToHost(expected.data(), (*want)[0]->data(), expected.size() * 4).ok());
  const uint64_t before = allocator->stats().allocated_bytes;
  {
    struct Lane {
      std::unique_ptr<Device> stream;
      std::shared_ptr<Allocator> allocator;
      std::unique_ptr<kernels::KernelRegistry> registry;
      std::unique_ptr<VirtualMachine> vm;
      std::vector<TensorPtr> out;
    };
    std::vector<Lane> lanes(3);
    for (Lane& lane : lanes) {
      auto stream = CreateCudaStream(*device);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      lane.stream = std::move(*stream);
      auto queue = Allocator::CreateForQueue(allocator, *lane.stream);
      ASSERT_TRUE(queue.ok()) << queue.status().ToString();
      lane.allocator = *queue;
      lane.registry = CudaRegistry(CudaKernelContextFor(lane.allocator), &why);
      ASSERT_TRUE(lane.registry) << why;
      auto instance = (*vm)->CreateInstance(*lane.registry, lane.allocator);
      ASSERT_TRUE(instance.ok()) << instance.status().ToString();
      lane.vm = std::move(*instance);
      ASSERT_TRUE(lane.vm->SetInputs(0, {*input}).ok());
    }
    // Every lane queues its call before any waits.
    for (Lane& lane : lanes) {
      auto out = lane.vm->Invoke(0);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      lane.out = std::move(*out);
      EXPECT_EQ(&lane.out[0]->buffer->device(), lane.stream.get());
    }
    for (Lane& lane : lanes) {
      ASSERT_TRUE(lane.stream->Synchronize().ok());
      std::vector<float> got(x.size());
      ASSERT_TRUE(lane.stream->CopyToHost(got.data(), lane.out[0]->data(), got.size() * 4).ok());
      EXPECT_EQ(got, expected);
      EXPECT_EQ(lane.vm->copy_stats().host_to_device_count, 0u);  // the constants are the VM's
      EXPECT_GT(lane.allocator->stats().allocated_bytes, 0u);
    }
    // The lanes' memory is the VM allocator's while they hold it.
    EXPECT_GT(allocator->stats().allocated_bytes, before);
    for (Lane& lane : lanes) {
      lane.out.clear();
      lane.vm.reset();
      lane.registry.reset();
      lane.allocator.reset();
    }
  }
  EXPECT_EQ(allocator->stats().allocated_bytes, before);
}

// A fault fails the VM's run and holds until Reset; after the reset (a new context and
// stream: every earlier allocation and kernel is gone) a new registry and VM run
// correctly on the device.
TEST(CudaVm, AFaultHoldsUntilResetAndTheResetDeviceRunsAgain) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  EXPECT_TRUE(device->Health().ok());
  auto run = [&](int64_t rows) -> Status {
    std::string why;
    auto registry = CudaRegistry({CudaOrdinalOf(*device), CudaStreamOf(*device)}, &why);
    if (!registry) return Internal(why);
    auto allocator = Allocator::Create(*device);
    REMEX_ASSIGN_OR_RETURN(auto exe, Executable::FromDef(AddReluDef(), *registry));
    REMEX_ASSIGN_OR_RETURN(auto vm, VirtualMachine::Create(exe, allocator, *registry));
    std::vector<float> x(rows * 3, 1.0f);
    REMEX_ASSIGN_OR_RETURN(auto input, AllocateTensor(*allocator, DType::kFloat32, {rows, 3}));
    REMEX_RETURN_IF_ERROR(device->CopyToDevice(input->data(), x.data(), x.size() * 4));
    REMEX_RETURN_IF_ERROR(vm->SetInputs(0, {input}));
    REMEX_ASSIGN_OR_RETURN(auto out, vm->Invoke(0));
    std::vector<float> y(x.size());
    REMEX_RETURN_IF_ERROR(device->CopyToHost(y.data(), out[0]->data(), y.size() * 4));
    const float want[3] = {2.0f, 0.0f, 1.5f};
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] != want[i % 3]) return Internal("wrong result at " + std::to_string(i));
    }
    return OkStatus();
  };
  ASSERT_TRUE(run(4).ok());
  device->InjectFaultAtKernel(1);
  Status faulted = run(4);
  EXPECT_EQ(faulted.code(), StatusCode::kAborted) << faulted.ToString();
  EXPECT_NE(faulted.message().find("cuda:0: device fault"), std::string::npos) << faulted.ToString();
  EXPECT_EQ(device->Health().code(), StatusCode::kAborted);
  ASSERT_TRUE(device->Reset().ok());
  EXPECT_TRUE(device->Health().ok());
  EXPECT_NE(CudaStreamOf(*device), nullptr);
  Status again = run(1000);
  EXPECT_TRUE(again.ok()) << again.ToString();
  EXPECT_TRUE(device->Health().ok());
}

// The library kernels take their workspaces from the allocator the context names: a
// Conv with asymmetric pads copies X into a padded buffer (and cuDNN may want a
// workspace); both are the allocator's blocks while the kernel runs and are back in
// its cache when Compute returns.
TEST(CudaKernels, ConvWorkspacesComeFromTheAllocator) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  std::shared_ptr<Allocator> allocator = Allocator::Create(*device);
  std::string why;
  auto registry = CudaRegistry(CudaKernelContextFor(allocator), &why);
  ASSERT_TRUE(registry) << why;

  const Shape xs = {1, 3, 9, 8}, ws = {4, 3, 3, 3}, bs = {4}, ys = {1, 4, 8, 9};
  kernels::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{0, 1, 1, 2});  // Asymmetric: X is padded.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](const Shape& s) {
    std::vector<float> v(static_cast<size_t>(*NumElements(s)));
    for (float& f : v) f = dist(rng);
    return v;
  };
  std::vector<float> x = random(xs), w = random(ws), b = random(bs), want(static_cast<size_t>(*NumElements(ys)));
  auto cpu = (*registry->FindKernel("Conv", DeviceKind::kCpu))(attrs);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::vector<TensorRef> cpu_in = {{x.data(), DType::kFloat32, xs}, {w.data(), DType::kFloat32, ws},
                                   {b.data(), DType::kFloat32, bs}};
  std::vector<TensorRef> cpu_out = {{want.data(), DType::kFloat32, ys}};
  ASSERT_TRUE((*cpu)->Compute(cpu_in, cpu_out).ok());

  std::vector<TensorPtr> dev;
  std::vector<TensorRef> dev_in;
  for (auto [values, shape] : {std::pair{&x, xs}, std::pair{&w, ws}, std::pair{&b, bs}}) {
    auto t = AllocateTensor(*allocator, DType::kFloat32, shape);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE(device->CopyToDevice((*t)->data(), values->data(), values->size() * 4).ok());
    dev_in.push_back((*t)->Ref());
    dev.push_back(*t);
  }
  auto y = AllocateTensor(*allocator, DType::kFloat32, ys);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  std::vector<TensorRef> dev_out = {(*y)->Ref()};
  const AllocatorStats tensors = allocator->stats();

  {
    const kernels::KernelFactory* factory = registry->FindKernel("Conv", DeviceKind::kCuda);
    if (!factory) GTEST_SKIP() << "Conv has no CUDA kernel (Remex built without cuDNN)";
    auto conv = (*factory)(attrs);
    ASSERT_TRUE(conv.ok()) << conv.status().ToString();
    for (int call = 0; call < 2; ++call) {
      Status s = (*conv)->Compute(dev_in, dev_out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const AllocatorStats after = allocator->stats();
      // The padded copy of X (1 x 3 x 10 x 11 floats) was the allocator's...
      EXPECT_GE(after.peak_allocated_bytes, tensors.allocated_bytes + 3 * 10 * 11 * 4) << "call " << call;
      EXPECT_GT(after.reserved_bytes, tensors.reserved_bytes) << "call " << call;
      // ... and was given back (to the cache) before Compute returned.
      EXPECT_EQ(after.allocated_bytes, tensors.allocated_bytes) << "call " << call;
      EXPECT_EQ(after.live_buffers, tensors.live_buffers) << "call " << call;
    }
    ASSERT_TRUE(device->Synchronize().ok());
  }
  // The kernel is gone: nothing of it is held.
  EXPECT_EQ(allocator->stats().allocated_bytes, tensors.allocated_bytes);
  EXPECT_EQ(allocator->stats().live_buffers, tensors.live_buffers);

  std::vector<float> got(want.size());
  ASSERT_TRUE(device->CopyToHost(got.data(), (*y)->data(), got.size() * 4).ok());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
  dev.clear();
  y->reset();
  EXPECT_EQ(allocator->stats().allocated_bytes, 0u);
  EXPECT_EQ(allocator->stats().live_buffers, 0u);
}

TEST(CudaDevice, TimerMeasuresQueuedWork) {
  SKIP_WITHOUT_GPU();
  auto device = MustCreate(0);
  ASSERT_TRUE(device);
  auto timer = device->CreateTimer();
  ASSERT_TRUE(timer.ok()) << timer.status().ToString();
  ASSERT_NE(*timer, nullptr);
  EXPECT_EQ((*timer)->name(), "cuda_event");
  auto buffer = device->Allocate(256 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto time_memsets = [&](int count) -> double {
    EXPECT_TRUE((*timer)->Start().ok());
    for (int i = 0; i < count; ++i) EXPECT_TRUE(device->Memset(*buffer, static_cast<uint8_t>(i), 256 << 20).ok());
    EXPECT_TRUE((*timer)->Stop().ok());
    auto s = (*timer)->ElapsedSeconds();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : 0.0;
  };
  const double one = time_memsets(1), eight = time_memsets(8);
  EXPECT_GT(one, 0.0);
  EXPECT_GT(eight, 2 * one);  // eight 256 MiB writes take longer than one
  device->Deallocate(*buffer, 256 << 20);
  // The CPU device has no timer of its own.
  auto cpu = CreateCpuDevice()->CreateTimer();
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, nullptr);
}

}  // namespace cuda_device_gpu_test
}  // namespace remex::vm
