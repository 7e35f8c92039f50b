// Test helpers of the CUDA library and fused kernels: GPU detection, a runner that
// uploads host tensors, runs a CUDA kernel from a registry with RegisterCudaKernels
// and downloads its outputs, and tolerance comparisons.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels::testing {

inline int CudaGpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#define REMEX_SKIP_WITHOUT_GPU()                                                         \
  if (::remex::kernels::testing::CudaGpuCount() == 0) {                                  \
    GTEST_SKIP() << "no CUDA GPU: cudaGetDeviceCount reports none, GPU test not run";     \
  }

// Device memory freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) {
    if (bytes > 0 && cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_) { o.ptr_ = nullptr; }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Runs CUDA kernels of a registry holding every OpDef and the CUDA kernels, on the
// default stream of GPU 0.
class CudaRunner {
 public:
  CudaRunner() {
    Status s = RegisterOpDefs(registry_);
    if (s.ok()) s = RegisterCudaKernels(registry_, CudaKernelContext{0, nullptr});
    if (!s.ok()) std::abort();
  }

  const KernelRegistry& registry() const { return registry_; }

  // Infers the outputs, creates the CUDA kernel, uploads `inputs`, runs, downloads.
  StatusOr<std::vector<HostTensor>> Run(std::string_view op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    const OpDef* def = registry_.FindOp(op);
    if (!def) return NotFound("no op " + std::string(op));
    std::vector<ShapeFnArg> args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      args[i].present = inputs[i].dtype != DType::kUndefined;
      args[i].dtype = inputs[i].dtype;
      args[i].shape = inputs[i].shape;
      if (args[i].present && def->DepOf(i) == ShapeDep::kData) args[i].data = inputs[i].bytes.data();
    }
    REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, InferShapes(*def, attrs, args));
    return RunWithOutputs(op, attrs, std::move(inputs), infos);
  }

  // As Run, with the outputs' dtypes and shapes given (ops whose shape function does
  // not take every dtype the CUDA kernel does).
  StatusOr<std::vector<HostTensor>> RunWithOutputs(std::string_view op, const Attributes& attrs,
                                                   std::vector<HostTensor> inputs,
                                                   const std::vector<TensorInfo>& infos) {
    const KernelFactory* factory = registry_.FindKernel(op, DeviceKind::kCuda);
    if (!factory) return NotFound("no cuda kernel for " + std::string(op));
    REMEX_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, (*factory)(attrs));
    return RunKernel(*kernel, std::move(inputs), infos);
  }

  static StatusOr<std::vector<HostTensor>> RunKernel(OpKernel& kernel, std::vector<HostTensor> inputs,
                                                     const std::vector<TensorInfo>& infos) {
    std::vector<DeviceBuffer> buffers;
    std::vector<TensorRef> in_refs, out_refs;
    for (HostTensor& t : inputs) {
      TensorRef r;
      r.dtype = t.dtype;
      r.shape = t.shape;
      if (t.dtype != DType::kUndefined && !t.bytes.empty()) {
        buffers.emplace_back(t.bytes.size());
        if (!buffers.back().get()) return ResourceExhausted("cudaMalloc failed");
        if (cudaMemcpy(buffers.back().get(), t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
          return Internal("cudaMemcpy to the device failed");
        }
        r.data = buffers.back().get();
      }
      in_refs.push_back(r);
    }
    std::vector<HostTensor> outputs;
    for (const TensorInfo& info : infos) outputs.push_back(HostTensor::Zeros(info.dtype, info.shape));
    for (HostTensor& t : outputs) {
      TensorRef r;
      r.dtype = t.dtype;
      r.shape = t.shape;
      if (!t.bytes.empty()) {
        buffers.emplace_back(t.bytes.size());
        if (!buffers.back().get()) return ResourceExhausted("cudaMalloc failed");
        // NaN bytes: an element the kernel does not write shows up.
        if (cudaMemset(buffers.back().get(), 0xff, t.bytes.size()) != cudaSuccess) return Internal("cudaMemset");
        r.data = buffers.back().get();
      }
      out_refs.push_back(r);
    }
    REMEX_RETURN_IF_ERROR(kernel.Compute(in_refs, out_refs));
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      return Internal(std::string("kernel execution failed: ") + cudaGetErrorString(e));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].bytes.empty()) continue;
      if (cudaMemcpy(outputs[i].bytes.data(), out_refs[i].data, outputs[i].bytes.size(), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
        return Internal("cudaMemcpy to the host failed");
      }
    }
    return outputs;
  }

 private:
  KernelRegistry registry_;
};

// Values of a float16, float32 or float64 tensor as doubles.
inline std::vector<double> FloatValues(const HostTensor& t) {
  std::vector<double> out;
  if (t.dtype == DType::kFloat32) {
    for (float v : t.Values<float>()) out.push_back(v);
  } else if (t.dtype == DType::kFloat64) {
    for (double v : t.Values<double>()) out.push_back(v);
  } else if (t.dtype == DType::kFloat16) {
    for (Half v : t.Values<Half>()) out.push_back(HalfToFloat(v));
  }
  return out;
}

// The float tensor `t` converted to `to` (float16, float32, float64; float16 rounded
// to nearest even).
inline HostTensor ConvertFloat(const HostTensor& t, DType to) {
  std::vector<double> v = FloatValues(t);
  if (to == DType::kFloat32) return HostTensor::Of<float>(t.shape, std::vector<float>(v.begin(), v.end()));
  if (to == DType::kFloat64) return HostTensor::Of<double>(t.shape, v);
  std::vector<Half> h;
  for (double x : v) h.push_back(FloatToHalf(static_cast<float>(x)));
  return HostTensor::Of<Half>(t.shape, h);
}

// |a - e| <= atol + rtol * |e| elementwise; NaN matches NaN, infinities must be equal.
// Reports the first mismatch only.
inline void ExpectAllClose(const std::vector<double>& actual, const std::vector<double>& expected, double rtol,
                           double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(a)) << what << " at " << i << ": " << a << " vs NaN";
    } else if (std::isinf(e)) {
      ASSERT_EQ(a, e) << what << " at " << i;
    } else {
      ASSERT_LE(std::fabs(a - e), atol + rtol * std::fabs(e)) << what << " at " << i << ": " << a << " vs " << e;
    }
  }
}

}  // namespace remex::kernels::testing
