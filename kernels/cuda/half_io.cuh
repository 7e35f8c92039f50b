// Device-side loads and stores of elements for the CUDA kernels, one place for every
// family: float16 is computed in float32 and stored rounded to nearest even (as the
// CPU's kernels/float16.h does), every other type as it is; and the NaN test of a value
// in its compute type. Include only from .cu files.
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

// The type a kernel computes an element of device type T in: float for float16, T itself
// otherwise (float32, float64, the integers).
template <typename T>
struct ComputeElement {
  using type = T;
};
template <>
struct ComputeElement<__half> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeElement<T>::type;

// An element in its compute type: float16 widened to float32 (exact), any other type as
// it is.
template <typename T>
__device__ __forceinline__ T Load(T v) {
  return v;
}
__device__ __forceinline__ float Load(__half v) { return __half2float(v); }

// A value of compute type C stored as element type T: float16 rounded to nearest even,
// any other type by static_cast (C++'s conversion).
template <typename T, typename C>
__device__ __forceinline__ T Store(C v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return static_cast<T>(v);
  }
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
