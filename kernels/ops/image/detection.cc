// NonMaxSuppression and RoiAlign: views, shape functions and CPU kernels (ONNX
// NonMaxSuppression-10/11, RoiAlign-10/16; https://onnx.ai/onnx/operators/). What each
// computes is documented with its view in image/det_view.h; RoiAlign's formula is
// image/det_ops.h's, shared with the CUDA kernel.
//
// NonMaxSuppression's output count depends on its inputs' values, so every input is
// read on the host (ShapeDep::kData): the shape function runs the whole selection and
// the kernel runs it again to write the triples.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/ops/image/det_view.h"
#include "kernels/internal.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {
namespace {

// The one value of an optional scalar input, or nullopt when it is absent or empty.
template <typename T>
StatusOr<std::optional<T>> OptionalScalar(std::string_view op, std::span<const ShapeFnArg> in, size_t i,
                                          DType dtype, std::string_view what) {
  if (i >= in.size() || !in[i].present) return std::optional<T>();
  if (in[i].dtype != dtype) {
    return OpError(op, std::string(what) + " must be " + std::string(DTypeName(dtype)) + ", got " +
                           std::string(DTypeName(in[i].dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, in[i].shape));
  if (n == 0) return std::optional<T>();
  if (n != 1) return OpError(op, std::string(what) + " must hold one value, got " + std::to_string(n));
  if (in[i].data == nullptr) return OpError(op, std::string(what) + " has no data");
  T v;
  std::memcpy(&v, in[i].data, sizeof(T));
  return std::optional<T>(v);
}

struct Corners {
  float x_min, x_max, y_min, y_max;
};

Corners CornersOf(const float* b, bool center_point) {
  if (center_point) {
    const float half_w = b[2] / 2, half_h = b[3] / 2;
    return {b[0] - half_w, b[0] + half_w, b[1] - half_h, b[1] + half_h};
  }
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

// ONNX Runtime's SuppressByIOU: IoU > threshold, with empty intersections and boxes
// of zero area never suppressing.
bool Suppresses(const Corners& a, const Corners& b, float iou_threshold) {
  const float ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
  if (ix_max <= ix_min) return false;
  const float iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
  if (iy_max <= iy_min) return false;
  const float inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0.0f) return false;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) return false;
  return inter / uni > iou_threshold;
}

}  // namespace

StatusOr<std::vector<int64_t>> NonMaxSuppressionOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "NonMaxSuppression";
  if (in.size() < 2 || !in[0].present || !in[1].present) return OpError(op, "expects boxes and scores");
  for (size_t i = 0; i < 2; ++i) {
    if (in[i].dtype != DType::kFloat32) {
      return OpError(op, std::string(i == 0 ? "boxes" : "scores") + " must be float32, got " +
                             std::string(DTypeName(in[i].dtype)));
    }
  }
  const Shape& bs = in[0].shape;
  const Shape& ss = in[1].shape;
  if (bs.size() != 3 || bs[2] != 4)
    return OpError(op, "boxes must be [batch, boxes, 4], got " + ShapeToString(bs));
  if (ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    return OpError(op, "scores must be [batch, classes, boxes] = [" + std::to_string(bs[0]) + ", C, " +
                           std::to_string(bs[1]) + "], got " + ShapeToString(ss));
  }
  StatusOr<int64_t> center = attrs.Int("center_point_box", 0);
  if (!center.ok()) return OpError(op, center.status().message());
  if (*center != 0 && *center != 1) {
    return OpError(op, "center_point_box must be 0 or 1, got " + std::to_string(*center));
  }
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> max_boxes,
                         OptionalScalar<int64_t>(op, in, 2, DType::kInt64, "max_output_boxes_per_class"));
  REMEX_ASSIGN_OR_RETURN(std::optional<float> iou,
                         OptionalScalar<float>(op, in, 3, DType::kFloat32, "iou_threshold"));
  REMEX_ASSIGN_OR_RETURN(std::optional<float> score_threshold,
                         OptionalScalar<float>(op, in, 4, DType::kFloat32, "score_threshold"));
  const float iou_threshold = iou.value_or(0.0f);
  if (!(iou_threshold >= 0.0f && iou_threshold <= 1.0f)) {
    return OpError(op, "iou_threshold must be in [0, 1], got " + std::to_string(iou_threshold));
  }
  const int64_t batches = bs[0], num_boxes = bs[1], classes = ss[1];
  std::vector<int64_t> selected;
  const int64_t limit = max_boxes.value_or(0);
  if (limit <= 0 || batches * classes * num_boxes == 0) return selected;
  if (in[0].data == nullptr || in[1].data == nullptr) return OpError(op, "boxes and scores must have data");
  const auto* boxes = static_cast<const float*>(in[0].data);
  const auto* scores = static_cast<const float*>(in[1].data);
  std::vector<Corners> corners(static_cast<size_t>(num_boxes));
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < num_boxes; ++i)
      corners[i] = CornersOf(boxes + (b * num_boxes + i) * 4, *center == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * num_boxes;
      order.clear();
      for (int64_t i = 0; i < num_boxes; ++i) {
        if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
      }
      // Descending score (NaN last), equal scores by ascending index.
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        const bool nx = std::isnan(s[x]), ny = std::isnan(s[y]);
        if (nx != ny) return ny;
        return !nx && s[x] > s[y];
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        bool keep = true;
        for (int64_t k : kept) {
          if (Suppresses(corners[i], corners[k], iou_threshold)) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  return selected;
}

StatusOr<RoiAlignView> RoiAlignViewOf(int since_version, const Attributes& attrs,
                                      std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "RoiAlign";
  if (in.size() != 3 || !in[0].present || !in[1].present || !in[2].present) {
    return OpError(op, "expects X, rois and batch_indices");
  }
  if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) {
    if (IsFloatType(in[0].dtype) && in[1].dtype == in[0].dtype) {
      return Unimplemented("RoiAlign: dtype " + std::string(DTypeName(in[0].dtype)) +
                           " is not implemented (float32)");
    }
    return OpError(op, "X and rois must be float32, got " + std::string(DTypeName(in[0].dtype)) + " and " +
                           std::string(DTypeName(in[1].dtype)));
  }
  if (in[2].dtype != DType::kInt64) {
    return OpError(op, "batch_indices must be int64, got " + std::string(DTypeName(in[2].dtype)));
  }
  const Shape& xs = in[0].shape;
  if (xs.size() != 4) return OpError(op, "X must be [N, C, H, W], got " + ShapeToString(xs));
  if ((xs[2] == 0 || xs[3] == 0) && xs[1] > 0)
    return OpError(op, "X must not be empty, got " + ShapeToString(xs));
  const Shape& rs = in[1].shape;
  if (rs.size() != 2 || rs[1] != 4)
    return OpError(op, "rois must be [num_rois, 4], got " + ShapeToString(rs));
  if (in[2].shape != Shape{rs[0]}) {
    return OpError(
        op, "batch_indices must be [" + std::to_string(rs[0]) + "], got " + ShapeToString(in[2].shape));
  }
  RoiAlignView v;
  v.num_rois = rs[0];
  v.batch = xs[0];
  v.g.channels = xs[1];
  v.g.height = xs[2];
  v.g.width = xs[3];
  auto get_int = [&](const char* name, int64_t def, int64_t lo, int64_t hi) -> StatusOr<int64_t> {
    StatusOr<int64_t> x = attrs.Int(name, def);
    if (!x.ok()) return OpError(op, x.status().message());
    if (*x < lo || *x > hi) {
      return OpError(op, std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got " + std::to_string(*x));
    }
    return *x;
  };
  constexpr int64_t kMaxPooled = int64_t{1} << 20;
  REMEX_ASSIGN_OR_RETURN(v.g.pooled_h, get_int("output_height", 1, 1, kMaxPooled));
  REMEX_ASSIGN_OR_RETURN(v.g.pooled_w, get_int("output_width", 1, 1, kMaxPooled));
  REMEX_ASSIGN_OR_RETURN(v.g.sampling_ratio, get_int("sampling_ratio", 0, 0, det::kMaxRoiGrid));
  StatusOr<float> scale = attrs.Float("spatial_scale", 1.0f);
  if (!scale.ok()) return OpError(op, scale.status().message());
  if (!std::isfinite(*scale)) return OpError(op, "spatial_scale must be finite");
  v.g.spatial_scale = *scale;
  StatusOr<std::string> mode = attrs.String("mode", "avg");
  if (!mode.ok()) return OpError(op, mode.status().message());
  if (*mode != "avg" && *mode != "max") return OpError(op, "mode must be avg or max, got " + *mode);
  v.g.max_mode = *mode == "max";
  if (since_version >= 16) {
    StatusOr<std::string> ctm = attrs.String("coordinate_transformation_mode", "half_pixel");
    if (!ctm.ok()) return OpError(op, ctm.status().message());
    if (*ctm != "half_pixel" && *ctm != "output_half_pixel") {
      return OpError(op,
                     "coordinate_transformation_mode must be half_pixel or output_half_pixel, got " + *ctm);
    }
    v.g.half_pixel = *ctm == "half_pixel";
  } else {
    v.g.half_pixel = false;
  }
  v.output = {v.num_rois, v.g.channels, v.g.pooled_h, v.g.pooled_w};
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, DType::kFloat32, v.output));
  return v;
}

