// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: shape functions and CPU
// kernels, and the input views of the quantization ops (kernels/ops/quantization/quantize_view.h).
// https://onnx.ai/onnx/operators/onnx__QuantizeLinear.html (opsets 10, 13),
// onnx__DequantizeLinear.html (10, 13), onnx__DynamicQuantizeLinear.html (11).
//
// QuantizeLinear(x, y_scale, [y_zero_point]) -> y of x's shape and the zero point's
//   dtype (uint8 without one); per tensor, or per axis at opset 13.
// DequantizeLinear(x, x_scale, [x_zero_point]) -> y float32 of x's shape.
// DynamicQuantizeLinear(x float32) -> y uint8 of x's shape, y_scale float32 [],
//   y_zero_point uint8 [].
// FusedQLinearAdd (internal; quantize_view.h QLinearAddViewOf, quantize_ops.h
//   QLinearAdd): QuantizeLinear(Relu?(DequantizeLinear(A) + DequantizeLinear(B))).
// The formulas are kernels/ops/quantization/quantize_ops.h's. A scale that is zero, negative or not
// finite is not refused (ONNX does not): division by it gives what float32 gives,
// saturated.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/ops/quantization/quantize_cpu.h"
#include "kernels/ops/quantization/quantize_ops.h"
#include "kernels/ops/quantization/quantize_view.h"

namespace remex::kernels::internal {

namespace {

// Checks a scale or zero point of `what` holding 1 value or (per axis / per column)
// `count` values; returns whether it holds `count` values (> 1).
StatusOr<bool> CheckParam(std::string_view op, std::string_view what, const ShapeFnArg& p, int64_t count,
                          bool allow_vector) {
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, p.shape));
  if (p.shape.size() <= 1 && n == 1) return false;
  if (allow_vector && p.shape.size() == 1 && n == count) return count > 1;
  return OpError(op, std::string(what) + " must hold one value" +
                         (allow_vector ? " or " + std::to_string(count) + " (1-D)" : std::string()) + ", got " +
                         ShapeToString(p.shape));
}

}  // namespace

StatusOr<QuantizeView> QuantizeViewOf(std::string_view op, int since_version, const Attributes& attrs,
                                      std::span<const ShapeFnArg> in) {
  const bool quantize = op == "QuantizeLinear";
  if (in.size() < 2 || !in[0].present || !in[1].present) return OpError(op, "expects x and a scale");
  QuantizeView v;
  v.x = in[0].dtype;
  if (quantize) {
    if (v.x != DType::kFloat32 && v.x != DType::kInt32) {
      return OpError(op, "x must be float32 or int32, got " + std::string(DTypeName(v.x)));
    }
  } else if (!IsQuantType(v.x) && v.x != DType::kInt32) {
    return OpError(op, "x must be uint8, int8 or int32, got " + std::string(DTypeName(v.x)));
  }
  if (in[1].dtype != DType::kFloat32) {
    return OpError(op, "the scale must be float32, got " + std::string(DTypeName(in[1].dtype)));
  }
  v.has_zero_point = in.size() > 2 && in[2].present;
  v.q = quantize ? DType::kUint8 : v.x;
  if (v.has_zero_point) {
    const DType zt = in[2].dtype;
    if (quantize ? !IsQuantType(zt) : zt != v.x) {
      return OpError(op, std::string("the zero point must be ") + (quantize ? "uint8 or int8" : "x's dtype") +
                             ", got " + std::string(DTypeName(zt)));
    }
    if (quantize) v.q = zt;
  }
  const Shape& s = in[0].shape;
  REMEX_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(op, s));
  // `axis` (opset 13) matters only when the scale holds several values (per axis).
  int64_t axis = 0;
  REMEX_ASSIGN_OR_RETURN(int64_t scale_count, CheckedNumElements(op, in[1].shape));
  const bool allow_axis = since_version >= 13 && !s.empty() && in[1].shape.size() == 1 && scale_count != 1;
  if (allow_axis) {
    StatusOr<int64_t> a = attrs.Int("axis", 1);
    if (!a.ok()) return OpError(op, a.status().message());
    REMEX_ASSIGN_OR_RETURN(axis, NormalizeAxis(op, *a, static_cast<int64_t>(s.size())));
    v.channels = s[axis];
  }
  REMEX_ASSIGN_OR_RETURN(bool scale_axis, CheckParam(op, "the scale", in[1], v.channels, allow_axis));
  bool zp_axis = scale_axis;
  if (v.has_zero_point) {
    REMEX_ASSIGN_OR_RETURN(zp_axis, CheckParam(op, "the zero point", in[2], v.channels, allow_axis));
  }
  if (zp_axis != scale_axis) {
    return OpError(op, "the scale " + ShapeToString(in[1].shape) + " and the zero point " +
                           ShapeToString(in[2].shape) + " must both be per tensor or both per axis");
  }
  v.per_axis = scale_axis;
  if (v.per_axis) {
    for (int64_t d = 0; d < axis; ++d) v.outer *= s[d];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) v.inner *= s[d];
  } else {
    v.channels = 1;
    v.inner = total;
  }
  return v;
}

