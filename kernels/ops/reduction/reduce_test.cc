// Reduce*, ArgMax, ArgMin, TopK.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace reduce_test {

using testing::Attrs;
using testing::HostTensor;
using testing::Iota;
using testing::OpRunner;

constexpr float kInf = std::numeric_limits<float>::infinity();

HostTensor Axes(std::vector<int64_t> axes) {
  const int64_t n = static_cast<int64_t>(axes.size());
  return HostTensor::Of<int64_t>({n}, axes);
}

// ---------------------------------------------------------------------------
// A naive reference: every element's output index by explicit coordinates, in double.

std::vector<double> ReferenceReduce(const std::string& op, const Shape& shape,
                                    const std::vector<double>& x, const std::vector<bool>& reduced) {
  const size_t rank = shape.size();
  int64_t out_n = 1, red_n = 1;
  for (size_t d = 0; d < rank; ++d) (reduced[d] ? red_n : out_n) *= shape[d];
  std::vector<std::vector<double>> groups(out_n);
  std::vector<int64_t> idx(rank, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d) {
      if (!reduced[d]) o = o * shape[d] + idx[d];
    }
    groups[o].push_back(x[i]);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  std::vector<double> out(out_n);
  for (int64_t o = 0; o < out_n; ++o) {
    const std::vector<double>& g = groups[o];
    double r = 0;
    if (op == "ReduceSum" || op == "ReduceMean") {
      for (double v : g) r += v;
      if (op == "ReduceMean") r /= static_cast<double>(g.size());
    } else if (op == "ReduceProd") {
      r = 1;
      for (double v : g) r *= v;
    } else if (op == "ReduceMax") {
      r = -INFINITY;
      for (double v : g) r = std::max(r, v);
    } else if (op == "ReduceMin") {
      r = INFINITY;
      for (double v : g) r = std::min(r, v);
    } else if (op == "ReduceL1") {
      for (double v : g) r += std::abs(v);
    } else if (op == "ReduceL2") {
      for (double v : g) r += v * v;
      r = std::sqrt(r);
    } else if (op == "ReduceSumSquare") {
      for (double v : g) r += v * v;
    } else if (op == "ReduceLogSum") {
      for (double v : g) r += v;
      r = std::log(r);
    } else if (op == "ReduceLogSumExp") {
      for (double v : g) r += std::exp(v);
      r = std::log(r);
    }
    out[o] = r;
  }
  (void)red_n;
  return out;
}

constexpr const char* kReduceOps[] = {"ReduceSum",       "ReduceMean", "ReduceProd",
                                      "ReduceMax",       "ReduceMin",  "ReduceL1",
                                      "ReduceL2",        "ReduceSumSquare", "ReduceLogSum",
                                      "ReduceLogSumExp"};

TEST(ReduceTest, MatchesReferenceOnRandomShapesAndAxes) {
  OpRunner r;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> val(0.5f, 1.5f);  // Positive: LogSum, Prod stay sane.
  int checked = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape shape(rank);
    for (int64_t& d : shape) d = 1 + static_cast<int64_t>(rng() % 5);
    const int64_t n = *NumElements(shape);
    std::vector<float> xf(n);
    std::vector<double> xd(n);
    for (int64_t i = 0; i < n; ++i) xd[i] = xf[i] = val(rng);
    std::vector<int64_t> axes;
    std::vector<bool> reduced(rank, false);
    for (int d = 0; d < rank; ++d) {
      if (rng() % 2) {
        axes.push_back(rng() % 2 ? d : d - rank);
        reduced[d] = true;
      }
    }
    std::shuffle(axes.begin(), axes.end(), rng);
    if (axes.empty()) reduced.assign(rank, true);  // Empty axes reduce everything.
    const bool keepdims = rng() % 2;
    const char* op = kReduceOps[iter % std::size(kReduceOps)];
    Attributes attrs = Attrs({{"keepdims", int64_t{keepdims}}});
    std::vector<HostTensor> in = {HostTensor::Of<float>(shape, xf)};
    if (iter % 3 == 0) {
      in.push_back(Axes(axes));  // Opset 13+ ReduceSum / opset 18 form.
    } else {
      attrs.Set("axes", axes);
    }
    auto out = r.Run(op, attrs, in);
    ASSERT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    Shape want_shape;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[d]) {
        want_shape.push_back(shape[d]);
      } else if (keepdims) {
        want_shape.push_back(1);
      }
    }
    EXPECT_EQ((*out)[0].shape, want_shape) << op;
    const std::vector<double> want = ReferenceReduce(op, shape, xd, reduced);
    const std::vector<float> got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-6) << op << " at " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

