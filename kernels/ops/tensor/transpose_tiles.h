// Tiled 2-D transposes on the CPU: the Transpose kernel's tiles, and the NCHW <->
// channels-last (NHWC) moves of the convolutions' activations where oneDNN's primitive
// takes them channels-last (kernels/ops/nn/conv_common.h).
#ifndef REMEX_KERNELS_OPS_TENSOR_TRANSPOSE_TILES_H_
#define REMEX_KERNELS_OPS_TENSOR_TRANSPOSE_TILES_H_

#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/internal.h"

namespace remex::kernels::internal {

// TransposeTile of bytes (transpose.cc): 16 x 16 blocks in registers, built for the
// CPU's vector extensions (REMEX_CPU_CLONES).
void TransposeByteTile(const uint8_t* src, uint8_t* dst, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                       int64_t cs, int64_t rs);

// One 2-D tile: dst[r * rs + c] = src[c * cs + r] for r in [r0, r1), c in [c0, c1).
template <typename E>
inline void TransposeTile(const E* src, E* dst, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t cs,
                          int64_t rs) {
  int64_t r = r0;
#if defined(__SSE2__)
  if constexpr (sizeof(E) == 4) {
    // Three columns of adjacent rows (rs == 3: NCHW -> NHWC of an RGB image): four rows at
    // a time, their twelve values shuffled out of three column loads.
    if (c1 - c0 == 3 && rs == 3) {
      for (; r + 4 <= r1; r += 4) {
        const __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(src + c0 * cs + r));
        const __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c0 + 1) * cs + r));
        const __m128 e = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c0 + 2) * cs + r));
        const __m128 ab_lo = _mm_unpacklo_ps(a, b),
                     ab_hi = _mm_unpackhi_ps(a, b);                          // a0 b0 a1 b1, a2 b2 a3 b3
        const __m128 x = _mm_shuffle_ps(e, ab_lo, _MM_SHUFFLE(2, 2, 0, 0));  // e0 e0 a1 a1
        const __m128 y = _mm_shuffle_ps(ab_lo, e, _MM_SHUFFLE(1, 1, 3, 3));  // b1 b1 e1 e1
        const __m128 z = _mm_shuffle_ps(e, ab_hi, _MM_SHUFFLE(3, 2, 3, 2));  // e2 e3 a3 b3
        float* d = reinterpret_cast<float*>(dst + r * 3 + c0);
        _mm_storeu_ps(d, _mm_shuffle_ps(ab_lo, x, _MM_SHUFFLE(2, 0, 1, 0)));      // a0 b0 e0 a1
        _mm_storeu_ps(d + 4, _mm_shuffle_ps(y, ab_hi, _MM_SHUFFLE(1, 0, 2, 0)));  // b1 e1 a2 b2
        _mm_storeu_ps(d + 8, _mm_shuffle_ps(z, z, _MM_SHUFFLE(1, 3, 2, 0)));      // e2 a3 b3 e3
      }
    }
    // Three rows of adjacent columns (cs == 3: NHWC -> NCHW of an RGB image): four
    // columns at a time, three contiguous loads shuffled out into the rows.
    if (r1 - r0 == 3 && cs == 3) {
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {
        const float* s = reinterpret_cast<const float*>(src + c * 3 + r0);
        const __m128 i0 = _mm_loadu_ps(s), i1 = _mm_loadu_ps(s + 4), i2 = _mm_loadu_ps(s + 8);
        const __m128 p = _mm_shuffle_ps(i0, i1, _MM_SHUFFLE(2, 1, 3, 0));  // a0 a1 e1 a2
        const __m128 q = _mm_shuffle_ps(p, i2, _MM_SHUFFLE(1, 1, 3, 3));   // a2 a2 a3 a3
        const __m128 u = _mm_shuffle_ps(i0, i1, _MM_SHUFFLE(3, 0, 1, 1));  // b0 b0 b1 b2
        const __m128 v = _mm_shuffle_ps(u, i2, _MM_SHUFFLE(2, 2, 3, 3));   // b2 b2 b3 b3
        const __m128 w = _mm_shuffle_ps(i0, i1, _MM_SHUFFLE(1, 1, 2, 2));  // e0 e0 e1 e1
        const __m128 t = _mm_shuffle_ps(i2, i2, _MM_SHUFFLE(3, 0, 3, 0));  // e2 e3 e2 e3
        float* d = reinterpret_cast<float*>(dst + r0 * rs + c);
        _mm_storeu_ps(d, _mm_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 1, 0)));           // a0 a1 a2 a3
        _mm_storeu_ps(d + rs, _mm_shuffle_ps(u, v, _MM_SHUFFLE(2, 0, 2, 0)));      // b0 b1 b2 b3
        _mm_storeu_ps(d + 2 * rs, _mm_shuffle_ps(w, t, _MM_SHUFFLE(1, 0, 2, 0)));  // e0 e1 e2 e3
      }
      c0 = c;  // the columns left over, below
    }
    // 4x4 blocks in registers: four strided row loads, four contiguous stores.
    for (; r + 4 <= r1; r += 4) {
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {
        const E* s = src + c * cs + r;
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + cs));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * cs));
        const __m128i f = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * cs));
        const __m128i ab_lo = _mm_unpacklo_epi32(a, b), ef_lo = _mm_unpacklo_epi32(e, f);
        const __m128i ab_hi = _mm_unpackhi_epi32(a, b), ef_hi = _mm_unpackhi_epi32(e, f);
        E* d = dst + r * rs + c;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi64(ab_lo, ef_lo));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + rs), _mm_unpackhi_epi64(ab_lo, ef_lo));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * rs), _mm_unpacklo_epi64(ab_hi, ef_hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * rs), _mm_unpackhi_epi64(ab_hi, ef_hi));
      }
      for (; c < c1; ++c) {
        for (int64_t i = 0; i < 4; ++i) dst[(r + i) * rs + c] = src[c * cs + r + i];
      }
    }
  }
