// Conv: shape function checks and the oneDNN kernel against a direct convolution.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "kernels/cpu_features.h"
#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/kernels.h"
#include "kernels/op_attrs.h"
#include "kernels/epilogue_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace conv_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

struct ConvCase {
  Shape x;  // [N, C, spatial...]
  int64_t m;
  std::vector<int64_t> kernel;
  int64_t group = 1;
  std::vector<int64_t> strides;    // Empty: 1.
  std::vector<int64_t> dilations;  // Empty: 1.
  std::vector<int64_t> pads;       // Empty: 0.
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// CTest's name of each case (gtest_discover_tests) is what this prints: every field, so
// that it is unique and the same in every build (gtest's default prints raw bytes).
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "x" << ShapeToString(c.x) << " m" << c.m << " kernel" << ShapeToString(c.kernel) << " group" << c.group
      << " strides" << ShapeToString(c.strides) << " dilations" << ShapeToString(c.dilations) << " pads"
      << ShapeToString(c.pads) << " " << c.auto_pad << (c.bias ? "" : " no-bias");
}

// Direct N-d convolution (up to 3 spatial dims) with explicit pads.
std::vector<float> NaiveConv(const ConvCase& c, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& b,
                             const std::vector<int64_t>& pad_begin, const Shape& out_shape) {
  const size_t nsp = c.kernel.size();
  auto at = [](const std::vector<int64_t>& v, size_t i, int64_t def) {
    return v.empty() ? def : v[i];
  };
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          d[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  for (size_t i = 0; i < nsp; ++i) {
    const size_t j = 3 - nsp + i;
    in[j] = c.x[2 + i];
    out[j] = out_shape[2 + i];
    k[j] = c.kernel[i];
    s[j] = at(c.strides, i, 1);
    d[j] = at(c.dilations, i, 1);
    p[j] = pad_begin[i];
  }
  const int64_t n = c.x[0], ch = c.x[1], cg = ch / c.group, mg = c.m / c.group;
  std::vector<float> y(n * c.m * out[0] * out[1] * out[2], 0.f);
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t oc = 0; oc < c.m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = c.bias ? b[oc] : 0.0;
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                    const int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                    const int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                      continue;
                    const int64_t xc = g * cg + ic;
                    const float xv = x[(((bn * ch + xc) * in[0] + i0) * in[1] + i1) * in[2] + i2];
                    const float wv = w[(((oc * cg + ic) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    acc += static_cast<double>(xv) * wv;
                  }
            y[(((bn * c.m + oc) * out[0] + o0) * out[1] + o1) * out[2] + o2] =
                static_cast<float>(acc);
          }
    }
  return y;
}

Attributes ConvAttrsOf(const ConvCase& c) {
  Attributes a;
  a.Set("kernel_shape", c.kernel);
  a.Set("group", c.group);
  if (!c.strides.empty()) a.Set("strides", c.strides);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  if (!c.pads.empty()) a.Set("pads", c.pads);
  a.Set("auto_pad", c.auto_pad);
  return a;
}

// Begin pads the same way ONNX defines them (reference side, written independently).
std::vector<int64_t> BeginPads(const ConvCase& c) {
  const size_t nsp = c.kernel.size();
  std::vector<int64_t> p(nsp, 0);
  for (size_t i = 0; i < nsp; ++i) {
    if (c.auto_pad == "NOTSET") {
      p[i] = c.pads.empty() ? 0 : c.pads[i];
    } else if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      const int64_t in = c.x[2 + i];
      const int64_t s = c.strides.empty() ? 1 : c.strides[i];
      const int64_t d = c.dilations.empty() ? 1 : c.dilations[i];
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + (c.kernel[i] - 1) * d + 1 - in);
      p[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
  }
  return p;
}

class ConvRandomTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvRandomTest, MatchesDirectConvolution) {
  const ConvCase& c = GetParam();
  OpRunner r;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  Shape w_shape = {c.m, c.x[1] / c.group};
  w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
  std::vector<float> x(*NumElements(c.x)), w(*NumElements(w_shape)), b(c.m);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  for (float& v : b) v = dist(rng);
  std::vector<HostTensor> in = {HostTensor::Of(c.x, x), HostTensor::Of(w_shape, w)};
  if (c.bias) in.push_back(HostTensor::Of<float>({c.m}, b));
  const Attributes attrs = ConvAttrsOf(c);
  auto infos = r.Infer("Conv", attrs, in);
  ASSERT_TRUE(infos.ok()) << infos.status().ToString();
  const Shape out_shape = (*infos)[0].shape;
  auto factory = r.registry().FindKernel("Conv", DeviceKind::kCpu);
  auto kernel = (*factory)(attrs);
  ASSERT_TRUE(kernel.ok());
  const std::vector<float> want = NaiveConv(c, x, w, b, BeginPads(c), out_shape);
  // Twice: the second call uses the cached primitive.
  for (int iter = 0; iter < 2; ++iter) {
    auto out = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<float> got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f) << "at " << i << " shape " << ShapeToString(out_shape);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvRandomTest,
    ::testing::Values(
        ConvCase{{1, 3, 8, 8}, 4, {3, 3}, 1, {}, {}, {}},
        ConvCase{{2, 4, 7, 9}, 6, {3, 3}, 2, {2, 2}, {}, {1, 1, 1, 1}},
        ConvCase{{1, 8, 12, 10}, 8, {3, 3}, 8, {1, 1}, {}, {1, 1, 1, 1}},      // Depthwise.
        ConvCase{{1, 16, 6, 24}, 16, {5, 5}, 16, {2, 2}, {}, {2, 2, 2, 2}},    // Depthwise s2.
        ConvCase{{1, 4, 9, 9}, 4, {3, 3}, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}},    // Dilated.
        ConvCase{{1, 3, 10, 11}, 5, {3, 2}, 1, {2, 3}, {1, 2}, {1, 0, 2, 1}},  // Asymmetric.
        ConvCase{{1, 3, 7, 7}, 2, {3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER", false},
        ConvCase{{1, 3, 8, 8}, 2, {4, 4}, 1, {2, 2}, {}, {}, "SAME_LOWER"},
        ConvCase{{1, 3, 8, 9}, 2, {3, 3}, 1, {2, 2}, {}, {}, "VALID"},
        ConvCase{{1, 16, 4, 4}, 24, {1, 1}, 1, {}, {}, {}, "NOTSET", false},  // Pointwise.
        ConvCase{{2, 8, 7, 9}, 4, {1, 1}, 1, {2, 2}, {}, {1, 0, 0, 1}},       // Strided 1x1.
        ConvCase{{2, 4, 11}, 6, {3}, 2, {2}, {2}, {1, 2}},                    // 1-D.
        ConvCase{{1, 2, 5, 6, 4}, 4, {3, 3, 2}, 2, {1, 2, 1}, {}, {1, 1, 0, 1, 1, 1}}  // 3-D.
        ));

TEST(ConvTest, AutoPadShapes) {
  OpRunner r;
  auto infer = [&](std::string auto_pad, Shape x, std::vector<int64_t> k, std::vector<int64_t> s) {
    Shape w = {1, x[1]};
    w.insert(w.end(), k.begin(), k.end());
    return r.Infer("Conv", Attrs({{"auto_pad", auto_pad}, {"strides", s}}),
                   {HostTensor::Zeros(DType::kFloat32, x), HostTensor::Zeros(DType::kFloat32, w)});
  };
  EXPECT_EQ((*infer("SAME_UPPER", {1, 1, 5, 5}, {3, 3}, {2, 2}))[0].shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ((*infer("SAME_LOWER", {1, 1, 6, 5}, {3, 3}, {2, 2}))[0].shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ((*infer("VALID", {1, 1, 5, 6}, {3, 3}, {2, 2}))[0].shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ((*infer("NOTSET", {1, 1, 5, 6}, {3, 3}, {1, 1}))[0].shape, (Shape{1, 1, 3, 4}));
  // The MobileNetV3 stem: 48x192, 3x3 stride 2, pads 1.
  auto stem = r.Infer(
      "Conv",
      Attrs({{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
      {HostTensor::Zeros(DType::kFloat32, {1, 3, 48, 192}),
       HostTensor::Zeros(DType::kFloat32, {16, 3, 3, 3}),
       HostTensor::Zeros(DType::kFloat32, {16})});
  ASSERT_TRUE(stem.ok());
  EXPECT_EQ((*stem)[0].shape, (Shape{1, 16, 24, 96}));
}

TEST(ConvTest, InvalidInputsAreRefused) {
  OpRunner r;
  auto infer = [&](Attributes attrs, Shape x, Shape w, std::optional<Shape> b = std::nullopt,
                   DType dt = DType::kFloat32) {
    std::vector<HostTensor> in = {HostTensor::Zeros(dt, x), HostTensor::Zeros(dt, w)};
    if (b) in.push_back(HostTensor::Zeros(dt, *b));
    return r.Infer("Conv", attrs, in).status();
  };
  // Channel mismatch.
  EXPECT_EQ(infer({}, {1, 3, 5, 5}, {4, 2, 3, 3}).code(), StatusCode::kInvalidArgument);
  // Channels not divisible by group.
  EXPECT_EQ(infer(Attrs({{"group", int64_t{2}}}), {1, 3, 5, 5}, {4, 1, 3, 3}).code(),
            StatusCode::kInvalidArgument);
  // Output channels not divisible by group.
  EXPECT_EQ(infer(Attrs({{"group", int64_t{2}}}), {1, 4, 5, 5}, {3, 2, 3, 3}).code(),
            StatusCode::kInvalidArgument);
  // Rank mismatch.
  EXPECT_EQ(infer({}, {1, 3, 5, 5}, {4, 3, 3}).code(), StatusCode::kInvalidArgument);
  // Bias length.
  EXPECT_EQ(infer({}, {1, 3, 5, 5}, {4, 3, 3, 3}, Shape{3}).code(), StatusCode::kInvalidArgument);
  // kernel_shape differs from W.
  EXPECT_EQ(infer(Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}), {1, 3, 5, 5}, {4, 3, 3, 3})
                .code(),
            StatusCode::kInvalidArgument);
  // Kernel larger than the input.
  EXPECT_EQ(infer({}, {1, 3, 2, 2}, {4, 3, 3, 3}).code(), StatusCode::kInvalidArgument);
  // Wrong pads length, negative pads, zero strides.
  EXPECT_EQ(infer(Attrs({{"pads", std::vector<int64_t>{1, 1}}}), {1, 3, 5, 5}, {4, 3, 3, 3}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(infer(Attrs({{"pads", std::vector<int64_t>{-1, 0, 0, 0}}}), {1, 3, 5, 5}, {4, 3, 3, 3})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      infer(Attrs({{"strides", std::vector<int64_t>{0, 1}}}), {1, 3, 5, 5}, {4, 3, 3, 3}).code(),
      StatusCode::kInvalidArgument);
  // Non-float32.
  EXPECT_EQ(infer({}, {1, 3, 5, 5}, {4, 3, 3, 3}, std::nullopt, DType::kInt32).code(),
            StatusCode::kInvalidArgument);
  // The error names the op.
  Status s = infer({}, {1, 3, 5, 5}, {4, 2, 3, 3});
  EXPECT_EQ(s.message().rfind("Conv", 0), 0u) << s.message();
  // Bad attributes refused at kernel creation.
  auto factory = r.registry().FindKernel("Conv", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attrs({{"group", int64_t{0}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(Attrs({{"auto_pad", std::string("BOGUS")}})).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ConvTest, CacheHandlesShapeChanges) {
  OpRunner r;
  auto factory = r.registry().FindKernel("Conv", DeviceKind::kCpu);
  Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  auto kernel = (*factory)(attrs);
  ASSERT_TRUE(kernel.ok());
  std::vector<float> w(9, 1.0f);
  for (int64_t h : {3, 5, 3}) {
    std::vector<HostTensor> in = {HostTensor::Of<float>({1, 1, h, h}, std::vector<float>(h * h, 1)),
                                  HostTensor::Of<float>({1, 1, 3, 3}, w)};
    auto infos = r.Infer("Conv", attrs, in);
    ASSERT_TRUE(infos.ok());
    auto out = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto v = (*out)[0].Values<float>();
    ASSERT_EQ(v.size(), static_cast<size_t>(h * h));
    EXPECT_EQ(v[0], 4);      // Corner.
    EXPECT_EQ(v[h + 1], 9);  // Interior.
  }
}

// Channels-last Conv (`layout` NHWC) against the NCHW kernel between transposes, on
// random shapes, groups, strides, dilations and pads.
std::vector<float> ToNhwc(const std::vector<float>& x, const Shape& s) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  std::vector<float> y(x.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) y[((a * h + i) * w + j) * c + b] = x[((a * c + b) * h + i) * w + j];
  return y;
}

TEST(ConvNhwcTest, MatchesNchwBetweenTransposes) {
  OpRunner r;
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t group = pick(1, 3);
    const int64_t c = group * pick(1, 4), m = group * pick(1, 4), n = pick(1, 2);
    const int64_t kh = pick(1, 3), kw = pick(1, 3), sh = pick(1, 2), sw = pick(1, 2), dh = pick(1, 2);
    const int64_t h = (kh - 1) * dh + pick(1, 9), w = (kw - 1) + pick(1, 9);
    const std::vector<int64_t> pads = {pick(0, 1), pick(0, 1), pick(0, 1), pick(0, 1)};
    const bool bias = pick(0, 1) == 1;
    const Shape xs = {n, c, h, w}, ws = {m, c / group, kh, kw};
    std::vector<float> x(*NumElements(xs)), wt(*NumElements(ws)), b(m);
    for (float& v : x) v = dist(rng);
    for (float& v : wt) v = dist(rng);
    for (float& v : b) v = dist(rng);
    Attributes a;
    a.Set("group", group);
    a.Set("strides", std::vector<int64_t>{sh, sw});
    a.Set("dilations", std::vector<int64_t>{dh, 1});
    a.Set("pads", pads);
    std::vector<HostTensor> nchw_in = {HostTensor::Of(xs, x), HostTensor::Of(ws, wt)};
    if (bias) nchw_in.push_back(HostTensor::Of<float>({m}, b));
    auto want = r.Run("Conv", a, nchw_in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Shape ys = (*want)[0].shape;
    Attributes a_nhwc = a;
    a_nhwc.Set("layout", std::string("NHWC"));
    std::vector<HostTensor> nhwc_in = nchw_in;
    nhwc_in[0] = HostTensor::Of(Shape{n, h, w, c}, ToNhwc(x, xs));
    // Twice: the second call uses the cached primitive.
    for (int call = 0; call < 2; ++call) {
      auto got = r.Run("Conv", a_nhwc, nhwc_in);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ((*got)[0].shape, (Shape{ys[0], ys[2], ys[3], ys[1]}));
      const std::vector<float> expect = ToNhwc((*want)[0].Values<float>(), ys);
      const std::vector<float> actual = (*got)[0].Values<float>();
      for (size_t i = 0; i < expect.size(); ++i) {
        ASSERT_NEAR(actual[i], expect[i], 1e-4f) << "at " << i << " x " << ShapeToString(xs) << " w "
                                                 << ShapeToString(ws) << " group " << group;
      }
    }
  }
}

TEST(ConvNhwcTest, ShapesAndErrors) {
  OpRunner r;
  Attributes a;
  a.Set("layout", std::string("NHWC"));
  a.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  // X [1, 5, 7, 3] (NHWC, C = 3), W [8, 3, 3, 3] -> Y [1, 5, 7, 8].
  auto infos = r.Infer("Conv", a, {HostTensor::Zeros(DType::kFloat32, {1, 5, 7, 3}),
                                   HostTensor::Zeros(DType::kFloat32, {8, 3, 3, 3})});
  ASSERT_TRUE(infos.ok()) << infos.status().ToString();
  EXPECT_EQ((*infos)[0].shape, (Shape{1, 5, 7, 8}));
  // The channel count is read from the last dim: C = 7 does not match W.
  auto bad = r.Infer("Conv", a, {HostTensor::Zeros(DType::kFloat32, {1, 5, 3, 7}),
                                 HostTensor::Zeros(DType::kFloat32, {8, 3, 3, 3})});
  EXPECT_FALSE(bad.ok());
  Attributes wrong;
  wrong.Set("layout", std::string("CHWN"));
  auto refused = r.Infer("Conv", wrong, {HostTensor::Zeros(DType::kFloat32, {1, 3, 5, 5}),
                                         HostTensor::Zeros(DType::kFloat32, {8, 3, 3, 3})});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unknown layout 'CHWN'"), std::string::npos);
  // An empty input channel count: Y holds the bias, channels-last.
  Attributes e;
  e.Set("layout", std::string("NHWC"));
  auto out = r.Run("Conv", e, {HostTensor::Zeros(DType::kFloat32, {1, 2, 2, 0}),
                               HostTensor::Zeros(DType::kFloat32, {2, 0, 1, 1}),
                               HostTensor::Of<float>({2}, {1.5f, -2.f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 2, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1.5f, -2.f, 1.5f, -2.f, 1.5f, -2.f, 1.5f, -2.f}));
}

// float16 Conv and ConvTranspose compute in float32 and round once on store: they
// equal the float32 kernels run on the same (float16-representable) values, rounded.
TEST(ConvFloat16Test, MatchesFloat32OnTheSameValuesRoundedOnce) {
  OpRunner r;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto halves = [&](size_t n) {
    std::vector<float> f(n);
    for (float& v : f) v = HalfToFloat(FloatToHalf(dist(rng)));  // exactly representable
    return f;
  };
  auto to_half = [](const std::vector<float>& f) {
    std::vector<Half> h;
    for (float v : f) h.push_back(FloatToHalf(v));
    return h;
  };
  struct Case {
    const char* op;
    Shape x, w;
    Attributes attrs;
  };
  const Case cases[] = {
      {"Conv", {1, 3, 9, 7}, {4, 3, 3, 3}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {"Conv", {2, 4, 6, 6}, {4, 1, 3, 3}, Attrs({{"group", int64_t{4}}, {"strides", std::vector<int64_t>{2, 2}}})},
      {"ConvTranspose", {1, 4, 5, 5}, {4, 3, 2, 2}, Attrs({{"strides", std::vector<int64_t>{2, 2}}})},
      {"ConvTranspose", {1, 2, 4, 3}, {2, 3, 3, 3}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
  };
  for (const Case& c : cases) {
    const int64_t m = c.op == std::string("Conv") ? c.w[0] : c.w[1];
    std::vector<float> x = halves(*NumElements(c.x)), w = halves(*NumElements(c.w)), b = halves(m);
    auto want = r.Run(c.op, c.attrs, {HostTensor::Of(c.x, x), HostTensor::Of(c.w, w), HostTensor::Of<float>({m}, b)});
    ASSERT_TRUE(want.ok()) << c.op << ": " << want.status().ToString();
    auto got = r.Run(c.op, c.attrs,
                     {HostTensor::Of(c.x, to_half(x)), HostTensor::Of(c.w, to_half(w)), HostTensor::Of({m}, to_half(b))});
    ASSERT_TRUE(got.ok()) << c.op << ": " << got.status().ToString();
    ASSERT_EQ((*got)[0].dtype, DType::kFloat16);
    ASSERT_EQ((*got)[0].shape, (*want)[0].shape);
    std::vector<float> f32 = (*want)[0].Values<float>();
    std::vector<Half> f16 = (*got)[0].Values<Half>();
    for (size_t i = 0; i < f32.size(); ++i) {
      ASSERT_EQ(f16[i].bits, FloatToHalf(f32[i]).bits) << c.op << " at " << i;
    }
  }
  // X and W must agree.
  auto mixed = r.Infer("Conv", {}, {HostTensor::Zeros(DType::kFloat16, {1, 3, 5, 5}),
                                    HostTensor::Zeros(DType::kFloat32, {4, 3, 3, 3})});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("X and W alike"), std::string::npos) << mixed.status().ToString();
}

// FusedConv = activation(Conv(X, W, B) + Z): against the registry's Conv, Add and
// activation kernels run one after the other.
using testing::AllEpilogueActivations;
using testing::EpilogueActivation;
using testing::RunUnfusedEpilogue;
using testing::WithEpilogue;

// The unfused reference: Conv, then Add of Z when given, then the activation op.
StatusOr<HostTensor> UnfusedConv(OpRunner& r, const Attributes& conv_attrs, std::vector<HostTensor> conv_in,
                                 const std::optional<HostTensor>& z, const EpilogueActivation& act) {
  REMEX_ASSIGN_OR_RETURN(std::vector<HostTensor> y, r.Run("Conv", conv_attrs, conv_in));
  return RunUnfusedEpilogue(r, y[0], z ? &*z : nullptr, act);
}

struct FusedCase {
  Shape x, w;
  Attributes attrs;
};

std::vector<FusedCase> FusedCases() {
  return {
      {{1, 3, 9, 7}, {4, 3, 3, 3}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {{2, 6, 8, 8}, {6, 2, 3, 3}, Attrs({{"group", int64_t{3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {{1, 8, 9, 6}, {8, 1, 3, 3},
       Attrs({{"group", int64_t{8}}, {"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {{1, 16, 5, 7}, {24, 16, 1, 1}, {}},  // Pointwise.
  };
}

TEST(FusedConvTest, MatchesConvAddActivation) {
  OpRunner r;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](const Shape& s) {
    std::vector<float> v(*NumElements(s));
    for (float& f : v) f = dist(rng);
    return v;
  };
  int checked = 0;
  for (const FusedCase& c : FusedCases()) {
    const int64_t m = c.w[0];
    const std::vector<float> x = random(c.x), w = random(c.w), b = random({m});
    auto infos = r.Infer("Conv", c.attrs, {HostTensor::Of(c.x, x), HostTensor::Of(c.w, w)});
    ASSERT_TRUE(infos.ok()) << infos.status().ToString();
    const Shape ys = (*infos)[0].shape;
    const std::vector<float> z = random(ys);
    for (const EpilogueActivation& act : AllEpilogueActivations()) {
      for (int variant = 0; variant < 8; ++variant) {
        const bool bias = variant & 1, residual = variant & 2, nhwc = variant & 4;
        std::vector<HostTensor> conv_in = {HostTensor::Of(c.x, x), HostTensor::Of(c.w, w)};
        if (bias) conv_in.push_back(HostTensor::Of<float>({m}, b));
        std::optional<HostTensor> zt;
        if (residual) zt = HostTensor::Of(ys, z);
        auto want = UnfusedConv(r, c.attrs, conv_in, zt, act);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        std::vector<float> expect = want->Values<float>();
        Attributes fa = WithEpilogue(c.attrs, act);
        std::vector<HostTensor> fused_in = conv_in;
        Shape out_shape = ys;
        if (nhwc) {
          fa.Set("layout", std::string("NHWC"));
          fused_in[0] = HostTensor::Of(Shape{c.x[0], c.x[2], c.x[3], c.x[1]}, ToNhwc(x, c.x));
          out_shape = {ys[0], ys[2], ys[3], ys[1]};
          expect = ToNhwc(expect, ys);
        }
        if (residual) {
          if (!bias) fused_in.push_back(HostTensor::Absent());
          fused_in.push_back(HostTensor::Of(out_shape, nhwc ? ToNhwc(z, ys) : z));
        }
        // Twice: the second call uses the cached primitive.
        for (int call = 0; call < 2; ++call) {
          auto got = r.Run("FusedConv", fa, fused_in);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ASSERT_EQ((*got)[0].shape, out_shape);
          const std::vector<float> actual = (*got)[0].Values<float>();
          for (size_t i = 0; i < expect.size(); ++i) {
            ASSERT_NEAR(actual[i], expect[i], 1e-4f)
                << "activation '" << act.name << "' at " << i << " x " << ShapeToString(c.x) << " w "
                << ShapeToString(c.w) << " bias " << bias << " Z " << residual << " NHWC " << nhwc;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * 10 * 8);
}

// float16 computes in float32 and rounds once: within float16 precision of the
// float32 reference on the same values.
TEST(FusedConvTest, Float16MatchesFloat32WithinTolerance) {
  OpRunner r;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto halves = [&](const Shape& s) {
    std::vector<float> f(*NumElements(s));
    for (float& v : f) v = HalfToFloat(FloatToHalf(dist(rng)));
    return f;
  };
  auto to_half = [](const std::vector<float>& f) {
    std::vector<Half> h;
    for (float v : f) h.push_back(FloatToHalf(v));
    return h;
  };
  for (const FusedCase& c : FusedCases()) {
    const int64_t m = c.w[0];
    const std::vector<float> x = halves(c.x), w = halves(c.w), b = halves({m});
    auto infos = r.Infer("Conv", c.attrs, {HostTensor::Of(c.x, x), HostTensor::Of(c.w, w)});
    ASSERT_TRUE(infos.ok());
    const Shape ys = (*infos)[0].shape;
    const std::vector<float> z = halves(ys);
    for (const EpilogueActivation& act : AllEpilogueActivations()) {
      const Attributes fa = WithEpilogue(c.attrs, act);
      auto want = r.Run("FusedConv", fa,
                        {HostTensor::Of(c.x, x), HostTensor::Of(c.w, w), HostTensor::Of<float>({m}, b), HostTensor::Of(ys, z)});
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto got = r.Run("FusedConv", fa,
                       {HostTensor::Of(c.x, to_half(x)), HostTensor::Of(c.w, to_half(w)), HostTensor::Of({m}, to_half(b)),
                        HostTensor::Of(ys, to_half(z))});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ((*got)[0].dtype, DType::kFloat16);
      testing::ExpectAllClose(testing::FloatValues((*got)[0]), testing::FloatValues((*want)[0]), 1e-3, 1e-3,
                              "float16 " + act.name);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Y written over Z's buffer (OpTraits::output_overwrites_input, as the code generator
// places it) gives the bits of Y in a buffer of its own, float32 and float16 (whose
// float32 run computes in Z's widened copy), NCHW and NHWC.
TEST(FusedConvTest, YOverZGivesTheSameBitsAsYApart) {
  OpRunner r;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    for (bool nhwc : {false, true}) {
      const Shape xs = nhwc ? Shape{1, 6, 5, 8} : Shape{1, 8, 6, 5}, ws = {12, 8, 3, 3};
      const Shape ys = nhwc ? Shape{1, 6, 5, 12} : Shape{1, 12, 6, 5};
      auto values = [&](const Shape& shape) {
        std::vector<float> f(*NumElements(shape));
        for (float& v : f) v = dist(rng);
        return HostTensor::Of(shape, f);
      };
      auto as = [&](HostTensor t) {
        if (dtype == DType::kFloat32) return t;
        std::vector<Half> h;
        for (float v : t.Values<float>()) h.push_back(FloatToHalf(v));
        return HostTensor::Of(t.shape, h);
      };
      HostTensor x = as(values(xs)), w = as(values(ws)), b = as(values({12})), z = as(values(ys));
      Attributes a = Attrs({{"activation", std::string("Relu")}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
      if (nhwc) a.Set("layout", std::string("NHWC"));
      auto kernel = (*r.registry().FindKernel("FusedConv", DeviceKind::kCpu))(a);
      ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
      auto ref = [](HostTensor& t) { return t.Ref(); };
      HostTensor apart = HostTensor::Zeros(dtype, ys), over = z;
      const TensorRef in_apart[] = {ref(x), ref(w), ref(b), ref(z)};
      const TensorRef out_apart[] = {ref(apart)};
      ASSERT_TRUE((*kernel)->Compute(in_apart, out_apart).ok());
      const TensorRef in_over[] = {ref(x), ref(w), ref(b), ref(over)};
      const TensorRef out_over[] = {ref(over)};
      ASSERT_TRUE((*kernel)->Compute(in_over, out_over).ok());
      EXPECT_EQ(over.bytes, apart.bytes) << DTypeName(dtype) << (nhwc ? " NHWC" : " NCHW");
    }
  }
}

TEST(FusedConvTest, EmptyInputChannelsHoldTheEpilogueOfTheBias) {
  OpRunner r;
  Attributes a = Attrs({{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{-1.f, 1.f}}});
  auto out = r.Run("FusedConv", a,
                   {HostTensor::Zeros(DType::kFloat32, {1, 0, 1, 2}), HostTensor::Zeros(DType::kFloat32, {2, 0, 1, 1}),
                    HostTensor::Of<float>({2}, {1.5f, -2.f}), HostTensor::Of<float>({1, 2, 1, 2}, {0.f, -1.f, 1.f, 2.5f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1.f, 0.5f, -1.f, 0.5f}));
}

TEST(FusedConvTest, InvalidInputsAndAttributesAreRefused) {
  OpRunner r;
  const HostTensor x = HostTensor::Zeros(DType::kFloat32, {1, 3, 5, 5});
  const HostTensor w = HostTensor::Zeros(DType::kFloat32, {4, 3, 3, 3});
  const HostTensor b = HostTensor::Zeros(DType::kFloat32, {4});
  auto infer = [&](const Attributes& a, std::vector<HostTensor> extra) {
    std::vector<HostTensor> in = {x, w};
    in.insert(in.end(), extra.begin(), extra.end());
    return r.Infer("FusedConv", a, in).status();
  };
  // Y is [1, 4, 3, 3].
  EXPECT_TRUE(infer({}, {b, HostTensor::Zeros(DType::kFloat32, {1, 4, 3, 3})}).ok());
  Status s = infer({}, {b, HostTensor::Zeros(DType::kFloat32, {1, 4, 1, 3})});  // Broadcastable, refused.
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("FusedConv", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("Y's shape"), std::string::npos) << s.message();
  s = infer({}, {b, HostTensor::Zeros(DType::kFloat16, {1, 4, 3, 3})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype"), std::string::npos) << s.message();
  // Z must be in the node's layout: the NCHW shape is wrong with layout NHWC.
  Attributes nhwc = Attrs({{"layout", std::string("NHWC")}});
  EXPECT_EQ(r.Infer("FusedConv", nhwc,
                    {HostTensor::Zeros(DType::kFloat32, {1, 5, 5, 3}), w, b, HostTensor::Zeros(DType::kFloat32, {1, 4, 3, 3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // Conv's own checks name FusedConv.
  s = r.Infer("FusedConv", {}, {x, HostTensor::Zeros(DType::kFloat32, {4, 2, 3, 3})}).status();
  EXPECT_EQ(s.message().rfind("FusedConv", 0), 0u) << s.message();
  // Unknown activation, wrong parameter counts: in the shape function and at kernel creation.
  auto factory = r.registry().FindKernel("FusedConv", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  const Attributes bad[] = {
      Attrs({{"activation", std::string("Mish")}}),
      Attrs({{"activation", std::string("LeakyRelu")}}),
      Attrs({{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{0.f}}}),
      Attrs({{"activation", std::string("Relu")}, {"activation_params", std::vector<float>{0.f}}}),
      Attrs({{"activation_params", std::vector<float>{1.f}}}),
  };
  for (const Attributes& a : bad) {
    s = infer(a, {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("FusedConv", 0), 0u) << s.message();
    EXPECT_EQ((*factory)(a).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_NE(infer(bad[0], {}).message().find("unknown activation 'Mish'"), std::string::npos);
  EXPECT_NE(infer(bad[2], {}).message().find("takes 2 activation_params, got 1"), std::string::npos);
}

TEST(FusedConvTest, ParseConvEpilogue) {
  auto e = internal::ParseConvEpilogue(
      "FusedConv", Attrs({{"activation", std::string("HardSigmoid")}, {"activation_params", std::vector<float>{0.2f, 0.5f}}}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->activation, ConvActivation::kHardSigmoid);
  EXPECT_EQ(e->alpha, 0.2f);
  EXPECT_EQ(e->beta, 0.5f);
  auto none = internal::ParseConvEpilogue("FusedConv", {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->activation, ConvActivation::kNone);
}

// ApplyConvActivation (kernels/conv_epilogue.h) is what the CUDA epilogue kernel
// computes per element; here, compiled for the host, against each activation's own
// ONNX op on the CPU, at the edges: signed zeros, the kinks, infinities and NaN.
TEST(FusedConvTest, ApplyConvActivationIsEachOnnxActivation) {
  OpRunner r;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -100.0f, -6.0f, -3.5f, -3.0f, -1.0f, -0.5f, -0.0f, 0.0f, 0.25f,
                                0.7f,  1.0f,    2.9f,  3.0f,  6.0f,  100.0f, inf, std::nanf("")};
  int checked = 0;
  for (const EpilogueActivation& act : AllEpilogueActivations()) {
    auto parsed = internal::ParseConvEpilogue("FusedConv", WithEpilogue({}, act));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto want = RunUnfusedEpilogue(r, HostTensor::Of<float>({static_cast<int64_t>(x.size())}, x), nullptr, act);
    ASSERT_TRUE(want.ok()) << act.name << ": " << want.status().ToString();
    const float* w = reinterpret_cast<const float*>(want->bytes.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const float got = ApplyConvActivation(parsed->activation, x[i], parsed->alpha, parsed->beta);
      if (std::isnan(w[i])) {
        EXPECT_TRUE(std::isnan(got)) << act.name << "(" << x[i] << ") = " << got << ", want NaN";
      } else if (std::isinf(w[i])) {
        EXPECT_EQ(got, w[i]) << act.name << "(" << x[i] << ")";
      } else {
        EXPECT_NEAR(got, w[i], 1e-6f * std::max(1.0f, std::fabs(w[i]))) << act.name << "(" << x[i] << ")";
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 10 * 18);
}

}  // namespace conv_test
}  // namespace remex::kernels

namespace remex::kernels {
namespace conv_test {

// Y of a 3x3 Conv (pads 1) of X [1, 16, 8, 8] by W [16, 16, 3, 3] through `kernel`,
// W passed as constant or not.
std::vector<float> ConvOnce(OpKernel& kernel, std::vector<float>& x, std::vector<float>& w, bool constant) {
  std::vector<float> y(16 * 8 * 8);
  const TensorRef in[] = {{x.data(), DType::kFloat32, {1, 16, 8, 8}},
                          {w.data(), DType::kFloat32, {16, 16, 3, 3}, constant}};
  const TensorRef out[] = {{y.data(), DType::kFloat32, {1, 16, 8, 8}}};
  EXPECT_TRUE(kernel.Compute(in, out).ok());
  return y;
}

// The kept reordered weights (TensorRef::constant) never stand in for other weights:
// weights not marked constant are reordered on every call, even in the same buffer,
// and constant weights at another address are reordered anew.
TEST(ConvWeights, KeptOnlyForTheSameConstant) {
  testing::OpRunner runner;
  const KernelFactory* factory = runner.registry().FindKernel("Conv", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(16 * 8 * 8), w1(16 * 16 * 9), w2(w1.size());
  for (float& v : x) v = u(rng);
  for (float& v : w1) v = u(rng);
  for (float& v : w2) v = u(rng);
  auto fresh = [&](std::vector<float>& w) {
    auto k = (*factory)(attrs);
    EXPECT_TRUE(k.ok());
    return ConvOnce(**k, x, w, false);
  };
  std::vector<float> w2_copy = w2;
  const std::vector<float> want1 = fresh(w1), want2 = fresh(w2_copy);
  ASSERT_NE(want1, want2);

  auto kernel = (*factory)(attrs);
  ASSERT_TRUE(kernel.ok());
  // Not constant: the same buffer with new contents gives the new result.
  std::vector<float> w = w1;
  EXPECT_EQ(ConvOnce(**kernel, x, w, false), want1);
  w = w2;
  EXPECT_EQ(ConvOnce(**kernel, x, w, false), want2);
  // Constant: kept while the same constant comes, redone for another one.
  EXPECT_EQ(ConvOnce(**kernel, x, w1, true), want1);
  EXPECT_EQ(ConvOnce(**kernel, x, w1, true), want1);
  EXPECT_EQ(ConvOnce(**kernel, x, w2, true), want2);
}


// Winograd (onednn_algo, conv.cc): a 3x3 stride-1 convolution gives the direct sums
// within float32 rounding whichever algorithm runs, NCHW and NHWC, with FusedConv's
// residual and activation, through new constant weights; and the algorithm does change
// with the attribute (the sums are rounded differently) where oneDNN has Winograd.
TEST(ConvWinogradTest, EveryAlgorithmGivesTheDirectSums) {
  OpRunner r;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Case {
    int64_t c, m, h, w;
    bool nhwc;
    std::string activation;  // FusedConv with Z and this activation; empty: Conv.
  };
  // By default Winograd from 64 channels and 2^26 multiply-adds (the first case), else
  // direct. Swish is no post-op of oneDNN's Winograd kernels: it runs after them.
  const Case cases[] = {{64, 64, 44, 44, true, "Relu"},
                        {64, 64, 9, 11, false, ""},
                        {64, 64, 8, 8, true, "Swish"},
                        {32, 32, 8, 8, true, ""}};
  for (const Case& k : cases) {
    const Shape xs = {1, k.c, k.h, k.w}, ws = {k.m, k.c, 3, 3}, ys = {1, k.m, k.h, k.w};
    std::vector<float> x(*NumElements(xs)), w1(*NumElements(ws)), w2(w1.size()), b(k.m), z(*NumElements(ys));
    for (auto* v : {&x, &w1, &w2, &b, &z}) {
      for (float& f : *v) f = u(rng);
    }
    auto reference = [&](const std::vector<float>& w) {
      ConvCase c{xs, k.m, {3, 3}, 1, {}, {}, {1, 1, 1, 1}};
      std::vector<float> want = NaiveConv(c, x, w, b, {1, 1}, ys);
      for (size_t i = 0; i < want.size() && !k.activation.empty(); ++i) {
        const float v = want[i] + z[i];
        want[i] = k.activation == "Relu" ? std::max(0.f, v) : v / (1.f + std::exp(-v));
      }
      return k.nhwc ? ToNhwc(want, ys) : want;
    };
    const std::vector<float> want1 = reference(w1), want2 = reference(w2);
    std::vector<std::vector<float>> by_algo;
    for (int64_t algo : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
      Attributes a;
      a.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
      if (algo != -1) a.Set("onednn_algo", algo);
      if (k.nhwc) a.Set("layout", std::string("NHWC"));
      if (!k.activation.empty()) a.Set("activation", k.activation);
      if (k.activation == "Swish") a.Set("activation_params", std::vector<float>{1.f});
      const char* op = k.activation.empty() ? "Conv" : "FusedConv";
      auto factory = r.registry().FindKernel(op, DeviceKind::kCpu);
      ASSERT_NE(factory, nullptr);
      auto kernel = (*factory)(a);
      ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
      const Shape x_shape = k.nhwc ? Shape{1, k.h, k.w, k.c} : xs;
      const Shape y_shape = k.nhwc ? Shape{1, k.h, k.w, k.m} : ys;
      std::vector<float> xin = k.nhwc ? ToNhwc(x, xs) : x, zin = k.nhwc ? ToNhwc(z, ys) : z;
      // Two constant weights in turn: the second is reordered anew, not taken for the first.
      for (std::vector<float>* w : {&w1, &w2}) {
        const std::vector<float>& want = w == &w1 ? want1 : want2;
        std::vector<float> y(want.size());
        std::vector<TensorRef> in = {{xin.data(), DType::kFloat32, x_shape},
                                     {w->data(), DType::kFloat32, ws, true},
                                     {b.data(), DType::kFloat32, {k.m}, true}};
        if (!k.activation.empty()) in.push_back({zin.data(), DType::kFloat32, y_shape});
        const TensorRef out[] = {{y.data(), DType::kFloat32, y_shape}};
        ASSERT_TRUE((*kernel)->Compute(in, out).ok());
        float scale = 0;
        for (float v : want) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], want[i], 1e-5f * scale + 1e-6f) << op << " algo " << algo << " channels " << k.c << " at " << i;
        }
        if (w == &w1) by_algo.push_back(y);
      }
    }
    // by_algo: default, direct, Winograd.
    if (!CpuHasWinogradConvolutions()) continue;
    EXPECT_NE(by_algo[1], by_algo[2]) << "channels " << k.c << ": onednn_algo 1 ran the direct convolution";
    const bool winograd_by_default = k.c >= 64 && k.m >= 64 && k.c * k.m * 9 * k.h * k.w >= (int64_t{1} << 26);
    EXPECT_EQ(by_algo[0], winograd_by_default ? by_algo[2] : by_algo[1]) << "channels " << k.c << ": the default algorithm";
  }
}

TEST(ConvWinogradTest, AlgorithmOutOfRangeIsRefused) {
  OpRunner r;
  const HostTensor x = HostTensor::Zeros(DType::kFloat32, {1, 3, 5, 5});
  const HostTensor w = HostTensor::Zeros(DType::kFloat32, {4, 3, 3, 3});
  for (const char* op : {"Conv", "FusedConv"}) {
    for (int64_t algo : {int64_t{-2}, kOnednnConvAlgoCount}) {
      const Attributes a = Attrs({{"onednn_algo", algo}});
      Status s = r.Infer(op, a, {x, w}).status();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << op;
      EXPECT_NE(s.message().find("onednn_algo must be in [-1, 1]"), std::string::npos) << s.message();
      EXPECT_EQ((*r.registry().FindKernel(op, DeviceKind::kCpu))(a).status().code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace conv_test
}  // namespace remex::kernels
