// The unary ops of kernels/ops/elementwise/unary.cc beyond the activations: trigonometric, hyperbolic,
// rounding, Sign, Softplus, Softsign, Elu, Celu, Selu, ThresholdedRelu and Shrink.
// Each is checked against the ONNX operator's formula computed here in double
// (https://onnx.ai/onnx/operators/, the versions named in kernels/scalar_ops.h), on
// special values and on random data, for float32, float64 and float16, plus the
// attribute defaults and the shape functions' dtype errors.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops/elementwise/elementwise_test_util.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace unary_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using ewtest::kInf;
using ewtest::kNaN;
using ewtest::RunFloat;

// One op, its reference formula in double and the input range its random data covers.
struct Case {
  const char* op;
  std::function<double(double)> ref;
  double lo, hi;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"Sin", [](double x) { return std::sin(x); }, -10, 10},
      {"Cos", [](double x) { return std::cos(x); }, -10, 10},
      {"Tan", [](double x) { return std::tan(x); }, -1.5, 1.5},
      {"Asin", [](double x) { return std::asin(x); }, -1, 1},
      {"Acos", [](double x) { return std::acos(x); }, -1, 1},
      {"Atan", [](double x) { return std::atan(x); }, -10, 10},
      {"Sinh", [](double x) { return std::sinh(x); }, -5, 5},
      {"Cosh", [](double x) { return std::cosh(x); }, -5, 5},
      {"Asinh", [](double x) { return std::asinh(x); }, -10, 10},
      {"Acosh", [](double x) { return std::acosh(x); }, 1, 10},
      {"Atanh", [](double x) { return std::atanh(x); }, -0.99, 0.99},
      {"Ceil", [](double x) { return std::ceil(x); }, -10, 10},
      {"Floor", [](double x) { return std::floor(x); }, -10, 10},
      {"Round", [](double x) { return std::nearbyint(x); }, -10, 10},
      {"Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, -3, 3},
      {"Softplus", [](double x) { return std::log(std::exp(x) + 1); }, -20, 20},
      {"Softsign", [](double x) { return x / (1 + std::fabs(x)); }, -10, 10},
      {"Elu", [](double x) { return x >= 0 ? x : std::exp(x) - 1; }, -5, 5},
      {"Celu", [](double x) { return std::max(0.0, x) + std::min(0.0, std::exp(x) - 1); }, -5, 5},
      {"Selu",
       [](double x) {
         const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
         return x > 0 ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
       },
       -5, 5},
      {"ThresholdedRelu", [](double x) { return x > 1 ? x : 0.0; }, -3, 3},
      {"Shrink", [](double x) { return x < -0.5 ? x : (x > 0.5 ? x : 0.0); }, -2, 2},
  };
  return cases;
}

// |got - want| <= atol + rtol * |want| (ONNX's backend-test tolerance form).
void ExpectClose(double got, double want, double rtol, double atol, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
    return;
  }
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  EXPECT_LE(std::fabs(got - want), atol + rtol * std::fabs(want)) << what << ": got " << got << ", want " << want;
}

TEST(UnaryOpsTest, RegisteredForCpu) {
  OpRunner r;
  for (const Case& c : Cases()) {
    ASSERT_NE(r.registry().FindOp(c.op), nullptr) << c.op;
    EXPECT_NE(r.registry().FindKernel(c.op, DeviceKind::kCpu), nullptr) << c.op;
    EXPECT_TRUE(r.registry().FindOp(c.op)->traits.elementwise) << c.op;
  }
}

