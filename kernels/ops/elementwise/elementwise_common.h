// Helpers shared by the elementwise kernels (elementwise.cc: binary, variadic and
// ternary ops; unary.cc: unary ops, Clip, Dropout): numpy broadcast iteration, dtype
// checks, the OpTraits every elementwise op carries and kernel registration by name.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/internal.h"

namespace remex::kernels::internal {

inline std::string DTypeStr(DType dt) { return std::string(DTypeName(dt)); }

// ---------------------------------------------------------------------------
// Broadcast iteration.

// Iteration plan over the numpy broadcast of N inputs to `out`: dims of extent 1 in
// the output dropped, adjacent dims with the same broadcast pattern merged. Strides are
// in elements, 0 where the input broadcasts. `dims` is never empty.
template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
};

// Every input's rank is at most out's, and each input dim is 1 or out's (the shape
// functions have checked this).
template <size_t N>
BroadcastPlan<N> MakePlan(const std::array<const Shape*, N>& in, const Shape& out) {
  static_assert(N <= 32);
  const size_t rank = out.size();
  std::vector<int64_t> dims;
  std::vector<uint32_t> pattern;  // Bit k: input k broadcasts along the dim.
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    uint32_t p = 0;
    for (size_t k = 0; k < N; ++k) {
      const Shape& s = *in[k];
      const size_t lead = rank - s.size();
      if ((i < lead ? 1 : s[i - lead]) == 1) p |= uint32_t{1} << k;
    }
    if (!dims.empty() && pattern.back() == p) {
      dims.back() *= out[i];
    } else {
      dims.push_back(out[i]);
      pattern.push_back(p);
    }
  }
  if (dims.empty()) {  // A single element.
    dims.push_back(1);
    pattern.push_back((uint32_t{1} << N) - 1);
  }
  BroadcastPlan<N> plan;
  plan.dims = std::move(dims);
  for (size_t k = 0; k < N; ++k) {
    std::vector<int64_t>& st = plan.strides[k];
    st.resize(plan.dims.size());
    int64_t s = 1;
    for (size_t j = plan.dims.size(); j-- > 0;) {
      const bool bcast = (pattern[j] >> k) & 1;
      st[j] = bcast ? 0 : s;
      if (!bcast) s *= plan.dims[j];
    }
  }
  return plan;
}

// Calls body(offsets, o, inner) for each row of the plan's innermost dim: outputs
// [o, o + inner), input k starting at element offsets[k] with stride strides[k].back().
template <size_t N, typename Body>
void ForEachRow(const BroadcastPlan<N>& plan, Body&& body) {
  const size_t r = plan.dims.size();
  const int64_t inner = plan.dims[r - 1];
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < r; ++k) rows *= plan.dims[k];
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  for (int64_t row = 0, o = 0; row < rows; ++row, o += inner) {
    body(off, o, inner);
    // Advance the outer index (dims 0..r-2).
    for (size_t k = r - 1; k-- > 0;) {
      for (size_t j = 0; j < N; ++j) off[j] += plan.strides[j][k];
      if (++idx[k] < plan.dims[k]) break;
      for (size_t j = 0; j < N; ++j) off[j] -= plan.strides[j][k] * plan.dims[k];
      idx[k] = 0;
    }
  }
}

// out = f(a, b) elementwise, a and b broadcast (numpy) to out_shape, which may be larger
// than their own broadcast (variadic ops). f takes and returns storage types. `out` may
// alias an input of out's element count (same index, read before written).
template <typename A, typename B, typename O, typename F>
void BroadcastBinary(const A* a, const Shape& a_shape, const B* b, const Shape& b_shape, O* out,
                     const Shape& out_shape, F f) {
  const int64_t n = *NumElements(out_shape);
  if (n == 0) return;
  const int64_t na = *NumElements(a_shape);
  const int64_t nb = *NumElements(b_shape);
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    return;
  }
  if (na == n && nb == 1) {
    const B bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
    return;
  }
  if (na == 1 && nb == n) {
    const A av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(av, b[i]);
    return;
  }
  const BroadcastPlan<2> plan = MakePlan<2>({&a_shape, &b_shape}, out_shape);
  const int64_t ia = plan.strides[0].back();
  const int64_t ib = plan.strides[1].back();
  ForEachRow(plan, [&](const std::array<int64_t, 2>& off, int64_t o, int64_t inner) {
    const A* pa = a + off[0];
    const B* pb = b + off[1];
    O* po = out + o;
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], pb[i]);
    } else if (ia == 1) {
      const B bv = *pb;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], bv);
    } else if (ib == 1) {
      const A av = *pa;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(av, pb[i]);
    } else {  // Both broadcast along the dim (a third input does not).
      const O v = f(*pa, *pb);
      for (int64_t i = 0; i < inner; ++i) po[i] = v;
    }
  });
}

// Shape of the numpy broadcast of every input (all present).
inline StatusOr<Shape> BroadcastAll(std::string_view op, std::span<const ShapeFnArg> in) {
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    REMEX_ASSIGN_OR_RETURN(out, BroadcastShapes(op, out, in[i].shape));
  }
  return out;
}

inline Status CheckAllPresent(std::string_view op, std::span<const ShapeFnArg> in) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) return OpError(op, "input " + std::to_string(i) + " is absent");
  }
  return OkStatus();
}

inline Status CheckSameDTypes(std::string_view op, std::span<const ShapeFnArg> in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return OpError(op, "input dtypes differ: " + DTypeStr(in[0].dtype) + " (input 0) and " +
                             DTypeStr(in[i].dtype) + " (input " + std::to_string(i) + ")");
    }
  }
  return OkStatus();
}


// Two's-complement negation of an integer without signed-overflow UB.
template <typename C>
inline C WrapNeg(C v) {
  return static_cast<C>(uint64_t{0} - static_cast<uint64_t>(v));
}

// Traits of an elementwise op, FusedElementwise's `opcode` when fusable.
inline OpTraits ElementwiseTraits(std::optional<FusedOpcode> opcode = std::nullopt, std::vector<ScalarParam> params = {}) {
  OpTraits t;
  t.elementwise = true;
  t.layout_agnostic = true;
  t.fused_opcode = opcode;
  t.params = std::move(params);
  return t;
}

}  // namespace remex::kernels::internal