TEST(ReduceTest, HandCheckedExample) {
  OpRunner r;
  // [[1, 2], [3, 4]] x [3, 2, 2]... here a [3, 2, 2] tensor 1..12.
  HostTensor x = HostTensor::Of<float>({3, 2, 2}, Iota(12, 1));
  auto out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{1}}}), {x, Axes({1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{3, 1, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 6, 12, 14, 20, 22}));
  out = r.Run("ReduceMean", Attrs({{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}}),
              {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1.5, 3.5, 5.5, 7.5, 9.5, 11.5}));
  out = r.Run("ReduceMax", Attrs({{"axes", std::vector<int64_t>{0, 2}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{10, 12}));
  out = r.Run("ReduceProd", Attrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}),
              {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1 * 5 * 9, 2 * 6 * 10, 3 * 7 * 11,
                                                           4 * 8 * 12}));
  // Default: every axis, keepdims.
  out = r.Run("ReduceMin", {}, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1}));
  out = r.Run("ReduceL2", Attrs({{"keepdims", int64_t{0}}}),
              {HostTensor::Of<float>({2}, {3, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5}));
}

TEST(ReduceTest, EmptyAxesAndNoop) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({2, 3}, Iota(6));
  // Empty axes input reduces all...
  auto out = r.Run("ReduceSum", {}, {x, HostTensor::Of<int64_t>({0}, {})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{15}));
  // ... as does an absent one ...
  out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{0}}}), {x, HostTensor::Absent()});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  // ... unless noop_with_empty_axes: the input comes back.
  out = r.Run("ReduceSum", Attrs({{"noop_with_empty_axes", int64_t{1}}}),
              {x, HostTensor::Of<int64_t>({0}, {})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), Iota(6));
  out = r.Run("ReduceSumSquare", Attrs({{"noop_with_empty_axes", int64_t{1}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 1, 4, 9, 16, 25}));
  // A scalar reduces to itself.
  out = r.Run("ReduceMean", {}, {HostTensor::Of<float>({}, {2.5f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f}));
}

TEST(ReduceTest, EmptySetsGiveTheIdentity) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {2, 0, 3});
  auto run = [&](const char* op, HostTensor t) {
    auto out = r.Run(op, Attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}),
                     {t});
    EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    if (out.ok()) {
      EXPECT_EQ((*out)[0].shape, (Shape{2, 3})) << op;
    }
    return out.ok() ? (*out)[0] : HostTensor{};
  };
  EXPECT_EQ(run("ReduceSum", x).Values<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(run("ReduceProd", x).Values<float>(), std::vector<float>(6, 1.f));
  EXPECT_EQ(run("ReduceMax", x).Values<float>(), std::vector<float>(6, -kInf));
  EXPECT_EQ(run("ReduceMin", x).Values<float>(), std::vector<float>(6, kInf));
  EXPECT_EQ(run("ReduceL2", x).Values<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(run("ReduceLogSum", x).Values<float>(), std::vector<float>(6, -kInf));
  EXPECT_EQ(run("ReduceLogSumExp", x).Values<float>(), std::vector<float>(6, -kInf));
  for (float v : run("ReduceMean", x).Values<float>()) EXPECT_TRUE(std::isnan(v));
  HostTensor xi = HostTensor::Zeros(DType::kInt32, {2, 0, 3});
  EXPECT_EQ(run("ReduceMax", xi).Values<int32_t>(), std::vector<int32_t>(6, INT32_MIN));
  EXPECT_EQ(run("ReduceMin", xi).Values<int32_t>(), std::vector<int32_t>(6, INT32_MAX));
  EXPECT_EQ(run("ReduceMean", xi).Values<int32_t>(), std::vector<int32_t>(6, 0));
  HostTensor xu = HostTensor::Zeros(DType::kUint8, {2, 0, 3});
  EXPECT_EQ(run("ReduceMin", xu).Values<uint8_t>(), std::vector<uint8_t>(6, 255));
  // Kept dims of extent 0: an empty output.
  auto out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{0}}}),
                   {x, Axes({2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 0}));
}

