// MatMul with numpy semantics: 1-D operands promoted and squeezed, batch dims
// broadcast. float32 runs on oneDNN's sgemm, float16 too through float32 copies
// (kernels/float32_copies.h: one rounding per output), other types on a plain loop; a
// float32 MatMul whose B is one 2-D matrix for every batch runs as one product of A's
// rows.
//
// Constant B of float32 MatMul and FusedMatMul (TensorRef::constant, [K, N] with N a
// multiple of 256) is copied once into rows PaddedRowStride(N) floats apart, when the
// VM is created (kernels/prepack.h: off the model's first invoke) or else at its first
// call: oneDNN's sgemm (2.6, AVX2) reads B's rows 1.1 to 2.9 times slower when
// their stride is a multiple of 1 KiB (cache-set conflicts; docs/benchmarks.md, "GELU
// in the feed-forward MatMul"). The copy stays with the kernel while the same constant
// comes in: such weights are held twice, the executable's and the kernel's.
//
// MatMul and FusedMatMul products of fewer than kSmallPrimitiveMacs (2M) multiply-adds
// run on one compute thread (ThreadsForMacs, as Conv's): a decoder step's products
// ([1, 256] x [256, 1024] and smaller) gained at most 8 % from a second thread when
// called back to back, and lost far more in a decode loop, where the compute thread
// has gone to sleep between steps and each product woke it (docs/benchmarks.md, "The
// hand-offs: bookkeeping on the I/O thread, ...").
//
// Gemm (https://onnx.ai/onnx/operators/onnx__Gemm.html), opsets 7, 9, 11, 13:
//   Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A ([M, K]), B' = transB ? B^T : B
//   ([K, N]). A and B are 2-D; C (optional from opset 11; absent means 0) is
//   unidirectionally broadcast to [M, N] (shape [], [N], [1], [M, 1], [1, N], [M, N]...).
//   dtypes: float16, float32, float64, int32, int64, uint32, uint64, one for all inputs.
//   float32 runs on oneDNN's sgemm, and so does float16 through float32 copies
//   (kernels/float32_copies.h: constant weights widened once, Y rounded once on store);
//   other types accumulate in double or (integers, wrapping) uint64, then alpha and beta
//   apply (integers: exactly when both are 1, else in double and truncated toward zero).
//
// FusedMatMul (internal; the compiler's epilogue fusion creates it, never ONNX):
//   Y = activation(MatMul(A, B) + bias), inputs (min 2, max 3)
//     A     float32 or float16, rank >= 2: [..., M, K] (batch dims allowed)
//     B     A's dtype, 2-D [K, N]
//     bias  optional, A's dtype, [N] (added along Y's last dim)
//   -> Y [..., M, N], A's dtype (MatMul's shape). Attributes `activation` and
//   `activation_params` exactly as FusedConv's (kernels/ops/nn/conv.cc, ParseConvEpilogue;
//   each activation its ONNX operator's, kernels/conv_epilogue.h). Any other shape or
//   dtype: INVALID_ARGUMENT "FusedMatMul: ...".
//   The CPU kernel is oneDNN's matmul primitive over A as one [batch * M, K] matrix,
//   with the bias as its bias ([1, N]) and the activation as eltwise post-ops (as
//   FusedConv's, kernels/dnnl_epilogue.h). float16 is computed in float32 (product,
//   bias and activation) and Y rounded once on store. K = 0: Y = activation(bias),
//   or activation(0) without bias.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "kernels/conv_epilogue.h"
#include "kernels/dnnl_epilogue.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/prepack.h"

namespace remex::kernels::internal {

StatusOr<MatMulDims> MatMulDimsOf(std::string_view op, const Shape& a_shape, const Shape& b_shape) {
  if (a_shape.empty() || b_shape.empty()) {
    return OpError(op, "inputs must have rank >= 1, got " + ShapeToString(a_shape) + " and " +
                                ShapeToString(b_shape));
  }
  Shape as = a_shape, bs = b_shape;
  const bool a_vec = as.size() == 1;
  const bool b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  MatMulDims s;
  s.m = as[as.size() - 2];
  s.k = as[as.size() - 1];
  s.n = bs[bs.size() - 1];
  if (bs[bs.size() - 2] != s.k) {
    return OpError(op,
                   "inner dims differ: " + ShapeToString(a_shape) + " x " + ShapeToString(b_shape));
  }
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  REMEX_ASSIGN_OR_RETURN(s.batch, BroadcastShapes(op, ab, bb));
  s.a_batch.assign(s.batch.size() - ab.size(), 1);
  s.a_batch.insert(s.a_batch.end(), ab.begin(), ab.end());
  s.b_batch.assign(s.batch.size() - bb.size(), 1);
  s.b_batch.insert(s.b_batch.end(), bb.begin(), bb.end());
  s.output = s.batch;
  if (!a_vec) s.output.push_back(s.m);
  if (!b_vec) s.output.push_back(s.n);
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s.output).status());
  return s;
}

