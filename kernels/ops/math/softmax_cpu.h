// The CPU Softmax kernel's float32 row loop, shared with FusedAttention
// (kernels/ops/math/attention.cc): compiled for AVX-512 and AVX2 as well
// (REMEX_CPU_CLONES), in softmax.cc.
#pragma once

#include <cstdint>

namespace remex::kernels::internal {

// Softmax (or LogSoftmax, `log`) of `rows` contiguous float32 rows of `n` > 0 elements,
// x to y (y may be x): y = exp(x - max) / sum(exp(x - max)) along each row, max
// skipping NaN (ONNX Softmax-13 along the last axis). The max and the sum run in 16
// independent lanes, added in a fixed order, with no fused multiply-adds, so that every
// clone rounds alike.
void SoftmaxRowsFloat32(const float* x, float* y, int64_t rows, int64_t n, bool log);

}  // namespace remex::kernels::internal
