// The scalar formula of each elementwise float op and activation, written once: one
// functor per op, in the op's compute type C (float, or double for float64; float16
// computes in float). Every place that evaluates one of these ops calls its functor:
//   - the CPU kernels (kernels/ops/elementwise/elementwise.cc, unary.cc, the
//     FusedElementwise kernel kernels/ops/fused/fused.cc, the FusedConv / FusedMatMul
//     epilogue kernels/conv_epilogue.h);
//   - the CUDA kernels (kernels/ops/elementwise/cuda/elementwise_impl.cu,
//     elementwise_ops_impl.cu; kernels/cuda/epilogue_impl.cu through conv_epilogue.h);
//   - FusedElementwise's NVRTC kernels: kernels/ops/fused/cuda/fused_codegen.cc embeds this very
//     text (CMake turns it into a string at build time) ahead of each generated kernel,
//     whose instructions call the functors by name.
// A plain header: no CUDA, no Remex headers, nothing but <cmath> (and <bit>/<cstdint> on
// the host), so that .cu files include it and NVRTC compiles it without any include
// (REMEX_SCALAR_OPS_EMBEDDED is then defined and the C math functions are NVRTC's own).
//
// Semantics are the ONNX operators' (https://onnx.ai/onnx/operators/, opsets 13-17;
// LeakyRelu-16, HardSigmoid-6, HardSwish-14, Swish-24, Gelu-20, Clip-13, Pow-15; the version of each
// other op is named at its functor). The functor of op X has
// X's name, takes X's data operands then its scalar parameters (LeakyRelu, Swish: alpha;
// HardSigmoid: alpha, beta; Clip: min, max), which is also the operand order of
// FusedElementwise's opcode of the same name (kernels/ops/fused/fused.h). NaN stays NaN: the
// comparisons are written so that a NaN operand falls through.
//
// The math functions are the C library's on the host and CUDA's on the device, except
// float exp and erf on the host: FastExp and FastErf below (the CPU kernels' exp and erf,
// written to vectorise).
// The CPU and GPU results therefore agree to the math functions' accuracy (CUDA's are
// within 2 ulp), and bit for bit in the rest.
#pragma once

#if !defined(REMEX_SCALAR_OPS_EMBEDDED)
#include <math.h>

#include <cmath>
#if !defined(__CUDACC__)
#include <bit>
#include <cstdint>
#endif
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define REMEX_SCALAR_FN __host__ __device__ __forceinline__
#else
#define REMEX_SCALAR_FN inline
#endif

namespace remex::kernels::scalar {

// ---------------------------------------------------------------------------
// Math functions by compute type.
namespace math {

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__) && !defined(REMEX_SCALAR_OPS_EMBEDDED)
// exp(x) for float, written to auto-vectorise: Cephes-style reduction x = n ln2 + r,
// |r| <= ln2/2, a degree-7 polynomial for exp(r), and 2^n applied as two factors so that
// overflow (inf) and the subnormal range come out right. About 1 ulp; NaN propagates.
inline float FastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // Few mantissa bits: n * kLn2Hi is exact.
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer.
  // Beyond these the result is inf / 0 anyway; the clamp keeps n in [-150, 129].
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float t = xc * kLog2e + kRound;
  const float nf = t - kRound;
  const int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const float r = (xc - nf * kLn2Hi) - nf * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}