namespace {

constexpr std::string_view kMatMul = "MatMul";

using MatMulShape = MatMulDims;

StatusOr<MatMulShape> ComputeMatMulShape(const ShapeFnArg& a, const ShapeFnArg& b) {
  if (a.dtype != b.dtype) {
    return OpError(kMatMul, "input dtypes differ: " + std::string(DTypeName(a.dtype)) + " and " +
                                std::string(DTypeName(b.dtype)));
  }
  if (!IsNumericType(a.dtype)) {
    return OpError(kMatMul, "unsupported dtype " + std::string(DTypeName(a.dtype)));
  }
  return MatMulDimsOf(kMatMul, a.shape, b.shape);
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
  def.traits.tunable = {{"cublaslt_algo", 0, kCublasLtAlgoCount - 1}};  // kernels/ops/math/cuda/matmul.cc
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

// oneDNN generates its sgemm kernels (JIT) at the first product of the process, which
// otherwise lands on a model's first invoke (docs/benchmarks.md, the decode loop's first
// step). Kernels that multiply matrices pay it when they are created (at the model's
// load) instead: once a process.
void WarmUpGemm() {
  static std::once_flag once;
  std::call_once(once, [] {
    float a = 0.f, b = 0.f, c = 0.f;
    (void)dnnl::sgemm('N', 'N', 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  });
}

// The row stride, in floats, of the padded copy of a constant B of N columns (N is a
// multiple of 256): N + 16, so that rows are 64-byte aligned but no multiple of 1 KiB
// apart.
constexpr int64_t PaddedRowStride(int64_t n) { return n + 16; }

// A float32 B [K, N] for oneDNN: the padded copy of a constant B (see the top of the
// file), made when the VM is created (Prepack) or else on the first call with that
// constant, and kept; or B itself.
class PaddedConstantB {
 public:
  struct Rows {
    const float* data;
    int64_t stride;  // floats from one row to the next
  };
  // At the load (kernels/prepack.h): for a constant float32 B [.., K, N] whose leading
  // dims are all 1, the copy Get makes on a call, and its K, N and rows; nullopt for
  // another B.
  struct Prepacked {
    int64_t k, n;
    Rows rows;
  };
  std::optional<Prepacked> Prepack(const TensorRef& b) {
    const size_t rank = b.shape.size();
    if (b.dtype != DType::kFloat32 || rank < 2 || !b.constant) return std::nullopt;
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (b.shape[d] != 1) return std::nullopt;
    }
    const int64_t k = b.shape[rank - 2], n = b.shape[rank - 1];
    return Prepacked{k, n, Get(b, k, n)};
  }
  Rows Get(const TensorRef& b, int64_t k, int64_t n) {
    const float* data = DataAs<const float>(b);
    if (!b.constant || n % 256 != 0 || k <= 0) return {data, n};
    const int64_t ld = PaddedRowStride(n);
    if (from_ != b.data || k_ != k || n_ != n) {
      const size_t bytes = static_cast<size_t>(k * ld) * sizeof(float);
      copy_.reset(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      if (!copy_) {  // no memory for the copy: B as it is, and nothing kept
        from_ = nullptr;
        return {data, n};
      }
      for (int64_t r = 0; r < k; ++r) {
        std::memcpy(copy_.get() + r * ld, data + r * n, static_cast<size_t>(n) * sizeof(float));
        std::memset(copy_.get() + r * ld + n, 0, static_cast<size_t>(ld - n) * sizeof(float));
      }
      from_ = b.data;
      k_ = k;
      n_ = n;
    }
    return {copy_.get(), ld};
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> copy_;
  const void* from_ = nullptr;
  int64_t k_ = 0, n_ = 0;
};

class MatMulKernel final : public ValidatedKernel, public ConstantPrepacker {
 public:
  MatMulKernel(const OpDef& def, const Attributes& attrs) : ValidatedKernel(def, attrs) { WarmUpGemm(); }
  // B's float32 copy when it is float16, and its padded copy.
  void Prepack(size_t input, const TensorRef& constant) override {
    if (input == 1) (void)padded_b_.Prepack(f32_constants_.Prepack(constant));
  }

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {  // float32 copies: sgemm, one rounding per output
      return RunAsFloat32(
          in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); },
          &f32_constants_);
    }
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
    ScopedComputeThreads threads(ThreadsForMacs(batches * s.m * s.n * s.k));
    // float32 with one B for every batch: one product of A's batch * M rows.
    const bool one_b = std::all_of(s.b_batch.begin(), s.b_batch.end(), [](int64_t d) { return d == 1; });
    if (in[0].dtype == DType::kFloat32 && one_b && s.k > 0) {
      const PaddedConstantB::Rows b = padded_b_.Get(in[1], s.k, s.n);
      const int64_t rows = *NumElements(s.a_batch) * s.m;  // A's batches broadcast to every output batch
      if (rows == batches * s.m) {
        dnnl::status st = dnnl::sgemm('N', 'N', rows, s.n, s.k, 1.0f, DataAs<const float>(in[0]), s.k, b.data,
                                      b.stride, 0.0f, DataAs<float>(out[0]), s.n);
        if (st != dnnl::status::success) {
          return Internal("MatMul: oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)));
        }
        return OkStatus();
      }
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

 private:
  PaddedConstantB padded_b_;
  Float32Constants f32_constants_;  // float16 weights, widened once.
};

// ---------------------------------------------------------------------------
// FusedMatMul.

constexpr std::string_view kFusedMatMul = "FusedMatMul";

struct FusedMatMulShape {
  int64_t rows = 0;  // batch * M: A as one [rows, K] matrix.
  int64_t k = 0, n = 0;
  bool has_bias = false;
  Shape output;
};

StatusOr<FusedMatMulShape> ComputeFusedMatMulShape(std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = kFusedMatMul;
  if (in.size() < 2 || in.size() > 3 || !in[0].present || !in[1].present) {
    return OpError(op, "expects inputs A, B and an optional bias");
  }
  const ShapeFnArg& a = in[0];
  const ShapeFnArg& b = in[1];
  if (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat16) {
    return OpError(op, "A must be float32 or float16, got " + std::string(DTypeName(a.dtype)));
  }
  if (b.dtype != a.dtype) {
    return OpError(op, "B must have A's dtype " + std::string(DTypeName(a.dtype)) + ", got " +
                           std::string(DTypeName(b.dtype)));
  }
  if (a.shape.size() < 2) return OpError(op, "A must have rank >= 2, got " + ShapeToString(a.shape));
  if (b.shape.size() != 2) return OpError(op, "B must be 2-D [K, N], got " + ShapeToString(b.shape));
  FusedMatMulShape s;
  s.k = a.shape.back();
  s.n = b.shape[1];
  if (b.shape[0] != s.k) {
    return OpError(op, "inner dims differ: A " + ShapeToString(a.shape) + " x B " + ShapeToString(b.shape));
  }
  if (in.size() > 2 && in[2].present) {
    const ShapeFnArg& bias = in[2];
    if (bias.dtype != a.dtype) {
      return OpError(op, "bias must have A's dtype " + std::string(DTypeName(a.dtype)) + ", got " +
                             std::string(DTypeName(bias.dtype)));
    }
    if (bias.shape != Shape{s.n}) {
      return OpError(op, "bias must be [N] = [" + std::to_string(s.n) + "], got " + ShapeToString(bias.shape));
    }
    s.has_bias = true;
  }
  s.output.assign(a.shape.begin(), a.shape.end() - 1);
  s.output.push_back(s.n);
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s.output).status());
  REMEX_ASSIGN_OR_RETURN(s.rows, CheckedNumElements(op, Shape(a.shape.begin(), a.shape.end() - 1)));
  return s;
}

StatusOr<std::vector<TensorInfo>> InferFusedMatMul(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_RETURN_IF_ERROR(ParseConvEpilogue(kFusedMatMul, attrs).status());
  REMEX_ASSIGN_OR_RETURN(FusedMatMulShape s, ComputeFusedMatMulShape(in));
  return std::vector<TensorInfo>{{in[0].dtype, s.output}};
}

OpDef FusedMatMulDef() {
  OpDef def;
  def.name = std::string(kFusedMatMul);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferFusedMatMul;
  def.traits.tunable = {{"cublaslt_algo", 0, kCublasLtAlgoCount - 1}};
  return def;
}

// One compiled oneDNN matmul: [rows, K] x [K, N] (+ bias [1, N]) with the epilogue's
// post-ops, row-major memories (B's rows possibly padded: PaddedConstantB).
struct DnnlMatMul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, bias, dst;
};

class FusedMatMulKernel final : public ValidatedKernel, public ConstantPrepacker {
 public:
  static StatusOr<std::unique_ptr<FusedMatMulKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(ConvEpilogue parsed, ParseConvEpilogue(kFusedMatMul, attrs));
    return std::make_unique<FusedMatMulKernel>(def, attrs, std::move(parsed));
  }
  FusedMatMulKernel(const OpDef& def, const Attributes& attrs, ConvEpilogue parsed)
      : ValidatedKernel(def, attrs), epilogue_(std::move(parsed)) {
    WarmUpGemm();
  }
  // B's padded copy (input 1), then with the bias (input 2, which the VM gives after
  // B) the primitive for B's K and N: at the load, not on the first call. A FusedMatMul
  // without a bias compiles its primitive on its first call.
  // A float16 B or bias is widened to float32 first, once.
  void Prepack(size_t input, const TensorRef& given) override {
    const TensorRef constant = f32_constants_.Prepack(given);
    if (input == 1) {
      prepacked_b_ = padded_b_.Prepack(constant);
    } else if (input == 2 && prepacked_b_ && constant.dtype == DType::kFloat32) {
      // With the compute threads a call of one row runs under (a decode step's).
      ScopedComputeThreads threads(ThreadsForMacs(prepacked_b_->k * prepacked_b_->n));
      try {
        (void)FindOrCompile(prepacked_b_->k, prepacked_b_->n, /*has_bias=*/true, prepacked_b_->rows.stride);
      } catch (const dnnl::error&) {
        // Left to the call, which reports it.
      }
    }
  }

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {
      return RunAsFloat32(
          in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); },
          &f32_constants_);
    }
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(FusedMatMulShape s, ComputeFusedMatMulShape(args));
    if (s.rows == 0 || s.n == 0) return OkStatus();
    const float* bias = s.has_bias ? DataAs<const float>(in[2]) : nullptr;
    float* y = DataAs<float>(out[0]);
    if (s.k == 0) {  // No product: Y = activation(bias), or activation(0).
      for (int64_t i = 0; i < s.rows * s.n; ++i) {
        y[i] = ApplyConvActivation(epilogue_.activation, bias ? bias[i % s.n] : 0.f, epilogue_.alpha, epilogue_.beta);
      }
      return OkStatus();
    }
    ScopedComputeThreads threads(ThreadsForMacs(s.rows * s.k * s.n));
    try {
      const PaddedConstantB::Rows b = padded_b_.Get(in[1], s.k, s.n);
      DnnlMatMul* mm = FindOrCompile(s.k, s.n, s.has_bias, b.stride);
      using dnnl::memory;
      const memory::desc src_desc({s.rows, s.k}, memory::data_type::f32, memory::format_tag::ab);
      const memory::desc dst_desc({s.rows, s.n}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::memory src(src_desc, *engine_, const_cast<void*>(in[0].data));
      dnnl::memory weights(mm->weights, *engine_, const_cast<float*>(b.data));
      dnnl::memory dst(dst_desc, *engine_, out[0].data);
      std::unordered_map<int, dnnl::memory> exec_args{
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
      if (bias) exec_args[DNNL_ARG_BIAS] = dnnl::memory(mm->bias, *engine_, const_cast<float*>(bias));
      mm->primitive.execute(*stream_, exec_args);
      stream_->wait();
    } catch (const dnnl::error& e) {
      return Internal("FusedMatMul: oneDNN: " + std::string(e.what()));
    }
    return OkStatus();
  }

 private:
  // The primitive for B [K, N] with rows `b_stride` floats apart, for any number of
  // A's rows (DNNL_RUNTIME_DIM_VAL: a sequence length or batch that changes from call
  // to call compiles nothing new), and for the compute threads of the calling scope:
  // oneDNN's matmul keeps the thread count it was created under and starts that many
  // on every call, so a product scoped to one thread (ThreadsForMacs) needs a
  // primitive created under one thread (a decode step's products were twice as slow
  // with a primitive made under two). Compiled on first use or by Prepack (at most
  // kMaxCached kept; all dropped when full). Throws dnnl::error.
  DnnlMatMul* FindOrCompile(int64_t k, int64_t n, bool has_bias, int64_t b_stride) {
    const std::array<int64_t, 5> key = {k, n, int64_t{has_bias}, b_stride, CpuComputeThreads()};
    auto it = cache_.find(key);
    if (it != cache_.end()) return &it->second;
    if (!engine_) {
      engine_ = std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0);
      stream_ = std::make_unique<dnnl::stream>(*engine_);
    }
    using dnnl::memory;
    const auto f32 = memory::data_type::f32;
    const auto ab = memory::format_tag::ab;
    DnnlMatMul mm;
    const memory::dim rows = DNNL_RUNTIME_DIM_VAL;
    mm.src = memory::desc({rows, k}, f32, memory::dims{k, 1});
    mm.weights = memory::desc({k, n}, f32, memory::dims{b_stride, 1});
    mm.bias = memory::desc({1, n}, f32, ab);
    mm.dst = memory::desc({rows, n}, f32, memory::dims{n, 1});
    auto desc = has_bias ? dnnl::matmul::desc(mm.src, mm.weights, mm.bias, mm.dst)
                         : dnnl::matmul::desc(mm.src, mm.weights, mm.dst);
    dnnl::post_ops post_ops;
    AppendActivation(post_ops, epilogue_);
    dnnl::primitive_attr pattr;
    pattr.set_post_ops(post_ops);
    mm.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, pattr, *engine_));
    if (cache_.size() >= kMaxCached) cache_.clear();
    return &cache_.emplace(key, std::move(mm)).first->second;
  }

  static constexpr size_t kMaxCached = 16;
  ConvEpilogue epilogue_;
  std::unique_ptr<dnnl::engine> engine_;
  std::unique_ptr<dnnl::stream> stream_;
  std::map<std::array<int64_t, 5>, DnnlMatMul> cache_;
  Float32Constants f32_constants_;  // float16 weights, widened once.
  PaddedConstantB padded_b_;
  std::optional<PaddedConstantB::Prepacked> prepacked_b_;  // by Prepack, for the bias's turn
};

