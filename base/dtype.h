// Element types, named as ONNX and NumPy name them (float32, float16, int64, ...): the
// DType enum (base/dtype_enum.h), its names and sizes, and tensor shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype_enum.h"

namespace remex {

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
