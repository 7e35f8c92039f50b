// GridSample (kernels/ops/image/grid_sample.cc): small cases worked out by hand for each mode,
// padding mode and align_corners, round half to even in nearest mode, float16 and
// float64, NaN grid values, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace grid_sample_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

std::string Message(const StatusOr<std::vector<HostTensor>>& s) {
  return s.ok() ? "" : s.status().ToString();
}

Attributes GridAttrs(const std::string& mode, const std::string& padding, int64_t align) {
  return Attrs({{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}});
}

// X 1x1x2x2 = [[1, 2], [3, 4]] sampled at the given (x, y) grid points (a 1 x n grid).
std::vector<float> Sample2x2(OpRunner& r, const Attributes& attrs, const std::vector<float>& xy) {
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const int64_t n = static_cast<int64_t>(xy.size() / 2);
  auto out = r.Run("GridSample", attrs, {x, HostTensor::Of<float>({1, 1, n, 2}, xy)});
  EXPECT_TRUE(out.ok()) << Message(out);
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1, n}));
  return (*out)[0].Values<float>();
}

TEST(GridSampleTest, BilinearAlignCorners) {
  OpRunner r;
  // align_corners 1: -1 and 1 are the centres of the corner pixels.
  EXPECT_EQ(Sample2x2(r, GridAttrs("bilinear", "zeros", 1), {0, 0, -1, -1, 1, 1, 1, -1, 0, -1}),
            (std::vector<float>{2.5f, 1, 4, 2, 1.5f}));
  // The default attributes are bilinear, zeros, align_corners 0.
  EXPECT_EQ(Sample2x2(r, {}, {0, 0}), (std::vector<float>{2.5f}));
}

TEST(GridSampleTest, PaddingModes) {
  OpRunner r;
  // align_corners 0: (-1, -1) is the top-left corner of the image, pixel coordinate
  // (-0.5, -0.5): a quarter of pixel (0, 0) with zeros, all of it with border and
  // reflection. (-2, 0) is (-1.5, 0.5): outside with zeros; clamped to (0, 0.5) with
  // border; reflected at -0.5 to (0.5, 0.5) with reflection.
  const std::vector<float> xy = {-1, -1, -2, 0, 3, 0};
  // (3, 0) is (3.5, 0.5): clamped to (1, 0.5) -> 3; reflected at 1.5 to -0.5, still
  // half a pixel outside -> (-0.5, 0.5) -> column 0 -> 2.
  EXPECT_EQ(Sample2x2(r, GridAttrs("bilinear", "zeros", 0), xy), (std::vector<float>{0.25f, 0, 0}));
  EXPECT_EQ(Sample2x2(r, GridAttrs("bilinear", "border", 0), xy), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Sample2x2(r, GridAttrs("bilinear", "reflection", 0), xy), (std::vector<float>{1, 2.5f, 2}));
  // align_corners 1, reflection at 0 and 1: x = 3 is pixel 2, reflected to 0.
  EXPECT_EQ(Sample2x2(r, GridAttrs("bilinear", "reflection", 1), {3, -1, -3, 1}), (std::vector<float>{1, 4}));
}

TEST(GridSampleTest, NearestRoundsHalfToEven) {
  OpRunner r;
  // align_corners 0: (0, 0) is (0.5, 0.5) -> (0, 0); (1, -1) is (1.5, -0.5) -> (2, -0):
  // outside with zeros, column 1 with border.
  EXPECT_EQ(Sample2x2(r, GridAttrs("nearest", "zeros", 0), {0, 0, 1, -1}), (std::vector<float>{1, 0}));
  EXPECT_EQ(Sample2x2(r, GridAttrs("nearest", "border", 0), {0, 0, 1, -1}), (std::vector<float>{1, 2}));
  // align_corners 1 on 1x4 and 1x6: x = 0 is 1.5 and 2.5, both round to 2.
  for (int64_t w : {4, 6}) {
    std::vector<float> xv;
    for (int64_t i = 0; i < w; ++i) xv.push_back(static_cast<float>(10 * i));
    auto out = r.Run("GridSample", GridAttrs("nearest", "zeros", 1),
                     {HostTensor::Of<float>({1, 1, 1, w}, xv), HostTensor::Of<float>({1, 1, 1, 2}, {0, 0})});
    ASSERT_TRUE(out.ok()) << Message(out);
    EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{20})) << w;
  }
}

