// CUDA kernels: MatMul, FusedMatMul and Gemm on cuBLASLt. Semantics as the CPU kernels
// (kernels/ops/math/matmul.cc):
//   MatMul (ONNX opsets 1, 9, 13): numpy matmul; a 1-D A is [1, K] and a 1-D B is
//   [K, 1], their dim dropped from Y; batch dims broadcast (numpy rules).
//   Gemm (ONNX opsets 7, 9, 11, 13): Y = alpha * A' * B' + beta * C with transA /
//   transB, C (optional) unidirectionally broadcast to [M, N]; without C, or with
//   beta = 0, C is not read.
//   FusedMatMul (Remex's internal op): Y = activation(MatMul(A, B) + bias), A
//   [..., M, K], B 2-D [K, N], bias [N] optional; `activation` / `activation_params`
//   as FusedConv's (ParseConvEpilogue; each activation its ONNX operator's,
//   kernels/conv_epilogue.h).
// dtypes: float32 (CUBLAS_COMPUTE_32F: exact float32 arithmetic, no TF32) and float16
// (float16 operands, CUBLAS_COMPUTE_32F accumulation, rounded once on store). Others
// are UNIMPLEMENTED.
//
// cuBLASLt is column-major: the row-major Y [M, N] = A [M, K] B [K, N] is computed as
// the column-major Y^T = B^T A^T, i.e. with the operands swapped and each row-major
// matrix read as its column-major transpose. Batch dims of MatMul are merged where A
// and B broadcast alike; the innermost merged dim runs as one strided-batched call
// (stride 0 where an operand broadcasts), the outer ones as a loop of such calls, whose
// pointers lie at whole-matrix offsets: the heuristic is told their alignment (cuBLASLt
// otherwise assumes 256 bytes). A batch over A alone folds into M (one GEMM).
//
// Gemm's C: [M, N] is read as cuBLASLt's C with beta; a row [N] (or [1, N]) with
// beta = 1 is added by the CUBLASLT_EPILOGUE_BIAS epilogue; every other form is first
// broadcast into Y (kernels/cuda/epilogue_impl.cu), which is then cuBLASLt's C and D.
//
// FusedMatMul: A is one [batch * M, K] matrix (B is 2-D), one GEMM. The epilogue is
// cuBLASLt's where it has it: CUBLASLT_EPILOGUE_BIAS (bias, no activation),
// CUBLASLT_EPILOGUE_RELU_BIAS (bias, Relu), CUBLASLT_EPILOGUE_RELU (Relu, no bias).
// Every other case, and any cuBLASLt has no algorithm for, is CUBLASLT_EPILOGUE_DEFAULT
// followed by FusedConv's epilogue kernel in its channels-last form (bias along Y's
// last dim, then the activation; kernels/cuda/epilogue_impl.cu). float16 there: cuBLASLt rounds
// the product to float16 as it writes Y, the epilogue computes in float32 and rounds
// once more on store. K = 0: Y = activation(bias), or activation(0), by the epilogue
// kernel over a zeroed Y. (cuBLASLt does not document how its ReLU epilogue treats
// NaN; the CPU kernel's Relu keeps NaN.)
//
// Per kernel instance: one cublasLtHandle; per input signature a plan (descriptors,
// layouts and the heuristic's algorithm: its first result, or the node's internal
// attribute `cublaslt_algo` = i, 0-7, which `remex tune` sets, picks its i-th; an i past
// the results it returns runs the first). Workspace (at most 32 MiB): a block of the
// context's provider (the device server's caching allocator), held for the call, or
// without one cudaMallocAsync before the call and cudaFreeAsync after it, on the
// context's stream (StreamWorkspace).

#include <cublasLt.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/epilogue_impl.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

using internal::ConvEpilogue;
using internal::GemmAttrs;
using internal::ParseConvEpilogue;
using internal::ParseGemmAttrs;

constexpr std::string_view kMatMul = "MatMul";
constexpr std::string_view kFusedMatMul = "FusedMatMul";
constexpr std::string_view kGemm = "Gemm";
constexpr size_t kMaxPlans = 16;
constexpr size_t kMaxWorkspace = size_t{32} << 20;