inline float Exp(float x) { return FastExp(x); }
// erf(x) for float, written to auto-vectorise (no branches, no calls but FastExp).
// |x| < 0.625: the Maclaurin series 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)) to
// x^15 (the first term left out is under 1e-9 of the result). Otherwise
// erf(x) = sign(x) * (1 - erfc(|x|)), with erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2)
// and P the degree-9 Chebyshev fit of Numerical Recipes (3rd ed., 6.2.2; erfc's
// relative error under 1.2e-7); |x| is clamped to 10, where erfc is far below float's
// resolution of 1. Within 3e-7 of erf, relatively (3 ulps), for every float; NaN
// propagates (the comparisons fall through).
inline float FastErf(float x) {
  const float z0 = x < 0.0f ? -x : x;
  const float z = z0 > 10.0f ? 10.0f : z0;
  // Series: x * (c0 + c1 x^2 + ... + c7 x^14), ck = 2/sqrt(pi) (-1)^k / (k! (2k+1)).
  const float x2 = x * x;
  float s = -1.49256504e-05f;
  s = s * x2 + 1.20553330e-04f;
  s = s * x2 - 8.54832702e-04f;
  s = s * x2 + 5.22397763e-03f;
  s = s * x2 - 2.68661706e-02f;
  s = s * x2 + 1.12837917e-01f;
  s = s * x2 - 3.76126389e-01f;
  s = s * x2 + 1.12837917e+00f;
  const float small = x * s;
  // Tail: 1 - erfc(z), signed as x.
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float tail = 1.0f - t * FastExp(p - z * z);
  const float large = x < 0.0f ? -tail : tail;
  return z0 < 0.625f ? small : (z0 >= 0.625f ? large : x);  // NaN: x
}
inline float Erf(float x) { return FastErf(x); }
#else
REMEX_SCALAR_FN float Exp(float x) { return expf(x); }
REMEX_SCALAR_FN float Erf(float x) { return erff(x); }
#endif
REMEX_SCALAR_FN double Exp(double x) { return exp(x); }
REMEX_SCALAR_FN double Erf(double x) { return erf(x); }

// Name(float) and Name(double): the C library's (CUDA's on the device) float and double
// functions.
#define REMEX_SCALAR_MATH(Name, float_fn, double_fn)                 \
  REMEX_SCALAR_FN float Name(float x) { return float_fn(x); }       \
  REMEX_SCALAR_FN double Name(double x) { return double_fn(x); }
REMEX_SCALAR_MATH(Tanh, tanhf, tanh)
REMEX_SCALAR_MATH(Log, logf, log)
REMEX_SCALAR_MATH(Sqrt, sqrtf, sqrt)
REMEX_SCALAR_MATH(Abs, fabsf, fabs)
REMEX_SCALAR_MATH(Expm1, expm1f, expm1)
REMEX_SCALAR_MATH(Log1p, log1pf, log1p)
REMEX_SCALAR_MATH(Sin, sinf, sin)
REMEX_SCALAR_MATH(Cos, cosf, cos)
REMEX_SCALAR_MATH(Tan, tanf, tan)
REMEX_SCALAR_MATH(Asin, asinf, asin)
REMEX_SCALAR_MATH(Acos, acosf, acos)
REMEX_SCALAR_MATH(Atan, atanf, atan)
REMEX_SCALAR_MATH(Sinh, sinhf, sinh)
REMEX_SCALAR_MATH(Cosh, coshf, cosh)
REMEX_SCALAR_MATH(Asinh, asinhf, asinh)
REMEX_SCALAR_MATH(Acosh, acoshf, acosh)
REMEX_SCALAR_MATH(Atanh, atanhf, atanh)
REMEX_SCALAR_MATH(Ceil, ceilf, ceil)
REMEX_SCALAR_MATH(Floor, floorf, floor)
// Round to nearest, ties to even (the default rounding mode), as ONNX Round-11.
REMEX_SCALAR_MATH(Round, rintf, rint)
#undef REMEX_SCALAR_MATH
REMEX_SCALAR_FN float Fmod(float x, float y) { return fmodf(x, y); }
REMEX_SCALAR_FN double Fmod(double x, double y) { return fmod(x, y); }
REMEX_SCALAR_FN float Pow(float x, float y) { return powf(x, y); }
REMEX_SCALAR_FN double Pow(double x, double y) { return pow(x, y); }

}  // namespace math

// ---------------------------------------------------------------------------
// Binary. Add, Sub, Mul, Div: IEEE arithmetic.

