// IEEE 754 binary16 (float16) and bfloat16 conversions with round-to-nearest-even.
//
// A plain header: CUDA device code includes it too (compiled by nvcc, the conversions
// are __host__ __device__), so the CPU and CUDA kernels round the same way.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define REMEX_FLOAT16_HD __host__ __device__
#else
#define REMEX_FLOAT16_HD
#endif

namespace remex::kernels {

// A float16 value held by its bits. Arithmetic converts to float.
struct Half {
  uint16_t bits = 0;
};

// A bfloat16 value held by its bits: the upper half of a float32 (sign, 8 exponent
// bits, 7 mantissa bits). Remex stores it and casts it; arithmetic ops refuse it.
struct BFloat16 {
  uint16_t bits = 0;
};

namespace float16_internal {

REMEX_FLOAT16_HD inline uint32_t FloatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}

REMEX_FLOAT16_HD inline uint64_t DoubleBits(double d) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
#endif
}

REMEX_FLOAT16_HD inline float FloatFromBits(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

// Rounds the IEEE value with `kMantBits` mantissa bits and exponent bias `kBias`,
// given by its raw sign/exponent/mantissa fields, to binary16 (RNE). NaN stays NaN
// (quiet), overflow becomes infinity, underflow goes through the subnormals to zero.
template <int kMantBits, int kBias>
REMEX_FLOAT16_HD inline uint16_t RoundToHalf(uint16_t sign, int64_t exp_field, uint64_t mant, int64_t exp_max) {
  if (exp_field == exp_max) {  // Inf or NaN.
    if (mant == 0) return sign | 0x7c00;
    return static_cast<uint16_t>(sign | 0x7e00 | ((mant >> (kMantBits - 10)) & 0x3ff));
  }
  if (exp_field == 0 && mant == 0) return sign;
  // Subnormal inputs of float/double are far below half's range.
  if (exp_field == 0) return sign;
  int64_t e = exp_field - kBias + 15;  // Biased half exponent.
  if (e >= 31) return sign | 0x7c00;
  uint64_t m = mant | (uint64_t{1} << kMantBits);
  int shift;
  uint64_t base;
  if (e <= 0) {
    // Subnormal half: value = m * 2^(exp - bias - kMantBits); half unit is 2^-24.
    int64_t s = kMantBits - 10 + (1 - e);
    if (s > kMantBits + 1) return sign;  // Below half of the smallest subnormal.
    shift = static_cast<int>(s);
    base = 0;
  } else {
    shift = kMantBits - 10;
    m = mant;  // Implicit bit is carried by the exponent field.
    base = static_cast<uint64_t>(e) << 10;
  }
  uint64_t r = m >> shift;
  uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  uint64_t halfway = uint64_t{1} << (shift - 1);
  uint64_t out = base + r;
  if (rem > halfway || (rem == halfway && (r & 1))) ++out;  // Carry may reach inf: correct.
  return static_cast<uint16_t>(sign | out);
}

}  // namespace float16_internal

REMEX_FLOAT16_HD inline Half FloatToHalf(float f) {
  const uint32_t b = float16_internal::FloatBits(f);
  return Half{float16_internal::RoundToHalf<23, 127>(static_cast<uint16_t>((b >> 16) & 0x8000),
                                                     (b >> 23) & 0xff, b & 0x7fffff, 0xff)};
}

REMEX_FLOAT16_HD inline Half DoubleToHalf(double d) {
  const uint64_t b = float16_internal::DoubleBits(d);
  return Half{float16_internal::RoundToHalf<52, 1023>(static_cast<uint16_t>((b >> 48) & 0x8000),
                                                      static_cast<int64_t>((b >> 52) & 0x7ff),
                                                      b & ((uint64_t{1} << 52) - 1), 0x7ff)};
}

// Exact.
REMEX_FLOAT16_HD inline float HalfToFloat(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1f;
  uint32_t mant = h.bits & 0x3ff;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000 | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {
      // Normalise the subnormal.
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      out = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13);
    }
  } else {
    out = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  return float16_internal::FloatFromBits(out);
}

// float32 to bfloat16, rounding to nearest even (as ONNX Runtime, PyTorch and CUDA's
// __float2bfloat16_rn do); overflow rounds to infinity; NaN stays NaN (quiet, sign
// kept).
REMEX_FLOAT16_HD inline BFloat16 FloatToBFloat16(float f) {
  const uint32_t b = float16_internal::FloatBits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((b >> 16) | 0x40)};
  return BFloat16{static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16)};
}

// Exact.
REMEX_FLOAT16_HD inline float BFloat16ToFloat(BFloat16 h) {
  return float16_internal::FloatFromBits(static_cast<uint32_t>(h.bits) << 16);
}

}  // namespace remex::kernels