TEST(ReduceTest, IntegerArithmetic) {
  OpRunner r;
  HostTensor x = HostTensor::Of<int32_t>({2, 3}, {INT32_MAX, 1, 0, -7, 2, 0});
  auto out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{0}}}), {x, Axes({1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MIN, -5}));  // Wraps.
  out = r.Run("ReduceMean", Attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}),
              {HostTensor::Of<int32_t>({2, 2}, {-7, 2, 7, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-2, 3}));  // Toward zero.
  out = r.Run("ReduceMax", {}, {HostTensor::Of<int8_t>({3}, {-128, -3, -100})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-3}));
  out = r.Run("ReduceL1", {}, {HostTensor::Of<int64_t>({3}, {-4, 5, -6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{15}));
  out = r.Run("ReduceProd", {}, {HostTensor::Of<uint8_t>({3}, {16, 16, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0}));  // 768 mod 256.
  out = r.Run("ReduceSumSquare", {}, {HostTensor::Of<uint64_t>({2}, {3, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint64_t>(), (std::vector<uint64_t>{25}));
}

TEST(ReduceTest, NanPropagatesThroughMaxAndMin) {
  OpRunner r;
  std::vector<float> v = Iota(20);
  v[13] = NAN;
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    auto out = r.Run(op, {}, {HostTensor::Of<float>({20}, v)});
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(std::isnan((*out)[0].Values<float>()[0])) << op;
  }
}

TEST(ReduceTest, LargeFloatSumsStayAccurate) {
  OpRunner r;
  // 2^22 values of 0.1 summed: naive float32 accumulation is off by > 10%.
  const int64_t n = int64_t{1} << 22;
  std::vector<float> x(n, 0.1f);
  const double want = static_cast<double>(0.1f) * static_cast<double>(n);
  for (bool contiguous : {true, false}) {
    // Contiguous innermost reduction, then reduction across rows.
    Shape shape = contiguous ? Shape{1, n} : Shape{n, 1};
    auto out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{0}}}),
                     {HostTensor::Of<float>(shape, x), Axes({contiguous ? 1 : 0})});
    ASSERT_TRUE(out.ok());
    EXPECT_NEAR((*out)[0].Values<float>()[0], want, want * 1e-6);
  }
  auto out = r.Run("ReduceMean", Attrs({{"keepdims", int64_t{0}}}), {HostTensor::Of<float>({n}, x)});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].Values<float>()[0], 0.1f, 1e-7);
  // Reduction across the outer axis with kept columns: [n/4, 4] over axis 0.
  out = r.Run("ReduceSum", Attrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}),
              {HostTensor::Of<float>({n / 4, 4}, x), HostTensor::Absent()});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (float v : (*out)[0].Values<float>()) EXPECT_NEAR(v, want / 4, want * 1e-6);
}

