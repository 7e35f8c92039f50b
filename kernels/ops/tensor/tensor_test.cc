// Shape, Cast, Slice, Concat, Reshape, Identity.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace tensor_test {

using testing::Attrs;
using testing::HostTensor;
using testing::Iota;
using testing::OpRunner;

// ---------------------------------------------------------------------------

TEST(ShapeOpTest, StartAndEnd) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {3, 4, 5});
  auto out = r.Run("Shape", {}, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{3, 4, 5}));
  out = r.Run("Shape", Attrs({{"start", int64_t{1}}, {"end", int64_t{-1}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{4}));
  out = r.Run("Shape", Attrs({{"start", int64_t{-10}}, {"end", int64_t{10}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{3, 4, 5}));
  out = r.Run("Shape", Attrs({{"start", int64_t{2}}, {"end", int64_t{1}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0}));
  out = r.Run("Shape", {}, {HostTensor::Of<int32_t>({}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0}));
}

// ---------------------------------------------------------------------------

TEST(CastTest, FloatToHalfAndBack) {
  OpRunner r;
  const std::vector<float> x = {0.1f,    -3.5f, 65504.f,
                                70000.f, 1e-8f, std::numeric_limits<float>::quiet_NaN()};
  auto out = r.Run("Cast", Attrs({{"to", int64_t{10}}}), {HostTensor::Of<float>({6}, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kFloat16);
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(h[0].bits, 0x2e66);  // 0.1 -> 0.0999755859375.
  EXPECT_EQ(h[1].bits, 0xc300);
  EXPECT_EQ(h[2].bits, 0x7bff);
  EXPECT_EQ(h[3].bits, 0x7c00);
  EXPECT_EQ(h[4].bits, 0x0000);
  auto back = r.Run("Cast", Attrs({{"to", int64_t{1}}}), {(*out)[0]});
  ASSERT_TRUE(back.ok());
  auto f = (*back)[0].Values<float>();
  EXPECT_EQ(f[0], 0.0999755859375f);
  EXPECT_EQ(f[1], -3.5f);
  EXPECT_EQ(f[2], 65504.f);
  EXPECT_TRUE(std::isinf(f[3]));
  EXPECT_TRUE(std::isnan(f[5]));
}

// bfloat16 (ONNX type 16): the upper half of a float32, rounded to nearest even.
TEST(CastTest, FloatToBFloat16AndBack) {
  OpRunner r;
  const float inf = std::numeric_limits<float>::infinity();
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); 1 + 3 * 2^-8 ties up
  // to 1 + 2^-6; just above halfway rounds up; the largest float rounds to infinity.
  const std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f,
                                std::numeric_limits<float>::max(), -inf, std::numeric_limits<float>::quiet_NaN()};
  auto out = r.Run("Cast", Attrs({{"to", int64_t{16}}}), {HostTensor::Of<float>({7}, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kBFloat16);
  auto h = (*out)[0].Values<BFloat16>();
  EXPECT_EQ(h[0].bits, 0x3f80);
  EXPECT_EQ(h[1].bits, 0x3f82);
  EXPECT_EQ(h[2].bits, 0x3f81);
  EXPECT_EQ(h[3].bits, 0xc020);
  EXPECT_EQ(h[4].bits, 0x7f80);
  EXPECT_EQ(h[5].bits, 0xff80);
  EXPECT_EQ(h[6].bits & 0x7fc0, 0x7fc0);  // a quiet NaN
  // bfloat16 to float32 is exact, and to other types goes through it.
  auto back = r.Run("Cast", Attrs({{"to", int64_t{1}}}), {(*out)[0]});
  ASSERT_TRUE(back.ok());
  auto f = (*back)[0].Values<float>();
  EXPECT_EQ(f[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(f[3], -2.5f);
  EXPECT_TRUE(std::isnan(f[6]));
  auto ints = r.Run("Cast", Attrs({{"to", int64_t{7}}}), {(*out)[0]});
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ((*ints)[0].Values<int64_t>()[3], -2);
  // CastLike takes bfloat16 from its second input.
  auto like = r.Run("CastLike", {}, {HostTensor::Of<double>({1}, {-2.5}), (*out)[0]});
  ASSERT_TRUE(like.ok()) << like.status().ToString();
  EXPECT_EQ((*like)[0].Values<BFloat16>()[0].bits, 0xc020);
  // Ops that move bytes carry it.
  auto twice = r.Run("Concat", Attrs({{"axis", int64_t{0}}}), {(*out)[0], (*out)[0]});
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ((*twice)[0].dtype, DType::kBFloat16);
  EXPECT_EQ((*twice)[0].Values<BFloat16>()[7].bits, 0x3f80);
  // Arithmetic ops refuse bfloat16, naming it.
  auto add = r.Run("Add", {}, {(*out)[0], (*out)[0]});
  ASSERT_FALSE(add.ok());
  EXPECT_NE(add.status().message().find("bfloat16"), std::string::npos) << add.status().ToString();
}

TEST(CastTest, IntegerAndBoolConversions) {
  OpRunner r;
  auto out = r.Run("Cast", Attrs({{"to", int64_t{6}}}),
                   {HostTensor::Of<float>({5}, {1.9f, -1.9f, 3e9f, -3e9f, NAN})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(),
            (std::vector<int32_t>{1, -1, INT32_MAX, INT32_MIN, 0}));  // Truncate, saturate.
  out = r.Run("Cast", Attrs({{"to", int64_t{9}}}), {HostTensor::Of<float>({3}, {0.f, -0.5f, 2.f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  out = r.Run("Cast", Attrs({{"to", int64_t{1}}}), {HostTensor::Of<bool>({2}, {true, false})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 0}));
  out = r.Run("Cast", Attrs({{"to", int64_t{2}}}),  // int64 -> uint8 wraps.
              {HostTensor::Of<int64_t>({2}, {257, -1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{1, 255}));
  out = r.Run("Cast", Attrs({{"to", int64_t{7}}}), {HostTensor::Of<double>({2}, {1e300, -2.5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{INT64_MAX, -2}));
  out = r.Run("Cast", Attrs({{"to", int64_t{13}}}), {HostTensor::Of<float>({2}, {1.9e19f, 5.5f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint64_t>(), (std::vector<uint64_t>{UINT64_MAX, 5}));
  out = r.Run("Cast", Attrs({{"to", int64_t{10}}}), {HostTensor::Of<int32_t>({2}, {2049, 100000})});
  ASSERT_TRUE(out.ok());
  auto h = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(h[0]), 2048.f);  // Ties to even.
  EXPECT_TRUE(std::isinf(HalfToFloat(h[1])));
}

TEST(CastTest, CastLikeTakesTheSecondInputsDtype) {
  OpRunner r;
  auto out = r.Run("CastLike", {}, {HostTensor::Of<float>({3}, {1.9f, -2.5f, 300.0f}), HostTensor::Zeros(DType::kInt8, {0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kInt8);
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{1, -2, 127}));  // Cast's rounding and saturation
  out = r.Run("CastLike", {}, {HostTensor::Of<int32_t>({2}, {0, 7}), HostTensor::Zeros(DType::kBool, {5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kBool);
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(r.Infer("CastLike", {}, {HostTensor::Zeros(DType::kFloat32, {2})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CastTest, UnsupportedTargets) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {2});
  EXPECT_EQ(r.Infer("Cast", Attrs({{"to", int64_t{8}}}), {x}).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(r.Infer("Cast", Attrs({{"to", int64_t{14}}}), {x}).status().code(),  // complex64
            StatusCode::kUnimplemented);
  EXPECT_EQ(r.Infer("Cast", Attrs({{"to", int64_t{99}}}), {x}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Cast", {}, {x}).status().code(), StatusCode::kInvalidArgument);
  auto factory = r.registry().FindKernel("Cast", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attrs({{"to", int64_t{8}}})).status().code(), StatusCode::kUnimplemented);
}

// ---------------------------------------------------------------------------

StatusOr<std::vector<HostTensor>> RunSlice(OpRunner& r, HostTensor x, std::vector<int64_t> starts,
                                           std::vector<int64_t> ends,
                                           std::optional<std::vector<int64_t>> axes = {},
                                           std::optional<std::vector<int64_t>> steps = {}) {
  const int64_t n = static_cast<int64_t>(starts.size());
  std::vector<HostTensor> in = {x, HostTensor::Of<int64_t>({n}, starts),
                                HostTensor::Of<int64_t>({n}, ends)};
  if (axes || steps) {
    in.push_back(axes ? HostTensor::Of<int64_t>({n}, *axes) : HostTensor::Absent());
  }
  if (steps) in.push_back(HostTensor::Of<int64_t>({n}, *steps));
  return r.Run("Slice", {}, in);
}

TEST(SliceTest, Basic) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({3, 4}, Iota(12));
  auto out = RunSlice(r, x, {1, 0}, {2, 3});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 5, 6}));
  // Axis 1 only, negative start, INT64_MAX end.
  out = RunSlice(r, x, {-2}, {INT64_MAX}, std::vector<int64_t>{1});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  // Negative axis, steps 2.
  out = RunSlice(r, x, {0}, {4}, std::vector<int64_t>{-1}, std::vector<int64_t>{2});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  // Start out of bounds gives an empty slice.
  out = RunSlice(r, x, {10}, {20}, std::vector<int64_t>{0});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0, 4}));
  // int32 indices.
  out = r.Run("Slice", {},
              {x, HostTensor::Of<int32_t>({1}, {1}), HostTensor::Of<int32_t>({1}, {3}),
               HostTensor::Of<int32_t>({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(SliceTest, NegativeSteps) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({3, 4}, Iota(12));
  // Reverse everything: starts -1, ends INT64_MIN, steps -1.
  auto out = RunSlice(r, x, {-1, -1}, {INT64_MIN, INT64_MIN}, std::vector<int64_t>{0, 1},
                      std::vector<int64_t>{-1, -1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> want = Iota(12);
  std::reverse(want.begin(), want.end());
  EXPECT_EQ((*out)[0].Values<float>(), want);
  // ONNX test_slice_neg_steps-like: starts 20 (clamped to dim-1), ends 0, step -2.
  out = RunSlice(r, x, {20}, {0}, std::vector<int64_t>{1}, std::vector<int64_t>{-2});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  // INT64_MIN step.
  out = RunSlice(r, x, {-1}, {-100}, std::vector<int64_t>{0}, std::vector<int64_t>{INT64_MIN});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(SliceTest, Errors) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {3, 4});
  EXPECT_EQ(
      RunSlice(r, x, {0}, {1}, std::vector<int64_t>{0}, std::vector<int64_t>{0}).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(RunSlice(r, x, {0, 0}, {1, 1}, std::vector<int64_t>{1, -1}).status().code(),
            StatusCode::kInvalidArgument);  // Repeated axis.
  EXPECT_EQ(RunSlice(r, x, {0}, {1}, std::vector<int64_t>{2}).status().code(),
            StatusCode::kInvalidArgument);  // Axis out of range.
  EXPECT_EQ(r.Run("Slice", {},
                  {x, HostTensor::Of<int64_t>({2}, {0, 0}), HostTensor::Of<int64_t>({1}, {1})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);  // starts and ends differ in length.
  EXPECT_EQ(
      r.Run("Slice", {}, {x, HostTensor::Of<float>({1}, {0}), HostTensor::Of<float>({1}, {1})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
}

// Strided 3-D slicing against a direct index computation.
TEST(SliceTest, MatchesReference) {
  OpRunner r;
  const Shape shape = {4, 5, 6};
  HostTensor x = HostTensor::Of<float>(shape, Iota(120));
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  for (const Case& c : std::vector<Case>{{{0, 1, 5}, {4, 5, 0}, {0, 1, 2}, {1, 2, -2}},
                                         {{3, -1}, {0, 0}, {0, 2}, {-1, -3}},
                                         {{1}, {3}, {1}, {1}},
                                         {{0, 0, 0}, {4, 5, 6}, {0, 1, 2}, {3, 4, 5}}}) {
    auto out = RunSlice(r, x, c.starts, c.ends, c.axes, c.steps);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    // Reference: python-like range per axis.
    std::vector<std::vector<int64_t>> idx(3);
    for (int d = 0; d < 3; ++d) {
      for (int64_t i = 0; i < shape[d]; ++i) idx[d].push_back(i);
    }
    for (size_t k = 0; k < c.axes.size(); ++k) {
      const int64_t d = c.axes[k], dim = shape[d], step = c.steps[k];
      int64_t s = c.starts[k] < 0 ? c.starts[k] + dim : c.starts[k];
      int64_t e = c.ends[k] < 0 ? c.ends[k] + dim : c.ends[k];
      idx[d].clear();
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        for (int64_t i = s; i < e; i += step) idx[d].push_back(i);
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        for (int64_t i = s; i > e; i += step) idx[d].push_back(i);
      }
    }
    std::vector<float> want;
    for (int64_t a : idx[0])
      for (int64_t b : idx[1])
        for (int64_t cc : idx[2]) want.push_back(static_cast<float>((a * 5 + b) * 6 + cc));
    EXPECT_EQ((*out)[0].shape,
              (Shape{static_cast<int64_t>(idx[0].size()), static_cast<int64_t>(idx[1].size()),
                     static_cast<int64_t>(idx[2].size())}));
    EXPECT_EQ((*out)[0].Values<float>(), want);
  }
}

// ---------------------------------------------------------------------------

TEST(ConcatTest, AxesAndErrors) {
  OpRunner r;
  HostTensor a = HostTensor::Of<float>({2, 2}, {1, 2, 3, 4});
  HostTensor b = HostTensor::Of<float>({2, 1}, {5, 6});
  auto out = r.Run("Concat", Attrs({{"axis", int64_t{-1}}}), {a, b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  out =
      r.Run("Concat", Attrs({{"axis", int64_t{0}}}),
            {a, HostTensor::Of<float>({1, 2}, {7, 8}), HostTensor::Zeros(DType::kFloat32, {0, 2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3, 4, 7, 8}));
  EXPECT_EQ(r.Infer("Concat", Attrs({{"axis", int64_t{0}}}), {a, b}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Concat", Attrs({{"axis", int64_t{2}}}), {a, a}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Concat", {}, {a, a}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Concat", Attrs({{"axis", int64_t{0}}}),
                    {a, HostTensor::Zeros(DType::kInt32, {2, 2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// A channels-last Concat large enough for the compute threads to split its rows
// (DenseNet's, NHWC): every element where the row-by-row copy puts it.
TEST(ConcatTest, ManyShortRowsOnTheLastAxis) {
  OpRunner r;
  const int64_t rows = 2 * 28 * 28, c1 = 96, c2 = 32, c3 = 3;
  std::vector<float> a(rows * c1), b(rows * c2), c(rows * c3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
  for (size_t i = 0; i < c.size(); ++i) c[i] = 0.5f + static_cast<float>(i);
  auto out = r.Run("Concat", Attrs({{"axis", int64_t{3}}}),
                   {HostTensor::Of<float>({2, 28, 28, c1}, a), HostTensor::Of<float>({2, 28, 28, c2}, b),
                    HostTensor::Of<float>({2, 28, 28, c3}, c)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape, (Shape{2, 28, 28, c1 + c2 + c3}));
  std::vector<float> want;
  for (int64_t o = 0; o < rows; ++o) {
    want.insert(want.end(), a.begin() + o * c1, a.begin() + (o + 1) * c1);
    want.insert(want.end(), b.begin() + o * c2, b.begin() + (o + 1) * c2);
    want.insert(want.end(), c.begin() + o * c3, c.begin() + (o + 1) * c3);
  }
  EXPECT_EQ((*out)[0].Values<float>(), want);
}

// ---------------------------------------------------------------------------

StatusOr<Shape> ReshapeShape(OpRunner& r, Shape data, std::vector<int64_t> target,
                             int64_t allowzero = 0) {
  auto s = r.Infer("Reshape", Attrs({{"allowzero", allowzero}}),
                   {HostTensor::Zeros(DType::kFloat32, data),
                    HostTensor::Of<int64_t>({static_cast<int64_t>(target.size())}, target)});
  if (!s.ok()) return s.status();
  return (*s)[0].shape;
}

TEST(ReshapeTest, Shapes) {
  OpRunner r;
  EXPECT_EQ(*ReshapeShape(r, {2, 3, 4}, {4, -1}), (Shape{4, 6}));
  EXPECT_EQ(*ReshapeShape(r, {2, 3, 4}, {0, -1}), (Shape{2, 12}));
  EXPECT_EQ(*ReshapeShape(r, {2, 3, 4}, {0, 0, 4}), (Shape{2, 3, 4}));
  EXPECT_EQ(*ReshapeShape(r, {0, 3, 4}, {3, 0}, 1), (Shape{3, 0}));
  EXPECT_EQ(*ReshapeShape(r, {2, 3, 4}, {24}), (Shape{24}));
  EXPECT_EQ(*ReshapeShape(r, {1}, {}), (Shape{}));
  EXPECT_EQ(ReshapeShape(r, {2, 3, 4}, {5, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReshapeShape(r, {2, 3, 4}, {-1, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReshapeShape(r, {2, 3, 4}, {-2, 12}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReshapeShape(r, {2, 3, 4}, {2, 3, 4, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReshapeShape(r, {0, 3}, {0, -1}, 1).status().code(), StatusCode::kInvalidArgument);
  // Overflowing products are refused, not wrapped.
  EXPECT_EQ(ReshapeShape(r, {2}, {INT64_MAX, INT64_MAX, 0}, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReshapeShape(r, {2}, {1LL << 62, 4, -1}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReshapeTest, CopiesData) {
  OpRunner r;
  auto out = r.Run("Reshape", {},
                   {HostTensor::Of<float>({2, 3}, Iota(6)), HostTensor::Of<int64_t>({2}, {3, -1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), Iota(6));
}

TEST(IdentityTest, Copies) {
  OpRunner r;
  auto out = r.Run("Identity", {}, {HostTensor::Of<int64_t>({3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace tensor_test
}  // namespace remex::kernels
