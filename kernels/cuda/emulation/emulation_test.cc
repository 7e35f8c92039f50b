// Tests of the CUDA emulation itself: that barriers, shuffles and votes have CUDA's
// semantics (a missing barrier shows as a wrong result, a divergent one fails the
// launch), that launches are checked against the device's limits, that host memory
// where device memory belongs is refused, and that float16 rounds as the GPU does.
// Built only with REMEX_CUDA_EMULATION.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/launch.cuh"

namespace remex::kernels::cuda {
namespace {

constexpr int kBlock = 256;

// Sum of x[0..256) by a shared-memory tree, with or without the barriers it needs.
template <bool kBarriers>
__global__ void TreeSumKernel(const float* x, float* out) {
  __shared__ float partial[kBlock];
  partial[threadIdx.x] = x[threadIdx.x];
  if (kBarriers) __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (threadIdx.x < static_cast<unsigned>(s)) partial[threadIdx.x] += partial[threadIdx.x + s];
    if (kBarriers) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// Threads below `exit_below` return before a __syncthreads the others reach.
__global__ void DivergentBarrierKernel(int exit_below, int* out) {
  if (static_cast<int>(threadIdx.x) < exit_below) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Each lane gets its warp's sum by xor shuffles, and the ballot of odd lanes.
__global__ void WarpKernel(const int* x, int* sums, unsigned* ballots) {
  int v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  sums[threadIdx.x] = v;
  ballots[threadIdx.x] = __ballot_sync(0xffffffffu, threadIdx.x % 2 == 1);
}

__global__ void IndexKernel(int* out) {
  const int64_t i = (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y +
                    threadIdx.y * blockDim.x + threadIdx.x;
  out[i] = static_cast<int>(i);
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}
template <typename T>
std::vector<T> HostCopy(const T* device, size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(CudaEmulation, BarriersMakeABlockReductionExact) {
  std::vector<float> x(kBlock);
  for (int i = 0; i < kBlock; ++i) x[i] = static_cast<float>(i + 1);
  float* dx = DeviceCopy(x);
  float* dout = DeviceCopy(std::vector<float>(3, 0.0f));
  ASSERT_EQ((LaunchKernel<TreeSumKernel<true>>(3, kBlock, 0, nullptr, dx, dout)), cudaSuccess);
  const std::vector<float> out = HostCopy(dout, 3);
  for (float v : out) EXPECT_EQ(v, kBlock * (kBlock + 1) / 2.0f);
  cudaFree(dx);
  cudaFree(dout);
}

TEST(CudaEmulation, AMissingBarrierShowsAsAWrongResult) {
  std::vector<float> x(kBlock, 1.0f);
  float* dx = DeviceCopy(x);
  float* dout = DeviceCopy(std::vector<float>(1, 0.0f));
  ASSERT_EQ((LaunchKernel<TreeSumKernel<false>>(1, kBlock, 0, nullptr, dx, dout)), cudaSuccess);
  // Thread 0 runs ahead and reads partials no other thread has written yet.
  EXPECT_NE(HostCopy(dout, 1)[0], static_cast<float>(kBlock));
  cudaFree(dx);
  cudaFree(dout);
}

TEST(CudaEmulation, ADivergentBarrierFailsTheLaunchAndTheNextLaunchRuns) {
  int* dout = DeviceCopy(std::vector<int>(kBlock, 0));
  EXPECT_EQ(LaunchKernel<DivergentBarrierKernel>(1, kBlock, 0, nullptr, 10, dout), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Every thread reaches it: fine.
  EXPECT_EQ(LaunchKernel<DivergentBarrierKernel>(2, kBlock, 0, nullptr, 0, dout), cudaSuccess);
  for (int v : HostCopy(dout, kBlock)) EXPECT_EQ(v, 1);
  // The whole block returns: no barrier is waited at.
  EXPECT_EQ(LaunchKernel<DivergentBarrierKernel>(1, kBlock, 0, nullptr, kBlock, dout), cudaSuccess);
  cudaFree(dout);
}

TEST(CudaEmulation, ShufflesAndBallotsExchangeWithinEachWarp) {
  std::vector<int> x(64);
  for (int i = 0; i < 64; ++i) x[i] = i;
  int* dx = DeviceCopy(x);
  int* dsums = DeviceCopy(std::vector<int>(64, 0));
  unsigned* dballots = DeviceCopy(std::vector<unsigned>(64, 0));
  ASSERT_EQ(LaunchKernel<WarpKernel>(1, 64, 0, nullptr, dx, dsums, dballots), cudaSuccess);
  const std::vector<int> sums = HostCopy(dsums, 64);
  const std::vector<unsigned> ballots = HostCopy(dballots, 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(sums[i], i < 32 ? 31 * 32 / 2 : (32 + 63) * 32 / 2) << i;
    EXPECT_EQ(ballots[i], 0xaaaaaaaau) << i;
  }
  cudaFree(dx);
  cudaFree(dsums);
  cudaFree(dballots);
}

TEST(CudaEmulation, BuiltInIndicesCoverA2DGridOf2DBlocks) {
  const dim3 grid(3, 2), block(8, 4);
  const int n = 3 * 2 * 8 * 4;
  int* dout = DeviceCopy(std::vector<int>(n, -1));
  ASSERT_EQ(LaunchKernel<IndexKernel>(grid, block, 0, nullptr, dout), cudaSuccess);
  const std::vector<int> out = HostCopy(dout, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[i], i);
  cudaFree(dout);
}

TEST(CudaEmulation, LaunchesOutOfTheDeviceLimitsAreInvalidConfigurations) {
  int* dout = DeviceCopy(std::vector<int>(1, 0));
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, 1025, 0, nullptr, dout), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, dim3(32, 32, 2), 0, nullptr, dout), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel<IndexKernel>(dim3(1, 65536), 1, 0, nullptr, dout), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel<IndexKernel>(0, 1, 0, nullptr, dout), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, 1, (48 << 10) + 1, nullptr, dout), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFree(dout);
}

TEST(CudaEmulation, HostMemoryWhereDeviceMemoryBelongsIsRefused) {
  std::vector<int> host(kBlock);
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, 1, 0, nullptr, host.data()), cudaErrorIllegalAddress);
  (void)cudaGetLastError();
  int* device = DeviceCopy(std::vector<int>(4, 0));
  EXPECT_EQ(cudaMemcpy(host.data(), device, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 32, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // Past the end.
  EXPECT_EQ(cudaMemset(host.data(), 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue);  // Twice.
  // Pinned host memory is readable by kernels.
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 64, cudaHostAllocDefault), cudaSuccess);
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, 16, 0, nullptr, static_cast<int*>(pinned)), cudaSuccess);
  EXPECT_EQ(static_cast<int*>(pinned)[15], 15);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  (void)cudaGetLastError();
}

TEST(CudaEmulation, DestroyedStreamsAndEventsAreInvalidHandles) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  int* dout = DeviceCopy(std::vector<int>(1, 0));
  EXPECT_EQ(LaunchKernel<IndexKernel>(1, 1, 0, stream, dout), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidResourceHandle), "cudaErrorInvalidResourceHandle");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  cudaFree(dout);
  (void)cudaGetLastError();
}

