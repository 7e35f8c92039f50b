// Test helpers of the CUDA kernels: GPU detection and the skip without one, a registry
// holding the CPU and the CUDA kernels, device buffers, running a kernel on device
// copies of host tensors, running an op on the CPU and on CUDA for comparison, and the
// comparisons (bytes, or float values within tolerances: kernels/float_test_util.h).
// Host code only; test-only.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels::testing {

// The number of visible CUDA GPUs; 0 when cudaGetDeviceCount fails (no driver).
inline int CudaGpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// Skips the current test (or, in SetUp, the fixture's tests) without a GPU.
#define REMEX_SKIP_WITHOUT_GPU()                                                      \
  if (::remex::kernels::testing::CudaGpuCount() == 0) {                               \
    GTEST_SKIP() << "no CUDA GPU: cudaGetDeviceCount reports none, GPU test not run"; \
  }

// Device memory freed on destruction; data() is nullptr for 0 bytes or when cudaMalloc
// fails.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && cudaMalloc(&data_, bytes) != cudaSuccess) data_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  ~DeviceBuffer() {
    if (data_) (void)cudaFree(data_);
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// A registry with every OpDef, the CPU kernels and the CUDA kernels (these on
// `context`); nullptr if a registration fails. Needs no GPU.
inline std::unique_ptr<KernelRegistry> CudaRegistry(CudaKernelContext context = {}) {
  auto registry = CreateCpuRegistry();
  if (!registry.ok()) return nullptr;
  if (!RegisterCudaKernels(**registry, context).ok()) return nullptr;
  return std::move(registry).value();
}

// The CUDA kernel of `op` for `attrs` from `registry`, which must hold one; a test
// failure, and nullptr, when the factory refuses the attributes.
inline std::unique_ptr<OpKernel> CreateCudaKernel(const KernelRegistry& registry, std::string_view op,
                                                  const Attributes& attrs) {
  const KernelFactory* factory = FindVersionedKernel(registry, op, DeviceKind::kCuda);
  EXPECT_NE(factory, nullptr) << op << " has no CUDA kernel";
  if (!factory) return nullptr;
  StatusOr<std::unique_ptr<OpKernel>> k = (*factory)(attrs);
  EXPECT_TRUE(k.ok()) << op << ": " << k.status().ToString();
  return k.ok() ? std::move(k).value() : nullptr;
}

// A device address no kernel check dereferences: the tensors of calls that must be
// refused before anything is launched point there.
inline void* UnreadDevicePointer() { return reinterpret_cast<void*>(uintptr_t{0x1000}); }

// Runs `kernel` on device copies of `inputs` and returns its outputs (dtypes and shapes
// `outputs`) downloaded. Inputs that `def` marks ShapeDep::kData stay in host memory,
// as the VM passes them (every input is uploaded when `def` is nullptr). Output buffers
// start filled with `poison` bytes, so an element the kernel does not write shows up.
// The kernel is queued on `stream` (the default stream when nullptr), which is waited
// for. Returns the kernel's own error as is; failed CUDA calls of the harness are
// Internal.
inline StatusOr<std::vector<HostTensor>> RunOnDevice(OpKernel& kernel, const OpDef* def,
                                                     std::vector<HostTensor>& inputs,
                                                     const std::vector<TensorInfo>& outputs,
                                                     cudaStream_t stream, uint8_t poison) {
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(inputs.size() + outputs.size());
  std::vector<TensorRef> in_refs, out_refs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorRef r = inputs[i].Ref();
    const bool on_host = def && def->DepOf(i) == ShapeDep::kData;
    if (r.present() && !on_host && !inputs[i].bytes.empty()) {
      buffers.emplace_back(inputs[i].bytes.size());
      r.data = buffers.back().data();
      if (!r.data) return ResourceExhausted("cudaMalloc failed");
      if (cudaMemcpy(r.data, inputs[i].bytes.data(), inputs[i].bytes.size(), cudaMemcpyHostToDevice) !=
          cudaSuccess) {
        return Internal("cudaMemcpy to the device failed");
      }
    }
    in_refs.push_back(r);
  }
  std::vector<HostTensor> results;
  for (const TensorInfo& info : outputs) {
    results.push_back(HostTensor::Zeros(info.dtype, info.shape));
    TensorRef r{nullptr, info.dtype, info.shape};
    const size_t bytes = results.back().bytes.size();
    if (bytes > 0) {
      buffers.emplace_back(bytes);
      r.data = buffers.back().data();
      if (!r.data) return ResourceExhausted("cudaMalloc failed");
      if (cudaMemset(r.data, poison, bytes) != cudaSuccess) return Internal("cudaMemset failed");
    }
    out_refs.push_back(r);
  }
  REMEX_RETURN_IF_ERROR(kernel.Compute(in_refs, out_refs));
  const cudaError_t synced = stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize();
  if (synced != cudaSuccess)
    return Internal(std::string("kernel execution failed: ") + cudaGetErrorString(synced));
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].bytes.empty()) continue;
    if (cudaMemcpy(results[i].bytes.data(), out_refs[i].data, results[i].bytes.size(),
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
      return Internal("cudaMemcpy to the host failed");
    }
  }
  return results;
}

