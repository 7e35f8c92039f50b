// How a tensor made on the server is filled (tensorAlloc's fill; the shell's zeros and
// random): the one definition the client, the wire and the device share.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace remex {

// The distributions and their parameters' names are those of ONNX's RandomUniform
// (low, high) and RandomNormal (mean, scale) (opset 1):
//   kZeros:   every element 0.
//   kUniform: floating dtypes: uniform in [low, high); integer dtypes and bool: the
//             floor of a uniform draw in [low, high), so each integer in [low, high)
//             is equally likely when low and high are integers. Without `bounded`,
//             the dtype's default range (DefaultUniformBounds).
//   kNormal:  floating dtypes only: mean + scale * a standard normal draw (Box-Muller).
// Element i's value is a function of (seed, i) alone (SplitMix64 of seed and i,
// Steele, Lea and Flood, OOPSLA 2014; vm/tensor_ops.cc), so one seed gives the same
// tensor on every device, server and fill order; float16 and bfloat16 round to nearest
// even.
struct TensorFill {
  enum class Kind : uint8_t { kZeros, kUniform, kNormal };
  Kind kind = Kind::kZeros;
  bool bounded = false;
  double low = 0, high = 1;
  double mean = 0, scale = 1;
  uint64_t seed = 0;
};

// The uniform bounds of a fill without `bounded`: [0, 1) for floating dtypes, [0, 10)
// for integer dtypes, [0, 2) for bool.
inline void DefaultUniformBounds(DType dtype, double& low, double& high) {
  const bool floating = dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
                        dtype == DType::kBFloat16;
  low = 0;
  high = floating ? 1 : dtype == DType::kBool ? 2 : 10;
}

// `fill` with its uniform bounds made explicit (bounded, low, high).
inline TensorFill ResolveFillBounds(DType dtype, TensorFill fill) {
  if (!fill.bounded) DefaultUniformBounds(dtype, fill.low, fill.high);
  fill.bounded = true;
  return fill;
}

}  // namespace remex
