// The training domain's optimizers (kernels/ops/training/optimizer.cc): Adagrad, Adam and Momentum
// (standard and Nesterov) against ONNX's reference values (the backend test cases of
// ONNX 1.12, onnx/backend/test/case/node/{adagrad,adam,momentum}.py) and against their
// formulas at update counts T > 0, several tensors per call, float64, and the checks of
// attributes and inputs.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace optimizer_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor R(float r) { return HostTensor::Of<float>({}, {r}); }
HostTensor T(int64_t t) { return HostTensor::Of<int64_t>({}, {t}); }
HostTensor F(std::vector<float> v) { return HostTensor::Of<float>({static_cast<int64_t>(v.size())}, v); }

void ExpectValues(const HostTensor& t, const std::vector<double>& want, double rtol = 1e-6) {
  ASSERT_EQ(t.dtype, DType::kFloat32);
  const std::vector<float> got = t.Values<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], rtol * std::abs(want[i]) + 1e-7) << i;
}

TEST(OptimizerTest, AdagradMatchesOnnxReference) {
  OpRunner r;
  const Attributes a = Attrs({{"decay_factor", 0.1f}, {"epsilon", 1e-5f}, {"norm_coefficient", 0.001f}});
  // test_adagrad: one tensor.
  auto out = r.Run("Adagrad", a, {R(0.1f), T(0), F({1.0f}), F({-1.0f}), F({2.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  ExpectValues((*out)[0], {1.0576962});
  ExpectValues((*out)[1], {2.998001});
  // test_adagrad_multiple: two tensors; outputs X1', X2', H1', H2'.
  out = r.Run("Adagrad", a, {R(0.1f), T(0), F({1.0f}), F({1.0f, 2.0f}), F({-1.0f}), F({-1.0f, -3.0f}), F({2.0f}),
                             F({4.0f, 1.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 4u);
  ExpectValues((*out)[0], {1.0576962});
  ExpectValues((*out)[1], {1.0446854, 2.0948617});
  ExpectValues((*out)[2], {2.998001});
  ExpectValues((*out)[3], {4.998001, 9.988004});
}

TEST(OptimizerTest, AdamMatchesOnnxReferenceAndCorrectsBiasAfterTheFirstStep) {
  OpRunner r;
  // test_adam_multiple (T = 0: no bias correction). ONNX computed its expected values
  // with epsilon 1e-2, which the case's node does not set (the default is 1e-6): given
  // here, they are reproduced; the conformance runner skips the case as inconsistent.
  const Attributes a = Attrs({{"alpha", 0.95f}, {"beta", 0.85f}, {"norm_coefficient", 0.001f}, {"epsilon", 1e-2f}});
  auto out = r.Run("Adam", a, {R(0.1f), T(0), F({1.0f}), F({1.0f, 2.0f}), F({-1.0f}), F({-1.0f, -3.0f}), F({2.0f}),
                               F({4.0f, 1.0f}), F({0.5f}), F({1.0f, 10.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 6u);
  ExpectValues((*out)[0], {0.75913626});
  ExpectValues((*out)[1], {0.6286528, 1.9745853});
  ExpectValues((*out)[2], {1.85005});
  ExpectValues((*out)[3], {3.75005, 0.80009997});
  ExpectValues((*out)[4], {0.5747002});
  ExpectValues((*out)[5], {0.9997002, 9.848201});
  // test_adam: one tensor, epsilon 1e-7.
  out = r.Run("Adam", Attrs({{"alpha", 0.95f}, {"beta", 0.1f}, {"norm_coefficient", 0.001f}, {"epsilon", 1e-7f}}),
              {R(0.1f), T(0), F({1.2f, 2.8f}), F({-0.94f, -2.5f}), F({1.7f, 3.6f}), F({0.1f, 0.1f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double g0 = 0.001 * 1.2 - 0.94;
  EXPECT_NEAR((*out)[0].Values<float>()[0],
              1.2 - 0.1 * (0.95 * 1.7 + 0.05 * g0) / (std::sqrt(0.1 * 0.1 + 0.9 * g0 * g0) + 1e-7), 1e-5);
  // The default epsilon is 1e-6.
  out = r.Run("Adam", {}, {R(0.5f), T(0), F({0.0f}), F({0.0f}), F({0.0f}), F({0.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues((*out)[0], {0.0});
  out = r.Run("Adam", {}, {R(1.0f), T(0), F({0.0f}), F({1e-3f}), F({0.0f}), F({0.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // v' = 0.1 * 1e-3, h' = 0.001 * 1e-6, x' = -v' / (sqrt(h') + 1e-6).
  const double v1 = 0.1f * 1e-3f, h1 = (1 - 0.999f) * (1e-3f * 1e-3f);
  ExpectValues((*out)[0], {-v1 / (std::sqrt(h1) + 1e-6f)}, 1e-5);
  // T = 3 with epsilon and norm_coefficient_post: ONNX's formula, written out.
  const double alpha = 0.95f, beta = 0.85f, eps = 1e-3f, post = 0.01f, norm = 0.001f;
  const Attributes b =
      Attrs({{"alpha", 0.95f}, {"beta", 0.85f}, {"norm_coefficient", 0.001f}, {"epsilon", 1e-3f},
             {"norm_coefficient_post", 0.01f}});
  out = r.Run("Adam", b, {R(0.1f), T(3), F({1.5f}), F({-0.5f}), F({0.25f}), F({0.75f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double g = norm * 1.5 + -0.5;
  const double v = alpha * 0.25 + (1 - alpha) * g, h = beta * 0.75 + (1 - beta) * g * g;
  const double rate = 0.1f * std::sqrt(1 - std::pow(beta, 3)) / (1 - std::pow(alpha, 3));
  ExpectValues((*out)[0], {(1 - post) * (1.5 - rate * v / (std::sqrt(h) + eps))}, 1e-6);
  ExpectValues((*out)[1], {v});
  ExpectValues((*out)[2], {h});
}

TEST(OptimizerTest, MomentumStandardAndNesterov) {
  OpRunner r;
  const std::vector<HostTensor> in = {R(0.1f), T(0), F({1.2f, 2.8f}), F({-0.94f, -2.5f}), F({1.7f, 3.6f})};
  // test_momentum.
  auto out = r.Run("Momentum", Attrs({{"alpha", 0.95f}, {"beta", 0.1f}, {"mode", std::string("standard")},
                                      {"norm_coefficient", 0.001f}}),
                   in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues((*out)[0], {1.13238, 2.70772});
  ExpectValues((*out)[1], {0.67620003, 0.9227998});
  // test_nesterov_momentum.
  const Attributes nesterov = Attrs({{"alpha", 0.95f}, {"beta", 1.0f}, {"mode", std::string("nesterov")},
                                     {"norm_coefficient", 0.01f}});
  out = r.Run("Momentum", nesterov, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues((*out)[0], {1.227535, 2.95714});
  ExpectValues((*out)[1], {0.68700004, 0.94799995});
  // T > 0: beta weighs the gradient (at T = 0 it is 1).
  out = r.Run("Momentum", Attrs({{"alpha", 0.5f}, {"beta", 0.25f}, {"mode", std::string("standard")},
                                 {"norm_coefficient", 0.0f}}),
              {R(0.5f), T(7), F({2.0f}), F({4.0f}), F({1.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues((*out)[1], {0.5 * 1.0 + 0.25 * 4.0});
  ExpectValues((*out)[0], {2.0 - 0.5 * 1.5});
}

TEST(OptimizerTest, Float64TensorsAndRate) {
  OpRunner r;
  auto out = r.Run("Adagrad", Attrs({{"epsilon", 0.0f}}),
                   {HostTensor::Of<double>({}, {0.5}), T(4), HostTensor::Of<double>({2}, {1.0, -2.0}),
                    HostTensor::Of<double>({2}, {0.5, 3.0}), HostTensor::Of<double>({2}, {0.0, 1.0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].dtype, DType::kFloat64);
  const std::vector<double> x = (*out)[0].Values<double>(), h = (*out)[1].Values<double>();
  // decay_factor 0: the rate is R; h' = h + g^2; x' = x - r * g / (sqrt(h') + 0).
  EXPECT_DOUBLE_EQ(h[0], 0.25);
  EXPECT_DOUBLE_EQ(h[1], 10.0);
  EXPECT_DOUBLE_EQ(x[0], 1.0 - 0.5 * 0.5 / 0.5);
  EXPECT_DOUBLE_EQ(x[1], -2.0 - 0.5 * 3.0 / std::sqrt(10.0));
}

TEST(OptimizerTest, RefusesBadInputsAndAttributes) {
  OpRunner r;
  const Attributes momentum = Attrs({{"alpha", 0.9f}, {"beta", 0.1f}, {"mode", std::string("standard")},
                                     {"norm_coefficient", 0.0f}});
  auto expect_invalid = [&](const std::string& op, const Attributes& a, std::vector<HostTensor> in,
                            const std::string& says) {
    auto out = r.Run(op, a, std::move(in));
    ASSERT_FALSE(out.ok()) << op << " " << says;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
    EXPECT_NE(out.status().message().find(says), std::string::npos) << out.status().message();
  };
  // Input counts that are not R, T and 3 (Adam: 4) groups of n.
  expect_invalid("Adagrad", {}, {R(0.1f), T(0), F({1}), F({1}), F({1}), F({1})}, "groups");
  expect_invalid("Adam", {}, {R(0.1f), T(0), F({1}), F({1}), F({1})}, "inputs");
  // Shapes and dtypes.
  expect_invalid("Adagrad", {}, {R(0.1f), T(0), F({1, 2}), F({1}), F({1, 2})}, "G1 has shape");
  expect_invalid("Momentum", momentum, {R(0.1f), T(0), F({1}), F({1}), HostTensor::Of<double>({1}, {1})}, "dtype");
  expect_invalid("Adagrad", {}, {R(0.1f), HostTensor::Of<int32_t>({}, {0}), F({1}), F({1}), F({1})}, "T has dtype");
  expect_invalid("Adagrad", {}, {HostTensor::Of<float>({2}, {1, 2}), T(0), F({1}), F({1}), F({1})}, "R must be");
  expect_invalid("Adagrad", {},
                 {R(0.1f), T(0), HostTensor::Of<int32_t>({1}, {1}), HostTensor::Of<int32_t>({1}, {1}),
                  HostTensor::Of<int32_t>({1}, {1})},
                 "X has dtype int32");
  // Momentum's attributes are required, and its mode is one of two.
  const std::vector<HostTensor> in = {R(0.1f), T(0), F({1}), F({1}), F({1})};
  expect_invalid("Momentum", Attrs({{"alpha", 0.9f}, {"beta", 0.1f}, {"mode", std::string("standard")}}), in,
                 "'norm_coefficient' is required");
  Attributes bad_mode = momentum;
  bad_mode.Set("mode", std::string("heavy"));
  expect_invalid("Momentum", bad_mode, in, "mode must be");
  // The kernel factory checks the attributes when the kernel is made.
  const KernelFactory* factory = testing::FindVersionedKernel(r.registry(), "Momentum", DeviceKind::kCpu);
  ASSERT_TRUE(factory);
  EXPECT_EQ((*factory)(bad_mode).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*factory)(momentum).ok());
}

TEST(OptimizerTest, OpsBelongToTheTrainingDomain) {
  OpRunner r;
  for (const char* op : {"Adagrad", "Adam", "Momentum"}) {
    const OpDef* def = r.registry().FindOp(op, 1);
    ASSERT_TRUE(def) << op;
    EXPECT_EQ(def->domain, "ai.onnx.preview.training");
    EXPECT_EQ(def->since_version, 1);
  }
  EXPECT_TRUE(r.registry().FindOp("Relu")->domain.empty());
}

}  // namespace optimizer_test
}  // namespace remex::kernels
