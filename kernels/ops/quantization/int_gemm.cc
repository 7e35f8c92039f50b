// IntGemm: a packed AVX2 kernel on vpmaddwd, and the portable loop (int_gemm.h).
#include "kernels/ops/quantization/int_gemm.h"

#include <algorithm>
#include <vector>

#include "kernels/internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define REMEX_INT_GEMM_AVX2 1
#endif

namespace remex::kernels::internal {

// The portable loop, compiled for AVX-512 and AVX2 too (REMEX_CPU_CLONES): four rows of c
// and two steps of kk at a time; the j loop is contiguous and vectorises.
REMEX_CPU_CLONES
void IntGemmPortable(const int16_t* a, const int16_t* b, uint32_t* c, int64_t m, int64_t k, int64_t n) {
  std::fill(c, c + m * n, 0u);
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    uint32_t* c0 = c + i * n;
    uint32_t* c1 = c0 + n;
    uint32_t* c2 = c1 + n;
    uint32_t* c3 = c2 + n;
    const int16_t* a0 = a + i * k;
    const int16_t* a1 = a0 + k;
    const int16_t* a2 = a1 + k;
    const int16_t* a3 = a2 + k;
    int64_t kk = 0;
    for (; kk + 2 <= k; kk += 2) {
      const int32_t u0 = a0[kk], u1 = a1[kk], u2 = a2[kk], u3 = a3[kk];
      const int32_t v0 = a0[kk + 1], v1 = a1[kk + 1], v2 = a2[kk + 1], v3 = a3[kk + 1];
      const int16_t* bu = b + kk * n;
      const int16_t* bv = bu + n;
      for (int64_t j = 0; j < n; ++j) {
        const int32_t x = bu[j], y = bv[j];
        c0[j] += static_cast<uint32_t>(u0 * x + v0 * y);
        c1[j] += static_cast<uint32_t>(u1 * x + v1 * y);
        c2[j] += static_cast<uint32_t>(u2 * x + v2 * y);
        c3[j] += static_cast<uint32_t>(u3 * x + v3 * y);
      }
    }
    for (; kk < k; ++kk) {
      const int32_t u0 = a0[kk], u1 = a1[kk], u2 = a2[kk], u3 = a3[kk];
      const int16_t* bu = b + kk * n;
      for (int64_t j = 0; j < n; ++j) {
        const int32_t x = bu[j];
        c0[j] += static_cast<uint32_t>(u0 * x);
        c1[j] += static_cast<uint32_t>(u1 * x);
        c2[j] += static_cast<uint32_t>(u2 * x);
        c3[j] += static_cast<uint32_t>(u3 * x);
      }
    }
  }
  for (; i < m; ++i) {
    uint32_t* ci = c + i * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t u = a[i * k + kk];
      const int16_t* bu = b + kk * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += static_cast<uint32_t>(u * static_cast<int32_t>(bu[j]));
    }
  }
}


#if REMEX_INT_GEMM_AVX2
namespace {

// c is computed in tiles of kRows rows by kPanel columns. b is packed per panel of kPanel
// columns as pairs of rows: for each t < k2 = ceil(k / 2), the 2 x kPanel values
// b[2t][j], b[2t + 1][j] interleaved (32 int16, one vpmaddwd operand pair of 256 bits
// each per 8 columns); a per row as k2 int32, each the pair a[i][2t] | a[i][2t + 1] << 16,
// broadcast to every lane. A lane of vpmaddwd then holds a[i][2t] b[2t][j] + a[i][2t+1]
// b[2t+1][j]. Odd k, rows past m and columns past n are packed as zeros.
constexpr int64_t kRows = 4;
constexpr int64_t kPanel = 16;

__attribute__((target("avx2"))) void Tile(const uint32_t* ap, const int16_t* bp, int64_t k2, uint32_t* c, int64_t ldc,
                                          int64_t rows, int64_t cols) {
  __m256i acc[kRows][2];
  for (auto& r : acc) r[0] = r[1] = _mm256_setzero_si256();
  for (int64_t t = 0; t < k2; ++t) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + t * 2 * kPanel));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + t * 2 * kPanel + kPanel));
    for (int64_t r = 0; r < kRows; ++r) {
      const __m256i a = _mm256_set1_epi32(static_cast<int>(ap[r * k2 + t]));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(a, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(a, b1));
    }
  }
  alignas(32) uint32_t part[kPanel];
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t* out = c + r * ldc;
    if (cols == kPanel) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), acc[r][1]);
    } else {
      _mm256_store_si256(reinterpret_cast<__m256i*>(part), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(part + 8), acc[r][1]);
      std::copy(part, part + cols, out);
    }
  }
}

}  // namespace

bool IntGemmUsesAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

