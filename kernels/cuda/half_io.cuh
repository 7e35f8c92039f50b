// Device-side loads and stores of float32 and float16 elements for the CUDA kernels:
// float16 is computed in float32 and stored rounded to nearest even (as the CPU's
// kernels/float16.h does), and the NaN test of a value in its compute type. Include
// only from .cu files.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/float16.h"

namespace remex::kernels::cuda {

// The device-side type of a launcher's element type T (kernels/cuda/dtype.h): __half for
// Half, T itself otherwise. Same size and layout, so pointers convert by
// reinterpret_cast.
template <typename T>
struct DeviceElement {
  using type = T;
};
template <>
struct DeviceElement<Half> {
  using type = __half;
};
template <typename T>
using DeviceType = typename DeviceElement<T>::type;
static_assert(sizeof(__half) == sizeof(Half));

// `p` as a pointer to T's device type (the same bytes).
template <typename T>
const DeviceType<T>* AsDevice(const T* p) {
  return reinterpret_cast<const DeviceType<T>*>(p);
}
template <typename T>
DeviceType<T>* AsDevice(T* p) {
  return reinterpret_cast<DeviceType<T>*>(p);
}

__device__ __forceinline__ float Load(float v) { return v; }
__device__ __forceinline__ float Load(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T Store(float v);
template <>
__device__ __forceinline__ float Store<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half Store<__half>(float v) {
  return __float2half_rn(v);
}

// Whether `v` (a value in its compute type: float for float16) is NaN; false for
// integer types.
template <typename C>
__device__ __forceinline__ bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

}  // namespace remex::kernels::cuda
