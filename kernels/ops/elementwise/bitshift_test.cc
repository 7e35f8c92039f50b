// BitShift (kernels/ops/elementwise/bitshift.cc): ONNX's examples, every dtype, shifts by the bit width
// or more, broadcasting, and the errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace bitshift_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

Attributes Direction(const char* d) { return Attrs({{"direction", std::string(d)}}); }

template <typename U>
void ExpectShifts() {
  OpRunner r;
  SCOPED_TRACE(DTypeName(testing::DTypeOf<U>()));
  const U bits = static_cast<U>(sizeof(U) * 8);
  const HostTensor x = HostTensor::Of<U>({5}, {16, 4, 1, 1, static_cast<U>(~U(0))});
  const HostTensor y = HostTensor::Of<U>({5}, {1, 2, 3, static_cast<U>(bits - 1), bits});
  StatusOr<std::vector<HostTensor>> left = r.Run("BitShift", Direction("LEFT"), {x, y});
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  EXPECT_EQ((*left)[0].Values<U>(), (std::vector<U>{32, 16, 8, static_cast<U>(U(1) << (bits - 1)), 0}));
  StatusOr<std::vector<HostTensor>> right = r.Run("BitShift", Direction("RIGHT"), {x, y});
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ((*right)[0].Values<U>(), (std::vector<U>{8, 1, 0, 0, 0}));
  // Shifts past the width give 0 too, whatever the amount.
  StatusOr<std::vector<HostTensor>> far =
      r.Run("BitShift", Direction("LEFT"),
            {HostTensor::Of<U>({2}, {1, 1}),
             HostTensor::Of<U>({2}, {static_cast<U>(bits + 1), static_cast<U>(~U(0))})});
  ASSERT_TRUE(far.ok());
  EXPECT_EQ((*far)[0].Values<U>(), (std::vector<U>{0, 0}));
}

TEST(BitShiftTest, EveryDTypeBothDirections) {
  ExpectShifts<uint8_t>();
  ExpectShifts<uint16_t>();
  ExpectShifts<uint32_t>();
  ExpectShifts<uint64_t>();
}

TEST(BitShiftTest, Broadcasts) {
  OpRunner r;
  auto out = r.Run("BitShift", Direction("LEFT"),
                   {HostTensor::Of<uint32_t>({2, 1}, {1, 3}), HostTensor::Of<uint32_t>({3}, {0, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*out)[0].Values<uint32_t>(), (std::vector<uint32_t>{1, 2, 4, 3, 6, 12}));
}

TEST(BitShiftTest, Errors) {
  OpRunner r;
  const HostTensor u = HostTensor::Of<uint8_t>({1}, {1});
  // Signed and float dtypes, unequal dtypes.
  EXPECT_FALSE(r.Infer("BitShift", Direction("LEFT"),
                       {HostTensor::Of<int32_t>({1}, {1}), HostTensor::Of<int32_t>({1}, {1})})
                   .ok());
  EXPECT_FALSE(r.Infer("BitShift", Direction("LEFT"), {u, HostTensor::Of<uint16_t>({1}, {1})}).ok());
  // direction is required and LEFT or RIGHT.
  EXPECT_FALSE(r.Run("BitShift", {}, {u, u}).ok());
  auto bad = r.Run("BitShift", Direction("UP"), {u, u});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("LEFT or RIGHT"), std::string::npos) << bad.status().message();
  // Shapes that do not broadcast.
  EXPECT_FALSE(r.Infer("BitShift", Direction("LEFT"),
                       {HostTensor::Of<uint8_t>({2}, {1, 1}), HostTensor::Of<uint8_t>({3}, {1, 1, 1})})
                   .ok());
}

}  // namespace bitshift_test
}  // namespace remex::kernels
