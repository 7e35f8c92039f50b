// MaxUnpool: view, shape function and CPU kernel (ONNX MaxUnpool-9/11;
// https://onnx.ai/onnx/operators/onnx__MaxUnpool.html). What it computes is documented
// with its view in kernels/ops/image/det_view.h, shared with the CUDA kernel.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/ops/image/det_view.h"
#include "kernels/internal.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<MaxUnpoolView> MaxUnpoolViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "MaxUnpool";
  if (in.size() < 2 || in.size() > 3 || !in[0].present || !in[1].present)
    return OpError(op, "expects X and I");
  if (!IsFloatType(in[0].dtype)) {
    return OpError(op, "X must be float16, float32 or float64, got " + std::string(DTypeName(in[0].dtype)));
  }
  if (in[1].dtype != DType::kInt64)
    return OpError(op, "I must be int64, got " + std::string(DTypeName(in[1].dtype)));
  const Shape& xs = in[0].shape;
  if (xs.size() < 3) return OpError(op, "X must be [N, C, D1 ...], got " + ShapeToString(xs));
  if (in[1].shape != xs) {
    return OpError(op, "I must have X's shape " + ShapeToString(xs) + ", got " + ShapeToString(in[1].shape));
  }
  const size_t spatial = xs.size() - 2;
  StatusOr<std::vector<int64_t>> kernel = attrs.Ints("kernel_shape");
  if (!kernel.ok()) return OpError(op, "kernel_shape is required");
  StatusOr<std::vector<int64_t>> strides = attrs.Ints("strides", std::vector<int64_t>(spatial, 1));
  StatusOr<std::vector<int64_t>> pads = attrs.Ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (!strides.ok()) return OpError(op, strides.status().message());
  if (!pads.ok()) return OpError(op, pads.status().message());
  if (kernel->size() != spatial || strides->size() != spatial || pads->size() != 2 * spatial) {
    return OpError(op, "kernel_shape, strides and pads must have " + std::to_string(spatial) + ", " +
                           std::to_string(spatial) + " and " + std::to_string(2 * spatial) +
                           " values for X " + ShapeToString(xs));
  }
  constexpr int64_t kMaxAttr = int64_t{1} << 24;
  Shape inferred = xs;
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t k = (*kernel)[d], s = (*strides)[d], pb = (*pads)[d], pe = (*pads)[spatial + d];
    if (k < 1 || k > kMaxAttr || s < 1 || s > kMaxAttr || pb < 0 || pb > kMaxAttr || pe < 0 ||
        pe > kMaxAttr) {
      return OpError(op, "kernel_shape and strides must be in [1, 2^24], pads in [0, 2^24]");
    }
    // |xs| < 2^63 and each attribute < 2^24: computed in __int128.
    const __int128 out = static_cast<__int128>(xs[d + 2] - 1) * s - pb - pe + k;
    if (out < 0 || out > INT64_MAX) {
      return OpError(op, "spatial dim " + std::to_string(d) + " of the output would be " +
                             (out < 0 ? std::string("negative") : std::string("too large")));
    }
    inferred[d + 2] = static_cast<int64_t>(out);
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, inferred));
  MaxUnpoolView v;
  v.output = inferred;
  if (in.size() == 3 && in[2].present) {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> given,
                           ReadIndexTensor(op, "output_shape", in[2].dtype, in[2].shape, in[2].data));
    if (given.size() != xs.size()) {
      return OpError(op, "output_shape must hold " + std::to_string(xs.size()) + " dims, got " +
                             std::to_string(given.size()));
    }
    v.output = Shape(given.begin(), given.end());
    for (size_t d = 0; d < xs.size(); ++d) {
      if (v.output[d] < inferred[d]) {
        return OpError(op, "output_shape " + ShapeToString(v.output) +
                               " is smaller than the unpooled shape " + ShapeToString(inferred));
      }
    }
    REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, v.output));
  }
  v.unpooled = inferred;
  v.x_count = *NumElements(xs);
  v.unpooled_count = *NumElements(inferred);
  v.y_count = *NumElements(v.output);
  return v;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferMaxUnpool(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(MaxUnpoolView v, MaxUnpoolViewOf(attrs, in));
  return std::vector<TensorInfo>{{in[0].dtype, v.output}};
}

OpDef MaxUnpoolDef(int since) {
  OpDef def;
  def.name = "MaxUnpool";
  def.since_version = since;
  if (since == 9) def.end_version = 10;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferMaxUnpool;
  return def;
}

class MaxUnpoolKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(MaxUnpoolView v, MaxUnpoolViewOf(attrs(), ToShapeArgs(in)));
    const size_t elem = DTypeSize(in[0].dtype);
    const auto* x = static_cast<const uint8_t*>(in[0].data);
    const auto* indices = DataAs<const int64_t>(in[1]);
    auto* y = static_cast<uint8_t*>(out[0].data);
    if (v.y_count > 0) std::memset(y, 0, static_cast<size_t>(v.y_count) * elem);
    const bool padded = v.output != v.unpooled;
    for (int64_t i = 0; i < v.x_count; ++i) {
      int64_t at = indices[i];
      if (at < 0 || at >= v.unpooled_count) {
        return OpError(op(), "index " + std::to_string(at) + " of I is out of range [0, " +
                                 std::to_string(v.unpooled_count) + ")");
      }
      if (padded) {
        // The same coordinates in Y, whose dims are at least the unpooled ones.
        int64_t rest = at, stride = 1;
        at = 0;
        for (size_t d = v.unpooled.size(); d-- > 0;) {
          at += rest % v.unpooled[d] * stride;
          rest /= v.unpooled[d];
          stride *= v.output[d];
        }
      }
      std::memcpy(y + static_cast<size_t>(at) * elem, x + static_cast<size_t>(i) * elem, elem);
    }
    return OkStatus();
  }
};

}  // namespace

Status AddUnpoolOpDefs(KernelRegistry& registry) {
  for (int since : {9, 11}) REMEX_RETURN_IF_ERROR(registry.AddOp(MaxUnpoolDef(since)));
  return OkStatus();
}

Status AddUnpoolCpuKernels(KernelRegistry& registry) {
  for (int since : {9, 11})
    REMEX_RETURN_IF_ERROR(AddCpuKernel<MaxUnpoolKernel>(registry, "MaxUnpool", since));
  return OkStatus();
}

}  // namespace remex::kernels::internal
