// Private helpers shared by the op implementations of the kernel library.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/scalar_ops.h"

// A hot loop compiled for AVX-512 and AVX2 as well, picked at load time by the CPU
// (GCC function multiversioning); the baseline build targets x86-64 (SSE2). Only the
// function's own body is cloned: lambdas in it are not.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define REMEX_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define REMEX_CPU_CLONES
#endif

namespace remex::kernels::internal {

// d[0, len) = FusedElementwise's opcode `op` over a, b and c in float32, in the
// operand order of kernels/ops/fused/fused.h (b and c null where the opcode takes fewer
// operands; `b_uniform`: every b[i] is b[0]), each element as kernels/scalar_ops.h's
// functor computes it: the FusedElementwise kernel's loops (kernels/ops/fused/fused.cc),
// compiled for AVX-512 and AVX2 as well, which the unary kernels share.
void ExecFusedOpcode(FusedOpcode op, const float* a, const float* b, const float* c, float* d, int64_t len,
                     bool b_uniform);

// Runs f(begin, end, part) over [0, n) split into at most CpuComputeThreads() contiguous
// parts of at least `grain` indices each, on the OpenMP team oneDNN uses (one pool for
// every CPU kernel; kernels/cpu_threads.cc), and returns when all are done. `part` <
// ParallelParts(n, grain) numbers the part (for per-part scratch). With one part (small
// n, one thread, or when called from inside a team), f runs on the calling thread.
// `f` must not throw.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end, int part)>& f);
// The number of parts ParallelFor(n, grain, f) splits into.
int ParallelParts(int64_t n, int64_t grain);

// Limits the calling thread's compute threads (the OpenMP team oneDNN forks) to at most
// `threads` (0: no limit) until destroyed, then restores them. For small primitives, where forking
// the team costs more than it saves. oneDNN expects a primitive to run with the thread
// count it was created with: hold the same limit around both.
class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int threads);
  ~ScopedComputeThreads();
  ScopedComputeThreads(const ScopedComputeThreads&) = delete;
  ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

 private:
  int saved_;
};

// Compute threads for a oneDNN primitive of `macs` multiply-adds: one below
// kSmallPrimitiveMacs, else all of CpuComputeThreads().
inline constexpr int64_t kSmallPrimitiveMacs = int64_t{1} << 21;
int ThreadsForMacs(int64_t macs);

// INVALID_ARGUMENT "<op>: <message>".
Status OpError(std::string_view op, std::string_view message);

// Per-group registration, called by RegisterOpDefs / RegisterCpuKernels: for each
// row REMEX_CPU_GROUP(family, Name) of kernels/ops/families.def (which says what each
// group holds), AddNameOpDefs and AddNameCpuKernels.
#define REMEX_CPU_GROUP(family, name)                 \
  Status Add##name##OpDefs(KernelRegistry& registry); \
  Status Add##name##CpuKernels(KernelRegistry& registry);
#include "kernels/ops/families.def"

// Dropout's training mode (kernels/ops/elementwise/unary.cc), from its inputs as the shape function
// sees them (Dropout-12+: data, ratio, training_mode; ratio and training_mode with
// their data): nullopt when nothing is dropped (no training_mode, training_mode false,
// or ratio 0), else the ratio, in (0, 1). INVALID_ARGUMENT "Dropout: ..." for ratio or
// training_mode of the wrong dtype or not one element, a ratio outside [0, 1) in
// training mode, or data of a non-float dtype in training mode.
StatusOr<std::optional<double>> DropoutTrainingRatio(std::span<const ShapeFnArg> in);
// Dropout's `seed` attribute, nullopt when absent (or not an int, which Dropout's shape
// function refuses before any kernel runs).
inline std::optional<int64_t> DropoutSeedOf(const Attributes& attrs) {
  if (!attrs.Has("seed")) return std::nullopt;
  StatusOr<int64_t> seed = attrs.Int("seed");
  return seed.ok() ? std::optional<int64_t>(*seed) : std::nullopt;
}


// ---------------------------------------------------------------------------
// Shapes.

// Numpy multidirectional broadcast of two shapes; INVALID_ARGUMENT naming `op`.
StatusOr<Shape> BroadcastShapes(std::string_view op, const Shape& a, const Shape& b);

// Element count with overflow and negative-dimension checks.
StatusOr<int64_t> CheckedNumElements(std::string_view op, const Shape& shape);

// Normalises `axis` in [-rank, rank) to [0, rank).
StatusOr<int64_t> NormalizeAxis(std::string_view op, int64_t axis, int64_t rank,
                                std::string_view what = "axis");

// Reads an int32 or int64 tensor's values (host memory) as int64.
StatusOr<std::vector<int64_t>> ReadIndexTensor(std::string_view op, std::string_view what,
                                               DType dtype, const Shape& shape, const void* data);

