// Elementwise ops of kernels/ops/elementwise/elementwise.cc: broadcasting, dtypes, special values and
// the shape functions' errors. (Add, Mul, Div, Relu, HardSigmoid and Clip are also
// covered by kernels_test.cc.)

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/ops/elementwise/elementwise_test_util.h"
#include "kernels/kernels.h"
#include "kernels/scalar_ops.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace elementwise_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using ewtest::Expand;
using ewtest::kBroadcastCases;
using ewtest::kInf;
using ewtest::kNaN;
using ewtest::Random;
using ewtest::RunFloat;


TEST(ElementwiseRegistryTest, OpsAreRegistered) {
  OpRunner r;
  for (const char* op :
       {"Sigmoid", "Tanh", "LeakyRelu", "PRelu", "HardSwish", "Exp",        "Log",   "Erf",
        "Sqrt",    "Pow",  "Sub",       "Neg",   "Abs",       "Reciprocal", "Min",   "Max",
        "Equal",   "Less", "Greater",   "Not",   "And",       "Or",         "Where", "Dropout"}) {
    ASSERT_NE(r.registry().FindOp(op), nullptr) << op;
    EXPECT_NE(r.registry().FindKernel(op, DeviceKind::kCpu), nullptr) << op;
  }
  EXPECT_EQ(r.registry().FindOp("Min")->max_inputs, -1);
  EXPECT_EQ(r.registry().FindOp("Max")->max_inputs, -1);
  EXPECT_EQ(r.registry().FindOp("Min")->min_inputs, 1);
}

// ---------------------------------------------------------------------------
// Sub and the broadcast machinery.

TEST(SubTest, BroadcastsLikeNumpy) {
  OpRunner r;
  std::mt19937 rng(7);
  for (const auto& [sa, sb] : kBroadcastCases) {
    const std::vector<float> a = Random(rng, sa, -2, 2), b = Random(rng, sb, -2, 2);
    auto out = r.Run("Sub", {}, {HostTensor::Of(sa, a), HostTensor::Of(sb, b)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Shape so = (*out)[0].shape;
    const std::vector<float> ea = Expand(a, sa, so), eb = Expand(b, sb, so);
    const std::vector<float> got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), ea.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], ea[i] - eb[i]) << ShapeToString(sa) << " " << ShapeToString(sb) << " " << i;
    }
  }
}

TEST(SubTest, IntegersWrapAndFloat16) {
  OpRunner r;
  auto out = r.Run(
      "Sub", {},
      {HostTensor::Of<int32_t>({3}, {INT32_MIN, 5, 0}), HostTensor::Of<int32_t>({3}, {1, 7, INT32_MIN})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MAX, -2, INT32_MIN}));
  out = r.Run("Sub", {}, {HostTensor::Of<uint8_t>({2}, {1, 200}), HostTensor::Of<uint8_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{255, 198}));
  out = r.Run("Sub", {},
              {HostTensor::Of<Half>({2}, {FloatToHalf(1.5f), FloatToHalf(-2.0f)}),
               HostTensor::Of<Half>({1}, {FloatToHalf(0.25f)})});
  ASSERT_TRUE(out.ok());
  auto v = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(v[0]), 1.25f);
  EXPECT_EQ(HalfToFloat(v[1]), -2.25f);
  EXPECT_EQ(
      r.Infer("Sub", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kInt32, {2})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      r.Infer("Sub", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {3})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Sub", {}, {HostTensor::Zeros(DType::kBool, {2}), HostTensor::Zeros(DType::kBool, {2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(SubTest, EmptyOutput) {
  OpRunner r;
  auto out =
      r.Run("Sub", {}, {HostTensor::Zeros(DType::kFloat32, {0, 3}), HostTensor::Zeros(DType::kFloat32, {3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{0, 3}));
}

// ---------------------------------------------------------------------------
// Pow.

TEST(PowTest, ScalarExponentTwoSquares) {
  OpRunner r;
  std::mt19937 rng(3);
  const Shape shape = {2, 3, 17};
  const std::vector<float> x = Random(rng, shape, -1e3f, 1e3f);
  for (const Shape& es : {Shape{}, Shape{1}, Shape{1, 1, 1}}) {
    auto out = r.Run("Pow", {}, {HostTensor::Of(shape, x), HostTensor::Of<float>(es, {2.0f})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> got = (*out)[0].Values<float>();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i] * x[i]) << i;
  }
  // The same with an integer exponent, float64 and float16 bases.
  auto out =
      r.Run("Pow", {}, {HostTensor::Of<double>({3}, {-3, 0.5, 1e200}), HostTensor::Of<int64_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>(),
            (std::vector<double>{9, 0.25, std::numeric_limits<double>::infinity()}));
  out = r.Run(
      "Pow", {},
      {HostTensor::Of<Half>({2}, {FloatToHalf(-3), FloatToHalf(1000)}), HostTensor::Of<float>({}, {2})});
  ASSERT_TRUE(out.ok());
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(h[0]), 9.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(h[1])));  // 1e6 overflows float16.
  // Special values: x*x agrees with pow for NaN, inf and -0.
  out = r.Run("Pow", {},
              {HostTensor::Of<float>({4}, {kNaN, -kInf, -0.0f, 0.0f}), HostTensor::Of<float>({}, {2})});
  ASSERT_TRUE(out.ok());
  auto v = (*out)[0].Values<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], kInf);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_FALSE(std::signbit(v[2]));
}