struct Add {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a + b; }
};
struct Sub {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a - b; }
};
struct Mul {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a * b; }
};
struct Div {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a / b; }
};
// a ** b. An exponent of 2 squares exactly (pow need not round a square correctly:
// glibc's powf(70000, 2) does not), 1 gives the base.
struct Pow {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return b == C(2) ? a * a : b == C(1) ? a : math::Pow(a, b); }
};
// Mod-13 with fmod = 1: the remainder with the dividend's sign (C's fmod; % for
// integers). Integer C: b must not be 0 (the kernels check); INT_MIN % -1 gives 0.
struct Fmod {
  REMEX_SCALAR_FN float operator()(float a, float b) const { return math::Fmod(a, b); }
  REMEX_SCALAR_FN double operator()(double a, double b) const { return math::Fmod(a, b); }
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const {
    return b == C(-1) && C(-1) < C(0) ? C(0) : C(a % b);
  }
};
// Mod-13 with fmod = 0 (integers only): the remainder with the divisor's sign, as
// Python's %. b must not be 0 (the kernels check).
struct Mod {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const {
    const C r = Fmod()(a, b);
    return r != C(0) && ((r < C(0)) != (b < C(0))) ? C(r + b) : r;
  }
};
// A NaN operand gives NaN: a when a is NaN; b when b is (x < NaN is false). Integer C
// works too.
struct Min {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a != a ? a : (a < b ? a : b); }
};
struct Max {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C a, C b) const { return a != a ? a : (a > b ? a : b); }
};

// ---------------------------------------------------------------------------
// Unary.

struct Relu {  // max(0, x); integer C works too.
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return x < C(0) ? C(0) : x; }
};
// 1 / (1 + exp(-x)). exp(-x) overflows to inf for x < -88.7 (float): the result is then
// 0, as it should be to within the smallest subnormal.
struct Sigmoid {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return C(1) / (C(1) + math::Exp(-x)); }
};
// Swish-24: x * sigmoid(alpha * x) (SiLU for alpha = 1), with Sigmoid's formula.
struct Swish {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha) const { return x * Sigmoid()(alpha * x); }
};
// Gelu-20 with approximate = "none": x * (1 + erf(x / sqrt(2))) / 2, x / sqrt(2) as x times
// the compute type's 1/sqrt(2) (the tanh approximation is not among these formulas).
struct Gelu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const {
    return C(0.5) * x * (C(1) + math::Erf(x * C(0.70710678118654752440)));
  }
};
// Tanh, Exp, Log, Sqrt, Abs (float C), Erf: the math function of the same name.
#define REMEX_SCALAR_MATH_FUNCTOR(Name)                                   \
  struct Name {                                                           \
    template <typename C>                                                 \
    REMEX_SCALAR_FN C operator()(C x) const { return math::Name(x); }     \
  };
REMEX_SCALAR_MATH_FUNCTOR(Tanh)
REMEX_SCALAR_MATH_FUNCTOR(Exp)
REMEX_SCALAR_MATH_FUNCTOR(Log)
REMEX_SCALAR_MATH_FUNCTOR(Sqrt)
REMEX_SCALAR_MATH_FUNCTOR(Abs)
REMEX_SCALAR_MATH_FUNCTOR(Erf)
// The trigonometric and hyperbolic functions and their inverses (Sin-7 .. Atan-7,
// Sinh-9 .. Atanh-9), Ceil-13, Floor-13, Round-11 (ties to even): the math function of
// the same name. Out-of-domain inputs give NaN, as the C library's do.
REMEX_SCALAR_MATH_FUNCTOR(Sin)
REMEX_SCALAR_MATH_FUNCTOR(Cos)
REMEX_SCALAR_MATH_FUNCTOR(Tan)
REMEX_SCALAR_MATH_FUNCTOR(Asin)
REMEX_SCALAR_MATH_FUNCTOR(Acos)
REMEX_SCALAR_MATH_FUNCTOR(Atan)
REMEX_SCALAR_MATH_FUNCTOR(Sinh)
REMEX_SCALAR_MATH_FUNCTOR(Cosh)
REMEX_SCALAR_MATH_FUNCTOR(Asinh)
REMEX_SCALAR_MATH_FUNCTOR(Acosh)
REMEX_SCALAR_MATH_FUNCTOR(Atanh)
REMEX_SCALAR_MATH_FUNCTOR(Ceil)
REMEX_SCALAR_MATH_FUNCTOR(Floor)
REMEX_SCALAR_MATH_FUNCTOR(Round)
#undef REMEX_SCALAR_MATH_FUNCTOR
struct Neg {  // Float C (integers wrap in the kernels that take them).
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return -x; }
};
struct Reciprocal {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return C(1) / x; }
};
// x * max(0, min(1, x / 6 + 1/2)), with x / 6 as x times the compute type's 1/6.
struct HardSwish {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const {
    C r = x * C(1.0 / 6.0) + C(0.5);
    r = r < C(0) ? C(0) : r;
    r = r > C(1) ? C(1) : r;
    return x * r;
  }
};