TEST(ReduceTest, Float16AccumulatesInFloat32) {
  OpRunner r;
  // 4096 ones: float16 accumulation would stop at 2048.
  std::vector<Half> x(4096, FloatToHalf(1.0f));
  auto out = r.Run("ReduceSum", {}, {HostTensor::Of<Half>({64, 64}, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 4096.f);
  out = r.Run("ReduceSum", Attrs({{"keepdims", int64_t{0}}}), {HostTensor::Of<Half>({4096, 1}, x),
                                                                Axes({0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 4096.f);
  out = r.Run("ReduceMean", Attrs({{"axes", std::vector<int64_t>{1}}}),
              {HostTensor::Of<Half>({2, 3}, {FloatToHalf(1), FloatToHalf(2), FloatToHalf(4),
                                             FloatToHalf(-1), FloatToHalf(-2), FloatToHalf(-4)})});
  ASSERT_TRUE(out.ok());
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(h[0]), HalfToFloat(FloatToHalf(7.f / 3)));
  EXPECT_EQ(HalfToFloat(h[1]), HalfToFloat(FloatToHalf(-7.f / 3)));
}

TEST(ReduceTest, DoubleAndLogSumExpStability) {
  OpRunner r;
  auto out = r.Run("ReduceLogSumExp", {}, {HostTensor::Of<double>({3}, {1000, 1000, 1000})});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].Values<double>()[0], 1000 + std::log(3.0), 1e-9);
  out = r.Run("ReduceLogSumExp", {}, {HostTensor::Of<float>({2}, {-kInf, -kInf})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>()[0], -kInf);
  out = r.Run("ReduceLogSumExp", {}, {HostTensor::Of<float>({2}, {kInf, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>()[0], kInf);
}

TEST(ReduceTest, ShapeFunctionErrors) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {2, 3});
  auto code = [&](const char* op, const Attributes& attrs, std::vector<HostTensor> in) {
    auto s = r.Infer(op, attrs, in);
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find(op), std::string::npos) << s.status().message();
    }
    return s.status().code();
  };
  constexpr StatusCode kBad = StatusCode::kInvalidArgument;
  EXPECT_EQ(code("ReduceSum", {}, {x, Axes({0, -2})}), kBad);  // Repeated.
  EXPECT_EQ(code("ReduceSum", {}, {x, Axes({2})}), kBad);      // Out of range.
  EXPECT_EQ(code("ReduceMax", Attrs({{"axes", std::vector<int64_t>{-3}}}), {x}), kBad);
  EXPECT_EQ(code("ReduceSum", Attrs({{"axes", std::vector<int64_t>{0}}}), {x, Axes({1})}), kBad);
  EXPECT_EQ(code("ReduceSum", {}, {x, HostTensor::Of<float>({1}, {0})}), kBad);  // axes dtype.
  EXPECT_EQ(code("ReduceSum", {}, {x, HostTensor::Of<int64_t>({1, 1}, {0})}), kBad);
  EXPECT_EQ(code("ReduceMean", Attrs({{"keepdims", int64_t{2}}}), {x}), kBad);
  EXPECT_EQ(code("ReduceMean", Attrs({{"axes", int64_t{0}}}), {x}), kBad);
  EXPECT_EQ(code("ReduceSum", {}, {HostTensor::Zeros(DType::kBool, {2})}), kBad);
  EXPECT_EQ(code("ReduceL2", {}, {HostTensor::Zeros(DType::kInt32, {2})}), kBad);
  EXPECT_EQ(code("ReduceLogSumExp", {}, {HostTensor::Zeros(DType::kInt64, {2})}), kBad);
  EXPECT_EQ(code("ReduceSum", {}, {x, Axes({0}), Axes({0})}), kBad);  // Too many inputs.
  // Bad attributes are refused when the kernel is created.
  auto factory = r.registry().FindKernel("ReduceMean", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attrs({{"keepdims", int64_t{-1}}})).status().code(), kBad);
  EXPECT_TRUE((*factory)(Attrs({{"axes", std::vector<int64_t>{1}}})).ok());
}

TEST(ReduceTest, DataDependence) {
  OpRunner r;
  for (const char* op : kReduceOps) {
    const OpDef* def = r.registry().FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->DepOf(0), ShapeDep::kShape) << op;
    EXPECT_EQ(def->DepOf(1), ShapeDep::kData) << op;
    EXPECT_NE(r.registry().FindKernel(op, DeviceKind::kCpu), nullptr) << op;
  }
  const OpDef* topk = r.registry().FindOp("TopK");
  ASSERT_NE(topk, nullptr);
  EXPECT_EQ(topk->DepOf(0), ShapeDep::kShape);
  EXPECT_EQ(topk->DepOf(1), ShapeDep::kData);
  for (const char* op : {"ArgMax", "ArgMin"}) {
    const OpDef* def = r.registry().FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->DepOf(0), ShapeDep::kShape) << op;
  }
}

