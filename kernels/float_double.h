// Elements to and from double, for the kernels that compute in double (DFT, STFT,
// window functions, MeanVarianceNormalization, Det, Einsum): float16 widens exactly
// through float32 and narrows with one rounding to nearest even (kernels/float16.h);
// float32 and float64 convert as C++ does. A plain header: the CPU kernels and the CUDA
// device code call the same functions, so they store the same bits.
#pragma once

#include <type_traits>

#include "kernels/float16.h"

namespace remex::kernels {

template <typename T>
REMEX_FLOAT16_HD inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return static_cast<double>(HalfToFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

// T is float16, float32 or float64.
template <typename T>
REMEX_FLOAT16_HD inline T FloatFromDouble(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return DoubleToHalf(v);
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace remex::kernels