Status LtCheck(std::string_view op, std::string_view call, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return OkStatus();
  std::string message = std::string(op) + " on cuda: " + std::string(call) + " failed: cuBLAS status " +
                        std::to_string(static_cast<int>(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted(std::move(message));
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return Unimplemented(std::move(message));
  return Internal(std::move(message));
}

struct LtHandleDeleter {
  void operator()(cublasLtContext* h) const { cublasLtDestroy(h); }
};
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using LtHandle = std::unique_ptr<cublasLtContext, LtHandleDeleter>;
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using MatrixLayout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter>;

StatusOr<cudaDataType_t> DataTypeOf(std::string_view op, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return CUDA_R_32F;
    case DType::kFloat16: return CUDA_R_16F;
    default: break;
  }
  return Unimplemented(std::string(op) + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                       " is not implemented (float32 and float16 are)");
}

// One row-major product Y = op(A) op(B) (Y [m, n]), possibly a strided batch.
struct Problem {
  cudaDataType_t type = CUDA_R_32F;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t a_stride = 0, b_stride = 0, y_stride = 0;  // Elements between batch entries.
  // cuBLASLt's epilogue: DEFAULT, or BIAS, RELU or RELU_BIAS (bias over n, read from
  // RunMatmul's `bias`).
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  // Alignment in bytes the pointers of every call are guaranteed (cuBLASLt's default
  // and what cudaMalloc gives; less where calls run at offsets into the tensors).
  uint32_t align_a = 256, align_b = 256, align_y = 256;
  // Which of cuBLASLt's heuristic results to run (the node's `cublaslt_algo`, which
  // `remex tune` sets; 0 the heuristic's first): one past the results it returns
  // runs the first.
  int algo_index = 0;
};

// The most heuristic results asked for, and so the bound of `cublaslt_algo` (the
// OpDefs' tunable range, kernels/kernels.h).
constexpr int kMaxLtAlgos = static_cast<int>(kCublasLtAlgoCount);

// The node's `cublaslt_algo` attribute: 0 (absent) to kMaxLtAlgos - 1.
StatusOr<int> ParseLtAlgo(std::string_view op, const Attributes& attrs) {
  StatusOr<int64_t> v = attrs.Int("cublaslt_algo", 0);
  if (!v.ok()) return InvalidArgument(std::string(op) + ": " + v.status().message());
  if (*v < 0 || *v >= kMaxLtAlgos) {
    return InvalidArgument(std::string(op) + ": cublaslt_algo must be in [0, " + std::to_string(kMaxLtAlgos - 1) +
                           "], got " + std::to_string(*v));
  }
  return static_cast<int>(*v);
}

// A compiled cuBLASLt matmul for one Problem.
struct LtMatmul {
  MatmulDesc desc;
  MatrixLayout lhs, rhs, y;  // lhs: row-major B read column-major; rhs: row-major A.
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

template <typename T>
Status SetDescAttr(std::string_view op, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return LtCheck(op, "cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
}

// Column-major layout of `rows` x `cols` with leading dimension `ld`, batched.
StatusOr<MatrixLayout> MakeLayout(std::string_view op, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                  int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatrixLayoutCreate",
                                cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                                           static_cast<uint64_t>(cols), ld)));
  MatrixLayout layout(l);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatrixLayoutSetAttribute",
                                  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                                   sizeof count)));
    REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatrixLayoutSetAttribute",
                                  cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                   &stride, sizeof stride)));
  }
  return layout;
}