uint16_t Bits(__half h) {
  uint16_t b;
  std::memcpy(&b, &h, sizeof(b));
  return b;
}

TEST(CudaEmulation, Float16RoundsToNearestEvenWithTheGpusCanonicalNan) {
  EXPECT_EQ(Bits(__float2half_rn(1.0f)), 0x3c00);
  EXPECT_EQ(Bits(__float2half_rn(1.0f + 0x1p-11f)), 0x3c00);      // Tie: to even (down).
  EXPECT_EQ(Bits(__float2half_rn(1.0f + 3 * 0x1p-11f)), 0x3c02);  // Tie: to even (up).
  EXPECT_EQ(Bits(__float2half_rn(65520.0f)), 0x7c00);             // Rounds to infinity.
  EXPECT_EQ(Bits(__float2half_rn(0x1p-25f)), 0x0000);             // Half the smallest subnormal: to even.
  EXPECT_EQ(Bits(__float2half_rn(-__builtin_nanf(""))), 0x7fff);
  EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), 0x1p-24f);
}


// y[i] = x[i] * s + 1 for i < n.
__global__ void ScaleKernel(const float* x, float s, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[i] * s + 1.0f;
}

std::vector<float> ToHost(const float* d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

size_t NodeCount(cudaGraph_t graph) {
  size_t n = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &n), cudaSuccess);
  return n;
}

