// DType for CUDA code: the enum (base/dtype_enum.h) and the C++ element type the
// launchers are instantiated for per dtype. A plain header: .cu and .cc files alike
// include it.
//
// A launcher in a <group>_impl.h is a template on its element type T, defined in the
// group's .cu file and instantiated there explicitly for the types it takes; the host
// code picks T from a tensor's DType with VisitDType (kernels/cuda/visit_dtype.h).
#pragma once

#include <cstdint>

#include "base/dtype_enum.h"
#include "kernels/float16.h"

namespace remex::kernels::cuda {

// The DType of element type T: float -> kFloat32, Half -> kFloat16 (float16 held by its
// bits, kernels/float16.h), BFloat16 -> kBFloat16, double -> kFloat64, the fixed-width
// integers -> their int/uint dtypes, bool -> kBool. kUndefined for any other T.
template <typename T>
inline constexpr DType kDTypeOf = DType::kUndefined;
template <>
inline constexpr DType kDTypeOf<float> = DType::kFloat32;
template <>
inline constexpr DType kDTypeOf<Half> = DType::kFloat16;
template <>
inline constexpr DType kDTypeOf<BFloat16> = DType::kBFloat16;
template <>
inline constexpr DType kDTypeOf<double> = DType::kFloat64;
template <>
inline constexpr DType kDTypeOf<int8_t> = DType::kInt8;
template <>
inline constexpr DType kDTypeOf<int16_t> = DType::kInt16;
template <>
inline constexpr DType kDTypeOf<int32_t> = DType::kInt32;
template <>
inline constexpr DType kDTypeOf<int64_t> = DType::kInt64;
template <>
inline constexpr DType kDTypeOf<uint8_t> = DType::kUint8;
template <>
inline constexpr DType kDTypeOf<uint16_t> = DType::kUint16;
template <>
inline constexpr DType kDTypeOf<uint32_t> = DType::kUint32;
template <>
inline constexpr DType kDTypeOf<uint64_t> = DType::kUint64;
template <>
inline constexpr DType kDTypeOf<bool> = DType::kBool;

}  // namespace remex::kernels::cuda
