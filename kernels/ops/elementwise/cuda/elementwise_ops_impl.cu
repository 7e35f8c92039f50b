// Device code of the elementwise family's ops beyond Add, Sub, Mul, Div, Relu and
// Sigmoid (elementwise_ops_impl.h; ONNX semantics as kernels/ops/elementwise/unary.cc,
// elementwise.cc: LeakyRelu-16, HardSigmoid-6, HardSwish-14, Swish-24, Gelu-20, Tanh-13, Exp-13, Log-13,
// Erf-13, Sqrt-13, Neg-13, Abs-13, Reciprocal-13, Clip-13, Pow-15, PRelu-16, Max-13,
// Min-13, Equal-13, Less-13, Greater-13, And-7, Or-7, Not-1, BitShift-11). Includes only
// CUDA and plain headers.
//
// Grid-stride loops over the output; broadcasting through the BroadcastPlan of
// kernels/cuda/broadcast.h; float formulas from kernels/scalar_ops.h. float16 is
// computed in float and stored rounded to nearest even; integer comparisons and
// Max/Min compare the integers themselves. Compiled without fused multiply-adds
// (cuda/sources.cmake), so HardSigmoid and HardSwish round as the CPU kernels do; tanh,
// exp, log, erf and pow are CUDA's (within 2 ulp).

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/broadcast_index.cuh"
#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/ops/elementwise/cuda/elementwise_ops_impl.h"
#include "kernels/ops/tensor/index_ops.h"
#include "kernels/scalar_ops.h"

namespace remex::kernels::cuda {
namespace {

// The value an element compares or computes as: float for float16, else itself.
__device__ __forceinline__ float Value(float v) { return v; }
__device__ __forceinline__ float Value(__half v) { return __half2float(v); }
__device__ __forceinline__ int32_t Value(int32_t v) { return v; }
__device__ __forceinline__ int64_t Value(int64_t v) { return v; }

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  return static_cast<float>(Value(v));
}

// ---------------------------------------------------------------------------
// Unary.

// y = F(x) with the op's parameters as F takes them; F is the kernels/scalar_ops.h
// functor, which the CPU kernels share.
template <typename T, typename F>
__global__ void UnaryKernel(const T* x, T* y, int64_t n, float alpha, float beta) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float v = Load(x[i]);
    if constexpr (std::is_invocable_v<F, float, float, float>) {
      y[i] = Store<T>(F()(v, alpha, beta));
    } else if constexpr (std::is_invocable_v<F, float, float>) {
      y[i] = Store<T>(F()(v, alpha));
    } else {
      y[i] = Store<T>(F()(v));
    }
  }
}

template <typename T>
cudaError_t LaunchUnaryTyped(NnUnaryOp op, const void* x, void* y, int64_t n, float alpha, float beta,
                             cudaStream_t stream) {
  const T* tx = static_cast<const T*>(x);
  T* ty = static_cast<T*>(y);
  const unsigned blocks = Blocks(n);
#define REMEX_NN_UNARY_CASE(name)                                                                          \
  case NnUnaryOp::k##name:                                                                                 \
    LaunchKernel<UnaryKernel<T, scalar::name>>(blocks, kThreads, 0, stream, tx, ty, n, alpha, beta); \
    break;
  switch (op) {
    REMEX_NN_UNARY_OPS(REMEX_NN_UNARY_CASE)
    default:
      return cudaErrorInvalidValue;
  }
#undef REMEX_NN_UNARY_CASE
  return cudaGetLastError();
}

template <typename T>
__global__ void ClipKernel(const T* x, const T* min, const T* max, T* y, int64_t n) {
  const float lo = min ? Load(*min) : -INFINITY;
  const float hi = max ? Load(*max) : INFINITY;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = Store<T>(scalar::Clip()(Load(x[i]), lo, hi));
}

// ---------------------------------------------------------------------------
// Binary with broadcasting. Functors take the stored values and return the stored
// output.

