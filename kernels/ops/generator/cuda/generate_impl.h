// Launchers of the misc group's CUDA kernels (misc_impl.cu). Plain C++ and the CUDA
// runtime API only: included by .cu and .cc files alike. Every launcher queues its work
// on `stream` and returns the launch error (cudaErrorInvalidValue for arguments it
// does not accept).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace remex::kernels::cuda {

// out[i] = the element whose bytes are the low `elem_size` bytes of `bits` (little
// endian), for `n` elements (n > 0) of `elem_size` 1, 2, 4 or 8 bytes.
cudaError_t LaunchFill(void* out, int64_t n, int elem_size, uint64_t bits, cudaStream_t stream);

// out[i] = values[i] for `count` int64 values (count > 0) held in host memory; the
// values travel as kernel arguments, so `values` may be released once this returns.
cudaError_t LaunchWriteInt64s(int64_t* out, const int64_t* values, int64_t count, cudaStream_t stream);

// Range's y[i] = start + i * delta for i in [0, n) (n > 0), T the output's element type:
//   an integer type (int8 to int64, uint8 to uint64): start and delta are the values
//     converted to uint64 (sign-extended for signed types) and the result wraps modulo
//     2^64 before it is truncated to the element (the CPU kernel's wrapping arithmetic).
//   Half / float: start and delta as float (float16 converted exactly); the product
//     and sum are rounded in float (no fused multiply-add), float16 stored rounded to
//     nearest even.
//   double: start and delta as double, computed in double.
struct RangeArgs {
  uint64_t int_start = 0, int_delta = 0;
  double float_start = 0, float_delta = 0;
};
template <typename T>
cudaError_t LaunchRange(const RangeArgs& args, T* out, int64_t n, cudaStream_t stream);

// TopK over rows of `n` elements: x is [outer, n, inner], values and indices are
// [outer, k, inner] (indices may be null). The order is total: the largest (or, with
// !largest, the smallest) first, NaN above every number and NaNs equal to each other,
// equal values by ascending index; so the output is always sorted. 0 < k <= n,
// outer * inner > 0. T: float, Half, double, int32_t or int64_t.
template <typename T>
cudaError_t LaunchTopK(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                       int64_t k, bool largest, cudaStream_t stream);

// LRN over x [batch, channels, inner] (float32, float16 or float64; batch * channels *
// inner > 0): y = x / (bias + alpha_over_size * sum(x[c']^2))^beta over c' in
// [c - lo, c + hi] inside [0, channels), summed in channel order in float (double for
// float64) with no fused multiply-add.
struct LrnArgs {
  int64_t batch = 0, channels = 0, inner = 0;
  int64_t lo = 0, hi = 0;
  double alpha_over_size = 0, bias = 0, beta = 0;  // Rounded to float for float32 / float16.
};
// T: float, Half or double.
template <typename T>
cudaError_t LaunchLrn(const T* x, T* y, const LrnArgs& args, cudaStream_t stream);

// OneHot, as kernels/generate.cc: out [outer, depth, inner] of `elem_size`-byte
// elements is values[1] where k equals indices[o, i] (truncated toward zero; negative
// counts from depth), values[0] elsewhere. Indices of type I (float, Half, double,
// int32_t or int64_t), values (2 elements) on the device. outer * depth * inner > 0.
template <typename I>
cudaError_t LaunchOneHot(int elem_size, const I* indices, const void* values, void* out, int64_t outer,
                         int64_t depth, int64_t inner, cudaStream_t stream);

// CumSum of x [outer, n, inner] along n, as kernels/cumsum.cc: one thread per line adds
// in the CPU kernel's order and type (float32 for float16, float32 and float64 in their
// own type, int32 and int64 wrapping). outer * inner > 0. T: float, Half, double,
// int32_t or int64_t.
template <typename T>
cudaError_t LaunchCumSum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse, cudaStream_t stream);

}  // namespace remex::kernels::cuda
