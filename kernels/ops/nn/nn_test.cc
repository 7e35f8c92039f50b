// ConvTranspose, AveragePool, LpPool and LRN: hand-checked cases, naive reference loops,
// shape function errors. (Resize: resize_test.cc; Gemm: gemm_test.cc.)

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernels.h"
#include "kernels/ops/nn/nn_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace nn_test {

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
// ConvTranspose.

struct ConvTransposeCase {
  Shape x = {};  // [N, C, spatial...]
  int64_t m;
  std::vector<int64_t> kernel = {};
  int64_t group = 1;
  std::vector<int64_t> strides = {};
  std::vector<int64_t> dilations = {};
  std::vector<int64_t> pads = {};
  std::vector<int64_t> output_padding = {};
  std::vector<int64_t> output_shape = {};
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// CTest's name of each case (gtest_discover_tests) is what this prints: every field, so
// that it is unique and the same in every build (gtest's default prints raw bytes).
void PrintTo(const ConvTransposeCase& c, std::ostream* os) {
  *os << "x" << ShapeToString(c.x) << " m" << c.m << " kernel" << ShapeToString(c.kernel) << " group" << c.group
      << " strides" << ShapeToString(c.strides) << " dilations" << ShapeToString(c.dilations) << " pads"
      << ShapeToString(c.pads) << " output_padding" << ShapeToString(c.output_padding) << " output_shape"
      << ShapeToString(c.output_shape) << " " << c.auto_pad << (c.bias ? "" : " no-bias");
}

// Output extents and begin pads as ONNX defines them (reference side).
void ReferenceGeometry(const ConvTransposeCase& c, Shape& out, std::vector<int64_t>& pad_begin) {
  const size_t nsp = c.kernel.size();
  out = {c.x[0], c.m};
  pad_begin.assign(nsp, 0);
  auto at = [](const std::vector<int64_t>& v, size_t i, int64_t def) {
    return v.empty() ? def : v[i];
  };
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t s = at(c.strides, i, 1), d = at(c.dilations, i, 1);
    const int64_t op = at(c.output_padding, i, 0);
    const int64_t full = s * (c.x[2 + i] - 1) + op + (c.kernel[i] - 1) * d + 1;
    if (!c.output_shape.empty() || c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      const int64_t o = c.output_shape.empty() ? c.x[2 + i] * s : c.output_shape[i];
      const int64_t total = full - o;
      // Python's floor division.
      const int64_t half = static_cast<int64_t>(std::floor(total / 2.0));
      pad_begin[i] = c.auto_pad == "SAME_UPPER" ? half : total - half;
      out.push_back(o);
    } else {
      const int64_t pb = c.pads.empty() ? 0 : c.pads[i];
      const int64_t pe = c.pads.empty() ? 0 : c.pads[i + nsp];
      pad_begin[i] = pb;
      out.push_back(full - pb - pe);
    }
  }
}

std::vector<float> NaiveConvTranspose(const ConvTransposeCase& c, const std::vector<float>& x,
                                      const std::vector<float>& w, const std::vector<float>& b,
                                      const Shape& out_shape,
                                      const std::vector<int64_t>& pad_begin) {
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
  const int64_t oplane = out[0] * out[1] * out[2];
  std::vector<double> y(n * c.m * oplane, 0.0);
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t oc = 0; oc < c.m; ++oc)
      for (int64_t o = 0; o < oplane; ++o) y[(bn * c.m + oc) * oplane + o] = c.bias ? b[oc] : 0;
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t ic = 0; ic < ch; ++ic) {
      const int64_t g = ic / cg;
      for (int64_t om = 0; om < mg; ++om) {
        const int64_t oc = g * mg + om;
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t i2 = 0; i2 < in[2]; ++i2) {
              const float xv = x[(((bn * ch + ic) * in[0] + i0) * in[1] + i1) * in[2] + i2];
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t o0 = i0 * s[0] + k0 * d[0] - p[0];
                    const int64_t o1 = i1 * s[1] + k1 * d[1] - p[1];
                    const int64_t o2 = i2 * s[2] + k2 * d[2] - p[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2])
                      continue;
                    const float wv = w[(((ic * mg + om) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    y[(bn * c.m + oc) * oplane + (o0 * out[1] + o1) * out[2] + o2] +=
                        static_cast<double>(xv) * wv;
                  }
            }
      }
    }
  return std::vector<float>(y.begin(), y.end());
}

