#include "vm/tensor_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "kernels/float16.h"
#include "vm/device/cpu_device.h"

namespace remex::vm {
namespace tensor_ops_test {

class TensorOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = CreateCpuDevice();
    allocator_ = Allocator::Create(*device_);
  }
  template <typename T>
  TensorPtr Make(DType dtype, Shape shape, const std::vector<T>& values) {
    auto t = AllocateTensor(*allocator_, dtype, shape);
    EXPECT_TRUE(t.ok());
    if (!values.empty()) std::memcpy((*t)->data(), values.data(), values.size() * sizeof(T));
    return *t;
  }
  std::unique_ptr<Device> device_;
  std::shared_ptr<Allocator> allocator_;
};

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_F(TensorOpsTest, StatsOfFloat32CountNanAndInfSeparately) {
  auto t = Make<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, kNan, kInf});
  auto s = ComputeStats(*device_, *t);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->count, 6u);
  EXPECT_EQ(s->nan_count, 1u);
  EXPECT_EQ(s->inf_count, 1u);
  EXPECT_DOUBLE_EQ(s->min, 1);
  EXPECT_DOUBLE_EQ(s->max, 4);
  EXPECT_DOUBLE_EQ(s->mean, 2.5);
  EXPECT_DOUBLE_EQ(s->std, std::sqrt(1.25));
}

TEST_F(TensorOpsTest, StatsOfOtherDtypes) {
  auto i64 = Make<int64_t>(DType::kInt64, {3}, {-5, 0, 5});
  auto s = ComputeStats(*device_, *i64);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->min, -5);
  EXPECT_DOUBLE_EQ(s->mean, 0);
  auto b = Make<uint8_t>(DType::kBool, {4}, {1, 0, 1, 1});
  s = ComputeStats(*device_, *b);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->mean, 0.75);
  auto h = Make<kernels::Half>(DType::kFloat16, {2}, {kernels::FloatToHalf(1.5f), kernels::FloatToHalf(-2.0f)});
  s = ComputeStats(*device_, *h);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->min, -2.0);
  EXPECT_DOUBLE_EQ(s->max, 1.5);
  auto d = Make<double>(DType::kFloat64, {2}, {0.25, 0.75});
  s = ComputeStats(*device_, *d);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->mean, 0.5);
  auto empty = Make<float>(DType::kFloat32, {0}, {});
  s = ComputeStats(*device_, *empty);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 0u);
  EXPECT_TRUE(std::isnan(s->mean));
}

TEST_F(TensorOpsTest, CompareFollowsNumpyIsclose) {
  auto ref = Make<float>(DType::kFloat32, {6}, {1, 2, 3, kNan, kInf, 0});
  auto same = Make<float>(DType::kFloat32, {6}, {1, 2, 3, 4, kInf, 0});
  auto c = CompareTensors(*device_, *same, *ref, 0, 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->count, 6u);
  EXPECT_EQ(c->mismatches, 1u);  // NaN in the reference never matches
  EXPECT_EQ(c->first_mismatch, 3);
  auto nan_both = Make<float>(DType::kFloat32, {6}, {1, 2, 3, kNan, kInf, 0});
  c = CompareTensors(*device_, *nan_both, *ref, 0, 0);
  EXPECT_EQ(c->mismatches, 1u);  // equal_nan = false
  c = CompareTensors(*device_, *nan_both, *ref, 0, 0, /*equal_nan=*/true);
  EXPECT_EQ(c->mismatches, 0u);
  c = CompareTensors(*device_, *same, *ref, 0, 0, /*equal_nan=*/true);
  EXPECT_EQ(c->mismatches, 1u);  // 4 against NaN still differs
  EXPECT_EQ(c->first_mismatch, 3);
  auto close = Make<float>(DType::kFloat32, {6}, {1.001f, 2, 3.5f, kNan, -kInf, 0.01f});
  c = CompareTensors(*device_, *close, *ref, 1e-2, 0);
  ASSERT_TRUE(c.ok());
  // 1.001 within rtol, 3.5 not, NaN not, -inf vs inf not, 0.01 vs 0 not (atol 0).
  EXPECT_EQ(c->mismatches, 4u);
  EXPECT_EQ(c->first_mismatch, 2);
  EXPECT_NEAR(c->max_abs_error, 0.5, 1e-6);
  EXPECT_TRUE(std::isinf(c->max_rel_error));  // 0.01 against 0
  c = CompareTensors(*device_, *close, *ref, 0.2, 0.02);
  EXPECT_EQ(c->mismatches, 2u);
}

