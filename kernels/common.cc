// Shared helpers of the kernel library: shapes, index tensors, kernel validation.

#include <algorithm>
#include <exception>
#include <new>
#include <string>

#include "kernels/internal.h"

namespace remex::kernels::internal {

Status OpError(std::string_view op, std::string_view message) {
  std::string m(op);
  m += ": ";
  m += message;
  return InvalidArgument(std::move(m));
}

StatusOr<Shape> BroadcastShapes(std::string_view op, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return OpError(op, "shapes " + ShapeToString(a) + " and " + ShapeToString(b) +
                             " are not broadcast-compatible");
    }
  }
  return out;
}

StatusOr<int64_t> CheckedNumElements(std::string_view op, const Shape& shape) {
  std::optional<int64_t> n = NumElements(shape);
  if (!n) return OpError(op, "invalid shape " + ShapeToString(shape));
  return *n;
}

StatusOr<int64_t> NormalizeAxis(std::string_view op, int64_t axis, int64_t rank,
                                std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return OpError(op, std::string(what) + " " + std::to_string(axis) +
                           " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<std::vector<int64_t>> ReadIndexTensor(std::string_view op, std::string_view what,
                                               DType dtype, const Shape& shape, const void* data) {
  if (dtype != DType::kInt32 && dtype != DType::kInt64) {
    return OpError(
        op, std::string(what) + " must be int32 or int64, got " + std::string(DTypeName(dtype)));
  }
  if (shape.size() > 1) {
    return OpError(op, std::string(what) + " must be 1-D, got shape " + ShapeToString(shape));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, shape));
  std::vector<int64_t> values(static_cast<size_t>(n));
  if (n > 0 && data == nullptr) return OpError(op, std::string(what) + " has no data");
  if (dtype == DType::kInt32) {
    const int32_t* p = static_cast<const int32_t*>(data);
    for (int64_t i = 0; i < n; ++i) values[i] = p[i];
  } else {
    const int64_t* p = static_cast<const int64_t*>(data);
    for (int64_t i = 0; i < n; ++i) values[i] = p[i];
  }
  return values;
}

StatusOr<WindowAttrs> ParseWindowAttrs(std::string_view op, const Attributes& attrs,
                                       bool with_ceil_mode) {
  WindowAttrs w;
  auto wrap = [op](const Status& s) { return OpError(op, s.message()); };
  StatusOr<std::string> auto_pad = attrs.String("auto_pad", "NOTSET");
  if (!auto_pad.ok()) return wrap(auto_pad.status());
  w.auto_pad = *auto_pad;
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID") {
    return OpError(op, "unknown auto_pad '" + w.auto_pad + "'");
  }
  for (auto [name, dest] :
       {std::pair<const char*, std::vector<int64_t>*>{"kernel_shape", &w.kernel_shape},
        {"strides", &w.strides},
        {"dilations", &w.dilations},
        {"pads", &w.pads}}) {
    StatusOr<std::vector<int64_t>> v = attrs.Ints(name, {});
    if (!v.ok()) return wrap(v.status());
    *dest = *v;
  }
  for (int64_t k : w.kernel_shape) {
    if (k < 1) return OpError(op, "kernel_shape values must be positive");
  }
  for (int64_t s : w.strides) {
    if (s < 1) return OpError(op, "strides must be positive");
  }
  for (int64_t d : w.dilations) {
    if (d < 1) return OpError(op, "dilations must be positive");
  }
  for (int64_t p : w.pads) {
    if (p < 0) return OpError(op, "pads must be non-negative");
  }
  if (w.pads.size() % 2 != 0) return OpError(op, "pads must have an even length");
  if (with_ceil_mode) {
    StatusOr<int64_t> c = attrs.Int("ceil_mode", 0);
    if (!c.ok()) return wrap(c.status());
    if (*c != 0 && *c != 1) return OpError(op, "ceil_mode must be 0 or 1");
    w.ceil_mode = *c == 1;
  }
  return w;
}