StatusOr<LtMatmul> BuildMatmul(std::string_view op, cublasLtHandle_t handle, const Problem& p) {
  if (p.batch > INT32_MAX) return Unimplemented(std::string(op) + " on cuda: batch count exceeds 2^31 - 1");
  LtMatmul mm;
  cublasLtMatmulDesc_t d = nullptr;
  REMEX_RETURN_IF_ERROR(
      LtCheck(op, "cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  mm.desc.reset(d);
  // Column-major: Y^T [n, m] = op(B)^T [n, k] * op(A)^T [k, m].
  const cublasOperation_t op_lhs = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_rhs = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  REMEX_RETURN_IF_ERROR(SetDescAttr(op, d, CUBLASLT_MATMUL_DESC_TRANSA, op_lhs));
  REMEX_RETURN_IF_ERROR(SetDescAttr(op, d, CUBLASLT_MATMUL_DESC_TRANSB, op_rhs));
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    REMEX_RETURN_IF_ERROR(SetDescAttr(op, d, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue));
  }
  // Stored row-major B: [k, n] (ld n) or, transposed, [n, k] (ld k); read column-major.
  REMEX_ASSIGN_OR_RETURN(mm.lhs, p.trans_b ? MakeLayout(op, p.type, p.k, p.n, p.k, p.batch, p.b_stride)
                                           : MakeLayout(op, p.type, p.n, p.k, p.n, p.batch, p.b_stride));
  REMEX_ASSIGN_OR_RETURN(mm.rhs, p.trans_a ? MakeLayout(op, p.type, p.m, p.k, p.m, p.batch, p.a_stride)
                                           : MakeLayout(op, p.type, p.k, p.m, p.k, p.batch, p.a_stride));
  REMEX_ASSIGN_OR_RETURN(mm.y, MakeLayout(op, p.type, p.n, p.m, p.n, p.batch, p.y_stride));
  cublasLtMatmulPreference_t pref_raw = nullptr;
  REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&pref_raw)));
  Preference pref(pref_raw);
  const uint64_t max_ws = kMaxWorkspace;
  REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatmulPreferenceSetAttribute",
                                cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                     &max_ws, sizeof max_ws)));
  // cuBLASLt's A is the row-major B and its B the row-major A (see above); C and D are Y.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_y}};
  for (const auto& [attr, bytes] : aligns) {
    REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatmulPreferenceSetAttribute",
                                  cublasLtMatmulPreferenceSetAttribute(pref_raw, attr, &bytes, sizeof bytes)));
  }
  cublasLtMatmulHeuristicResult_t results[kMaxLtAlgos] = {};
  int count = 0;
  REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatmulAlgoGetHeuristic",
                                cublasLtMatmulAlgoGetHeuristic(handle, d, mm.lhs.get(), mm.rhs.get(), mm.y.get(),
                                                               mm.y.get(), pref_raw, p.algo_index + 1, results,
                                                               &count)));
  count = std::min(count, p.algo_index + 1);
  const cublasLtMatmulHeuristicResult_t& result =
      count > p.algo_index && results[p.algo_index].state == CUBLAS_STATUS_SUCCESS ? results[p.algo_index]
                                                                                    : results[0];
  if (count == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    return Unimplemented(std::string(op) + " on cuda: cuBLASLt has no algorithm for [" + std::to_string(p.m) + ", " +
                         std::to_string(p.k) + "] x [" + std::to_string(p.k) + ", " + std::to_string(p.n) + "]" +
                         (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT
                              ? " with epilogue " + std::to_string(static_cast<int>(p.epilogue))
                              : std::string()));
  }
  mm.algo = result.algo;
  mm.workspace = result.workspaceSize;
  return mm;
}

