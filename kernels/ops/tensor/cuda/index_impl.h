// Launchers of the tensor family's index CUDA kernels (index_impl.cu): GatherND,
// ScatterND and Compress. Plain C++ and the CUDA runtime API only: included by .cu and
// .cc files alike. Every launcher queues its work on `stream` and returns the launch
// error (cudaErrorInvalidValue for arguments it does not accept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

// The most indices per tuple GatherND and ScatterND take on the GPU.
inline constexpr int kMaxNdIndex = 8;

// GatherND's and ScatterND's view (kernels/op_attrs.h GatherNdView): tuple j of `k`
// int64 indices names, in batch block j / tuples (batch_stride elements each), the
// slice of `slice` elements at index::NdOffset(tuple, k, extents, strides).
struct NdPlan {
  int k = 0;
  int64_t extents[kMaxNdIndex] = {};
  int64_t strides[kMaxNdIndex] = {};
  int64_t tuples = 1, slice = 1, batch_stride = 0;
};

// GatherND: out (n = rows * slice elements of `elem_size` 1, 2, 4 or 8 bytes, n > 0)
// gets tuple row's slice of data for every row; a tuple with an index out of range
// gives a slice of zeros.
cudaError_t LaunchGatherNd(int elem_size, const void* data, const int64_t* indices, void* out, int64_t n,
                           const NdPlan& plan, cudaStream_t stream);

// ScatterND into `out`, which already holds data: the update slices (rows of `slice`
// elements, rows > 0, batch_stride unused) go to the slices their tuples name; a tuple
// with an index out of range is skipped. One thread per update element, elements of
// `elem_size` 1, 2, 4 or 8 bytes; among duplicate tuples any one update wins
// (ScatterReduction::kNone).
cudaError_t LaunchScatterNd(int elem_size, const int64_t* indices, const void* updates, void* out,
                            int64_t rows, const NdPlan& plan, cudaStream_t stream);

// ScatterND with reduction add (`add`) or mul, as LaunchScatterNd places slices: one
// thread per slice element, adding or multiplying the rows in order in T as the CPU
// kernel does (float16 in float32 rounded to nearest even, integers wrapping): the same
// bits. T: Half, float, double or an int/uint of 8 to 64 bits.
template <typename T>
cudaError_t LaunchScatterNdReduce(bool add, const int64_t* indices, const T* updates, T* out, int64_t rows,
                                  const NdPlan& plan, cudaStream_t stream);

// Compress: input [outer, extent, inner] -> out [outer, count, inner] (n elements of
// `elem_size` 1, 2, 4 or 8 bytes, n > 0), out[o, j, i] = input[o, kept[j], i] with the
// `count` positions `kept` (device memory, each in [0, extent)).
cudaError_t LaunchCompress(int elem_size, const void* input, const int64_t* kept, void* out, int64_t n,
                           int64_t extent, int64_t count, int64_t inner, cudaStream_t stream);

}  // namespace remex::kernels::cuda