// numpy.matmul's shapes (MatMul-13 and the integer matmuls): A [..., m, k] (a 1-D A is
// [1, k] with m dropped from the output), B [..., k, n] (1-D: [k, 1], n dropped); the
// batch dims broadcast. INVALID_ARGUMENT "<op>: ..." for rank 0, differing k or batch
// dims that do not broadcast.
struct MatMulDims {
  int64_t m = 0, k = 0, n = 0;
  Shape batch;    // Broadcast batch dims.
  Shape a_batch;  // A's batch dims, left-padded with 1 to batch's rank.
  Shape b_batch;
  Shape output;
};
StatusOr<MatMulDims> MatMulDimsOf(std::string_view op, const Shape& a_shape, const Shape& b_shape);

// Sliding-window geometry of Conv and the pooling ops, per spatial dimension.
struct WindowGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;  // May differ from the attribute with ceil_mode.
  std::vector<int64_t> output;
};

// Window attributes as ONNX names them (shared by Conv and MaxPool).
struct WindowAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape;  // Empty: taken from the weights (Conv).
  std::vector<int64_t> strides;       // Empty: all 1.
  std::vector<int64_t> dilations;     // Empty: all 1.
  std::vector<int64_t> pads;          // Empty: all 0. [begin..., end...].
  bool ceil_mode = false;
};

// Reads auto_pad, kernel_shape, strides, dilations, pads (and ceil_mode when
// `with_ceil_mode`) and checks their values (positive strides and dilations,
// non-negative pads, known auto_pad).
StatusOr<WindowAttrs> ParseWindowAttrs(std::string_view op, const Attributes& attrs,
                                       bool with_ceil_mode);

// Output extents and effective pads for `input` spatial extents and `kernel`.
// INVALID_ARGUMENT when attribute lengths do not match the spatial rank or the
// output would be empty or negative.
StatusOr<WindowGeometry> ComputeWindowGeometry(std::string_view op, const WindowAttrs& attrs,
                                               std::span<const int64_t> input,
                                               std::span<const int64_t> kernel);

// Conv's channel and window checks (Conv-11 and the integer convolutions) on
// channels-first X [N, C, D1 (, D2 (, D3))] and W [M, C / group, k1 (, k2 (, k3))]:
// ranks 3 to 5, C and M divisible by group, W's input channels, kernel_shape (when set)
// equal to W's. `output` is [N, M, O1 ...]. INVALID_ARGUMENT "<op>: ...".
struct ConvDims {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry geometry;
  Shape output;
};
StatusOr<ConvDims> ConvDimsOf(std::string_view op, const WindowAttrs& window, int64_t group, const Shape& x,
                              const Shape& w);

bool IsFloatType(DType dtype);    // float16, float32, float64.
bool IsNumericType(DType dtype);  // Every DType but bool and undefined.

// ---------------------------------------------------------------------------
// Kernels.

// Views TensorRefs as shape-function arguments (data included: CPU memory).
std::vector<ShapeFnArg> ToShapeArgs(std::span<const TensorRef> inputs);

// Row-major element strides of a tensor of dims `shape`: the last dim's is 1, each
// other dim's is the product of the dims after it.
std::vector<int64_t> RowMajorStrides(std::span<const int64_t> shape);

// Checks that the kernel got what the op's shape function expects: input count,
// each present input has data (unless empty), and `outputs` match the inferred
// dtypes and shapes.
Status CheckAgainstShapeFn(const OpDef& def, const Attributes& attrs,
                           std::span<const TensorRef> inputs, std::span<const TensorRef> outputs);

// A CPU kernel that validates inputs and outputs against the op's definition
// before running `Run`. Subclasses implement Run only.
class ValidatedKernel : public OpKernel {
 public:
  // `def` is the registry's OpDef (KernelMake), which outlives the kernel.
  ValidatedKernel(const OpDef& def, const Attributes& attrs) : def_(def), attrs_(attrs) {}

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) final;

 protected:
  virtual Status Run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) = 0;
  const std::string& op() const { return def_.name; }
  const Attributes& attrs() const { return attrs_; }

 private:
  // Whether this call's dtypes, shapes and data presence equal those of the last call
  // that passed CheckAgainstShapeFn. For an op whose shape function reads no input's
  // values the check's verdict depends on nothing else.
  bool SameAsLastChecked(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs);

  const OpDef& def_;
  const Attributes attrs_;
  const bool shape_only_ = [this] {
    for (ShapeDep d : def_.input_deps) {
      if (d == ShapeDep::kData) return false;
    }
    return true;
  }();
  // The last checked call: inputs then outputs, `data` null or not (never dereferenced).
  std::vector<TensorRef> last_checked_;
  bool has_last_checked_ = false;
};