// ---------------------------------------------------------------------------
// Gemm.

constexpr std::string_view kGemm = "Gemm";

}  // namespace

StatusOr<GemmAttrs> ParseGemmAttrs(const Attributes& attrs) {
  auto wrap = [](const Status& s) { return OpError(kGemm, s.message()); };
  GemmAttrs g;
  StatusOr<float> alpha = attrs.Float("alpha", 1.0f);
  if (!alpha.ok()) return wrap(alpha.status());
  StatusOr<float> beta = attrs.Float("beta", 1.0f);
  if (!beta.ok()) return wrap(beta.status());
  StatusOr<int64_t> ta = attrs.Int("transA", 0);
  if (!ta.ok()) return wrap(ta.status());
  StatusOr<int64_t> tb = attrs.Int("transB", 0);
  if (!tb.ok()) return wrap(tb.status());
  if ((*ta != 0 && *ta != 1) || (*tb != 0 && *tb != 1)) {
    return OpError(kGemm, "transA and transB must be 0 or 1");
  }
  g.alpha = *alpha;
  g.beta = *beta;
  g.trans_a = *ta == 1;
  g.trans_b = *tb == 1;
  return g;
}

namespace {

bool GemmType(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 ||
         dt == DType::kInt32 || dt == DType::kInt64 || dt == DType::kUint32 || dt == DType::kUint64;
}

struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  bool has_c = false;
  int64_t c_rows = 1, c_cols = 1;  // C seen as [c_rows, c_cols], each 1 or M / N.
};

