// Einsum (kernels/ops/math/einsum.cc; ONNX Einsum-12): explicit and implicit outputs, matmul,
// batch matmul, transpose, sums, traces and diagonals, ellipsis with broadcasting,
// three inputs, integer wrapping, against loops written here; and the equation errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace einsum_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

HostTensor Seq(Shape shape, double start = 1) {
  std::vector<double> v(static_cast<size_t>(*NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return HostTensor::Of<double>(std::move(shape), v);
}

std::vector<double> RunEinsum(const std::string& eq, std::vector<HostTensor> in, Shape* shape = nullptr) {
  OpRunner r;
  auto out = r.Run("Einsum", Attrs({{"equation", eq}}), std::move(in));
  EXPECT_TRUE(out.ok()) << eq << ": " << out.status().ToString();
  if (!out.ok()) return {};
  if (shape) *shape = (*out)[0].shape;
  return (*out)[0].Values<double>();
}

TEST(EinsumTest, MatMulTransposeSumAndInnerProduct) {
  const HostTensor a = Seq({2, 3}), b = Seq({3, 4}, -5);
  std::vector<double> want(8, 0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 3; ++k) want[i * 4 + j] += (1 + i * 3 + k) * (-5 + k * 4 + j);
    }
  }
  Shape s;
  EXPECT_EQ(RunEinsum("ij,jk->ik", {a, b}, &s), want);
  EXPECT_EQ(s, (Shape{2, 4}));
  EXPECT_EQ(RunEinsum("ij, jk", {a, b}), want);  // Implicit output, spaces.
  EXPECT_EQ(RunEinsum("ij->ji", {a}, &s), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(s, (Shape{3, 2}));
  EXPECT_EQ(RunEinsum("ji", {a}), (std::vector<double>{1, 4, 2, 5, 3, 6}));  // Implicit: alphabetical.
  EXPECT_EQ(RunEinsum("ij->i", {a}), (std::vector<double>{6, 15}));
  EXPECT_EQ(RunEinsum("ij->", {a}, &s), (std::vector<double>{21}));
  EXPECT_EQ(s, Shape{});
  EXPECT_EQ(RunEinsum("i,i", {Seq({3}), Seq({3}, 4)}), (std::vector<double>{1 * 4 + 2 * 5 + 3 * 6}));
  EXPECT_EQ(RunEinsum("i,j->ij", {Seq({2}), Seq({2}, 3)}), (std::vector<double>{3, 4, 6, 8}));
  // Three inputs: a chain of products.
  EXPECT_EQ(RunEinsum("i,ij,j->", {Seq({2}), Seq({2, 2}), Seq({2})}),
            (std::vector<double>{1 * 1 * 1 + 1 * 2 * 2 + 2 * 3 * 1 + 2 * 4 * 2}));
}

TEST(EinsumTest, DiagonalsTracesAndEllipsis) {
  const HostTensor m = Seq({3, 3});
  EXPECT_EQ(RunEinsum("ii->i", {m}), (std::vector<double>{1, 5, 9}));
  EXPECT_EQ(RunEinsum("ii", {m}), (std::vector<double>{15}));  // Implicit: trace.
  // test_einsum_batch_diagonal: ...ii->...i.
  Shape s;
  EXPECT_EQ(RunEinsum("...ii->...i", {Seq({2, 2, 2})}, &s), (std::vector<double>{1, 4, 5, 8}));
  EXPECT_EQ(s, (Shape{2, 2}));
  // Batch matmul with broadcast ellipsis dims: [2, 1, 2, 2] x [3, 2, 1].
  const HostTensor a = Seq({2, 1, 2, 2}), b = Seq({3, 2, 1});
  auto got = RunEinsum("...ij,...jk->...ik", {a, b}, &s);
  EXPECT_EQ(s, (Shape{2, 3, 2, 1}));
  ASSERT_EQ(got.size(), 12u);
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 3; ++q) {
      for (int i = 0; i < 2; ++i) {
        double want = 0;
        for (int j = 0; j < 2; ++j) want += (1 + p * 4 + i * 2 + j) * (1 + q * 2 + j);
        EXPECT_EQ(got[(p * 3 + q) * 2 + i], want) << p << q << i;
      }
    }
  }
  // Ellipsis dims left out of an explicit output are summed; implicit keeps them first.
  EXPECT_EQ(RunEinsum("...i->i", {Seq({2, 3})}), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(RunEinsum("i...", {Seq({2, 3})}, &s), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(s, (Shape{3, 2}));
}

TEST(EinsumTest, IntegersWrap) {
  OpRunner r;
  auto out =
      r.Run("Einsum", Attrs({{"equation", std::string("i,i->")}}),
            {HostTensor::Of<int32_t>({2}, {65536, 65536}), HostTensor::Of<int32_t>({2}, {32768, 32768})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{0}));  // 2^32 wraps to 0.
}

TEST(EinsumTest, Errors) {
  OpRunner r;
  const HostTensor a = Seq({2, 3});
  for (const char* eq :
       {"ij,jk->ik", "ijk->i", "i->i", "ij->k", "ij->ii", "i.j->i", "ij->i->j", "i#", "......"}) {
    EXPECT_FALSE(r.Run("Einsum", Attrs({{"equation", std::string(eq)}}), {a}).ok()) << eq;
  }
  EXPECT_FALSE(r.Run("Einsum", Attrs({{"equation", std::string("ij,ij->i")}}), {a, Seq({3, 2})}).ok());
  EXPECT_FALSE(r.Run("Einsum", {}, {a}).ok());  // No equation.
  EXPECT_FALSE(
      r.Run("Einsum", Attrs({{"equation", std::string("i->i")}}), {HostTensor::Of<uint8_t>({2}, {1, 2})})
          .ok());
}

}  // namespace einsum_test
}  // namespace remex::kernels