struct PowOp {
  template <typename A, typename B>
  __device__ A operator()(A a, B b) const {
    return Store<A>(scalar::Pow()(Load(a), ToFloat(b)));
  }
};

struct PReluOp {
  template <typename A>
  __device__ A operator()(A x, A s) const {
    const float v = Load(x);
    return v < 0.0f ? Store<A>(scalar::LeakyRelu()(v, Load(s))) : x;
  }
};

struct AddOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return Store<A>(scalar::Add()(Load(a), Load(b)));
  }
};

template <typename T>
__global__ void ClassifyKernel(const T* x, uint8_t* y, int64_t n, bool inf, bool negative, bool positive) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float v = Load(x[i]);
    y[i] = inf ? scalar::IsInf()(v, negative, positive) : scalar::IsNaN()(v);
  }
}

template <typename T>
__global__ void DivideKernel(T* y, int64_t n, float divisor) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = Store<T>(Load(y[i]) / divisor);
}

// Mod: scalar::Fmod (kFmod) or scalar::Mod in the element's compute type (float for
// float16). An integer divisor of 0 gives 0 (the CPU kernel refuses it; the divisors
// stay on the GPU).
template <bool kFmod>
struct ModOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    const auto x = Value(a);
    const auto y = Value(b);
    using V = decltype(x);
    if constexpr (!std::is_floating_point_v<V>) {
      if (y == V(0)) return A{};
    }
    const V r = kFmod ? scalar::Fmod()(x, y) : scalar::Mod()(x, y);
    if constexpr (std::is_same_v<A, __half>) {
      return Store<A>(r);
    } else {
      return static_cast<A>(r);
    }
  }
};

template <bool kMax>
struct MinMaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    const auto x = Value(a);
    const auto y = Value(b);
    if (IsNan(x)) return a;
    if constexpr (kMax) {
      return x > y ? a : b;
    } else {
      return x < y ? a : b;
    }
  }
};

template <NnBinaryOp kOp>
struct CompareOp {
  template <typename A>
  __device__ uint8_t operator()(A a, A b) const {
    const auto x = Value(a);
    const auto y = Value(b);
    if constexpr (kOp == NnBinaryOp::kEqual) return x == y;
    if constexpr (kOp == NnBinaryOp::kLess) return x < y;
    if constexpr (kOp == NnBinaryOp::kLessOrEqual) return x <= y;
    if constexpr (kOp == NnBinaryOp::kGreaterOrEqual) return x >= y;
    return x > y;
  }
};

// Bool bytes: any nonzero byte is true.
template <NnBinaryOp kOp>
struct LogicalOp {
  __device__ uint8_t operator()(uint8_t a, uint8_t b) const {
    if constexpr (kOp == NnBinaryOp::kAnd) return (a != 0) & (b != 0);
    if constexpr (kOp == NnBinaryOp::kOr) return (a != 0) | (b != 0);
    if constexpr (kOp == NnBinaryOp::kXor) return (a != 0) != (b != 0);
    return (a != 0) == (b != 0);  // Equal on bool.
  }
};

template <typename A, typename B, typename O, typename F>
__global__ void BroadcastKernel(const A* a, const B* b, O* out, int64_t n, BroadcastPlan plan, F f) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t ia = 0;
    int64_t ib = 0;
    if (plan.rank == 1) {
      ia = i * plan.a_strides[0];
      ib = i * plan.b_strides[0];
    } else {
      BroadcastOffsets(plan, i, ia, ib);
    }
    out[i] = f(a[ia], b[ib]);
  }
}

template <typename A, typename B, typename O, typename F>
cudaError_t Broadcast(F f, const void* a, const void* b, void* out, int64_t n, const BroadcastPlan& plan,
                      cudaStream_t stream) {
  LaunchKernel<BroadcastKernel<A, B, O, F>>(Blocks(n), kThreads, 0, stream, static_cast<const A*>(a),
                                            static_cast<const B*>(b), static_cast<O*>(out), n, plan, f);
  return cudaGetLastError();
}