// Runs `mm`: Y = alpha * op(A) op(B) + beta * C (C read from `c`, laid out as Y).
// The workspace comes from the context's provider (cudaMallocAsync without one).
Status RunMatmul(std::string_view op, cublasLtHandle_t handle, const LtMatmul& mm, const void* a, const void* b,
                 const void* c, void* y, float alpha, float beta, const void* bias, const CudaKernelContext& context) {
  if (bias) REMEX_RETURN_IF_ERROR(SetDescAttr(op, mm.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  const cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
  StreamWorkspace workspace(op, stream, &context.workspace);
  REMEX_ASSIGN_OR_RETURN(void* ws, workspace.Allocate(mm.workspace));
  REMEX_RETURN_IF_ERROR(LtCheck(op, "cublasLtMatmul",
                                cublasLtMatmul(handle, mm.desc.get(), &alpha, b, mm.lhs.get(), a, mm.rhs.get(), &beta,
                                               c ? c : y, mm.y.get(), y, mm.y.get(), &mm.algo, ws, mm.workspace,
                                               stream)));
  return workspace.Release();
}

size_t ElemSize(cudaDataType_t t) { return t == CUDA_R_16F ? 2 : 4; }

// The alignment of base + i * step_bytes for every i, base 256-byte aligned: the largest
// power of two dividing step_bytes, at most 256.
uint32_t StepAlignment(int64_t step_bytes) {
  const uint64_t low = static_cast<uint64_t>(step_bytes) & (~static_cast<uint64_t>(step_bytes) + 1);
  return low == 0 || low > 256 ? 256 : static_cast<uint32_t>(low);
}

// What MatMul and Gemm share: the handle, the plans by input signature.
template <typename Plan>
class LtKernel : public OpKernel {
 public:
  // `attrs` passed ParseLtAlgo (the factories check it).
  LtKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : def_(def), attrs_(std::move(attrs)), context_(context),
        algo_index_(ParseLtAlgo(def.name, attrs_).ok() ? *ParseLtAlgo(def.name, attrs_) : 0) {}

  Status Compute(std::span<const TensorRef> in, std::span<const TensorRef> out) final {
    REMEX_RETURN_IF_ERROR(internal::CheckAgainstShapeFn(def_, attrs_, in, out));
    REMEX_ASSIGN_OR_RETURN(cudaDataType_t type, DataTypeOf(def_.name, out[0].dtype));
    if (NumElements(out[0].shape).value_or(0) == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)));
    if (!handle_) {
      cublasLtHandle_t h = nullptr;
      REMEX_RETURN_IF_ERROR(LtCheck(def_.name, "cublasLtCreate", cublasLtCreate(&h)));
      handle_.reset(h);
    }
    Shape key;
    for (const TensorRef& t : in) {
      key.push_back(t.present() ? static_cast<int64_t>(t.shape.size()) : -1);
      key.insert(key.end(), t.shape.begin(), t.shape.end());
    }
    key.push_back(static_cast<int64_t>(type));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      REMEX_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, Build(in, type));
      if (plans_.size() >= kMaxPlans) plans_.clear();
      it = plans_.emplace(std::move(key), std::move(plan)).first;
    }
    return Run(*it->second, in, out[0]);
  }

 protected:
  virtual StatusOr<std::unique_ptr<Plan>> Build(std::span<const TensorRef> in, cudaDataType_t type) = 0;
  virtual Status Run(const Plan& plan, std::span<const TensorRef> in, const TensorRef& out) = 0;

  std::string_view op() const { return def_.name; }
  cublasLtHandle_t handle() const { return handle_.get(); }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(context_.stream); }
  const CudaKernelContext& context() const { return context_; }
  int algo_index() const { return algo_index_; }

 private:
  const OpDef& def_;
  const Attributes attrs_;
  const CudaKernelContext context_;
  const int algo_index_;
  LtHandle handle_;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
};

// ---------------------------------------------------------------------------
// MatMul.

struct MatMulPlan {
  bool zero = false;  // K = 0: Y = 0.
  int64_t m = 0, n = 0, k = 0;
  LtMatmul mm;
  // Outer merged batch dims, looped on the host; offsets in matrices.
  std::vector<int64_t> outer_dims, outer_a, outer_b;
  int64_t inner = 1;  // Batch entries per cuBLASLt call.
  size_t elem = 4;
};

class MatMulCudaKernel final : public LtKernel<MatMulPlan> {
 public:
  using LtKernel::LtKernel;

