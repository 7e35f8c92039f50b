// The linear quantization ops' CPU kernels (kernels/ops/quantization/quantize.cc, qlinear.cc):
// ONNX's examples, per-axis parameters, rounding half to even and saturation, every
// uint8 / int8 operand combination of the integer matmul and convolution against plain
// loops written here (strides, pads, dilations, groups, per-channel zero points,
// broadcast batches), oneDNN's int8 convolution against the int16 GEMMs bit for bit
// (int8_dnnl.h), and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ops/quantization/int8_dnnl.h"
#include "kernels/scalar_ops.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace quantize_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor F32(Shape s, std::vector<float> v) { return HostTensor::Of<float>(std::move(s), v); }
HostTensor U8(Shape s, std::vector<uint8_t> v) { return HostTensor::Of<uint8_t>(std::move(s), v); }
HostTensor I8(Shape s, std::vector<int8_t> v) { return HostTensor::Of<int8_t>(std::move(s), v); }

TEST(QuantizeTest, QuantizeLinearOnnxExampleRoundsHalfToEvenAndSaturates) {
  OpRunner r;
  // ONNX's example: scale 2, zero point 128.
  const HostTensor x = F32({6}, {0, 2, 3, 1000, -254, -1000});
  auto out = r.Run("QuantizeLinear", {}, {x, F32({}, {2}), U8({}, {128})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{128, 129, 130, 255, 1, 0}));
  // Halves go to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2; int8, no saturation.
  out = r.Run("QuantizeLinear", {}, {F32({5}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f}), F32({}, {1}), I8({}, {0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{0, 2, 2, 0, -2}));
  // Without a zero point: uint8, zero point 0; int32 x.
  out = r.Run("QuantizeLinear", {}, {HostTensor::Of<int32_t>({3}, {-7, 7, 600}), F32({1}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kUint8);
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 4, 255}));
}

TEST(QuantizeTest, PerAxisParameters) {
  OpRunner r;
  // x [2, 3, 2], axis 1: channel c has scale c + 1 and zero point 10 * c.
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i * 3 - 10);
  const HostTensor x = F32({2, 3, 2}, xv);
  auto q = r.Run("QuantizeLinear", {}, {x, F32({3}, {1, 2, 3}), I8({3}, {0, 10, 20})});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const auto got = (*q)[0].Values<int8_t>();
  for (int i = 0; i < 12; ++i) {
    const int c = (i / 2) % 3;
    const double want = std::nearbyint(xv[i] / (c + 1.0)) + 10 * c;
    EXPECT_EQ(got[i], static_cast<int8_t>(std::fmin(127, std::fmax(-128, want)))) << i;
  }
  // Dequantize back with axis -2 (the same axis).
  auto d = r.Run("DequantizeLinear", Attrs({{"axis", int64_t{-2}}}), {(*q)[0], F32({3}, {1, 2, 3}), I8({3}, {0, 10, 20})});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const auto back = (*d)[0].Values<float>();
  for (int i = 0; i < 12; ++i) {
    const int c = (i / 2) % 3;
    EXPECT_EQ(back[i], static_cast<float>(got[i] - 10 * c) * static_cast<float>(c + 1)) << i;
  }
  // Opset 10 has no axis: a per-axis scale is refused.
  auto old = r.Run("QuantizeLinear-10", {}, {x, F32({3}, {1, 2, 3}), I8({3}, {0, 10, 20})});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("must hold one value"), std::string::npos) << old.status().ToString();
}

