// CumSum: shape function and CPU kernel (ONNX CumSum-11/14;
// https://onnx.ai/onnx/operators/onnx__CumSum.html).
//
// CumSum(x, axis) -> x's shape and dtype: running sums along `axis`, a one-element int32
// or int64 input read on the host (ShapeDep::kData), in [-rank, rank). Attributes:
// exclusive (0 or 1; 1 leaves out the element itself, so the first sum is 0) and reverse
// (0 or 1; 1 sums from the end). float16 (summed in float32), float32, float64 (in
// their own type), int32, int64, uint32, uint64 (wrapping). The sums run in order along
// the axis, one line at a time: the CUDA kernel adds in the same order.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

StatusOr<CumSumView> CumSumViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "CumSum";
  if (in.size() != 2 || !in[0].present || !in[1].present) return OpError(op, "expects x and axis");
  const DType dt = in[0].dtype;
  if (!(IsFloatType(dt) || dt == DType::kInt32 || dt == DType::kInt64 || dt == DType::kUint32 ||
        dt == DType::kUint64)) {
    return OpError(op, "unsupported dtype " + std::string(DTypeName(dt)));
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ReadIndexTensor(op, "axis", in[1].dtype, in[1].shape, in[1].data));
  if (axis.size() != 1) return OpError(op, "axis must hold one value, got " + std::to_string(axis.size()));
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) return OpError(op, "x must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(op, axis[0], rank));
  CumSumView v;
  for (int64_t d = 0; d < a; ++d) v.outer *= s[d];
  v.n = s[a];
  for (int64_t d = a + 1; d < rank; ++d) v.inner *= s[d];
  for (const char* name : {"exclusive", "reverse"}) {
    StatusOr<int64_t> flag = attrs.Int(name, 0);
    if (!flag.ok()) return OpError(op, flag.status().message());
    if (*flag != 0 && *flag != 1) return OpError(op, std::string(name) + " must be 0 or 1, got " + std::to_string(*flag));
    (std::string_view(name) == "exclusive" ? v.exclusive : v.reverse) = *flag == 1;
  }
  return v;
}

namespace {

// The type the sums run in: float32 for float16, the type itself for float32 and
// float64, the unsigned type for integers (so that they wrap).
template <typename T, bool = std::is_integral_v<T>>
struct SumType {
  using type = ComputeType<T>;
};
template <typename T>
struct SumType<T, true> {
  using type = std::make_unsigned_t<T>;
};

StatusOr<std::vector<TensorInfo>> InferCumSum(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_RETURN_IF_ERROR(CumSumViewOf(attrs, in).status());
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

OpDef CumSumDef() {
  OpDef def;
  def.name = "CumSum";
  def.since_version = 11;
  def.min_inputs = def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferCumSum;
  return def;
}

class CumSumKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(CumSumView v, CumSumViewOf(attrs(), ToShapeArgs(in)));
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = typename SumType<T>::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          C sum = C(0);
          for (int64_t k = 0; k < v.n; ++k) {
            const int64_t j = v.reverse ? v.n - 1 - k : k;
            const int64_t at = (o * v.n + j) * v.inner + i;
            C value;
            if constexpr (std::is_integral_v<T>) {
              value = static_cast<C>(x[at]);
            } else {
              value = Load(x[at]);
            }
            if (!v.exclusive) sum = static_cast<C>(sum + value);
            if constexpr (std::is_integral_v<T>) {
              y[at] = static_cast<T>(sum);
            } else {
              y[at] = Store<T>(sum);
            }
            if (v.exclusive) sum = static_cast<C>(sum + value);
          }
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddCumSumOpDefs(KernelRegistry& registry) { return registry.AddOp(CumSumDef()); }

Status AddCumSumCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<CumSumKernel>(registry, "CumSum");
}

}  // namespace remex::kernels::internal
