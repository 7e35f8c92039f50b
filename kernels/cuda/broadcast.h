// Host side of the broadcasting CUDA kernels: computes their BroadcastPlan.
#pragma once

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/cuda/broadcast_plan.h"

namespace remex::kernels::cuda {

// The plan for inputs of shapes `a` and `b` broadcast (ONNX multidirectional, numpy
// rules) to `out`. INVALID_ARGUMENT when an input does not broadcast to `out`;
// UNIMPLEMENTED when more than kMaxBroadcastRank dims remain after merging.
StatusOr<BroadcastPlan> ComputeBroadcastPlan(const Shape& a, const Shape& b, const Shape& out);

}  // namespace remex::kernels::cuda
