#include "kernels/cuda/broadcast.h"

#include <string>
#include <vector>

namespace remex::kernels::cuda {

StatusOr<BroadcastPlan> ComputeBroadcastPlan(const Shape& a, const Shape& b, const Shape& out) {
  const size_t rank = out.size();
  if (a.size() > rank || b.size() > rank) {
    return InvalidArgument("broadcast: input ranks " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                           " exceed the output rank " + std::to_string(rank));
  }
  // Per kept output dim: its extent and whether each input spans it (else broadcasts).
  struct Dim {
    int64_t extent;
    bool a_full;
    bool b_full;
  };
  std::vector<Dim> dims;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t o = out[i];
    const size_t lead_a = rank - a.size();
    const size_t lead_b = rank - b.size();
    const int64_t da = i < lead_a ? 1 : a[i - lead_a];
    const int64_t db = i < lead_b ? 1 : b[i - lead_b];
    if (o < 0 || (da != o && da != 1) || (db != o && db != 1)) {
      return InvalidArgument("broadcast: shapes " + ShapeToString(a) + " and " + ShapeToString(b) +
                             " do not broadcast to " + ShapeToString(out));
    }
    if (o == 1) continue;  // Contributes nothing to any offset.
    const Dim d{o, da == o, db == o};
    if (!dims.empty() && dims.back().a_full == d.a_full && dims.back().b_full == d.b_full) {
      dims.back().extent *= o;
    } else {
      dims.push_back(d);
    }
  }
  BroadcastPlan plan;
  if (dims.empty()) {
    plan.rank = 1;
    plan.dims[0] = 1;
    return plan;
  }
  if (dims.size() > static_cast<size_t>(kMaxBroadcastRank)) {
    return Unimplemented("broadcast: shapes " + ShapeToString(a) + " and " + ShapeToString(b) + " need " +
                         std::to_string(dims.size()) + " dims after merging, the CUDA kernels handle at most " +
                         std::to_string(kMaxBroadcastRank));
  }
  plan.rank = static_cast<int>(dims.size());
  int64_t a_stride = 1;
  int64_t b_stride = 1;
  for (int d = plan.rank - 1; d >= 0; --d) {
    plan.dims[d] = dims[d].extent;
    plan.a_strides[d] = dims[d].a_full ? a_stride : 0;
    plan.b_strides[d] = dims[d].b_full ? b_stride : 0;
    if (dims[d].a_full) a_stride *= dims[d].extent;
    if (dims[d].b_full) b_stride *= dims[d].extent;
  }
  return plan;
}

}  // namespace remex::kernels::cuda
