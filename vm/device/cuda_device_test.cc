// Tests of the CUDA device (vm/device/cuda_device.h) and the CUDA kernels
// (kernels/cuda/cuda_kernels.h). Tests that need a GPU skip themselves when none is
// visible; the factory's failure without a GPU, the broadcast plan and the kernels'
// argument checks (which run before any CUDA call) are tested everywhere.

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
namespace cuda_device_test {

using kernels::DeviceKind;
using kernels::TensorRef;

// ---------------------------------------------------------------------------
// Without a GPU.

TEST(CudaDeviceFactory, FailsCleanlyWithoutGpu) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA GPU is visible: the no-GPU path is not reachable";
  auto device = CreateCudaDevice(0);
  ASSERT_FALSE(device.ok());
  EXPECT_TRUE(device.status().code() == StatusCode::kUnavailable ||
              device.status().code() == StatusCode::kUnimplemented)
      << device.status().ToString();
  EXPECT_NE(device.status().message().find("cuda:0"), std::string::npos) << device.status().ToString();
  std::printf("CreateCudaDevice(0) without a GPU: %s\n", device.status().ToString().c_str());
}

TEST(CudaDeviceFactory, StreamsAreMadeOnCudaDevicesOnly) {
  std::unique_ptr<Device> cpu = CreateCpuDevice();
  auto stream = CreateCudaStream(*cpu);
  ASSERT_FALSE(stream.ok());
  // UNIMPLEMENTED in a build without CUDA.
  EXPECT_TRUE(stream.status().code() == StatusCode::kInvalidArgument ||
              stream.status().code() == StatusCode::kUnimplemented)
      << stream.status().ToString();
  EXPECT_NE(stream.status().message().find("cpu"), std::string::npos) << stream.status().ToString();
}

TEST(CudaDeviceFactory, RejectsNegativeOrdinal) {
  auto device = CreateCudaDevice(-1);
  ASSERT_FALSE(device.ok());
  EXPECT_TRUE(device.status().code() == StatusCode::kInvalidArgument ||
              device.status().code() == StatusCode::kUnimplemented)
      << device.status().ToString();
}

TEST(CudaDeviceFactory, RejectsOrdinalPastTheVisibleGpus) {
  SKIP_WITHOUT_GPU();
  auto device = CreateCudaDevice(CudaDeviceCount());
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument) << device.status().ToString();
}

TEST(CudaBroadcastPlan, MergesAndDropsDims) {
  using kernels::cuda::ComputeBroadcastPlan;
  // [2,3,4] op [3,1]: b spans the middle dim only.
  auto plan = ComputeBroadcastPlan({2, 3, 4}, {3, 1}, {2, 3, 4});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->rank, 3);
  EXPECT_EQ(std::vector<int64_t>(plan->dims, plan->dims + 3), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(std::vector<int64_t>(plan->a_strides, plan->a_strides + 3), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(std::vector<int64_t>(plan->b_strides, plan->b_strides + 3), (std::vector<int64_t>{0, 1, 0}));

  // Equal shapes merge into one contiguous dim.
  plan = ComputeBroadcastPlan({2, 3, 4}, {2, 3, 4}, {2, 3, 4});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->rank, 1);
  EXPECT_EQ(plan->dims[0], 24);
  EXPECT_EQ(plan->a_strides[0], 1);
  EXPECT_EQ(plan->b_strides[0], 1);

  // A scalar broadcasts with stride 0.
  plan = ComputeBroadcastPlan({5, 6}, {}, {5, 6});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->rank, 1);
  EXPECT_EQ(plan->dims[0], 30);
  EXPECT_EQ(plan->b_strides[0], 0);

  // Size-1 output dims are dropped.
  plan = ComputeBroadcastPlan({1, 5, 1, 6}, {6}, {1, 5, 1, 6});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->rank, 2);
  EXPECT_EQ(plan->dims[0], 5);
  EXPECT_EQ(plan->dims[1], 6);
  EXPECT_EQ(plan->a_strides[0], 6);
  EXPECT_EQ(plan->b_strides[0], 0);
  EXPECT_EQ(plan->b_strides[1], 1);

  // Every output dim 1: one element.
  plan = ComputeBroadcastPlan({1, 1}, {1}, {1, 1});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->rank, 1);
  EXPECT_EQ(plan->dims[0], 1);
}

TEST(CudaBroadcastPlan, RejectsBadShapes) {
  using kernels::cuda::ComputeBroadcastPlan;
  EXPECT_EQ(ComputeBroadcastPlan({3}, {4}, {4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeBroadcastPlan({2, 3}, {3}, {3}).status().code(), StatusCode::kInvalidArgument);
  // Nine alternating dims cannot be merged below kMaxBroadcastRank.
  EXPECT_EQ(ComputeBroadcastPlan({2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1},
                                 {2, 2, 2, 2, 2, 2, 2, 2, 2})
                .status()
                .code(),
            StatusCode::kUnimplemented);
}


// The offset of output element `i` in an input of shape `in` broadcast to `out`,
// computed directly from numpy's rules.
int64_t DirectOffset(int64_t i, const Shape& in, const Shape& out) {
  int64_t offset = 0;
  int64_t stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t c = i % out[d];
    i /= out[d];
    if (k < in.size()) {
      const int64_t extent = in[in.size() - 1 - k];
      if (extent != 1) offset += c * stride;
      stride *= extent;
    }
  }
  return offset;
}

TEST(CudaBroadcastPlan, MatchesNumpyIndexingOnRandomShapes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    Shape out = RandomOutputShape(rng);
    Shape a = RandomInputShape(out, rng);
    Shape b = RandomInputShape(out, rng);
    // The output of a broadcasting op is the broadcast of its inputs.
    Shape full(out.size(), 1);
    for (const Shape* in : {&a, &b}) {
      for (size_t k = 0; k < in->size(); ++k) {
        int64_t& f = full[out.size() - 1 - k];
        f = std::max(f, (*in)[in->size() - 1 - k]);
      }
    }
    auto plan = kernels::cuda::ComputeBroadcastPlan(a, b, full);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const int64_t n = *NumElements(full);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i;
      int64_t ia = 0;
      int64_t ib = 0;
      for (int d = plan->rank - 1; d >= 0; --d) {
        const int64_t c = rest % plan->dims[d];
        rest /= plan->dims[d];
        ia += c * plan->a_strides[d];
        ib += c * plan->b_strides[d];
      }
      ASSERT_EQ(ia, DirectOffset(i, a, full)) << ShapeToString(a) << " to " << ShapeToString(full) << " at " << i;
      ASSERT_EQ(ib, DirectOffset(i, b, full)) << ShapeToString(b) << " to " << ShapeToString(full) << " at " << i;
    }
  }
}