// Softplus-1: log(1 + exp(x)), as x + log1p(exp(-x)) for x > 0 so that large x does not
// overflow.
struct Softplus {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const {
    return x > C(0) ? x + math::Log1p(math::Exp(-x)) : math::Log1p(math::Exp(x));
  }
};
// Softsign-1: x / (1 + |x|).
struct Softsign {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return x / (C(1) + (x < C(0) ? -x : x)); }
};
// Sign-9: 1 for x > 0, -1 for x < 0, x itself otherwise (0, -0, NaN). Integer C works too.
struct Sign {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x) const { return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x); }
};

// IsNaN-13: whether x is NaN.
struct IsNaN {
  template <typename C>
  REMEX_SCALAR_FN bool operator()(C x) const { return x != x; }
};
// IsInf-10: whether x is +inf (counted when `positive`) or -inf (when `negative`).
// x - x is NaN exactly for infinities and NaN.
struct IsInf {
  template <typename C>
  REMEX_SCALAR_FN bool operator()(C x, bool negative, bool positive) const {
    const bool inf = x == x && (x - x) != (x - x);
    return inf && (x > C(0) ? positive : negative);
  }
};

// ---------------------------------------------------------------------------
// With scalar parameters after the data operand.

// x < 0 ? alpha * x : x (also PRelu, with the slope as alpha).
struct LeakyRelu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha) const { return x < C(0) ? alpha * x : x; }
};
// max(0, min(1, alpha * x + beta)).
struct HardSigmoid {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha, C beta) const {
    C r = alpha * x + beta;
    r = r < C(0) ? C(0) : r;
    return r > C(1) ? C(1) : r;
  }
};
// Elu-6: x >= 0 ? x : alpha * (exp(x) - 1), with expm1 for small |x|.
struct Elu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha) const { return x >= C(0) ? x : alpha * math::Expm1(x); }
};
// Celu-12: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
struct Celu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha) const { return x >= C(0) ? x : alpha * math::Expm1(x / alpha); }
};
// Selu-6: x > 0 ? gamma * x : gamma * alpha * (exp(x) - 1).
struct Selu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha, C gamma) const {
    return x > C(0) ? gamma * x : gamma * (alpha * math::Expm1(x));
  }
};
// ThresholdedRelu-10: x > alpha ? x : 0.
struct ThresholdedRelu {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C alpha) const { return x > alpha ? x : C(0); }
};
// Shrink-9: x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
struct Shrink {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C bias, C lambd) const {
    return x < -lambd ? x + bias : (x > lambd ? x - bias : C(0));
  }
};
// min(max(x, lo), hi): with lo > hi every value becomes hi, as ONNX specifies. Integer
// C works too.
struct Clip {
  template <typename C>
  REMEX_SCALAR_FN C operator()(C x, C lo, C hi) const {
    const C r = x < lo ? lo : x;
    return r > hi ? hi : r;
  }
};

}  // namespace remex::kernels::scalar

#undef REMEX_SCALAR_FN
