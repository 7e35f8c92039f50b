#include "kernels/float16_cpu.h"

#include "kernels/internal.h"

#if defined(__x86_64__) || defined(__i386__)
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
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
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
