// InstanceNormalization, LayerNormalization, LSTM, GRU and RNN against naive
// references written from the ONNX equations, shape-function errors and data
// dependence.

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

std::vector<double> Random(size_t n, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

template <typename T>
HostTensor TensorOf(const Shape& shape, const std::vector<double>& v) {
  std::vector<T> t(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      t[i] = FloatToHalf(static_cast<float>(v[i]));
    } else {
      t[i] = static_cast<T>(v[i]);
    }
  }
  return HostTensor::Of<T>(shape, t);
}

template <typename T>
std::vector<double> ValuesOf(const HostTensor& t) {
  std::vector<T> v = t.Values<T>();
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      d[i] = HalfToFloat(v[i]);
    } else {
      d[i] = static_cast<double>(v[i]);
    }
  }
  return d;
}

// Values as the kernel sees them after rounding to T.
template <typename T>
std::vector<double> Rounded(const std::vector<double>& v) {
  return ValuesOf<T>(TensorOf<T>({static_cast<int64_t>(v.size())}, v));
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

// ---------------------------------------------------------------------------
// InstanceNormalization.

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

// ---------------------------------------------------------------------------
// LSTM, GRU, RNN.

struct RnnCase {
  std::string op;
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, init_h = true, init_c = true, peep = false;
  std::vector<int64_t> lens;  // Empty: no sequence_lens input.
  float clip = 0;             // 0: no clip.
  bool lbr = false, input_forget = false;
  std::vector<std::string> acts;  // Empty: defaults.
  std::vector<float> alpha, beta;
};

double ApplyRef(const std::string& name, double x, double alpha, double beta) {
  if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (name == "Tanh") return std::tanh(x);
  if (name == "Relu") return std::max(0.0, x);
  if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
  if (name == "HardSigmoid") return std::min(1.0, std::max(0.0, alpha * x + beta));
  if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
  if (name == "Affine") return alpha * x + beta;
  if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
  if (name == "Softsign") return x / (1 + std::abs(x));
  if (name == "Softplus") return std::log(1 + std::exp(x));
  if (name == "ThresholdedRelu") return x > alpha ? x : 0;
  std::abort();
}

struct RnnRefOutputs {
  std::vector<double> y, y_h, y_c;
};

struct RnnData {
  std::vector<double> x, w, r, b, h0, c0, p;
};

int Gates(const std::string& op) { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }

// Straight from the ONNX equations, one batch entry and one step at a time.
RnnRefOutputs RnnReference(const RnnCase& c, const RnnData& d,
                           const std::vector<std::string>& acts, const std::vector<double>& al,
                           const std::vector<double>& be) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, H = c.hidden, I = c.input;
  const int64_t G = Gates(c.op), nact = c.op == "LSTM" ? 3 : c.op == "GRU" ? 2 : 1;
  RnnRefOutputs o;
  o.y.assign(c.seq * D * c.batch * H, 0);
  o.y_h.assign(D * c.batch * H, 0);
  o.y_c.assign(D * c.batch * H, 0);
  auto xi = [&](int64_t t, int64_t b, int64_t k) {
    return c.layout == 0 ? d.x[(t * c.batch + b) * I + k] : d.x[(b * c.seq + t) * I + k];
  };
  auto si = [&](int64_t dir, int64_t b) {
    return c.layout == 0 ? (dir * c.batch + b) * H : (b * D + dir) * H;
  };
  auto yi = [&](int64_t t, int64_t dir, int64_t b) {
    return c.layout == 0 ? ((t * D + dir) * c.batch + b) * H : ((b * c.seq + t) * D + dir) * H;
  };
  auto W = [&](int64_t dir, int64_t row, int64_t k) { return d.w[(dir * G * H + row) * I + k]; };
  auto R = [&](int64_t dir, int64_t row, int64_t k) { return d.r[(dir * G * H + row) * H + k]; };
  auto Wb = [&](int64_t dir, int64_t row) { return c.bias ? d.b[dir * 2 * G * H + row] : 0.0; };
  auto Rb = [&](int64_t dir, int64_t row) {
    return c.bias ? d.b[dir * 2 * G * H + G * H + row] : 0.0;
  };
  for (int64_t dir = 0; dir < D; ++dir) {
    const bool rev = c.direction == "reverse" || dir == 1;
    auto act = [&](int k, double v) {
      if (c.clip > 0) v = std::min<double>(c.clip, std::max<double>(-c.clip, v));
      const size_t i = dir * nact + k;
      return ApplyRef(acts[i], v, al[i], be[i]);
    };
    for (int64_t b = 0; b < c.batch; ++b) {
      std::vector<double> h(H, 0), cell(H, 0);
      if (c.init_h) for (int64_t j = 0; j < H; ++j) h[j] = d.h0[si(dir, b) + j];
      if (c.op == "LSTM" && c.init_c) for (int64_t j = 0; j < H; ++j) cell[j] = d.c0[si(dir, b) + j];
      const int64_t len = c.lens.empty() ? c.seq : c.lens[b];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        // xw[row] and hr[row] with biases.
        auto xw = [&](int64_t row) {
          double v = Wb(dir, row);
          for (int64_t k = 0; k < I; ++k) v += xi(t, b, k) * W(dir, row, k);
          return v;
        };
        auto hr = [&](int64_t row, const std::vector<double>& hv) {
          double v = Rb(dir, row);
          for (int64_t k = 0; k < H; ++k) v += hv[k] * R(dir, row, k);
          return v;
        };
        std::vector<double> nh(H);
        if (c.op == "RNN") {
          for (int64_t j = 0; j < H; ++j) nh[j] = act(0, xw(j) + hr(j, h));
        } else if (c.op == "GRU") {
          std::vector<double> z(H), rg(H), rh(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = act(0, xw(j) + hr(j, h));
            rg[j] = act(0, xw(H + j) + hr(H + j, h));
            rh[j] = rg[j] * h[j];
          }
          for (int64_t j = 0; j < H; ++j) {
            const double pre = c.lbr ? xw(2 * H + j) + rg[j] * hr(2 * H + j, h)
                                     : xw(2 * H + j) + hr(2 * H + j, rh);
            const double hh = act(1, pre);
            nh[j] = (1 - z[j]) * hh + z[j] * h[j];
          }
        } else {
          std::vector<double> nc(H);
          for (int64_t j = 0; j < H; ++j) {
            const double pi = c.peep ? d.p[dir * 3 * H + j] : 0;
            const double po = c.peep ? d.p[dir * 3 * H + H + j] : 0;
            const double pf = c.peep ? d.p[dir * 3 * H + 2 * H + j] : 0;
            const double ig = act(0, xw(j) + hr(j, h) + pi * cell[j]);
            const double fg =
                c.input_forget ? 1 - ig : act(0, xw(2 * H + j) + hr(2 * H + j, h) + pf * cell[j]);
            const double cg = act(1, xw(3 * H + j) + hr(3 * H + j, h));
            nc[j] = fg * cell[j] + ig * cg;
            const double og = act(0, xw(H + j) + hr(H + j, h) + po * nc[j]);
            // h's input, the cell state, is not clipped.
            const size_t k = dir * nact + 2;
            nh[j] = og * ApplyRef(acts[k], nc[j], al[k], be[k]);
          }
          cell = nc;
        }
        h = nh;
        for (int64_t j = 0; j < H; ++j) o.y[yi(t, dir, b) + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        o.y_h[si(dir, b) + j] = h[j];
        o.y_c[si(dir, b) + j] = cell[j];
      }
    }
  }
  return o;
}

