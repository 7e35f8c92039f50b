// Einsum's index plan and its evaluation (ONNX Einsum-12), written once for the CPU
// kernel (kernels/ops/math/einsum.cc) and the CUDA kernel
// (kernels/ops/math/cuda/math_impl.cu). The plan is computed on the host from the
// equation (kernels/ops/math/einsum.cc, EinsumPlanOf) and passed to the CUDA kernel by
// value. A plain header: no CUDA, no Remex headers.
//
// Each output element is computed on its own: the sum, over every combination of the
// summed (contracted) indices in row-major order, of the product of the inputs'
// elements at those indices. Each input's element offset is the dot product of the
// indices with the input's strides per index (0 where the input lacks the index or
// broadcasts it; a label repeated within a term adds its strides, which walks the
// diagonal).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define REMEX_EINSUM_FN __host__ __device__ __forceinline__
#else
#define REMEX_EINSUM_FN inline
#endif

namespace remex::kernels::einsum {

constexpr int kMaxInputs = 8;
constexpr int kMaxIndices = 16;  // Output indices, and summed indices, each.

struct EinsumPlan {
  int num_inputs = 0;
  int out_rank = 0, sum_rank = 0;
  int64_t out_dims[kMaxIndices] = {}, sum_dims[kMaxIndices] = {};
  // Per input: its element stride along each output index and each summed index.
  int64_t out_strides[kMaxInputs][kMaxIndices] = {};
  int64_t sum_strides[kMaxInputs][kMaxIndices] = {};
  int64_t out_total = 1, sum_total = 1;
};

// Each input's offset for output element o (row-major over out_dims), in `base`.
REMEX_EINSUM_FN void EinsumBase(const EinsumPlan& p, int64_t o, int64_t* base) {
  for (int k = 0; k < p.num_inputs; ++k) base[k] = 0;
  for (int d = p.out_rank - 1; d >= 0; --d) {
    const int64_t i = o % p.out_dims[d];
    o /= p.out_dims[d];
    for (int k = 0; k < p.num_inputs; ++k) base[k] += i * p.out_strides[k][d];
  }
}

// Input k's offset for summed combination s (row-major over sum_dims) from `base`.
REMEX_EINSUM_FN int64_t EinsumOffset(const EinsumPlan& p, int k, int64_t base, int64_t s) {
  for (int d = p.sum_rank - 1; d >= 0; --d) {
    base += (s % p.sum_dims[d]) * p.sum_strides[k][d];
    s /= p.sum_dims[d];
  }
  return base;
}

// Output element o: `Load(k, offset)` reads input k as the accumulator type A, whose
// products and sums (A's own arithmetic: double for the float dtypes, the unsigned
// type of an integer dtype so that it wraps) run in the order above.
template <typename A, typename LoadFn>
REMEX_EINSUM_FN A EinsumElement(const EinsumPlan& p, int64_t o, LoadFn load) {
  int64_t base[kMaxInputs];
  EinsumBase(p, o, base);
  A sum = A(0);
  for (int64_t s = 0; s < p.sum_total; ++s) {
    A prod = A(1);
    for (int k = 0; k < p.num_inputs; ++k)
      prod = static_cast<A>(prod * load(k, EinsumOffset(p, k, base[k], s)));
    sum = static_cast<A>(sum + prod);
  }
  return sum;
}

}  // namespace remex::kernels::einsum

#undef REMEX_EINSUM_FN