TEST(QuantizeTest, DequantizeLinearOnnxExampleAndInt32) {
  OpRunner r;
  auto out = r.Run("DequantizeLinear", {}, {U8({4}, {0, 3, 128, 255}), F32({}, {2}), U8({}, {128})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-256, -250, 0, 254}));
  out = r.Run("DequantizeLinear", {}, {HostTensor::Of<int32_t>({2}, {-5, 1 << 20}), F32({}, {0.5f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-2.5f, 524288.0f}));
  out = r.Run("DequantizeLinear", {}, {HostTensor::Of<int32_t>({1}, {1}), F32({}, {1}), HostTensor::Of<int32_t>({}, {3})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("must be 0"), std::string::npos) << out.status().ToString();
}

TEST(QuantizeTest, DynamicQuantizeLinear) {
  OpRunner r;
  // ONNX's example.
  auto out = r.Run("DynamicQuantizeLinear", {}, {F32({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ((*out)[1].Values<float>()[0], 5.0f / 255.0f);
  EXPECT_EQ((*out)[2].Values<uint8_t>()[0], 153);
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  // All zero: scale 1, zero point 0, y 0 (no division by zero).
  out = r.Run("DynamicQuantizeLinear", {}, {F32({3}, {0, 0, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].Values<float>()[0], 1.0f);
  EXPECT_EQ((*out)[2].Values<uint8_t>()[0], 0);
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 0, 0}));
  // Positive only: the range starts at 0.
  out = r.Run("DynamicQuantizeLinear", {}, {F32({2}, {1, 51})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[2].Values<uint8_t>()[0], 0);
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{5, 255}));
  // Long x, its range found lane by lane (RangeWithZero): NaNs skipped, the extremes in
  // a lane, in the tail past the last whole block, and at the first element.
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{4099}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 100.0f - 4.0f;
    for (int64_t i = 3; i < n; i += 11) x[i] = std::nanf("");
    x[0] = n == 1 ? 2.5f : -7.25f;
    if (n > 20) x[n - 2] = 9.5f;
    float lo = 0, hi = 0;
    for (float v : x) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    out = r.Run("DynamicQuantizeLinear", {}, {F32({n}, x)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[1].Values<float>()[0], (hi - lo) / 255.0f) << n;
  }
}

// FusedQLinearAdd gives the bits of the ops it replaces, run one by one:
// DequantizeLinear of A and of B, Add, Relu (or not), QuantizeLinear; every operand
// type, both output types, sums past both ends of the output range.
TEST(QuantizeTest, FusedQLinearAddGivesTheUnfusedOpsBits) {
  OpRunner r;
  std::mt19937 rng(41);
  const Shape s{3, 37};
  const auto random = [&](DType t) {
    std::vector<uint8_t> v(111);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    return t == DType::kUint8 ? U8(s, v) : I8(s, std::vector<int8_t>(v.begin(), v.end()));
  };
  for (DType a_type : {DType::kUint8, DType::kInt8}) {
    for (DType y_type : {DType::kUint8, DType::kInt8}) {
      for (bool relu : {false, true}) {
        const HostTensor a = random(a_type), b = random(DType::kUint8);
        const HostTensor a_zp = a_type == DType::kUint8 ? U8({}, {130}) : I8({}, {-5});
        const HostTensor y_zp = y_type == DType::kUint8 ? U8({}, {10}) : I8({}, {-7});
        const HostTensor a_s = F32({}, {0.07f}), b_s = F32({}, {0.031f}), y_s = F32({}, {0.05f}), b_zp = U8({}, {3});
        auto fa = r.Run("DequantizeLinear", {}, {a, a_s, a_zp});
        auto fb = r.Run("DequantizeLinear", {}, {b, b_s, b_zp});
        ASSERT_TRUE(fa.ok() && fb.ok());
        auto sum = r.Run("Add", {}, {(*fa)[0], (*fb)[0]});
        ASSERT_TRUE(sum.ok());
        HostTensor pre = (*sum)[0];
        if (relu) {
          auto rel = r.Run("Relu", {}, {pre});
          ASSERT_TRUE(rel.ok());
          pre = (*rel)[0];
        }
        auto want = r.Run("QuantizeLinear", {}, {pre, y_s, y_zp});
        ASSERT_TRUE(want.ok());
        const Attributes attrs = relu ? Attrs({{"activation", std::string("Relu")}}) : Attributes{};
        auto got = r.Run("FusedQLinearAdd", attrs, {a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ((*got)[0].bytes, (*want)[0].bytes);
        EXPECT_EQ((*got)[0].dtype, y_type);
      }
    }
  }
  // One shape for A and B: no broadcasting.
  auto bad = r.Run("FusedQLinearAdd", {},
                   {U8({2}, {1, 2}), F32({}, {1}), U8({}, {0}), U8({1}, {1}), F32({}, {1}), U8({}, {0}), F32({}, {1}),
                    U8({}, {0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("one shape"), std::string::npos) << bad.status().ToString();
  // Relu is its one activation.
  auto sigmoid = r.Run("FusedQLinearAdd", Attrs({{"activation", std::string("Sigmoid")}}),
                       {U8({1}, {1}), F32({}, {1}), U8({}, {0}), U8({1}, {1}), F32({}, {1}), U8({}, {0}), F32({}, {1}),
                        U8({}, {0})});
  ASSERT_FALSE(sigmoid.ok());
  EXPECT_NE(sigmoid.status().message().find("Relu or absent"), std::string::npos) << sigmoid.status().ToString();
}

// ---------------------------------------------------------------------------
// Integer matmul and convolution against loops written here.

template <typename T>
std::vector<T> RandomValues(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> d(std::is_signed_v<T> ? -128 : 0, std::is_signed_v<T> ? 127 : 255);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(d(rng));
  return v;
}

template <typename A, typename B>
void CheckMatMulInteger(std::mt19937& rng, const Shape& as, const Shape& bs, bool per_column) {
  OpRunner r;
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const int64_t batch_a = NumElements(as).value() / (m * k), batch_b = NumElements(bs).value() / (k * n);
  const auto av = RandomValues<A>(rng, static_cast<size_t>(batch_a * m * k));
  const auto bv = RandomValues<B>(rng, static_cast<size_t>(batch_b * k * n));
  const auto azp = RandomValues<A>(rng, 1);
  const auto bzp = RandomValues<B>(rng, per_column ? static_cast<size_t>(n) : 1);
  auto out = r.Run("MatMulInteger", {},
                   {HostTensor::Of<A>(as, av), HostTensor::Of<B>(bs, bv), HostTensor::Of<A>({}, azp),
                    HostTensor::Of<B>(per_column ? Shape{n} : Shape{}, bzp)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto got = (*out)[0].template Values<int32_t>();
  const int64_t batch = std::max(batch_a, batch_b);  // Tests broadcast a batch of 1 only.
  ASSERT_EQ(got.size(), static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t want = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          want += (int64_t{av[(batch_a == 1 ? 0 : t) * m * k + i * k + kk]} - azp[0]) *
                  (int64_t{bv[(batch_b == 1 ? 0 : t) * k * n + kk * n + j]} - bzp[per_column ? j : 0]);
        }
        ASSERT_EQ(got[(t * m + i) * n + j], want) << t << " " << i << " " << j;
      }
    }
  }
}

TEST(QuantizeTest, MatMulIntegerEveryOperandTypeAndBroadcastBatches) {
  std::mt19937 rng(7);
  CheckMatMulInteger<uint8_t, uint8_t>(rng, {3, 5}, {5, 4}, false);
  CheckMatMulInteger<uint8_t, int8_t>(rng, {2, 3, 5}, {5, 7}, true);
  CheckMatMulInteger<int8_t, uint8_t>(rng, {1, 4, 9}, {3, 9, 2}, false);
  CheckMatMulInteger<int8_t, int8_t>(rng, {2, 1, 6}, {2, 6, 3}, true);
  // ONNX's example.
  OpRunner r;
  auto out = r.Run("MatMulInteger", {},
                   {U8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}), U8({3, 2}, {1, 4, 2, 5, 3, 6}),
                    U8({}, {12}), U8({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
}

// MatMulInteger's B, less its zero points, is packed once while the same constant B
// and zero points come in (QMatMulKernel), and never stands in for other weights: B or
// zero points not marked constant are packed on every call, even in the same buffer,
// and a constant B at another address is packed anew. A [2, 3, 40] by B [40, 20]: the
// batches as one product of 6 rows.
TEST(QuantizeTest, MatMulIntegerPackedWeightsKeptOnlyForTheSameConstant) {
  OpRunner r;
  const KernelFactory* factory = r.registry().FindKernel("MatMulInteger", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  std::mt19937 rng(13);
  auto a = RandomValues<uint8_t>(rng, 2 * 3 * 40);
  auto b1 = RandomValues<int8_t>(rng, 40 * 20), b2 = RandomValues<int8_t>(rng, 40 * 20);
  auto bzp1 = RandomValues<int8_t>(rng, 20), bzp2 = RandomValues<int8_t>(rng, 20);
  uint8_t azp = 7;
  auto run = [&](OpKernel& kernel, std::vector<int8_t>& b, bool b_constant, std::vector<int8_t>& bzp,
                 bool zp_constant) {
    std::vector<int32_t> y(2 * 3 * 20, -1);
    const TensorRef in[] = {{a.data(), DType::kUint8, {2, 3, 40}},
                            {b.data(), DType::kInt8, {40, 20}, b_constant},
                            {&azp, DType::kUint8, {}, true},
                            {bzp.data(), DType::kInt8, {20}, zp_constant}};
    const TensorRef out[] = {{y.data(), DType::kInt32, {2, 3, 20}}};
    EXPECT_TRUE(kernel.Compute(in, out).ok());
    return y;
  };
  auto fresh = [&](std::vector<int8_t> b, std::vector<int8_t> bzp) {
    auto k = (*factory)(Attributes{});
    EXPECT_TRUE(k.ok());
    return run(**k, b, false, bzp, false);
  };
  const auto want11 = fresh(b1, bzp1), want21 = fresh(b2, bzp1), want12 = fresh(b1, bzp2);
  ASSERT_NE(want11, want21);
  ASSERT_NE(want11, want12);
  // One row against the sums written out.
  for (int64_t j = 0; j < 20; ++j) {
    int64_t sum = 0;
    for (int64_t kk = 0; kk < 40; ++kk) sum += (int64_t{a[kk]} - azp) * (int64_t{b1[kk * 20 + j]} - bzp1[j]);
    ASSERT_EQ(want11[j], sum) << j;
  }
  auto kernel = (*factory)(Attributes{});
  ASSERT_TRUE(kernel.ok());
  std::vector<int8_t> b = b1, bzp = bzp1;
  EXPECT_EQ(run(**kernel, b, false, bzp, false), want11);
  b = b2;  // the same buffer, new weights
  EXPECT_EQ(run(**kernel, b, false, bzp, false), want21);
  EXPECT_EQ(run(**kernel, b1, true, bzp1, true), want11);
  EXPECT_EQ(run(**kernel, b1, true, bzp1, true), want11);
  bzp = bzp2;  // the same constant B, other zero points not marked constant
  EXPECT_EQ(run(**kernel, b1, true, bzp, false), want12);
  EXPECT_EQ(run(**kernel, b1, true, bzp1, true), want11);
  EXPECT_EQ(run(**kernel, b2, true, bzp1, true), want21);
}

TEST(QuantizeTest, QLinearMatMulRequantizes) {
  OpRunner r;
  std::mt19937 rng(11);
  const auto a = RandomValues<uint8_t>(rng, 2 * 8);
  const auto b = RandomValues<int8_t>(rng, 8 * 3);
  const float a_scale = 0.02f, b_scale[3] = {0.01f, 0.03f, 0.005f}, y_scale = 0.05f;
  const uint8_t a_zp = 120, y_zp = 100;
  const int8_t b_zp = -3;
  auto out = r.Run("QLinearMatMul", {},
                   {U8({2, 8}, a), F32({}, {a_scale}), U8({}, {a_zp}), I8({8, 3}, b),
                    F32({3}, {b_scale[0], b_scale[1], b_scale[2]}), I8({}, {b_zp}), F32({}, {y_scale}),
                    U8({}, {y_zp})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto got = (*out)[0].Values<uint8_t>();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      int32_t sum = 0;
      for (int kk = 0; kk < 8; ++kk) sum += (a[i * 8 + kk] - a_zp) * (b[kk * 3 + j] - b_zp);
      const float mult = a_scale * b_scale[j] / y_scale;
      const float want = std::fmin(255.0f, std::fmax(0.0f, std::nearbyint(static_cast<float>(sum) * mult) + y_zp));
      EXPECT_EQ(got[i * 3 + j], static_cast<uint8_t>(want)) << i << " " << j;
    }
  }
}

struct ConvCase {
  Shape x, w;
  Attributes attrs;
  std::vector<int64_t> strides, pads, dilations;  // 2-D, written out for the loop.
  int64_t group = 1;
};

template <typename X, typename W>
void CheckConvInteger(std::mt19937& rng, const ConvCase& c, bool per_channel) {
  OpRunner r;
  const auto xv = RandomValues<X>(rng, static_cast<size_t>(NumElements(c.x).value()));
  const auto wv = RandomValues<W>(rng, static_cast<size_t>(NumElements(c.w).value()));
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], wd = c.x[3];
  const int64_t m = c.w[0], kh = c.w[2], kw = c.w[3];
  const auto xzp = RandomValues<X>(rng, 1);
  const auto wzp = RandomValues<W>(rng, per_channel ? static_cast<size_t>(m) : 1);
  auto out = r.Run("ConvInteger", c.attrs,
                   {HostTensor::Of<X>(c.x, xv), HostTensor::Of<W>(c.w, wv), HostTensor::Of<X>({}, xzp),
                    HostTensor::Of<W>(per_channel ? Shape{m} : Shape{}, wzp)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const HostTensor& y = (*out)[0];
  const int64_t oh = y.shape[2], ow = y.shape[3];
  EXPECT_EQ(oh, (h + c.pads[0] + c.pads[2] - (c.dilations[0] * (kh - 1) + 1)) / c.strides[0] + 1);
  const auto got = y.template Values<int32_t>();
  const int64_t cg = ch / c.group, mg = m / c.group;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t mo = 0; mo < m; ++mo) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          int64_t want = 0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t cin = (mo / mg) * cg + ci;
            for (int64_t p = 0; p < kh; ++p) {
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = i * c.strides[0] - c.pads[0] + p * c.dilations[0];
                const int64_t xx = j * c.strides[1] - c.pads[1] + q * c.dilations[1];
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                want += (int64_t{xv[((b * ch + cin) * h + yy) * wd + xx]} - xzp[0]) *
                        (int64_t{wv[((mo * cg + ci) * kh + p) * kw + q]} - wzp[per_channel ? mo : 0]);
              }
            }
          }
          ASSERT_EQ(got[((b * m + mo) * oh + i) * ow + j], want) << b << " " << mo << " " << i << " " << j;
        }
      }
    }
  }
}

TEST(QuantizeTest, ConvIntegerMatchesALoop) {
  std::mt19937 rng(3);
  const ConvCase plain{{1, 2, 5, 6}, {3, 2, 3, 3}, {}, {1, 1}, {0, 0, 0, 0}, {1, 1}};
  const ConvCase strided{{2, 4, 7, 6},
                         {4, 2, 3, 2},
                         Attrs({{"strides", std::vector<int64_t>{2, 1}},
                                {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                                {"dilations", std::vector<int64_t>{1, 2}},
                                {"group", int64_t{2}}}),
                         {2, 1},
                         {1, 0, 2, 1},
                         {1, 2},
                         2};
  CheckConvInteger<uint8_t, uint8_t>(rng, plain, false);
  CheckConvInteger<uint8_t, int8_t>(rng, strided, true);
  CheckConvInteger<int8_t, uint8_t>(rng, strided, false);
  CheckConvInteger<int8_t, int8_t>(rng, plain, true);
  // Output planes of several tiles: 28x28 (784 positions: tiles of 392 on two compute
  // threads, 512 and 272 on one) and 40x30 with an odd count per image over 2 images.
  const ConvCase tiled{{1, 3, 28, 28}, {5, 3, 3, 3}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
                       {1, 1}, {1, 1, 1, 1}, {1, 1}};
  const ConvCase tiled2{{2, 2, 40, 30}, {3, 2, 1, 1}, {}, {1, 1}, {0, 0, 0, 0}, {1, 1}};
  CheckConvInteger<uint8_t, int8_t>(rng, tiled, true);
  CheckConvInteger<uint8_t, uint8_t>(rng, tiled2, false);
}

// ConvInteger's W, less its zero points, is packed once per group while the same
// constant W and zero points come in (QConvKernel), and never stands in for other
// weights: W not marked constant is packed on every call, even in the same buffer, and
// a constant W at another address is packed anew. X [1, 4, 5, 5], W [6, 2, 3, 3],
// group 2, pads 1.
TEST(QuantizeTest, ConvIntegerPackedWeightsKeptOnlyForTheSameConstant) {
  OpRunner r;
  const KernelFactory* factory = r.registry().FindKernel("ConvInteger", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  const Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}});
  std::mt19937 rng(17);
  auto x = RandomValues<uint8_t>(rng, 4 * 25);
  auto w1 = RandomValues<int8_t>(rng, 6 * 2 * 9), w2 = RandomValues<int8_t>(rng, 6 * 2 * 9);
  uint8_t x_zp = 3;
  int8_t w_zp = -2;
  auto run = [&](OpKernel& kernel, std::vector<int8_t>& w, bool constant) {
    std::vector<int32_t> y(6 * 25, -1);
    const TensorRef in[] = {{x.data(), DType::kUint8, {1, 4, 5, 5}},
                            {w.data(), DType::kInt8, {6, 2, 3, 3}, constant},
                            {&x_zp, DType::kUint8, {}, true},
                            {&w_zp, DType::kInt8, {}, true}};
    const TensorRef out[] = {{y.data(), DType::kInt32, {1, 6, 5, 5}}};
    EXPECT_TRUE(kernel.Compute(in, out).ok());
    return y;
  };
  // The sums written out.
  auto want_of = [&](const std::vector<int8_t>& w) {
    std::vector<int32_t> y(6 * 25);
    for (int64_t m = 0; m < 6; ++m) {
      for (int64_t o = 0; o < 25; ++o) {
        int64_t sum = 0;
        for (int64_t ci = 0; ci < 2; ++ci) {
          for (int64_t kk = 0; kk < 9; ++kk) {
            const int64_t i0 = o / 5 - 1 + kk / 3, i1 = o % 5 - 1 + kk % 3;
            if (i0 < 0 || i0 >= 5 || i1 < 0 || i1 >= 5) continue;
            const int64_t c = m / 3 * 2 + ci;
            sum += (int64_t{x[c * 25 + i0 * 5 + i1]} - x_zp) * (int64_t{w[(m * 2 + ci) * 9 + kk]} - w_zp);
          }
        }
        y[m * 25 + o] = static_cast<int32_t>(sum);
      }
    }
    return y;
  };
  const auto want1 = want_of(w1), want2 = want_of(w2);
  ASSERT_NE(want1, want2);
  auto kernel = (*factory)(attrs);
  ASSERT_TRUE(kernel.ok());
  std::vector<int8_t> w = w1;
  EXPECT_EQ(run(**kernel, w, false), want1);
  w = w2;  // the same buffer, new weights
  EXPECT_EQ(run(**kernel, w, false), want2);
  EXPECT_EQ(run(**kernel, w1, true), want1);
  EXPECT_EQ(run(**kernel, w1, true), want1);
  EXPECT_EQ(run(**kernel, w2, true), want2);
  w = w1;
  EXPECT_EQ(run(**kernel, w, false), want1);
}

TEST(QuantizeTest, QLinearConvWithBiasAndPerChannelScale) {
  OpRunner r;
  std::mt19937 rng(5);
  const auto x = RandomValues<uint8_t>(rng, 1 * 2 * 4 * 4);
  const auto w = RandomValues<int8_t>(rng, 2 * 2 * 3 * 3);
  const std::vector<int32_t> bias = {1000, -2000};
  const float x_scale = 0.03f, w_scale[2] = {0.004f, 0.02f}, y_scale = 0.1f;
  auto out = r.Run("QLinearConv", Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
                   {U8({1, 2, 4, 4}, x), F32({}, {x_scale}), U8({}, {128}), I8({2, 2, 3, 3}, w),
                    F32({2}, {w_scale[0], w_scale[1]}), I8({2}, {0, 0}), F32({}, {y_scale}), I8({}, {-5}),
                    HostTensor::Of<int32_t>({2}, bias)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto got = (*out)[0].Values<int8_t>();
  ASSERT_EQ((*out)[0].shape, (Shape{1, 2, 4, 4}));
  for (int mo = 0; mo < 2; ++mo) {
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        int32_t sum = bias[mo];
        for (int ci = 0; ci < 2; ++ci) {
          for (int p = 0; p < 3; ++p) {
            for (int q = 0; q < 3; ++q) {
              const int yy = i - 1 + p, xx = j - 1 + q;
              if (yy < 0 || yy >= 4 || xx < 0 || xx >= 4) continue;
              sum += (x[(ci * 4 + yy) * 4 + xx] - 128) * w[((mo * 2 + ci) * 3 + p) * 3 + q];
            }
          }
        }
        const float mult = x_scale * w_scale[mo] / y_scale;
        const float want = std::fmin(127.0f, std::fmax(-128.0f, std::nearbyint(static_cast<float>(sum) * mult) - 5));
        EXPECT_EQ(got[(mo * 4 + i) * 4 + j], static_cast<int8_t>(want)) << mo << i << j;
      }
    }
  }
}

// One call of an integer convolution or matmul through a new kernel, W (B) marked
// constant or not (oneDNN's int8 primitives take only constant weights, on a CPU with
// VNNI; the int16 GEMMs take the rest), x_zero_point (input 2) constant or computed at
// run time.
// Returns Y's bytes.
std::vector<uint8_t> RunQuantized(std::string_view op, const Attributes& attrs, std::vector<HostTensor> inputs,
                              const Shape& y_shape, DType y_dtype, bool w_constant, bool x_zp_constant) {
  OpRunner r;
  const KernelFactory* factory = r.registry().FindKernel(op, DeviceKind::kCpu);
  EXPECT_NE(factory, nullptr);
  if (factory == nullptr) return {};
  const int w_slot = op.starts_with("QLinear") ? 3 : 1;
  std::vector<TensorRef> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool constant = static_cast<int>(i) == w_slot ? w_constant : i == 2 ? x_zp_constant : i != 0;
    in.push_back({inputs[i].bytes.data(), inputs[i].dtype, inputs[i].shape, constant});
  }
  std::vector<uint8_t> y(static_cast<size_t>(NumElements(y_shape).value()) * DTypeSize(y_dtype), 0xAB);
  const TensorRef out[] = {{y.data(), y_dtype, y_shape}};
  auto kernel = (*factory)(attrs);
  EXPECT_TRUE(kernel.ok());
  if (!kernel.ok()) return {};
  const Status st = (*kernel)->Compute(in, out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return y;
}

// oneDNN's int8 convolution (W constant) gives the int16 GEMMs' bits (W not constant):
// ConvInteger with uint8 weights at zero point 128, QLinearConv with int8 weights, a
// bias, per-channel scales and either output type; x_zero_point compiled in (constant)
// or taken off after (run time, X padded with it); strides, pads, dilations, groups.
TEST(QuantizeTest, DnnlInt8ConvolutionGivesTheInt16PathsBits) {
  std::mt19937 rng(23);
  const Attributes window = Attrs({{"strides", std::vector<int64_t>{2, 1}},
                                   {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                                   {"dilations", std::vector<int64_t>{1, 2}},
                                   {"group", int64_t{2}}});
  const Attributes same = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  for (bool x_zp_constant : {true, false}) {
    SCOPED_TRACE(x_zp_constant ? "x_zero_point constant" : "x_zero_point at run time");
    {
      const Shape xs{2, 4, 9, 8}, ws{4, 2, 3, 2}, ys{2, 4, 5, 7};
      const std::vector<HostTensor> in = {U8(xs, RandomValues<uint8_t>(rng, 576)), U8(ws, RandomValues<uint8_t>(rng, 48)),
                                          U8({}, {131}), U8({}, {128})};
      EXPECT_EQ(RunQuantized("ConvInteger", window, in, ys, DType::kInt32, true, x_zp_constant),
                RunQuantized("ConvInteger", window, in, ys, DType::kInt32, false, x_zp_constant));
    }
    {
      // 16 channels and more: X (uint8) moved by our own transposes, Y (int32) by oneDNN.
      const Shape xs{2, 16, 9, 7}, ws{18, 16, 3, 3}, ys{2, 18, 9, 7};
      const std::vector<HostTensor> in = {U8(xs, RandomValues<uint8_t>(rng, 2016)),
                                          U8(ws, RandomValues<uint8_t>(rng, 2592)), U8({}, {131}), U8({}, {128})};
      EXPECT_EQ(RunQuantized("ConvInteger", same, in, ys, DType::kInt32, true, x_zp_constant),
                RunQuantized("ConvInteger", same, in, ys, DType::kInt32, false, x_zp_constant));
    }
    struct Geometry {
      Shape xs, ws, ys;
      Attributes attrs;
    };
    const Geometry geometries[] = {
        {{1, 8, 10, 10}, {16, 8, 3, 3}, {1, 16, 10, 10}, same},
        {{1, 3, 32, 32}, {16, 3, 7, 7}, {1, 16, 16, 16},
         Attrs({{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}})},
        {{1, 32, 14, 14}, {24, 32, 1, 1}, {1, 24, 7, 7}, Attrs({{"strides", std::vector<int64_t>{2, 2}}})},
        {{1, 16, 14, 14}, {16, 16, 3, 3}, {1, 16, 7, 7},
         Attrs({{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
        // Batches, and X and Y of 16 channels or more moved between NCHW and oneDNN's
        // channels-last by our own transposes (conv_common.h, MovePlainChannelsLast).
        {{2, 24, 9, 11}, {20, 24, 3, 3}, {2, 20, 9, 11}, same}};
    for (const Geometry& geo : geometries) {
      for (DType y_dtype : {DType::kUint8, DType::kInt8}) {
        SCOPED_TRACE(ShapeToString(geo.ws));
        const int64_t m = geo.ws[0];
        std::vector<float> w_scale(static_cast<size_t>(m));
        std::vector<int32_t> bias(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) {
          w_scale[i] = 0.002f + 0.001f * static_cast<float>(i % 16);
          bias[i] = static_cast<int32_t>(rng() % 4001) - 2000;
        }
        const HostTensor y_zp = y_dtype == DType::kUint8 ? U8({}, {0}) : I8({}, {-5});
        const std::vector<HostTensor> in = {
            U8(geo.xs, RandomValues<uint8_t>(rng, static_cast<size_t>(NumElements(geo.xs).value()))),
            F32({}, {0.03f}), U8({}, {120}),
            I8(geo.ws, RandomValues<int8_t>(rng, static_cast<size_t>(NumElements(geo.ws).value()))),
            F32({m}, w_scale), I8({m}, std::vector<int8_t>(static_cast<size_t>(m), 0)), F32({}, {0.1f}), y_zp,
            HostTensor::Of<int32_t>({m}, bias)};
        EXPECT_EQ(RunQuantized("QLinearConv", geo.attrs, in, geo.ys, y_dtype, true, x_zp_constant),
                  RunQuantized("QLinearConv", geo.attrs, in, geo.ys, y_dtype, false, x_zp_constant));
      }
    }
  }
}

// `bytes` of a channels-first [N, C, S..] tensor of `es`-byte elements as channels-last.
std::vector<uint8_t> ToChannelsLastBytes(const std::vector<uint8_t>& bytes, const Shape& cf, size_t es) {
  const int64_t n = cf[0], c = cf[1], sp = NumElements(cf).value() / (n * c);
  std::vector<uint8_t> out(bytes.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < sp; ++i)
        std::memcpy(&out[((b * sp + i) * c + ch) * es], &bytes[((b * c + ch) * sp + i) * es], es);
  return out;
}

// layout "NHWC" (set by the compiler's layout pass): X and Y channels-last give the
// channels-first values, W constant (oneDNN on a CPU with VNNI) or not (the int16 GEMMs
// on transposed copies), x_zero_point constant or at run time (with pads, a run-time
// zero point pads a channels-last copy of X with itself before oneDNN).
TEST(QuantizeTest, ChannelsLastConvolutionGivesTheChannelsFirstValues) {
  std::mt19937 rng(31);
  const Shape xs{2, 4, 7, 6}, ws{8, 4, 3, 3}, ys{2, 8, 4, 3};
  const Attributes nchw = Attrs({{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Attributes nhwc = nchw;
  nhwc.Set("layout", std::string("NHWC"));
  const Shape xs_last{2, 7, 6, 4}, ys_last{2, 4, 3, 8};
  for (bool w_constant : {true, false}) {
    for (bool x_zp_constant : {true, false}) {
      SCOPED_TRACE(std::string(w_constant ? "W constant" : "W not constant") +
                   (x_zp_constant ? ", x_zero_point constant" : ", x_zero_point at run time"));
      std::vector<HostTensor> in = {U8(xs, RandomValues<uint8_t>(rng, 336)), U8(ws, RandomValues<uint8_t>(rng, 288)),
                                    U8({}, {130}), U8({}, {128})};
      const auto want = RunQuantized("ConvInteger", nchw, in, ys, DType::kInt32, w_constant, x_zp_constant);
      in[0] = HostTensor{DType::kUint8, xs_last, ToChannelsLastBytes(in[0].bytes, xs, 1)};
      EXPECT_EQ(RunQuantized("ConvInteger", nhwc, in, ys_last, DType::kInt32, w_constant, x_zp_constant),
                ToChannelsLastBytes(want, ys, 4));
      for (DType y_dtype : {DType::kUint8, DType::kInt8}) {
        std::vector<float> w_scale(8);
        for (int i = 0; i < 8; ++i) w_scale[i] = 0.003f + 0.001f * static_cast<float>(i);
        std::vector<HostTensor> q = {U8(xs, RandomValues<uint8_t>(rng, 336)), F32({}, {0.04f}), U8({}, {125}),
                                     I8(ws, RandomValues<int8_t>(rng, 288)), F32({8}, w_scale),
                                     I8({8}, std::vector<int8_t>(8, 0)), F32({}, {0.1f}),
                                     y_dtype == DType::kUint8 ? U8({}, {128}) : I8({}, {0}),
                                     HostTensor::Of<int32_t>({8}, {10, -20, 30, -40, 50, -60, 70, -80})};
        const auto want_q = RunQuantized("QLinearConv", nchw, q, ys, y_dtype, w_constant, x_zp_constant);
        q[0] = HostTensor{DType::kUint8, xs_last, ToChannelsLastBytes(q[0].bytes, xs, 1)};
        EXPECT_EQ(RunQuantized("QLinearConv", nhwc, q, ys_last, y_dtype, w_constant, x_zp_constant),
                  ToChannelsLastBytes(want_q, ys, 1));
      }
    }
  }
}

// y_zero_point is added after rounding: (0 - 3) * 1 * 0.49999997 is -1.4999999, which
// rounds to -1, and 128 - 1 is 127 (added before rounding, in float32, it would be
// 126.5 and round to 126). Both forms, both paths.
TEST(QuantizeTest, QLinearZeroPointIsAddedAfterRounding) {
  const float half_less = 0.49999997f;
  for (bool constant : {true, false}) {
    const std::vector<HostTensor> conv = {U8({1, 1, 1, 1}, {0}), F32({}, {1.0f}), U8({}, {3}), I8({1, 1, 1, 1}, {1}),
                                          F32({}, {half_less}), I8({}, {0}), F32({}, {1.0f}), U8({}, {128})};
    EXPECT_EQ(RunQuantized("QLinearConv", {}, conv, {1, 1, 1, 1}, DType::kUint8, constant, true),
              std::vector<uint8_t>{127});
    const std::vector<HostTensor> matmul = {U8({1, 1}, {0}), F32({}, {1.0f}), U8({}, {3}), I8({1, 1}, {1}),
                                            F32({}, {half_less}), I8({}, {0}), F32({}, {1.0f}), U8({}, {128})};
    EXPECT_EQ(RunQuantized("QLinearMatMul", {}, matmul, {1, 1}, DType::kUint8, constant, true),
              std::vector<uint8_t>{127});
  }
}

// oneDNN's int8 matmul (B constant) gives the int16 GEMMs' bits (B not constant):
// MatMulInteger with batches of A over one B, uint8 B at zero point 128 and int8 B at
// per-column zero points 0; QLinearMatMul with per-column scales and either output type.
TEST(QuantizeTest, DnnlInt8MatMulGivesTheInt16PathsBits) {
  std::mt19937 rng(29);
  const Shape as{2, 5, 64}, bs{64, 48}, ys{2, 5, 48};
  {
    const std::vector<HostTensor> in = {U8(as, RandomValues<uint8_t>(rng, 640)), U8(bs, RandomValues<uint8_t>(rng, 3072)),
                                        U8({}, {131}), U8({}, {128})};
    EXPECT_EQ(RunQuantized("MatMulInteger", {}, in, ys, DType::kInt32, true, false),
              RunQuantized("MatMulInteger", {}, in, ys, DType::kInt32, false, false));
  }
  {
    const std::vector<HostTensor> in = {U8(as, RandomValues<uint8_t>(rng, 640)), I8(bs, RandomValues<int8_t>(rng, 3072)),
                                        U8({}, {7}), I8({48}, std::vector<int8_t>(48, 0))};
    EXPECT_EQ(RunQuantized("MatMulInteger", {}, in, ys, DType::kInt32, true, false),
              RunQuantized("MatMulInteger", {}, in, ys, DType::kInt32, false, false));
  }
  for (DType y_dtype : {DType::kUint8, DType::kInt8}) {
    std::vector<float> b_scale(48);
    for (int i = 0; i < 48; ++i) b_scale[i] = 0.001f + 0.0005f * static_cast<float>(i);
    const HostTensor y_zp = y_dtype == DType::kUint8 ? U8({}, {9}) : I8({}, {-3});
    const std::vector<HostTensor> in = {U8(as, RandomValues<uint8_t>(rng, 640)), F32({}, {0.05f}), U8({}, {100}),
                                        I8(bs, RandomValues<int8_t>(rng, 3072)), F32({48}, b_scale),
                                        I8({48}, std::vector<int8_t>(48, 0)), F32({}, {0.2f}), y_zp};
    EXPECT_EQ(RunQuantized("QLinearMatMul", {}, in, ys, y_dtype, true, true),
              RunQuantized("QLinearMatMul", {}, in, ys, y_dtype, false, true));
  }
}

// FusedMatMulInteger: y = float32(MatMulInteger's sum) * scale[j] + bias[j], then its
// activation (Relu, Gelu) when it has one. The int16 path (B not constant) computes
// exactly that, in that order; oneDNN's int8 matmul (B constant: output scales, then a
// binary add post-op, the activation after it) gives it bit for bit on an AVX-512 CPU,
// within a rounding elsewhere. Per-tensor and per-column scales, with and without the
// bias, batches of A.
TEST(QuantizeTest, FusedMatMulIntegerScalesAndAddsTheBiasToTheSums) {
  std::mt19937 rng(31);
  const Shape as{2, 5, 64}, bs{64, 48}, ys{2, 5, 48};
  constexpr int kY = 2 * 5 * 48;
  const std::vector<uint8_t> a = RandomValues<uint8_t>(rng, 640);
  const std::vector<int8_t> b = RandomValues<int8_t>(rng, 3072);
  std::vector<float> column_scales(48), bias(48);
  for (int j = 0; j < 48; ++j) {
    column_scales[j] = 0.001f + 0.0005f * static_cast<float>(j);
    bias[j] = 0.25f * static_cast<float>(j % 7) - 0.75f;
  }
  const std::vector<HostTensor> integer = {U8(as, a), I8(bs, b), U8({}, {131}), I8({}, {0})};
  const std::vector<uint8_t> sums_bytes = RunQuantized("MatMulInteger", {}, integer, ys, DType::kInt32, false, false);
  ASSERT_EQ(sums_bytes.size(), kY * sizeof(int32_t));
  std::vector<int32_t> sums(kY);
  std::memcpy(sums.data(), sums_bytes.data(), sums_bytes.size());
  for (const char* activation : {"", "Relu", "Gelu"}) {
    for (bool per_column : {false, true}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(std::string(per_column ? "per column" : "per tensor") + (with_bias ? ", bias " : " ") + activation);
        const Attributes attrs = *activation ? Attrs({{"activation", std::string(activation)}}) : Attributes{};
        std::vector<HostTensor> in = integer;
        in.push_back(per_column ? F32({48}, column_scales) : F32({}, {0.0123f}));
        if (with_bias) in.push_back(F32({48}, bias));
        std::vector<float> want(kY);
        for (int i = 0; i < kY; ++i) {
          const float v = static_cast<float>(sums[i]) * (per_column ? column_scales[i % 48] : 0.0123f);
          const float pre = with_bias ? v + bias[i % 48] : v;
          want[i] = *activation == 'R' ? scalar::Relu()(pre) : *activation == 'G' ? scalar::Gelu()(pre) : pre;
        }
        for (bool b_constant : {false, true}) {
          const std::vector<uint8_t> bytes = RunQuantized("FusedMatMulInteger", attrs, in, ys, DType::kFloat32,
                                                          b_constant, false);
          ASSERT_EQ(bytes.size(), kY * sizeof(float));
          std::vector<float> got(kY);
          std::memcpy(got.data(), bytes.data(), bytes.size());
          for (int i = 0; i < kY; ++i) {
            if (b_constant) {  // bit for bit on this VM's AVX-512; another ISA may fuse the scale and bias
              ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << "oneDNN at " << i;
            } else {
              ASSERT_EQ(got[i], want[i]) << "int16 path at " << i;
            }
          }
        }
      }
    }
  }
}

// DnnlQConv takes what it can compute exactly and leaves the rest to the int16 path:
// constant weights that fit int8 less their zero points (ConvInteger: but for one value
// in 64 at most), on a CPU with VNNI; sums past 2^24 stay exact.
TEST(QuantizeTest, DnnlInt8ConvolutionTakesOnlyWhatItComputesExactly) {
  if (!internal::DnnlQConv::Available()) GTEST_SKIP() << "no VNNI on this CPU: the int16 GEMMs run every case";
  const Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  // X all 255, W 127 but every 7th 126: sums of 9216 products, about 3e8.
  std::vector<uint8_t> x(1024 * 36, 255), w_u8(16 * 1024 * 9, 200);
  std::vector<int8_t> w(16 * 1024 * 9, 127);
  for (size_t i = 0; i < w.size(); i += 7) w[i] = 126;
  std::vector<int32_t> y(16 * 36);
  const int32_t zp0[16] = {}, zp128[16] = {128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128};
  const TensorRef xt{x.data(), DType::kUint8, {1, 1024, 6, 6}};
  TensorRef wt{w.data(), DType::kInt8, {16, 1024, 3, 3}, true};
  const TensorRef yt{y.data(), DType::kInt32, {1, 16, 6, 6}};
  internal::QConvCall call;
  call.op = "ConvInteger";
  call.attrs = &attrs;
  call.x = &xt;
  call.w = &wt;
  call.w_zero_points = zp0;
  call.y = &yt;
  internal::DnnlQConv conv;
  // A run-time zero point with pads, channels-last (a dynamically quantized model's
  // convolutions under the layout pass) included: X padded with the zero point first.
  const TensorRef xt_last{x.data(), DType::kUint8, {1, 6, 6, 1024}};
  const TensorRef yt_last{y.data(), DType::kInt32, {1, 6, 6, 16}};
  for (bool channels_last : {false, true}) {
    call.channels_last = channels_last;
    call.x = channels_last ? &xt_last : &xt;
    call.y = channels_last ? &yt_last : &yt;
    for (bool constant_zp : {true, false}) {
      SCOPED_TRACE(std::string(channels_last ? "NHWC" : "NCHW") + (constant_zp ? ", constant zero point" : ""));
      call.x_zero_point = constant_zp ? 0 : 3;
      call.x_zero_point_constant = constant_zp;
      auto ran = conv.Run(call);
      ASSERT_TRUE(ran.ok()) << ran.status().ToString();
      EXPECT_TRUE(*ran);
      for (int64_t m = 0; m < 16; ++m) {
        for (int64_t i = 0; i < 6; ++i) {
          for (int64_t j = 0; j < 6; ++j) {
            int64_t want = 0;
            for (int64_t c = 0; c < 1024; ++c) {
              for (int64_t p = 0; p < 3; ++p) {
                for (int64_t q = 0; q < 3; ++q) {
                  if (i - 1 + p < 0 || i - 1 + p >= 6 || j - 1 + q < 0 || j - 1 + q >= 6) continue;
                  want += (255 - call.x_zero_point) * int64_t{w[((m * 1024 + c) * 3 + p) * 3 + q]};
                }
              }
            }
            const int32_t got = channels_last ? y[(i * 6 + j) * 16 + m] : y[(m * 6 + i) * 6 + j];
            ASSERT_EQ(got, want) << m << " " << i << " " << j;
          }
        }
      }
    }
  }
  call.channels_last = false;
  call.x = &xt;
  call.y = &yt;
  EXPECT_EQ(conv.runs(), 4);
  // uint8 weights 200 at zero point 0: 200 is no int8. At zero point 128: 72 is.
  wt = {w_u8.data(), DType::kUint8, {16, 1024, 3, 3}, true};
  auto ran = conv.Run(call);
  ASSERT_TRUE(ran.ok());
  EXPECT_FALSE(*ran);
  call.w_zero_points = zp128;
  ran = conv.Run(call);
  ASSERT_TRUE(ran.ok());
  EXPECT_TRUE(*ran);
  EXPECT_EQ(y[0], (255 - 3) * 72 * 1024 * 4);  // a corner: 2 x 2 of the window
  // W not constant: left to the int16 path.
  wt.constant = false;
  ran = conv.Run(call);
  ASSERT_TRUE(ran.ok());
  EXPECT_FALSE(*ran);
  EXPECT_EQ(conv.runs(), 5);
}

// uint8 weights at an asymmetric zero point (a dynamic quantizer's): W - zp outside int8
// for a few values. oneDNN sums the values clamped into int8 and the rest is added after;
// the int16 path's bits (W not constant), both layouts, both kinds of x_zero_point,
// strides, pads, dilations and groups.
TEST(QuantizeTest, DnnlInt8ConvolutionAddsTheWeightsOutsideInt8) {
  if (!internal::DnnlQConv::Available()) GTEST_SKIP() << "no VNNI on this CPU: the int16 GEMMs run every case";
  std::mt19937 rng(37);
  struct Geometry {
    Shape xs, ws, ys;
    Attributes attrs;
  };
  const Geometry geometries[] = {
      {{2, 8, 9, 8}, {16, 4, 3, 2}, {2, 16, 5, 7},
       Attrs({{"strides", std::vector<int64_t>{2, 1}},
              {"pads", std::vector<int64_t>{1, 0, 2, 1}},
              {"dilations", std::vector<int64_t>{1, 2}},
              {"group", int64_t{2}}})},
      {{1, 8, 10, 10}, {16, 8, 3, 3}, {1, 16, 10, 10}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {{1, 8, 10, 10}, {16, 8, 3, 3}, {1, 16, 8, 8}, Attrs({})}};
  const std::vector<int32_t> w_zps(16, 100);
  for (const Geometry& geo : geometries) {
    const size_t x_count = static_cast<size_t>(NumElements(geo.xs).value());
    const size_t w_count = static_cast<size_t>(NumElements(geo.ws).value());
    std::vector<uint8_t> w(w_count);
    for (uint8_t& v : w) v = static_cast<uint8_t>(rng() % 228);  // W - 100 in [-100, 127]
    for (size_t i = 0; i < w_count / 100; ++i) w[rng() % w_count] = static_cast<uint8_t>(228 + rng() % 28);
    const std::vector<uint8_t> x = RandomValues<uint8_t>(rng, x_count);
    for (bool x_zp_constant : {true, false}) {
      const std::vector<HostTensor> in = {U8(geo.xs, x), U8(geo.ws, w), U8({}, {131}), U8({}, {100})};
      const std::vector<uint8_t> want = RunQuantized("ConvInteger", geo.attrs, in, geo.ys, DType::kInt32, false,
                                                     x_zp_constant);
      for (bool channels_last : {false, true}) {
        SCOPED_TRACE(ShapeToString(geo.ws) + (channels_last ? " NHWC" : " NCHW") +
                     (x_zp_constant ? ", x_zero_point constant" : ", x_zero_point at run time"));
        const Shape xs_last{geo.xs[0], geo.xs[2], geo.xs[3], geo.xs[1]};
        const Shape ys_last{geo.ys[0], geo.ys[2], geo.ys[3], geo.ys[1]};
        const std::vector<uint8_t> x_bytes = channels_last ? ToChannelsLastBytes(x, geo.xs, 1) : x;
        std::vector<uint8_t> y(static_cast<size_t>(NumElements(geo.ys).value()) * 4, 0xAB);
        const TensorRef xt{const_cast<uint8_t*>(x_bytes.data()), DType::kUint8, channels_last ? xs_last : geo.xs};
        const TensorRef wt{w.data(), DType::kUint8, geo.ws, true};
        const TensorRef yt{y.data(), DType::kInt32, channels_last ? ys_last : geo.ys};
        internal::QConvCall call;
        call.op = "ConvInteger";
        call.attrs = &geo.attrs;
        call.x = &xt;
        call.w = &wt;
        call.x_zero_point = 131;
        call.x_zero_point_constant = x_zp_constant;
        call.w_zero_points = w_zps;
        call.y = &yt;
        call.channels_last = channels_last;
        internal::DnnlQConv conv;
        for (int call_number = 0; call_number < 2; ++call_number) {  // the second with the weights kept
          std::fill(y.begin(), y.end(), uint8_t{0xAB});
          auto ran = conv.Run(call);
          ASSERT_TRUE(ran.ok()) << ran.status().ToString();
          ASSERT_TRUE(*ran);
          EXPECT_EQ(y, channels_last ? ToChannelsLastBytes(want, geo.ys, 4) : want);
        }
        // QLinearConv requantizes inside the primitive: such weights are not its.
        const std::vector<float> multipliers(16, 0.01f);
        call.op = "QLinearConv";
        call.multipliers = multipliers;
        auto ran = conv.Run(call);
        ASSERT_TRUE(ran.ok());
        EXPECT_FALSE(*ran);
        EXPECT_EQ(conv.runs(), 2);
      }
    }
  }
}

TEST(QuantizeTest, Errors) {
  OpRunner r;
  struct Case {
    const char* op;
    std::vector<HostTensor> in;
    const char* want;
  };
  const Case cases[] = {
      {"QuantizeLinear", {HostTensor::Of<double>({1}, {1}), F32({}, {1})}, "float32 or int32"},
      {"QuantizeLinear", {F32({1}, {1}), HostTensor::Of<double>({}, {1})}, "scale must be float32"},
      {"QuantizeLinear", {F32({2, 3}, std::vector<float>(6)), F32({2}, {1, 1})}, "must hold one value or 3"},
      {"QuantizeLinear", {F32({1}, {1}), F32({}, {1}), HostTensor::Of<int32_t>({}, {0})}, "uint8 or int8"},
      {"DequantizeLinear", {U8({1}, {1}), F32({}, {1}), I8({}, {0})}, "x's dtype"},
      {"DynamicQuantizeLinear", {HostTensor::Of<double>({1}, {1})}, "float32"},
      {"MatMulInteger", {F32({2, 2}, {1, 2, 3, 4}), U8({2, 2}, {1, 2, 3, 4})}, "uint8 or int8"},
      {"MatMulInteger", {U8({2, 3}, std::vector<uint8_t>(6)), U8({2, 2}, {1, 2, 3, 4})}, "inner dims"},
      {"MatMulInteger", {U8({2, 2}, {1, 2, 3, 4}), U8({2, 2}, {1, 2, 3, 4}), U8({2}, {1, 2})}, "per-row"},
      {"MatMulInteger", {U8({2, 2}, {1, 2, 3, 4}), U8({2, 2}, {1, 2, 3, 4}), U8({}, {1}), U8({3}, {1, 2, 3})},
       "one value or 2"},
      {"ConvInteger", {U8({1, 3, 4, 4}, std::vector<uint8_t>(48)), U8({2, 2, 3, 3}, std::vector<uint8_t>(36))},
       "input channels"},
  };
  for (const Case& c : cases) {
    auto out = r.Run(c.op, {}, c.in);
    ASSERT_FALSE(out.ok()) << c.op << " " << c.want;
    EXPECT_NE(out.status().message().find(c.want), std::string::npos) << out.status().ToString();
  }
}

}  // namespace quantize_test
}  // namespace remex::kernels
