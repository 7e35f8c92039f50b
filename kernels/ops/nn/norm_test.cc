// InstanceNormalization and LayerNormalization against naive references written from
// the ONNX equations, shape-function errors and data dependence.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ops/rnn/rnn_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace norm_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using rnntest::ExpectNear;
using rnntest::Random;
using rnntest::Rounded;
using rnntest::TensorOf;
using rnntest::ValuesOf;

// ---------------------------------------------------------------------------
// InstanceNormalization.

// BatchNormalization-15 in training mode: the batch's mean and biased variance per
// channel (over N and the spatial dims) normalise X, and the running statistics move by
// 1 - momentum towards them (ONNX's reference, written out here in double).
TEST(BatchNormTest, TrainingModeUsesBatchStatistics) {
  OpRunner r;
  const int64_t n = 2, c = 3, inner = 4;
  std::vector<float> x(n * c * inner);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 3.5f;
  const std::vector<float> scale = {1.0f, 0.5f, 2.0f}, bias = {0.0f, 1.0f, -1.0f};
  const std::vector<float> mean = {0.1f, 0.2f, 0.3f}, var = {1.0f, 2.0f, 3.0f};
  const float momentum = 0.8f, epsilon = 1e-3f;
  auto out = r.Run("BatchNormalization",
                   Attrs({{"training_mode", int64_t{1}}, {"momentum", momentum}, {"epsilon", epsilon}}),
                   {HostTensor::Of<float>({n, c, 2, 2}, x), HostTensor::Of<float>({c}, scale),
                    HostTensor::Of<float>({c}, bias), HostTensor::Of<float>({c}, mean), HostTensor::Of<float>({c}, var)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  const auto y = (*out)[0].Values<float>();
  const auto running_mean = (*out)[1].Values<float>(), running_var = (*out)[2].Values<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    double m = 0, v = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) m += x[(b * c + ch) * inner + i];
    }
    m /= n * inner;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) v += std::pow(x[(b * c + ch) * inner + i] - m, 2);
    }
    v /= n * inner;
    EXPECT_NEAR(running_mean[ch], mean[ch] * momentum + m * (1 - momentum), 1e-5) << ch;
    EXPECT_NEAR(running_var[ch], var[ch] * momentum + v * (1 - momentum), 1e-5) << ch;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * c + ch) * inner + i;
        EXPECT_NEAR(y[at], (x[at] - m) / std::sqrt(v + epsilon) * scale[ch] + bias[ch], 1e-5) << at;
      }
    }
  }
  // Inference mode: one output, from the given statistics.
  auto inf = r.Infer("BatchNormalization", {},
                     {HostTensor::Of<float>({n, c, 2, 2}, x), HostTensor::Of<float>({c}, scale),
                      HostTensor::Of<float>({c}, bias), HostTensor::Of<float>({c}, mean),
                      HostTensor::Of<float>({c}, var)});
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ(inf->size(), 1u);
  EXPECT_FALSE(r.Infer("BatchNormalization", Attrs({{"training_mode", int64_t{2}}}),
                       {HostTensor::Of<float>({n, c, 2, 2}, x), HostTensor::Of<float>({c}, scale),
                        HostTensor::Of<float>({c}, bias), HostTensor::Of<float>({c}, mean),
                        HostTensor::Of<float>({c}, var)})
                   .ok());
}