// ---------------------------------------------------------------------------
// ArgMax, ArgMin.

TEST(ArgMaxTest, AxesKeepdimsAndLastIndex) {
  OpRunner r;
  // [[2, 1], [3, 10]] and ties in [[2, 2], [3, 3]].
  HostTensor x = HostTensor::Of<float>({2, 2}, {2, 1, 3, 10});
  auto out = r.Run("ArgMax", {}, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 1}));
  out = r.Run("ArgMax", Attrs({{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 1}));
  out = r.Run("ArgMin", Attrs({{"axis", int64_t{1}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 1}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 0}));
  HostTensor ties = HostTensor::Of<int32_t>({2, 2}, {2, 2, 3, 3});
  out = r.Run("ArgMax", Attrs({{"axis", int64_t{1}}}), {ties});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0}));
  out = r.Run("ArgMax", Attrs({{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}), {ties});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 1}));
  out = r.Run("ArgMin", Attrs({{"axis", int64_t{0}}, {"select_last_index", int64_t{1}}}),
              {HostTensor::Of<int32_t>({3, 2}, {1, 5, 1, 4, 2, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(ArgMaxTest, MatchesReferenceOnMiddleAxis) {
  OpRunner r;
  std::mt19937 rng(3);
  const Shape shape = {3, 7, 5};
  std::vector<float> x(3 * 7 * 5);
  for (float& v : x) v = static_cast<float>(rng() % 6);  // Plenty of ties.
  for (int64_t last : {0, 1}) {
    for (const char* op : {"ArgMax", "ArgMin"}) {
      auto out = r.Run(op, Attrs({{"axis", int64_t{1}}, {"select_last_index", last}}),
                       {HostTensor::Of<float>(shape, x)});
      ASSERT_TRUE(out.ok());
      EXPECT_EQ((*out)[0].shape, (Shape{3, 1, 5}));
      auto got = (*out)[0].Values<int64_t>();
      const bool is_max = std::string(op) == "ArgMax";
      for (int64_t o = 0; o < 3; ++o) {
        for (int64_t i = 0; i < 5; ++i) {
          int64_t best = 0;
          for (int64_t j = 1; j < 7; ++j) {
            const float v = x[(o * 7 + j) * 5 + i], b = x[(o * 7 + best) * 5 + i];
            if ((is_max ? v > b : v < b) || (last && v == b)) best = j;
          }
          EXPECT_EQ(got[o * 5 + i], best) << op << " " << last;
        }
      }
    }
  }
}

TEST(ArgMaxTest, NanAndErrors) {
  OpRunner r;
  auto out = r.Run("ArgMax", {}, {HostTensor::Of<float>({4}, {1, NAN, 3, NAN})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1}));
  out = r.Run("ArgMin", {}, {HostTensor::Of<float>({4}, {1, NAN, -3, NAN})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_EQ(r.Infer("ArgMax", Attrs({{"axis", int64_t{2}}}),
                    {HostTensor::Zeros(DType::kFloat32, {2, 3})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("ArgMax", {}, {HostTensor::Zeros(DType::kFloat32, {0, 3})}).status().code(),
            StatusCode::kInvalidArgument);  // Empty axis, non-empty output.
  EXPECT_EQ(r.Infer("ArgMax", {}, {HostTensor::Zeros(DType::kFloat32, {})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("ArgMin", {}, {HostTensor::Zeros(DType::kBool, {2})}).status().code(),
            StatusCode::kInvalidArgument);
  auto empty = r.Run("ArgMax", Attrs({{"axis", int64_t{1}}}),
                     {HostTensor::Zeros(DType::kFloat32, {0, 3})});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[0].shape, (Shape{0, 1}));
}

// ---------------------------------------------------------------------------
// TopK.

HostTensor K(int64_t k) { return HostTensor::Of<int64_t>({1}, {k}); }

TEST(TopKTest, LargestSmallestAndTies) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({2, 4}, {1, 3, 3, 2, 5, -1, 5, 0});
  auto out = r.Run("TopK", {}, {x, K(3)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[1].dtype, DType::kInt64);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 3, 2, 5, 5, 0}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 2, 3}));
  out = r.Run("TopK", Attrs({{"largest", int64_t{0}}}), {x, K(2)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, -1, 0}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{0, 3, 1, 3}));
  // Opset 1 form: k attribute, axis 0.
  out = r.Run("TopK", Attrs({{"k", int64_t{1}}, {"axis", int64_t{0}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 4}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5, 3, 5, 2}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 0, 1, 0}));
  // k = 0 and k = n.
  out = r.Run("TopK", {}, {x, K(0)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 0}));
  out = r.Run("TopK", Attrs({{"sorted", int64_t{0}}}), {x, K(4)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 0, 2, 3, 1}));
  // Values only.
  out = r.Run("TopK", {}, {x, K(1)}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 5}));
}

