// Launchers of the reduction family's CUDA kernels (reduce_impl.cu): the Reduce ops
// (ONNX Reduce*, opsets 1-18), ArgMax and ArgMin (opsets 1-13) and TopK (opsets 1-11).
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. Each launcher is a template on the element type T (kernels/cuda/dtype.h),
// instantiated in reduce_impl.cu for float and Half (float32, float16) unless its
// comment names other types. float16 data is loaded as float, accumulated in float and
// stored rounded to nearest even. The host side (reduce.cc, topk.cc) has validated
// shapes and attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

// The kind of reduction: the CPU kernels' own enum (kernels/op_enums.h).
using ::remex::kernels::ReduceKind;

inline constexpr int kMaxReduceGroups = 8;

// The input seen as kept and reduced groups of dims (extent-1 dims dropped, adjacent
// dims of one kind merged), outermost first, strides in elements. Output element o
// (row-major over the kept groups) reduces the red_count elements at
// kept_offset(o) + red_offset(r). `inner_reduced`: the innermost group is reduced.
struct ReducePlan {
  int64_t out_count = 0;
  int64_t red_count = 1;
  int num_kept = 0;
  int num_red = 0;
  bool inner_reduced = false;
  int64_t kept_dims[kMaxReduceGroups] = {};
  int64_t kept_strides[kMaxReduceGroups] = {};
  int64_t red_dims[kMaxReduceGroups] = {};
  int64_t red_strides[kMaxReduceGroups] = {};
};

// y[o] = reduction of x over the plan. out_count > 0.
template <typename T>
cudaError_t LaunchReduce(ReduceKind kind, const T* x, T* y, const ReducePlan& plan, cudaStream_t stream);

// ArgMax (is_max) / ArgMin of x viewed as [outer, n, inner] along n (n >= 1): int64 y
// of [outer, inner]. NaN counts as the extremum; ties pick the first index, or the
// last with select_last. outer * inner > 0.
template <typename T>
cudaError_t LaunchArgExtremum(bool is_max, bool select_last, const T* x, int64_t* y, int64_t outer, int64_t n,
                              int64_t inner, cudaStream_t stream);

// TopK over rows of `n` elements: x is [outer, n, inner], values and indices are
// [outer, k, inner] (indices may be null). The order is total: the largest (or, with
// !largest, the smallest) first, NaN above every number and NaNs equal to each other,
// equal values by ascending index; so the output is always sorted. 0 < k <= n,
// outer * inner > 0. T: float, Half, double, int32_t or int64_t.
template <typename T>
cudaError_t LaunchTopK(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                       int64_t k, bool largest, cudaStream_t stream);

}  // namespace remex::kernels::cuda
