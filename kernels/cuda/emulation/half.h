// __half on the host for the CUDA emulation: IEEE 754 binary16 held as its bits, with
// the conversions of cuda_fp16.h. float -> half rounds to nearest even through the host
// compiler's _Float16 or the CPU's F16C (IEEE conversion, independent of Remex's own
// kernels/float16.h, so the emulation can disagree with the CPU kernels where the GPU
// would); a NaN
// becomes the GPU's canonical NaN 0x7fff, as PTX's cvt.rn.f16.f32 produces.
// Include as <cuda_fp16.h>.
#pragma once

#include <cstdint>
#include <cstring>

// The conversions: the compiler's _Float16 where it has one (GCC 12, clang 15 and later
// on x86-64); otherwise (clang 14) the CPU's F16C instructions, the same IEEE
// conversions, present on every x86-64 CPU with AVX.
#if !defined(__FLT16_MANT_DIG__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define REMEX_EMULATION_HALF_F16C 1
#endif

struct __half {
  uint16_t bits;
  __half() = default;
};

#if defined(REMEX_EMULATION_HALF_F16C)
// vcvtps2ph rounding to nearest even, and vcvtph2ps (exact).
__attribute__((target("f16c"))) inline uint16_t F16cFromFloat(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) inline float F16cToFloat(uint16_t bits) { return _cvtsh_ss(bits); }
#endif

inline __half __float2half_rn(float f) {
  __half h;
  if (f != f) {
    h.bits = 0x7fff;
    return h;
  }
#if defined(REMEX_EMULATION_HALF_F16C)
  h.bits = F16cFromFloat(f);
#else
  const _Float16 v = static_cast<_Float16>(f);
  std::memcpy(&h.bits, &v, sizeof(h.bits));
#endif
  return h;
}
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) {
#if defined(REMEX_EMULATION_HALF_F16C)
  return F16cToFloat(h.bits);
#else
  _Float16 v;
  std::memcpy(&v, &h.bits, sizeof(v));
  return static_cast<float>(v);
#endif
}
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __half __ushort_as_half(unsigned short bits) {
  __half h;
  h.bits = bits;
  return h;
}

namespace remex::cuda_emulation {

// Element i of a float16 (`half`) or float32 array, as float; and its store, float16
// rounded to nearest even. The libraries' reference loops read and write through these.
inline float LoadAsFloat(const void* base, bool half, int64_t i) {
  if (half) return __half2float(static_cast<const __half*>(base)[i]);
  return static_cast<const float*>(base)[i];
}
inline void StoreFromFloat(void* base, bool half, int64_t i, float v) {
  if (half) {
    static_cast<__half*>(base)[i] = __float2half_rn(v);
  } else {
    static_cast<float*>(base)[i] = v;
  }
}

}  // namespace remex::cuda_emulation