// Argument checks happen on the host before any CUDA call, so they run without a GPU
// (the data pointers below are never dereferenced).
TEST(CudaKernels, RejectBadCallsBeforeLaunch) {
  std::string why;
  auto registry = CudaRegistry({}, &why);
  if (!registry) GTEST_SKIP() << "CUDA kernels not available: " << why;
  uint8_t dummy[16];
  auto add = (*registry->FindKernel("Add", DeviceKind::kCuda))(kernels::Attributes());
  ASSERT_TRUE(add.ok());

  // Output shape not what the shape function says.
  std::vector<TensorRef> in = {{dummy, DType::kFloat32, {2, 3}}, {dummy, DType::kFloat32, {3}}};
  std::vector<TensorRef> out = {{dummy, DType::kFloat32, {3, 2}}};
  EXPECT_EQ((*add)->Compute(in, out).code(), StatusCode::kInvalidArgument);
  // Inputs that do not broadcast.
  in = {{dummy, DType::kFloat32, {2, 3}}, {dummy, DType::kFloat32, {2}}};
  out = {{dummy, DType::kFloat32, {2, 3}}};
  EXPECT_EQ((*add)->Compute(in, out).code(), StatusCode::kInvalidArgument);
  // A dtype without a CUDA kernel.
  in = {{dummy, DType::kInt64, {2}}, {dummy, DType::kInt64, {2}}};
  out = {{dummy, DType::kInt64, {2}}};
  Status s = (*add)->Compute(in, out);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.ToString();

  auto relu = (*registry->FindKernel("Relu", DeviceKind::kCuda))(kernels::Attributes());
  ASSERT_TRUE(relu.ok());
  in = {{dummy, DType::kFloat32, {4}}};
  out = {{dummy, DType::kFloat32, {5}}};
  EXPECT_EQ((*relu)->Compute(in, out).code(), StatusCode::kInvalidArgument);
}

TEST(CudaKernels, RegistrationNeedsOpDefs) {
  kernels::KernelRegistry empty;
  Status s = kernels::RegisterCudaKernels(empty);
  EXPECT_TRUE(s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kUnimplemented)
      << s.ToString();
}

// The workspace provider the device server gives the CUDA kernels, over an allocator
// of the CPU device (the provider itself makes no CUDA call): blocks are the
// allocator's buffers, counted while held and cached for reuse once released.
TEST(CudaKernelWorkspace, AllocatorProviderHoldsAndReturnsBlocks) {
  std::unique_ptr<Device> cpu = CreateCpuDevice();
  auto allocator = Allocator::Create(*cpu);
  kernels::CudaWorkspaceFn provider = AllocatorWorkspace(allocator);
  ASSERT_TRUE(provider);
  {
    auto block = provider(1000);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    ASSERT_NE(block->get(), nullptr);
    std::memset(block->get(), 0x5a, 1000);  // All 1000 bytes are usable.
    EXPECT_GE(allocator->stats().allocated_bytes, 1000u);
    EXPECT_EQ(allocator->stats().live_buffers, 1u);
    std::shared_ptr<void> copy = *block;  // Copies share the one block.
    block->reset();
    EXPECT_EQ(allocator->stats().live_buffers, 1u);
  }
  AllocatorStats released = allocator->stats();
  EXPECT_EQ(released.allocated_bytes, 0u);
  EXPECT_EQ(released.live_buffers, 0u);
  EXPECT_GE(released.reserved_bytes, 1000u);  // Cached, not returned to the device.
  EXPECT_GE(released.peak_allocated_bytes, 1000u);
  // The next request of that size class reuses the cached block.
  {
    auto again = provider(900);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(allocator->stats().device_allocations, released.device_allocations);
  }
  // A zero-byte request still yields a block.
  auto empty = provider(0);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_NE(empty->get(), nullptr);

  // The provider does not keep the allocator alive, a held block does.
  std::weak_ptr<Allocator> weak = allocator;
  allocator.reset();
  EXPECT_FALSE(weak.expired());
  auto while_held = provider(64);
  EXPECT_TRUE(while_held.ok()) << while_held.status().ToString();
  while_held->reset();
  empty->reset();
  EXPECT_TRUE(weak.expired());
  auto gone = provider(64);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition) << gone.status().ToString();
}

TEST(CudaKernelWorkspace, ContextForANonCudaDeviceHasNoStream) {
  std::unique_ptr<Device> cpu = CreateCpuDevice();
  auto allocator = Allocator::Create(*cpu);
  kernels::CudaKernelContext context = CudaKernelContextFor(allocator);
  EXPECT_EQ(context.device, -1);
  EXPECT_EQ(context.stream, nullptr);
  EXPECT_TRUE(context.workspace);
}

}  // namespace cuda_device_test
}  // namespace remex::vm
