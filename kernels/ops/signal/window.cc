// HannWindow, HammingWindow and BlackmanWindow: shape functions and CPU kernels (ONNX
// HannWindow-17, HammingWindow-17, BlackmanWindow-17;
// https://onnx.ai/onnx/operators/onnx__HannWindow.html and its siblings).
//
// <Op>Window(size) -> 1-D [size] of dtype output_datatype: the window's values
// (kernels/ops/signal/window_ops.h, the formulas shared with the CUDA kernels). size: a one-element
// int32 or int64 input read on the host (ShapeDep::kData), >= 0. Attributes:
// output_datatype (an ONNX dtype, default 1 = float32; every numeric dtype Remex holds;
// float types rounded to nearest from double, integers truncated toward zero as ONNX's
// reference casts, NaN to 0) and periodic (0 or 1, default 1: N = size, else size - 1).
// INVALID_ARGUMENT "<op>: ..." for a negative size, a size of other than one element
// or dtype, another output_datatype or periodic.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/transform_common.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::internal {

StatusOr<WindowView> WindowViewOf(std::string_view op, const Attributes& attrs,
                                  std::span<const ShapeFnArg> in) {
  WindowView v;
  if (op == "HannWindow") {
    v.kind = window::WindowKind::kHann;
  } else if (op == "HammingWindow") {
    v.kind = window::WindowKind::kHamming;
  } else if (op == "BlackmanWindow") {
    v.kind = window::WindowKind::kBlackman;
  } else {
    return OpError(op, "is not a window op");
  }
  StatusOr<int64_t> t = attrs.Int("output_datatype", 1);
  if (!t.ok()) return OpError(op, t.status().message());
  std::optional<DType> dt;
  if (*t > 0 && *t <= std::numeric_limits<int32_t>::max()) dt = DTypeFromOnnx(static_cast<int32_t>(*t));
  if (!dt || !IsNumericType(*dt)) {
    return OpError(op, "output_datatype " + std::to_string(*t) + " is not a numeric data type Remex holds");
  }
  v.dtype = *dt;
  REMEX_ASSIGN_OR_RETURN(v.periodic, BoolAttr(op, attrs, "periodic", 1));
  if (in.size() != 1 || !in[0].present) return OpError(op, "expects size");
  if (in[0].dtype != DType::kInt32 && in[0].dtype != DType::kInt64) {
    return OpError(op, "size must be int32 or int64, got " + std::string(DTypeName(in[0].dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                         ReadIndexTensor(op, "size", in[0].dtype, in[0].shape, in[0].data));
  if (size.size() != 1) return OpError(op, "size must hold one value, got " + std::to_string(size.size()));
  if (size[0] < 0) return OpError(op, "size must be >= 0, got " + std::to_string(size[0]));
  v.size = size[0];
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, Shape{v.size}));
  return v;
}

namespace {

constexpr const char* kWindowOps[] = {"HannWindow", "HammingWindow", "BlackmanWindow"};

OpDef WindowDef(const char* name) {
  OpDef def;
  def.name = name;
  def.since_version = 17;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kData};
  def.infer = [name = std::string(name)](
                  const Attributes& attrs,
                  std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(WindowView v, WindowViewOf(name, attrs, in));
    return std::vector<TensorInfo>{{v.dtype, Shape{v.size}}};
  };
  def.output_dtypes = [](const Attributes& attrs, std::span<const DType>) {
    StatusOr<int64_t> t = attrs.Int("output_datatype", 1);
    std::optional<DType> dt;
    if (t.ok() && *t > 0 && *t <= std::numeric_limits<int32_t>::max())
      dt = DTypeFromOnnx(static_cast<int32_t>(*t));
    return std::vector<DType>{dt.value_or(DType::kUndefined)};
  };
  return def;
}

class WindowKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(WindowView v, WindowViewOf(op(), attrs(), ToShapeArgs(in)));
    return DispatchNumeric(op(), v.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* y = DataAs<T>(out[0]);
      for (int64_t n = 0; n < v.size; ++n) {
        const double w = window::WindowValue(v.kind, v.periodic, v.size, n);
        if constexpr (std::is_integral_v<T>) {
          y[n] = window::WindowToInt<T>(w);
        } else if constexpr (std::is_same_v<T, Half>) {
          y[n] = DoubleToHalf(w);
        } else {
          y[n] = static_cast<T>(w);
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddWindowOpDefs(KernelRegistry& registry) {
  for (const char* name : kWindowOps) REMEX_RETURN_IF_ERROR(registry.AddOp(WindowDef(name)));
  return OkStatus();
}

Status AddWindowCpuKernels(KernelRegistry& registry) {
  for (const char* name : kWindowOps) {
    REMEX_RETURN_IF_ERROR(AddCpuKernel<WindowKernel>(registry, name));
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