StatusOr<GemmShape> ComputeGemmShape(const GemmAttrs& g, std::span<const ShapeFnArg> in) {
  const ShapeFnArg& a = in[0];
  const ShapeFnArg& b = in[1];
  if (!GemmType(a.dtype)) {
    return OpError(kGemm, "unsupported dtype " + std::string(DTypeName(a.dtype)));
  }
  if (b.dtype != a.dtype) {
    return OpError(kGemm, "A is " + std::string(DTypeName(a.dtype)) + ", B is " +
                              std::string(DTypeName(b.dtype)));
  }
  if (a.shape.size() != 2 || b.shape.size() != 2) {
    return OpError(kGemm, "A and B must be 2-D, got " + ShapeToString(a.shape) + " and " +
                              ShapeToString(b.shape));
  }
  GemmShape s;
  s.m = g.trans_a ? a.shape[1] : a.shape[0];
  s.k = g.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = g.trans_b ? b.shape[1] : b.shape[0];
  s.n = g.trans_b ? b.shape[0] : b.shape[1];
  if (kb != s.k) {
    return OpError(kGemm, "inner dims differ: A " + ShapeToString(a.shape) + " (transA " +
                              std::to_string(g.trans_a) + "), B " + ShapeToString(b.shape) +
                              " (transB " + std::to_string(g.trans_b) + ")");
  }
  if (in.size() > 2 && in[2].present) {
    const ShapeFnArg& c = in[2];
    if (c.dtype != a.dtype) {
      return OpError(kGemm, "C is " + std::string(DTypeName(c.dtype)) + ", A is " +
                                std::string(DTypeName(a.dtype)));
    }
    if (c.shape.size() > 2) {
      return OpError(kGemm, "C must have rank <= 2, got " + ShapeToString(c.shape));
    }
    s.has_c = true;
    if (c.shape.size() >= 1) s.c_cols = c.shape.back();
    if (c.shape.size() == 2) s.c_rows = c.shape[0];
    if ((s.c_rows != 1 && s.c_rows != s.m) || (s.c_cols != 1 && s.c_cols != s.n)) {
      return OpError(kGemm, "C " + ShapeToString(c.shape) + " does not broadcast to [" +
                                std::to_string(s.m) + ", " + std::to_string(s.n) + "]");
    }
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(kGemm, Shape{s.m, s.n}).status());
  return s;
}

