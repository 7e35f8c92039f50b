// Gemm (https://onnx.ai/onnx/operators/onnx__Gemm.html): against a direct computation
// over its attributes, and the shape function's errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernels.h"
#include "kernels/ops/nn/nn_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace gemm_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;
using nntest::ExpectErrorMentions;
using nntest::ExpectNear;
using nntest::Iota;
using nntest::EmptyFloats;
using nntest::RandomFloats;
using nntest::Scales;
using nntest::Sizes;

// ---------------------------------------------------------------------------
// Gemm.

template <typename T>
void CheckGemm(OpRunner& r, bool ta, bool tb, float alpha, float beta, Shape c_shape, bool has_c,
               double tol) {
  const int64_t m = 5, k = 7, n = 4;
  const Shape as = ta ? Shape{k, m} : Shape{m, k};
  const Shape bs = tb ? Shape{n, k} : Shape{k, n};
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-4, 4);
  auto fill = [&](const Shape& s) {
    std::vector<double> v(*NumElements(s));
    for (double& e : v) e = dist(rng);
    return v;
  };
  const std::vector<double> a = fill(as), b = fill(bs), c = fill(c_shape);
  auto cast = [](const std::vector<double>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half>) {
        out[i] = FloatToHalf(static_cast<float>(v[i]));
      } else {
        out[i] = static_cast<T>(v[i]);
      }
    }
    return out;
  };
  Attributes attrs =
      Attrs({{"alpha", alpha}, {"beta", beta}, {"transA", int64_t{ta}}, {"transB", int64_t{tb}}});
  std::vector<HostTensor> in = {HostTensor::Of<T>(as, cast(a)), HostTensor::Of<T>(bs, cast(b))};
  if (has_c) in.push_back(HostTensor::Of<T>(c_shape, cast(c)));
  auto out = r.Run("Gemm", attrs, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape, (Shape{m, n}));
  std::vector<T> got = (*out)[0].template Values<T>();
  const int64_t cr = c_shape.size() == 2 ? c_shape[0] : 1;
  const int64_t cc = c_shape.empty() ? 1 : c_shape.back();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        acc += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      }
      double want = alpha * acc;
      if (has_c) want += beta * c[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)];
      double g;
      if constexpr (std::is_same_v<T, Half>) {
        g = HalfToFloat(got[i * n + j]);
      } else {
        g = static_cast<double>(got[i * n + j]);
      }
      ASSERT_NEAR(g, want, tol) << i << "," << j << " transA " << ta << " transB " << tb << " C "
                                << ShapeToString(c_shape);
    }
}

TEST(GemmTest, MatchesDirectComputation) {
  OpRunner r;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Shape& cs : {Shape{5, 4}, Shape{4}, Shape{1}, Shape{}, Shape{5, 1}, Shape{1, 4}}) {
        CheckGemm<float>(r, ta, tb, 0.5f, 2.0f, cs, true, 1e-4);
        CheckGemm<double>(r, ta, tb, 1.5f, -1.0f, cs, true, 1e-9);
      }
  CheckGemm<float>(r, false, true, 1.0f, 1.0f, {}, false, 1e-4);
  CheckGemm<float>(r, true, false, 2.0f, 0.0f, {5, 4}, true, 1e-4);
  CheckGemm<Half>(r, true, true, 1.0f, 1.0f, {4}, true, 1e-2);
  CheckGemm<int32_t>(r, false, false, 1.0f, 1.0f, {5, 4}, true, 0);
  CheckGemm<int64_t>(r, true, true, 1.0f, 1.0f, {1, 4}, true, 0);
}

TEST(GemmTest, ShapeErrors) {
  OpRunner r;
  const HostTensor a = HostTensor::Zeros(DType::kFloat32, {3, 4});
  const HostTensor b = HostTensor::Zeros(DType::kFloat32, {4, 5});
  ExpectErrorMentions(r.Infer("Gemm", {}, {a, a}).status(), "inner dims");
  ExpectErrorMentions(
      r.Infer("Gemm", {}, {a, b, HostTensor::Zeros(DType::kFloat32, {3, 4})}).status(), "C");
  ExpectErrorMentions(
      r.Infer("Gemm", {}, {a, b, HostTensor::Zeros(DType::kFloat32, {1, 3, 5})}).status(), "C");
  ExpectErrorMentions(
      r.Infer("Gemm", {}, {HostTensor::Zeros(DType::kFloat32, {3, 4, 1}), b}).status(), "2-D");
  ExpectErrorMentions(r.Infer("Gemm", {}, {a, HostTensor::Zeros(DType::kFloat64, {4, 5})}).status(),
                      "Gemm");
  ExpectErrorMentions(
      r.Infer("Gemm", {},
              {HostTensor::Zeros(DType::kInt8, {3, 4}), HostTensor::Zeros(DType::kInt8, {4, 5})})
          .status(),
      "dtype");
  ExpectErrorMentions(r.Infer("Gemm", Attrs({{"transA", int64_t{2}}}), {a, b}).status(), "transA");
  auto info = r.Infer(
      "Gemm", Attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}}),
      {HostTensor::Zeros(DType::kFloat32, {4, 3}), HostTensor::Zeros(DType::kFloat32, {5, 4})});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ((*info)[0].shape, (Shape{3, 5}));
}

}  // namespace gemm_test
}  // namespace remex::kernels