class ConvTransposeRandomTest : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(ConvTransposeRandomTest, MatchesDirectComputation) {
  const ConvTransposeCase& c = GetParam();
  OpRunner r;
  Shape w_shape = {c.x[1], c.m / c.group};
  w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
  const std::vector<float> x = RandomFloats(*NumElements(c.x), 1);
  const std::vector<float> w = RandomFloats(*NumElements(w_shape), 2);
  const std::vector<float> b = RandomFloats(c.m, 3);
  std::vector<HostTensor> in = {HostTensor::Of(c.x, x), HostTensor::Of(w_shape, w)};
  if (c.bias) in.push_back(HostTensor::Of<float>({c.m}, b));
  Attributes a;
  a.Set("group", c.group);
  a.Set("auto_pad", c.auto_pad);
  if (!c.strides.empty()) a.Set("strides", c.strides);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  if (!c.pads.empty()) a.Set("pads", c.pads);
  if (!c.output_padding.empty()) a.Set("output_padding", c.output_padding);
  if (!c.output_shape.empty()) a.Set("output_shape", c.output_shape);
  Shape want_shape;
  std::vector<int64_t> pad_begin;
  ReferenceGeometry(c, want_shape, pad_begin);
  auto infos = r.Infer("ConvTranspose", a, in);
  ASSERT_TRUE(infos.ok()) << infos.status().ToString();
  ASSERT_EQ((*infos)[0].shape, want_shape);
  const std::vector<float> want = NaiveConvTranspose(c, x, w, b, want_shape, pad_begin);
  auto kernel = (*r.registry().FindKernel("ConvTranspose", DeviceKind::kCpu))(a);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  for (int iter = 0; iter < 2; ++iter) {  // The second call reuses the cached primitive.
    auto out = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectNear((*out)[0].Values<float>(), want, 1e-4f, ShapeToString(want_shape));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvTransposeRandomTest,
    ::testing::Values(
        ConvTransposeCase{.x = {1, 8, 6, 5},
                          .m = 4,
                          .kernel = {2, 2},
                          .strides = {2, 2}},  // PP-OCR det: 2x2 stride 2.
        ConvTransposeCase{.x = {2, 3, 4, 4}, .m = 2, .kernel = {3, 3}},
        ConvTransposeCase{
            .x = {2, 3, 4, 5}, .m = 5, .kernel = {3, 2}, .strides = {3, 2}, .bias = false},
        ConvTransposeCase{.x = {1, 3, 4, 5}, .m = 2, .kernel = {1, 1}},
        ConvTransposeCase{.x = {1, 4, 5, 6},
                          .m = 6,
                          .kernel = {3, 3},
                          .group = 2,
                          .strides = {2, 1},
                          .pads = {1, 0, 0, 1}},
        ConvTransposeCase{.x = {1, 4, 5, 5},
                          .m = 4,
                          .kernel = {3, 3},
                          .group = 4,
                          .strides = {2, 2},
                          .pads = {1, 1, 1, 1}},  // Depthwise.
        ConvTransposeCase{.x = {1, 2, 4, 5},
                          .m = 3,
                          .kernel = {3, 2},
                          .strides = {1, 2},
                          .dilations = {2, 2}},  // Dilated.
        ConvTransposeCase{.x = {1, 2, 3, 3},
                          .m = 2,
                          .kernel = {3, 3},
                          .strides = {3, 2},
                          .output_padding = {1, 1}},  // output_padding.
        ConvTransposeCase{.x = {1, 2, 3, 3},
                          .m = 2,
                          .kernel = {3, 3},
                          .strides = {3, 2},
                          .pads = {1, 0, 0, 1},
                          .output_padding = {1, 1}},
        ConvTransposeCase{.x = {1, 1, 3, 3},
                          .m = 2,
                          .kernel = {3, 3},
                          .strides = {3, 2},
                          .output_shape = {10, 8}},
        ConvTransposeCase{
            .x = {1, 1, 3, 3}, .m = 2, .kernel = {3, 3}, .strides = {3, 2}, .output_shape = {7, 5}},
        ConvTransposeCase{.x = {1, 2, 3, 4},
                          .m = 2,
                          .kernel = {3, 3},
                          .strides = {2, 2},
                          .auto_pad = "SAME_UPPER"},
        ConvTransposeCase{.x = {1, 2, 3, 4},
                          .m = 2,
                          .kernel = {3, 3},
                          .strides = {2, 2},
                          .auto_pad = "SAME_LOWER"},
        ConvTransposeCase{.x = {1, 2, 3, 4},
                          .m = 2,
                          .kernel = {1, 1},
                          .strides = {3, 3},
                          .auto_pad = "SAME_UPPER"},
        ConvTransposeCase{.x = {2, 3, 7},
                          .m = 4,
                          .kernel = {3},
                          .strides = {2},
                          .pads = {1, 2},
                          .auto_pad = "NOTSET",
                          .bias = false},  // 1-D.
        ConvTransposeCase{
            .x = {1, 2, 3, 4, 3}, .m = 3, .kernel = {2, 3, 2}, .strides = {2, 1, 2}}));  // 3-D.

TEST(ConvTransposeTest, HandChecked) {
  OpRunner r;
  // ONNX's convtranspose_1d: x = [0, 1, 2], two output channels of ones.
  auto out = r.Run("ConvTranspose", {},
                   {HostTensor::Of<float>({1, 1, 3}, {0, 1, 2}),
                    HostTensor::Of<float>({1, 2, 3}, {1, 1, 1, 1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 5}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 1, 3, 3, 2, 0, 1, 3, 3, 2}));
}

TEST(ConvTransposeTest, ShapeErrors) {
  OpRunner r;
  const HostTensor x = HostTensor::Zeros(DType::kFloat32, {1, 4, 5, 5});
  const HostTensor w = HostTensor::Zeros(DType::kFloat32, {4, 2, 3, 3});
  ExpectErrorMentions(
      r.Infer("ConvTranspose", {}, {x, HostTensor::Zeros(DType::kFloat32, {3, 2, 3, 3})}).status(),
      "ConvTranspose");
  ExpectErrorMentions(r.Infer("ConvTranspose", Attrs({{"group", int64_t{3}}}), {x, w}).status(),
                      "group");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", {}, {x, w, HostTensor::Zeros(DType::kFloat32, {3})}).status(), "B");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", Attrs({{"strides", std::vector<int64_t>{2}}}), {x, w}).status(),
      "strides");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", Attrs({{"output_shape", std::vector<int64_t>{1, 2, 3}}}), {x, w})
          .status(),
      "output_shape");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", Attrs({{"pads", std::vector<int64_t>{4, 4, 4, 4}}}), {x, w})
          .status(),
      "empty");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}), {x, w})
          .status(),
      "kernel_shape");
  ExpectErrorMentions(
      r.Infer("ConvTranspose", {}, {HostTensor::Zeros(DType::kFloat64, {1, 4, 5, 5}), w}).status(),
      "float32");
  // Full output 7 per axis, group 2 doubles M.
  auto info = r.Infer("ConvTranspose", Attrs({{"group", int64_t{2}}}), {x, w});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ((*info)[0].shape, (Shape{1, 4, 7, 7}));
}