template <typename T>
void CheckRnn(const RnnCase& c, double tol) {
  OpRunner r;
  std::mt19937 rng(static_cast<unsigned>(c.seq * 131 + c.hidden * 7 + c.batch));
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, G = Gates(c.op), H = c.hidden;
  RnnData d;
  d.x = Rounded<T>(Random(c.seq * c.batch * c.input, rng, -2, 2));
  d.w = Rounded<T>(Random(D * G * H * c.input, rng));
  d.r = Rounded<T>(Random(D * G * H * H, rng));
  d.b = Rounded<T>(Random(D * 2 * G * H, rng));
  d.h0 = Rounded<T>(Random(D * c.batch * H, rng));
  d.c0 = Rounded<T>(Random(D * c.batch * H, rng));
  d.p = Rounded<T>(Random(D * 3 * H, rng));
  const Shape xs = c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
  const Shape ss = c.layout == 0 ? Shape{D, c.batch, H} : Shape{c.batch, D, H};
  std::vector<HostTensor> in = {TensorOf<T>(xs, d.x), TensorOf<T>({D, G * H, c.input}, d.w),
                                TensorOf<T>({D, G * H, H}, d.r)};
  in.push_back(c.bias ? TensorOf<T>({D, 2 * G * H}, d.b) : HostTensor::Absent());
  in.push_back(c.lens.empty()
                   ? HostTensor::Absent()
                   : HostTensor::Of<int32_t>({c.batch},
                                             std::vector<int32_t>(c.lens.begin(), c.lens.end())));
  in.push_back(c.init_h ? TensorOf<T>(ss, d.h0) : HostTensor::Absent());
  if (c.op == "LSTM") {
    in.push_back(c.init_c ? TensorOf<T>(ss, d.c0) : HostTensor::Absent());
    in.push_back(c.peep ? TensorOf<T>({D, 3 * H}, d.p) : HostTensor::Absent());
  }
  Attributes a;
  a.Set("hidden_size", H);
  a.Set("direction", c.direction);
  if (c.layout) a.Set("layout", c.layout);
  if (c.clip > 0) a.Set("clip", c.clip);
  if (c.lbr) a.Set("linear_before_reset", int64_t{1});
  if (c.input_forget) a.Set("input_forget", int64_t{1});
  const int nact = c.op == "LSTM" ? 3 : c.op == "GRU" ? 2 : 1;
  std::vector<std::string> acts = c.acts;
  if (acts.empty()) {
    acts = c.op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
           : c.op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                           : std::vector<std::string>{"Tanh"};
  } else {
    a.Set("activations", acts);
  }
  if (!c.alpha.empty()) a.Set("activation_alpha", c.alpha);
  if (!c.beta.empty()) a.Set("activation_beta", c.beta);
  if (static_cast<int64_t>(acts.size()) == nact && D == 2) {
    const auto one = acts;
    acts.insert(acts.end(), one.begin(), one.end());
  }
  // Per-activation alpha/beta, consumed in order by the functions that take them.
  std::vector<double> al(acts.size()), be(acts.size());
  size_t ia = 0, ib = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    const std::string& n = acts[i];
    const bool ua = n == "LeakyRelu" || n == "HardSigmoid" || n == "ScaledTanh" ||
                    n == "Affine" || n == "Elu" || n == "ThresholdedRelu";
    const bool ub = n == "HardSigmoid" || n == "ScaledTanh" || n == "Affine";
    // ONNX's defaults are float attributes.
    al[i] = n == "LeakyRelu" ? 0.01f : n == "HardSigmoid" ? 0.2f : 1.0f;
    be[i] = n == "HardSigmoid" ? 0.5f : n == "Affine" ? 0.0f : 1.0f;
    if (ua && ia < c.alpha.size()) al[i] = c.alpha[ia++];
    if (ub && ib < c.beta.size()) be[i] = c.beta[ib++];
  }
  RnnRefOutputs want = RnnReference(c, d, acts, al, be);
  auto out = r.Run(c.op, a, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), c.op == "LSTM" ? 3u : 2u);
  const Shape ys = c.layout == 0 ? Shape{c.seq, D, c.batch, H} : Shape{c.batch, c.seq, D, H};
  EXPECT_EQ((*out)[0].shape, ys);
  EXPECT_EQ((*out)[1].shape, ss);
  const std::string what = c.op + " " + c.direction + " layout " + std::to_string(c.layout);
  ExpectNear(ValuesOf<T>((*out)[0]), want.y, tol, what + " Y");
  ExpectNear(ValuesOf<T>((*out)[1]), want.y_h, tol, what + " Y_h");
  if (c.op == "LSTM") ExpectNear(ValuesOf<T>((*out)[2]), want.y_c, tol, what + " Y_c");
}