TEST(PowTest, OtherScalarExponents) {
  OpRunner r;
  const std::vector<float> x = {0.5f, 2, 3, 4, -2};
  for (float e : {1.0f, 0.5f, 3.0f, -1.0f, 0.0f}) {
    auto out = r.Run("Pow", {}, {HostTensor::Of<float>({5}, x), HostTensor::Of<float>({}, {e})});
    ASSERT_TRUE(out.ok());
    auto got = (*out)[0].Values<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::pow(x[i], e);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << e << " " << x[i];
      } else {
        EXPECT_EQ(got[i], want) << e << " " << x[i];
      }
    }
  }
}

TEST(PowTest, BroadcastsTensorExponents) {
  OpRunner r;
  std::mt19937 rng(11);
  for (const auto& [sa, sb] : kBroadcastCases) {
    const std::vector<float> a = Random(rng, sa, 0.1f, 3), b = Random(rng, sb, -2, 2);
    auto out = r.Run("Pow", {}, {HostTensor::Of(sa, a), HostTensor::Of(sb, b)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Shape so = (*out)[0].shape;
    const std::vector<float> ea = Expand(a, sa, so), eb = Expand(b, sb, so);
    const std::vector<float> got = (*out)[0].Values<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], std::pow(ea[i], eb[i])) << i;
  }
  // ONNX's test_pow_bcast_array: [2,3] ** [3].
  auto out = r.Run(
      "Pow", {}, {HostTensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6}), HostTensor::Of<float>({3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 4, 27, 4, 25, 216}));
}

