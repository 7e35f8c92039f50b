// IntGemm (int_gemm.h): its AVX2 path, its portable loop and the product by a packed b
// (PackIntGemmB, IntGemmPacked) against sums computed in
// int64 one element at a time, at shapes that leave partial tiles, odd k and extreme
// values (|value| = 255 everywhere: each vpmaddwd pair is 130050, beyond int16).
#include "kernels/ops/quantization/int_gemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace remex::kernels::internal {
namespace int_gemm_test {

std::vector<uint32_t> Naive(const std::vector<int16_t>& a, const std::vector<int16_t>& b, int64_t m, int64_t k,
                            int64_t n) {
  std::vector<uint32_t> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += int64_t{a[i * k + kk]} * b[kk * n + j];
      c[i * n + j] = static_cast<uint32_t>(s);
    }
  }
  return c;
}

struct Case {
  int64_t m, k, n;
};

void Check(const Case& s, int fill) {
  std::mt19937 rng(static_cast<uint32_t>(s.m * 131 + s.k * 7 + s.n));
  std::uniform_int_distribution<int> value(-255, 255);
  std::vector<int16_t> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n));
  for (auto& v : a) v = static_cast<int16_t>(fill ? fill : value(rng));
  for (auto& v : b) v = static_cast<int16_t>(fill ? -fill : value(rng));
  const std::vector<uint32_t> want = Naive(a, b, s.m, s.k, s.n);
  std::vector<uint32_t> fast(want.size(), 0xdeadbeefu), portable(want.size(), 0xdeadbeefu);
  IntGemm(a.data(), b.data(), fast.data(), s.m, s.k, s.n);
  IntGemmPortable(a.data(), b.data(), portable.data(), s.m, s.k, s.n);
  // b packed once serves two products with different a.
  const IntGemmPackedB packed = PackIntGemmB(b.data(), s.k, s.n);
  std::vector<uint32_t> from_packed(want.size(), 0xdeadbeefu);
  IntGemmPacked(a.data(), packed, from_packed.data(), s.m);
  std::vector<int16_t> a2(a.rbegin(), a.rend());
  std::vector<uint32_t> from_packed2(want.size(), 0xdeadbeefu);
  IntGemmPacked(a2.data(), packed, from_packed2.data(), s.m);
  const std::string where = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                            (fill ? " filled with +-" + std::to_string(fill) : " random");
  EXPECT_EQ(fast, want) << where << (IntGemmUsesAvx2() ? " (AVX2 path)" : " (portable path)");
  EXPECT_EQ(portable, want) << where;
  EXPECT_EQ(from_packed, want) << where << " (packed b)";
  EXPECT_EQ(from_packed2, Naive(a2, b, s.m, s.k, s.n)) << where << " (packed b, second a)";
  // Both packed.
  std::vector<uint32_t> both(want.size(), 0xdeadbeefu);
  IntGemmPackedAB(PackIntGemmA(a.data(), s.m, s.k), packed, both.data());
  EXPECT_EQ(both, want) << where << " (packed a and b)";
}

TEST(IntGemmTest, MatchesExactSumsAtEveryTileRemainder) {
  for (const Case& s : {Case{1, 1, 1}, Case{1, 2, 16}, Case{3, 5, 7}, Case{4, 16, 16}, Case{5, 33, 17},
                        Case{8, 64, 32}, Case{37, 257, 50}, Case{1, 1024, 2048}, Case{130, 300, 129}}) {
    Check(s, 0);
  }
}

TEST(IntGemmTest, ExtremeValuesSumExactly) {
  // 255 * -255 in every product: each pair is -130050 and the sums reach -2^31 and wrap at k = 33038.
  for (const Case& s : {Case{4, 2, 16}, Case{5, 255, 19}, Case{2, 33040, 3}}) Check(s, 255);
}

TEST(IntGemmTest, EmptyDimensions) {
  std::vector<uint32_t> c(6, 7u);
  IntGemm(nullptr, nullptr, c.data(), 2, 0, 3);  // k = 0: every sum is 0
  EXPECT_EQ(c, std::vector<uint32_t>(6, 0u));
  IntGemm(nullptr, nullptr, nullptr, 0, 5, 3);  // nothing to write
  IntGemm(nullptr, nullptr, nullptr, 2, 5, 0);
}

}  // namespace int_gemm_test
}  // namespace remex::kernels::internal