namespace {
template <typename Q>
inline void QuantizeLoop(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::Quantize<Q>(x[i], scale, zero_point);
}
template <typename Q>
inline void RequantizeLoop(const uint32_t* sum, uint32_t add, int64_t n, float multiplier, int32_t zero_point, Q* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::Requantize<Q>(static_cast<int32_t>(sum[i] + add), multiplier, zero_point);
}
}  // namespace

REMEX_CPU_CLONES void QuantizeSpan(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y) {
  QuantizeLoop(x, n, scale, zero_point, y);
}
REMEX_CPU_CLONES void QuantizeSpan(const float* x, int64_t n, float scale, int32_t zero_point, int8_t* y) {
  QuantizeLoop(x, n, scale, zero_point, y);
}
REMEX_CPU_CLONES void RequantizeSpan(const uint32_t* sum, uint32_t add, int64_t n, float multiplier,
                                     int32_t zero_point, uint8_t* y) {
  RequantizeLoop(sum, add, n, multiplier, zero_point, y);
}
REMEX_CPU_CLONES void RequantizeSpan(const uint32_t* sum, uint32_t add, int64_t n, float multiplier,
                                     int32_t zero_point, int8_t* y) {
  RequantizeLoop(sum, add, n, multiplier, zero_point, y);
}
#define REMEX_QLINEAR_ADD_SPAN(A, B, Y)                                                                  \
  REMEX_CPU_CLONES void QLinearAddSpan(const A* a, int32_t a_zero_point, float a_scale, const B* b,      \
                                       int32_t b_zero_point, float b_scale, bool relu, float y_scale,     \
                                       int32_t y_zero_point, int64_t n, Y* y) {                           \
    for (int64_t i = 0; i < n; ++i) {                                                                     \
      y[i] = quant::QLinearAdd<Y>(a[i], a_zero_point, a_scale, b[i], b_zero_point, b_scale, relu, y_scale, \
                                  y_zero_point);                                                          \
    }                                                                                                     \
  }
REMEX_QLINEAR_ADD_TYPES(REMEX_QLINEAR_ADD_SPAN)
#undef REMEX_QLINEAR_ADD_SPAN