TEST(CudaEmulationGraphs, ACaptureRecordsTheStreamsWorkAndEachLaunchRunsItAgain) {
  constexpr int n = 300;
  float* x = DeviceCopy(std::vector<float>(n, 2.0f));
  float* y = DeviceCopy(std::vector<float>(n, -1.0f));
  float* z = DeviceCopy(std::vector<float>(n, -1.0f));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemsetAsync(y, 0, n * sizeof(float), stream), cudaSuccess);
  float scale = 3.0f;
  ASSERT_EQ(LaunchKernel<ScaleKernel>(2, 256, 0, stream, x, scale, y, n), cudaSuccess);
  scale = 100.0f;  // the launch keeps the value it was given
  ASSERT_EQ(cudaMemcpyAsync(z, y, n * sizeof(float), cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  // Nothing ran: the capture only recorded. (Read in place: device memory is host
  // memory here, and a synchronous copy would invalidate the capture.)
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(z[n - 1], -1.0f);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(NodeCount(graph), 3u);
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);  // the executable graph stands alone

  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(ToHost(z, n), std::vector<float>(n, 7.0f));
  // A launch reads the memory as it is then.
  ASSERT_EQ(cudaMemcpy(x, std::vector<float>(n, 5.0f).data(), n * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(ToHost(z, n), std::vector<float>(n, 16.0f));

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  for (float* p : {x, y, z}) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST(CudaEmulationGraphs, CallsCudaRefusesDuringACaptureInvalidateIt) {
  constexpr int n = 64;
  float* x = DeviceCopy(std::vector<float>(n, 1.0f));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  auto refused_then_invalidated = [&](auto call, cudaError_t expected) {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(call(), expected);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    // Later work is not recorded either.
    EXPECT_EQ(cudaMemsetAsync(x, 0, 4, stream), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    (void)cudaGetLastError();
  };
  std::vector<float> pageable(n, 0.0f);
  refused_then_invalidated([&] { return cudaStreamSynchronize(stream); }, cudaErrorStreamCaptureUnsupported);
  refused_then_invalidated([&] { return cudaStreamQuery(stream); }, cudaErrorStreamCaptureUnsupported);
  refused_then_invalidated(
      [&] { return cudaMemcpyAsync(pageable.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, stream); },
      cudaErrorStreamCaptureUnsupported);
  refused_then_invalidated(
      [&] {
        void* p = nullptr;
        return cudaMalloc(&p, 256);
      },
      cudaErrorStreamCaptureUnsupported);
  refused_then_invalidated(
      [&] {
        void* p = nullptr;
        return cudaMallocAsync(&p, 256, stream);
      },
      cudaErrorNotSupported);
  refused_then_invalidated(
      [&] { return cudaMemcpy(x, pageable.data(), n * sizeof(float), cudaMemcpyHostToDevice); },
      cudaErrorStreamCaptureImplicit);
  // The refused copy did not run either.
  EXPECT_EQ(ToHost(x, n)[0], 1.0f);

  // In relaxed mode cudaMalloc and cudaFree are permitted; a copy with pinned host
  // memory is recorded and reads the pinned bytes at each launch.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float)), cudaSuccess);
  *pinned = 4.0f;
  ASSERT_EQ(cudaMemcpyAsync(x, pinned, sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph), cudaSuccess);
  *pinned = 9.0f;
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(ToHost(x, 1)[0], 9.0f);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);

  // The legacy stream cannot be captured; a stream captures once at a time.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(NodeCount(graph), 0u);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(x), cudaSuccess);
}

}  // namespace
}  // namespace remex::kernels::cuda
