// Launchers of the generator family's CUDA kernels (generate_impl.cu): Fill
// (ConstantOfShape; Dropout's mask), WriteInt64s (Size; Shape's and NonMaxSuppression's
// int64 outputs), Range and OneHot. Plain C++ and the CUDA runtime API only: included by
// .cu and .cc files alike. Every launcher queues its work on `stream` and returns the
// launch error (cudaErrorInvalidValue for arguments it does not accept).
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

// OneHot, as kernels/ops/generator/generate.cc: out [outer, depth, inner] of
// `elem_size`-byte elements is values[1] where k equals indices[o, i] (truncated toward
// zero; negative counts from depth), values[0] elsewhere. Indices of type I (float, Half,
// double, int32_t or int64_t), values (2 elements) on the device. outer * depth * inner
// > 0.
template <typename I>
cudaError_t LaunchOneHot(int elem_size, const I* indices, const void* values, void* out, int64_t outer,
                         int64_t depth, int64_t inner, cudaStream_t stream);

}  // namespace remex::kernels::cuda
