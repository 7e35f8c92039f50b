#include "vm/tensor_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/float16.h"

namespace remex::vm {
namespace {

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

}  // namespace
}  // namespace remex::vm
