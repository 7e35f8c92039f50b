// Det: shape function and CPU kernel (ONNX Det-11;
// https://onnx.ai/onnx/operators/onnx__Det.html).
//
// Det(X) -> Y: X [*, M, M] (rank >= 2, square in its last two dims) of float16, float32
// or float64; Y [*] of X's dtype, the determinant of each matrix. Computed in double by
// LU decomposition with partial pivoting (kernels/ops/math/determinant_ops.h, shared with the CUDA
// kernel) and rounded to the dtype; an empty matrix (M = 0) has determinant 1.
// INVALID_ARGUMENT "Det: ..." for another dtype, a rank below 2 or a matrix that is
// not square.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops/math/determinant_ops.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

StatusOr<DetView> DetViewOf(std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "Det";
  if (in.size() != 1 || !in[0].present) return OpError(op, "expects X");
  if (!IsFloatType(in[0].dtype))
    return OpError(op, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  const Shape& s = in[0].shape;
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) {
    return OpError(op, "X must be [*, M, M], got " + ShapeToString(s));
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  DetView v;
  v.m = s.back();
  v.shape = Shape(s.begin(), s.end() - 2);
  REMEX_ASSIGN_OR_RETURN(v.batch, CheckedNumElements(op, v.shape));
  return v;
}

namespace {

OpDef DetDef() {
  OpDef def;
  def.name = "Det";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 1;
  def.input_deps = {ShapeDep::kShape};
  def.infer = [](const Attributes&, std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(DetView v, DetViewOf(in));
    return std::vector<TensorInfo>{{in[0].dtype, v.shape}};
  };
  return def;
}

class DetKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(DetView v, DetViewOf(ToShapeArgs(in)));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      std::vector<double> a(static_cast<size_t>(v.m * v.m));
      for (int64_t b = 0; b < v.batch; ++b) {
        for (int64_t i = 0; i < v.m * v.m; ++i) a[i] = static_cast<double>(Load(x[b * v.m * v.m + i]));
        const double d = determinant::LuDeterminant(a.data(), v.m);
        if constexpr (std::is_same_v<T, Half>) {
          y[b] = DoubleToHalf(d);
        } else {
          y[b] = static_cast<T>(d);
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddDetOpDefs(KernelRegistry& registry) { return registry.AddOp(DetDef()); }

Status AddDetCpuKernels(KernelRegistry& registry) { return AddCpuKernel<DetKernel>(registry, "Det"); }

}  // namespace remex::kernels::internal