StatusOr<WindowGeometry> ComputeWindowGeometry(std::string_view op, const WindowAttrs& attrs,
                                               std::span<const int64_t> input,
                                               std::span<const int64_t> kernel) {
  const size_t n = input.size();
  if (kernel.size() != n) {
    return OpError(op, "kernel has " + std::to_string(kernel.size()) + " spatial dims, input has " +
                           std::to_string(n));
  }
  auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* name) -> Status {
    if (!v.empty() && v.size() != want) {
      return OpError(op, std::string(name) + " has " + std::to_string(v.size()) +
                             " values, expected " + std::to_string(want));
    }
    return OkStatus();
  };
  REMEX_RETURN_IF_ERROR(check_len(attrs.strides, n, "strides"));
  REMEX_RETURN_IF_ERROR(check_len(attrs.dilations, n, "dilations"));
  REMEX_RETURN_IF_ERROR(check_len(attrs.pads, 2 * n, "pads"));
  WindowGeometry g;
  g.kernel.assign(kernel.begin(), kernel.end());
  g.strides = attrs.strides.empty() ? std::vector<int64_t>(n, 1) : attrs.strides;
  g.dilations = attrs.dilations.empty() ? std::vector<int64_t>(n, 1) : attrs.dilations;
  g.pad_begin.assign(n, 0);
  g.pad_end.assign(n, 0);
  g.output.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = input[i];
    const int64_t k = kernel[i];
    const int64_t s = g.strides[i];
    const int64_t d = g.dilations[i];
    if (k < 1) return OpError(op, "kernel extents must be positive");
    int64_t k_eff;  // (k - 1) * d + 1
    if (__builtin_mul_overflow(k - 1, d, &k_eff) || __builtin_add_overflow(k_eff, 1, &k_eff)) {
      return OpError(op, "kernel extent overflows");
    }
    int64_t out;
    if (attrs.auto_pad == "SAME_UPPER" || attrs.auto_pad == "SAME_LOWER") {
      out = in / s + (in % s != 0 ? 1 : 0);
      int64_t total;
      if (__builtin_mul_overflow(out > 0 ? out - 1 : 0, s, &total) ||
          __builtin_add_overflow(total, k_eff, &total)) {
        return OpError(op, "padding overflows");
      }
      total = std::max<int64_t>(0, total - in);
      if (attrs.auto_pad == "SAME_UPPER") {
        g.pad_begin[i] = total / 2;
        g.pad_end[i] = total - total / 2;
      } else {
        g.pad_end[i] = total / 2;
        g.pad_begin[i] = total - total / 2;
      }
    } else {
      if (attrs.auto_pad == "NOTSET" && !attrs.pads.empty()) {
        g.pad_begin[i] = attrs.pads[i];
        g.pad_end[i] = attrs.pads[i + n];
      }
      int64_t span;
      if (__builtin_add_overflow(in, g.pad_begin[i], &span) ||
          __builtin_add_overflow(span, g.pad_end[i], &span)) {
        return OpError(op, "padded input extent overflows");
      }
      if (span < k_eff) {
        return OpError(op, "kernel extent " + std::to_string(k_eff) +
                               " exceeds padded input extent " + std::to_string(span) +
                               " in spatial dim " + std::to_string(i));
      }
      const int64_t num = span - k_eff;
      if (attrs.ceil_mode) {
        out = num / s + (num % s != 0 ? 1 : 0) + 1;
        // The last window must start inside the input or the begin padding.
        if ((out - 1) * s >= in + g.pad_begin[i]) --out;
      } else {
        out = num / s + 1;
      }
    }
    if (out < 1 && in > 0) return OpError(op, "output extent would be empty");
    g.output[i] = out;
  }
  return g;
}

bool IsFloatType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16;
}

bool IsNumericType(DType dtype) { return dtype != DType::kBool && DTypeSize(dtype) != 0; }

std::string DTypeList(std::span<const DType> dtypes) {
  std::string s;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i) s += ", ";
    s += DTypeName(dtypes[i]);
  }
  return s;
}

