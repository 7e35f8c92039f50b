#include "kernels/float16_cpu.h"

#include "kernels/internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define REMEX_F16C_BUILD 1
#endif

namespace remex::kernels {
namespace {

#ifdef REMEX_F16C_BUILD
__attribute__((target("avx2,f16c"))) int64_t HalfToFloatF16c(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  return i;
}

__attribute__((target("avx2,f16c"))) int64_t FloatToHalfF16c(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  return i;
}
#endif

}  // namespace

bool CpuHasF16c() {
#ifdef REMEX_F16C_BUILD
  // CPUID (every compiler's cpuid.h; clang's __builtin_cpu_supports knows no "f16c"):
  // F16C and AVX (leaf 1 ECX bits 29, 28), the OS saving YMM state (OSXSAVE, ECX bit
  // 27, and XCR0's SSE and AVX bits), AVX2 (leaf 7 EBX bit 5).
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const bool f16c = (c >> 29) & 1, avx = (c >> 28) & 1, osxsave = (c >> 27) & 1;
    if (!f16c || !avx || !osxsave) return false;
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6) != 0x6) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return ((b >> 5) & 1) != 0;
  }();
  return has;
#else
  return false;
#endif
}

namespace {

void HalfToFloatRange(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef REMEX_F16C_BUILD
  if (CpuHasF16c()) i = HalfToFloatF16c(src, dst, n);
#endif
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRange(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
#ifdef REMEX_F16C_BUILD
  if (CpuHasF16c()) i = FloatToHalfF16c(src, dst, n);
#endif
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

// Elements per part when a conversion is split over the compute threads (64 Ki: about
// 0.4 MiB of traffic, enough to pay for waking the team).
constexpr int64_t kGrain = int64_t{1} << 16;

}  // namespace

void HalfToFloatN(const Half* src, float* dst, int64_t n) {
  internal::ParallelFor(n, kGrain, [&](int64_t b, int64_t e, int) { HalfToFloatRange(src + b, dst + b, e - b); });
}

void FloatToHalfN(const float* src, Half* dst, int64_t n) {
  internal::ParallelFor(n, kGrain, [&](int64_t b, int64_t e, int) { FloatToHalfRange(src + b, dst + b, e - b); });
}

}  // namespace remex::kernels
