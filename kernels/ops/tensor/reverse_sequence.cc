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
#include "kernels/ops/tensor/reverse_sequence_ops.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

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

Status AddReverseSequenceOpDefs(KernelRegistry& registry) { return registry.AddOp(ReverseSequenceDef()); }

Status AddReverseSequenceCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<ReverseSequenceKernel>(registry, "ReverseSequence");
}

}  // namespace remex::kernels::internal
