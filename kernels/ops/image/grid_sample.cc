// GridSample: view, shape function and CPU kernel (ONNX GridSample-16,
// https://onnx.ai/onnx/operators/onnx__GridSample.html). What it computes is
// documented with its view in kernels/ops/image/grid_sample_view.h; the per-output formula is
// kernels/ops/image/grid_sample_ops.h's, shared with the CUDA kernel. The shape function needs
// only the inputs' shapes (ShapeDep::kShape).

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops/image/grid_sample_view.h"
#include "kernels/internal.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<GridSampleView> GridSampleViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "GridSample";
  if (in.size() != 2 || !in[0].present || !in[1].present) return OpError(op, "expects X and grid");
  if (!IsFloatType(in[1].dtype)) {
    return OpError(op,
                   "grid must be float16, float32 or float64, got " + std::string(DTypeName(in[1].dtype)));
  }
  if (!IsFloatType(in[0].dtype)) {
    return Unimplemented("GridSample: X of dtype " + std::string(DTypeName(in[0].dtype)) +
                         " is not implemented (float16, float32, float64)");
  }
  if (in[1].dtype != in[0].dtype) {
    return Unimplemented("GridSample: a grid of dtype " + std::string(DTypeName(in[1].dtype)) +
                         " with X of " + std::string(DTypeName(in[0].dtype)) +
                         " is not implemented (the same dtype)");
  }
  const Shape& xs = in[0].shape;
  const Shape& gs = in[1].shape;
  if (xs.size() != 4) return OpError(op, "X must be [N, C, H_in, W_in] (4-D), got " + ShapeToString(xs));
  if (gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2) {
    return OpError(op, "grid must be [N, H_out, W_out, 2] with N = " + std::to_string(xs[0]) + ", got " +
                           ShapeToString(gs));
  }
  GridSampleView v;
  v.dtype = in[0].dtype;
  grid::GridSampleGeometry& g = v.g;
  g.batch = xs[0];
  g.channels = xs[1];
  g.h_in = xs[2];
  g.w_in = xs[3];
  g.h_out = gs[1];
  g.w_out = gs[2];

  StatusOr<int64_t> align = attrs.Int("align_corners", 0);
  if (!align.ok()) return OpError(op, align.status().message());
  if (*align != 0 && *align != 1)
    return OpError(op, "align_corners must be 0 or 1, got " + std::to_string(*align));
  g.align_corners = *align == 1;
  StatusOr<std::string> mode = attrs.String("mode", "bilinear");
  if (!mode.ok()) return OpError(op, mode.status().message());
  if (*mode == "bilinear") {
    g.mode = grid::kBilinear;
  } else if (*mode == "nearest") {
    g.mode = grid::kNearest;
  } else if (*mode == "bicubic") {
    g.mode = grid::kBicubic;
  } else {
    return OpError(op, "mode must be bilinear, nearest or bicubic, got " + *mode);
  }
  StatusOr<std::string> padding = attrs.String("padding_mode", "zeros");
  if (!padding.ok()) return OpError(op, padding.status().message());
  if (*padding == "zeros") {
    g.padding = grid::kZeros;
  } else if (*padding == "border") {
    g.padding = grid::kBorder;
  } else if (*padding == "reflection") {
    g.padding = grid::kReflection;
  } else {
    return OpError(op, "padding_mode must be zeros, border or reflection, got " + *padding);
  }

  v.output = {g.batch, g.channels, g.h_out, g.w_out};
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, v.output));
  REMEX_ASSIGN_OR_RETURN(v.output_count, CheckedNumElements(op, v.output));
  if (v.output_count > 0 && (g.h_in == 0 || g.w_in == 0)) {
    return OpError(op, "X must not be empty when Y is not, got " + ShapeToString(xs));
  }
  return v;
}

namespace {

StatusOr<std::vector<TensorInfo>> InferGridSample(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(GridSampleView v, GridSampleViewOf(attrs, in));
  return std::vector<TensorInfo>{{v.dtype, v.output}};
}

OpDef GridSampleDef() {
  OpDef def;
  def.name = "GridSample";
  def.since_version = 16;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kShape};
  def.infer = InferGridSample;
  return def;
}

// Element i of one plane of T, in its compute type.
template <typename T>
struct PlaneOf {
  const T* p;
  ComputeType<T> operator()(int64_t i) const { return Load(p[i]); }
};

class GridSampleKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(GridSampleView v, GridSampleViewOf(attrs(), ToShapeArgs(in)));
    if (v.output_count == 0) return OkStatus();
    return DispatchFloat(op(), v.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const grid::GridSampleGeometry& g = v.g;
      const T* x = DataAs<const T>(in[0]);
      const T* grid_xy = DataAs<const T>(in[1]);
      T* y = DataAs<T>(out[0]);
      const int64_t plane_in = g.h_in * g.w_in, plane_out = g.h_out * g.w_out;
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t i = 0; i < plane_out; ++i) {
          const T* xy = grid_xy + (n * plane_out + i) * 2;
          const grid::GridPoint<C> p = grid::GridPointOf<C>(Load(xy[0]), Load(xy[1]), g);
          for (int64_t c = 0; c < g.channels; ++c) {
            const PlaneOf<T> plane{x + (n * g.channels + c) * plane_in};
            y[(n * g.channels + c) * plane_out + i] = Store<T>(grid::GridSampleValue<C>(plane, p, g));
          }
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddGridSampleOpDefs(KernelRegistry& registry) { return registry.AddOp(GridSampleDef()); }

Status AddGridSampleCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<GridSampleKernel>(registry, "GridSample");
}

}  // namespace remex::kernels::internal