 protected:
  StatusOr<std::unique_ptr<MatMulPlan>> Build(std::span<const TensorRef> in, cudaDataType_t type) override {
    auto plan = std::make_unique<MatMulPlan>();
    plan->elem = ElemSize(type);
    Shape as = in[0].shape, bs = in[1].shape;
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    plan->m = as[as.size() - 2];
    plan->k = as.back();
    plan->n = bs.back();
    if (plan->k == 0) {
      plan->zero = true;
      return plan;
    }
    // Batch dims right-aligned; per merged dim its extent and which operands span it.
    const size_t ra = as.size() - 2, rb = bs.size() - 2, r = std::max(ra, rb);
    struct Dim {
      int64_t extent;
      bool a, b;
    };
    std::vector<Dim> dims;
    for (size_t i = 0; i < r; ++i) {
      const int64_t da = i < r - ra ? 1 : as[i - (r - ra)];
      const int64_t db = i < r - rb ? 1 : bs[i - (r - rb)];
      const int64_t e = std::max(da, db);
      if (e == 1) continue;
      const Dim d{e, da == e, db == e};
      if (!dims.empty() && dims.back().a == d.a && dims.back().b == d.b) {
        dims.back().extent *= e;
      } else {
        dims.push_back(d);
      }
    }
    // Strides in matrices, row-major over the spanned dims.
    std::vector<int64_t> sa(dims.size()), sb(dims.size());
    int64_t acc_a = 1, acc_b = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      sa[i] = dims[i].a ? acc_a : 0;
      sb[i] = dims[i].b ? acc_b : 0;
      if (dims[i].a) acc_a *= dims[i].extent;
      if (dims[i].b) acc_b *= dims[i].extent;
    }
    Problem p;
    p.type = type;
    p.m = plan->m;
    p.n = plan->n;
    p.k = plan->k;
    if (dims.size() == 1 && dims[0].a && !dims[0].b) {
      p.m *= dims[0].extent;  // A's batch folds into M: [batch * m, k] x [k, n].
    } else if (!dims.empty()) {
      plan->inner = dims.back().extent;
      p.batch = plan->inner;
      p.a_stride = sa.back() * plan->m * plan->k;
      p.b_stride = sb.back() * plan->k * plan->n;
      p.y_stride = plan->m * plan->n;
      for (size_t i = 0; i + 1 < dims.size(); ++i) {
        plan->outer_dims.push_back(dims[i].extent);
        plan->outer_a.push_back(sa[i]);
        plan->outer_b.push_back(sb[i]);
      }
      if (!plan->outer_dims.empty()) {  // Run offsets A, B and Y by whole matrices.
        const auto elem = static_cast<int64_t>(plan->elem);
        p.align_a = StepAlignment(plan->m * plan->k * elem);
        p.align_b = StepAlignment(plan->k * plan->n * elem);
        p.align_y = StepAlignment(plan->inner * plan->m * plan->n * elem);
      }
    }
    p.algo_index = algo_index();
    REMEX_ASSIGN_OR_RETURN(plan->mm, BuildMatmul(op(), handle(), p));
    return plan;
  }

  Status Run(const MatMulPlan& plan, std::span<const TensorRef> in, const TensorRef& out) override {
    if (plan.zero) {
      return CudaCheck(op(), "cudaMemsetAsync",
                       cudaMemsetAsync(out.data, 0, static_cast<size_t>(*NumElements(out.shape)) * plan.elem, stream()));
    }
    const int64_t a_mat = plan.m * plan.k * static_cast<int64_t>(plan.elem);
    const int64_t b_mat = plan.k * plan.n * static_cast<int64_t>(plan.elem);
    const int64_t y_mat = plan.m * plan.n * static_cast<int64_t>(plan.elem);
    const size_t r = plan.outer_dims.size();
    std::vector<int64_t> idx(r, 0);
    int64_t outer = 1;
    for (int64_t d : plan.outer_dims) outer *= d;
    int64_t oa = 0, ob = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const char* a = static_cast<const char*>(in[0].data) + oa * a_mat;
      const char* b = static_cast<const char*>(in[1].data) + ob * b_mat;
      char* y = static_cast<char*>(out.data) + o * plan.inner * y_mat;
      REMEX_RETURN_IF_ERROR(RunMatmul(op(), handle(), plan.mm, a, b, nullptr, y, 1.0f, 0.0f, nullptr, context()));
      for (size_t d = r; d-- > 0;) {  // Next outer index.
        oa += plan.outer_a[d];
        ob += plan.outer_b[d];
        if (++idx[d] < plan.outer_dims[d]) break;
        oa -= plan.outer_a[d] * plan.outer_dims[d];
        ob -= plan.outer_b[d] * plan.outer_dims[d];
        idx[d] = 0;
      }
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// FusedMatMul.

struct FusedMatMulPlan {
  int64_t rows = 0, k = 0, n = 0;  // A as [rows, k] (batch * M rows).
  bool lt_bias = false;            // cuBLASLt's epilogue adds the bias.
  bool post = false;               // The epilogue kernel runs after the GEMM.
  LtMatmul mm;                     // Unused when k = 0.
};

class FusedMatMulCudaKernel final : public LtKernel<FusedMatMulPlan> {
 public:
  FusedMatMulCudaKernel(const OpDef& def, Attributes attrs, ConvEpilogue epilogue, CudaKernelContext context)
      : LtKernel(def, std::move(attrs), context), epilogue_(epilogue) {}

 protected:
  StatusOr<std::unique_ptr<FusedMatMulPlan>> Build(std::span<const TensorRef> in, cudaDataType_t type) override {
    auto plan = std::make_unique<FusedMatMulPlan>();
    const Shape& a = in[0].shape;
    plan->k = a.back();
    plan->n = in[1].shape[1];
    plan->rows = 1;
    for (size_t i = 0; i + 1 < a.size(); ++i) plan->rows *= a[i];
    const bool has_bias = in.size() > 2 && in[2].present();
    const bool relu = epilogue_.activation == ConvActivation::kRelu;
    const bool none = epilogue_.activation == ConvActivation::kNone;
    if (plan->k == 0) {  // Y = activation(bias), or activation(0): the epilogue over zeros.
      plan->post = true;
      return plan;
    }
    Problem p;
    p.type = type;
    p.m = plan->rows;
    p.n = plan->n;
    p.k = plan->k;
    if (has_bias && none) {
      p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    } else if (relu) {
      p.epilogue = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    }
    p.algo_index = algo_index();
    StatusOr<LtMatmul> mm = BuildMatmul(op(), handle(), p);
    if (!mm.ok() && p.epilogue != CUBLASLT_EPILOGUE_DEFAULT && mm.status().code() == StatusCode::kUnimplemented) {
      p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;  // No algorithm with the epilogue: the kernel's.
      mm = BuildMatmul(op(), handle(), p);
    }
    if (!mm.ok()) return mm.status();
    plan->mm = std::move(*mm);
    plan->lt_bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    const bool lt_relu = p.epilogue == CUBLASLT_EPILOGUE_RELU || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    plan->post = (has_bias && !plan->lt_bias) || (!none && !lt_relu);
    return plan;
  }

  Status Run(const FusedMatMulPlan& plan, std::span<const TensorRef> in, const TensorRef& out) override {
    const bool half = out.dtype == DType::kFloat16;
    const void* bias = in.size() > 2 && in[2].present() ? in[2].data : nullptr;
    if (plan.k == 0) {
      REMEX_RETURN_IF_ERROR(CudaCheck(
          op(), "cudaMemsetAsync",
          cudaMemsetAsync(out.data, 0, static_cast<size_t>(plan.rows * plan.n) * (half ? 2 : 4), stream())));
    } else {
      REMEX_RETURN_IF_ERROR(RunMatmul(op(), handle(), plan.mm, in[0].data, in[1].data, nullptr, out.data, 1.0f, 0.0f,
                                      plan.lt_bias ? bias : nullptr, context()));
    }
    if (!plan.post) return OkStatus();
    // Channels-last form: the bias indexed by i % n (inner 1, n channels).
    return CudaCheck(op(), "matmul epilogue launch",
                     LaunchConvEpilogue(half, out.data, plan.lt_bias ? nullptr : bias, nullptr, plan.rows * plan.n,
                                        plan.n, 1, epilogue_.activation, epilogue_.alpha, epilogue_.beta, stream()));
  }

 private:
  const ConvEpilogue epilogue_;
};

// ---------------------------------------------------------------------------
// Gemm.

enum class CMode : uint8_t {
  kNone,         // No C (or beta = 0): beta * C is not computed.
  kFull,         // C [M, N]: cuBLASLt's C.
  kBias,         // C a row of N and beta = 1: the bias epilogue.
  kMaterialize,  // C broadcast into Y first, then Y is cuBLASLt's C.
};

struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t c_rows = 1, c_cols = 1;
  CMode c_mode = CMode::kNone;
  LtMatmul mm;  // Unused when k = 0.
};