StatusOr<std::vector<TensorInfo>> InferGemm(const Attributes& attrs,
                                            std::span<const ShapeFnArg> in) {
  if (in.size() < 2) return OpError(kGemm, "expects inputs A and B");
  REMEX_ASSIGN_OR_RETURN(GemmAttrs g, ParseGemmAttrs(attrs));
  REMEX_ASSIGN_OR_RETURN(GemmShape s, ComputeGemmShape(g, in));
  return std::vector<TensorInfo>{{in[0].dtype, Shape{s.m, s.n}}};
}

OpDef GemmDef() {
  OpDef def;
  def.name = std::string(kGemm);
  def.since_version = 7;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.infer = InferGemm;
  def.traits.tunable = {{"cublaslt_algo", 0, kCublasLtAlgoCount - 1}};
  return def;
}

// Gemm on a plain loop for the types sgemm does not take.
template <typename T>
void GemmGeneric(const GemmAttrs& g, const GemmShape& s, const T* a, const T* b, const T* c, T* y) {
  using C = ComputeType<T>;
  using Acc = std::conditional_t<std::is_integral_v<C>, uint64_t, C>;
  const int64_t m = s.m, k = s.k, n = s.n;
  // B' as [K, N] row-major: copy when transposed so the inner loop runs along rows.
  std::vector<T> bt;
  const T* bp = b;
  if (g.trans_b) {
    bt.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) bt[p * n + j] = b[j * k + p];
    }
    bp = bt.data();
  }
  std::vector<Acc> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(Load(g.trans_a ? a[p * m + i] : a[i * k + p]));
      const T* brow = bp + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<Acc>(Load(brow[j]));
    }
    for (int64_t j = 0; j < n; ++j) {
      const C cv =
          s.has_c ? Load(c[(s.c_rows == 1 ? 0 : i) * s.c_cols + (s.c_cols == 1 ? 0 : j)]) : C(0);
      if constexpr (std::is_integral_v<C>) {
        if (g.alpha == 1.0f && g.beta == 1.0f) {
          y[i * n + j] = static_cast<T>(row[j] + static_cast<uint64_t>(cv));
        } else {
          const double v =
              static_cast<double>(g.alpha) * static_cast<double>(static_cast<C>(row[j])) +
              static_cast<double>(g.beta) * static_cast<double>(cv);
          constexpr double lo = static_cast<double>(std::numeric_limits<C>::lowest());
          constexpr double hi = static_cast<double>(std::numeric_limits<C>::max());
          y[i * n + j] = std::isnan(v) ? T(0)
                         : v <= lo     ? std::numeric_limits<C>::lowest()
                         : v >= hi     ? std::numeric_limits<C>::max()
                                       : static_cast<T>(v);
        }
      } else {
        C v = static_cast<C>(g.alpha) * row[j];
        if (s.has_c) v += static_cast<C>(g.beta) * cv;
        y[i * n + j] = Store<T>(v);
      }
    }
  }
}