namespace {

// ---------------------------------------------------------------------------
// NonMaxSuppression.

StatusOr<std::vector<TensorInfo>> InferNonMaxSuppression(const Attributes& attrs,
                                                         std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> selected, NonMaxSuppressionOf(attrs, in));
  return std::vector<TensorInfo>{{DType::kInt64, Shape{static_cast<int64_t>(selected.size() / 3), 3}}};
}

OpDef NonMaxSuppressionDef(int since) {
  OpDef def;
  def.name = "NonMaxSuppression";
  def.since_version = since;
  if (since == 10) def.end_version = 10;
  def.min_inputs = 2;
  def.max_inputs = 5;
  def.input_deps = {ShapeDep::kData};
  def.infer = InferNonMaxSuppression;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) {
    return std::vector<DType>{DType::kInt64};
  };
  return def;
}

class NonMaxSuppressionKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> selected, NonMaxSuppressionOf(attrs(), ToShapeArgs(in)));
    if (!selected.empty()) std::memcpy(out[0].data, selected.data(), selected.size() * sizeof(int64_t));
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// RoiAlign.

StatusOr<std::vector<TensorInfo>> InferRoiAlign(int since, const Attributes& attrs,
                                                std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(RoiAlignView v, RoiAlignViewOf(since, attrs, in));
  return std::vector<TensorInfo>{{DType::kFloat32, v.output}};
}

