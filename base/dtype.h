// Element types, named as ONNX and NumPy name them (float32, float16, int64, ...).
//
// Enumerator values equal ONNX TensorProto.DataType, so a value read from an ONNX
// model, an executable or the wire converts by a range check only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace remex {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
  // The upper 16 bits of a float32 (8 exponent, 7 mantissa bits). A storage type:
  // Cast converts to and from it, data movement carries it; arithmetic ops refuse it.
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined or a value outside the enum.
size_t DTypeSize(DType dtype);
// "float32", "int64", "bool", ...; "undefined" for anything else.
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> DTypeFromName(std::string_view name);
// Accepts an ONNX TensorProto.DataType value; nullopt for types Remex does not hold
// (string, complex) or values outside the enum.
std::optional<DType> DTypeFromOnnx(int32_t onnx_type);

// Rewrites every nonzero byte of a bool tensor's storage to 1, as NumPy reads bool
// bytes (nonzero is True). Kernels hold bool elements as C++ bool, whose only valid
// bytes are 0 and 1: every path by which bytes enter a bool tensor from outside (a
// tensorWrite, an executable's constants, an ONNX initializer) passes them through
// this first.
void CanonicalizeBoolBytes(void* data, size_t nbytes);

// A tensor shape: one extent per dimension, row-major (C order). Rank 0 is a scalar.
using Shape = std::vector<int64_t>;

// Number of elements, or nullopt when a dimension is negative or the product
// overflows int64.
std::optional<int64_t> NumElements(const Shape& shape);
// "[1, 3, 48, 192]"; a negative (not yet known) dimension prints as "?": "[?, 3, 48, ?]".
// With `dim_names` (one per dimension, or empty), a negative dimension prints as its
// non-empty name instead: "[N, 3, 48, W]".
std::string ShapeToString(const Shape& shape, const std::vector<std::string>& dim_names = {});

}  // namespace remex