TEST_F(TensorOpsTest, CompareIntegersExactlyAndChecksArguments) {
  auto a = Make<int64_t>(DType::kInt64, {3}, {(int64_t{1} << 60) + 1, 2, 3});
  auto b = Make<int64_t>(DType::kInt64, {3}, {(int64_t{1} << 60) + 1, 2, 4});
  auto c = CompareTensors(*device_, *a, *b, 0, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->mismatches, 1u);
  EXPECT_EQ(c->first_mismatch, 2);
  EXPECT_DOUBLE_EQ(c->max_abs_error, 1.0);
  auto f = Make<float>(DType::kFloat32, {3}, {1, 2, 3});
  EXPECT_EQ(CompareTensors(*device_, *a, *f, 0, 0).status().code(), StatusCode::kInvalidArgument);
  auto f2 = Make<float>(DType::kFloat32, {1, 3}, {1, 2, 3});
  auto shapes = CompareTensors(*device_, *f, *f2, 0, 0);
  EXPECT_EQ(shapes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shapes.status().message().find("[3]"), std::string::npos);
  EXPECT_EQ(CompareTensors(*device_, *f, *f, -1, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareTensors(*device_, *f, *f, 0, std::nan("")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TensorOpsTest, MemsetWritesDeviceMemory) {
  auto t = Make<uint8_t>(DType::kUint8, {3000}, {});
  ASSERT_TRUE(device_->Memset(t->data(), 7, 3000).ok());
  EXPECT_EQ(static_cast<uint8_t*>(t->data())[2999], 7);
  // The generic fallback (copies from the host) does the same.
  ASSERT_TRUE(device_->Device::Memset(t->data(), 9, 3000).ok());
  EXPECT_EQ(static_cast<uint8_t*>(t->data())[0], 9);
  EXPECT_EQ(static_cast<uint8_t*>(t->data())[2999], 9);
}

// A fill's element i depends on (seed, i) alone: a tensor past one 1 MiB block starts
// with the same values as a small one, and another seed differs.
TEST_F(TensorOpsTest, FillIsAFunctionOfSeedAndIndexAcrossBlocks) {
  TensorFill fill;
  fill.kind = TensorFill::Kind::kUniform;
  fill.seed = 42;
  auto small = Make<float>(DType::kFloat32, {10}, {});
  auto large = Make<float>(DType::kFloat32, {(1 << 18) + 10}, {});  // 1 MiB + 40 B
  ASSERT_TRUE(FillTensor(*device_, *small, fill).ok());
  int yields = 0;
  ASSERT_TRUE(FillTensor(*device_, *large, fill, [&] { ++yields; }).ok());
  EXPECT_EQ(yields, 2);  // after each of the two blocks
  EXPECT_EQ(std::memcmp(small->data(), large->data(), 10 * sizeof(float)), 0);
  const float* v = static_cast<const float*>(large->data());
  double sum = 0;
  for (size_t i = 0; i < (1u << 18) + 10; ++i) {
    ASSERT_GE(v[i], 0.0f);
    ASSERT_LT(v[i], 1.0f);
    sum += v[i];
  }
  EXPECT_NEAR(sum / ((1 << 18) + 10), 0.5, 0.01);
  fill.seed = 43;
  auto other = Make<float>(DType::kFloat32, {10}, {});
  ASSERT_TRUE(FillTensor(*device_, *other, fill).ok());
  EXPECT_NE(std::memcmp(small->data(), other->data(), 10 * sizeof(float)), 0);
}

TEST_F(TensorOpsTest, FillNormalHasItsMeanAndScale) {
  TensorFill fill;
  fill.kind = TensorFill::Kind::kNormal;
  fill.mean = 3;
  fill.scale = 2;
  fill.seed = 7;
  auto t = Make<double>(DType::kFloat64, {100000}, {});
  ASSERT_TRUE(FillTensor(*device_, *t, fill).ok());
  auto s = ComputeStats(*device_, *t);
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR(s->mean, 3, 0.05);  // standard error 0.006
  EXPECT_NEAR(s->std, 2, 0.05);
}

// Integers take the floor of a draw in [low, high): each of low .. high-1 appears; a
// float16 fill below 1 never rounds up to 1; bool is 0 or 1.
TEST_F(TensorOpsTest, FillUniformStaysInRangeForEveryDtype) {
  TensorFill fill;
  fill.kind = TensorFill::Kind::kUniform;
  fill.bounded = true;
  fill.low = -3;
  fill.high = 3;
  auto i8 = Make<int8_t>(DType::kInt8, {1000}, {});
  ASSERT_TRUE(FillTensor(*device_, *i8, fill).ok());
  std::set<int> seen;
  for (int k = 0; k < 1000; ++k) seen.insert(static_cast<const int8_t*>(i8->data())[k]);
  EXPECT_EQ(seen, (std::set<int>{-3, -2, -1, 0, 1, 2}));

  fill.low = 0;
  fill.high = 1;
  auto half = Make<uint16_t>(DType::kFloat16, {100000}, {});
  ASSERT_TRUE(FillTensor(*device_, *half, fill).ok());
  auto hs = ComputeStats(*device_, *half);
  ASSERT_TRUE(hs.ok());
  EXPECT_GE(hs->min, 0.0);
  EXPECT_LT(hs->max, 1.0);

  TensorFill bools;
  bools.kind = TensorFill::Kind::kUniform;  // default bounds: [0, 2)
  auto b = Make<uint8_t>(DType::kBool, {1000}, {});
  ASSERT_TRUE(FillTensor(*device_, *b, bools).ok());
  auto bs = ComputeStats(*device_, *b);
  ASSERT_TRUE(bs.ok());
  EXPECT_EQ(bs->min, 0.0);
  EXPECT_EQ(bs->max, 1.0);
}

TEST_F(TensorOpsTest, FillRefusesWhatDoesNotSuitTheDtype) {
  TensorFill normal;
  normal.kind = TensorFill::Kind::kNormal;
  auto st = CheckFill(DType::kInt32, normal);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("normal fill needs a floating dtype"), std::string::npos) << st.ToString();
  normal.scale = -1;
  EXPECT_EQ(CheckFill(DType::kFloat32, normal).code(), StatusCode::kInvalidArgument);
  TensorFill uniform;
  uniform.kind = TensorFill::Kind::kUniform;
  uniform.bounded = true;
  uniform.low = 0;
  uniform.high = 1000;
  st = CheckFill(DType::kInt8, uniform);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("leaves the values of int8"), std::string::npos) << st.ToString();
  uniform.high = 0;  // empty range
  EXPECT_EQ(CheckFill(DType::kFloat32, uniform).code(), StatusCode::kInvalidArgument);
  uniform.high = std::numeric_limits<double>::infinity();
  EXPECT_EQ(CheckFill(DType::kFloat32, uniform).code(), StatusCode::kInvalidArgument);
  // Nothing is written when the fill is refused.
  auto t = Make<int32_t>(DType::kInt32, {4}, {1, 2, 3, 4});
  EXPECT_FALSE(FillTensor(*device_, *t, normal).ok());
  EXPECT_EQ(static_cast<const int32_t*>(t->data())[3], 4);
}

}  // namespace tensor_ops_test
}  // namespace remex::vm
