// NonMaxSuppression, RoiAlign (kernels/ops/image/detection.cc) and MaxUnpool (kernels/ops/nn/unpool.cc):
// small cases worked out by hand (ONNX's examples), tie order, thresholds, both
// coordinate modes and max mode, repeated unpool indices, and the errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace detection_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor I64(int64_t v) { return HostTensor::Of<int64_t>({1}, {v}); }
HostTensor F32(float v) { return HostTensor::Of<float>({1}, {v}); }

std::string Message(const StatusOr<std::vector<HostTensor>>& s) {
  return s.ok() ? "" : s.status().ToString();
}

TEST(NonMaxSuppressionTest, SuppressesByIouAndScore) {
  OpRunner r;
  // ONNX's suppress_by_IOU example: six boxes, the first three and last three overlap.
  const HostTensor boxes = HostTensor::Of<float>(
      {1, 6, 4},
      {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101});
  const HostTensor scores = HostTensor::Of<float>({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  auto out = r.Run("NonMaxSuppression", {}, {boxes, scores, I64(3), F32(0.5f), F32(0.0f)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{3, 3}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // A score threshold of 0.4 drops box 5; no max_output_boxes_per_class: nothing.
  out = r.Run("NonMaxSuppression", {}, {boxes, scores, I64(3), F32(0.5f), F32(0.4f)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  out = r.Run("NonMaxSuppression", {}, {boxes, scores});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{0, 3}));
  // Centre-point boxes give the same selection; so do flipped corners (opset 10).
  const HostTensor centre =
      HostTensor::Of<float>({1, 6, 4}, {0.5f, 0.5f,  1, 1, 0.5f, 0.6f,  1, 1, 0.5f, 0.4f,   1, 1,
                                        0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1});
  out = r.Run("NonMaxSuppression", Attrs({{"center_point_box", int64_t{1}}}),
              {centre, scores, I64(3), F32(0.5f)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  const HostTensor flipped = HostTensor::Of<float>(
      {1, 6, 4},
      {1, 1, 0, 0, 0, 0.1f, 1, 1.1f, 0, 0.9f, 1, -0.1f, 0, 10, 1, 11, 1, 10.1f, 0, 11.1f, 1, 101, 0, 100});
  out = r.Run("NonMaxSuppression-10", {}, {flipped, scores, I64(3), F32(0.5f)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
}

TEST(NonMaxSuppressionTest, EqualScoresTakeTheLowerIndexAndClassesRunApart) {
  OpRunner r;
  const HostTensor boxes = HostTensor::Of<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 5, 5, 6, 6});
  const HostTensor scores = HostTensor::Of<float>({1, 2, 3}, {0.5f, 0.5f, 0.5f, 0.1f, 0.9f, 0.2f});
  auto out = r.Run("NonMaxSuppression", {}, {boxes, scores, I64(10), F32(0.5f)});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}));
}

TEST(NonMaxSuppressionTest, Errors) {
  OpRunner r;
  const HostTensor boxes = HostTensor::Of<float>({1, 1, 4}, {0, 0, 1, 1});
  const HostTensor scores = HostTensor::Of<float>({1, 1, 1}, {1});
  EXPECT_FALSE(r.Run("NonMaxSuppression", {}, {boxes, scores, I64(1), F32(1.5f)}).ok());
  EXPECT_FALSE(r.Run("NonMaxSuppression", {}, {boxes, HostTensor::Of<float>({1, 1, 2}, {1, 2})}).ok());
  EXPECT_FALSE(r.Run("NonMaxSuppression", Attrs({{"center_point_box", int64_t{2}}}), {boxes, scores}).ok());
  EXPECT_FALSE(r.Run("NonMaxSuppression", {}, {boxes, scores, HostTensor::Of<int64_t>({2}, {1, 2})}).ok());
}

TEST(RoiAlignTest, AverageAndMaxOfOnePlane) {
  OpRunner r;
  // X 1x1x4x4 = 0..15; roi [0, 0, 2, 2]; 1x1 output, 2x2 samples.
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = static_cast<float>(i);
  const HostTensor x = HostTensor::Of<float>({1, 1, 4, 4}, xv);
  const HostTensor rois = HostTensor::Of<float>({1, 4}, {0, 0, 2, 2});
  const HostTensor batch = HostTensor::Of<int64_t>({1}, {0});
  // half_pixel: the roi spans [-0.5, 1.5]; samples at -0.0 and 1.0 per axis, clamped
  // to 0: values 0, 1, 4, 5 -> 2.5.
  auto out = r.Run("RoiAlign", Attrs({{"sampling_ratio", int64_t{2}}}), {x, rois, batch});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f}));
  // output_half_pixel (RoiAlign-10): samples at 0.5 and 1.5: 2.5, 3.5, 6.5, 7.5 -> 5.
  out = r.Run("RoiAlign-10", Attrs({{"sampling_ratio", int64_t{2}}}), {x, rois, batch});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5.0f}));
  // max: per sample the largest weighted corner (0.25 * 10 at (1.5, 1.5)), ONNX
  // Runtime's definition.
  out = r.Run("RoiAlign-10", Attrs({{"sampling_ratio", int64_t{2}}, {"mode", std::string("max")}}),
              {x, rois, batch});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f}));
}

