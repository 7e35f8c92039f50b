// Transpose: shape function and CPU kernel (ONNX semantics; every dtype Remex holds).
//
// Transpose(data) -> [data.shape[perm[i]]]
//   https://onnx.ai/onnx/operators/onnx__Transpose.html. Attribute perm (default: the
//   dims reversed) must be a permutation of [0, rank).

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/tensor/transpose_tiles.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {

#if defined(__SSE2__)
namespace {

// 16 x 16 bytes in registers: dst[j * ds + i] = src[i * ss + j]. Four rounds of
// interleaves (bytes, then 2-, 4- and 8-byte units of rows ever further apart) leave
// column 8h + 4g + 2e + f in the f-th half of round four's (h, g, e) result.
inline __attribute__((always_inline)) void TransposeBytes16x16(const uint8_t* src, int64_t ss, uint8_t* dst,
                                                               int64_t ds) {
  __m128i a[16], b[16], c[16], d[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ss));
  // b[2p + h]: columns 8h.. of rows 2p, 2p + 1 (16-bit units).
  for (int p = 0; p < 8; ++p) {
    b[2 * p] = _mm_unpacklo_epi8(a[2 * p], a[2 * p + 1]);
    b[2 * p + 1] = _mm_unpackhi_epi8(a[2 * p], a[2 * p + 1]);
  }
  // c[4q + 2h + g]: columns 8h + 4g.. of rows 4q..4q + 3 (32-bit units).
  for (int q = 0; q < 4; ++q) {
    for (int h = 0; h < 2; ++h) {
      c[4 * q + 2 * h] = _mm_unpacklo_epi16(b[4 * q + h], b[4 * q + 2 + h]);
      c[4 * q + 2 * h + 1] = _mm_unpackhi_epi16(b[4 * q + h], b[4 * q + 2 + h]);
    }
  }
  // d[8o + 4h + 2g + e]: columns 8h + 4g + 2e.. of rows 8o..8o + 7 (64-bit units).
  for (int o = 0; o < 2; ++o) {
    for (int hg = 0; hg < 4; ++hg) {
      d[8 * o + 2 * hg] = _mm_unpacklo_epi32(c[8 * o + hg], c[8 * o + 4 + hg]);
      d[8 * o + 2 * hg + 1] = _mm_unpackhi_epi32(c[8 * o + hg], c[8 * o + 4 + hg]);
    }
  }
  for (int k = 0; k < 8; ++k) {  // k = 4h + 2g + e: columns 2k and 2k + 1, all 16 rows
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k) * ds), _mm_unpacklo_epi64(d[k], d[8 + k]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k + 1) * ds), _mm_unpackhi_epi64(d[k], d[8 + k]));
  }
}

}  // namespace
#endif

REMEX_CPU_CLONES void TransposeByteTile(const uint8_t* src, uint8_t* dst, int64_t r0, int64_t r1, int64_t c0,
                                        int64_t c1, int64_t cs, int64_t rs) {
  int64_t r = r0;
#if defined(__SSE2__)
  for (; r + 16 <= r1; r += 16) {
    int64_t c = c0;
    for (; c + 16 <= c1; c += 16) TransposeBytes16x16(src + c * cs + r, cs, dst + r * rs + c, rs);
    for (; c < c1; ++c) {
      for (int64_t i = 0; i < 16; ++i) dst[(r + i) * rs + c] = src[c * cs + r + i];
    }
  }
#endif
  for (; r < r1; ++r) {
    for (int64_t c = c0; c < c1; ++c) dst[r * rs + c] = src[c * cs + r];
  }
}

namespace {

// ---------------------------------------------------------------------------
// Transpose.

StatusOr<std::vector<int64_t>> TransposePerm(const Attributes& attrs, int64_t rank) {
  constexpr std::string_view op = "Transpose";
  std::vector<int64_t> perm;
  if (attrs.Has("perm")) {
    StatusOr<std::vector<int64_t>> p = attrs.Ints("perm");
    if (!p.ok()) return OpError(op, p.status().message());
    perm = *p;
    if (static_cast<int64_t>(perm.size()) != rank) {
      return OpError(op, "perm has " + Str(static_cast<int64_t>(perm.size())) +
                             " values, input has rank " + Str(rank));
    }
    std::vector<bool> seen(perm.size(), false);
    for (int64_t v : perm) {
      if (v < 0 || v >= rank || seen[v]) {
        return OpError(op, "perm is not a permutation of [0, " + Str(rank) + ")");
      }
      seen[v] = true;
    }
  } else {
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  }
  return perm;
}

StatusOr<std::vector<TensorInfo>> InferTranspose(const Attributes& attrs,
                                                 std::span<const ShapeFnArg> in) {
  const Shape& s = in[0].shape;
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                         TransposePerm(attrs, static_cast<int64_t>(s.size())));
  Shape out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[perm[i]];
  return std::vector<TensorInfo>{{in[0].dtype, out}};
}