TEST(LstmTest, HandCheckedStep) {
  OpRunner r;
  // I = H = 1, all weights 1, x = 1, no recurrence (h0 = c0 = 0, R = 0):
  // i = o = f = sigmoid(1), c~ = tanh(1), C = i * c~, H = o * tanh(C).
  auto out = r.Run("LSTM", Attrs({{"hidden_size", int64_t{1}}}),
                   {HostTensor::Of<float>({1, 1, 1}, {1}), HostTensor::Of<float>({1, 4, 1}, {1, 1, 1, 1}),
                    HostTensor::Of<float>({1, 4, 1}, {0, 0, 0, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double s = 1 / (1 + std::exp(-1.0));
  const double cell = s * std::tanh(1.0);
  EXPECT_NEAR((*out)[0].Values<float>()[0], s * std::tanh(cell), 1e-6);
  EXPECT_NEAR((*out)[1].Values<float>()[0], s * std::tanh(cell), 1e-6);
  EXPECT_NEAR((*out)[2].Values<float>()[0], cell, 1e-6);
}

TEST(GruTest, HandCheckedStep) {
  OpRunner r;
  // I = H = 1, W = [0, 0, 1] (z = r = sigmoid(0) = 0.5), x = 2, h0 = 1, R = 0:
  // h~ = tanh(2), H = 0.5 * tanh(2) + 0.5 * 1.
  auto out = r.Run("GRU", {},
                   {HostTensor::Of<float>({1, 1, 1}, {2}), HostTensor::Of<float>({1, 3, 1}, {0, 0, 1}),
                    HostTensor::Of<float>({1, 3, 1}, {0, 0, 0}), HostTensor::Absent(),
                    HostTensor::Absent(), HostTensor::Of<float>({1, 1, 1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NEAR((*out)[1].Values<float>()[0], 0.5 * std::tanh(2.0) + 0.5, 1e-6);
}

TEST(LstmTest, MatchesReference) {
  std::vector<RnnCase> cases;
  RnnCase c;
  c.op = "LSTM";
  cases.push_back(c);
  c.direction = "reverse";
  cases.push_back(c);
  c.direction = "bidirectional";
  c.peep = true;
  cases.push_back(c);
  c.layout = 1;
  cases.push_back(c);
  c.lens = {3, 1};
  cases.push_back(c);
  c.lens = {0, 2};
  c.layout = 0;
  cases.push_back(c);
  c.lens = {};
  c.bias = c.init_h = c.init_c = false;
  c.clip = 0.5f;
  c.input_forget = true;
  cases.push_back(c);
  RnnCase e;
  e.op = "LSTM";
  e.acts = {"HardSigmoid", "LeakyRelu", "ScaledTanh", "Relu", "Tanh", "Softsign"};
  e.alpha = {0.3f, 0.05f, 0.8f};
  e.beta = {0.4f, 1.5f};
  e.direction = "bidirectional";
  e.seq = 4;
  cases.push_back(e);
  e.acts = {"Affine", "Elu", "Softplus"};
  e.alpha = {0.5f};
  e.beta = {};
  e.direction = "forward";
  cases.push_back(e);
  RnnCase big;
  big.op = "LSTM";
  big.seq = 5;
  big.batch = 3;
  big.input = 17;
  big.hidden = 24;
  big.peep = true;
  big.direction = "bidirectional";
  big.lens = {5, 2, 4};
  cases.push_back(big);
  // More than a few batch entries: the recurrent products run on sgemm too.
  big.batch = 10;
  big.layout = 1;
  big.lens = {5, 2, 4, 0, 1, 5, 5, 3, 3, 2};
  cases.push_back(big);
  for (const RnnCase& k : cases) CheckRnn<float>(k, 1e-5);
  for (const RnnCase& k : cases) CheckRnn<double>(k, 1e-12);
  CheckRnn<Half>(cases[2], 1e-2);
}

TEST(GruTest, MatchesReference) {
  std::vector<RnnCase> cases;
  RnnCase c;
  c.op = "GRU";
  cases.push_back(c);
  c.lbr = true;
  cases.push_back(c);
  c.direction = "reverse";
  c.layout = 1;
  cases.push_back(c);
  c.direction = "bidirectional";
  c.lens = {2, 3};
  cases.push_back(c);
  c.lbr = false;
  cases.push_back(c);
  c.bias = c.init_h = false;
  c.clip = 0.7f;
  c.lens = {};
  cases.push_back(c);
  c.acts = {"Relu", "HardSigmoid"};
  c.alpha = {0.1f};
  cases.push_back(c);
  RnnCase big;
  big.op = "GRU";
  big.seq = 6;
  big.batch = 3;
  big.input = 19;
  big.hidden = 20;
  big.lens = {6, 1, 3};
  cases.push_back(big);
  big.lbr = true;
  big.direction = "bidirectional";
  cases.push_back(big);
  big.batch = 11;
  big.lens = {};
  cases.push_back(big);
  big.lbr = false;
  cases.push_back(big);
  for (const RnnCase& k : cases) CheckRnn<float>(k, 1e-5);
  for (const RnnCase& k : cases) CheckRnn<double>(k, 1e-12);
  CheckRnn<Half>(cases[3], 1e-2);
}

TEST(RnnTest, MatchesReference) {
  std::vector<RnnCase> cases;
  RnnCase c;
  c.op = "RNN";
  cases.push_back(c);
  c.direction = "bidirectional";
  c.layout = 1;
  c.lens = {1, 3};
  cases.push_back(c);
  c.acts = {"Relu", "Sigmoid"};
  c.clip = 0.3f;
  cases.push_back(c);
  for (const RnnCase& k : cases) CheckRnn<float>(k, 1e-5);
  for (const RnnCase& k : cases) CheckRnn<double>(k, 1e-12);
}

TEST(LstmTest, OutputsArePrefixesAndEmptyDims) {
  OpRunner r;
  std::vector<HostTensor> in = {HostTensor::Zeros(DType::kFloat32, {2, 1, 3}),
                                HostTensor::Zeros(DType::kFloat32, {1, 8, 3}),
                                HostTensor::Zeros(DType::kFloat32, {1, 8, 2})};
  auto out = r.Run("LSTM", {}, in, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 1, 1, 2}));
  // seq 0: Y is empty, Y_h holds the initial state.
  out = r.Run("GRU", {},
              {HostTensor::Zeros(DType::kFloat32, {0, 1, 3}), HostTensor::Zeros(DType::kFloat32, {1, 6, 3}),
               HostTensor::Zeros(DType::kFloat32, {1, 6, 2}), HostTensor::Absent(), HostTensor::Absent(),
               HostTensor::Of<float>({1, 1, 2}, {0.5f, -2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{0, 1, 1, 2}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{0.5f, -2}));
  // input size 0: only biases and recurrence.
  out = r.Run("RNN", {},
              {HostTensor::Zeros(DType::kFloat32, {1, 1, 0}), HostTensor::Zeros(DType::kFloat32, {1, 1, 0}),
               HostTensor::Zeros(DType::kFloat32, {1, 1, 1}), HostTensor::Of<float>({1, 2}, {0.25f, 0.25f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NEAR((*out)[1].Values<float>()[0], std::tanh(0.5), 1e-6);
}

TEST(LstmTest, ShapeErrors) {
  OpRunner r;
  auto f = [](Shape s) { return HostTensor::Zeros(DType::kFloat32, std::move(s)); };
  auto code = [&](std::string_view op, const Attributes& a, std::vector<HostTensor> in) {
    return r.Infer(op, a, std::move(in)).status().code();
  };
  // seq 2, batch 3, input 4, hidden 5.
  auto x = f({2, 3, 4}), w = f({1, 20, 4}), rr = f({1, 20, 5});
  auto s = r.Infer("LSTM", {}, {x, w, rr});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)[0].shape, (Shape{2, 1, 3, 5}));
  EXPECT_EQ((*s)[1].shape, (Shape{1, 3, 5}));
  EXPECT_EQ((*s)[2].shape, (Shape{1, 3, 5}));
  s = r.Infer("GRU", Attrs({{"layout", int64_t{1}}, {"direction", std::string("bidirectional")}}),
              {f({3, 2, 4}), f({2, 15, 4}), f({2, 15, 5})});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].shape, (Shape{3, 2, 2, 5}));
  EXPECT_EQ((*s)[1].shape, (Shape{3, 2, 5}));

  s = r.Infer("LSTM", {}, {x, f({1, 20, 3}), rr});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("LSTM"), std::string::npos);
  EXPECT_NE(s.status().message().find("W"), std::string::npos);
  EXPECT_EQ(code("LSTM", {}, {x, f({1, 18, 4}), rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, w, f({1, 20, 4})}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"hidden_size", int64_t{4}}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"direction", std::string("bidirectional")}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"direction", std::string("sideways")}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, w, rr, f({1, 20})}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, w, rr, f({1, 40})}), StatusCode::kOk);
  EXPECT_EQ(code("LSTM", {}, {x, w, rr, HostTensor::Absent(), HostTensor::Zeros(DType::kFloat32, {3})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, w, rr, HostTensor::Absent(), HostTensor::Zeros(DType::kInt32, {2})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, w, rr, HostTensor::Absent(), HostTensor::Absent(), f({3, 1, 5})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"layout", int64_t{1}}}),
                 {f({3, 2, 4}), w, rr, HostTensor::Absent(), HostTensor::Absent(), f({3, 1, 5})}),
            StatusCode::kOk);
  EXPECT_EQ(code("LSTM", {},
                 {x, w, rr, HostTensor::Absent(), HostTensor::Absent(), HostTensor::Absent(),
                  HostTensor::Absent(), f({1, 15})}),
            StatusCode::kOk);
  EXPECT_EQ(code("LSTM", {},
                 {x, w, rr, HostTensor::Absent(), HostTensor::Absent(), HostTensor::Absent(),
                  HostTensor::Absent(), f({1, 20})}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {x, HostTensor::Zeros(DType::kFloat64, {1, 20, 4}), rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {f({2, 3}), w, rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", {}, {HostTensor::Absent(), w, rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"layout", int64_t{2}}}), {x, w, rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"activations", std::vector<std::string>{"Sigmoid", "Tanh"}}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Swish"}}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"activations", std::vector<std::string>{"sigmoid", "tanh", "relu"}}}), {x, w, rr}),
            StatusCode::kOk);
  // A string where ONNX gives a string list is refused, naming the type.
  EXPECT_EQ(code("LSTM", Attrs({{"activations", std::string("Sigmoid,Tanh,Tanh")}}), {x, w, rr}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("LSTM", Attrs({{"clip", -1.0f}}), {x, w, rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("GRU", {}, {x, w, rr}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("RNN", {}, {x, f({1, 5, 4}), f({1, 5, 5}), HostTensor::Absent(),
                             HostTensor::Absent(), HostTensor::Absent(), f({1, 5})}),
            StatusCode::kInvalidArgument);  // RNN takes 6 inputs at most.
  EXPECT_EQ(code("LSTM", {}, {HostTensor::Zeros(DType::kInt32, {2, 3, 4}),
                              HostTensor::Zeros(DType::kInt32, {1, 20, 4}),
                              HostTensor::Zeros(DType::kInt32, {1, 20, 5})}),
            StatusCode::kInvalidArgument);
}

TEST(LstmTest, SequenceLengthsOutOfRangeAreRefused) {
  OpRunner r;
  for (int32_t len : {-1, 3}) {
    auto out = r.Run("LSTM", {},
                     {HostTensor::Zeros(DType::kFloat32, {2, 1, 3}),
                      HostTensor::Zeros(DType::kFloat32, {1, 8, 3}),
                      HostTensor::Zeros(DType::kFloat32, {1, 8, 2}), HostTensor::Absent(),
                      HostTensor::Of<int32_t>({1}, {len})});
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << len;
    EXPECT_NE(out.status().message().find("sequence_lens"), std::string::npos);
  }
}

}  // namespace
}  // namespace remex::kernels
