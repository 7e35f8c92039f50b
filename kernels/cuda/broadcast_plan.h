// The index plan of a broadcasting elementwise kernel on the GPU: built on the host
// (broadcast.h) and passed to the kernel by value. Plain C++ with no includes beyond
// <cstdint>, so that .cu files can include it.
#pragma once

#include <cstdint>

namespace remex::kernels::cuda {

inline constexpr int kMaxBroadcastRank = 8;

// Output index -> input offsets for a broadcasting binary op over a row-major output
// of `rank` dims (size-1 output dims dropped, neighbours that broadcast alike merged).
// Element i of the output, with coordinates c[d] in `dims`, reads
// a[sum c[d] * a_strides[d]] and b[sum c[d] * b_strides[d]]; a stride is 0 along a dim
// the input broadcasts. A scalar-sized output has rank 1, dims {1}.
struct BroadcastPlan {
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t a_strides[kMaxBroadcastRank] = {};
  int64_t b_strides[kMaxBroadcastRank] = {};
};

}  // namespace remex::kernels::cuda