// Broadcast<A, A, O> of F<kOp> for the kOp among kOps that is `op`;
// cudaErrorInvalidValue when none is.
template <template <NnBinaryOp> class F, typename A, typename O, NnBinaryOp... kOps>
cudaError_t BroadcastAmong(NnBinaryOp op, const void* a, const void* b, void* out, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream) {
  cudaError_t result = cudaErrorInvalidValue;
  (void)((op == kOps && (result = Broadcast<A, A, O>(F<kOps>{}, a, b, out, n, plan, stream), true)) || ...);
  return result;
}

__global__ void NotKernel(const uint8_t* x, uint8_t* y, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = x[i] == 0;
}

// ---------------------------------------------------------------------------
// BitShift (unsigned integers only, so no rounding).

// Calls f(E{}) with the unsigned type of `elem_size` bytes.
template <typename F>
cudaError_t DispatchElemSize(int elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      break;
  }
  return cudaErrorInvalidValue;
}

template <typename U>
__global__ void BitShiftKernel(const U* __restrict__ x, const U* __restrict__ y, U* __restrict__ z, int64_t n,
                               BroadcastPlan plan, bool left) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t ia = 0;
    int64_t ib = 0;
    BroadcastOffsets(plan, i, ia, ib);
    z[i] = index::BitShift<U>(x[ia], y[ib], left);
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchNnUnary(NnUnaryOp op, const T* x, T* y, int64_t n, float alpha, float beta,
                          cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  return LaunchUnaryTyped<DeviceType<T>>(op, x, y, n, alpha, beta, stream);
}

template <typename T>
cudaError_t LaunchClip(const T* x, const T* min, const T* max, T* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<ClipKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x), AsDevice(min),
                                          AsDevice(max), AsDevice(y), n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchNnBinary(NnBinaryOp op, const T* a, const T* b, void* out, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxBroadcastRank) return cudaErrorInvalidValue;
  if constexpr (std::is_same_v<T, bool>) {
    // Bool bytes: any nonzero byte is true.
    return BroadcastAmong<LogicalOp, uint8_t, uint8_t, NnBinaryOp::kEqual, NnBinaryOp::kAnd, NnBinaryOp::kOr,
                          NnBinaryOp::kXor>(op, a, b, out, n, plan, stream);
  } else {
    using A = DeviceType<T>;
    // PRelu and Add (Sum, Mean) take float32 and float16 only.
    constexpr bool kFloat = std::is_same_v<T, float> || std::is_same_v<T, Half>;
    switch (op) {
      case NnBinaryOp::kPRelu:
        if constexpr (kFloat) return Broadcast<A, A, A>(PReluOp{}, a, b, out, n, plan, stream);
        break;
      case NnBinaryOp::kAdd:
        if constexpr (kFloat) return Broadcast<A, A, A>(AddOp{}, a, b, out, n, plan, stream);
        break;
      case NnBinaryOp::kMax:
        return Broadcast<A, A, A>(MinMaxOp<true>{}, a, b, out, n, plan, stream);
      case NnBinaryOp::kMin:
        return Broadcast<A, A, A>(MinMaxOp<false>{}, a, b, out, n, plan, stream);
      case NnBinaryOp::kMod:
        return Broadcast<A, A, A>(ModOp<false>{}, a, b, out, n, plan, stream);
      case NnBinaryOp::kFmod:
        return Broadcast<A, A, A>(ModOp<true>{}, a, b, out, n, plan, stream);
      default:  // The comparisons; Pow (LaunchPow) and the logical ops (bool) are refused.
        return BroadcastAmong<CompareOp, A, uint8_t, NnBinaryOp::kEqual, NnBinaryOp::kLess,
                              NnBinaryOp::kGreater, NnBinaryOp::kLessOrEqual, NnBinaryOp::kGreaterOrEqual>(
            op, a, b, out, n, plan, stream);
    }
    return cudaErrorInvalidValue;
  }
}