OpDef RoiAlignDef(int since) {
  OpDef def;
  def.name = "RoiAlign";
  def.since_version = since;
  if (since == 10) def.end_version = 15;
  def.min_inputs = def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [since](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferRoiAlign(since, attrs, in);
  };
  return def;
}

class RoiAlignKernel final : public ValidatedKernel {
 public:
  RoiAlignKernel(const OpDef& def, const Attributes& attrs)
      : ValidatedKernel(def, attrs), since_(def.since_version) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(RoiAlignView v, RoiAlignViewOf(since_, attrs(), ToShapeArgs(in)));
    const auto* x = DataAs<const float>(in[0]);
    const auto* rois = DataAs<const float>(in[1]);
    const auto* batch_indices = DataAs<const int64_t>(in[2]);
    auto* y = DataAs<float>(out[0]);
    const det::RoiAlignGeometry& g = v.g;
    const int64_t plane = g.height * g.width, bins = g.pooled_h * g.pooled_w;
    if (NumElements(v.output).value_or(0) == 0) return OkStatus();
    for (int64_t r = 0; r < v.num_rois; ++r) {
      const int64_t n = batch_indices[r];
      if (n < 0 || n >= v.batch) {
        return OpError(op(), "batch index " + std::to_string(n) + " of roi " + std::to_string(r) +
                                 " is out of range [0, " + std::to_string(v.batch) + ")");
      }
      const det::RoiBins b = det::RoiBinsOf(rois + r * 4, g);
      if (!b.valid) {
        return OpError(op(), "roi " + std::to_string(r) + " needs a sampling grid out of range (at most " +
                                 std::to_string(det::kMaxRoiGrid) + " points per bin axis)");
      }
      for (int64_t c = 0; c < g.channels; ++c) {
        const float* p = x + (n * g.channels + c) * plane;
        float* yc = y + (r * g.channels + c) * bins;
        for (int64_t ph = 0; ph < g.pooled_h; ++ph) {
          for (int64_t pw = 0; pw < g.pooled_w; ++pw)
            yc[ph * g.pooled_w + pw] = det::RoiAlignValue(p, b, g, ph, pw);
        }
      }
    }
    return OkStatus();
  }

 private:
  int since_;
};

}  // namespace

Status AddDetectionOpDefs(KernelRegistry& registry) {
  for (int since : {10, 11}) REMEX_RETURN_IF_ERROR(registry.AddOp(NonMaxSuppressionDef(since)));
  for (int since : {10, 16}) REMEX_RETURN_IF_ERROR(registry.AddOp(RoiAlignDef(since)));
  return OkStatus();
}

Status AddDetectionCpuKernels(KernelRegistry& registry) {
  for (int since : {10, 11}) {
    REMEX_RETURN_IF_ERROR(AddCpuKernel<NonMaxSuppressionKernel>(registry, "NonMaxSuppression", since));
  }
  for (int since : {10, 16}) REMEX_RETURN_IF_ERROR(AddCpuKernel<RoiAlignKernel>(registry, "RoiAlign", since));
  return OkStatus();
}

}  // namespace remex::kernels::internal
