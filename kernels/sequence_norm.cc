// MeanVarianceNormalization and ReverseSequence: shape functions and CPU kernels.
//
// MeanVarianceNormalization(X) -> Y, X's shape and dtype (ONNX
// MeanVarianceNormalization-9 and -13, one kernel for both entries;
// https://onnx.ai/onnx/operators/onnx__MeanVarianceNormalization.html): per index of
// the dims not in `axes`, y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over the dims
// in `axes` (default [0, 2, 3], so rank >= 4 without the attribute; negative axes count
// from the end; repeats refused). float16, float32, float64, computed in double
// (kernels/sequence_norm_ops.h, shared with the CUDA kernel). Rank at most 8.
//
// ReverseSequence(input, sequence_lens) -> input's shape and dtype (ONNX
// ReverseSequence-10; https://onnx.ai/onnx/operators/onnx__ReverseSequence.html):
// batch_axis and time_axis (0 or 1, different; defaults 1 and 0), input of rank >= 2
// and any dtype, sequence_lens int64 [batch]. For each batch b, the first
// sequence_lens[b] steps along the time axis are reversed, the others copied.
// sequence_lens are data: a value outside [0, time extent] is INVALID_ARGUMENT
// "ReverseSequence: sequence_lens[b] = v is out of range [0, T]" (the CUDA kernel,
// reading them on the device, clamps them to that range instead).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/sequence_norm_ops.h"
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

StatusOr<ReverseSequenceView> ReverseSequenceViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "ReverseSequence";
  if (in.size() != 2 || !in[0].present || !in[1].present)
    return OpError(op, "expects input and sequence_lens");
  REMEX_ASSIGN_OR_RETURN(int64_t batch_axis, IntAttr(op, attrs, "batch_axis", 1));
  REMEX_ASSIGN_OR_RETURN(int64_t time_axis, IntAttr(op, attrs, "time_axis", 0));
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis) {
    return OpError(op, "batch_axis and time_axis must be 0 and 1 in some order, got " + Str(batch_axis) +
                           " and " + Str(time_axis));
  }
  const Shape& s = in[0].shape;
  if (s.size() < 2) return OpError(op, "input must have rank >= 2, got " + ShapeToString(s));
  if (in[1].dtype != DType::kInt64) {
    return OpError(op, "sequence_lens must be int64, got " + std::string(DTypeName(in[1].dtype)));
  }
  if (in[1].shape != Shape{s[batch_axis]}) {
    return OpError(op, "sequence_lens must be [" + Str(s[batch_axis]) + "] (the batch extent), got " +
                           ShapeToString(in[1].shape));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, s));
  ReverseSequenceView v;
  v.plan.dim0 = s[0];
  v.plan.dim1 = s[1];
  v.plan.inner = s[0] * s[1] == 0 ? 0 : total / (s[0] * s[1]);
  v.plan.batch_axis = static_cast<int>(batch_axis);
  v.batch = s[batch_axis];
  v.time = s[time_axis];
  v.total = total;
  return v;
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

// ---------------------------------------------------------------------------
// ReverseSequence.

OpDef ReverseSequenceDef() {
  OpDef def;
  def.name = "ReverseSequence";
  def.since_version = 10;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape};
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_RETURN_IF_ERROR(ReverseSequenceViewOf(attrs, in).status());
    return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
  };
  return def;
}

class ReverseSequenceKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(ReverseSequenceView v, ReverseSequenceViewOf(attrs(), ToShapeArgs(in)));
    const int64_t* lens = DataAs<const int64_t>(in[1]);
    for (int64_t b = 0; b < v.batch; ++b) {
      if (lens[b] < 0 || lens[b] > v.time) {
        return OpError(op(), "sequence_lens[" + Str(b) + "] = " + Str(lens[b]) + " is out of range [0, " +
                                 Str(v.time) + "]");
      }
    }
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using U = typename decltype(tag)::type;
      const U* x = DataAs<const U>(in[0]);
      U* y = DataAs<U>(out[0]);
      for (int64_t i = 0; i < v.total; ++i) {
        y[i] = x[seqnorm::ReverseSource(v.plan, i, lens[seqnorm::ReverseBatch(v.plan, i)])];
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddSequenceNormOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(MvnDef(9)));
  REMEX_RETURN_IF_ERROR(registry.AddOp(MvnDef(13)));
  return registry.AddOp(ReverseSequenceDef());
}

Status AddSequenceNormCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<MvnKernel>(registry, "MeanVarianceNormalization", 9));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<MvnKernel>(registry, "MeanVarianceNormalization", 13));
  return AddCpuKernel<ReverseSequenceKernel>(registry, "ReverseSequence");
}

}  // namespace remex::kernels::internal