IntGemmPackedB PackIntGemmB(const int16_t* b, int64_t k, int64_t n) {
  IntGemmPackedB packed;
  packed.k = std::max<int64_t>(k, 0);
  packed.n = std::max<int64_t>(n, 0);
  if (k <= 0 || n <= 0) return packed;
  if (!IntGemmUsesAvx2()) {
    packed.data.assign(b, b + k * n);
    return packed;
  }
  const int64_t k2 = (k + 1) / 2;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  packed.data.assign(static_cast<size_t>(panels * k2 * 2 * kPanel), int16_t{0});
  for (int64_t kk = 0; kk < k; ++kk) {
    const int16_t* row = b + kk * n;
    for (int64_t p = 0; p < panels; ++p) {
      int16_t* to = packed.data.data() + (p * k2 + kk / 2) * 2 * kPanel + kk % 2;
      const int64_t cols = std::min(kPanel, n - p * kPanel);
      for (int64_t jj = 0; jj < cols; ++jj) to[2 * jj] = row[p * kPanel + jj];
    }
  }
  return packed;
}

IntGemmPackedA PackIntGemmA(const int16_t* a, int64_t m, int64_t k) {
  IntGemmPackedA packed;
  packed.m = std::max<int64_t>(m, 0);
  packed.k = std::max<int64_t>(k, 0);
  if (m <= 0 || k <= 0) return packed;
  if (!IntGemmUsesAvx2()) {
    packed.plain.assign(a, a + m * k);
    return packed;
  }
  const int64_t k2 = (k + 1) / 2;
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  packed.pairs.assign(static_cast<size_t>(row_blocks * kRows * k2), 0u);
  for (int64_t i = 0; i < m; ++i) {
    const int16_t* row = a + i * k;
    uint32_t* to = packed.pairs.data() + i * k2;
    for (int64_t t = 0; t < k / 2; ++t) {
      to[t] = static_cast<uint32_t>(static_cast<uint16_t>(row[2 * t])) |
              static_cast<uint32_t>(static_cast<uint16_t>(row[2 * t + 1])) << 16;
    }
    if (k % 2) to[k2 - 1] = static_cast<uint16_t>(row[k - 1]);
  }
  return packed;
}

void IntGemm(const int16_t* a, const int16_t* b, uint32_t* c, int64_t m, int64_t k, int64_t n) {
  if (m <= 0 || n <= 0) return;
  if (!IntGemmUsesAvx2() || k <= 0) return IntGemmPortable(a, b, c, m, k, n);
  IntGemmPackedAB(PackIntGemmA(a, m, k), PackIntGemmB(b, k, n), c);
}

void IntGemmPacked(const int16_t* a, const IntGemmPackedB& b, uint32_t* c, int64_t m) {
  if (m <= 0 || b.n <= 0) return;
  if (!IntGemmUsesAvx2() || b.k <= 0) return IntGemmPortable(a, b.data.data(), c, m, b.k, b.n);
  IntGemmPackedAB(PackIntGemmA(a, m, b.k), b, c);
}

void IntGemmPackedAB(const IntGemmPackedA& a, const IntGemmPackedB& b, uint32_t* c) {
  const int64_t m = a.m, k = b.k, n = b.n;
  if (m <= 0 || n <= 0) return;
  if (!IntGemmUsesAvx2() || k <= 0) return IntGemmPortable(a.plain.data(), b.data.data(), c, m, k, n);
  const int64_t k2 = (k + 1) / 2;
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const uint32_t* ap = a.pairs.data();
  const int16_t* bp = b.data.data();
  // Panel-major, so that a part keeps one panel of b in cache while it walks the rows.
  const int64_t tiles = row_blocks * panels;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / (kRows * kPanel * k2 * 2));
  ParallelFor(tiles, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t p = tile / row_blocks, rb = tile % row_blocks;
      const int64_t i0 = rb * kRows, j0 = p * kPanel;
      Tile(ap + i0 * k2, bp + p * k2 * 2 * kPanel, k2, c + i0 * n + j0, n, std::min(kRows, m - i0),
           std::min(kPanel, n - j0));
    }
  });
}

#else

bool IntGemmUsesAvx2() { return false; }

IntGemmPackedB PackIntGemmB(const int16_t* b, int64_t k, int64_t n) {
  IntGemmPackedB packed;
  packed.k = std::max<int64_t>(k, 0);
  packed.n = std::max<int64_t>(n, 0);
  if (k > 0 && n > 0) packed.data.assign(b, b + k * n);
  return packed;
}

void IntGemm(const int16_t* a, const int16_t* b, uint32_t* c, int64_t m, int64_t k, int64_t n) {
  IntGemmPortable(a, b, c, m, k, n);
}

void IntGemmPacked(const int16_t* a, const IntGemmPackedB& b, uint32_t* c, int64_t m) {
  IntGemmPortable(a, b.data.data(), c, m, b.k, b.n);
}

IntGemmPackedA PackIntGemmA(const int16_t* a, int64_t m, int64_t k) {
  IntGemmPackedA packed;
  packed.m = std::max<int64_t>(m, 0);
  packed.k = std::max<int64_t>(k, 0);
  if (m > 0 && k > 0) packed.plain.assign(a, a + m * k);
  return packed;
}

void IntGemmPackedAB(const IntGemmPackedA& a, const IntGemmPackedB& b, uint32_t* c) {
  IntGemmPortable(a.plain.data(), b.data.data(), c, a.m, b.k, b.n);
}

#endif

}  // namespace remex::kernels::internal
