// CumSum (kernels/ops/math/cumsum.cc; ONNX CumSum-11/14): ONNX's examples (exclusive, reverse,
// both), every axis of a 3-D tensor against sums written here, integer wrapping,
// float16, and the errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace cumsum_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor Axis(int64_t a) { return HostTensor::Of<int64_t>({}, {a}); }

TEST(CumSumTest, OnnxExamples) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<double>({5}, {1, 2, 3, 4, 5});
  struct Case {
    int64_t exclusive, reverse;
    std::vector<double> want;
  };
  for (const Case& c : {Case{0, 0, {1, 3, 6, 10, 15}}, Case{1, 0, {0, 1, 3, 6, 10}}, Case{0, 1, {15, 14, 12, 9, 5}},
                        Case{1, 1, {14, 12, 9, 5, 0}}}) {
    auto out = r.Run("CumSum", Attrs({{"exclusive", c.exclusive}, {"reverse", c.reverse}}), {x, Axis(0)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].Values<double>(), c.want) << c.exclusive << c.reverse;
  }
  // 2-D along axis 1 (int32 axis input) and along -2.
  const HostTensor m = HostTensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = r.Run("CumSum", {}, {m, HostTensor::Of<int32_t>({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  out = r.Run("CumSum", {}, {m, Axis(-2)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3, 5, 7, 9}));
}

TEST(CumSumTest, EveryAxisMatchesALoop) {
  OpRunner r;
  const Shape s = {2, 3, 4};
  std::vector<int64_t> x(24);
  for (int64_t i = 0; i < 24; ++i) x[i] = (i * 7) % 11 - 5;
  for (int64_t axis = 0; axis < 3; ++axis) {
    auto out = r.Run("CumSum", {}, {HostTensor::Of<int64_t>(s, x), Axis(axis)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const auto got = (*out)[0].Values<int64_t>();
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t c = 0; c < 4; ++c) {
          int64_t want = 0;
          const int64_t idx[3] = {a, b, c};
          for (int64_t k = 0; k <= idx[axis]; ++k) {
            int64_t j[3] = {a, b, c};
            j[axis] = k;
            want += x[(j[0] * 3 + j[1]) * 4 + j[2]];
          }
          EXPECT_EQ(got[(a * 3 + b) * 4 + c], want) << "axis " << axis;
        }
      }
    }
  }
}

TEST(CumSumTest, IntegersWrapAndFloat16SumsInFloat) {
  OpRunner r;
  auto out = r.Run("CumSum", {}, {HostTensor::Of<int32_t>({2}, {INT32_MAX, 1}), Axis(0)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MAX, INT32_MIN}));
  out = r.Run("CumSum", {}, {HostTensor::Of<uint64_t>({2}, {UINT64_MAX, 2}), Axis(0)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint64_t>(), (std::vector<uint64_t>{UINT64_MAX, 1}));
  // 2048 + 1 + 1 in float16 steps would stay 2048; summed in float32 it is 2050.
  out = r.Run("CumSum", {}, {HostTensor::Of<Half>({3}, {FloatToHalf(2048), FloatToHalf(1), FloatToHalf(1)}), Axis(0)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[2]), 2050.0f);
}

TEST(CumSumTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Zeros(DType::kFloat32, {2, 2});
  auto axis = r.Infer("CumSum", {}, {x, Axis(2)});
  EXPECT_EQ(axis.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(axis.status().message().find("CumSum"), std::string::npos) << axis.status().message();
  EXPECT_EQ(r.Infer("CumSum", {}, {x, HostTensor::Of<int64_t>({2}, {0, 1})}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("CumSum", Attrs({{"exclusive", int64_t{2}}}), {x, Axis(0)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("CumSum", {}, {HostTensor::Zeros(DType::kInt8, {2}), Axis(0)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Infer("CumSum", {}, {HostTensor::Zeros(DType::kFloat32, {}), Axis(0)}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace cumsum_test
}  // namespace remex::kernels