TEST(UnaryOpsTest, RandomDataMatchesTheFormulaInEveryFloatType) {
  OpRunner r;
  std::mt19937 rng(7);
  for (const Case& c : Cases()) {
    std::uniform_real_distribution<double> dist(c.lo, c.hi);
    std::vector<double> x(257);
    for (double& v : x) v = dist(rng);
    const int64_t n = static_cast<int64_t>(x.size());
    // float64: to a few ulp.
    auto d = r.Run(c.op, {}, {HostTensor::Of<double>({n}, x)});
    ASSERT_TRUE(d.ok()) << c.op << ": " << d.status().ToString();
    for (int64_t i = 0; i < n; ++i) {
      ExpectClose((*d)[0].Values<double>()[i], c.ref(x[i]), 1e-12, 1e-15, std::string(c.op) + " float64");
    }
    // float32: the formula of the rounded input, to float precision.
    std::vector<float> xf(x.begin(), x.end());
    const std::vector<float> f = RunFloat(r, c.op, xf);
    ASSERT_EQ(f.size(), xf.size()) << c.op;
    for (int64_t i = 0; i < n; ++i) ExpectClose(f[i], c.ref(xf[i]), 2e-6, 1e-6, std::string(c.op) + " float32");
    // float16: computed in float, rounded once.
    std::vector<Half> xh;
    for (float v : xf) xh.push_back(FloatToHalf(v));
    auto h = r.Run(c.op, {}, {HostTensor::Of<Half>({n}, xh)});
    ASSERT_TRUE(h.ok()) << c.op << ": " << h.status().ToString();
    for (int64_t i = 0; i < n; ++i) {
      ExpectClose(HalfToFloat((*h)[0].Values<Half>()[i]), c.ref(HalfToFloat(xh[i])), 1e-3, 1e-3,
                  std::string(c.op) + " float16");
    }
  }
}

TEST(UnaryOpsTest, SpecialValues) {
  OpRunner r;
  // Round: ties to even.
  EXPECT_EQ(RunFloat(r, "Round", {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f}),
            (std::vector<float>{0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 2.0f, -3.0f}));
  // Sign keeps 0 and NaN.
  auto s = RunFloat(r, "Sign", {-2.0f, 0.0f, 3.0f, kNaN, -kInf});
  EXPECT_EQ(s[0], -1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 1.0f);
  EXPECT_TRUE(std::isnan(s[3]));
  EXPECT_EQ(s[4], -1.0f);
  // Softplus does not overflow where exp(x) does.
  auto sp = RunFloat(r, "Softplus", {100.0f, -100.0f, kInf, -kInf});
  EXPECT_EQ(sp[0], 100.0f);
  EXPECT_GE(sp[1], 0.0f);
  EXPECT_LT(sp[1], 1e-40f);
  EXPECT_EQ(sp[2], kInf);
  EXPECT_EQ(sp[3], 0.0f);
  // Elu and Selu saturate at -alpha and -gamma * alpha.
  EXPECT_EQ(RunFloat(r, "Elu", {-kInf}, Attrs({{"alpha", 2.0f}})), (std::vector<float>{-2.0f}));
  auto se = RunFloat(r, "Selu", {-kInf, 0.0f});
  EXPECT_NEAR(se[0], -1.67326319217681884765625 * 1.05070102214813232421875, 1e-6);
  EXPECT_EQ(se[1], 0.0f);
  // ThresholdedRelu: x == alpha gives 0.
  EXPECT_EQ(RunFloat(r, "ThresholdedRelu", {2.0f, 2.5f, -3.0f}, Attrs({{"alpha", 2.0f}})),
            (std::vector<float>{0.0f, 2.5f, 0.0f}));
  // Out-of-domain inputs give NaN.
  for (auto [op, v] : {std::pair{"Asin", 2.0f}, {"Acos", -2.0f}, {"Acosh", 0.5f}, {"Atanh", 1.5f}}) {
    EXPECT_TRUE(std::isnan(RunFloat(r, op, {v})[0])) << op;
  }
  EXPECT_EQ(RunFloat(r, "Atanh", {1.0f})[0], kInf);
  EXPECT_TRUE(std::isnan(RunFloat(r, "Sin", {kInf})[0]));
}