TEST(TopKTest, MatchesReferenceOnMiddleAxis) {
  OpRunner r;
  std::mt19937 rng(11);
  const Shape shape = {2, 9, 3};
  std::vector<int32_t> x(2 * 9 * 3);
  for (int32_t& v : x) v = static_cast<int32_t>(rng() % 5) - 2;
  for (int64_t largest : {0, 1}) {
    auto out = r.Run("TopK", Attrs({{"axis", int64_t{-2}}, {"largest", largest}}),
                     {HostTensor::Of<int32_t>(shape, x), K(4)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].shape, (Shape{2, 4, 3}));
    auto vals = (*out)[0].Values<int32_t>();
    auto idx = (*out)[1].Values<int64_t>();
    for (int64_t o = 0; o < 2; ++o) {
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<std::pair<int32_t, int64_t>> col;
        for (int64_t j = 0; j < 9; ++j) col.push_back({x[(o * 9 + j) * 3 + i], j});
        std::stable_sort(col.begin(), col.end(), [&](auto a, auto b) {
          return largest ? a.first > b.first : a.first < b.first;
        });
        for (int64_t t = 0; t < 4; ++t) {
          EXPECT_EQ(vals[(o * 4 + t) * 3 + i], col[t].first);
          EXPECT_EQ(idx[(o * 4 + t) * 3 + i], col[t].second);
        }
      }
    }
  }
}

TEST(TopKTest, Errors) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {2, 4});
  constexpr StatusCode kBad = StatusCode::kInvalidArgument;
  EXPECT_EQ(r.Infer("TopK", {}, {x, K(5)}).status().code(), kBad);
  EXPECT_EQ(r.Infer("TopK", {}, {x, K(-1)}).status().code(), kBad);
  EXPECT_EQ(r.Infer("TopK", {}, {x}).status().code(), kBad);  // No k at all.
  EXPECT_EQ(r.Infer("TopK", Attrs({{"k", int64_t{1}}}), {x, K(1)}).status().code(), kBad);
  EXPECT_EQ(r.Infer("TopK", {}, {x, HostTensor::Of<int64_t>({2}, {1, 1})}).status().code(), kBad);
  EXPECT_EQ(r.Infer("TopK", Attrs({{"axis", int64_t{2}}}), {x, K(1)}).status().code(), kBad);
  EXPECT_EQ(r.Infer("TopK", {}, {HostTensor::Zeros(DType::kFloat32, {}), K(0)}).status().code(),
            kBad);
  EXPECT_EQ(r.Infer("TopK", {}, {HostTensor::Zeros(DType::kBool, {3}), K(1)}).status().code(),
            kBad);
  auto s = r.Infer("TopK", {}, {x, K(5)});
  EXPECT_NE(s.status().message().find("TopK"), std::string::npos);
  auto factory = r.registry().FindKernel("TopK", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attrs({{"largest", int64_t{3}}})).status().code(), kBad);
}

