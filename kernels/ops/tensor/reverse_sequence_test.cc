// ReverseSequence (kernels/ops/tensor/reverse_sequence.cc; ONNX ReverseSequence-10):
// ONNX's examples and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace reverse_sequence_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(ReverseSequenceTest, OnnxExamples) {
  OpRunner r;
  const HostTensor lens_time = HostTensor::Of<int64_t>({4}, {4, 3, 2, 1});
  auto out = r.Run(
      "ReverseSequence", Attrs({{"time_axis", int64_t{0}}, {"batch_axis", int64_t{1}}}),
      {HostTensor::Of<float>({4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}), lens_time});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
  out = r.Run("ReverseSequence", Attrs({{"time_axis", int64_t{1}}, {"batch_axis", int64_t{0}}}),
              {HostTensor::Of<float>({4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}),
               HostTensor::Of<int64_t>({4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}));
  // Trailing dims move together; length 0 copies.
  out = r.Run("ReverseSequence", {},
              {HostTensor::Of<int32_t>({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
               HostTensor::Of<int64_t>({2}, {3, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11}));
}

TEST(ReverseSequenceTest, Errors) {
  OpRunner r;
  const HostTensor x = HostTensor::Of<float>({3, 2}, {0, 1, 2, 3, 4, 5});
  auto out = r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({2}, {4, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().ToString();
  out = r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({2}, {-1, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().ToString();
  EXPECT_FALSE(r.Run("ReverseSequence", {}, {x, HostTensor::Of<int64_t>({3}, {1, 1, 1})}).ok());
  EXPECT_FALSE(r.Run("ReverseSequence", {}, {x, HostTensor::Of<int32_t>({2}, {1, 1})}).ok());
  EXPECT_FALSE(r.Run("ReverseSequence", Attrs({{"batch_axis", int64_t{0}}}),
                     {x, HostTensor::Of<int64_t>({3}, {1, 1, 1})})
                   .ok());
  EXPECT_FALSE(
      r.Run("ReverseSequence", {}, {HostTensor::Of<float>({3}, {0, 1, 2}), HostTensor::Of<int64_t>({1}, {1})})
          .ok());
}

}  // namespace reverse_sequence_test
}  // namespace remex::kernels