// The loop as one vector of running ranges (OpenMP simd reductions): one running range
// is a chain of dependent compares, which no compiler reorders for floats by itself.
// Each lane, and the merge of the lanes, applies the one-value rule (a NaN compares
// false and is skipped), so the range is the one-value loop's.
REMEX_CPU_CLONES void RangeWithZero(const float* x, int64_t n, float* lo, float* hi) {
  float l = 0.0f, h = 0.0f;
#pragma omp simd reduction(min : l) reduction(max : h)
  for (int64_t i = 0; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
}

namespace {

// FusedQLinearAdd's `activation`: absent (false) or "Relu" (true).
StatusOr<bool> QLinearAddRelu(const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(std::string activation, attrs.String("activation", ""));
  if (!activation.empty() && activation != "Relu") {
    return OpError("FusedQLinearAdd", "activation must be Relu or absent, got '" + activation + "'");
  }
  return !activation.empty();
}

}  // namespace

StatusOr<QLinearAddView> QLinearAddViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "FusedQLinearAdd";
  if (in.size() != 8) return OpError(op, "expects 8 inputs, got " + std::to_string(in.size()));
  for (const ShapeFnArg& a : in) {
    if (!a.present) return OpError(op, "every input is required");
  }
  QLinearAddView v;
  v.a = in[0].dtype;
  v.b = in[3].dtype;
  v.y = in[7].dtype;
  if (!IsQuantType(v.a) || !IsQuantType(v.b) || !IsQuantType(v.y)) {
    return OpError(op, "A, B and y_zero_point must be uint8 or int8, got " + std::string(DTypeName(v.a)) + ", " +
                           std::string(DTypeName(v.b)) + " and " + std::string(DTypeName(v.y)));
  }
  if (in[0].shape != in[3].shape) {
    return OpError(op, "A " + ShapeToString(in[0].shape) + " and B " + ShapeToString(in[3].shape) +
                           " must have one shape");
  }
  const struct {
    size_t slot;
    DType dtype;
  } params[] = {{1, DType::kFloat32}, {2, v.a}, {4, DType::kFloat32}, {5, v.b}, {6, DType::kFloat32}};
  for (const auto& p : params) {
    REMEX_ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(op, in[p.slot].shape));
    if (in[p.slot].dtype != p.dtype || count != 1) {
      return OpError(op, "input " + std::to_string(p.slot) + " must be one " + std::string(DTypeName(p.dtype)) +
                             " value, got " + std::string(DTypeName(in[p.slot].dtype)) + " " +
                             ShapeToString(in[p.slot].shape));
    }
  }
  REMEX_ASSIGN_OR_RETURN(int64_t y_zp_count, CheckedNumElements(op, in[7].shape));
  if (y_zp_count != 1) return OpError(op, "y_zero_point must hold one value, got " + ShapeToString(in[7].shape));
  REMEX_ASSIGN_OR_RETURN(v.n, CheckedNumElements(op, in[0].shape));
  REMEX_ASSIGN_OR_RETURN(v.relu, QLinearAddRelu(attrs));
  return v;
}

int32_t ZeroPointAt(const TensorRef* zero_point, int64_t i) {
  if (zero_point == nullptr || !zero_point->present()) return 0;
  switch (zero_point->dtype) {
    case DType::kUint8: return static_cast<const uint8_t*>(zero_point->data)[i];
    case DType::kInt8: return static_cast<const int8_t*>(zero_point->data)[i];
    case DType::kInt32: return static_cast<const int32_t*>(zero_point->data)[i];
    default: return 0;
  }
}

namespace {

// ---------------------------------------------------------------------------
// QuantizeLinear and DequantizeLinear.

StatusOr<std::vector<TensorInfo>> InferQuantize(int since, const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(QuantizeView v, QuantizeViewOf("QuantizeLinear", since, attrs, in));
  return std::vector<TensorInfo>{{v.q, in[0].shape}};
}

StatusOr<std::vector<TensorInfo>> InferDequantize(int since, const Attributes& attrs,
                                                  std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(QuantizeView v, QuantizeViewOf("DequantizeLinear", since, attrs, in));
  (void)v;
  return std::vector<TensorInfo>{{DType::kFloat32, in[0].shape}};
}

OpDef QuantizeDef(bool quantize, int since) {
  OpDef def;
  def.name = quantize ? "QuantizeLinear" : "DequantizeLinear";
  def.since_version = since;
  def.end_version = since == 10 ? 12 : kOpenEndedVersion;
  def.min_inputs = 2;
  def.max_inputs = 3;
  if (quantize) {
    def.infer = [since](const Attributes& a, std::span<const ShapeFnArg> in) { return InferQuantize(since, a, in); };
    def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
      return std::vector<DType>{in.size() > 2 && in[2] != DType::kUndefined ? in[2] : DType::kUint8};
    };
  } else {
    def.infer = [since](const Attributes& a, std::span<const ShapeFnArg> in) {
      return InferDequantize(since, a, in);
    };
    def.output_dtypes = [](const Attributes&, std::span<const DType>) {
      return std::vector<DType>{DType::kFloat32};
    };
  }
  return def;
}

