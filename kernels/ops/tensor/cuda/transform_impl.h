// Launchers of the CUDA data-movement kernels (transform_impl.cu). Plain C++ and the
// CUDA runtime API only: included by .cu and .cc files alike.
//
// Offsets and strides count elements of the launch's element size (`elem_size`
// bytes: 1, 2, 4, 8 or 16; the host may view a tensor in wider units than its dtype).
// Every launcher queues its kernel on `stream` and returns the launch error;
// cudaErrorInvalidValue for arguments it does not accept.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"
#include "kernels/ops/tensor/reverse_sequence_ops.h"

namespace remex::kernels::cuda {

inline constexpr int kMaxCopyRank = 8;

// An index mapping over `rank` dims of extents `dims` (row-major order of the walk):
// the element with coordinates c goes from src[src_base + sum c[d] * src_strides[d]]
// to dst[dst_base + sum c[d] * dst_strides[d]]. Strides may be negative (Slice with
// negative steps) or 0 (a broadcast source). A one-element walk has rank 1, dims {1}.
struct CopyPlan {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t src_strides[kMaxCopyRank] = {};
  int64_t dst_strides[kMaxCopyRank] = {};
  int64_t src_base = 0;
  int64_t dst_base = 0;
};

// Copies the `n` = prod(dims) elements of `plan` (n > 0).
cudaError_t LaunchStridedCopy(int elem_size, const void* src, void* dst, int64_t n, const CopyPlan& plan,
                              cudaStream_t stream);

// Gather along one axis of data seen as [outer, axis_extent, inner]:
// out[o, j, k] = data[o, index[j] (+ axis_extent if negative), k] for j < num_indices.
// An index outside [-axis_extent, axis_extent) writes zeros (no error can be raised
// from the GPU without a synchronisation).
struct GatherPlan {
  int64_t outer = 0;
  int64_t axis_extent = 0;
  int64_t num_indices = 0;
  int64_t inner = 0;  // In elements of elem_size bytes.
};
cudaError_t LaunchGather(int elem_size, const void* data, const void* indices, bool indices_int64, void* out,
                         const GatherPlan& plan, cudaStream_t stream);

// GatherElements over `rank` dims: output element i, of coordinates c in the indices'
// extents `dims`, is data[sum c[d] * data_strides[d]] with c[axis] replaced by
// indices[i] (+ axis_extent if negative). An index outside [-axis_extent,
// axis_extent) writes zeros, as for Gather.
struct GatherElementsPlan {
  int rank = 0;
  int axis = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t data_strides[kMaxCopyRank] = {};
  int64_t axis_extent = 0;
};
cudaError_t LaunchGatherElements(int elem_size, const void* data, const void* indices, bool indices_int64,
                                 void* out, int64_t n, const GatherElementsPlan& plan, cudaStream_t stream);

// ScatterElements into `out`, which already holds data: update i (of n) goes to the
// element GatherElements' `plan` maps output element i to (indices[i] along the axis);
// an index out of range is skipped. ScatterReduction::kNone: one thread per update
// (duplicate indices: one of them wins); kAdd / kMul: one thread applies every update
// in order, as the CPU kernel does (LaunchScatterElementsReduce). elem_size: the
// element's bytes (kNone works on raw bytes).
using ::remex::kernels::ScatterReduction;
cudaError_t LaunchScatterElements(int elem_size, const void* indices, bool indices_int64, const void* updates,
                                  void* out, int64_t n, const GatherElementsPlan& plan, cudaStream_t stream);
// ScatterElements with reduction add (`add`) or mul: one thread applies every update in
// order in T (Half, float, double, int32_t or int64_t; integers wrap).
template <typename T>
cudaError_t LaunchScatterElementsReduce(bool add, const void* indices, bool indices_int64, const T* updates,
                                        T* out, int64_t n, const GatherElementsPlan& plan,
                                        cudaStream_t stream);

// Trilu of `batch` [rows, cols] matrices: y = x where kernels/ops/tensor/diagonal_ops.h's
// TriluKeeps(upper, k, i, j), else zero.
cudaError_t LaunchTrilu(int elem_size, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                        bool upper, cudaStream_t stream);

// EyeLike: y [rows, cols] holds `one_bits` (the element's bytes, in the low bytes) where
// diagonal_ops.h's EyeLikeOne(k, i, j), zero elsewhere.
cudaError_t LaunchEyeLike(int elem_size, void* y, int64_t rows, int64_t cols, int64_t k, uint64_t one_bits,
                          cudaStream_t stream);

// Pad over `rank` dims (rank >= 1): output coordinate o[d] reads input coordinate
// o[d] - pads_begin[d] when inside [0, in_dims[d]); outside, constant mode writes the
// constant (read from `constant` on the device when not null, else `constant_bits`,
// the element's bytes in the low bytes), edge mode clamps, reflect mode mirrors
// without repeating the border (period 2 * (in_dims[d] - 1)). The mode is the CPU
// kernel's own enum (kernels/op_enums.h).
using ::remex::kernels::PadMode;
struct PadPlan {
  int rank = 0;
  PadMode mode = PadMode::kConstant;
  int64_t out_dims[kMaxCopyRank] = {};
  int64_t in_dims[kMaxCopyRank] = {};
  int64_t in_strides[kMaxCopyRank] = {};
  int64_t pads_begin[kMaxCopyRank] = {};
  uint64_t constant_bits = 0;
};
cudaError_t LaunchPad(int elem_size, const void* src, const void* constant, void* dst, int64_t n,
                      const PadPlan& plan, cudaStream_t stream);

// Where over a broadcast output of `rank` dims: out[i] = cond[.] ? x[.] : y[.], the
// offsets taken through the per-input strides (0 along broadcast dims). `cond` holds
// one byte per element, any non-zero byte is true.
struct WherePlan {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t cond_strides[kMaxCopyRank] = {};
  int64_t x_strides[kMaxCopyRank] = {};
  int64_t y_strides[kMaxCopyRank] = {};
};
cudaError_t LaunchWhere(int elem_size, const void* cond, const void* x, const void* y, void* out, int64_t n,
                        const WherePlan& plan, cudaStream_t stream);

// ReverseSequence of x into y (`total` > 0 elements of `elem_size` 1, 2, 4 or 8 bytes)
// by `plan`, with sequence_lens (int64, device memory, one per batch) clamped to
// [0, time] on the device.
cudaError_t LaunchReverseSequence(const seqnorm::ReversePlan& plan, int64_t total, int64_t time,
                                  int elem_size, const void* x, const int64_t* lens, void* y,
                                  cudaStream_t stream);

// out[i] = convert(in[i]) for `n` elements (n > 0), with the CPU kernel's rules: float
// to integer truncates toward zero, saturates, NaN -> 0; to bool is v != 0; integer
// narrowing wraps; to float16 rounds to nearest even once (from float64 and integers
// via float64, from float32 directly; float16 to anything goes through float32); to
// bfloat16 rounds to nearest even from float32 (anything else is converted to float32
// first; bfloat16 to anything goes through float32). Conversions of kernels/float16.h.
// From and To: Half, float, double, BFloat16, bool or an int/uint of 8 to 64 bits.
template <typename From, typename To>
cudaError_t LaunchCast(const From* in, To* out, int64_t n, cudaStream_t stream);

}  // namespace remex::kernels::cuda
