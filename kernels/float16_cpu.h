// Bulk float16 <-> float32 conversions for the CPU kernels.
//
// The values are those of kernels/float16.h element by element (HalfToFloat is exact;
// FloatToHalf rounds to nearest even, overflows to infinity and keeps subnormals);
// where the CPU has F16C (every x86-64 CPU with AVX2), eight at a time in hardware
// (VCVTPH2PS / VCVTPS2PH with round-to-nearest-even), which converts the same values:
// kernels_test checks every float16 and a spread of float32 values against the scalar
// functions. A NaN stays a NaN (its payload may differ). The float16 paths of the CPU
// kernels (RunAsFloat32: a float16 executable on a CPU without float16 arithmetic)
// convert whole tensors with these, split over the compute threads (ParallelFor) from
// 64 Ki elements.
#pragma once

#include <cstdint>

#include "kernels/float16.h"

namespace remex::kernels {

// dst[i] = HalfToFloat(src[i]) for i in [0, n); src and dst do not overlap.
void HalfToFloatN(const Half* src, float* dst, int64_t n);
// dst[i] = FloatToHalf(src[i]) for i in [0, n); src and dst do not overlap.
void FloatToHalfN(const float* src, Half* dst, int64_t n);
// Whether the two functions above use the CPU's F16C instructions.
bool CpuHasF16c();

}  // namespace remex::kernels