// The outputs of one op from its CPU kernel and from its CUDA kernel.
struct CpuAndCudaOutputs {
  std::vector<HostTensor> cpu, cuda;
};

// Runs `op` of `registry` with the CPU kernel, then with the CUDA kernel (RunOnDevice:
// kData inputs in host memory, on `stream`, outputs poisoned with `poison`), with
// `num_outputs` outputs (default: as many as the shape function infers). A missing op
// or kernel and a failure before the CUDA kernel (shape inference, the CPU kernel) are
// test failures; the CUDA kernel's factory or Compute error is returned as is.
inline StatusOr<CpuAndCudaOutputs> RunOnCpuAndCuda(const KernelRegistry& registry, std::string_view op,
                                                   const Attributes& attrs, std::vector<HostTensor>& inputs,
                                                   std::optional<size_t> num_outputs, cudaStream_t stream,
                                                   uint8_t poison) {
  const std::string name(op);
  const OpDef* def = FindVersionedOp(registry, op);
  EXPECT_TRUE(def) << name;
  if (!def) return NotFound(name);
  auto infos = InferShapes(*def, attrs, ShapeArgs(*def, inputs));
  EXPECT_TRUE(infos.ok()) << name << ": " << infos.status().ToString();
  if (!infos.ok()) return infos.status();
  const KernelFactory* cpu_factory = FindVersionedKernel(registry, op, DeviceKind::kCpu);
  EXPECT_TRUE(cpu_factory) << name << " has no CPU kernel";
  if (!cpu_factory) return NotFound(name);
  auto cpu_kernel = (*cpu_factory)(attrs);
  EXPECT_TRUE(cpu_kernel.ok()) << cpu_kernel.status().ToString();
  if (!cpu_kernel.ok()) return cpu_kernel.status();
  CpuAndCudaOutputs out;
  auto expected = OpRunner::RunKernel(**cpu_kernel, *infos, inputs, num_outputs);
  EXPECT_TRUE(expected.ok()) << name << " on cpu: " << expected.status().ToString();
  if (!expected.ok()) return expected.status();
  out.cpu = std::move(expected).value();

  const KernelFactory* factory = FindVersionedKernel(registry, op, DeviceKind::kCuda);
  EXPECT_TRUE(factory) << name << " has no CUDA kernel";
  if (!factory) return NotFound(name);
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, (*factory)(attrs));
  std::vector<TensorInfo> like;
  for (const HostTensor& t : out.cpu) like.push_back(TensorInfo{t.dtype, t.shape});
  REMEX_ASSIGN_OR_RETURN(out.cuda, RunOnDevice(*kernel, def, inputs, like, stream, poison));
  return out;
}