class QuantizeKernel final : public ValidatedKernel {
 public:
  QuantizeKernel(const OpDef& def, const Attributes& attrs) : ValidatedKernel(def, attrs), since_(def.since_version) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const bool quantize = op() == "QuantizeLinear";
    REMEX_ASSIGN_OR_RETURN(QuantizeView v, QuantizeViewOf(op(), since_, attrs(), ToShapeArgs(in)));
    const float* scale = DataAs<const float>(in[1]);
    const TensorRef* zp = in.size() > 2 ? &in[2] : nullptr;
    if (!quantize && v.x == DType::kInt32) {
      for (int64_t c = 0; c < (v.has_zero_point ? v.channels : 0); ++c) {
        if (ZeroPointAt(zp, c) != 0) return OpError(op(), "the zero point of int32 x must be 0");
      }
    }
    auto run = [&](auto x_tag, auto y_tag) {
      using X = typename decltype(x_tag)::type;
      using Y = typename decltype(y_tag)::type;
      const X* x = DataAs<const X>(in[0]);
      Y* y = DataAs<Y>(out[0]);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t c = 0; c < v.channels; ++c) {
          const float s = scale[c];
          const int32_t z = ZeroPointAt(zp, c);
          const int64_t base = (o * v.channels + c) * v.inner;
          // Long runs (a per-tensor scale) spread over the compute threads.
          ParallelFor(v.inner, 16384, [&](int64_t b, int64_t e, int) {
            if constexpr (std::is_same_v<X, float> && (std::is_same_v<Y, uint8_t> || std::is_same_v<Y, int8_t>)) {
              QuantizeSpan(x + base + b, e - b, s, z, y + base + b);
              return;
            }
            for (int64_t i = base + b; i < base + e; ++i) {
              if constexpr (std::is_same_v<Y, float>) {
                y[i] = quant::Dequantize(static_cast<int32_t>(x[i]), z, s);
              } else {
                y[i] = quant::Quantize<Y>(static_cast<float>(x[i]), s, z);
              }
            }
          });
        }
      }
      return OkStatus();
    };
    auto with_q = [&](auto other_tag, bool q_is_y) -> Status {
      switch (v.q) {
        case DType::kUint8:
          return q_is_y ? run(other_tag, TypeTag<uint8_t>{}) : run(TypeTag<uint8_t>{}, other_tag);
        case DType::kInt8:
          return q_is_y ? run(other_tag, TypeTag<int8_t>{}) : run(TypeTag<int8_t>{}, other_tag);
        default:
          return run(TypeTag<int32_t>{}, other_tag);  // Dequantize of int32 x.
      }
    };
    if (!quantize) return with_q(TypeTag<float>{}, false);
    if (v.x == DType::kFloat32) return with_q(TypeTag<float>{}, true);
    return with_q(TypeTag<int32_t>{}, true);
  }

 private:
  int since_;
};

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear.

StatusOr<std::vector<TensorInfo>> InferDynamicQuantize(const Attributes&, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "DynamicQuantizeLinear";
  if (in.size() != 1 || !in[0].present) return OpError(op, "expects x");
  if (in[0].dtype != DType::kFloat32) {
    return OpError(op, "x must be float32, got " + std::string(DTypeName(in[0].dtype)));
  }
  return std::vector<TensorInfo>{{DType::kUint8, in[0].shape}, {DType::kFloat32, {}}, {DType::kUint8, {}}};
}

OpDef DynamicQuantizeDef() {
  OpDef def;
  def.name = "DynamicQuantizeLinear";
  def.since_version = 11;
  def.max_outputs = 3;  // y_scale and y_zero_point may be left out (the CPU kernel).
  def.infer = InferDynamicQuantize;
  def.output_dtypes = [](const Attributes&, std::span<const DType>) {
    return std::vector<DType>{DType::kUint8, DType::kFloat32, DType::kUint8};
  };
  return def;
}

class DynamicQuantizeKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = NumElements(in[0].shape).value_or(0);
    const float* x = DataAs<const float>(in[0]);
    // NaN is skipped by the comparisons; an empty x gives the range [0, 0].
    // Both passes spread over the compute threads: each part's range, then the whole.
    constexpr int64_t kGrain = 16384;
    std::vector<float> los(static_cast<size_t>(ParallelParts(n, kGrain)), 0.0f), his(los.size(), 0.0f);
    ParallelFor(n, kGrain, [&](int64_t b, int64_t e, int part) {
      RangeWithZero(x + b, e - b, &los[static_cast<size_t>(part)], &his[static_cast<size_t>(part)]);
    });
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < los.size(); ++i) {
      lo = std::min(lo, los[i]);
      hi = std::max(hi, his[i]);
    }
    const quant::DynamicParams p = quant::DynamicQuantizeParams(lo, hi);
    uint8_t* y = DataAs<uint8_t>(out[0]);
    ParallelFor(n, kGrain, [&](int64_t b, int64_t e, int) { QuantizeSpan(x + b, e - b, p.scale, p.zero_point, y + b); });
    if (out.size() > 1) *DataAs<float>(out[1]) = p.scale;
    if (out.size() > 2) *DataAs<uint8_t>(out[2]) = p.zero_point;
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// FusedQLinearAdd.

OpDef QLinearAddDef() {
  OpDef def;
  def.name = "FusedQLinearAdd";
  def.since_version = 1;
  def.min_inputs = def.max_inputs = 8;
  def.infer = [](const Attributes& attrs, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(QLinearAddView v, QLinearAddViewOf(attrs, in));
    return std::vector<TensorInfo>{{v.y, in[0].shape}};
  };
  def.output_dtypes = [](const Attributes&, std::span<const DType> in) {
    return std::vector<DType>{in.size() > 7 ? in[7] : DType::kUndefined};
  };
  return def;
}

class QLinearAddKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<QLinearAddKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(QLinearAddRelu(attrs).status());  // checked once, at creation
    return std::make_unique<QLinearAddKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(QLinearAddView v, QLinearAddViewOf(attrs(), ToShapeArgs(in)));
    const float a_scale = *DataAs<const float>(in[1]), b_scale = *DataAs<const float>(in[4]);
    const float y_scale = *DataAs<const float>(in[6]);
    const int32_t a_zp = ZeroPointAt(&in[2], 0), b_zp = ZeroPointAt(&in[5], 0), y_zp = ZeroPointAt(&in[7], 0);
    auto run = [&](auto a_tag, auto b_tag, auto y_tag) {
      using A = typename decltype(a_tag)::type;
      using B = typename decltype(b_tag)::type;
      using Y = typename decltype(y_tag)::type;
      const A* a = DataAs<const A>(in[0]);
      const B* b = DataAs<const B>(in[3]);
      Y* y = DataAs<Y>(out[0]);
      ParallelFor(v.n, 16384, [&](int64_t begin, int64_t end, int) {
        QLinearAddSpan(a + begin, a_zp, a_scale, b + begin, b_zp, b_scale, v.relu, y_scale, y_zp, end - begin,
                       y + begin);
      });
    };
    auto with_y = [&](auto a_tag, auto b_tag) {
      if (v.y == DType::kUint8) {
        run(a_tag, b_tag, TypeTag<uint8_t>{});
      } else {
        run(a_tag, b_tag, TypeTag<int8_t>{});
      }
    };
    auto with_b = [&](auto a_tag) {
      if (v.b == DType::kUint8) {
        with_y(a_tag, TypeTag<uint8_t>{});
      } else {
        with_y(a_tag, TypeTag<int8_t>{});
      }
    };
    if (v.a == DType::kUint8) {
      with_b(TypeTag<uint8_t>{});
    } else {
      with_b(TypeTag<int8_t>{});
    }
    return OkStatus();
  }
};

}  // namespace

Status AddQuantizeOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(QLinearAddDef()));
  for (bool quantize : {true, false}) {
    for (int since : {10, 13}) REMEX_RETURN_IF_ERROR(registry.AddOp(QuantizeDef(quantize, since)));
  }
  return registry.AddOp(DynamicQuantizeDef());
}

Status AddQuantizeCpuKernels(KernelRegistry& registry) {
  for (bool quantize : {true, false}) {
    for (int since : {10, 13}) {
      REMEX_RETURN_IF_ERROR(
          AddCpuKernel<QuantizeKernel>(registry, quantize ? "QuantizeLinear" : "DequantizeLinear", since));
    }
  }
  REMEX_RETURN_IF_ERROR(AddCpuKernel<QLinearAddKernel>(registry, "FusedQLinearAdd"));
  return AddCpuKernel<DynamicQuantizeKernel>(registry, "DynamicQuantizeLinear");
}

}  // namespace remex::kernels::internal
