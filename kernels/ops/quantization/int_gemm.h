// The integer GEMM under MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv on the
// CPU (qlinear.cc).
#pragma once

#include <cstdint>
#include <vector>

namespace remex::kernels::internal {

// c [m, n] = a [m, k] . b [k, n], all row-major, for int16 operands whose zero points are
// already subtracted (|value| <= 255, from uint8 or int8 data), each c element the exact
// sum modulo 2^32 (as ONNX's int32 output of MatMulInteger and ConvInteger wraps; the
// same sums quant::MatMulIntegerAt and ConvIntegerAt compute one element at a time on
// CUDA). With AVX2 the products are summed in pairs by vpmaddwd, exactly (|pair| <=
// 130050): no 8-bit intermediate saturates, unlike the u8 x s8 instruction
// (vpmaddubsw). Runs on the compute threads (ParallelFor) when the product is large
// enough; n, k or m of 0 is allowed (c all zeros, or nothing).
void IntGemm(const int16_t* a, const int16_t* b, uint32_t* c, int64_t m, int64_t k, int64_t n);

// b [k, n] (as IntGemm's) in the form IntGemmPacked reads: with AVX2 its panels of 16
// columns as interleaved pairs of rows, else b as it is. Packed once, it serves any
// number of products by the same b (a constant weight: MatMulInteger's B).
struct IntGemmPackedB {
  std::vector<int16_t> data;
  int64_t k = 0, n = 0;
};
IntGemmPackedB PackIntGemmB(const int16_t* b, int64_t k, int64_t n);

// IntGemm with b packed by PackIntGemmB (k and n are b's).
void IntGemmPacked(const int16_t* a, const IntGemmPackedB& b, uint32_t* c, int64_t m);

// a [m, k] (as IntGemm's) in the form the product reads: with AVX2 its rows as pairs of
// int16 in int32 (rows padded to the tile's 4), else a as it is. Packed once, it serves
// any number of products by the same a (a constant weight: ConvInteger's W).
struct IntGemmPackedA {
  std::vector<uint32_t> pairs;  // AVX2
  std::vector<int16_t> plain;   // without AVX2
  int64_t m = 0, k = 0;
};
IntGemmPackedA PackIntGemmA(const int16_t* a, int64_t m, int64_t k);

// IntGemm of a packed a and a packed b (a.k must be b.k); c is [a.m, b.n].
void IntGemmPackedAB(const IntGemmPackedA& a, const IntGemmPackedB& b, uint32_t* c);

// The same product by a portable loop, on the calling thread: what IntGemm runs without
// AVX2, and the reference its tests compare with.
void IntGemmPortable(const int16_t* a, const int16_t* b, uint32_t* c, int64_t m, int64_t k, int64_t n);

// Whether IntGemm takes the AVX2 path on this CPU.
bool IntGemmUsesAvx2();

}  // namespace remex::kernels::internal