class GemmCudaKernel final : public LtKernel<GemmPlan> {
 public:
  GemmCudaKernel(const OpDef& def, Attributes attrs, GemmAttrs gemm, CudaKernelContext context)
      : LtKernel(def, std::move(attrs), context), attrs_(gemm) {}

 protected:
  StatusOr<std::unique_ptr<GemmPlan>> Build(std::span<const TensorRef> in, cudaDataType_t type) override {
    auto plan = std::make_unique<GemmPlan>();
    const Shape& a = in[0].shape;
    const Shape& b = in[1].shape;
    plan->m = attrs_.trans_a ? a[1] : a[0];
    plan->k = attrs_.trans_a ? a[0] : a[1];
    plan->n = attrs_.trans_b ? b[0] : b[1];
    const bool has_c = in.size() > 2 && in[2].present();
    if (has_c) {
      const Shape& c = in[2].shape;
      if (c.size() >= 1) plan->c_cols = c.back();
      if (c.size() == 2) plan->c_rows = c[0];
    }
    if (!has_c || attrs_.beta == 0.0f) {
      plan->c_mode = CMode::kNone;
    } else if (plan->c_rows == plan->m && plan->c_cols == plan->n) {
      plan->c_mode = CMode::kFull;
    } else if (plan->c_rows == 1 && plan->c_cols == plan->n && attrs_.beta == 1.0f) {
      plan->c_mode = CMode::kBias;
    } else {
      plan->c_mode = CMode::kMaterialize;
    }
    if (plan->k == 0) return plan;
    Problem p;
    p.type = type;
    p.m = plan->m;
    p.n = plan->n;
    p.k = plan->k;
    p.trans_a = attrs_.trans_a;
    p.trans_b = attrs_.trans_b;
    if (plan->c_mode == CMode::kBias) p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    p.algo_index = algo_index();
    StatusOr<LtMatmul> mm = BuildMatmul(op(), handle(), p);
    if (!mm.ok() && plan->c_mode == CMode::kBias && mm.status().code() == StatusCode::kUnimplemented) {
      // No algorithm with the epilogue: broadcast C into Y instead.
      plan->c_mode = CMode::kMaterialize;
      p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
      mm = BuildMatmul(op(), handle(), p);
    }
    if (!mm.ok()) return mm.status();
    plan->mm = std::move(*mm);
    return plan;
  }