template <typename A, typename B>
cudaError_t LaunchPow(const A* a, const B* b, A* out, int64_t n, const BroadcastPlan& plan,
                      cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxBroadcastRank) return cudaErrorInvalidValue;
  return Broadcast<DeviceType<A>, DeviceType<B>, DeviceType<A>>(PowOp{}, a, b, out, n, plan, stream);
}

template <typename T>
cudaError_t LaunchDivideInPlace(T* y, int64_t n, float divisor, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<DivideKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(y), n, divisor);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchClassify(bool inf, bool negative, bool positive, const T* x, bool* y, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<ClassifyKernel<DeviceType<T>>>(Blocks(n), kThreads, 0, stream, AsDevice(x),
                                              reinterpret_cast<uint8_t*>(y), n, inf, negative, positive);
  return cudaGetLastError();
}

cudaError_t LaunchNot(const bool* x, bool* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  LaunchKernel<NotKernel>(Blocks(n), kThreads, 0, stream, reinterpret_cast<const uint8_t*>(x),
                          reinterpret_cast<uint8_t*>(y), n);
  return cudaGetLastError();
}

cudaError_t LaunchBitShift(int elem_size, bool left, const void* x, const void* y, void* z, int64_t n,
                           const BroadcastPlan& plan, cudaStream_t stream) {
  if (n <= 0 || plan.rank < 1 || plan.rank > kMaxBroadcastRank) return cudaErrorInvalidValue;
  return DispatchElemSize(elem_size, [&](auto tag) {
    using U = decltype(tag);
    LaunchKernel<BitShiftKernel<U>>(Blocks(n), kThreads, 0, stream, static_cast<const U*>(x),
                                    static_cast<const U*>(y), static_cast<U*>(z), n, plan, left);
    return cudaGetLastError();
  });
}

#define REMEX_NN_FLOAT_INSTANTIATE(T)                                                                  \
  template cudaError_t LaunchNnUnary<T>(NnUnaryOp, const T*, T*, int64_t, float, float, cudaStream_t); \
  template cudaError_t LaunchClip<T>(const T*, const T*, const T*, T*, int64_t, cudaStream_t);         \
  template cudaError_t LaunchDivideInPlace<T>(T*, int64_t, float, cudaStream_t);                       \
  template cudaError_t LaunchClassify<T>(bool, bool, bool, const T*, bool*, int64_t, cudaStream_t);
#define REMEX_NN_BINARY_INSTANTIATE(T)                                                   \
  template cudaError_t LaunchNnBinary<T>(NnBinaryOp, const T*, const T*, void*, int64_t, \
                                         const BroadcastPlan&, cudaStream_t);
#define REMEX_NN_POW_INSTANTIATE(A, B) \
  template cudaError_t LaunchPow<A, B>(const A*, const B*, A*, int64_t, const BroadcastPlan&, cudaStream_t);
REMEX_NN_FLOAT_INSTANTIATE(float)
REMEX_NN_FLOAT_INSTANTIATE(Half)
REMEX_NN_BINARY_INSTANTIATE(float)
REMEX_NN_BINARY_INSTANTIATE(Half)
REMEX_NN_BINARY_INSTANTIATE(int32_t)
REMEX_NN_BINARY_INSTANTIATE(int64_t)
REMEX_NN_BINARY_INSTANTIATE(bool)
REMEX_NN_POW_INSTANTIATE(float, float)
REMEX_NN_POW_INSTANTIATE(float, Half)
REMEX_NN_POW_INSTANTIATE(float, int32_t)
REMEX_NN_POW_INSTANTIATE(float, int64_t)
REMEX_NN_POW_INSTANTIATE(Half, float)
REMEX_NN_POW_INSTANTIATE(Half, Half)
REMEX_NN_POW_INSTANTIATE(Half, int32_t)
REMEX_NN_POW_INSTANTIATE(Half, int64_t)
#undef REMEX_NN_FLOAT_INSTANTIATE
#undef REMEX_NN_BINARY_INSTANTIATE
#undef REMEX_NN_POW_INSTANTIATE

}  // namespace remex::kernels::cuda
