// GatherND and ScatterND (kernels/ops/tensor/gather_nd.cc): ONNX's examples, batch_dims, negative
// indices, reductions with duplicate tuples, and the errors (out of range first).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace gather_nd_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

TEST(GatherNdTest, OnnxExamples) {
  OpRunner r;
  const HostTensor d2 = HostTensor::Of<int32_t>({2, 2}, {0, 1, 2, 3});
  auto e1 = r.Run("GatherND", {}, {d2, HostTensor::Of<int64_t>({2, 2}, {0, 0, 1, 1})});
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  EXPECT_EQ((*e1)[0].shape, (Shape{2}));
  EXPECT_EQ((*e1)[0].Values<int32_t>(), (std::vector<int32_t>{0, 3}));
  auto e2 = r.Run("GatherND", {}, {d2, HostTensor::Of<int64_t>({2, 1}, {1, 0})});
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ((*e2)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*e2)[0].Values<int32_t>(), (std::vector<int32_t>{2, 3, 0, 1}));
  const HostTensor d3 = HostTensor::Of<float>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto e3 = r.Run("GatherND", {}, {d3, HostTensor::Of<int64_t>({2, 1, 2}, {0, 1, 1, 0})});
  ASSERT_TRUE(e3.ok());
  EXPECT_EQ((*e3)[0].shape, (Shape{2, 1, 2}));
  EXPECT_EQ((*e3)[0].Values<float>(), (std::vector<float>{2, 3, 4, 5}));
  // batch_dims = 1: each batch entry indexes its own block.
  auto e5 =
      r.Run("GatherND", Attrs({{"batch_dims", int64_t{1}}}), {d3, HostTensor::Of<int64_t>({2, 1}, {1, 0})});
  ASSERT_TRUE(e5.ok()) << e5.status().ToString();
  EXPECT_EQ((*e5)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*e5)[0].Values<float>(), (std::vector<float>{2, 3, 4, 5}));
  // Negative indices count from the end.
  auto neg = r.Run("GatherND", {}, {d2, HostTensor::Of<int64_t>({1, 2}, {-1, -2})});
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ((*neg)[0].Values<int32_t>(), (std::vector<int32_t>{2}));
}

TEST(GatherNdTest, Errors) {
  OpRunner r;
  const HostTensor d2 = HostTensor::Of<int32_t>({2, 2}, {0, 1, 2, 3});
  for (int64_t bad : {2, -3}) {
    auto out = r.Run("GatherND", {}, {d2, HostTensor::Of<int64_t>({1, 2}, {0, bad})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().message();
  }
  // int32 indices, a tuple longer than data's rank, batch_dims too large or mismatched.
  EXPECT_FALSE(r.Infer("GatherND", {}, {d2, HostTensor::Of<int32_t>({1, 1}, {0})}).ok());
  EXPECT_FALSE(r.Infer("GatherND", {}, {d2, HostTensor::Of<int64_t>({1, 3}, {0, 0, 0})}).ok());
  EXPECT_FALSE(
      r.Infer("GatherND", Attrs({{"batch_dims", int64_t{2}}}), {d2, HostTensor::Of<int64_t>({2, 1}, {0, 0})})
          .ok());
  EXPECT_FALSE(r.Infer("GatherND", Attrs({{"batch_dims", int64_t{1}}}),
                       {d2, HostTensor::Of<int64_t>({3, 1}, {0, 0, 0})})
                   .ok());
}

TEST(ScatterNdTest, OnnxExamplesAndReductions) {
  OpRunner r;
  const HostTensor data = HostTensor::Of<float>({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto e1 = r.Run(
      "ScatterND", {},
      {data, HostTensor::Of<int64_t>({4, 1}, {4, 3, 1, 7}), HostTensor::Of<float>({4}, {9, 10, 11, 12})});
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  EXPECT_EQ((*e1)[0].Values<float>(), (std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12}));
  // Slices: rows of a [3, 2] matrix, a negative index; duplicates keep the last.
  const HostTensor m = HostTensor::Of<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto rows = r.Run("ScatterND", {},
                    {m, HostTensor::Of<int64_t>({3, 1}, {-1, 0, 0}),
                     HostTensor::Of<int64_t>({3, 2}, {7, 8, 9, 10, 11, 12})});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ((*rows)[0].Values<int64_t>(), (std::vector<int64_t>{11, 12, 3, 4, 7, 8}));
  const HostTensor dup = HostTensor::Of<int64_t>({2, 1}, {0, 0});
  const HostTensor upd = HostTensor::Of<float>({2}, {5, 6});
  auto add = r.Run("ScatterND", Attrs({{"reduction", std::string("add")}}), {data, dup, upd});
  ASSERT_TRUE(add.ok());
  EXPECT_EQ((*add)[0].Values<float>()[0], 12);
  auto mul = r.Run("ScatterND", Attrs({{"reduction", std::string("mul")}}), {data, dup, upd});
  ASSERT_TRUE(mul.ok());
  EXPECT_EQ((*mul)[0].Values<float>()[0], 30);
  // Integers wrap.
  auto wrap = r.Run("ScatterND", Attrs({{"reduction", std::string("add")}}),
                    {HostTensor::Of<uint8_t>({1}, {255}), HostTensor::Of<int64_t>({1, 1}, {0}),
                     HostTensor::Of<uint8_t>({1}, {2})});
  ASSERT_TRUE(wrap.ok());
  EXPECT_EQ((*wrap)[0].Values<uint8_t>(), (std::vector<uint8_t>{1}));
}

TEST(ScatterNdTest, Errors) {
  OpRunner r;
  const HostTensor data = HostTensor::Of<float>({4}, {1, 2, 3, 4});
  auto out = r.Run("ScatterND", {},
                   {data, HostTensor::Of<int64_t>({2, 1}, {0, 4}), HostTensor::Of<float>({2}, {0, 0})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status().message();
  // Updates of the wrong shape or dtype; an unknown reduction; add on bool.
  const HostTensor idx = HostTensor::Of<int64_t>({1, 1}, {0});
  EXPECT_FALSE(r.Infer("ScatterND", {}, {data, idx, HostTensor::Of<float>({2}, {0, 0})}).ok());
  EXPECT_FALSE(r.Infer("ScatterND", {}, {data, idx, HostTensor::Of<double>({1}, {0})}).ok());
  EXPECT_FALSE(r.Run("ScatterND", Attrs({{"reduction", std::string("max")}}),
                     {data, idx, HostTensor::Of<float>({1}, {0})})
                   .ok());
  const HostTensor b = HostTensor::Of<bool>({1}, {true});
  EXPECT_FALSE(r.Infer("ScatterND", Attrs({{"reduction", std::string("add")}}), {b, idx, b}).ok());
}

}  // namespace gather_nd_test
}  // namespace remex::kernels