std::vector<int64_t> RowMajorStrides(std::span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

std::vector<ShapeFnArg> ToShapeArgs(std::span<const TensorRef> inputs) {
  std::vector<ShapeFnArg> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    args[i].present = inputs[i].present();
    args[i].dtype = inputs[i].dtype;
    args[i].shape = inputs[i].shape;
    args[i].data = inputs[i].data;
  }
  return args;
}

Status CheckAgainstShapeFn(const OpDef& def, const Attributes& attrs,
                           std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  const std::string& op = def.name;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorRef& t = inputs[i];
    if (!t.present()) continue;
    if (DTypeSize(t.dtype) == 0) {
      return OpError(op, "input " + std::to_string(i) + " has an invalid dtype");
    }
    std::optional<int64_t> n = NumElements(t.shape);
    if (!n) return OpError(op, "input " + std::to_string(i) + " has an invalid shape");
    if (*n > 0 && t.data == nullptr && !def.reads_shapes_only) {
      return OpError(op, "input " + std::to_string(i) + " has no data");
    }
  }
  std::vector<ShapeFnArg> args = ToShapeArgs(inputs);
  REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, InferShapes(def, attrs, args));
  // A node may use a prefix of the outputs the shape function describes; outputs
  // the op defines but Remex does not compute (training outputs) are UNIMPLEMENTED.
  const int64_t n_out = static_cast<int64_t>(outputs.size());
  if (n_out < def.min_outputs || (def.max_outputs >= 0 && n_out > def.max_outputs)) {
    return OpError(op, "got " + std::to_string(n_out) + " outputs, expects " +
                           std::to_string(def.min_outputs) + " to " +
                           std::to_string(def.max_outputs));
  }
  if (outputs.size() > infos.size()) {
    return Unimplemented(op + ": only the first " + std::to_string(infos.size()) +
                         " output(s) are supported, got " + std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorRef& t = outputs[i];
    if (t.dtype != infos[i].dtype || t.shape != infos[i].shape) {
      return OpError(op, "output " + std::to_string(i) + " is " + std::string(DTypeName(t.dtype)) +
                             ShapeToString(t.shape) + ", expected " +
                             std::string(DTypeName(infos[i].dtype)) +
                             ShapeToString(infos[i].shape));
    }
    std::optional<int64_t> n = NumElements(t.shape);
    if (n && *n > 0 && t.data == nullptr) {
      return OpError(op, "output " + std::to_string(i) + " has no data");
    }
  }
  return OkStatus();
}

bool ValidatedKernel::SameAsLastChecked(std::span<const TensorRef> inputs,
                                        std::span<const TensorRef> outputs) {
  auto same = [](const TensorRef& a, const TensorRef& b) {
    return a.dtype == b.dtype && (a.data == nullptr) == (b.data == nullptr) && a.shape == b.shape;
  };
  if (has_last_checked_ && last_checked_.size() == inputs.size() + outputs.size() &&
      std::equal(inputs.begin(), inputs.end(), last_checked_.begin(), same) &&
      std::equal(outputs.begin(), outputs.end(), last_checked_.begin() + inputs.size(), same)) {
    return true;
  }
  return false;
}

Status ValidatedKernel::Compute(std::span<const TensorRef> inputs,
                                std::span<const TensorRef> outputs) {
  // Static shapes call a kernel with the same shapes every time: the shape function
  // runs again only when they change.
  if (!shape_only_ || !SameAsLastChecked(inputs, outputs)) {
    has_last_checked_ = false;
    REMEX_RETURN_IF_ERROR(CheckAgainstShapeFn(def_, attrs_, inputs, outputs));
    if (shape_only_) {
      last_checked_.assign(inputs.begin(), inputs.end());
      last_checked_.insert(last_checked_.end(), outputs.begin(), outputs.end());
      has_last_checked_ = true;
    }
  }
  // No exception leaves a kernel (scratch allocations may throw std::bad_alloc).
  try {
    return Run(inputs, outputs);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(def_.name + ": out of memory");
  } catch (const std::exception& e) {
    return Internal(def_.name + ": " + e.what());
  }
}

}  // namespace remex::kernels::internal
