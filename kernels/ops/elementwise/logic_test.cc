// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logical ops (And, Or,
// Xor, Not), Where (kernels/ops/elementwise/elementwise.cc) and Dropout (unary.cc): broadcasting, dtypes,
// special values and the shape functions' errors.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "kernels/ops/elementwise/elementwise_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace logic_test {

using testing::Attrs;
using testing::HostTensor;
using testing::FindVersionedKernel;
using testing::OpRunner;
using ewtest::Expand;
using ewtest::kBroadcastCases;
using ewtest::kInf;
using ewtest::kNaN;
using ewtest::Random;
using ewtest::RunFloat;

// ---------------------------------------------------------------------------
// Comparisons and logical ops.

TEST(CompareTest, BroadcastToBool) {
  OpRunner r;
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> small(-2, 2);
  for (const auto& [sa, sb] : kBroadcastCases) {
    std::vector<int64_t> a(*NumElements(sa)), b(*NumElements(sb));
    for (auto& v : a) v = small(rng);
    for (auto& v : b) v = small(rng);
    for (std::string op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
      auto out = r.Run(op, {}, {HostTensor::Of(sa, a), HostTensor::Of(sb, b)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ASSERT_EQ((*out)[0].dtype, DType::kBool);
      const Shape so = (*out)[0].shape;
      const auto ea = Expand(a, sa, so), eb = Expand(b, sb, so);
      const std::vector<uint8_t> got = (*out)[0].bytes;
      for (size_t i = 0; i < got.size(); ++i) {
        const bool want = op == "Equal"         ? ea[i] == eb[i]
                          : op == "Less"        ? ea[i] < eb[i]
                          : op == "Greater"     ? ea[i] > eb[i]
                          : op == "LessOrEqual" ? ea[i] <= eb[i]
                                                : ea[i] >= eb[i];
        ASSERT_EQ(got[i], want ? 1 : 0) << op << " " << i;
      }
    }
  }
}

TEST(CompareTest, FloatsBoolsAndErrors) {
  OpRunner r;
  auto out = r.Run(
      "Equal", {},
      {HostTensor::Of<float>({4}, {1, kNaN, -0.0f, 2}), HostTensor::Of<float>({4}, {1, kNaN, 0.0f, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0, 1, 0}));
  out = r.Run("Less", {},
              {HostTensor::Of<Half>({2}, {FloatToHalf(1), FloatToHalf(3)}),
               HostTensor::Of<Half>({}, {FloatToHalf(2)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0}));
  // NaN is neither <= nor >= anything.
  out = r.Run("LessOrEqual", {}, {HostTensor::Of<float>({3}, {1, kNaN, 2}), HostTensor::Of<float>({3}, {1, 0, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0, 0}));
  out = r.Run("GreaterOrEqual", {}, {HostTensor::Of<float>({3}, {1, kNaN, 2}), HostTensor::Of<float>({3}, {1, 0, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0, 1}));
  out = r.Run("Greater", {},
              {HostTensor::Of<uint32_t>({2}, {UINT32_MAX, 0}), HostTensor::Of<uint32_t>({}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0}));
  out = r.Run("Equal", {},
              {HostTensor::Of<bool>({4}, {true, true, false, false}),
               HostTensor::Of<bool>({4}, {true, false, true, false})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0, 0, 1}));
  // Less and Greater take numbers only; dtypes must match.
  EXPECT_EQ(r.Infer("Less", {}, {HostTensor::Zeros(DType::kBool, {2}), HostTensor::Zeros(DType::kBool, {2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      r.Infer("Equal", {}, {HostTensor::Zeros(DType::kInt32, {2}), HostTensor::Zeros(DType::kInt64, {2})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
}

TEST(LogicalTest, NotAndOrXor) {
  OpRunner r;
  auto out = r.Run("Not", {}, {HostTensor::Of<bool>({3}, {true, false, true})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{0, 1, 0}));
  const HostTensor a = HostTensor::Of<bool>({2, 2}, {true, true, false, false});
  const HostTensor b = HostTensor::Of<bool>({2}, {true, false});
  out = r.Run("And", {}, {a, b});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 0, 0, 0}));
  out = r.Run("Or", {}, {a, b});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 1, 1, 0}));
  out = r.Run("Xor", {}, {a, b});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{0, 1, 1, 0}));
  for (const char* op : {"And", "Or", "Xor"}) {
    EXPECT_EQ(r.Infer(op, {}, {HostTensor::Zeros(DType::kInt32, {2}), HostTensor::Zeros(DType::kInt32, {2})})
                  .status()
                  .code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(r.Infer("Not", {}, {HostTensor::Zeros(DType::kFloat32, {2})}).status().code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Where.

TEST(WhereTest, ThreeWayBroadcast) {
  OpRunner r;
  std::mt19937 rng(17);
  const std::vector<std::vector<Shape>> cases = {
      {{2, 3}, {2, 3}, {2, 3}}, {{2, 1}, {3}, {}}, {{1, 4}, {3, 1}, {2, 1, 1}},
      {{}, {2}, {2}},           {{5}, {1}, {1}},   {{}, {}, {}}};
  for (const auto& s : cases) {
    std::vector<uint8_t> c(*NumElements(s[0]));
    for (auto& v : c) v = rng() & 1;
    std::vector<int64_t> x(*NumElements(s[1])), y(*NumElements(s[2]));
    for (auto& v : x) v = static_cast<int64_t>(rng());
    for (auto& v : y) v = -static_cast<int64_t>(rng());
    HostTensor ct = HostTensor::Zeros(DType::kBool, s[0]);
    ct.bytes = c;
    auto out = r.Run("Where", {}, {ct, HostTensor::Of(s[1], x), HostTensor::Of(s[2], y)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Shape so = (*out)[0].shape;
    const auto ec = Expand(c, s[0], so);
    const auto ex = Expand(x, s[1], so), ey = Expand(y, s[2], so);
    const auto got = (*out)[0].Values<int64_t>();
    ASSERT_EQ(got.size(), ec.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], ec[i] ? ex[i] : ey[i]) << i;
  }
}

TEST(WhereTest, DTypes) {
  OpRunner r;
  const HostTensor c = HostTensor::Of<bool>({3}, {true, false, true});
  auto out = r.Run("Where", {}, {c, HostTensor::Of<float>({3}, {1, 2, 3}), HostTensor::Of<float>({}, {-1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, -1, 3}));
  out = r.Run("Where", {}, {c, HostTensor::Of<bool>({1}, {false}), HostTensor::Of<bool>({1}, {true})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kBool);
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{0, 1, 0}));
  out = r.Run("Where", {},
              {c, HostTensor::Of<Half>({1}, {FloatToHalf(2)}),
               HostTensor::Of<Half>({3}, {FloatToHalf(5), FloatToHalf(6), FloatToHalf(7)})});
  ASSERT_TRUE(out.ok());
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(h[0]), 2.0f);
  EXPECT_EQ(HalfToFloat(h[1]), 6.0f);
  EXPECT_EQ(r.Infer("Where", {},
                    {HostTensor::Zeros(DType::kInt32, {3}), HostTensor::Zeros(DType::kFloat32, {3}),
                     HostTensor::Zeros(DType::kFloat32, {3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Where", {},
                    {c, HostTensor::Zeros(DType::kFloat32, {3}), HostTensor::Zeros(DType::kFloat64, {3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Where", {},
                    {c, HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Dropout.

TEST(DropoutTest, InferenceIsTheIdentity) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({2, 2}, {1, -2, 3, kNaN});
  // Dropout-13 with and without the mask, ratio and training_mode = false.
  for (const auto& in : std::vector<std::vector<HostTensor>>{
           {x},
           {x, HostTensor::Of<float>({}, {0.3f})},
           {x, HostTensor::Absent(), HostTensor::Of<bool>({}, {false})},
           {x, HostTensor::Of<double>({1}, {0.9}), HostTensor::Of<bool>({1}, {false})}}) {
    auto out = r.Run("Dropout", Attrs({{"seed", int64_t{0}}}), in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].bytes, x.bytes);
    EXPECT_EQ((*out)[1].dtype, DType::kBool);
    EXPECT_EQ((*out)[1].shape, x.shape);
    EXPECT_EQ((*out)[1].bytes, (std::vector<uint8_t>{1, 1, 1, 1}));
    out = r.Run("Dropout", {}, in, 1);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].bytes, x.bytes);
  }
  // Dropout-7 (ratio attribute, mask of the data's type) and Dropout-10 (bool mask).
  auto out = r.Run("Dropout-7", Attrs({{"ratio", 0.2f}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].bytes, x.bytes);
  EXPECT_EQ((*out)[1].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{1, 1, 1, 1}));
  out = r.Run("Dropout-10", Attrs({{"ratio", 0.2f}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].dtype, DType::kBool);
  out = r.Run("Dropout", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(1.5f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 1.5f);
}

// NumPy's RandomState(seed).random_sample(n), the reference draw of Dropout's mask
// (kernels/ops/elementwise/dropout_mask.h), written here from NumPy's definition: MT19937 (Matsumoto
// and Nishimura's mt19937ar, seeded by init_genrand) and genrand_res53.
std::vector<double> NumpyRandomSample(uint32_t seed, int n) {
  uint32_t mt[624];
  mt[0] = seed;
  for (uint32_t i = 1; i < 624; ++i) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
  int index = 624;
  auto next = [&]() -> uint32_t {
    if (index >= 624) {
      for (int k = 0; k < 624; ++k) {
        const uint32_t y = (mt[k] & 0x80000000u) | (mt[(k + 1) % 624] & 0x7fffffffu);
        mt[k] = mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
      }
      index = 0;
    }
    uint32_t y = mt[index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  };
  std::vector<double> u;
  for (int i = 0; i < n; ++i) {
    const uint32_t a = next() >> 5, b = next() >> 6;
    u.push_back((a * 67108864.0 + b) / 9007199254740992.0);
  }
  return u;
}

TEST(DropoutTest, TrainingModeDropsAsNumpyDrawsWithTheSeed) {
  // NumPy's first draws with seed 0 (numpy.random.RandomState(0).random_sample()).
  const std::vector<double> u = NumpyRandomSample(0, 700);
  EXPECT_NEAR(u[0], 0.5488135039273248, 1e-16);
  EXPECT_NEAR(u[1], 0.7151893663724195, 1e-16);
  EXPECT_NEAR(u[2], 0.6027633760716439, 1e-16);
  OpRunner r;
  const int n = 700;  // Past MT19937's 624-word state: the state is regenerated.
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 13) - 6.5f;
  const HostTensor x = HostTensor::Of<float>({7, 100}, xs);
  for (float ratio : {0.25f, 0.5f, 0.75f}) {
    SCOPED_TRACE(ratio);
    const Attributes seeded = Attrs({{"seed", int64_t{0}}});
    auto out = r.Run("Dropout", seeded, {x, HostTensor::Of<float>({}, {ratio}), HostTensor::Of<bool>({}, {true})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 2u);
    const std::vector<float> y = (*out)[0].Values<float>();
    const std::vector<uint8_t>& mask = (*out)[1].bytes;
    EXPECT_EQ((*out)[1].dtype, DType::kBool);
    const float scale = 1.0f / (1.0f - ratio);
    int kept = 0;
    for (int i = 0; i < n; ++i) {
      const bool keep = u[i] >= ratio;
      kept += keep;
      ASSERT_EQ(mask[i], keep ? 1 : 0) << i;
      ASSERT_EQ(y[i], keep ? xs[i] * scale : 0.0f) << i;
    }
    EXPECT_NEAR(kept, n * (1 - ratio), n * 0.08);
    // The seed fixes the mask: the same on every call.
    auto again = r.Run("Dropout", seeded, {x, HostTensor::Of<float>({}, {ratio}), HostTensor::Of<bool>({}, {true})}, 1);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0].bytes, (*out)[0].bytes);
  }
  // Without a ratio, training mode drops with the default ratio 0.5.
  auto out = r.Run("Dropout", Attrs({{"seed", int64_t{0}}}), {x, HostTensor::Absent(), HostTensor::Of<bool>({}, {true})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int i = 0; i < n; ++i) ASSERT_EQ((*out)[1].bytes[i], u[i] >= 0.5 ? 1 : 0) << i;
  // float64 and float16 data drop the same elements.
  std::vector<double> xd(xs.begin(), xs.end());
  out = r.Run("Dropout", Attrs({{"seed", int64_t{0}}}),
              {HostTensor::Of<double>({7, 100}, xd), HostTensor::Of<double>({}, {0.5}), HostTensor::Of<bool>({}, {true})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<double> yd = (*out)[0].Values<double>();
  for (int i = 0; i < n; ++i) ASSERT_EQ(yd[i], u[i] >= 0.5 ? xd[i] * 2.0 : 0.0) << i;
}

TEST(DropoutTest, TrainingModeWithoutASeedDrawsANewMaskPerCall) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({256}, std::vector<float>(256, 1.0f));
  std::vector<HostTensor> in = {x, HostTensor::Of<float>({}, {0.5f}), HostTensor::Of<bool>({}, {true})};
  auto infos = r.Infer("Dropout", {}, in);
  ASSERT_TRUE(infos.ok()) << infos.status().ToString();
  const KernelFactory* factory = FindVersionedKernel(r.registry(), "Dropout", DeviceKind::kCpu);
  ASSERT_TRUE(factory);
  auto kernel = (*factory)(Attributes{});
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  // One kernel (one node), called twice.
  auto a = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
  auto b = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
  ASSERT_TRUE(a.ok() && b.ok());
  // Two masks of 256 fair draws agree with probability 2^-256.
  EXPECT_NE((*a)[1].bytes, (*b)[1].bytes);
  for (const auto* out : {&*a, &*b}) {
    const std::vector<float> y = (*out)[0].Values<float>();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], (*out)[1].bytes[i] ? 2.0f : 0.0f);
  }
}

TEST(DropoutTest, TrainingModeChecksItsRatioAndDtype) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({2}, {1, 2});
  const HostTensor on = HostTensor::Of<bool>({}, {true});
  for (float ratio : {1.0f, 1.5f, -0.1f}) {
    auto out = r.Run("Dropout", {}, {x, HostTensor::Of<float>({}, {ratio}), on});
    ASSERT_FALSE(out.ok()) << ratio;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("[0, 1)"), std::string::npos) << out.status().message();
  }
  auto out = r.Run("Dropout", {}, {HostTensor::Of<int32_t>({2}, {1, 2}), HostTensor::Of<float>({}, {0.5f}), on});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("int32"), std::string::npos) << out.status().message();
  // Only Dropout-12+ (the 10+ entry) has a training_mode input; Dropout-7 takes data alone.
  EXPECT_EQ(r.registry().FindOp("Dropout", 7)->max_inputs, 1);
  EXPECT_EQ(r.registry().FindOp("Dropout", 13)->max_inputs, 3);
  // Ratio 0 drops nothing: the data and an all-true mask, as ONNX defines it.
  out = r.Run("Dropout", {}, {x, HostTensor::Of<float>({}, {0.0f}), on});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ((*out)[1].bytes, (std::vector<uint8_t>{1, 1}));
  // ratio and training_mode are data the shape function reads (the compiler gives them
  // constants).
  EXPECT_EQ(r.registry().FindOp("Dropout")->DepOf(2), ShapeDep::kData);
  EXPECT_EQ(r.registry().FindOp("Dropout")->DepOf(1), ShapeDep::kData);
  // Bad ratio / training_mode types and shapes.
  EXPECT_EQ(r.Infer("Dropout", {}, {x, HostTensor::Of<int64_t>({}, {0})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Dropout", {}, {x, HostTensor::Of<float>({2}, {0, 0})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Dropout", {}, {x, HostTensor::Absent(), HostTensor::Of<float>({}, {0})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Dropout", Attrs({{"ratio", int64_t{0}}}), {x}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace logic_test
}  // namespace remex::kernels