TEST(RoiAlignTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostTensor rois = HostTensor::Of<float>({1, 4}, {0, 0, 1, 1});
  auto out = r.Run("RoiAlign", {}, {x, rois, HostTensor::Of<int64_t>({1}, {1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(Message(out).find("out of range"), std::string::npos) << Message(out);
  out = r.Run("RoiAlign", {},
              {x, HostTensor::Of<float>({1, 4}, {0, 0, 1e30f, 1e30f}), HostTensor::Of<int64_t>({1}, {0})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(Message(out).find("out of range"), std::string::npos) << Message(out);
  EXPECT_FALSE(r.Run("RoiAlign", {}, {x, rois, HostTensor::Of<int32_t>({1}, {0})}).ok());
  EXPECT_FALSE(
      r.Run("RoiAlign", Attrs({{"mode", std::string("sum")}}), {x, rois, HostTensor::Of<int64_t>({1}, {0})})
          .ok());
  EXPECT_FALSE(
      r.Run("RoiAlign", Attrs({{"output_height", int64_t{0}}}), {x, rois, HostTensor::Of<int64_t>({1}, {0})})
          .ok());
}

TEST(MaxUnpoolTest, ScattersIntoZeros) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostTensor i = HostTensor::Of<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15});
  const Attributes attrs =
      Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  auto out = r.Run("MaxUnpool", attrs, {x, i});
  ASSERT_TRUE(out.ok()) << Message(out);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
  // output_shape 5x5: the 4x4 result at its origin (ONNX's example); a repeated index
  // keeps the last value (opset 9 too).
  out = r.Run(
      "MaxUnpool-9", attrs,
      {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {5, 5, 13, 15}), HostTensor::Of<int64_t>({4}, {1, 1, 5, 5})});
  ASSERT_TRUE(out.ok()) << Message(out);
  std::vector<float> want(25, 0.0f);
  want[6] = 2;
  want[16] = 3;
  want[18] = 4;
  EXPECT_EQ((*out)[0].Values<float>(), want);
}

TEST(MaxUnpoolTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const Attributes attrs =
      Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  auto out = r.Run("MaxUnpool", attrs, {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {0, 1, 2, 16})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(Message(out).find("out of range"), std::string::npos) << Message(out);
  EXPECT_FALSE(r.Run("MaxUnpool", {}, {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {0, 1, 2, 3})}).ok());
  EXPECT_FALSE(r.Run("MaxUnpool", attrs,
                     {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {0, 1, 2, 3}),
                      HostTensor::Of<int64_t>({4}, {1, 1, 2, 2})})
                   .ok());
  // Indices address the unpooled 4x4 tensor, not a larger output_shape.
  out = r.Run(
      "MaxUnpool", attrs,
      {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {0, 1, 2, 16}), HostTensor::Of<int64_t>({4}, {1, 1, 5, 5})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(Message(out).find("out of range"), std::string::npos) << Message(out);
  EXPECT_FALSE(r.Run("MaxUnpool", attrs,
                     {x, HostTensor::Of<int64_t>({1, 1, 2, 2}, {0, 1, 2, 3}),
                      HostTensor::Of<int64_t>({4}, {1, 1, 3, 6})})
                   .ok());
  EXPECT_FALSE(r.Run("MaxUnpool", attrs, {x, HostTensor::Of<int32_t>({1, 1, 2, 2}, {0, 1, 2, 3})}).ok());
}

}  // namespace detection_test
}  // namespace remex::kernels