  Status Run(const GemmPlan& plan, std::span<const TensorRef> in, const TensorRef& out) override {
    const bool half = out.dtype == DType::kFloat16;
    const void* c = plan.c_mode == CMode::kNone ? nullptr : in[2].data;
    if (plan.k == 0) {  // Y = beta * C, or 0.
      if (!c) {
        return CudaCheck(op(), "cudaMemsetAsync",
                         cudaMemsetAsync(out.data, 0, static_cast<size_t>(plan.m * plan.n) * (half ? 2 : 4), stream()));
      }
      return CudaCheck(op(), "C broadcast launch",
                       LaunchBroadcastFill(half, out.data, c, plan.m, plan.n, plan.c_rows, plan.c_cols, attrs_.beta,
                                           stream()));
    }
    switch (plan.c_mode) {
      case CMode::kNone:
        return RunMatmul(op(), handle(), plan.mm, in[0].data, in[1].data, nullptr, out.data, attrs_.alpha, 0.0f,
                         nullptr, context());
      case CMode::kFull:
        return RunMatmul(op(), handle(), plan.mm, in[0].data, in[1].data, c, out.data, attrs_.alpha, attrs_.beta,
                         nullptr, context());
      case CMode::kBias:
        return RunMatmul(op(), handle(), plan.mm, in[0].data, in[1].data, nullptr, out.data, attrs_.alpha, 0.0f, c,
                         context());
      case CMode::kMaterialize:
        REMEX_RETURN_IF_ERROR(CudaCheck(
            op(), "C broadcast launch",
            LaunchBroadcastFill(half, out.data, c, plan.m, plan.n, plan.c_rows, plan.c_cols, 1.0f, stream())));
        return RunMatmul(op(), handle(), plan.mm, in[0].data, in[1].data, out.data, out.data, attrs_.alpha,
                         attrs_.beta, nullptr, context());
    }
    return Internal("Gemm on cuda: unknown C mode");
  }

 private:
  const GemmAttrs attrs_;
};

}  // namespace

Status AddMatMulCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(
      registry, kMatMul, [context](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_RETURN_IF_ERROR(ParseLtAlgo(kMatMul, attrs).status());
        return std::unique_ptr<OpKernel>(std::make_unique<MatMulCudaKernel>(def, attrs, context));
      }));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(
      registry, kFusedMatMul,
      [context](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_RETURN_IF_ERROR(ParseLtAlgo(kFusedMatMul, attrs).status());
        REMEX_ASSIGN_OR_RETURN(ConvEpilogue e, ParseConvEpilogue(kFusedMatMul, attrs));
        return std::unique_ptr<OpKernel>(std::make_unique<FusedMatMulCudaKernel>(def, attrs, e, context));
      }));
  return AddCudaKernel(
      registry, kGemm, [context](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
        REMEX_RETURN_IF_ERROR(ParseLtAlgo(kGemm, attrs).status());
        REMEX_ASSIGN_OR_RETURN(GemmAttrs g, ParseGemmAttrs(attrs));
        return std::unique_ptr<OpKernel>(std::make_unique<GemmCudaKernel>(def, attrs, g, context));
      });
}

}  // namespace remex::kernels::cuda
