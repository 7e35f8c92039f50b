// The DType enum alone: a plain header (<cstdint> only), which CUDA device code
// includes too (kernels/cuda/dtype.h). Names, sizes and conversions are base/dtype.h's.
//
// Enumerator values equal ONNX TensorProto.DataType, so a value read from an ONNX
// model, an executable or the wire converts by a range check only.
#pragma once

#include <cstdint>

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

}  // namespace remex
