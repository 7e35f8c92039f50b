// NumPy .npy files (format versions 1.0-3.0, C order, little-endian), the format of
// `remex run --input` and of fetched outputs.
// Spec: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace remex::npy {

// A host tensor: dtype, shape and row-major bytes.
struct Array {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<std::byte> data;
};

// INVALID_ARGUMENT for a malformed header, Fortran order, big-endian or unsupported
// dtypes (object, string, complex), or a payload that does not match the shape;
// NOT_FOUND when the file cannot be opened.
StatusOr<Array> Read(const std::string& path);
StatusOr<Array> Parse(const std::vector<std::byte>& bytes);
// Writes format version 1.0 (2.0 when the header needs it).
Status Write(const std::string& path, const Array& array);
std::vector<std::byte> Serialize(const Array& array);

}  // namespace remex::npy