TEST(InstanceNormTest, HandCheckedValues) {
  OpRunner r;
  // One instance [1, 2, 3, 5]: mean 2.75, variance 2.1875.
  auto out = r.Run("InstanceNormalization", Attrs({{"epsilon", 0.0f}}),
                   {HostTensor::Of<float>({1, 1, 4}, {1, 2, 3, 5}), HostTensor::Of<float>({1}, {2}),
                    HostTensor::Of<float>({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double sd = std::sqrt(2.1875);
  std::vector<double> want;
  for (double x : {1.0, 2.0, 3.0, 5.0}) want.push_back(2 * (x - 2.75) / sd + 1);
  ExpectNear(ValuesOf<float>((*out)[0]), want, 1e-6, "y");
}

template <typename T>
void CheckInstanceNorm(const Shape& shape, double tol) {
  OpRunner r;
  std::mt19937 rng(3);
  const int64_t n = shape[0], c = shape[1];
  int64_t inner = 1;
  for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
  std::vector<double> x = Rounded<T>(Random(n * c * inner, rng, -3, 5));
  std::vector<double> scale = Rounded<T>(Random(c, rng)), bias = Rounded<T>(Random(c, rng));
  const float eps = 1e-3f;
  auto out = r.Run("InstanceNormalization", Attrs({{"epsilon", eps}}),
                   {TensorOf<T>(shape, x), TensorOf<T>({c}, scale), TensorOf<T>({c}, bias)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, shape);
  std::vector<double> want(x.size());
  for (int64_t i = 0; i < n * c; ++i) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; ++k) mean += x[i * inner + k];
    mean /= inner;
    for (int64_t k = 0; k < inner; ++k) var += (x[i * inner + k] - mean) * (x[i * inner + k] - mean);
    var /= inner;
    for (int64_t k = 0; k < inner; ++k) {
      want[i * inner + k] =
          scale[i % c] * (x[i * inner + k] - mean) / std::sqrt(var + eps) + bias[i % c];
    }
  }
  ExpectNear(ValuesOf<T>((*out)[0]), want, tol, "y");
}

TEST(InstanceNormTest, MatchesReference) {
  CheckInstanceNorm<float>({2, 3, 5, 7}, 1e-5);
  CheckInstanceNorm<float>({1, 2, 37}, 1e-5);
  CheckInstanceNorm<double>({2, 3, 4, 2, 3}, 1e-12);
  CheckInstanceNorm<Half>({2, 2, 9}, 5e-3);
}

TEST(InstanceNormTest, ShapeErrors) {
  OpRunner r;
  auto f = [](Shape s) { return HostTensor::Zeros(DType::kFloat32, std::move(s)); };
  EXPECT_TRUE(r.Infer("InstanceNormalization", {}, {f({1, 3, 4}), f({3}), f({3})}).ok());
  auto s = r.Infer("InstanceNormalization", {}, {f({1, 3, 4}), f({2}), f({3})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("InstanceNormalization"), std::string::npos);
  EXPECT_NE(s.status().message().find("scale"), std::string::npos);
  EXPECT_EQ(r.Infer("InstanceNormalization", {}, {f({3, 4}), f({4}), f({4})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("InstanceNormalization", {},
                    {f({1, 3, 4}), f({3}), HostTensor::Zeros(DType::kFloat64, {3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("InstanceNormalization", {},
                    {HostTensor::Zeros(DType::kInt32, {1, 3, 4}),
                     HostTensor::Zeros(DType::kInt32, {3}), HostTensor::Zeros(DType::kInt32, {3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("InstanceNormalization", Attrs({{"epsilon", -1.0f}}), {f({1, 3, 4}), f({3}), f({3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// LayerNormalization.

struct LayerNormCase {
  Shape x;
  int64_t axis;
  Shape scale;
  std::optional<Shape> bias;
  float epsilon = 1e-5f;
};

// Index into a tensor of shape s broadcast (right-aligned) to x at x's multi-index.
int64_t BroadcastIndex(const Shape& x, const Shape& s, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    const int64_t i = idx[x.size() - s.size() + d];
    off = off * s[d] + (s[d] == 1 ? 0 : i);
  }
  return off;
}

template <typename T>
void CheckLayerNorm(const LayerNormCase& c, double tol, int64_t stash_type = 1) {
  OpRunner r;
  std::mt19937 rng(11);
  const int64_t total = *NumElements(c.x);
  std::vector<double> x = Rounded<T>(Random(total, rng, -2, 4));
  std::vector<double> scale = Rounded<T>(Random(*NumElements(c.scale), rng));
  std::vector<double> bias;
  std::vector<HostTensor> inputs = {TensorOf<T>(c.x, x), TensorOf<T>(c.scale, scale)};
  if (c.bias) {
    bias = Rounded<T>(Random(*NumElements(*c.bias), rng));
    inputs.push_back(TensorOf<T>(*c.bias, bias));
  }
  auto out = r.Run("LayerNormalization",
                   Attrs({{"axis", c.axis}, {"epsilon", c.epsilon}, {"stash_type", stash_type}}),
                   inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  const int64_t rank = static_cast<int64_t>(c.x.size());
  const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= c.x[d];
  const int64_t inner = total / outer;
  Shape stats(c.x.begin(), c.x.begin() + axis);
  stats.resize(c.x.size(), 1);
  EXPECT_EQ((*out)[0].shape, c.x);
  EXPECT_EQ((*out)[1].shape, stats);
  EXPECT_EQ((*out)[2].shape, stats);
  const DType stash = stash_type == 11 ? DType::kFloat64 : DType::kFloat32;
  EXPECT_EQ((*out)[1].dtype, stash);
  EXPECT_EQ((*out)[2].dtype, stash);
  std::vector<double> want_y(total), want_mean(outer), want_inv(outer);
  std::vector<int64_t> idx(c.x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x[o * inner + i];
    mean /= inner;
    for (int64_t i = 0; i < inner; ++i) var += (x[o * inner + i] - mean) * (x[o * inner + i] - mean);
    var /= inner;
    const double inv = 1 / std::sqrt(var + c.epsilon);
    want_mean[o] = mean;
    want_inv[o] = inv;
    for (int64_t i = 0; i < inner; ++i) {
      int64_t rem = o * inner + i;
      for (size_t d = c.x.size(); d-- > 0;) {
        idx[d] = rem % c.x[d];
        rem /= c.x[d];
      }
      double y = (x[o * inner + i] - mean) * inv * scale[BroadcastIndex(c.x, c.scale, idx)];
      if (c.bias) y += bias[BroadcastIndex(c.x, *c.bias, idx)];
      want_y[o * inner + i] = y;
    }
  }
  const std::string what = ShapeToString(c.x) + " axis " + std::to_string(c.axis);
  ExpectNear(ValuesOf<T>((*out)[0]), want_y, tol, what + " Y");
  if (stash == DType::kFloat64) {
    ExpectNear(ValuesOf<double>((*out)[1]), want_mean, 1e-12, what + " Mean");
    ExpectNear(ValuesOf<double>((*out)[2]), want_inv, 1e-12, what + " InvStdDev");
  } else {
    ExpectNear(ValuesOf<float>((*out)[1]), want_mean, 1e-5, what + " Mean");
    ExpectNear(ValuesOf<float>((*out)[2]), want_inv, 1e-5, what + " InvStdDev");
  }
}

TEST(LayerNormTest, HandCheckedValues) {
  OpRunner r;
  // Rows [1, 3] and [2, 6]: means 2 and 4, variances 1 and 4.
  auto out = r.Run("LayerNormalization", Attrs({{"epsilon", 0.0f}}),
                   {HostTensor::Of<float>({2, 2}, {1, 3, 2, 6}), HostTensor::Of<float>({2}, {1, 2}),
                    HostTensor::Of<float>({2}, {0, 10})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1, 12, -1, 12}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ((*out)[2].Values<float>(), (std::vector<float>{1, 0.5f}));
  EXPECT_EQ((*out)[1].shape, (Shape{2, 1}));
}

TEST(LayerNormTest, MatchesReference) {
  const std::vector<LayerNormCase> cases = {
      {{2, 3, 4}, -1, {4}, Shape{4}},
      {{2, 3, 4}, 1, {3, 4}, Shape{3, 4}},
      {{2, 3, 4}, 0, {2, 3, 4}, std::nullopt},
      {{2, 3, 4}, -2, {1, 4}, Shape{3, 1}},       // Broadcast within the normalised dims.
      {{2, 3, 4}, 2, {3, 1}, Shape{1}},           // Scale varies over an outer dim.
      {{2, 3, 4}, 1, {2, 1, 4}, std::nullopt},    // Scale varies over the outer dim.
      {{5, 37}, -1, {37}, Shape{37}, 1e-2f},
      {{3, 2, 2, 5}, 3, {5}, Shape{5}},
      {{7}, 0, {7}, Shape{7}},
  };
  for (const LayerNormCase& c : cases) CheckLayerNorm<float>(c, 1e-5);
  for (const LayerNormCase& c : cases) CheckLayerNorm<double>(c, 1e-12);
  CheckLayerNorm<float>(cases[1], 1e-5, 11);
  CheckLayerNorm<Half>(cases[0], 5e-3);
  CheckLayerNorm<Half>(cases[4], 5e-3);
}

TEST(LayerNormTest, OutputsArePrefixes) {
  OpRunner r;
  const OpDef* def = r.registry().FindOp("LayerNormalization");
  ASSERT_NE(def, nullptr);
  std::vector<HostTensor> in = {HostTensor::Of<float>({1, 2}, {1, 3}),
                                HostTensor::Of<float>({2}, {1, 1})};
  const Attributes attrs = Attrs({{"epsilon", 0.0f}});
  auto infos = r.Infer("LayerNormalization", attrs, in);
  ASSERT_TRUE(infos.ok());
  auto kernel = (*r.registry().FindKernel("LayerNormalization", DeviceKind::kCpu))(attrs);
  ASSERT_TRUE(kernel.ok());
  auto out = OpRunner::RunKernel(**kernel, *infos, in, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1, 1}));
}

TEST(LayerNormTest, ShapeErrors) {
  OpRunner r;
  auto f = [](Shape s) { return HostTensor::Zeros(DType::kFloat32, std::move(s)); };
  auto code = [&](const Attributes& a, std::vector<HostTensor> in) {
    return r.Infer("LayerNormalization", a, std::move(in)).status().code();
  };
  EXPECT_EQ(code({}, {f({2, 3}), f({3})}), StatusCode::kOk);
  EXPECT_EQ(code({}, {f({2, 3}), f({3}), HostTensor::Absent()}), StatusCode::kOk);
  EXPECT_EQ(code(Attrs({{"axis", int64_t{2}}}), {f({2, 3}), f({3})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Attrs({{"axis", int64_t{-3}}}), {f({2, 3}), f({3})}),
            StatusCode::kInvalidArgument);
  auto s = r.Infer("LayerNormalization", {}, {f({2, 3}), f({4})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("LayerNormalization"), std::string::npos);
  EXPECT_NE(s.status().message().find("Scale"), std::string::npos);
  EXPECT_EQ(code({}, {f({2, 3}), f({3}), f({2})}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({}, {f({2, 3}), f({1, 2, 3})}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({}, {f({2, 3}), HostTensor::Zeros(DType::kFloat64, {3})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code({}, {f({}), f({})}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({}, {HostTensor::Zeros(DType::kInt64, {2}), HostTensor::Zeros(DType::kInt64, {2})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Attrs({{"stash_type", int64_t{10}}}), {f({2, 3}), f({3})}),
            StatusCode::kUnimplemented);
  EXPECT_EQ(code(Attrs({{"epsilon", -1.0f}}), {f({2, 3}), f({3})}), StatusCode::kInvalidArgument);
}

TEST(NormTest, ShapeDepsAreDeclared) {
  OpRunner r;
  for (const char* op : {"InstanceNormalization", "LayerNormalization", "LSTM", "GRU", "RNN"}) {
    const OpDef* def = r.registry().FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(r.registry().FindKernel(op, DeviceKind::kCpu), nullptr) << op;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(def->DepOf(i), ShapeDep::kShape) << op << " " << i;
  }
}

// float32 Softmax and LogSoftmax along the last axis (the lanes of SoftmaxRowsFloat32):
// rows shorter than, equal to and longer than the 16 lanes with a tail, against the
// formula in double; a NaN makes its row NaN and leaves the other rows; -inf gives 0
// (LogSoftmax -inf); a row of large values stays finite; the rows split over threads.
TEST(SoftmaxTest, Float32RowsAlongTheLastAxis) {
  OpRunner r;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 4.0f);
  for (int64_t n : {1, 5, 16, 37, 128, 1000}) {
    for (int64_t rows : {1, 3, 300}) {
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (float& v : x) v = d(rng);
      if (n > 1) {  // (a row of -inf alone is NaN: -inf - -inf)
        x[0] = -INFINITY;
        x[static_cast<size_t>(n - 1)] = 3000.0f;  // the first row's max, far above the rest
      }
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(n) + (log ? " LogSoftmax" : " Softmax"));
        auto out = r.Run(log ? "LogSoftmax" : "Softmax", {}, {HostTensor::Of<float>({rows, n}, x)});
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        const std::vector<float> y = (*out)[0].Values<float>();
        for (int64_t row = 0; row < rows; ++row) {
          const float* xr = x.data() + row * n;
          double m = -INFINITY, sum = 0;
          for (int64_t j = 0; j < n; ++j) m = std::max(m, double{xr[j]});
          for (int64_t j = 0; j < n; ++j) sum += std::exp(double{xr[j]} - m);
          for (int64_t j = 0; j < n; ++j) {
            const double want = log ? double{xr[j]} - m - std::log(sum) : std::exp(double{xr[j]} - m) / sum;
            const float got = y[static_cast<size_t>(row * n + j)];
            if (std::isinf(want)) {
              EXPECT_EQ(got, want) << row << "," << j;
            } else {
              EXPECT_NEAR(got, want, 1e-6 * (1 + std::fabs(want))) << row << "," << j;
            }
          }
        }
      }
    }
  }
  // A NaN in the second row: that row is NaN, the others are not.
  std::vector<float> x(3 * 20, 0.5f);
  x[20 + 7] = NAN;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    auto out = r.Run(op, {}, {HostTensor::Of<float>({3, 20}, x)});
    ASSERT_TRUE(out.ok());
    const std::vector<float> y = (*out)[0].Values<float>();
    for (int i = 0; i < 60; ++i) EXPECT_EQ(std::isnan(y[static_cast<size_t>(i)]), i >= 20 && i < 40) << op << " " << i;
  }
}

// LogSoftmax and Hardmax (kernels/ops/math/softmax.cc) against formulas in double, both entries.
TEST(SoftmaxTest, LogSoftmaxAndHardmax) {
  OpRunner r;
  const std::vector<double> x = {1, 3, 2, -1, 1000, 1001, 0.5, 0.5};
  // [2, 4] along the last axis.
  auto out = r.Run("LogSoftmax", {}, {HostTensor::Of<double>({2, 4}, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto y = (*out)[0].Values<double>();
  for (int row = 0; row < 2; ++row) {
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < 4; ++j) m = std::max(m, x[row * 4 + j]);
    for (int j = 0; j < 4; ++j) sum += std::exp(x[row * 4 + j] - m);
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(y[row * 4 + j], x[row * 4 + j] - m - std::log(sum), 1e-12);
  }
  // axis 0 of [2, 2]: a column of (0, 0) gives log(1/2) twice.
  out = r.Run("LogSoftmax", Attrs({{"axis", int64_t{0}}}), {HostTensor::Of<float>({2, 2}, {0, 1, 0, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].Values<float>()[0], std::log(0.5), 1e-6);
  EXPECT_NEAR((*out)[0].Values<float>()[3], -std::log1p(std::exp(-2.0)), 1e-6);
  // LogSoftmax-1 flattens [axis:]: [1, 2, 2] of zeros gives log(1/4) everywhere.
  out = r.Run("LogSoftmax-12", {}, {HostTensor::Of<float>({1, 2, 2}, {0, 0, 0, 0})});
  ASSERT_TRUE(out.ok());
  for (float v : (*out)[0].Values<float>()) EXPECT_NEAR(v, std::log(0.25), 1e-6);

  // Hardmax: 1 at the first maximum of each row.
  out = r.Run("Hardmax", {}, {HostTensor::Of<float>({2, 4}, {1, 3, 3, 2, -5, -1, -1, -9})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 1, 0, 0, 0, 1, 0, 0}));
  out = r.Run("Hardmax", Attrs({{"axis", int64_t{0}}}), {HostTensor::Of<float>({2, 2}, {1, 4, 2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 1, 1, 0}));
  // Hardmax-1: one maximum over the flattened [1:] dims of [2, 2, 2].
  out = r.Run("Hardmax-11", {}, {HostTensor::Of<float>({2, 2, 2}, {0, 7, 1, 9, 4, 3, 2, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0}));
  // A NaN is never the maximum.
  out = r.Run("Hardmax", {}, {HostTensor::Of<float>({3}, {NAN, 1, 2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 1}));

  // Errors name the op.
  for (const char* op : {"LogSoftmax", "Hardmax"}) {
    auto st = r.Infer(op, {}, {HostTensor::Zeros(DType::kInt32, {2})});
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_NE(st.status().message().find(op), std::string::npos) << st.status().message();
    st = r.Infer(op, Attrs({{"axis", int64_t{2}}}), {HostTensor::Zeros(DType::kFloat32, {2, 2})});
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << op;
  }
}

}  // namespace norm_test
}  // namespace remex::kernels
