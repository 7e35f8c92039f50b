// MatMul with numpy semantics: 1-D operands promoted and squeezed, batch dims
// broadcast. float32 runs on oneDNN's sgemm, other types on a plain loop.

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "kernels/internal.h"

namespace remex::kernels::internal {
namespace {

constexpr std::string_view kMatMul = "MatMul";

struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  Shape batch;    // Broadcast batch dims.
  Shape a_batch;  // A's batch dims, left-padded with 1 to batch's rank.
  Shape b_batch;
  Shape output;
};

StatusOr<MatMulShape> ComputeMatMulShape(const ShapeFnArg& a, const ShapeFnArg& b) {
  if (a.dtype != b.dtype) {
    return OpError(kMatMul, "input dtypes differ: " + std::string(DTypeName(a.dtype)) + " and " +
                                std::string(DTypeName(b.dtype)));
  }
  if (!IsNumericType(a.dtype)) {
    return OpError(kMatMul, "unsupported dtype " + std::string(DTypeName(a.dtype)));
  }
  if (a.shape.empty() || b.shape.empty()) {
    return OpError(kMatMul, "inputs must have rank >= 1, got " + ShapeToString(a.shape) + " and " +
                                ShapeToString(b.shape));
  }
  Shape as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1;
  const bool b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  MatMulShape s;
  s.m = as[as.size() - 2];
  s.k = as[as.size() - 1];
  s.n = bs[bs.size() - 1];
  if (bs[bs.size() - 2] != s.k) {
    return OpError(kMatMul,
                   "inner dims differ: " + ShapeToString(a.shape) + " x " + ShapeToString(b.shape));
  }
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  REMEX_ASSIGN_OR_RETURN(s.batch, BroadcastShapes(kMatMul, ab, bb));
  s.a_batch.assign(s.batch.size() - ab.size(), 1);
  s.a_batch.insert(s.a_batch.end(), ab.begin(), ab.end());
  s.b_batch.assign(s.batch.size() - bb.size(), 1);
  s.b_batch.insert(s.b_batch.end(), bb.begin(), bb.end());
  s.output = s.batch;
  if (!a_vec) s.output.push_back(s.m);
  if (!b_vec) s.output.push_back(s.n);
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kMatMul, s.output).status());
  return s;
}

StatusOr<std::vector<TensorInfo>> InferMatMul(const Attributes&, std::span<const ShapeFnArg> in) {
  if (in.size() != 2) return OpError(kMatMul, "expects 2 inputs");
  REMEX_ASSIGN_OR_RETURN(MatMulShape s, ComputeMatMulShape(in[0], in[1]));
  return std::vector<TensorInfo>{{in[0].dtype, s.output}};
}

OpDef MatMulDef() {
  OpDef def;
  def.name = std::string(kMatMul);
  def.min_inputs = def.max_inputs = 2;
  def.infer = InferMatMul;
  return def;
}

// C[m x n] = A[m x k] * B[k x n], row-major, accumulating in ComputeType (integers
// wrap).
template <typename T>
void GemmLoop(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n) {
  using C = ComputeType<T>;
  using Acc = std::conditional_t<std::is_integral_v<C>, uint64_t, C>;
  std::vector<Acc> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(Load(a[i * k + p]));
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<Acc>(Load(brow[j]));
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = Store<T>(static_cast<C>(row[j]));
  }
}

class MatMulKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(MatMulShape s, ComputeMatMulShape(args[0], args[1]));
    const int64_t batches = *NumElements(s.batch);
    const int64_t mn = s.m * s.n;
    if (batches == 0 || mn == 0) return OkStatus();
    // Batch offsets (in matrices) of A and B for each output batch.
    const size_t r = s.batch.size();
    std::vector<int64_t> a_stride(r), b_stride(r);
    int64_t sa = 1, sb = 1;
    for (size_t d = r; d-- > 0;) {
      a_stride[d] = s.a_batch[d] == 1 ? 0 : sa;
      b_stride[d] = s.b_batch[d] == 1 ? 0 : sb;
      sa *= s.a_batch[d];
      sb *= s.b_batch[d];
    }
    return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* a = DataAs<const T>(in[0]);
      const T* b = DataAs<const T>(in[1]);
      T* c = DataAs<T>(out[0]);
      std::vector<int64_t> idx(r, 0);
      int64_t oa = 0, ob = 0;
      for (int64_t bi = 0; bi < batches; ++bi) {
        const T* pa = a + oa * s.m * s.k;
        const T* pb = b + ob * s.k * s.n;
        T* pc = c + bi * mn;
        if constexpr (std::is_same_v<T, float>) {
          if (s.k == 0) {
            std::memset(pc, 0, sizeof(float) * mn);
          } else {
            dnnl::status st =
                dnnl::sgemm('N', 'N', s.m, s.n, s.k, 1.0f, pa, s.k, pb, s.n, 0.0f, pc, s.n);
            if (st != dnnl::status::success) {
              return Internal("MatMul: oneDNN sgemm failed with status " +
                              std::to_string(static_cast<int>(st)));
            }
          }
        } else {
          GemmLoop<T>(pa, pb, pc, s.m, s.k, s.n);
        }
        for (size_t d = r; d-- > 0;) {
          oa += a_stride[d];
          ob += b_stride[d];
          if (++idx[d] < s.batch[d]) break;
          oa -= a_stride[d] * s.batch[d];
          ob -= b_stride[d] * s.batch[d];
          idx[d] = 0;
        }
      }
      return OkStatus();
    });
  }
};

}  // namespace

Status AddMatMulOpDefs(KernelRegistry& registry) { return registry.AddOp(MatMulDef()); }

Status AddMatMulCpuKernels(KernelRegistry& registry) {
  return AddValidatedKernel<MatMulKernel>(registry, MatMulDef());
}

}  // namespace remex::kernels::internal
