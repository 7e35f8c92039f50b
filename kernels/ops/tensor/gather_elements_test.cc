// GatherElements (kernels/ops/tensor/transform.cc; ONNX GatherElements-11/13): the operator's own
// examples, every axis of a 3-D tensor against a loop written here, negative indices,
// int32 indices, every element size, and the shape function's and kernel's errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace gather_elements_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(GatherElementsTest, OnnxExamples) {
  OpRunner r;
  // axis 1: [[1, 2], [3, 4]] with [[0, 0], [1, 0]] -> [[1, 1], [4, 3]].
  auto out = r.Run("GatherElements", Attrs({{"axis", int64_t{1}}}),
                   {HostTensor::Of<float>({2, 2}, {1, 2, 3, 4}), HostTensor::Of<int64_t>({2, 2}, {0, 0, 1, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1, 4, 3}));
  // axis 0 with fewer rows than data: [[1, 2, 3], [4, 5, 6], [7, 8, 9]] with
  // [[1, 2, 0], [2, 0, 0]] -> [[4, 8, 3], [7, 2, 3]].
  out = r.Run("GatherElements", {},
              {HostTensor::Of<int32_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
               HostTensor::Of<int32_t>({2, 3}, {1, 2, 0, 2, 0, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{4, 8, 3, 7, 2, 3}));
  // Negative indices count from the back.
  out = r.Run("GatherElements", {},
              {HostTensor::Of<int32_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
               HostTensor::Of<int64_t>({2, 3}, {-1, -2, 0, -2, 0, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{7, 5, 3, 4, 2, 3}));
}

TEST(GatherElementsTest, EveryAxisMatchesALoop) {
  OpRunner r;
  std::mt19937 rng(3);
  const Shape s = {3, 4, 5};
  std::vector<double> data(60);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i) * 0.5;
  for (int64_t axis = -3; axis < 3; ++axis) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    Shape is = {2, 3, 4};
    is[a] = 6;  // More indices than the axis holds.
    std::uniform_int_distribution<int64_t> pick(-s[a], s[a] - 1);
    std::vector<int64_t> idx(static_cast<size_t>(is[0] * is[1] * is[2]));
    for (int64_t& v : idx) v = pick(rng);
    auto out = r.Run("GatherElements", Attrs({{"axis", axis}}),
                     {HostTensor::Of<double>(s, data), HostTensor::Of<int64_t>(is, idx)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto got = (*out)[0].Values<double>();
    int64_t i = 0;
    for (int64_t x = 0; x < is[0]; ++x) {
      for (int64_t y = 0; y < is[1]; ++y) {
        for (int64_t z = 0; z < is[2]; ++z, ++i) {
          int64_t c[3] = {x, y, z};
          c[a] = idx[i] < 0 ? idx[i] + s[a] : idx[i];
          EXPECT_EQ(got[i], data[(c[0] * 4 + c[1]) * 5 + c[2]]) << "axis " << axis << " at " << i;
        }
      }
    }
  }
}

TEST(GatherElementsTest, Errors) {
  OpRunner r;
  const HostTensor data = HostTensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  // Out-of-range index: the kernel names it.
  auto out = r.Run("GatherElements", {}, {data, HostTensor::Of<int64_t>({1, 3}, {0, 2, 1})});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("index 2 is out of range"), std::string::npos) << out.status().message();
  // Rank, dims beyond data's, index dtype, axis.
  EXPECT_EQ(r.Infer("GatherElements", {}, {data, HostTensor::Of<int64_t>({3}, {0, 0, 0})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("GatherElements", {}, {data, HostTensor::Zeros(DType::kInt64, {1, 4})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("GatherElements", {}, {data, HostTensor::Zeros(DType::kFloat32, {1, 3})}).status().code(),
            StatusCode::kInvalidArgument);
  auto axis = r.Infer("GatherElements", Attrs({{"axis", int64_t{2}}}), {data, HostTensor::Zeros(DType::kInt64, {1, 3})});
  EXPECT_EQ(axis.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(axis.status().message().find("GatherElements"), std::string::npos) << axis.status().message();
}

}  // namespace gather_elements_test
}  // namespace remex::kernels