#endif
  if constexpr (sizeof(E) == 1) {
    TransposeByteTile(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(dst), r0, r1, c0, c1, cs, rs);
    return;
  }
  for (; r < r1; ++r) {
    const E* s = src + r;
    E* d = dst + r * rs;
    for (int64_t c = c0; c < c1; ++c) d[c] = s[c * cs];
  }
}

// The tile edge of TransposeTile's callers: square tiles whose strided reads and
// contiguous writes stay in cache.
template <typename E>
constexpr int64_t kTransposeTile = sizeof(E) == 4 ? 32 : (64 / sizeof(E) < 8 ? 8 : 64 / sizeof(E));

// dst[b][j][i] = src[b][i][j] for b < batches, i < rows, j < cols: each of `batches`
// row-major [rows, cols] matrices transposed, in tiles shared out over the compute
// threads (NCHW -> NHWC with rows C and cols H * W; NHWC -> NCHW the other way round).
// The threads split the longer side, each taking whole strips of kTile along it: split
// along the shorter, two threads would read alternate halves of the same rows.
template <typename E>
void TransposeMatrices(const E* src, E* dst, int64_t batches, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = kTransposeTile<E>;
  const bool by_rows = rows > cols;
  const int64_t strip_len = by_rows ? cols : rows;  // each strip: kTile x strip_len
  const int64_t strips = ((by_rows ? rows : cols) + kTile - 1) / kTile;
  // About 64 KiB of elements a part at least.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / static_cast<int64_t>(sizeof(E)) /
                                                 std::max<int64_t>(1, strip_len * kTile));
  ParallelFor(batches * strips, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / strips, k0 = t % strips * kTile;
      const E* s = src + b * rows * cols;
      E* d = dst + b * rows * cols;
      // TransposeTile's rows are the source's columns: dst[j * rows + i] = s[i * cols + j].
      if (by_rows) {
        const int64_t r1 = std::min(rows, k0 + kTile);
        for (int64_t c0 = 0; c0 < cols; c0 += kTile) TransposeTile(s, d, c0, std::min(cols, c0 + kTile), k0, r1, cols, rows);
      } else {
        const int64_t c1 = std::min(cols, k0 + kTile);
        for (int64_t r0 = 0; r0 < rows; r0 += kTile) TransposeTile(s, d, k0, c1, r0, std::min(rows, r0 + kTile), cols, rows);
      }
    }
  });
}

}  // namespace remex::kernels::internal

#endif  // REMEX_KERNELS_OPS_TENSOR_TRANSPOSE_TILES_H_