TEST(GridSampleTest, Bicubic) {
  OpRunner r;
  // X 1x1x1x4 = [1, 2, 4, 8]. Keys' coefficients (alpha -0.75) are (0, 1, 0, 0) at a
  // pixel and (-0.09375, 0.59375, 0.59375, -0.09375) half way between two.
  const HostTensor x = HostTensor::Of<float>({1, 1, 1, 4}, {1, 2, 4, 8});
  // align_corners 0: x = 0 is 1.5, x = -0.5 is 0.5 (taps -1 .. 2), x = 0.25 is 2.
  const HostTensor g = HostTensor::Of<float>({1, 1, 3, 2}, {0, 0, -0.5f, 0, 0.25f, 0});
  auto out = r.Run("GridSample", GridAttrs("bicubic", "zeros", 0), {x, g});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.71875f, 1.40625f, 4}));
  // Tap -1 is pixel 0 with border and with reflection (at -0.5).
  for (const char* padding : {"border", "reflection"}) {
    out = r.Run("GridSample", GridAttrs("bicubic", padding, 0), {x, g});
    ASSERT_TRUE(out.ok()) << Message(out);
    EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.71875f, 1.3125f, 4})) << padding;
  }
}

TEST(GridSampleTest, ChannelsBatchesAndDtypes) {
  OpRunner r;
  // Two batches of two channels; each batch has its own grid.
  const HostTensor x = HostTensor::Of<double>({2, 2, 1, 2}, {1, 2, 10, 20, 100, 200, 1000, 2000});
  const HostTensor g = HostTensor::Of<double>({2, 1, 1, 2}, {-1, 0, 1, 0});
  auto out = r.Run("GridSample", GridAttrs("bilinear", "border", 1), {x, g});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].dtype, DType::kFloat64);
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2, 1, 1}));
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{1, 10, 200, 2000}));
  // float16: computed in float32.
  std::vector<Half> hx, hg;
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) hx.push_back(FloatToHalf(v));
  for (float v : {0.0f, 0.0f}) hg.push_back(FloatToHalf(v));
  out = r.Run("GridSample", {},
              {HostTensor::Of<Half>({1, 1, 2, 2}, hx), HostTensor::Of<Half>({1, 1, 1, 2}, hg)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].dtype, DType::kFloat16);
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[0]), 2.5f);
  // An empty output needs no pixels.
  out = r.Run(
      "GridSample", {},
      {HostTensor::Zeros(DType::kFloat32, {1, 3, 0, 0}), HostTensor::Zeros(DType::kFloat32, {1, 0, 5, 2})});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 0, 5}));
}

TEST(GridSampleTest, NotFiniteGridValues) {
  OpRunner r;
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<float> y = Sample2x2(r, GridAttrs("bilinear", "zeros", 0), {nan, 0, inf, 0, -inf, 0});
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 0);
  y = Sample2x2(r, GridAttrs("bicubic", "border", 1), {inf, -1, 0, nan});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0], 2);
  EXPECT_TRUE(std::isnan(y[1]));
  y = Sample2x2(r, GridAttrs("nearest", "reflection", 0), {inf, 0, 1e30f, 0});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
}

TEST(GridSampleTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostTensor g = HostTensor::Of<float>({1, 1, 1, 2}, {0, 0});
  auto expect_error = [&](const Attributes& attrs, std::vector<HostTensor> in, StatusCode code,
                          const std::string& needle) {
    auto out = r.Run("GridSample", attrs, std::move(in));
    ASSERT_FALSE(out.ok()) << needle;
    EXPECT_EQ(out.status().code(), code) << Message(out);
    EXPECT_NE(Message(out).find("GridSample"), std::string::npos) << Message(out);
    EXPECT_NE(Message(out).find(needle), std::string::npos) << Message(out);
  };
  const StatusCode invalid = StatusCode::kInvalidArgument;
  expect_error(Attrs({{"mode", std::string("linear")}}), {x, g}, invalid, "linear");
  expect_error(Attrs({{"padding_mode", std::string("wrap")}}), {x, g}, invalid, "wrap");
  expect_error(Attrs({{"align_corners", int64_t{2}}}), {x, g}, invalid, "2");
  expect_error({}, {HostTensor::Of<float>({1, 2, 2}, {1, 2, 3, 4}), g}, invalid, "[1, 2, 2]");
  expect_error({}, {x, HostTensor::Of<float>({1, 1, 1, 3}, {0, 0, 0})}, invalid, "[1, 1, 1, 3]");
  expect_error({}, {x, HostTensor::Of<float>({2, 1, 1, 2}, {0, 0, 0, 0})}, invalid, "[2, 1, 1, 2]");
  expect_error({}, {x, HostTensor::Of<int32_t>({1, 1, 1, 2}, {0, 0})}, invalid, "int32");
  expect_error({}, {HostTensor::Zeros(DType::kFloat32, {1, 1, 0, 2}), g}, invalid, "empty");
  expect_error({}, {HostTensor::Of<int32_t>({1, 1, 2, 2}, {1, 2, 3, 4}), g}, StatusCode::kUnimplemented,
               "int32");
  expect_error({}, {HostTensor::Of<double>({1, 1, 2, 2}, {1, 2, 3, 4}), g}, StatusCode::kUnimplemented,
               "float32");
}

}  // namespace grid_sample_test
}  // namespace remex::kernels
