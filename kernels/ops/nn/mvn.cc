// MeanVarianceNormalization and ReverseSequence: shape functions and CPU kernels.
//
// MeanVarianceNormalization(X) -> Y, X's shape and dtype (ONNX
// MeanVarianceNormalization-9 and -13, one kernel for both entries;
// https://onnx.ai/onnx/operators/onnx__MeanVarianceNormalization.html): per index of
// the dims not in `axes`, y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over the dims
// in `axes` (default [0, 2, 3], so rank >= 4 without the attribute; negative axes count
// from the end; repeats refused). float16, float32, float64, computed in double
// (kernels/ops/nn/mvn_ops.h, shared with the CUDA kernel). Rank at most 8.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/mvn_ops.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<seqnorm::MvnPlan> MvnPlanOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "MeanVarianceNormalization";
  if (in.size() != 1 || !in[0].present) return OpError(op, "expects X");
  if (!IsFloatType(in[0].dtype))
    return OpError(op, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank > seqnorm::kMaxRank) return OpError(op, "rank above 8 is not supported, got " + ShapeToString(s));
  StatusOr<std::vector<int64_t>> axes = attrs.Ints("axes", {0, 2, 3});
  if (!axes.ok()) return OpError(op, axes.status().message());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    REMEX_ASSIGN_OR_RETURN(int64_t d, NormalizeAxis(op, a, rank, "axes"));
    if (reduced[d]) return OpError(op, "axis " + std::to_string(a) + " is repeated");
    reduced[d] = true;
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  const std::vector<int64_t> strides = RowMajorStrides(s);
  seqnorm::MvnPlan p;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      p.reduced_dims[p.reduced_rank] = s[d];
      p.reduced_strides[p.reduced_rank++] = strides[d];
      p.group_size *= s[d];
    } else {
      p.kept_dims[p.kept_rank] = s[d];
      p.kept_strides[p.kept_rank++] = strides[d];
      p.groups *= s[d];
    }
  }
  return p;
}

namespace {

// ---------------------------------------------------------------------------
// MeanVarianceNormalization.

OpDef MvnDef(int since) {
  OpDef def;
  def.name = "MeanVarianceNormalization";
  def.since_version = since;
  def.end_version = since == 9 ? 12 : kOpenEndedVersion;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_RETURN_IF_ERROR(MvnPlanOf(attrs, in).status());
    return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
  };
  return def;
}

class MvnKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(seqnorm::MvnPlan p, MvnPlanOf(attrs(), ToShapeArgs(in)));
    if (p.groups * p.group_size == 0) return OkStatus();
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      for (int64_t g = 0; g < p.groups; ++g) {
        double sum = 0, sum_squares = 0;
        for (int64_t k = 0; k < p.group_size; ++k) {
          const double v = static_cast<double>(Load(x[seqnorm::MvnOffset(p, g, k)]));
          sum += v;
          sum_squares += v * v;
        }
        const seqnorm::MvnMoments m = seqnorm::MvnFinish(sum, sum_squares, p.group_size);
        for (int64_t k = 0; k < p.group_size; ++k) {
          const int64_t at = seqnorm::MvnOffset(p, g, k);
          const double v = (static_cast<double>(Load(x[at])) - m.mean) / m.denom;
          if constexpr (std::is_same_v<T, Half>) {
            y[at] = DoubleToHalf(v);
          } else {
            y[at] = static_cast<T>(v);
          }
        }
      }
      return OkStatus();
    });
  }
};
}  // namespace

Status AddMvnOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(MvnDef(9)));
  return registry.AddOp(MvnDef(13));
}

Status AddMvnCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<MvnKernel>(registry, "MeanVarianceNormalization", 9));
  return AddCpuKernel<MvnKernel>(registry, "MeanVarianceNormalization", 13);
}

}  // namespace remex::kernels::internal