// ---------------------------------------------------------------------------
// AveragePool.

struct AvgPoolCase {
  Shape x = {};
  std::vector<int64_t> kernel = {};
  std::vector<int64_t> strides = {};
  std::vector<int64_t> pads = {};
  bool ceil_mode = false;
  bool count_include_pad = false;
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> dilations = {};
};

// CTest's name of each case (gtest_discover_tests) is what this prints: every field, so
// that it is unique and the same in every build (gtest's default prints raw bytes).
void PrintTo(const AvgPoolCase& c, std::ostream* os) {
  *os << "x" << ShapeToString(c.x) << " kernel" << ShapeToString(c.kernel) << " strides"
      << ShapeToString(c.strides) << " pads" << ShapeToString(c.pads) << (c.ceil_mode ? " ceil_mode" : "")
      << (c.count_include_pad ? " count_include_pad" : "") << " " << c.auto_pad
      << (c.dilations.empty() ? "" : " dilations" + ShapeToString(c.dilations));
}

class AveragePoolRandomTest : public ::testing::TestWithParam<AvgPoolCase> {};

TEST_P(AveragePoolRandomTest, MatchesDirectComputation) {
  const AvgPoolCase& c = GetParam();
  const size_t nsp = c.kernel.size();
  OpRunner r;
  Attributes a;
  a.Set("kernel_shape", c.kernel);
  if (!c.strides.empty()) a.Set("strides", c.strides);
  if (!c.pads.empty()) a.Set("pads", c.pads);
  a.Set("ceil_mode", int64_t{c.ceil_mode});
  a.Set("count_include_pad", int64_t{c.count_include_pad});
  a.Set("auto_pad", c.auto_pad);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  const std::vector<float> x = RandomFloats(*NumElements(c.x), 5);
  auto out = r.Run("AveragePool", a, {HostTensor::Of(c.x, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Shape& os = (*out)[0].shape;
  // Reference: pads and extents computed here per ONNX.
  int64_t in[3] = {1, 1, 1}, on[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, pb[3] = {0, 0, 0},
          pe[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  for (size_t i = 0; i < nsp; ++i) {
    const size_t j = 3 - nsp + i;
    in[j] = c.x[2 + i];
    d[j] = c.dilations.empty() ? 1 : c.dilations[i];
    k[j] = (c.kernel[i] - 1) * d[j] + 1;  // the dilated window's extent
    s[j] = c.strides.empty() ? 1 : c.strides[i];
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      const int64_t o = (in[j] + s[j] - 1) / s[j];
      const int64_t total = std::max<int64_t>(0, (o - 1) * s[j] + k[j] - in[j]);
      pb[j] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[j] = total - pb[j];
      on[j] = o;
    } else {
      pb[j] = c.pads.empty() ? 0 : c.pads[i];
      pe[j] = c.pads.empty() ? 0 : c.pads[i + nsp];
      const double q = static_cast<double>(in[j] + pb[j] + pe[j] - k[j]) / s[j];
      on[j] = static_cast<int64_t>(c.ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
      if (c.ceil_mode && (on[j] - 1) * s[j] >= in[j] + pb[j]) --on[j];
    }
    ASSERT_EQ(os[2 + i], on[j]);
  }
  const int64_t planes = c.x[0] * c.x[1];
  std::vector<float> want;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o0 = 0; o0 < on[0]; ++o0)
      for (int64_t o1 = 0; o1 < on[1]; ++o1)
        for (int64_t o2 = 0; o2 < on[2]; ++o2) {
          double sum = 0;
          int64_t inside = 0, padded = 0;
          for (int64_t k0 = 0; k0 < k[0]; k0 += d[0])
            for (int64_t k1 = 0; k1 < k[1]; k1 += d[1])
              for (int64_t k2 = 0; k2 < k[2]; k2 += d[2]) {
                const int64_t i0 = o0 * s[0] - pb[0] + k0, i1 = o1 * s[1] - pb[1] + k1,
                              i2 = o2 * s[2] - pb[2] + k2;
                if (i0 < in[0] + pe[0] && i1 < in[1] + pe[1] && i2 < in[2] + pe[2]) ++padded;
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                  continue;
                ++inside;
                sum += x[((p * in[0] + i0) * in[1] + i1) * in[2] + i2];
              }
          want.push_back(static_cast<float>(sum / (c.count_include_pad ? padded : inside)));
        }
  ExpectNear((*out)[0].Values<float>(), want, 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AveragePoolRandomTest,
    ::testing::Values(
        AvgPoolCase{.x = {1, 3, 8, 8}, .kernel = {2, 2}, .strides = {2, 2}},
        AvgPoolCase{.x = {2, 2, 7, 9}, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        AvgPoolCase{.x = {2, 2, 7, 9},
                    .kernel = {3, 3},
                    .strides = {2, 2},
                    .pads = {1, 1, 1, 1},
                    .ceil_mode = false,
                    .count_include_pad = true},
        AvgPoolCase{.x = {1, 2, 8, 7},
                    .kernel = {3, 2},
                    .strides = {2, 3},
                    .ceil_mode = true,
                    .count_include_pad = false},
        AvgPoolCase{.x = {1, 2, 8, 7},
                    .kernel = {3, 3},
                    .strides = {2, 2},
                    .pads = {1, 0, 1, 1},
                    .ceil_mode = true,
                    .count_include_pad = true},
        AvgPoolCase{.x = {1, 2, 5, 6},
                    .kernel = {3, 2},
                    .strides = {2, 2},
                    .ceil_mode = false,
                    .count_include_pad = false,
                    .auto_pad = "SAME_UPPER"},
        AvgPoolCase{.x = {1, 2, 5, 6},
                    .kernel = {3, 2},
                    .strides = {2, 2},
                    .ceil_mode = false,
                    .count_include_pad = true,
                    .auto_pad = "SAME_LOWER"},
        AvgPoolCase{.x = {2, 3, 11},
                    .kernel = {4},
                    .strides = {3},
                    .pads = {2, 1},
                    .ceil_mode = false,
                    .count_include_pad = true},                                        // 1-D.
        AvgPoolCase{.x = {1, 2, 4, 5, 6}, .kernel = {2, 3, 2}, .strides = {1, 2, 2}},  // 3-D.
        AvgPoolCase{.x = {1, 3, 9, 10},
                    .kernel = {2, 3},
                    .strides = {1, 2},
                    .pads = {1, 2, 0, 1},
                    .count_include_pad = true,
                    .dilations = {2, 2}},
        AvgPoolCase{.x = {2, 2, 6, 40}, .kernel = {3, 3}, .strides = {1, 1}, .pads = {1, 1, 1, 1}}));

TEST(AveragePoolTest, HandCheckedAndErrors) {
  OpRunner r;
  // 3x3 window, pads 1, stride 1 on [[1, 2], [3, 4]]: every window covers all four.
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = r.Run("AveragePool",
                   Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                          {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
                   {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5, 2.5, 2.5, 2.5}));
  out = r.Run("AveragePool",
              Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                     {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                     {"count_include_pad", int64_t{1}}}),
              {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].Values<float>(), {10.f / 9, 10.f / 9, 10.f / 9, 10.f / 9}, 1e-6f);
  // float16 and float64.
  out = r.Run("AveragePool", Attrs({{"kernel_shape", std::vector<int64_t>{2}}}),
              {HostTensor::Of<double>({1, 1, 3}, {1, 2, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{1.5, 3}));
  out = r.Run("AveragePool", Attrs({{"kernel_shape", std::vector<int64_t>{2}}}),
              {HostTensor::Of<Half>({1, 1, 3}, {FloatToHalf(1), FloatToHalf(2), FloatToHalf(4)})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[1]), 3.f);
  ExpectErrorMentions(r.Infer("AveragePool", {}, {x}).status(), "kernel_shape");
  ExpectErrorMentions(
      r.Infer("AveragePool", Attrs({{"kernel_shape", std::vector<int64_t>{3}}}), {x}).status(),
      "AveragePool");
  ExpectErrorMentions(r.Infer("AveragePool",
                              Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                                     {"count_include_pad", int64_t{3}}}),
                              {x})
                          .status(),
                      "count_include_pad");
  ExpectErrorMentions(r.Infer("AveragePool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}),
                              {HostTensor::Zeros(DType::kInt32, {1, 1, 2, 2})})
                          .status(),
                      "dtype");
}

// ---------------------------------------------------------------------------
// LpPool-2/11: (sum of |x|^p over the window's positions inside X)^(1/p).

TEST(LpPoolTest, MatchesDirectComputation) {
  struct Case {
    Shape x;
    Attributes attrs;
  };
  using V = std::vector<int64_t>;
  const std::vector<Case> cases = {
      {{2, 3, 7, 9}, Attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}})},
      {{1, 2, 5, 6},
       Attrs({{"kernel_shape", V{3, 2}}, {"strides", V{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})},
      {{2, 3, 11}, Attrs({{"kernel_shape", V{4}}, {"strides", V{3}}, {"pads", V{2, 1}}})},  // 1-D.
      {{1, 2, 4, 5, 6}, Attrs({{"kernel_shape", V{2, 3, 2}}, {"strides", V{1, 2, 2}}})},    // 3-D.
  };
  for (const Case& c : cases) {
    for (int64_t p : {1, 2, 3}) {
      SCOPED_TRACE(ShapeToString(c.x) + " p " + std::to_string(p));
      OpRunner r;
      Attributes a = c.attrs;
      a.Set("p", p);
      const std::vector<float> x = RandomFloats(*NumElements(c.x), 9);
      auto out = r.Run("LpPool", a, {HostTensor::Of(c.x, x)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      // Reference: pads (SAME_UPPER's computed here per ONNX), extents and sums in double.
      const size_t nsp = c.x.size() - 2;
      const std::vector<int64_t> kernel = *c.attrs.Ints("kernel_shape");
      const std::vector<int64_t> strides = *c.attrs.Ints("strides", V(nsp, 1));
      std::vector<int64_t> pads = *c.attrs.Ints("pads", V(2 * nsp, 0));
      const Shape& os = (*out)[0].shape;
      if (*c.attrs.String("auto_pad", "NOTSET") == "SAME_UPPER") {
        for (size_t i = 0; i < nsp; ++i) {
          const int64_t total = std::max<int64_t>(0, (os[2 + i] - 1) * strides[i] + kernel[i] - c.x[2 + i]);
          pads[i] = total / 2;
          pads[i + nsp] = total - total / 2;
        }
      }
      int64_t in[3] = {1, 1, 1}, on[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
      for (size_t i = 0; i < nsp; ++i) {
        const size_t j = 3 - nsp + i;
        in[j] = c.x[2 + i];
        on[j] = os[2 + i];
        k[j] = kernel[i];
        s[j] = strides[i];
        pb[j] = pads[i];
        ASSERT_EQ(on[j], (in[j] + pads[i] + pads[i + nsp] - k[j]) / s[j] + 1);
      }
      std::vector<float> want;
      for (int64_t pl = 0; pl < c.x[0] * c.x[1]; ++pl)
        for (int64_t o0 = 0; o0 < on[0]; ++o0)
          for (int64_t o1 = 0; o1 < on[1]; ++o1)
            for (int64_t o2 = 0; o2 < on[2]; ++o2) {
              double sum = 0;
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 * s[0] - pb[0] + k0, i1 = o1 * s[1] - pb[1] + k1,
                                  i2 = o2 * s[2] - pb[2] + k2;
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    sum += std::pow(
                        std::abs(static_cast<double>(x[((pl * in[0] + i0) * in[1] + i1) * in[2] + i2])),
                        static_cast<double>(p));
                  }
              want.push_back(static_cast<float>(std::pow(sum, 1.0 / static_cast<double>(p))));
            }
      ExpectNear((*out)[0].Values<float>(), want, 1e-5f);
    }
  }
}

TEST(LpPoolTest, HandCheckedAndErrors) {
  OpRunner r;
  // A 2x2 window over [[3, -4], [0, 0]]: the L2 norm 5, the L1 norm 7; with pads 1 and
  // stride 2 the corner windows see one element each.
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {3, -4, 0, 0});
  auto out = r.Run("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}), {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5}));
  out = r.Run("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"p", int64_t{1}}}), {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{7}));
  out = r.Run("LpPool",
              Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                     {"strides", std::vector<int64_t>{2, 2}},
                     {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
              {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 4, 0, 0}));
  // float64 and float16.
  out = r.Run("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2}}}),
              {HostTensor::Of<double>({1, 1, 3}, {3, 4, 12})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Accumulated in float32, as for every dtype (kernels/ops/nn/pool.cc).
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{5, static_cast<double>(std::sqrt(160.0f))}));
  out = r.Run("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2}}}),
              {HostTensor::Of<Half>({1, 1, 2}, {FloatToHalf(3), FloatToHalf(-4)})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 5.f);
  ExpectErrorMentions(r.Infer("LpPool", {}, {x}).status(), "kernel_shape");
  ExpectErrorMentions(
      r.Infer("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"p", int64_t{0}}}), {x})
          .status(),
      "p must be in [1, 64]");
  ExpectErrorMentions(r.Infer("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}),
                              {HostTensor::Zeros(DType::kInt32, {1, 1, 2, 2})})
                          .status(),
                      "dtype");
  ExpectErrorMentions(r.Infer("LpPool", Attrs({{"kernel_shape", std::vector<int64_t>{3}}}), {x}).status(),
                      "LpPool");
}

// ---------------------------------------------------------------------------
// LRN.

TEST(LrnTest, MatchesDirectComputation) {
  OpRunner r;
  for (int64_t size : {1, 2, 3, 5}) {
    const Shape xs = {2, 6, 3, 4};
    const std::vector<float> x = RandomFloats(*NumElements(xs), 9);
    const float alpha = 0.02f, beta = 0.6f, bias = 1.5f;
    auto out =
        r.Run("LRN", Attrs({{"size", size}, {"alpha", alpha}, {"beta", beta}, {"bias", bias}}),
              {HostTensor::Of(xs, x)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<float> want(x.size());
    const int64_t inner = 12;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 6; ++c)
        for (int64_t i = 0; i < inner; ++i) {
          double sq = 0;
          const int64_t lo = c - (size - 1) / 2;
          const int64_t hi = c + size / 2;  // ceil((size - 1) / 2).
          for (int64_t cc = std::max<int64_t>(0, lo); cc <= std::min<int64_t>(5, hi); ++cc) {
            const double v = x[(n * 6 + cc) * inner + i];
            sq += v * v;
          }
          const size_t e = (n * 6 + c) * inner + i;
          want[e] = static_cast<float>(x[e] / std::pow(bias + alpha / size * sq, beta));
        }
    ExpectNear((*out)[0].Values<float>(), want, 1e-5f, "size " + std::to_string(size));
  }
  // Defaults: alpha 1e-4, beta 0.75, bias 1.
  auto out = r.Run("LRN", Attrs({{"size", int64_t{1}}}), {HostTensor::Of<double>({1, 1}, {10})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NEAR((*out)[0].Values<double>()[0], 10 / std::pow(1 + 1e-4 * 100, 0.75), 1e-6);
  ExpectErrorMentions(r.Infer("LRN", {}, {HostTensor::Zeros(DType::kFloat32, {1, 2, 2})}).status(),
                      "size");
  ExpectErrorMentions(
      r.Infer("LRN", Attrs({{"size", int64_t{0}}}), {HostTensor::Zeros(DType::kFloat32, {1, 2})})
          .status(),
      "size");
  ExpectErrorMentions(
      r.Infer("LRN", Attrs({{"size", int64_t{3}}}), {HostTensor::Zeros(DType::kInt32, {1, 2})})
          .status(),
      "LRN");
}

// ---------------------------------------------------------------------------
// Random inputs and attributes: every call answers with a Status.

TEST(NnRobustnessTest, RandomInputsNeverCrash) {
  OpRunner r;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> pick(0, 99);
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,
                          DType::kInt32,   DType::kInt64,   DType::kBool};
  auto tensor = [&](bool index_like, int rank) {
    DType dt = dtypes[pick(rng) % std::size(dtypes)];
    if (index_like) dt = pick(rng) < 60 ? DType::kInt64 : DType::kFloat32;
    if (pick(rng) < 60) dt = index_like ? dt : DType::kFloat32;
    Shape shape(rank);
    for (int64_t& d : shape) d = pick(rng) < 5 ? 0 : 1 + pick(rng) % 5;
    HostTensor t = HostTensor::Zeros(dt, shape);
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(pick(rng));
    if (dt == DType::kBool) {
      for (uint8_t& b : t.bytes) b &= 1;
    }
    if (index_like && dt == DType::kInt64) {
      for (size_t i = 0; i < t.bytes.size() / 8; ++i) {
        const int64_t v =
            pick(rng) < 90 ? pick(rng) % 9 - 2 : (pick(rng) < 50 ? INT64_MAX : INT64_MIN);
        std::memcpy(t.bytes.data() + i * 8, &v, 8);
      }
    }
    if (index_like && dt == DType::kFloat32) {
      for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
        const float v = pick(rng) < 90 ? (pick(rng) % 13 - 3) / 4.0f : std::nanf("");
        std::memcpy(t.bytes.data() + i * 4, &v, 4);
      }
    }
    return t;
  };
  struct OpCase {
    const char* op;
    std::vector<Attributes> attrs;
  };
  const std::vector<OpCase> ops = {
      {"Resize-10", {Attributes{}, Attrs({{"mode", std::string("linear")}})}},
      {"Resize",
       {Attributes{},
        Attrs({{"mode", std::string("linear")},
               {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}),
        Attrs({{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}}),
        Attrs({{"mode", std::string("nearest")},
               {"coordinate_transformation_mode", std::string("align_corners")},
               {"nearest_mode", std::string("ceil")}})}},
      {"ConvTranspose",
       {Attributes{}, Attrs({{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 2}}}),
        Attrs({{"output_shape", std::vector<int64_t>{4, 9}}}),
        Attrs({{"auto_pad", std::string("SAME_LOWER")}, {"strides", std::vector<int64_t>{3}}}),
        Attrs({{"pads", std::vector<int64_t>{1, 2, 2, 1}},
               {"output_padding", std::vector<int64_t>{3, 3}}})}},
      {"AveragePool",
       {Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}),
        Attrs({{"kernel_shape", std::vector<int64_t>{3}},
               {"ceil_mode", int64_t{1}},
               {"count_include_pad", int64_t{1}},
               {"pads", std::vector<int64_t>{2, 2}}}),
        Attrs({{"kernel_shape", std::vector<int64_t>{2, 1, 2}},
               {"auto_pad", std::string("SAME_UPPER")}})}},
      {"LRN", {Attrs({{"size", int64_t{3}}}), Attrs({{"size", int64_t{INT64_MAX}}})}},
      {"Gemm",
       {Attributes{}, Attrs({{"transA", int64_t{1}}, {"alpha", 2.0f}}),
        Attrs({{"transB", int64_t{1}}, {"beta", 0.0f}})}},
  };
  for (const OpCase& c : ops) {
    int ran = 0;
    const OpDef* def = testing::FindVersionedOp(r.registry(), c.op);
    ASSERT_NE(def, nullptr) << c.op;
    const auto* factory = testing::FindVersionedKernel(r.registry(), c.op, DeviceKind::kCpu);
    for (int iter = 0; iter < 800; ++iter) {
      const Attributes& attrs = c.attrs[pick(rng) % c.attrs.size()];
      const int n = def->min_inputs + pick(rng) % (def->max_inputs - def->min_inputs + 1);
      const int rank = pick(rng) % 6;
      std::vector<HostTensor> in;
      for (int i = 0; i < n; ++i) {
        const bool index_like = def->DepOf(i) == ShapeDep::kData;
        if (i >= def->min_inputs && pick(rng) < 20) {
          in.push_back(HostTensor::Absent());
        } else {
          in.push_back(
              tensor(index_like, index_like ? 1 : (pick(rng) < 70 ? rank : pick(rng) % 6)));
        }
      }
      // Mostly shapes that fit together, so that kernels run.
      if (pick(rng) < 85 && !in.empty() && in[0].dtype != DType::kUndefined) {
        const Shape xs = in[0].shape;
        const int64_t xr = static_cast<int64_t>(xs.size());
        auto floats = [&](int64_t len, float lo, float hi) {
          std::vector<float> v(len);
          for (float& e : v) e = lo + (hi - lo) * pick(rng) / 99.0f;
          return HostTensor::Of<float>({len}, v);
        };
        const std::string op = c.op;
        if ((op == "Resize" || op == "Resize-10") && xr > 0) {
          const bool v10 = op == "Resize-10";
          const bool use_sizes = !v10 && pick(rng) < 50;
          std::vector<int64_t> sz(xr);
          for (int64_t& e : sz) e = pick(rng) % 7;
          in = {in[0]};
          if (!v10) in.push_back(pick(rng) < 70 ? floats(2 * xr, -0.5f, 1.5f) : EmptyFloats());
          in.push_back(use_sizes ? EmptyFloats() : floats(xr, 0.1f, 3.0f));
          if (use_sizes) in.push_back(Sizes(sz));
        } else if (op == "ConvTranspose" && xr >= 3 && xr <= 5) {
          const int64_t g = pick(rng) < 50 ? 1 : 2;
          Shape ws = {xs[1], 1 + pick(rng) % 3};
          for (int64_t d = 2; d < xr; ++d) ws.push_back(1 + pick(rng) % 3);
          in[0].dtype = DType::kFloat32;
          in[0].bytes.assign(static_cast<size_t>(*NumElements(xs)) * 4, 0);
          in[1] = HostTensor::Of<float>(ws, RandomFloats(*NumElements(ws), 1));
          if (in.size() > 2) in[2] = floats(ws[1] * g, -1, 1);
        } else if (op == "Gemm") {
          const int64_t m = pick(rng) % 4, k = pick(rng) % 4, nn = pick(rng) % 4;
          const bool ta = attrs.Has("transA"), tb = attrs.Has("transB");
          in[0] = HostTensor::Of<float>(ta ? Shape{k, m} : Shape{m, k}, RandomFloats(m * k, 1));
          in[1] = HostTensor::Of<float>(tb ? Shape{nn, k} : Shape{k, nn}, RandomFloats(k * nn, 2));
          if (in.size() > 2) {
            const Shape cs = pick(rng) < 50 ? Shape{m, nn} : Shape{pick(rng) < 50 ? 1 : nn};
            in[2] = HostTensor::Of<float>(cs, RandomFloats(*NumElements(cs), 3));
          }
        }
      }
      auto infos = r.Infer(c.op, attrs, in);
      auto kernel = (*factory)(attrs);
      if (!kernel.ok()) continue;
      if (infos.ok()) {
        ++ran;
        auto out = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
        EXPECT_TRUE(out.ok()) << c.op << ": " << out.status().ToString();
      } else {
        std::vector<TensorInfo> fake = {{DType::kFloat32, {1}}};
        EXPECT_FALSE(OpRunner::RunKernel(**kernel, fake, in, std::nullopt).ok()) << c.op;
      }
    }
    EXPECT_GT(ran, 10) << c.op << ": too few valid random cases";
  }
}

}  // namespace nn_test
}  // namespace remex::kernels