// The factory of kernel K, created in one step: K::Create(def, attrs, args...) when K
// declares it (a kernel that parses attributes: it returns
// StatusOr<std::unique_ptr<K>>, INVALID_ARGUMENT / UNIMPLEMENTED for attributes it
// refuses), else K(def, attrs, args...) (a kernel whose creation cannot fail). `def` is
// the registry's OpDef (KernelMake): K may hold it by reference.
template <typename K, typename... Args>
KernelMake MakeKernel(Args... args) {
  return [args...](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
    if constexpr (requires { K::Create(def, attrs, args...); }) {
      StatusOr<std::unique_ptr<K>> kernel = K::Create(def, attrs, args...);
      if (!kernel.ok()) return kernel.status();
      return std::unique_ptr<OpKernel>(std::move(*kernel));
    } else {
      return std::unique_ptr<OpKernel>(std::make_unique<K>(def, attrs, args...));
    }
  };
}

// The since_version of the only entry of `op` in `registry`; FAILED_PRECONDITION
// "<registrar>: op <op> has no OpDef ..." when it has none, or "... has entries for
// opsets ..." when it has several (each then needs its kernel registered by its
// since_version).
StatusOr<int> OnlyEntrySince(const KernelRegistry& registry, std::string_view op, std::string_view registrar);

// Registers kernel K (MakeKernel<K>()) as the CPU kernel of the entry of `op` that
// starts at `since_version`; FAILED_PRECONDITION when there is no such entry.
template <typename K>
Status AddCpuKernel(KernelRegistry& registry, std::string_view op, int since_version) {
  return registry.AddKernel(op, since_version, DeviceKind::kCpu, MakeKernel<K>());
}
// The same for an op with a single entry (OnlyEntrySince).
template <typename K>
Status AddCpuKernel(KernelRegistry& registry, std::string_view op) {
  REMEX_ASSIGN_OR_RETURN(const int since, OnlyEntrySince(registry, op, "RegisterCpuKernels"));
  return AddCpuKernel<K>(registry, op, since);
}

// ---------------------------------------------------------------------------
// Element types.

template <typename T>
struct TypeTag {
  using type = T;
};

// The type arithmetic runs in: float for Half, T otherwise.
template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, Half>, float, T>;

template <typename T>
inline ComputeType<T> Load(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return HalfToFloat(v);
  } else {
    return v;
  }
}

template <typename T>
inline T Store(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, Half>) {
    return FloatToHalf(v);
  } else {
    return v;
  }
}

// Calls f(TypeTag<T>{}) for the C++ type of `dtype`. bool maps to bool. Returns
// UNIMPLEMENTED naming `op` for kUndefined or unknown values.
template <typename F>
Status DispatchAllTypes(std::string_view op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: return f(TypeTag<double>{});
    case DType::kFloat16: return f(TypeTag<Half>{});
    case DType::kInt8: return f(TypeTag<int8_t>{});
    case DType::kInt16: return f(TypeTag<int16_t>{});
    case DType::kInt32: return f(TypeTag<int32_t>{});
    case DType::kInt64: return f(TypeTag<int64_t>{});
    case DType::kUint8: return f(TypeTag<uint8_t>{});
    case DType::kUint16: return f(TypeTag<uint16_t>{});
    case DType::kUint32: return f(TypeTag<uint32_t>{});
    case DType::kUint64: return f(TypeTag<uint64_t>{});
    case DType::kBool: return f(TypeTag<bool>{});
    default: break;
  }
  return Unimplemented(std::string(op) + ": unsupported dtype " + std::string(DTypeName(dtype)));
}

// DispatchAllTypes and bfloat16 (BFloat16), which only Cast and CastLike convert.
template <typename F>
Status DispatchCastTypes(std::string_view op, DType dtype, F&& f) {
  if (dtype == DType::kBFloat16) return f(TypeTag<BFloat16>{});
  return DispatchAllTypes(op, dtype, std::forward<F>(f));
}

// Like DispatchAllTypes without bool.
template <typename F>
Status DispatchNumeric(std::string_view op, DType dtype, F&& f) {
  if (dtype == DType::kBool) {
    return Unimplemented(std::string(op) + ": unsupported dtype bool");
  }
  return DispatchAllTypes(op, dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return Internal("unreachable");
    } else {
      return f(tag);
    }
  });
}

// Float types only (float16, float32, float64).
template <typename F>
Status DispatchFloat(std::string_view op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: return f(TypeTag<double>{});
    case DType::kFloat16: return f(TypeTag<Half>{});
    default: break;
  }
  return Unimplemented(std::string(op) + ": unsupported dtype " + std::string(DTypeName(dtype)) +
                       " (float types only)");
}

template <typename T>
inline T* DataAs(const TensorRef& t) {
  return static_cast<T*>(t.data);
}

// "float32, int64" for error messages.
std::string DTypeList(std::span<const DType> dtypes);

}  // namespace remex::kernels::internal
