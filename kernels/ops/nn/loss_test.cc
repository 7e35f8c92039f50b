// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (kernels/ops/nn/loss.cc) against the
// ONNX reference implementation's formulas (onnx/backend/test/case/node/
// negativeloglikelihoodloss.py, softmaxcrossentropy.py) written here in double: every
// reduction, weights, ignore_index, 2-D to 4-D inputs, log_prob, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace loss_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

struct LossCase {
  Shape shape;  // [N, C, d...]
  std::string reduction;
  bool weighted = false;
  std::optional<int64_t> ignore_index;
};

// The reference loss of log-probabilities `logp` ([N, C, D] flattened) for `target`.
std::vector<double> ReferenceLoss(const std::vector<double>& logp, const std::vector<int64_t>& target,
                                  const std::vector<double>& weight, int64_t n, int64_t c, int64_t d,
                                  const LossCase& lc) {
  std::vector<double> loss(static_cast<size_t>(n * d));
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = target[i * d + j];
      double w = 0, l = 0;
      if (!(lc.ignore_index && t == *lc.ignore_index)) {
        w = weight.empty() ? 1.0 : weight[t];
        l = -logp[(i * c + t) * d + j] * w;
      }
      loss[i * d + j] = l;
      loss_sum += l;
      weight_sum += w;
    }
  }
  if (lc.reduction == "none") return loss;
  if (lc.reduction == "sum") return {loss_sum};
  return {loss_sum / weight_sum};
}

std::vector<double> LogSoftmaxAlongC(const std::vector<double>& x, int64_t n, int64_t c, int64_t d) {
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < c; ++k) mx = std::max(mx, x[(i * c + k) * d + j]);
      for (int64_t k = 0; k < c; ++k) sum += std::exp(x[(i * c + k) * d + j] - mx);
      for (int64_t k = 0; k < c; ++k) out[(i * c + k) * d + j] = x[(i * c + k) * d + j] - mx - std::log(sum);
    }
  }
  return out;
}

Attributes LossAttributes(const LossCase& lc) {
  Attributes a = Attrs({{"reduction", lc.reduction}});
  if (lc.ignore_index) a = Attrs({{"reduction", lc.reduction}, {"ignore_index", *lc.ignore_index}});
  return a;
}

const std::vector<LossCase>& Cases() {
  static const std::vector<LossCase> cases = {
      {{3, 5}, "mean"},
      {{3, 5}, "sum"},
      {{3, 5}, "none"},
      {{3, 5}, "mean", true},
      {{2, 4, 3}, "mean", true, 1},
      {{2, 4, 3}, "none", false, 0},
      {{2, 3, 2, 2}, "sum", true},
      {{2, 3, 2, 2}, "mean", false, -1},  // an ignore_index outside [0, C) only marks targets
  };
  return cases;
}

// Runs both ops in float64 on random data and compares with the reference.
TEST(LossTest, MatchesTheReferenceFormulas) {
  OpRunner r;
  std::mt19937 rng(11);
  for (const LossCase& lc : Cases()) {
    SCOPED_TRACE(ShapeToString(lc.shape) + " " + lc.reduction);
    const int64_t n = lc.shape[0], c = lc.shape[1];
    int64_t d = 1;
    for (size_t i = 2; i < lc.shape.size(); ++i) d *= lc.shape[i];
    std::uniform_real_distribution<double> dist(-3, 3);
    std::uniform_int_distribution<int64_t> cls(0, c - 1);
    std::vector<double> x(static_cast<size_t>(n * c * d)), weight;
    for (double& v : x) v = dist(rng);
    Shape target_shape = {n};
    target_shape.insert(target_shape.end(), lc.shape.begin() + 2, lc.shape.end());
    std::vector<int64_t> target(static_cast<size_t>(n * d));
    for (int64_t& t : target) t = cls(rng);
    if (lc.ignore_index) target[1] = *lc.ignore_index;  // at least one ignored position
    std::vector<HostTensor> in = {HostTensor::Of<double>(lc.shape, x), HostTensor::Of<int64_t>(target_shape, target)};
    if (lc.weighted) {
      for (int64_t k = 0; k < c; ++k) weight.push_back(0.5 + 0.25 * static_cast<double>(k));
      in.push_back(HostTensor::Of<double>({c}, weight));
    }
    const Shape want_shape = lc.reduction == "none" ? target_shape : Shape{};

    // NegativeLogLikelihoodLoss of log-probabilities.
    std::vector<double> logp = LogSoftmaxAlongC(x, n, c, d);
    std::vector<HostTensor> nll_in = in;
    nll_in[0] = HostTensor::Of<double>(lc.shape, logp);
    auto nll = r.Run("NegativeLogLikelihoodLoss", LossAttributes(lc), nll_in);
    ASSERT_TRUE(nll.ok()) << nll.status().ToString();
    const std::vector<double> want = ReferenceLoss(logp, target, weight, n, c, d, lc);
    EXPECT_EQ((*nll)[0].shape, want_shape);
    auto got = (*nll)[0].Values<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;

    // SoftmaxCrossEntropyLoss of the scores: the same loss, and log_prob.
    auto sce = r.Run("SoftmaxCrossEntropyLoss", LossAttributes(lc), in, 2);
    ASSERT_TRUE(sce.ok()) << sce.status().ToString();
    got = (*sce)[0].Values<double>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    EXPECT_EQ((*sce)[1].shape, lc.shape);
    auto lp = (*sce)[1].Values<double>();
    for (size_t i = 0; i < logp.size(); ++i) EXPECT_NEAR(lp[i], logp[i], 1e-12) << i;
  }
}

TEST(LossTest, Float32AndInt32Targets) {
  OpRunner r;
  // log-probabilities of 2 samples, 3 classes; targets 2 and 0.
  auto out = r.Run("NegativeLogLikelihoodLoss", {},
                   {HostTensor::Of<float>({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f}),
                    HostTensor::Of<int32_t>({2}, {2, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ((*out)[0].Values<float>()[0], (3 + 0.5f) / 2);
  // Everything ignored: mean is 0 / 0.
  out = r.Run("NegativeLogLikelihoodLoss", Attrs({{"ignore_index", int64_t{1}}}),
              {HostTensor::Of<float>({1, 3}, {-1, -2, -3}), HostTensor::Of<int64_t>({1}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(std::isnan((*out)[0].Values<float>()[0]));
}

TEST(LossTest, BadInputsAreErrorsNamingTheOp) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({2, 3}, {-1, -2, -3, -1, -2, -3});
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    SCOPED_TRACE(op);
    // A target outside [0, C).
    auto out = r.Run(op, {}, {x, HostTensor::Of<int64_t>({2}, {0, 3})});
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("target value 3 at index 1 is out of range"), std::string::npos) << out.status().message();
    // Shapes and dtypes.
    EXPECT_EQ(r.Infer(op, {}, {x, HostTensor::Of<int64_t>({3}, {0, 1, 2})}).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(r.Infer(op, {}, {x, HostTensor::Of<float>({2}, {0, 1})}).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(r.Infer(op, {}, {x, HostTensor::Of<int64_t>({2}, {0, 1}), HostTensor::Of<float>({2}, {1, 1})})
                  .status()
                  .code(),
              StatusCode::kInvalidArgument);
    auto bad = r.Infer(op, Attrs({{"reduction", std::string("max")}}), {x, HostTensor::Of<int64_t>({2}, {0, 1})});
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(op), std::string::npos) << bad.status().message();
  }
}

}  // namespace loss_test
}  // namespace remex::kernels
