// float16 conversions.

#include "kernels/float16.h"
#include "kernels/float16_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace remex::kernels {
namespace float16_test {

TEST(Float16Test, ExactValues) {
  EXPECT_EQ(FloatToHalf(0.0f).bits, 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f).bits, 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f).bits, 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f).bits, 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f).bits, 0x7bff);
  EXPECT_EQ(FloatToHalf(6.103515625e-05f).bits, 0x0400);         // Smallest normal.
  EXPECT_EQ(FloatToHalf(5.9604644775390625e-08f).bits, 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
  const Half nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan.bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan.bits & 0x3ff, 0);
  EXPECT_EQ(DoubleToHalf(0.333251953125).bits, 0x3555);
}

TEST(Float16Test, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)).bits, 0x3c01);
  // Overflow: 65520 is halfway to 65536 and rounds to infinity; 65519 does not.
  EXPECT_EQ(FloatToHalf(65520.0f).bits, 0x7c00);
  EXPECT_EQ(FloatToHalf(65519.0f).bits, 0x7bff);
  // Subnormal halfway: 2^-25 ties to 0, 3 * 2^-25 ties to 2 * 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)).bits, 0x0000);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)).bits, 0x0002);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25) * 1.5f).bits, 0x0001);
  // Rounding carries from the largest subnormal into the smallest normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)).bits, 0x0400);
  EXPECT_EQ(FloatToHalf(1e-10f).bits, 0x0000);
}

TEST(Float16Test, DoubleRoundsOnce) {
  // x = 1 + 2^-11 + 2^-40: as float it rounds to 1 + 2^-11 (a tie that would then
  // round down to 1), rounded once from double it is above the tie: 1 + 2^-10.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(DoubleToHalf(x).bits, 0x3c01);
  EXPECT_EQ(FloatToHalf(static_cast<float>(x)).bits, 0x3c00);
}

TEST(Float16Test, EveryHalfRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h{static_cast<uint16_t>(b)};
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_EQ(b & 0x7c00, 0x7c00u);
      EXPECT_NE(b & 0x3ff, 0u);
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    ASSERT_EQ(FloatToHalf(f).bits, b) << std::hex << b;
    ASSERT_EQ(DoubleToHalf(static_cast<double>(f)).bits, b) << std::hex << b;
  }
  EXPECT_EQ(HalfToFloat(Half{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(Half{0x03ff}), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(Half{0x7bff}), 65504.0f);
}

// Every float between two adjacent halves maps to the nearer one.
TEST(Float16Test, MatchesBruteForceNearest) {
  uint32_t seed = 12345;
  for (int i = 0; i < 200000; ++i) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t bits = seed;
    // Keep below 65504 (the largest half) to compare with neighbours.
    bits = (bits & 0x80000000u) | ((bits & 0x7fffffffu) % 0x477fe000u);
    float f;
    std::memcpy(&f, &bits, 4);
    const Half h = FloatToHalf(f);
    const double got = HalfToFloat(h);
    const double err = std::fabs(got - f);
    // Neighbours of h must not be strictly nearer.
    for (int delta : {-1, 1}) {
      const int nb = static_cast<int>(h.bits & 0x7fff) + delta;
      if (nb < 0 || nb > 0x7bff) continue;
      const double other = HalfToFloat(Half{static_cast<uint16_t>((h.bits & 0x8000) | nb)});
      ASSERT_LE(err, std::fabs(other - f)) << f;
    }
  }
}

// The bulk conversions (float16_cpu.h, F16C where the CPU has it) give the scalar
// functions' values: every float16 widened, and float32 values narrowed (edges of the
// float16 range, subnormals, ties, overflow, infinities, random bit patterns), with
// lengths that leave a tail for the scalar loop. A NaN only has to stay a NaN.
TEST(Float16Test, BulkConversionsMatchTheScalarOnes) {
  std::vector<Half> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i].bits = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  HalfToFloatN(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = HalfToFloat(all[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(wide[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&wide[i], &want, 4), 0) << "bits " << i;
    }
  }
  std::vector<float> f = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f,
                          6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-9f,
                          1.00048828125f, 1.00146484375f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(5);
  for (int k = 0; k < 200000; ++k) {
    uint32_t bits = rng();
    float v;
    std::memcpy(&v, &bits, 4);
    f.push_back(v);
    f.push_back(std::ldexp(static_cast<float>(rng() % 4096) / 4096.0f + 1.0f, static_cast<int>(rng() % 40) - 26));
  }
  f.push_back(3.0f);  // a tail of three
  f.push_back(-7.5f);
  f.push_back(0.1f);
  std::vector<Half> narrow(f.size());
  FloatToHalfN(f.data(), narrow.data(), static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i) {
    const Half want = FloatToHalf(f[i]);
    if (std::isnan(f[i])) {
      ASSERT_TRUE(std::isnan(HalfToFloat(narrow[i]))) << i;
    } else {
      ASSERT_EQ(narrow[i].bits, want.bits) << "value " << f[i] << " at " << i;
    }
  }
  RecordProperty("f16c", CpuHasF16c() ? "yes" : "no");
}

}  // namespace float16_test
}  // namespace remex::kernels