// ---------------------------------------------------------------------------
// Random inputs and attributes: a shape function that accepts must be followed by a
// kernel that succeeds; one that refuses must be matched by the kernel refusing.

TEST(ReduceRobustnessTest, RandomInputsAndAttributes) {
  OpRunner r;
  std::mt19937 rng(99);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  constexpr DType kTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                              DType::kUint8,   DType::kInt32,   DType::kInt64,   DType::kBool};
  std::vector<std::string> ops(std::begin(kReduceOps), std::end(kReduceOps));
  ops.insert(ops.end(), {"ArgMax", "ArgMin", "TopK"});
  int ran = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    const std::string& op = ops[iter % ops.size()];
    const int rank = pick(5);
    Shape shape(rank);
    for (int64_t& d : shape) d = pick(10) == 0 ? 0 : 1 + pick(4);
    HostTensor x = HostTensor::Zeros(kTypes[pick(std::size(kTypes))], shape);
    for (uint8_t& b : x.bytes) b = static_cast<uint8_t>(rng());
    if (x.dtype == DType::kBool) {
      for (uint8_t& b : x.bytes) b &= 1;
    }
    auto small = [&] { return static_cast<int64_t>(pick(11)) - 5; };
    std::vector<int64_t> list(pick(4));
    for (int64_t& v : list) v = small();
    Attributes attrs;
    std::vector<HostTensor> in = {x};
    if (op == "TopK") {
      if (pick(3) == 0) {
        attrs.Set("k", small());
      } else {
        in.push_back(HostTensor::Of<int64_t>({1}, {small()}));
      }
      if (pick(2)) attrs.Set("axis", small());
      if (pick(2)) attrs.Set("largest", static_cast<int64_t>(pick(3)));
      if (pick(2)) attrs.Set("sorted", static_cast<int64_t>(pick(2)));
    } else if (op == "ArgMax" || op == "ArgMin") {
      if (pick(2)) attrs.Set("axis", small());
      if (pick(2)) attrs.Set("keepdims", static_cast<int64_t>(pick(3)));
      if (pick(2)) attrs.Set("select_last_index", static_cast<int64_t>(pick(2)));
    } else {
      const int form = pick(3);
      if (form == 1) attrs.Set("axes", list);
      if (form == 2) in.push_back(Axes(list));
      if (pick(2)) attrs.Set("keepdims", static_cast<int64_t>(pick(3)));
      if (pick(4) == 0) attrs.Set("noop_with_empty_axes", static_cast<int64_t>(pick(2)));
    }
    auto infos = r.Infer(op, attrs, in);
    auto kernel = (*r.registry().FindKernel(op, DeviceKind::kCpu))(attrs);
    if (!kernel.ok()) {
      EXPECT_FALSE(infos.ok()) << op;
      continue;
    }
    if (infos.ok()) {
      ++ran;
      auto out = OpRunner::RunKernel(**kernel, *infos, in, std::nullopt);
      EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    } else {
      EXPECT_EQ(infos.status().code(), StatusCode::kInvalidArgument) << infos.status().ToString();
      std::vector<TensorInfo> fake = {{DType::kFloat32, {1}}};
      EXPECT_FALSE(OpRunner::RunKernel(**kernel, fake, in, std::nullopt).ok()) << op;
    }
  }
  EXPECT_GT(ran, 1500);
}

}  // namespace reduce_test
}  // namespace remex::kernels
