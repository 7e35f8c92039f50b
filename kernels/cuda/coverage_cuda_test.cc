// Which ops of the CPU device have a CUDA kernel: registration needs no GPU, so this
// runs everywhere. The ops left on the CPU only are listed here, each with why, and
// the list must stay exact: a new CPU op without a CUDA kernel fails the test until it
// is either given one or listed.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"

namespace remex::kernels {
namespace {

TEST(CudaCoverage, EveryCpuOpHasACudaKernelExceptTheListedOnes) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  ASSERT_TRUE(RegisterCudaKernels(**registry).ok());
  // Ops that no CUDA kernel has been written for yet: none.
  const std::set<std::string> cpu_only = {};
  std::set<std::string> missing;
  for (const std::string& op : (*registry)->OpNames()) {
    if ((*registry)->FindKernel(op, DeviceKind::kCpu) && !(*registry)->FindKernel(op, DeviceKind::kCuda)) {
      missing.insert(op);
    }
  }
  EXPECT_EQ(missing, cpu_only);
}

}  // namespace
}  // namespace remex::kernels
