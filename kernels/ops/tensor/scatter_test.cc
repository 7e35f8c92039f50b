// ScatterElements and Scatter (kernels/ops/tensor/scatter.cc): ONNX's examples, reductions add
// and mul with duplicate indices, every axis of a 3-D tensor against a loop, and the
// errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace scatter_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(ScatterTest, OnnxExamples) {
  OpRunner r;
  // axis 0: data zeros [3, 3], indices [[1, 0, 2], [0, 2, 1]], updates 1.0 .. 2.2.
  const HostTensor data = HostTensor::Zeros(DType::kFloat32, {3, 3});
  const HostTensor indices = HostTensor::Of<int64_t>({2, 3}, {1, 0, 2, 0, 2, 1});
  const HostTensor updates = HostTensor::Of<float>({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  for (const char* op : {"ScatterElements", "Scatter-10"}) {
    auto out = r.Run(op, {}, {data, indices, updates});
    ASSERT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f})) << op;
  }
  // axis 1 with a negative index: [[1, 2, 3, 4, 5]], indices [[1, -2]] (3), updates [[1.1, 2.1]].
  auto out = r.Run("ScatterElements", Attrs({{"axis", int64_t{1}}}),
                   {HostTensor::Of<float>({1, 5}, {1, 2, 3, 4, 5}), HostTensor::Of<int32_t>({1, 2}, {1, -2}),
                    HostTensor::Of<float>({1, 2}, {1.1f, 2.1f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1.1f, 3, 2.1f, 5}));
}

TEST(ScatterTest, AddAndMulAccumulateDuplicates) {
  OpRunner r;
  const HostTensor data = HostTensor::Of<float>({1, 5}, {1, 2, 3, 4, 5});
  const HostTensor indices = HostTensor::Of<int64_t>({1, 2}, {1, 1});
  const HostTensor updates = HostTensor::Of<float>({1, 2}, {1.1f, 2.1f});
  auto add = r.Run("ScatterElements", Attrs({{"axis", int64_t{1}}, {"reduction", std::string("add")}}),
                   {data, indices, updates});
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  EXPECT_EQ((*add)[0].Values<float>(), (std::vector<float>{1, 2.0f + 1.1f + 2.1f, 3, 4, 5}));
  auto mul = r.Run("ScatterElements", Attrs({{"axis", int64_t{1}}, {"reduction", std::string("mul")}}),
                   {data, indices, updates});
  ASSERT_TRUE(mul.ok());
  EXPECT_EQ((*mul)[0].Values<float>(), (std::vector<float>{1, 2.0f * 1.1f * 2.1f, 3, 4, 5}));
  // Integers wrap.
  auto wrap = r.Run("ScatterElements", Attrs({{"reduction", std::string("add")}}),
                    {HostTensor::Of<int32_t>({1}, {INT32_MAX}), HostTensor::Of<int64_t>({1}, {0}),
                     HostTensor::Of<int32_t>({1}, {1})});
  ASSERT_TRUE(wrap.ok());
  EXPECT_EQ((*wrap)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MIN}));
}

TEST(ScatterTest, EveryAxisMatchesALoop) {
  OpRunner r;
  const Shape s = {3, 4, 5};
  std::vector<int64_t> data(60);
  for (int64_t i = 0; i < 60; ++i) data[i] = i;
  for (int64_t axis = 0; axis < 3; ++axis) {
    Shape is = {2, 3, 4};
    // Distinct targets along the axis for each other coordinate: index = (sum of the
    // other coordinates + k) % extent, k the coordinate along the axis (< extent).
    std::vector<int64_t> idx, upd;
    for (int64_t a = 0; a < is[0]; ++a) {
      for (int64_t b = 0; b < is[1]; ++b) {
        for (int64_t c = 0; c < is[2]; ++c) {
          const int64_t co[3] = {a, b, c};
          int64_t other = 0;
          for (int d = 0; d < 3; ++d) other += d == axis ? 0 : co[d];
          idx.push_back((other + co[axis]) % s[axis]);
          upd.push_back(1000 + static_cast<int64_t>(upd.size()));
        }
      }
    }
    auto out = r.Run("ScatterElements", Attrs({{"axis", axis}}),
                     {HostTensor::Of<int64_t>(s, data), HostTensor::Of<int64_t>(is, idx), HostTensor::Of<int64_t>(is, upd)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<int64_t> want = data;
    int64_t i = 0;
    for (int64_t a = 0; a < is[0]; ++a) {
      for (int64_t b = 0; b < is[1]; ++b) {
        for (int64_t c = 0; c < is[2]; ++c, ++i) {
          int64_t co[3] = {a, b, c};
          co[axis] = idx[i];
          want[(co[0] * 4 + co[1]) * 5 + co[2]] = upd[i];
        }
      }
    }
    EXPECT_EQ((*out)[0].Values<int64_t>(), want) << "axis " << axis;
  }
}

TEST(ScatterTest, Errors) {
  OpRunner r;
  const HostTensor data = HostTensor::Zeros(DType::kFloat32, {2, 3});
  const HostTensor upd = HostTensor::Zeros(DType::kFloat32, {1, 2});
  auto out = r.Run("ScatterElements", {}, {data, HostTensor::Of<int64_t>({1, 2}, {0, 2}), upd});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("index 2 is out of range"), std::string::npos) << out.status().message();
  // updates of another shape or dtype, bad reduction, bool with add.
  EXPECT_EQ(r.Infer("ScatterElements", {}, {data, HostTensor::Zeros(DType::kInt64, {1, 2}), HostTensor::Zeros(DType::kFloat32, {2, 1})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("ScatterElements", {}, {data, HostTensor::Zeros(DType::kInt64, {1, 2}), HostTensor::Zeros(DType::kFloat64, {1, 2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto red = r.Infer("ScatterElements", Attrs({{"reduction", std::string("max")}}),
                     {data, HostTensor::Zeros(DType::kInt64, {1, 2}), upd});
  EXPECT_EQ(red.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(red.status().message().find("ScatterElements"), std::string::npos) << red.status().message();
  EXPECT_EQ(r.Infer("ScatterElements", Attrs({{"reduction", std::string("add")}}),
                    {HostTensor::Zeros(DType::kBool, {2}), HostTensor::Zeros(DType::kInt64, {1}),
                     HostTensor::Zeros(DType::kBool, {1})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace scatter_test
}  // namespace remex::kernels
