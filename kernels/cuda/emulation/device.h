// The device side of the CUDA emulation: the execution-space keywords, dim3 and the
// built-in index variables, __syncthreads, warp shuffles and votes, atomics and the
// intrinsics the kernels call, all on the host. Semantics follow the CUDA C++
// Programming Guide (CUDA 12): a block's threads are fibers (kernels/cuda/emulation/
// grid.h) that switch at every barrier and shuffle, so a missing __syncthreads shows as
// a wrong result, and a barrier or full-mask shuffle that not every (live) thread of
// the block or warp reaches is a launch failure instead of a hang. Included by
// <cuda_runtime.h> under emulation.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/emulation/half.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
// Per-thread storage shared by the fibers of the block running on this host thread;
// blocks run one after another on a host thread, so each block sees its own.
#define __shared__ static thread_local
#define __launch_bounds__(...)

struct uint3 {
  unsigned x, y, z;
};
// The vector types the kernels use, aligned as in CUDA's vector_types.h.
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// The built-in variables of the thread the calling fiber runs.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
constexpr int warpSize = 32;

// CUDA's math library declares these in the global namespace.
using std::isfinite;
using std::isinf;
using std::isnan;

// CUDA's global min and max for two values of one arithmetic type (its mixed-type
// overloads are not emulated); for floating point they are fminf / fmaxf (a NaN
// operand yields the other).
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
T min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmin(a, b);
  } else {
    return b < a ? b : a;
  }
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
T max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmax(a, b);
  } else {
    return a < b ? b : a;
  }
}

namespace remex::cuda_emulation {
// Barrier of the calling thread's block (__syncthreads).
void BlockBarrier();
// Exchanges `bits` within the calling thread's warp: every lane in `mask` publishes its
// value and receives lane `src_lane`'s (each lane's own when src_lane is out of the
// mask). `op` names the intrinsic for errors.
uint64_t WarpExchange(unsigned mask, uint64_t bits, int src_lane, const char* op);
// __ballot_sync: bit i set when lane i's predicate is true.
unsigned WarpBallot(unsigned mask, bool predicate);
// The calling thread's lane (threadIdx linearised, mod 32).
int LaneId();

template <typename T>
T WarpShuffle(unsigned mask, T v, int src_lane, const char* op) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = WarpExchange(mask, bits, src_lane, op);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace remex::cuda_emulation

inline void __syncthreads() { remex::cuda_emulation::BlockBarrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)remex::cuda_emulation::WarpExchange(mask, 0, 0, "__syncwarp");
}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  const int lane = remex::cuda_emulation::LaneId();
  return remex::cuda_emulation::WarpShuffle(mask, v, (lane & ~(width - 1)) + (src_lane & (width - 1)),
                                            "__shfl_sync");
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  const int lane = remex::cuda_emulation::LaneId();
  int src = lane ^ lane_mask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return remex::cuda_emulation::WarpShuffle(mask, v, src, "__shfl_xor_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = remex::cuda_emulation::LaneId();
  const int src = lane + static_cast<int>(delta);
  return remex::cuda_emulation::WarpShuffle(
      mask, v,
      ((src & (width - 1)) < (lane & (width - 1))) || (src & ~(width - 1)) != (lane & ~(width - 1)) ? lane
                                                                                                    : src,
      "__shfl_down_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = remex::cuda_emulation::LaneId();
  const int src = lane - static_cast<int>(delta);
  return remex::cuda_emulation::WarpShuffle(mask, v, (src < (lane & ~(width - 1))) ? lane : src,
                                            "__shfl_up_sync");
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return remex::cuda_emulation::WarpBallot(mask, predicate != 0);
}
inline int __all_sync(unsigned mask, int predicate) {
  return remex::cuda_emulation::WarpBallot(mask, predicate != 0) ==
         remex::cuda_emulation::WarpBallot(mask, true);
}
inline int __any_sync(unsigned mask, int predicate) {
  return remex::cuda_emulation::WarpBallot(mask, predicate != 0) != 0;
}

// Atomics: a block's threads are fibers of one host thread and blocks of one launch
// run on one host thread, so a plain read-modify-write is atomic with respect to every
// other device thread.
template <typename T>
T atomicAdd(T* address, T v) {
  const T old = *address;
  *address = old + v;
  return old;
}
template <typename T>
T atomicMax(T* address, T v) {
  const T old = *address;
  *address = old < v ? v : old;
  return old;
}
template <typename T>
T atomicMin(T* address, T v) {
  const T old = *address;
  *address = v < old ? v : old;
  return old;
}
template <typename T>
T atomicExch(T* address, T v) {
  const T old = *address;
  *address = v;
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T v) {
  const T old = *address;
  if (old == compare) *address = v;
  return old;
}

// Reinterpretations and correctly rounded arithmetic (never contracted: the emulation
// sources compile with -ffp-contract=off).
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, sizeof(f));
  return f;
}
inline float __uint_as_float(unsigned v) {
  float f;
  std::memcpy(&f, &v, sizeof(f));
  return f;
}
inline int __float_as_int(float f) {
  int v;
  std::memcpy(&v, &f, sizeof(v));
  return v;
}
inline unsigned __float_as_uint(float f) {
  unsigned v;
  std::memcpy(&v, &f, sizeof(v));
  return v;
}
inline long long __double_as_longlong(double d) {
  long long v;
  std::memcpy(&v, &d, sizeof(v));
  return v;
}
inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, sizeof(d));
  return d;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