OpDef TransposeDef() {
  OpDef def;
  def.name = "Transpose";
  def.input_deps = {ShapeDep::kShape};
  def.infer = InferTranspose;
  return def;
}

// Transposes with the input's contiguous dim at output dim j and another dim last:
// per combination of the other dims, a 2-D transpose in square tiles so that both
// the strided reads and the contiguous writes stay in cache.
template <typename E>
void TiledTranspose(const E* src, E* dst, const StridedPlan& p, size_t j, int64_t total) {
  constexpr int64_t kTile = kTransposeTile<E>;
  const size_t k = p.dims.size();
  std::vector<int64_t> out_stride(k);
  int64_t acc = 1;
  for (size_t i = k; i-- > 0;) {
    out_stride[i] = acc;
    acc *= p.dims[i];
  }
  // The outer dims: all but j and the last.
  StridedPlan outer;
  std::vector<int64_t> outer_out_stride;
  for (size_t i = 0; i + 1 < k; ++i) {
    if (i == j) continue;
    outer.dims.push_back(p.dims[i]);
    outer.strides.push_back(p.strides[i]);
    outer_out_stride.push_back(out_stride[i]);
  }
  const int64_t rows = p.dims[j];          // Contiguous in the input.
  const int64_t cols = p.dims[k - 1];      // Contiguous in the output.
  const int64_t col_stride = p.strides[k - 1];
  const int64_t row_stride = out_stride[j];
  const int64_t per_outer = rows * cols;
  const size_t n_outer = outer.dims.size();
  std::vector<int64_t> idx(n_outer, 0);
  int64_t in_off = 0;
  for (int64_t done = 0; done < total; done += per_outer) {
    int64_t out_off = 0;
    for (size_t i = 0; i < n_outer; ++i) out_off += idx[i] * outer_out_stride[i];
    const E* s0 = src + in_off;
    E* d0 = dst + out_off;
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        TransposeTile(s0, d0, r0, r1, c0, c1, col_stride, row_stride);
      }
    }
    Step(outer, n_outer, idx, in_off);
  }
}

class TransposeKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& s = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                           TransposePerm(attrs(), static_cast<int64_t>(s.size())));
    const int64_t total = *NumElements(s);
    if (total == 0) return OkStatus();
    const std::vector<int64_t> in_stride = RowMajorStrides(s);
    std::vector<int64_t> dims(s.size()), strides(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      dims[i] = s[perm[i]];
      strides[i] = in_stride[perm[i]];
    }
    const StridedPlan p = Coalesce(dims, strides);
    return DispatchBySize(op(), in[0].dtype, [&](auto tag) -> Status {
      using E = typename decltype(tag)::type;
      const E* x = DataAs<const E>(in[0]);
      E* y = DataAs<E>(out[0]);
      if (p.dims.empty() || p.strides.back() == 1) {
        StridedCopy(x, y, p, total);
        return OkStatus();
      }
      size_t j = 0;
      while (p.strides[j] != 1) ++j;  // The input's innermost dim (extent > 1) is kept.
      const size_t k = p.dims.size();
      if (k == 2 && j == 0 && p.strides[1] == p.dims[0]) {
        // One row-major [dims[1], dims[0]] matrix (NCHW <-> NHWC of one image): in tiles
        // shared out over the compute threads.
        TransposeMatrices(x, y, 1, p.dims[1], p.dims[0]);
        return OkStatus();
      }
      if (k == 3 && j == 1 && p.strides[2] == p.dims[1] && p.strides[0] == p.dims[1] * p.dims[2]) {
        TransposeMatrices(x, y, p.dims[0], p.dims[2], p.dims[1]);  // a batch of them
        return OkStatus();
      }
      TiledTranspose(x, y, p, j, total);
      return OkStatus();
    });
  }
};

}  // namespace

Status AddTransposeOpDefs(KernelRegistry& registry) {
  return registry.AddOp(TransposeDef());
}

Status AddTransposeCpuKernels(KernelRegistry& registry) {
  return AddCpuKernel<TransposeKernel>(registry, "Transpose");
}

}  // namespace remex::kernels::internal