TEST(PowTest, MixedDTypes) {
  OpRunner r;
  // Float base, integer exponents of every width (Pow-12+).
  auto out =
      r.Run("Pow", {}, {HostTensor::Of<float>({3}, {1, 2, 3}), HostTensor::Of<int32_t>({3}, {4, 5, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 32, 729}));
  out = r.Run("Pow", {}, {HostTensor::Of<float>({3}, {1, 2, 3}), HostTensor::Of<uint64_t>({3}, {4, 5, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 32, 729}));
  out = r.Run("Pow", {}, {HostTensor::Of<float>({2, 2}, {2, 2, 3, 3}), HostTensor::Of<int8_t>({2}, {-1, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0.5f, 8, 1.0f / 3, 27}));
  // Integer base, float exponent: double pow truncated toward zero.
  out = r.Run("Pow", {},
              {HostTensor::Of<int32_t>({4}, {1, 2, 3, 2}), HostTensor::Of<float>({4}, {4, 5, 6, 0.5f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kInt32);
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{1, 32, 729, 1}));
  out = r.Run("Pow", {}, {HostTensor::Of<int64_t>({2}, {10, 2}), HostTensor::Of<double>({2}, {30, -1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{INT64_MAX, 0}));  // Saturates.
  // Integer base, integer exponent: exact, negative exponents truncate.
  out = r.Run("Pow", {},
              {HostTensor::Of<int64_t>({6}, {3, -3, 2, 1, -1, 5}),
               HostTensor::Of<int64_t>({6}, {39, 3, -2, -7, -7, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{4052555153018976267, -27, 0, 1, -1, 1}));
  out = r.Run("Pow", {}, {HostTensor::Of<int32_t>({3}, {2, 3, -4}), HostTensor::Of<int32_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{4, 9, 16}));
  // Float16 exponent for a float32 base and the other way around.
  out = r.Run(
      "Pow", {},
      {HostTensor::Of<float>({2}, {2, 9}), HostTensor::Of<Half>({2}, {FloatToHalf(3), FloatToHalf(0.5f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{8, 3}));
  out = r.Run(
      "Pow", {},
      {HostTensor::Of<Half>({2}, {FloatToHalf(2), FloatToHalf(9)}), HostTensor::Of<float>({2}, {3, 0.5f})});
  ASSERT_TRUE(out.ok());
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(h[0]), 8.0f);
  EXPECT_EQ(HalfToFloat(h[1]), 3.0f);
}

TEST(PowTest, ShapeFunctionErrors) {
  OpRunner r;
  // Bases: int32, int64 and float types only; exponents: no bool.
  auto s =
      r.Infer("Pow", {}, {HostTensor::Zeros(DType::kUint8, {2}), HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Pow"), std::string::npos);
  s = r.Infer("Pow", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kBool, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Pow", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {3})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Pow", {}, {HostTensor::Zeros(DType::kFloat32, {2, 1}), HostTensor::Zeros(DType::kInt64, {3})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*s)[0].shape, (Shape{2, 3}));
}

// ---------------------------------------------------------------------------
// Unary float ops.

TEST(ExpTest, AccurateOverTheWholeRange) {
  OpRunner r;
  std::vector<float> x;
  for (float v = -110.0f; v <= 95.0f; v += 0.00731f) x.push_back(v);
  for (float v = -1e-3f; v <= 1e-3f; v += 1.3e-6f) x.push_back(v);
  auto got = RunFloat(r, "Exp", x);
  ASSERT_EQ(got.size(), x.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    if (want > std::numeric_limits<float>::max()) {
      ASSERT_EQ(got[i], kInf) << x[i];
    } else if (want < std::numeric_limits<float>::min()) {
      // Subnormal results: absolute error within a few of the smallest subnormals.
      ASSERT_NEAR(got[i], want, 4 * std::numeric_limits<float>::denorm_min()) << x[i];
    } else {
      const double rel = std::abs(got[i] - want) / want;
      worst = std::max(worst, rel);
      ASSERT_LT(rel, 3e-7) << x[i];  // About 2.5 ulp.
    }
  }
  EXPECT_LT(worst, 3e-7);
  auto sp = RunFloat(r, "Exp", {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f});
  EXPECT_EQ(sp[0], 1.0f);
  EXPECT_EQ(sp[1], 1.0f);
  EXPECT_EQ(sp[2], kInf);
  EXPECT_EQ(sp[3], 0.0f);
  EXPECT_TRUE(std::isnan(sp[4]));
  EXPECT_NEAR(sp[5], 2.7182817f, 3e-7f);
  auto out = r.Run("Exp", {}, {HostTensor::Of<double>({2}, {1.0, 700.0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{std::exp(1.0), std::exp(700.0)}));
}

TEST(SigmoidTest, ValuesAndLimits) {
  OpRunner r;
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0173f) x.push_back(v);
  auto got = RunFloat(r, "Sigmoid", x);
  ASSERT_EQ(got.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    ASSERT_NEAR(got[i], want, 4e-7 * want + 1e-38) << x[i];
  }
  auto sp = RunFloat(r, "Sigmoid", {0.0f, kInf, -kInf, kNaN, -200.0f, 200.0f});
  EXPECT_EQ(sp[0], 0.5f);
  EXPECT_EQ(sp[1], 1.0f);
  EXPECT_EQ(sp[2], 0.0f);
  EXPECT_TRUE(std::isnan(sp[3]));
  EXPECT_EQ(sp[4], 0.0f);
  EXPECT_EQ(sp[5], 1.0f);
  // ONNX's test_sigmoid_example.
  sp = RunFloat(r, "Sigmoid", {-1, 0, 1});
  EXPECT_NEAR(sp[0], 0.26894143f, 1e-7f);
  EXPECT_NEAR(sp[2], 0.7310586f, 1e-7f);
  auto out = r.Run("Sigmoid", {}, {HostTensor::Of<double>({2}, {-1.0, 40.0})});
  ASSERT_TRUE(out.ok());
  EXPECT_DOUBLE_EQ((*out)[0].Values<double>()[0], 1.0 / (1.0 + std::exp(1.0)));
  out = r.Run("Sigmoid", {}, {HostTensor::Of<Half>({2}, {FloatToHalf(0), FloatToHalf(2)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 0.5f);
  EXPECT_NEAR(HalfToFloat((*out)[0].Values<Half>()[1]), 0.8808f, 1e-3f);
  EXPECT_EQ(r.Infer("Sigmoid", {}, {HostTensor::Zeros(DType::kInt32, {2})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(UnaryTest, TanhLogErfSqrtReciprocal) {
  OpRunner r;
  const std::vector<float> x = {-2.5f, -0.5f, 0.0f, 1e-4f, 0.75f, 3.0f};
  auto t = RunFloat(r, "Tanh", x);
  auto e = RunFloat(r, "Erf", x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(t[i], std::tanh(x[i]));
    EXPECT_EQ(e[i], scalar::math::FastErf(x[i]));  // The host's erf (UnaryTest.FastErfIsErf).
    EXPECT_NEAR(e[i], std::erf(x[i]), 3e-7 * std::fabs(std::erf(x[i])));
  }
  auto l = RunFloat(r, "Log", {1.0f, 2.718281828f, 0.0f, -1.0f, kInf});
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_NEAR(l[1], 1.0f, 1e-7f);
  EXPECT_EQ(l[2], -kInf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(l[4], kInf);
  auto s = RunFloat(r, "Sqrt", {4.0f, 2.0f, 0.0f, -1.0f, kInf});
  EXPECT_EQ(s[0], 2.0f);
  EXPECT_EQ(s[1], std::sqrt(2.0f));
  EXPECT_EQ(s[2], 0.0f);
  EXPECT_TRUE(std::isnan(s[3]));
  EXPECT_EQ(s[4], kInf);
  auto rc = RunFloat(r, "Reciprocal", {4.0f, -0.5f, 0.0f, -0.0f});
  EXPECT_EQ(rc, (std::vector<float>{0.25f, -2.0f, kInf, -kInf}));
  auto out = r.Run("Sqrt", {}, {HostTensor::Of<double>({1}, {2.0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>()[0], std::sqrt(2.0));
  out = r.Run("Tanh", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(0.5f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), HalfToFloat(FloatToHalf(std::tanh(0.5f))));
  for (const char* op : {"Tanh", "Exp", "Log", "Erf", "Sqrt", "Reciprocal", "HardSwish", "LeakyRelu"}) {
    auto st = r.Infer(op, {}, {HostTensor::Zeros(DType::kInt64, {2})});
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_NE(st.status().message().find(op), std::string::npos) << st.status().message();
  }
}

TEST(UnaryTest, NegAndAbs) {
  OpRunner r;
  auto out = r.Run("Neg", {}, {HostTensor::Of<int8_t>({3}, {-128, 5, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-128, -5, 0}));  // Wraps.
  auto f = RunFloat(r, "Neg", {1.5f, 0.0f, -kInf});
  EXPECT_EQ(f, (std::vector<float>{-1.5f, -0.0f, kInf}));
  EXPECT_TRUE(std::signbit(f[1]));
  EXPECT_EQ(r.Infer("Neg", {}, {HostTensor::Zeros(DType::kUint8, {2})}).status().code(),
            StatusCode::kInvalidArgument);
  out = r.Run("Abs", {}, {HostTensor::Of<int32_t>({3}, {INT32_MIN, -5, 7})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MIN, 5, 7}));
  out = r.Run("Abs", {}, {HostTensor::Of<uint16_t>({2}, {65535, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint16_t>(), (std::vector<uint16_t>{65535, 3}));
  f = RunFloat(r, "Abs", {-0.0f, -2.5f, -kInf});
  EXPECT_EQ(f, (std::vector<float>{0.0f, 2.5f, kInf}));
  EXPECT_FALSE(std::signbit(f[0]));
  out = r.Run("Abs", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(-3.0f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 3.0f);
  EXPECT_EQ(r.Infer("Abs", {}, {HostTensor::Zeros(DType::kBool, {2})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(UnaryTest, LeakyRelu) {
  OpRunner r;
  auto y = RunFloat(r, "LeakyRelu", {-2.0f, 0.0f, 3.0f});
  EXPECT_EQ(y, (std::vector<float>{-0.02f, 0.0f, 3.0f}));
  y = RunFloat(r, "LeakyRelu", {-2.0f, 3.0f}, Attrs({{"alpha", 0.1f}}));
  EXPECT_EQ(y, (std::vector<float>{-0.2f, 3.0f}));
  // A mistyped alpha is refused by the shape function and the kernel factory.
  Attributes bad = Attrs({{"alpha", int64_t{1}}});
  EXPECT_EQ(r.Infer("LeakyRelu", bad, {HostTensor::Zeros(DType::kFloat32, {1})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*r.registry().FindKernel("LeakyRelu", DeviceKind::kCpu))(bad).status().code(),
            StatusCode::kInvalidArgument);
}

// Swish-24: x * sigmoid(alpha * x), alpha 1 by default (SiLU); float16 computes in float.
TEST(UnaryTest, Swish) {
  OpRunner r;
  const std::vector<float> x = {-30.0f, -2.0f, -0.5f, 0.0f, 0.5f, 2.0f, 30.0f};
  for (float alpha : {1.0f, 1.702f, -0.5f}) {
    SCOPED_TRACE(alpha);
    auto y = alpha == 1.0f ? RunFloat(r, "Swish", x) : RunFloat(r, "Swish", x, Attrs({{"alpha", alpha}}));
    ASSERT_EQ(y.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = x[i] / (1.0 + std::exp(-static_cast<double>(alpha) * x[i]));
      EXPECT_NEAR(y[i], want, 2e-6 * (1 + std::fabs(want))) << x[i];
    }
  }
  EXPECT_TRUE(std::isnan(RunFloat(r, "Swish", {kNaN})[0]));
  auto out = r.Run("Swish", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(2.0f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), HalfToFloat(FloatToHalf(2.0f / (1.0f + std::exp(-2.0f)))));
  // float64 computes in double (not through the float32 loops).
  out = r.Run("Swish", Attrs({{"alpha", 0.5f}}), {HostTensor::Of<double>({2}, {-3.0, 4.0})});
  ASSERT_TRUE(out.ok());
  EXPECT_DOUBLE_EQ((*out)[0].Values<double>()[0], -3.0 / (1.0 + std::exp(1.5)));
  EXPECT_DOUBLE_EQ((*out)[0].Values<double>()[1], 4.0 / (1.0 + std::exp(-2.0)));
  EXPECT_EQ(r.Infer("Swish", {}, {HostTensor::Zeros(DType::kInt32, {2})}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes bad = Attrs({{"alpha", std::string("one")}});
  EXPECT_EQ((*r.registry().FindKernel("Swish", DeviceKind::kCpu))(bad).status().code(),
            StatusCode::kInvalidArgument);
}

// Gelu-20 with approximate "none": x * (1 + erf(x / sqrt(2))) / 2, float16 computing in
// float; approximate "tanh" is refused as unimplemented, anything else as invalid.
TEST(UnaryTest, Gelu) {
  OpRunner r;
  std::vector<float> x = {-30.0f, -5.0f, -2.0f, -0.7f, -0.5f, -1e-3f, 0.0f, 1e-3f, 0.3f, 0.5f, 0.7f, 2.0f, 5.0f, 30.0f};
  for (int i = 0; i <= 400; ++i) x.push_back(-10.0f + i * 0.05f);
  const auto y = RunFloat(r, "Gelu", x);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    // erf's few ulps, and for x < 0 the rounding of 1 + erf(x) (as in the decomposed
    // graph), scaled by x / 2.
    EXPECT_NEAR(y[i], want, 4e-7 * std::fabs(x[i])) << x[i];
  }
  EXPECT_TRUE(std::isnan(RunFloat(r, "Gelu", {kNaN})[0]));
  // -inf * (1 + erf(-inf)) / 2 is -inf * 0: NaN, as the decomposed graph gives.
  EXPECT_TRUE(std::isnan(RunFloat(r, "Gelu", {-std::numeric_limits<float>::infinity()})[0]));
  EXPECT_EQ(RunFloat(r, "Gelu", {std::numeric_limits<float>::infinity()})[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(RunFloat(r, "Gelu", {0.5f}, Attrs({{"approximate", std::string("none")}}))[0], RunFloat(r, "Gelu", {0.5f})[0]);
  auto out = r.Run("Gelu", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(1.5f)})});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR(HalfToFloat((*out)[0].Values<Half>()[0]), 0.5 * 1.5 * (1 + std::erf(1.5 / std::sqrt(2.0))), 1e-3);
  auto tanh = r.Infer("Gelu", Attrs({{"approximate", std::string("tanh")}}), {HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(tanh.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tanh.status().message().find("Gelu: approximate 'tanh'"), std::string::npos) << tanh.status().message();
  EXPECT_EQ(r.Infer("Gelu", Attrs({{"approximate", std::string("erf")}}), {HostTensor::Zeros(DType::kFloat32, {2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Gelu", {}, {HostTensor::Zeros(DType::kInt32, {2})}).status().code(),
            StatusCode::kInvalidArgument);
}

// Erf on the host is FastErf (kernels/scalar_ops.h), which vectorises: within 3e-7 of
// erf, relatively, on a fine grid of [-12, 12], odd, saturating to +-1, NaN kept.
TEST(UnaryTest, FastErfIsErf) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 4096) {
    const double want = std::erf(static_cast<double>(x));
    const float got = scalar::math::FastErf(x);
    const double rel = want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
    ASSERT_EQ(scalar::math::FastErf(-x), -got) << x;
  }
  EXPECT_LT(worst, 3e-7) << "at " << worst_x;
  for (float tiny : {1e-30f, 1e-10f, 1e-5f}) {
    EXPECT_NEAR(scalar::math::FastErf(tiny), std::erf(static_cast<double>(tiny)), 3e-7 * std::erf(double{tiny}));
  }
  EXPECT_EQ(scalar::math::FastErf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(scalar::math::FastErf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(scalar::math::FastErf(kNaN)));
  // The Erf kernel computes it.
  OpRunner r;
  const auto y = RunFloat(r, "Erf", {0.3f, -0.9f});
  EXPECT_EQ(y[0], scalar::math::FastErf(0.3f));
  EXPECT_EQ(y[1], scalar::math::FastErf(-0.9f));
}

TEST(UnaryTest, HardSwish) {
  OpRunner r;
  auto y = RunFloat(r, "HardSwish", {-4.0f, -3.0f, -1.5f, 0.0f, 1.5f, 3.0f, 5.0f});
  const std::vector<float> want = {0.0f, 0.0f, -0.375f, 0.0f, 1.125f, 3.0f, 5.0f};
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6f) << i;
}

// ---------------------------------------------------------------------------
// PRelu.

TEST(PReluTest, SlopeBroadcastsToX) {
  OpRunner r;
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4, 5}, {5}}, {{3, 4, 5}, {3, 4, 5}}, {{2, 3, 4, 4}, {3, 1, 1}}, {{2, 3}, {}}, {{2, 3}, {1, 1}}};
  for (const auto& [sx, ss] : cases) {
    const std::vector<float> x = Random(rng, sx, -3, 3), s = Random(rng, ss, 0, 1);
    auto out = r.Run("PRelu", {}, {HostTensor::Of(sx, x), HostTensor::Of(ss, s)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ((*out)[0].shape, sx);
    const std::vector<float> es = Expand(s, ss, sx);
    const std::vector<float> got = (*out)[0].Values<float>();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i] < 0 ? es[i] * x[i] : x[i]) << i;
  }
  auto out =
      r.Run("PRelu", {}, {HostTensor::Of<int32_t>({3}, {-4, 0, 5}), HostTensor::Of<int32_t>({1}, {3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-12, 0, 5}));
}

TEST(PReluTest, SlopeMustBroadcastToXOnly) {
  OpRunner r;
  // Broadcastable both ways but the result is not X's shape.
  auto s = r.Infer("PRelu", {},
                   {HostTensor::Zeros(DType::kFloat32, {5}), HostTensor::Zeros(DType::kFloat32, {2, 5})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("PRelu"), std::string::npos);
  s = r.Infer("PRelu", {},
              {HostTensor::Zeros(DType::kFloat32, {3, 1}), HostTensor::Zeros(DType::kFloat32, {4})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  // Not broadcastable at all ([C] against [N, C, H, W] aligns with W).
  s = r.Infer("PRelu", {},
              {HostTensor::Zeros(DType::kFloat32, {1, 3, 4, 4}), HostTensor::Zeros(DType::kFloat32, {3})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("PRelu", {},
              {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat64, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Min, Max.

TEST(MinMaxTest, VariadicBroadcasting) {
  OpRunner r;
  std::mt19937 rng(9);
  const std::vector<std::vector<Shape>> cases = {
      {{2, 3}}, {{2, 3}, {2, 3}}, {{2, 3}, {3}, {2, 1}}, {{}, {4, 1, 2}, {3, 1}, {1}}, {{1}, {1}, {1}}};
  for (const auto& shapes : cases) {
    std::vector<std::vector<float>> values;
    std::vector<HostTensor> in;
    Shape so;
    for (const Shape& s : shapes) {
      values.push_back(Random(rng, s, -5, 5));
      in.push_back(HostTensor::Of(s, values.back()));
      if (s.size() > so.size()) so.resize(s.size(), 1);
    }
    for (const Shape& s : shapes) {
      for (size_t d = 0; d < s.size(); ++d) {
        int64_t& o = so[so.size() - s.size() + d];
        o = std::max(o, s[d]);
      }
    }
    for (const bool is_max : {false, true}) {
      auto out = r.Run(is_max ? "Max" : "Min", {}, in);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ASSERT_EQ((*out)[0].shape, so);
      std::vector<float> want = Expand(values[0], shapes[0], so);
      for (size_t k = 1; k < shapes.size(); ++k) {
        const std::vector<float> e = Expand(values[k], shapes[k], so);
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = is_max ? std::max(want[i], e[i]) : std::min(want[i], e[i]);
      }
      EXPECT_EQ((*out)[0].Values<float>(), want) << shapes.size();
    }
  }
}

// Sum and Mean (opsets 6-13): the same broadcasting, float types only.
TEST(SumMeanTest, VariadicBroadcastingInEveryFloatType) {
  OpRunner r;
  std::mt19937 rng(21);
  const std::vector<Shape> shapes = {{2, 3}, {3}, {2, 1}};
  std::vector<std::vector<float>> values;
  std::vector<HostTensor> in;
  for (const Shape& s : shapes) {
    values.push_back(Random(rng, s, -5, 5));
    in.push_back(HostTensor::Of(s, values.back()));
  }
  std::vector<double> sum(6, 0.0);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<float> e = Expand(values[k], shapes[k], {2, 3});
    for (size_t i = 0; i < 6; ++i) sum[i] += e[i];
  }
  auto s = r.Run("Sum", {}, in);
  auto m = r.Run("Mean", {}, in);
  ASSERT_TRUE(s.ok() && m.ok()) << s.status().ToString() << m.status().ToString();
  ASSERT_EQ((*s)[0].shape, (Shape{2, 3}));
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR((*s)[0].Values<float>()[i], sum[i], 1e-5);
    EXPECT_NEAR((*m)[0].Values<float>()[i], sum[i] / 3, 1e-5);
  }
  // One input: itself; float64 and float16.
  auto one = r.Run("Mean", {}, {HostTensor::Of<double>({2}, {1.5, -3})});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].Values<double>(), (std::vector<double>{1.5, -3}));
  auto h = r.Run("Sum", {}, {HostTensor::Of<Half>({1}, {FloatToHalf(1.5f)}), HostTensor::Of<Half>({1}, {FloatToHalf(2.25f)})});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(HalfToFloat((*h)[0].Values<Half>()[0]), 3.75f);
  // Integers are refused (ONNX's Sum and Mean are float-only).
  auto st = r.Infer("Sum", {}, {HostTensor::Zeros(DType::kInt32, {2}), HostTensor::Zeros(DType::kInt32, {2})});
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("Sum"), std::string::npos) << st.status().message();
}

TEST(MinMaxTest, NaNPropagatesAndIntegerTypes) {
  OpRunner r;
  for (const char* op : {"Min", "Max"}) {
    auto out = r.Run(op, {},
                     {HostTensor::Of<float>({3}, {kNaN, 1, 2}), HostTensor::Of<float>({3}, {1, kNaN, 3}),
                      HostTensor::Of<float>({3}, {0, 0, 1})});
    ASSERT_TRUE(out.ok());
    auto v = (*out)[0].Values<float>();
    EXPECT_TRUE(std::isnan(v[0])) << op;
    EXPECT_TRUE(std::isnan(v[1])) << op;
    EXPECT_EQ(v[2], op[1] == 'i' ? 1.0f : 3.0f);
  }
  auto out =
      r.Run("Max", {}, {HostTensor::Of<uint64_t>({2}, {UINT64_MAX, 1}), HostTensor::Of<uint64_t>({}, {7})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint64_t>(), (std::vector<uint64_t>{UINT64_MAX, 7}));
  out = r.Run("Min", {}, {HostTensor::Of<int8_t>({2}, {-128, 1}), HostTensor::Of<int8_t>({2}, {0, -3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-128, -3}));
  out = r.Run("Min", {},
              {HostTensor::Of<Half>({2}, {FloatToHalf(1), FloatToHalf(-2)}),
               HostTensor::Of<Half>({1}, {FloatToHalf(0)})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 0.0f);
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[1]), -2.0f);
}

TEST(MinMaxTest, ShapeFunctionErrors) {
  OpRunner r;
  auto s =
      r.Infer("Max", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kInt32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Max", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {3})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Min", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Absent()});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Min", {}, {HostTensor::Zeros(DType::kBool, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Min", {}, {});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

TEST(MinMaxTest, OutputMayShareAnInputsBuffer) {
  OpRunner r;
  auto kernel = (*r.registry().FindKernel("Max", DeviceKind::kCpu))(Attributes{});
  ASSERT_TRUE(kernel.ok());
  HostTensor a = HostTensor::Of<float>({2}, {5, -1});
  HostTensor b = HostTensor::Of<float>({3, 2}, {1, 2, 3, 4, 9, -9});
  HostTensor c = HostTensor::Of<float>({3, 1}, {0, 6, 0});
  // The output is b's buffer: b must be read before it is overwritten.
  std::vector<TensorRef> in = {a.Ref(), b.Ref(), c.Ref()};
  std::vector<TensorRef> out = {b.Ref()};
  ASSERT_TRUE((*kernel)->Compute(in, out).ok());
  EXPECT_EQ(b.Values<float>(), (std::vector<float>{5, 2, 6, 6, 9, 0}));
}

// Mod-13 against Python's % (fmod 0) and C's fmod (fmod 1), as ONNX's examples.
TEST(ModTest, IntegerAndFloatRules) {
  OpRunner r;
  const std::vector<int32_t> a = {-4, 7, 5, 4, -7, 8}, b = {2, -3, 8, -2, 3, 5};
  auto out = r.Run("Mod", {}, {HostTensor::Of<int32_t>({6}, a), HostTensor::Of<int32_t>({6}, b)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{0, -2, 5, 0, 2, 3}));  // divisor's sign
  out = r.Run("Mod", Attrs({{"fmod", int64_t{1}}}), {HostTensor::Of<int32_t>({6}, a), HostTensor::Of<int32_t>({6}, b)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{0, 1, 5, 0, -1, 3}));  // dividend's sign
  // Unsigned and 8-bit types, broadcasting, INT8_MIN % -1.
  out = r.Run("Mod", {}, {HostTensor::Of<uint8_t>({3}, {250, 7, 0}), HostTensor::Of<uint8_t>({}, {7})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{5, 0, 0}));
  out = r.Run("Mod", {}, {HostTensor::Of<int8_t>({2}, {-128, -5}), HostTensor::Of<int8_t>({2}, {-1, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{0, 1}));
  // Floats: fmod only.
  out = r.Run("Mod", Attrs({{"fmod", int64_t{1}}}),
              {HostTensor::Of<float>({4}, {-4.3f, 7.2f, 5.0f, 4.3f}), HostTensor::Of<float>({4}, {2.1f, -3.4f, 8.0f, -2.1f})});
  ASSERT_TRUE(out.ok());
  const std::vector<float> f = (*out)[0].Values<float>();
  EXPECT_EQ(f, (std::vector<float>{std::fmod(-4.3f, 2.1f), std::fmod(7.2f, -3.4f), 5.0f, std::fmod(4.3f, -2.1f)}));
  auto st = r.Infer("Mod", {}, {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("fmod must be 1"), std::string::npos) << st.status().message();
  // An integer divisor of 0.
  out = r.Run("Mod", {}, {HostTensor::Of<int64_t>({2}, {3, 4}), HostTensor::Of<int64_t>({2}, {1, 0})});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("division by zero"), std::string::npos) << out.status().message();
  EXPECT_EQ(r.Infer("Mod", Attrs({{"fmod", int64_t{2}}}), {HostTensor::Zeros(DType::kInt32, {2}),
                                                           HostTensor::Zeros(DType::kInt32, {2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace elementwise_test
}  // namespace remex::kernels