// A fixture whose tests skip without a GPU and run CUDA kernels of a CudaRegistry on
// a non-blocking stream of their own.
class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REMEX_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    registry_ = CudaRegistry({0, stream_});
    ASSERT_TRUE(registry_);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::unique_ptr<KernelRegistry> registry_;
  cudaStream_t stream_ = nullptr;
};

// Runs CUDA kernels of CudaRegistry() on the default stream of GPU 0, every input
// uploaded, outputs poisoned with 0xff bytes (NaN in every float dtype).
class CudaRunner {
 public:
  CudaRunner() : registry_(CudaRegistry(CudaKernelContext{0, nullptr})) {
    if (!registry_) std::abort();
  }

  const KernelRegistry& registry() const { return *registry_; }

  // Infers the outputs, creates the CUDA kernel, uploads `inputs`, runs, downloads.
  StatusOr<std::vector<HostTensor>> Run(std::string_view op, const Attributes& attrs,
                                        std::vector<HostTensor> inputs) {
    const OpDef* def = FindVersionedOp(*registry_, op);
    if (!def) return NotFound("no op " + std::string(op));
    REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, InferShapes(*def, attrs, ShapeArgs(*def, inputs)));
    return RunWithOutputs(op, attrs, std::move(inputs), infos);
  }

  // As Run, with the outputs' dtypes and shapes given (ops whose shape function does
  // not take every dtype the CUDA kernel does).
  StatusOr<std::vector<HostTensor>> RunWithOutputs(std::string_view op, const Attributes& attrs,
                                                   std::vector<HostTensor> inputs,
                                                   const std::vector<TensorInfo>& infos) {
    const KernelFactory* factory = FindVersionedKernel(*registry_, op, DeviceKind::kCuda);
    if (!factory) return NotFound("no cuda kernel for " + std::string(op));
    REMEX_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, (*factory)(attrs));
    return RunOnDevice(*kernel, nullptr, inputs, infos, nullptr, 0xff);
  }

 private:
  std::unique_ptr<KernelRegistry> registry_;
};

// The element of float dtype `dtype` at `p` as a double.
inline double FloatAt(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kFloat16: {
      Half h;
      std::memcpy(&h.bits, p, 2);
      return HalfToFloat(h);
    }
    default:
      std::abort();
  }
}

inline bool IsFloatDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kFloat64;
}

// Expects `got` (output `output` of `op` from CUDA) to hold `want`'s elements bit for
// bit. NaNs of float dtypes match any NaN; with `rel` > 0 a float element also matches
// within rel * |want| (finite want). Reports up to five mismatches, as hex bytes.
inline void ExpectSameElements(std::string_view op, const HostTensor& want, const std::vector<uint8_t>& got,
                               size_t output, double rel = 0) {
  ASSERT_EQ(got.size(), want.bytes.size()) << op << " output " << output;
  const size_t es = DTypeSize(want.dtype);
  const bool is_float = IsFloatDType(want.dtype);
  size_t mismatches = 0;
  for (size_t i = 0; i * es < want.bytes.size() && mismatches < 5; ++i) {
    const uint8_t* a = want.bytes.data() + i * es;
    const uint8_t* b = got.data() + i * es;
    if (std::memcmp(a, b, es) == 0) continue;
    if (is_float) {
      const double w = FloatAt(want.dtype, a), h = FloatAt(want.dtype, b);
      if (std::isnan(w) && std::isnan(h)) continue;
      if (rel > 0 && std::isfinite(w) && std::fabs(h - w) <= rel * std::fabs(w)) continue;
    }
    ++mismatches;
    std::string cpu, cuda;
    for (size_t k = es; k-- > 0;) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%02x", a[k]);
      cpu += buf;
      std::snprintf(buf, sizeof buf, "%02x", b[k]);
      cuda += buf;
    }
    ADD_FAILURE() << op << " output " << output << " " << DTypeName(want.dtype) << ShapeToString(want.shape)
                  << " element " << i << ": cpu 0x" << cpu << ", cuda 0x" << cuda;
  }
}

}  // namespace remex::kernels::testing