TEST(UnaryOpsTest, Attributes) {
  OpRunner r;
  // Shrink: soft (bias = lambd) and hard (bias 0, the default).
  EXPECT_EQ(RunFloat(r, "Shrink", {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f}, Attrs({{"bias", 1.5f}, {"lambd", 1.5f}})),
            (std::vector<float>{-0.5f, 0.0f, 0.0f, 0.0f, 0.5f}));
  EXPECT_EQ(RunFloat(r, "Shrink", {-2.0f, -0.5f, 0.4f, 2.0f}), (std::vector<float>{-2.0f, 0.0f, 0.0f, 2.0f}));
  // Celu with alpha 2: alpha * (exp(x / alpha) - 1) below 0.
  auto c = RunFloat(r, "Celu", {-1.0f, 3.0f}, Attrs({{"alpha", 2.0f}}));
  EXPECT_NEAR(c[0], 2.0 * (std::exp(-0.5) - 1), 1e-6);
  EXPECT_EQ(c[1], 3.0f);
  // Selu with both parameters given.
  auto se = RunFloat(r, "Selu", {-1.0f, 2.0f}, Attrs({{"alpha", 2.0f}, {"gamma", 3.0f}}));
  EXPECT_NEAR(se[0], 3.0 * 2.0 * (std::exp(-1.0) - 1), 1e-5);
  EXPECT_EQ(se[1], 6.0f);
  // A parameter of the wrong kind is an error naming the op.
  auto bad = r.Infer("Elu", Attrs({{"alpha", std::string("x")}}), {HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Elu"), std::string::npos) << bad.status().message();
}

TEST(UnaryOpsTest, SignTakesIntegers) {
  OpRunner r;
  auto out = r.Run("Sign", {}, {HostTensor::Of<int32_t>({4}, {-7, 0, 5, INT32_MIN})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-1, 0, 1, -1}));
  out = r.Run("Sign", {}, {HostTensor::Of<uint8_t>({3}, {0, 1, 255})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(UnaryOpsTest, FloatOnlyOpsRefuseIntegers) {
  OpRunner r;
  for (const Case& c : Cases()) {
    if (std::string(c.op) == "Sign") continue;
    auto st = r.Infer(c.op, {}, {HostTensor::Zeros(DType::kInt64, {2})});
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << c.op;
    EXPECT_NE(st.status().message().find(c.op), std::string::npos) << st.status().message();
  }
}

TEST(UnaryOpsTest, IsNaNAndIsInf) {
  OpRunner r;
  const std::vector<float> x = {1.0f, kNaN, kInf, -kInf, 0.0f, -3e38f};
  auto nan = r.Run("IsNaN", {}, {HostTensor::Of<float>({6}, x)});
  ASSERT_TRUE(nan.ok()) << nan.status().ToString();
  EXPECT_EQ((*nan)[0].dtype, DType::kBool);
  EXPECT_EQ((*nan)[0].bytes, (std::vector<uint8_t>{0, 1, 0, 0, 0, 0}));
  auto inf = r.Run("IsInf", {}, {HostTensor::Of<float>({6}, x)});
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ((*inf)[0].bytes, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0}));
  inf = r.Run("IsInf", Attrs({{"detect_negative", int64_t{0}}}), {HostTensor::Of<float>({6}, x)});
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ((*inf)[0].bytes, (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
  inf = r.Run("IsInf", Attrs({{"detect_positive", int64_t{0}}}),
              {HostTensor::Of<double>({3}, {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 1e308})});
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ((*inf)[0].bytes, (std::vector<uint8_t>{0, 1, 0}));
  auto h = r.Run("IsNaN", {}, {HostTensor::Of<Half>({2}, {FloatToHalf(kNaN), FloatToHalf(65504.0f)})});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)[0].bytes, (std::vector<uint8_t>{1, 0}));
  for (const char* op : {"IsNaN", "IsInf"}) {
    auto st = r.Infer(op, {}, {HostTensor::Zeros(DType::kInt32, {2})});
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_NE(st.status().message().find(op), std::string::npos) << st.status().message();
  }
}

}  // namespace unary_test
}  // namespace remex::kernels
