// Resize (opsets 10, 11-12, 13): hand-checked cases, naive reference interpolation,
// shape function errors and data-dependence declarations.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernels.h"
#include "kernels/ops/nn/nn_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace resize_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using nntest::ExpectErrorMentions;
using nntest::ExpectNear;
using nntest::Iota;
using nntest::EmptyFloats;
using nntest::RandomFloats;
using nntest::Scales;
using nntest::Sizes;

// ---------------------------------------------------------------------------
// Resize.


TEST(ResizeTest, DeclaresRoiScalesSizesAsData) {
  OpRunner r;
  const OpDef* def = r.registry().FindOp("Resize");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->DepOf(0), ShapeDep::kShape);
  EXPECT_EQ(def->DepOf(1), ShapeDep::kData);
  EXPECT_EQ(def->DepOf(2), ShapeDep::kData);
  EXPECT_EQ(def->DepOf(3), ShapeDep::kData);
  EXPECT_NE(r.registry().FindKernel("Resize", DeviceKind::kCpu), nullptr);
}

// PP-OCR's neck: Resize-11 nearest, asymmetric, floor, scale 2 on H and W.
template <typename T>
void CheckNearestDouble(OpRunner& r) {
  const Shape xs = {2, 3, 5, 7};
  const int64_t n = *NumElements(xs);
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(i % 100);
  const Attributes a = Attrs({{"mode", std::string("nearest")},
                              {"coordinate_transformation_mode", std::string("asymmetric")},
                              {"nearest_mode", std::string("floor")}});
  auto out = r.Run("Resize-11", a, {HostTensor::Of<T>(xs, x), EmptyFloats(), Scales({1, 1, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape, (Shape{2, 3, 10, 14}));
  std::vector<T> got = (*out)[0].template Values<T>();
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t h = 0; h < 10; ++h)
      for (int64_t w = 0; w < 14; ++w)
        ASSERT_EQ(got[(p * 10 + h) * 14 + w], x[(p * 5 + h / 2) * 7 + w / 2]) << p << h << w;
}

TEST(ResizeTest, NearestDoubleFastPath) {
  OpRunner r;
  CheckNearestDouble<float>(r);
  CheckNearestDouble<int8_t>(r);
  CheckNearestDouble<int64_t>(r);
  CheckNearestDouble<uint16_t>(r);
}

TEST(ResizeTest, NearestBoolAndHalf) {
  OpRunner r;
  const Attributes a = Attrs({{"mode", std::string("nearest")}});
  HostTensor b = HostTensor::Zeros(DType::kBool, {1, 2});
  b.bytes = {1, 0};
  auto out = r.Run("Resize", a, {b, HostTensor::Absent(), HostTensor::Absent(), Sizes({1, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // half_pixel, round_prefer_floor: x = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25.
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{1, 1, 0, 0}));
  out = r.Run("Resize", a,
              {HostTensor::Of<Half>({2}, {FloatToHalf(1.5f), FloatToHalf(-2.f)}),
               HostTensor::Absent(), Scales({2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<Half> h = (*out)[0].Values<Half>();
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(HalfToFloat(h[1]), 1.5f);
  EXPECT_EQ(HalfToFloat(h[2]), -2.f);
}

TEST(ResizeTest, NearestModes) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({4}, {1, 2, 3, 4});
  // asymmetric: x = o / 2 = 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5.
  struct Case {
    const char* mode;
    std::vector<float> want;
  } cases[] = {
      {"round_prefer_floor", {1, 1, 2, 2, 3, 3, 4, 4}},
      {"round_prefer_ceil", {1, 2, 2, 3, 3, 4, 4, 4}},
      {"floor", {1, 1, 2, 2, 3, 3, 4, 4}},
      {"ceil", {1, 2, 2, 3, 3, 4, 4, 4}},
  };
  for (const Case& c : cases) {
    const Attributes a = Attrs({{"coordinate_transformation_mode", std::string("asymmetric")},
                                {"nearest_mode", std::string(c.mode)}});
    auto out = r.Run("Resize", a, {x, HostTensor::Absent(), HostTensor::Absent(), Sizes({8})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].Values<float>(), c.want) << c.mode;
  }
  // ONNX's resize_downsample_scales_nearest: half_pixel, round_prefer_floor.
  auto out = r.Run(
      "Resize", {},
      {HostTensor::Of<float>({1, 1, 2, 4}, Iota(8)), EmptyFloats(), Scales({1, 1, 0.6f, 0.6f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3}));
}

TEST(ResizeTest, Resize10UsesAsymmetricFloorUpCeilDown) {
  OpRunner r;
  const Attributes a;
  const HostTensor x = HostTensor::Of<float>({1, 1, 1, 4}, {1, 2, 3, 4});
  // Up by 1.5: x = 0, 0.667, 1.333, 2, 2.667, 3.333 -> floor.
  auto out = r.Run("Resize-10", a, {x, Scales({1, 1, 1, 1.5f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1, 2, 3, 3, 4}));
  // Down by 0.75: x = 0, 1.333, 2.667 -> ceil.
  out = r.Run("Resize-10", a, {x, Scales({1, 1, 1, 0.75f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3, 4}));
  // Linear, asymmetric: x = o / 2.
  const Attributes lin = Attrs({{"mode", std::string("linear")}});
  out = r.Run("Resize-10", lin, {x, Scales({1, 1, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1.5, 2, 2.5, 3, 3.5, 4, 4}));
  // Resize-10 has two inputs and no cubic.
  EXPECT_FALSE(r.Infer("Resize-10", a, {x, EmptyFloats(), Scales({1, 1, 1, 2})}).ok());
  ExpectErrorMentions(
      r.Infer("Resize-10", Attrs({{"mode", std::string("cubic")}}), {x, Scales({1, 1, 1, 2})})
          .status(),
      "Resize");
}

TEST(ResizeTest, LinearHandChecked) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = r.Run("Resize", Attrs({{"mode", std::string("linear")}}),
                   {x, EmptyFloats(), Scales({1, 1, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].Values<float>(),
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
             1e-6f, "half_pixel");
  out = r.Run("Resize",
              Attrs({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("align_corners")}}),
              {x, EmptyFloats(), Scales({1, 1, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float t = 1.f / 3, u = 2.f / 3;
  ExpectNear(
      (*out)[0].Values<float>(),
      {1, 1 + t, 1 + u, 2, 1 + 2 * t, 2, 2 + t, 2 + u, 2 + t, 2 + u, 3, 3 + t, 3, 3 + t, 3 + u, 4},
      1e-5f, "align_corners");
  // Integer results round to nearest: 127.5 -> 128 (ties to even).
  out = r.Run("Resize",
              Attrs({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("align_corners")}}),
              {HostTensor::Of<uint8_t>({2}, {0, 255}), HostTensor::Absent(), HostTensor::Absent(),
               Sizes({3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 128, 255}));
}

// Direct (non-separable) N-D linear interpolation with half_pixel coordinates.
std::vector<double> NaiveLinear(const Shape& in, const Shape& out, const std::vector<double>& x) {
  const size_t rank = in.size();
  std::vector<double> y(*NumElements(out));
  std::vector<int64_t> o(rank, 0);
  for (size_t e = 0; e < y.size(); ++e) {
    // Per axis the two taps and weights.
    std::vector<int64_t> i0(rank), i1(rank);
    std::vector<double> w1(rank);
    for (size_t d = 0; d < rank; ++d) {
      const double scale = static_cast<double>(out[d]) / in[d];
      double c = (o[d] + 0.5) / scale - 0.5;
      c = std::min(std::max(c, 0.0), static_cast<double>(in[d] - 1));
      i0[d] = static_cast<int64_t>(std::floor(c));
      i1[d] = std::min(i0[d] + 1, in[d] - 1);
      w1[d] = c - i0[d];
    }
    double sum = 0;
    for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
      double w = 1;
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        const bool hi = (mask >> d) & 1;
        w *= hi ? w1[d] : 1 - w1[d];
        off = off * in[d] + (hi ? i1[d] : i0[d]);
      }
      sum += w * x[off];
    }
    y[e] = sum;
    for (size_t d = rank; d-- > 0;) {
      if (++o[d] < out[d]) break;
      o[d] = 0;
    }
  }
  return y;
}

TEST(ResizeTest, LinearMatchesDirectInterpolation) {
  OpRunner r;
  struct Case {
    Shape in, out;
  } cases[] = {
      {{1, 2, 5, 7}, {1, 2, 9, 4}},         // Bilinear over the last two axes (one pass for both)
      {{2, 3, 6, 8}, {2, 3, 12, 16}},       // ... a 2x upsampling, its edge rows one tap
      {{1, 2, 9, 9}, {1, 2, 4, 5}},         // ... downsampling
      {{2, 1, 3, 4, 5}, {2, 1, 7, 2, 11}},  // Trilinear.
      {{3, 6}, {5, 6}},                     // Only the outer axis.
      {{2, 3, 4}, {4, 5, 4}},               // Batch axis scaled too.
  };
  for (const Case& c : cases) {
    const std::vector<float> xf = RandomFloats(*NumElements(c.in), 7);
    std::vector<double> xd(xf.begin(), xf.end());
    const std::vector<double> want = NaiveLinear(c.in, c.out, xd);
    const Attributes a = Attrs({{"mode", std::string("linear")}});
    auto out = r.Run("Resize", a,
                     {HostTensor::Of<float>(c.in, xf), HostTensor::Absent(), HostTensor::Absent(),
                      Sizes(c.out)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ((*out)[0].shape, c.out);
    std::vector<float> got = (*out)[0].Values<float>();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
    out = r.Run("Resize", a,
                {HostTensor::Of<double>(c.in, xd), HostTensor::Absent(), HostTensor::Absent(),
                 Sizes(c.out)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<double> gotd = (*out)[0].Values<double>();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(gotd[i], want[i], 1e-12) << i;
    std::vector<Half> xh(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) xh[i] = FloatToHalf(xf[i]);
    out = r.Run(
        "Resize", a,
        {HostTensor::Of<Half>(c.in, xh), HostTensor::Absent(), HostTensor::Absent(), Sizes(c.out)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<Half> goth = (*out)[0].Values<Half>();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(HalfToFloat(goth[i]), want[i], 3e-3) << i;
  }
}

// Direct 2-D bicubic over the last two axes of [P, H, W] with half_pixel coordinates.
std::vector<float> NaiveCubic(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                              const std::vector<float>& x, double a, bool exclude) {
  auto kernel = [a](double t) {
    t = std::fabs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0.0;
  };
  auto taps = [&](int64_t o, int64_t in, int64_t out, int64_t idx[4], double wt[4]) {
    const double c = (o + 0.5) * in / out - 0.5;
    const int64_t f = static_cast<int64_t>(std::floor(c));
    double sum = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t i = f - 1 + j;
      wt[j] = kernel(c - i);
      if (exclude && (i < 0 || i >= in)) wt[j] = 0;
      sum += wt[j];
      idx[j] = std::min(std::max<int64_t>(i, 0), in - 1);
    }
    if (exclude)
      for (int j = 0; j < 4; ++j) wt[j] /= sum;
  };
  std::vector<float> y(planes * oh * ow);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t hi[4], wi[4];
        double hw[4], ww[4];
        taps(i, h, oh, hi, hw);
        taps(j, w, ow, wi, ww);
        double s = 0;
        for (int u = 0; u < 4; ++u)
          for (int v = 0; v < 4; ++v) s += hw[u] * ww[v] * x[(p * h + hi[u]) * w + wi[v]];
        y[(p * oh + i) * ow + j] = static_cast<float>(s);
      }
  return y;
}

TEST(ResizeTest, CubicMatchesDirectInterpolation) {
  OpRunner r;
  for (bool exclude : {false, true}) {
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{13, 5}, {3, 17}}) {
      const std::vector<float> x = RandomFloats(2 * 6 * 8, 3);
      const double a = exclude ? -0.5 : -0.75;
      const std::vector<float> want = NaiveCubic(2, 6, 8, oh, ow, x, a, exclude);
      Attributes attrs =
          Attrs({{"mode", std::string("cubic")}, {"exclude_outside", int64_t{exclude ? 1 : 0}}});
      if (exclude) attrs.Set("cubic_coeff_a", -0.5f);
      auto out = r.Run("Resize", attrs,
                       {HostTensor::Of<float>({1, 2, 6, 8}, x), EmptyFloats(), EmptyFloats(),
                        Sizes({1, 2, oh, ow})});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectNear((*out)[0].Values<float>(), want, 1e-5f, exclude ? "exclude" : "include");
    }
  }
}

TEST(ResizeTest, TfCropAndResizeExtrapolates) {
  OpRunner r;
  // H: x = 1.2, 2.4, 3.6 (outside); W: x = 1.8, 3.45 (outside), 5.1 (outside).
  const Attributes a = Attrs({{"mode", std::string("linear")},
                              {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                              {"extrapolation_value", 10.0f}});
  auto out = r.Run("Resize", a,
                   {HostTensor::Of<float>({1, 1, 4, 4}, Iota(16)),
                    HostTensor::Of<float>({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}), EmptyFloats(),
                    Sizes({1, 1, 3, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].Values<float>(), {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10}, 1e-4f);
  // Nearest: rows 1.2 -> 1, 2.4 -> 2; cols 1.8 -> 2.
  Attributes n = a;
  n.Set("mode", std::string("nearest"));
  out = r.Run("Resize", n,
              {HostTensor::Of<float>({1, 1, 4, 4}, Iota(16)),
               HostTensor::Of<float>({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}), EmptyFloats(),
               Sizes({1, 1, 3, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{7, 10, 10, 11, 10, 10, 10, 10, 10}));
  // roi is required and must have 2 * rank values.
  ExpectErrorMentions(r.Infer("Resize", a,
                              {HostTensor::Zeros(DType::kFloat32, {1, 1, 4, 4}), EmptyFloats(),
                               EmptyFloats(), Sizes({1, 1, 3, 3})})
                          .status(),
                      "roi");
  ExpectErrorMentions(
      r.Infer("Resize", a,
              {HostTensor::Zeros(DType::kFloat32, {1, 1, 4, 4}), HostTensor::Of<float>({2}, {0, 1}),
               EmptyFloats(), Sizes({1, 1, 3, 3})})
          .status(),
      "roi");
}

TEST(ResizeTest, ShapeErrors) {
  OpRunner r;
  const HostTensor x = HostTensor::Zeros(DType::kFloat32, {1, 1, 4, 4});
  auto err = [&](Attributes a, std::vector<HostTensor> in) {
    in.insert(in.begin(), x);
    return r.Infer("Resize", a, in).status();
  };
  ExpectErrorMentions(err({}, {EmptyFloats(), Scales({1, 1, 2, 2}), Sizes({1, 1, 8, 8})}),
                      "only one");
  ExpectErrorMentions(err({}, {EmptyFloats(), EmptyFloats(), HostTensor::Absent()}), "one of");
  ExpectErrorMentions(err({}, {EmptyFloats(), Scales({2, 2})}), "scales has 2");
  ExpectErrorMentions(err({}, {EmptyFloats(), Scales({1, 1, -2, 2})}), "positive");
  ExpectErrorMentions(err({}, {EmptyFloats(), Scales({1, 1, 0, 2})}), "positive");
  ExpectErrorMentions(err({}, {EmptyFloats(), EmptyFloats(), Sizes({1, 1, -1, 2})}),
                      "non-negative");
  ExpectErrorMentions(err({}, {EmptyFloats(), EmptyFloats(), Sizes({1, 8})}), "sizes has 2");
  ExpectErrorMentions(
      err(Attrs({{"mode", std::string("area")}}), {EmptyFloats(), Scales({1, 1, 2, 2})}), "mode");
  ExpectErrorMentions(
      err(Attrs({{"coordinate_transformation_mode", std::string("tf_half_pixel_for_nn")}}),
          {EmptyFloats(), Scales({1, 1, 2, 2})}),
      "coordinate_transformation_mode");
  // tf_half_pixel_for_nn is Resize-11's (opsets 11-12) alone.
  EXPECT_TRUE(r.Infer("Resize-12",
                      Attrs({{"coordinate_transformation_mode", std::string("tf_half_pixel_for_nn")}}),
                      {x, EmptyFloats(), Scales({1, 1, 2, 2})})
                  .ok());
  ExpectErrorMentions(
      err(Attrs({{"nearest_mode", std::string("nearest")}}), {EmptyFloats(), Scales({1, 1, 2, 2})}),
      "nearest_mode");
  ExpectErrorMentions(err({}, {EmptyFloats(), HostTensor::Of<double>({4}, {1, 1, 2, 2})}),
                      "float32");
  // Output extents: floor(in * scale).
  auto info = r.Infer("Resize", {}, {x, EmptyFloats(), Scales({1, 1, 1.7f, 0.3f})});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ((*info)[0].shape, (Shape{1, 1, 6, 1}));
  // A kernel built for invalid attributes is refused.
  auto factory = r.registry().FindKernel("Resize", DeviceKind::kCpu);
  EXPECT_FALSE((*factory)(Attrs({{"exclude_outside", int64_t{2}}})).ok());
  // Linear on bool is not run.
  EXPECT_EQ(r.Infer("Resize", Attrs({{"mode", std::string("linear")}}),
                    {HostTensor::Zeros(DType::kBool, {2}), EmptyFloats(), Scales({2})})
                .status()
                .code(),
            StatusCode::kUnimplemented);
}

}  // namespace resize_test
}  // namespace remex::kernels
