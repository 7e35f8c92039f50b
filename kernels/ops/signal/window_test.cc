// The window ops (kernels/ops/signal/window.cc; ONNX HannWindow-17, HammingWindow-17,
// BlackmanWindow-17): values against formulas written here, dtypes, and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace window_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;


constexpr double kPi = 3.14159265358979323846;

double Window(const std::string& op, double n, double big_n) {
  const double x = 2 * kPi * n / big_n;
  if (op == "HannWindow") return 0.5 - 0.5 * std::cos(x);
  if (op == "HammingWindow") return 25.0 / 46 - 21.0 / 46 * std::cos(x);
  return 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
}

TEST(WindowTest, PeriodicAndSymmetricMatchTheFormulas) {
  OpRunner r;
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t periodic : {0, 1}) {
      for (int64_t size : {2, 10, 33}) {
        SCOPED_TRACE(std::string(op) + " periodic " + std::to_string(periodic) + " size " +
                     std::to_string(size));
        auto out = r.Run(op, Attrs({{"periodic", periodic}, {"output_datatype", int64_t{11}}}),
                         {HostTensor::Of<int64_t>({}, {size})});
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ASSERT_EQ((*out)[0].shape, Shape{size});
        const auto got = (*out)[0].Values<double>();
        for (int64_t n = 0; n < size; ++n) {
          EXPECT_NEAR(got[n], Window(op, n, periodic ? size : size - 1), 1e-15) << n;
        }
      }
    }
  }
}

TEST(WindowTest, DtypesAndDefaults) {
  OpRunner r;
  // Default float32, periodic; int32 size.
  auto out = r.Run("HannWindow", {}, {HostTensor::Of<int32_t>({}, {4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0.0f, 0.5f, 1.0f, 0.5f}));
  // Integer output truncates: only the peak is 1.
  out = r.Run("HannWindow", Attrs({{"output_datatype", int64_t{7}}}), {HostTensor::Of<int64_t>({1}, {4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  // float16, empty.
  out =
      r.Run("BlackmanWindow", Attrs({{"output_datatype", int64_t{10}}}), {HostTensor::Of<int64_t>({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, Shape{0});
  // A symmetric window of one element is 0 / 0, NaN as in ONNX's reference.
  out = r.Run("HammingWindow", Attrs({{"periodic", int64_t{0}}}), {HostTensor::Of<int64_t>({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan((*out)[0].Values<float>()[0]));
}

TEST(WindowTest, Errors) {
  OpRunner r;
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<int64_t>({}, {-1})}).ok());
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<float>({}, {4})}).ok());
  EXPECT_FALSE(r.Run("HannWindow", {}, {HostTensor::Of<int64_t>({2}, {4, 4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"periodic", int64_t{2}}}), {HostTensor::Of<int64_t>({}, {4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"output_datatype", int64_t{9}}}), {HostTensor::Of<int64_t>({}, {4})}).ok());
  EXPECT_FALSE(
      r.Run("HannWindow", Attrs({{"output_datatype", int64_t{99}}}), {HostTensor::Of<int64_t>({}, {4})})
          .ok());
}

}  // namespace window_test
}  // namespace remex::kernels
