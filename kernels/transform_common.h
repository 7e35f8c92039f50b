// Helpers shared by the data-movement kernels (transform.cc, pad.cc, generate.cc,
// depth_space.cc): attribute reads and index-like inputs with errors naming the op,
// the size checks of outputs grown from input values, and the strided copy that
// Transpose, Expand and Tile write their outputs with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/internal.h"

namespace remex::kernels::internal {

// The indices of GatherElements and ScatterElements: int32 or int64, data's rank, each
// dim but `axis` at most data's. Gives the axis normalised to [0, rank).
// INVALID_ARGUMENT "<op>: ..." otherwise.
inline StatusOr<int64_t> CheckElementsIndices(std::string_view op, const ShapeFnArg& data, const ShapeFnArg& indices,
                                              int64_t axis) {
  const Shape& s = data.shape;
  const Shape& is = indices.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) return OpError(op, "data must have rank >= 1");
  if (indices.dtype != DType::kInt32 && indices.dtype != DType::kInt64) {
    return OpError(op, "indices must be int32 or int64, got " + std::string(DTypeName(indices.dtype)));
  }
  if (is.size() != s.size()) {
    return OpError(op, "indices " + ShapeToString(is) + " must have data's rank, data is " + ShapeToString(s));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(op, axis, rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != a && is[d] > s[d]) {
      return OpError(op, "indices " + ShapeToString(is) + " exceed data " + ShapeToString(s) + " in dim " +
                             std::to_string(d));
    }
  }
  return a;
}

// attrs.Int with errors naming the op.
inline StatusOr<int64_t> IntAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                          int64_t default_value) {
  StatusOr<int64_t> v = attrs.Int(name, default_value);
  if (!v.ok()) return OpError(op, v.status().message());
  return *v;
}

inline std::string Str(int64_t v) { return std::to_string(v); }

// Calls f(TypeTag<U>) with the unsigned integer type of an element's size: the kernels
// that only move elements copy them as raw bits.
template <typename F>
Status DispatchBySize(std::string_view op, DType dtype, F&& f) {
  switch (DTypeSize(dtype)) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: break;
  }
  return Unimplemented(std::string(op) + ": unsupported dtype " + std::string(DTypeName(dtype)));
}

// An output grown from input values (Expand, Tile, Pad, Range, ConstantOfShape): its
// element count and byte size must be representable.
inline Status CheckOutputSize(std::string_view op, DType dtype, const Shape& shape) {
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, shape));
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(DTypeSize(dtype)), &bytes)) {
    return OpError(op, "output " + ShapeToString(shape) + " is too large");
  }
  return OkStatus();
}

// Checks that an index-like input is present, 1-D (or scalar) int32/int64 with data.
inline StatusOr<std::vector<int64_t>> ReadInts(std::string_view op, std::string_view what,
                                        const ShapeFnArg& arg) {
  if (!arg.present) return OpError(op, std::string(what) + " is absent");
  return ReadIndexTensor(op, what, arg.dtype, arg.shape, arg.data);
}


// An output walk: output dims (row-major, contiguous) with the input element stride
// of each (0 = broadcast), after dropping extent-1 dims and merging dims that the
// input also walks contiguously.
struct StridedPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

inline StridedPlan Coalesce(std::span<const int64_t> dims, std::span<const int64_t> strides) {
  StridedPlan p;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!p.dims.empty() && p.strides.back() == strides[i] * dims[i]) {
      p.dims.back() *= dims[i];
      p.strides.back() = strides[i];
    } else {
      p.dims.push_back(dims[i]);
      p.strides.push_back(strides[i]);
    }
  }
  return p;
}

// Advances an odometer over dims [0, n) of `p`, updating the input offset.
inline void Step(const StridedPlan& p, size_t n, std::vector<int64_t>& idx, int64_t& off) {
  for (size_t k = n; k-- > 0;) {
    off += p.strides[k];
    if (++idx[k] < p.dims[k]) return;
    off -= p.strides[k] * p.dims[k];
    idx[k] = 0;
  }
}

// Writes the output described by `p` (all `total` elements) from `src`: rows of the
// innermost dim are copied with memcpy (stride 1), filled (stride 0) or gathered.
template <typename E>
inline void StridedCopy(const E* src, E* dst, const StridedPlan& p, int64_t total) {
  if (total == 0) return;
  if (p.dims.empty()) {
    dst[0] = src[0];
    return;
  }
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  const int64_t is = p.strides[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < total; o += inner) {
    const E* s = src + off;
    E* d = dst + o;
    if (is == 1) {
      std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(E));
    } else if (is == 0) {
      std::fill(d, d + inner, *s);
    } else {
      for (int64_t i = 0; i < inner; ++i) d[i] = s[i * is];
    }
    Step(p, r - 1, idx, off);
  }
}

}  // namespace remex::kernels::internal
