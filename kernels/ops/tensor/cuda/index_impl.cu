// Device code of the tensor family's index CUDA kernels (index_impl.h: GatherND,
// ScatterND, Compress). Includes only CUDA and plain headers. Every kernel is a grid-stride loop;
// the kernels that only move elements are instantiated per element size and copy raw
// bits.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/float16.h"
#include "kernels/ops/tensor/cuda/index_impl.h"
#include "kernels/ops/tensor/index_ops.h"

namespace remex::kernels::cuda {
namespace {

// Calls f(E{}) with the unsigned type of `elem_size` bytes.
template <typename F>
cudaError_t DispatchElemSize(int elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      break;
  }
  return cudaErrorInvalidValue;
}

// The element offset of tuple `row`'s slice in data (its batch block included); -1
// when an index is out of range.
__device__ __forceinline__ int64_t SliceOffset(const int64_t* indices, int64_t row, const NdPlan& plan) {
  const int64_t offset = index::NdOffset(indices + row * plan.k, plan.k, plan.extents, plan.strides);
  return offset < 0 ? -1 : (row / plan.tuples) * plan.batch_stride + offset;
}

template <typename E>
__global__ void GatherNdKernel(const E* __restrict__ data, const int64_t* __restrict__ indices,
                               E* __restrict__ out, int64_t n, NdPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t row = i / plan.slice;
    const int64_t offset = SliceOffset(indices, row, plan);
    out[i] = offset < 0 ? E{} : data[offset + (i - row * plan.slice)];
  }
}

template <typename E>
__global__ void ScatterNdKernel(const int64_t* __restrict__ indices, const E* __restrict__ updates,
                                E* __restrict__ out, int64_t n, NdPlan plan) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t row = i / plan.slice;
    const int64_t offset = SliceOffset(indices, row, plan);
    if (offset >= 0) out[offset + (i - row * plan.slice)] = updates[i];
  }
}

// One thread per slice element e: the rows in order, as the CPU kernel applies them.
// Different e never meet, since a slice's elements are contiguous.
template <typename T>
__global__ void ScatterNdReduceKernel(const int64_t* __restrict__ indices, const T* __restrict__ updates,
                                      T* __restrict__ out, int64_t rows, NdPlan plan, bool add) {
  for (int64_t e = GlobalThread(); e < plan.slice; e += GridThreads()) {
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t offset = SliceOffset(indices, row, plan);
      if (offset < 0) continue;
      T& dst = out[offset + e];
      const T src = updates[row * plan.slice + e];
      if constexpr (std::is_same_v<T, Half>) {
        const float a = HalfToFloat(dst), b = HalfToFloat(src);
        dst = FloatToHalf(add ? a + b : a * b);
      } else if constexpr (std::is_integral_v<T>) {  // Wrapping, in uint64.
        const uint64_t a = static_cast<uint64_t>(dst), b = static_cast<uint64_t>(src);
        dst = static_cast<T>(add ? a + b : a * b);
      } else {
        dst = add ? dst + src : dst * src;
      }
    }
  }
}

template <typename E>
__global__ void CompressKernel(const E* __restrict__ input, const int64_t* __restrict__ kept,
                               E* __restrict__ out, int64_t n, int64_t extent, int64_t count, int64_t inner) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t rest = i / inner;
    const int64_t j = rest % count;
    const int64_t o = rest / count;
    out[i] = input[(o * extent + kept[j]) * inner + (i - rest * inner)];
  }
}

bool ValidPlan(const NdPlan& plan) {
  return plan.k >= 1 && plan.k <= kMaxNdIndex && plan.tuples > 0 && plan.slice > 0;
}

}  // namespace

cudaError_t LaunchGatherNd(int elem_size, const void* data, const int64_t* indices, void* out, int64_t n,
                           const NdPlan& plan, cudaStream_t stream) {
  if (n <= 0 || !ValidPlan(plan)) return cudaErrorInvalidValue;
  return DispatchElemSize(elem_size, [&](auto tag) {
    using E = decltype(tag);
    LaunchKernel<GatherNdKernel<E>>(Blocks(n), kThreads, 0, stream, static_cast<const E*>(data), indices,
                                    static_cast<E*>(out), n, plan);
    return cudaGetLastError();
  });
}

cudaError_t LaunchScatterNd(int elem_size, const int64_t* indices, const void* updates, void* out,
                            int64_t rows, const NdPlan& plan, cudaStream_t stream) {
  if (rows <= 0 || !ValidPlan(plan)) return cudaErrorInvalidValue;
  const int64_t n = rows * plan.slice;
  return DispatchElemSize(elem_size, [&](auto tag) {
    using E = decltype(tag);
    LaunchKernel<ScatterNdKernel<E>>(Blocks(n), kThreads, 0, stream, indices, static_cast<const E*>(updates),
                                     static_cast<E*>(out), n, plan);
    return cudaGetLastError();
  });
}

template <typename T>
cudaError_t LaunchScatterNdReduce(bool add, const int64_t* indices, const T* updates, T* out, int64_t rows,
                                  const NdPlan& plan, cudaStream_t stream) {
  if (rows <= 0 || !ValidPlan(plan)) return cudaErrorInvalidValue;
  LaunchKernel<ScatterNdReduceKernel<T>>(Blocks(plan.slice), kThreads, 0, stream, indices, updates, out, rows,
                                         plan, add);
  return cudaGetLastError();
}

#define REMEX_INDEX_INSTANTIATE(T)                                                                          \
  template cudaError_t LaunchScatterNdReduce<T>(bool, const int64_t*, const T*, T*, int64_t, const NdPlan&, \
                                                cudaStream_t);
REMEX_INDEX_INSTANTIATE(Half)
REMEX_INDEX_INSTANTIATE(float)
REMEX_INDEX_INSTANTIATE(double)
REMEX_INDEX_INSTANTIATE(int8_t)
REMEX_INDEX_INSTANTIATE(int16_t)
REMEX_INDEX_INSTANTIATE(int32_t)
REMEX_INDEX_INSTANTIATE(int64_t)
REMEX_INDEX_INSTANTIATE(uint8_t)
REMEX_INDEX_INSTANTIATE(uint16_t)
REMEX_INDEX_INSTANTIATE(uint32_t)
REMEX_INDEX_INSTANTIATE(uint64_t)
#undef REMEX_INDEX_INSTANTIATE

cudaError_t LaunchCompress(int elem_size, const void* input, const int64_t* kept, void* out, int64_t n,
                           int64_t extent, int64_t count, int64_t inner, cudaStream_t stream) {
  if (n <= 0 || count <= 0 || inner <= 0 || extent < count) return cudaErrorInvalidValue;
  return DispatchElemSize(elem_size, [&](auto tag) {
    using E = decltype(tag);
    LaunchKernel<CompressKernel<E>>(Blocks(n), kThreads, 0, stream, static_cast<const E*>(input), kept,
                                    static_cast<E*>(out), n, extent, count, inner);
    return cudaGetLastError();
  });
}

}  // namespace remex::kernels::cuda
