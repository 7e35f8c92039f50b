// Trilu and EyeLike (kernels/ops/tensor/diagonal.cc): ONNX's examples (Trilu-14, EyeLike-9),
// batches, k beyond the matrix, every dtype through a raw copy, and the errors; OneHot
// (kernels/ops/generator/generate.cc).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace diagonal_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

// A [4, 5] matrix 1..20.
HostTensor Matrix() {
  std::vector<int64_t> v(20);
  for (int64_t i = 0; i < 20; ++i) v[i] = i + 1;
  return HostTensor::Of<int64_t>({4, 5}, v);
}

// Trilu by the definition, over a [rows, cols] matrix of 1..n.
std::vector<int64_t> Expected(int64_t rows, int64_t cols, int64_t k, bool upper) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v.push_back((upper ? j - i >= k : j - i <= k) ? i * cols + j + 1 : 0);
  }
  return v;
}

TEST(TriluTest, UpperAndLowerForEveryK) {
  OpRunner r;
  for (int64_t upper : {1, 0}) {
    for (int64_t k : {-7, -2, -1, 0, 1, 3, 9}) {
      SCOPED_TRACE("upper " + std::to_string(upper) + " k " + std::to_string(k));
      auto out = r.Run("Trilu", Attrs({{"upper", upper}}), {Matrix(), HostTensor::Of<int64_t>({}, {k})});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ((*out)[0].Values<int64_t>(), Expected(4, 5, k, upper == 1));
    }
  }
  // Without k: 0; upper by default.
  auto out = r.Run("Trilu", {}, {Matrix()});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), Expected(4, 5, 0, true));
}

TEST(TriluTest, BatchesAndDtypes) {
  OpRunner r;
  // Two [2, 2] float16 matrices, lower triangle.
  std::vector<Half> h;
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}) h.push_back(FloatToHalf(v));
  auto out = r.Run("Trilu", Attrs({{"upper", int64_t{0}}}), {HostTensor::Of<Half>({2, 2, 2}, h)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> got;
  for (Half v : (*out)[0].Values<Half>()) got.push_back(HalfToFloat(v));
  EXPECT_EQ(got, (std::vector<float>{1, 0, 3, 4, 5, 0, 7, 8}));
  // An empty batch.
  out = r.Run("Trilu", {}, {HostTensor::Zeros(DType::kFloat32, {0, 3, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0, 3, 3}));
}

TEST(TriluTest, Errors) {
  OpRunner r;
  auto rank = r.Infer("Trilu", {}, {HostTensor::Zeros(DType::kFloat32, {3})});
  EXPECT_EQ(rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rank.status().message().find("Trilu"), std::string::npos) << rank.status().message();
  EXPECT_EQ(r.Infer("Trilu", Attrs({{"upper", int64_t{2}}}), {Matrix()}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("Trilu", {}, {Matrix(), HostTensor::Of<int64_t>({2}, {0, 1})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(EyeLikeTest, DiagonalsAndDtypes) {
  OpRunner r;
  auto out = r.Run("EyeLike", {}, {HostTensor::Zeros(DType::kInt32, {3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kInt32);
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
  // k = -1 below the diagonal; dtype 1 (float32) from an int64 input.
  out = r.Run("EyeLike", Attrs({{"k", int64_t{-1}}, {"dtype", int64_t{1}}}), {HostTensor::Zeros(DType::kInt64, {3, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 1, 0, 0, 1}));
  // A k past the matrix: all zeros. bool output.
  out = r.Run("EyeLike", Attrs({{"k", int64_t{5}}, {"dtype", int64_t{9}}}), {HostTensor::Zeros(DType::kFloat32, {2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kBool);
  EXPECT_EQ((*out)[0].bytes, (std::vector<uint8_t>{0, 0, 0, 0}));
  // Errors: rank, an unknown dtype.
  EXPECT_EQ(r.Infer("EyeLike", {}, {HostTensor::Zeros(DType::kFloat32, {2, 2, 2})}).status().code(),
            StatusCode::kInvalidArgument);
  auto bad = r.Infer("EyeLike", Attrs({{"dtype", int64_t{8}}}), {HostTensor::Zeros(DType::kFloat32, {2, 2})});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("EyeLike"), std::string::npos) << bad.status().message();
}

// OneHot (kernels/ops/generator/generate.cc; ONNX OneHot-11): ONNX's examples, negative and
// out-of-range indices, float indices and depth, and the errors.
TEST(OneHotTest, AxesNegativeIndicesAndErrors) {
  OpRunner r;
  const HostTensor values = HostTensor::Of<float>({2}, {0, 1});
  // Last axis (default): [3] -> [3, 4].
  auto out = r.Run("OneHot", {}, {HostTensor::Of<int64_t>({3}, {0, 3, -1}), HostTensor::Of<int64_t>({}, {4}), values});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{3, 4}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}));
  // axis 0, float indices and depth, values [2, 5], an index out of range (4).
  out = r.Run("OneHot", Attrs({{"axis", int64_t{0}}}),
              {HostTensor::Of<float>({2}, {1.0f, 4.0f}), HostTensor::Of<float>({1}, {3.0f}),
               HostTensor::Of<int32_t>({2}, {2, 5})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{2, 2, 5, 2, 2, 2}));
  // Errors: depth below 1, values of one element, axis out of range.
  EXPECT_EQ(r.Infer("OneHot", {}, {HostTensor::Of<int64_t>({1}, {0}), HostTensor::Of<int64_t>({}, {0}), values})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("OneHot", {},
                    {HostTensor::Of<int64_t>({1}, {0}), HostTensor::Of<int64_t>({}, {2}), HostTensor::Of<float>({1}, {1})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto axis = r.Infer("OneHot", Attrs({{"axis", int64_t{2}}}),
                      {HostTensor::Of<int64_t>({1}, {0}), HostTensor::Of<int64_t>({}, {2}), values});
  EXPECT_EQ(axis.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(axis.status().message().find("OneHot"), std::string::npos) << axis.status().message();
}

}  // namespace diagonal_test
}  // namespace remex::kernels