class GemmKernel final : public ValidatedKernel, public ConstantPrepacker {
 public:
  // Float16 constants (B, C) widened to float32 at the load.
  void Prepack(size_t, const TensorRef& constant) override { (void)f32_constants_.Prepack(constant); }
  static StatusOr<std::unique_ptr<GemmKernel>> Create(const OpDef& def, const Attributes& attrs) {
    REMEX_ASSIGN_OR_RETURN(GemmAttrs parsed, ParseGemmAttrs(attrs));
    return std::make_unique<GemmKernel>(def, attrs, std::move(parsed));
  }
  GemmKernel(const OpDef& def, const Attributes& attrs, GemmAttrs parsed)
      : ValidatedKernel(def, attrs), attrs_(std::move(parsed)) {
    WarmUpGemm();
  }

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (in[0].dtype == DType::kFloat16) {  // float32 copies: sgemm, one rounding per output
      return RunAsFloat32(
          in, out, [&](std::span<const TensorRef> i, std::span<const TensorRef> o) { return Run(i, o); },
          &f32_constants_);
    }
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(GemmShape s, ComputeGemmShape(attrs_, args));
    if (s.m == 0 || s.n == 0) return OkStatus();
    const void* c = s.has_c ? in[2].data : nullptr;
    if (in[0].dtype != DType::kFloat32) {
      return DispatchNumeric(op(), in[0].dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        GemmGeneric<T>(attrs_, s, DataAs<const T>(in[0]), DataAs<const T>(in[1]),
                       static_cast<const T*>(c), DataAs<T>(out[0]));
        return OkStatus();
      });
    }
    float* y = DataAs<float>(out[0]);
    const float* cf = static_cast<const float*>(c);
    // Y = C broadcast (or 0), then Y = alpha * A' * B' + beta * Y.
    for (int64_t i = 0; i < s.m; ++i) {
      float* yr = y + i * s.n;
      if (!s.has_c) {
        std::fill(yr, yr + s.n, 0.0f);
      } else {
        const float* cr = cf + (s.c_rows == 1 ? 0 : i) * s.c_cols;
        if (s.c_cols == 1) {
          std::fill(yr, yr + s.n, cr[0]);
        } else {
          std::memcpy(yr, cr, sizeof(float) * s.n);
        }
      }
    }
    const float beta = s.has_c ? attrs_.beta : 0.0f;
    if (s.k == 0) {
      for (int64_t i = 0; i < s.m * s.n; ++i) y[i] *= beta;
      return OkStatus();
    }
    dnnl::status st =
        dnnl::sgemm(attrs_.trans_a ? 'T' : 'N', attrs_.trans_b ? 'T' : 'N', s.m, s.n, s.k,
                    attrs_.alpha, DataAs<const float>(in[0]), attrs_.trans_a ? s.m : s.k,
                    DataAs<const float>(in[1]), attrs_.trans_b ? s.k : s.n, beta, y, s.n);
    if (st != dnnl::status::success) {
      return Internal("Gemm: oneDNN sgemm failed with status " +
                      std::to_string(static_cast<int>(st)));
    }
    return OkStatus();
  }

 private:
  GemmAttrs attrs_;
  Float32Constants f32_constants_;  // float16 weights, widened once.
};

}  // namespace

Status AddMatMulOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(MatMulDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(FusedMatMulDef()));
  return registry.AddOp(GemmDef());
}

Status AddMatMulCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<MatMulKernel>(registry, "MatMul"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<FusedMatMulKernel>(registry, kFusedMatMul));
  return AddCpuKernel<GemmKernel>(registry, "Gemm");
}

}  // namespace remex::kernels::internal
