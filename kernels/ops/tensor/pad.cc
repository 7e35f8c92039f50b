// Pad: shape function and CPU kernel.
// ONNX semantics, opsets 7-17; every dtype Remex holds unless noted. Index-like inputs
// (pads, shape) are int64; int32 is accepted.
//
// Pad(data, pads, [constant_value]) -> data.shape[i] + pads[i] + pads[i + rank].
//   mode constant (default), reflect or edge. Before opset 11 pads and the float
//   constant `value` are attributes; from 11 pads is a kData input and the constant an
//   optional scalar input of data's dtype. Negative pads remove elements. reflect
//   mirrors without repeating the border element (period 2 * (n - 1)), edge repeats
//   the border element; both need a non-empty dim to pad from.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

StatusOr<PadMode> PadModeOf(const Attributes& attrs) {
  StatusOr<std::string> mode = attrs.String("mode", "constant");
  if (!mode.ok()) return OpError("Pad", mode.status().message());
  if (*mode == "constant") return PadMode::kConstant;
  if (*mode == "reflect") return PadMode::kReflect;
  if (*mode == "edge") return PadMode::kEdge;
  return OpError("Pad", "unknown mode '" + *mode + "' (constant, reflect or edge)");
}

namespace {

StatusOr<std::vector<int64_t>> PadAmounts(const Attributes& attrs,
                                          std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Pad";
  std::vector<int64_t> pads;
  if (attrs.Has("pads")) {
    StatusOr<std::vector<int64_t>> v = attrs.Ints("pads");
    if (!v.ok()) return OpError(op, v.status().message());
    pads = *v;
  } else if (in.size() > 1 && in[1].present) {
    REMEX_ASSIGN_OR_RETURN(pads, ReadInts(op, "pads", in[1]));
  } else {
    return OpError(op, "pads are required (attribute before opset 11, input 1 from 11)");
  }
  const size_t rank = in[0].shape.size();
  if (pads.size() != 2 * rank) {
    return OpError(op, "pads has " + Str(static_cast<int64_t>(pads.size())) +
                           " values, expected 2 * rank = " + Str(static_cast<int64_t>(2 * rank)));
  }
  return pads;
}

StatusOr<std::vector<TensorInfo>> InferPad(const Attributes& attrs,
                                           std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Pad";
  REMEX_ASSIGN_OR_RETURN(PadMode mode, PadModeOf(attrs));
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PadAmounts(attrs, in));
  const Shape& s = in[0].shape;
  const size_t rank = s.size();
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = pads[d], e = pads[d + rank];
    if (__builtin_add_overflow(s[d], b, &out[d]) || __builtin_add_overflow(out[d], e, &out[d])) {
      return OpError(op, "output extent overflows");
    }
    if (out[d] < 0) {
      return OpError(op, "pads " + Str(b) + ", " + Str(e) + " remove more than the extent " +
                             Str(s[d]) + " of dim " + Str(static_cast<int64_t>(d)));
    }
    if (mode != PadMode::kConstant && s[d] == 0 && out[d] > 0) {
      return OpError(op, std::string(mode == PadMode::kEdge ? "edge" : "reflect") +
                             " mode cannot pad the empty dim " + Str(static_cast<int64_t>(d)));
    }
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, in[0].dtype, out));
  if (in.size() > 2 && in[2].present) {
    if (in[2].dtype != in[0].dtype) {
      return OpError(op, "constant_value has dtype " + std::string(DTypeName(in[2].dtype)) +
                             ", data has " + std::string(DTypeName(in[0].dtype)));
    }
    std::optional<int64_t> n = NumElements(in[2].shape);
    if (!n || *n != 1) return OpError(op, "constant_value must hold one value");
  }
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef PadDef() {
  OpDef def;
  def.name = "Pad";
  def.since_version = 2;
  def.min_inputs = 1;
  def.max_inputs = 3;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kShape};
  def.infer = InferPad;
  return def;
}

// A double converted to T: integers saturate (NaN becomes 0), bool is v != 0.
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_same_v<T, Half>) {
    return DoubleToHalf(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  }
}

}  // namespace

StatusOr<uint64_t> PadValueBits(DType dtype, double v) {
  uint64_t bits = 0;
  REMEX_RETURN_IF_ERROR(DispatchAllTypes("Pad", dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T c = FromDouble<T>(v);
    std::memcpy(&bits, &c, sizeof(T));
    return OkStatus();
  }));
  return bits;
}

namespace {

// Input index read for output index o of one dim (-1: the constant).
int64_t PadSource(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

class PadKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<PadKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_RETURN_IF_ERROR(PadModeOf(attrs).status());
    return std::make_unique<PadKernel>(def, attrs);
  }
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(PadMode mode, PadModeOf(attrs()));
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PadAmounts(attrs(), args));
    StatusOr<float> value_attr = attrs().Float("value", 0.f);
    if (!value_attr.ok()) return OpError(op(), value_attr.status().message());
    const Shape& s = in[0].shape;
    const Shape& o = out[0].shape;
    const size_t rank = s.size();
    const int64_t total = *NumElements(o);
    if (total == 0) return OkStatus();
    // Per dim, the input index of every output index (-1: the constant).
    std::vector<std::vector<int64_t>> src(rank);
    for (size_t d = 0; d < rank; ++d) {
      src[d].resize(static_cast<size_t>(o[d]));
      for (int64_t i = 0; i < o[d]; ++i) src[d][i] = PadSource(i, pads[d], s[d], mode);
    }
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    return DispatchAllTypes(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T c = FromDouble<T>(*value_attr);
      if (in.size() > 2 && in[2].present()) c = DataAs<const T>(in[2])[0];
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      if (rank == 0) {
        y[0] = x[0];
        return OkStatus();
      }
      const int64_t inner = o[rank - 1];
      const std::vector<int64_t>& last = src[rank - 1];
      // The output range of the last dim read contiguously from the input.
      const int64_t lo = std::clamp<int64_t>(pads[rank - 1], 0, inner);
      const int64_t hi = std::clamp<int64_t>(pads[rank - 1] + s[rank - 1], lo, inner);
      std::vector<int64_t> idx(rank - 1, 0);
      for (int64_t base = 0; base < total; base += inner) {
        T* row = y + base;
        int64_t off = 0;
        bool constant_row = false;
        for (size_t d = 0; d + 1 < rank; ++d) {
          const int64_t i = src[d][idx[d]];
          if (i < 0) {
            constant_row = true;
            break;
          }
          off += i * in_stride[d];
        }
        if (constant_row) {
          std::fill(row, row + inner, c);
        } else {
          const T* xr = x + off;
          for (int64_t i = 0; i < lo; ++i) row[i] = last[i] < 0 ? c : xr[last[i]];
          if (hi > lo) {
            std::memcpy(static_cast<void*>(row + lo), xr + (lo - pads[rank - 1]),
                        static_cast<size_t>(hi - lo) * sizeof(T));
          }
          for (int64_t i = hi; i < inner; ++i) row[i] = last[i] < 0 ? c : xr[last[i]];
        }
        for (size_t d = rank - 1; d-- > 0;) {
          if (++idx[d] < o[d]) break;
          idx[d] = 0;
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddPadOpDefs(KernelRegistry& registry) {
  return registry.AddOp(PadDef());
}

Status AddPadCpuKernels(KernelRegistry& registry) { return AddCpuKernel<PadKernel>(registry, "Pad"); }

}  // namespace remex::kernels::internal
