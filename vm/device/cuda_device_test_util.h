// Helpers of the CUDA device tests (cuda_device_test.cc without a GPU,
// cuda_device_gpu_test.cc with one): the skip, the device, random broadcasting shapes,
// a registry with the CUDA kernels.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "vm/device/cuda_device.h"
#include "vm/device/allocator.h"

namespace remex::vm {

#define SKIP_WITHOUT_GPU()                                                                       \
  if (CudaDeviceCount() == 0) {                                                                  \
    GTEST_SKIP() << "no CUDA GPU visible (or Remex built without CUDA): GPU test not run";        \
  }

inline std::unique_ptr<Device> MustCreate(int ordinal) {
  auto device = CreateCudaDevice(ordinal);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(*device) : nullptr;
}

// Random shapes broadcast to `out`: each input keeps a suffix of out's dims and sets
// some of them to 1.
inline Shape RandomInputShape(const Shape& out, std::mt19937& rng) {
  size_t keep = std::uniform_int_distribution<size_t>(0, out.size())(rng);
  Shape s(out.end() - static_cast<std::ptrdiff_t>(keep), out.end());
  for (int64_t& d : s) {
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) d = 1;
  }
  return s;
}

inline Shape RandomOutputShape(std::mt19937& rng) {
  Shape s(std::uniform_int_distribution<size_t>(0, 5)(rng));
  for (int64_t& d : s) d = std::uniform_int_distribution<int64_t>(1, 6)(rng);
  return s;
}

// A registry with every OpDef, the CPU kernels and the CUDA kernels for `context`;
// nullptr (and a skip reason) in a build without CUDA.
inline std::unique_ptr<kernels::KernelRegistry> CudaRegistry(kernels::CudaKernelContext context, std::string* why) {
  auto registry = kernels::CreateCpuRegistry();
  if (!registry.ok()) {
    *why = registry.status().ToString();
    return nullptr;
  }
  Status s = kernels::RegisterCudaKernels(**registry, context);
  if (!s.ok()) {
    *why = s.ToString();
    return nullptr;
  }
  return std::move(*registry);
}

}  // namespace remex::vm
