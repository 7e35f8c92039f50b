// Device side of the BroadcastPlan (broadcast_plan.h): the input offsets of one output
// element. Include only from .cu files.
#pragma once

#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"

namespace remex::kernels::cuda {

// Output element `i` of a broadcasting binary op -> its offsets `ia` into a and `ib`
// into b (plan.rank in [1, kMaxBroadcastRank]).
__device__ __forceinline__ void BroadcastOffsets(const BroadcastPlan& plan, int64_t i, int64_t& ia, int64_t& ib) {
  int64_t rest = i;
  ia = 0;
  ib = 0;
#pragma unroll
  for (int d = kMaxBroadcastRank - 1; d >= 0; --d) {
    if (d < plan.rank) {
      const int64_t c = rest % plan.dims[d];
      rest /= plan.dims[d];
      ia += c * plan.a_strides[d];
      ib += c * plan.b_strides[d];
    }
  }
}

}  // namespace remex::kernels::cuda
