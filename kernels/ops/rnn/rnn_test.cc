// LSTM, GRU and RNN against naive references written from the ONNX equations,
// shape-function errors and data dependence. (The norms: norm_test.cc.)

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "kernels/kernels.h"
#include "kernels/ops/rnn/rnn_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace rnn_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using rnntest::ExpectNear;
using rnntest::Random;
using rnntest::Rounded;
using rnntest::TensorOf;
using rnntest::ValuesOf;

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

}  // namespace rnn_test
}  // namespace remex::kernels
