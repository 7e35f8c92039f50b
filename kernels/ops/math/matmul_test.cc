// FusedMatMul (kernels/ops/math/matmul.cc): against the registry's MatMul, Add and activation
// kernels run one after the other; float16 against float32; its errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/float32_copies.h"
#include "kernels/float_test_util.h"
#include "kernels/kernels.h"
#include "kernels/op_attrs.h"
#include "kernels/prepack.h"
#include "kernels/epilogue_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace matmul_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

using testing::AllEpilogueActivations;
using testing::EpilogueActivation;
using testing::RunUnfusedEpilogue;
using testing::WithEpilogue;

Attributes FusedAttrs(const EpilogueActivation& act) { return WithEpilogue({}, act); }

// The unfused reference: MatMul, then Add of the bias when given, then the activation op.
StatusOr<HostTensor> Unfused(OpRunner& r, const HostTensor& a, const HostTensor& b, const HostTensor* bias,
                             const EpilogueActivation& act) {
  REMEX_ASSIGN_OR_RETURN(std::vector<HostTensor> y, r.Run("MatMul", {}, {a, b}));
  return RunUnfusedEpilogue(r, y[0], bias, act);
}

// A's shape and N: 2-D, batch dims, odd and size-1 extents.
struct Case {
  Shape a;
  int64_t n;
};

std::vector<Case> Cases() {
  return {{{5, 7}, 3}, {{1, 1}, 1}, {{2, 3, 17}, 9}, {{2, 1, 4, 33}, 65}, {{3, 40, 96}, 120}, {{1, 25, 1}, 6}};
}

std::vector<float> Random(std::mt19937& rng, const Shape& s, bool half_exact = false) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(*NumElements(s));
  for (float& f : v) f = half_exact ? HalfToFloat(FloatToHalf(dist(rng))) : dist(rng);
  return v;
}

std::vector<Half> ToHalf(const std::vector<float>& f) {
  std::vector<Half> h;
  for (float v : f) h.push_back(FloatToHalf(v));
  return h;
}

TEST(FusedMatMulTest, MatchesMatMulAddActivation) {
  OpRunner r;
  std::mt19937 rng(21);
  int checked = 0;
  for (const Case& c : Cases()) {
    const int64_t k = c.a.back();
    const HostTensor a = HostTensor::Of(c.a, Random(rng, c.a));
    const HostTensor b = HostTensor::Of(Shape{k, c.n}, Random(rng, {k, c.n}));
    const HostTensor bias = HostTensor::Of(Shape{c.n}, Random(rng, {c.n}));
    for (const EpilogueActivation& act : AllEpilogueActivations()) {
      for (bool with_bias : {false, true}) {
        auto want = Unfused(r, a, b, with_bias ? &bias : nullptr, act);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        std::vector<HostTensor> in = {a, b};
        if (with_bias) in.push_back(bias);
        // Twice: the second call uses the cached primitive.
        for (int call = 0; call < 2; ++call) {
          auto got = r.Run("FusedMatMul", FusedAttrs(act), in);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          ASSERT_EQ((*got)[0].shape, want->shape);
          const std::vector<float> expect = want->Values<float>(), actual = (*got)[0].Values<float>();
          for (size_t i = 0; i < expect.size(); ++i) {
            ASSERT_NEAR(actual[i], expect[i], 1e-4f + 1e-5f * std::fabs(expect[i]))
                << "activation '" << act.name << "' at " << i << " A " << ShapeToString(c.a) << " N " << c.n
                << " bias " << with_bias;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6 * 10 * 2);
}

// float16 computes in float32 and rounds once: within float16 precision of the float32
// kernel on the same values.
TEST(FusedMatMulTest, Float16MatchesFloat32WithinTolerance) {
  OpRunner r;
  std::mt19937 rng(22);
  for (const Case& c : Cases()) {
    const int64_t k = c.a.back();
    const std::vector<float> a = Random(rng, c.a, true), b = Random(rng, {k, c.n}, true),
                             bias = Random(rng, {c.n}, true);
    for (const EpilogueActivation& act : AllEpilogueActivations()) {
      for (bool with_bias : {false, true}) {
        std::vector<HostTensor> in32 = {HostTensor::Of(c.a, a), HostTensor::Of(Shape{k, c.n}, b)};
        std::vector<HostTensor> in16 = {HostTensor::Of(c.a, ToHalf(a)), HostTensor::Of(Shape{k, c.n}, ToHalf(b))};
        if (with_bias) {
          in32.push_back(HostTensor::Of(Shape{c.n}, bias));
          in16.push_back(HostTensor::Of(Shape{c.n}, ToHalf(bias)));
        }
        auto want = r.Run("FusedMatMul", FusedAttrs(act), in32);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        auto got = r.Run("FusedMatMul", FusedAttrs(act), in16);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ((*got)[0].dtype, DType::kFloat16);
        testing::ExpectAllClose(testing::FloatValues((*got)[0]), testing::FloatValues((*want)[0]), 1e-3, 1e-3,
                                "float16 " + act.name);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// MatMul (batched, B broadcast) and Gemm (transposes, alpha, beta,
// C) in float16 run through float32 copies (kernels/float32_copies.h): within float16
// precision of the float32 kernels on the same values, and MaxPool (NCHW, and NHWC
// through the layout attribute) exactly the float32 maxima rounded (they are float16
// values already).
TEST(Float16ThroughFloat32Test, MatMulGemmAndMaxPoolMatchFloat32) {
  OpRunner r;
  std::mt19937 rng(23);
  auto close = [&](const char* what, const Attributes& attrs, const std::vector<HostTensor>& in32,
                   const std::vector<HostTensor>& in16) {
    auto want = r.Run(what, attrs, in32);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = r.Run(what, attrs, in16);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)[0].dtype, DType::kFloat16);
    testing::ExpectAllClose(testing::FloatValues((*got)[0]), testing::FloatValues((*want)[0]), 2e-3, 2e-3, what);
  };
  {
    const std::vector<float> a = Random(rng, {3, 5, 40}, true), b = Random(rng, {40, 24}, true);
    close("MatMul", {}, {HostTensor::Of(Shape{3, 5, 40}, a), HostTensor::Of(Shape{40, 24}, b)},
          {HostTensor::Of(Shape{3, 5, 40}, ToHalf(a)), HostTensor::Of(Shape{40, 24}, ToHalf(b))});
  }
  {
    const std::vector<float> a = Random(rng, {40, 7}, true), b = Random(rng, {24, 40}, true),
                             c = Random(rng, {24}, true);
    const Attributes attrs = Attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}});
    close("Gemm", attrs,
          {HostTensor::Of(Shape{40, 7}, a), HostTensor::Of(Shape{24, 40}, b), HostTensor::Of(Shape{24}, c)},
          {HostTensor::Of(Shape{40, 7}, ToHalf(a)), HostTensor::Of(Shape{24, 40}, ToHalf(b)),
           HostTensor::Of(Shape{24}, ToHalf(c))});
  }
  const std::vector<float> x = Random(rng, {2, 9, 9, 5}, true);
  for (const char* layout : {"NCHW", "NHWC"}) {
    SCOPED_TRACE(layout);
    const Attributes attrs = Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                                    {"strides", std::vector<int64_t>{2, 2}},
                                    {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                    {"layout", std::string(layout)}});
    auto want = r.Run("MaxPool", attrs, {HostTensor::Of(Shape{2, 9, 9, 5}, x)});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = r.Run("MaxPool", attrs, {HostTensor::Of(Shape{2, 9, 9, 5}, ToHalf(x))});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)[0].dtype, DType::kFloat16);
    const std::vector<double> w = testing::FloatValues((*want)[0]), g = testing::FloatValues((*got)[0]);
    ASSERT_EQ(w.size(), g.size());
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(g[i], w[i]) << i;
  }
}

TEST(FusedMatMulTest, EmptyInnerDimHoldsTheActivationOfTheBias) {
  OpRunner r;
  const Attributes a = Attrs({{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{-1.f, 1.f}}});
  auto out = r.Run("FusedMatMul", a,
                   {HostTensor::Zeros(DType::kFloat32, {2, 0}), HostTensor::Zeros(DType::kFloat32, {0, 3}),
                    HostTensor::Of<float>({3}, {1.5f, -2.f, 0.25f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1.f, -1.f, 0.25f, 1.f, -1.f, 0.25f}));
  auto empty = r.Run("FusedMatMul", {}, {HostTensor::Zeros(DType::kFloat32, {2, 0, 4}), HostTensor::Zeros(DType::kFloat32, {4, 3})});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ((*empty)[0].shape, (Shape{2, 0, 3}));
}

TEST(FusedMatMulTest, InvalidInputsAndAttributesAreRefused) {
  OpRunner r;
  const HostTensor a = HostTensor::Zeros(DType::kFloat32, {2, 3, 4});
  const HostTensor b = HostTensor::Zeros(DType::kFloat32, {4, 5});
  auto infer = [&](const Attributes& at, std::vector<HostTensor> in) { return r.Infer("FusedMatMul", at, in); };
  auto ok = infer({}, {a, b, HostTensor::Zeros(DType::kFloat32, {5})});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].shape, (Shape{2, 3, 5}));
  struct Bad {
    std::vector<HostTensor> in;
    std::string message;
  };
  const Bad bad[] = {
      {{HostTensor::Zeros(DType::kFloat32, {4}), b}, "A must have rank >= 2"},
      {{a, HostTensor::Zeros(DType::kFloat32, {2, 4, 5})}, "B must be 2-D"},
      {{a, HostTensor::Zeros(DType::kFloat32, {3, 5})}, "inner dims differ"},
      {{a, HostTensor::Zeros(DType::kFloat16, {4, 5})}, "B must have A's dtype"},
      {{HostTensor::Zeros(DType::kInt32, {2, 4}), HostTensor::Zeros(DType::kInt32, {4, 5})}, "float32 or float16"},
      {{a, b, HostTensor::Zeros(DType::kFloat32, {1, 5})}, "bias must be [N] = [5]"},
      {{a, b, HostTensor::Zeros(DType::kFloat32, {4})}, "bias must be [N]"},
      {{a, b, HostTensor::Zeros(DType::kFloat16, {5})}, "bias must have A's dtype"},
  };
  for (const Bad& c : bad) {
    Status s = infer({}, c.in).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message().rfind("FusedMatMul: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  // Unknown activation, wrong parameter counts: in the shape function and at kernel creation.
  auto factory = r.registry().FindKernel("FusedMatMul", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  const Attributes bad_attrs[] = {
      Attrs({{"activation", std::string("Mish")}}),
      Attrs({{"activation", std::string("HardSigmoid")}, {"activation_params", std::vector<float>{0.f}}}),
      Attrs({{"activation_params", std::vector<float>{1.f}}}),
  };
  for (const Attributes& at : bad_attrs) {
    Status s = infer(at, {a, b}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("FusedMatMul", 0), 0u) << s.message();
    EXPECT_EQ((*factory)(at).status().code(), StatusCode::kInvalidArgument);
  }
}

// Y = A [2, 3, 64] x B [64, 256] (+ bias) through `kernel`, B passed as constant or
// not; against the product in double.
void ExpectProduct(OpKernel& kernel, const std::vector<float>& a, std::vector<float>& b, bool constant,
                   std::vector<float>* bias) {
  constexpr int64_t kRows = 6, kK = 64, kN = 256;
  std::vector<float> y(kRows * kN, -1.0f), a_copy = a;
  std::vector<TensorRef> in = {{a_copy.data(), DType::kFloat32, {2, 3, kK}},
                               {b.data(), DType::kFloat32, {kK, kN}, constant}};
  if (bias) in.push_back({bias->data(), DType::kFloat32, {kN}, true});
  const TensorRef out[] = {{y.data(), DType::kFloat32, {2, 3, kN}}};
  ASSERT_TRUE(kernel.Compute(in, out).ok());
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double want = bias ? (*bias)[j] : 0.0;
      for (int64_t p = 0; p < kK; ++p) want += double{a[i * kK + p]} * b[p * kN + j];
      ASSERT_NEAR(y[i * kN + j], want, 1e-4) << i << "," << j << (constant ? " constant" : "");
    }
  }
}

// A constant B of 256 columns is multiplied from the kernel's padded copy
// (PaddedConstantB), which never stands in for other weights: B not marked constant
// is read where it lies on every call, even in the same buffer, and a constant at
// another address is copied anew. MatMul (its batches as one product) and FusedMatMul.
TEST(MatMulWeights, PaddedCopyKeptOnlyForTheSameConstant) {
  OpRunner runner;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(6 * 64), b1(64 * 256), b2(b1.size()), bias(256);
  for (auto* v : {&a, &b1, &b2, &bias}) {
    for (float& x : *v) x = u(rng);
  }
  for (const char* op : {"MatMul", "FusedMatMul"}) {
    SCOPED_TRACE(op);
    const KernelFactory* factory = runner.registry().FindKernel(op, DeviceKind::kCpu);
    ASSERT_NE(factory, nullptr);
    auto kernel = (*factory)(Attributes{});
    ASSERT_TRUE(kernel.ok());
    std::vector<float>* with_bias = std::string(op) == "FusedMatMul" ? &bias : nullptr;
    std::vector<float> b = b1;
    ExpectProduct(**kernel, a, b, false, with_bias);
    b = b2;
    ExpectProduct(**kernel, a, b, false, with_bias);
    ExpectProduct(**kernel, a, b1, true, with_bias);
    ExpectProduct(**kernel, a, b1, true, with_bias);
    ExpectProduct(**kernel, a, b2, true, with_bias);
    b = b1;  // the buffer the last constant was not
    ExpectProduct(**kernel, a, b, false, with_bias);
  }
}

// Prepack (kernels/prepack.h, at the model's load) makes the padded copy a call with
// that constant then uses: the call's product is the prepacked B's, even though the
// test changed the bytes behind the constant afterwards (which a real constant never
// sees), so nothing was copied on the call. B of [1, K, N] is prepacked as [K, N].
TEST(MatMulWeights, PrepackMakesThePaddedCopyBeforeTheFirstCall) {
  OpRunner runner;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(6 * 64), b(64 * 256), bias(256);
  for (auto* v : {&a, &b, &bias}) {
    for (float& x : *v) x = u(rng);
  }
  for (const char* op : {"MatMul", "FusedMatMul"}) {
    for (bool leading_one : {false, true}) {
      SCOPED_TRACE(std::string(op) + (leading_one ? " B [1, K, N]" : " B [K, N]"));
      const KernelFactory* factory = runner.registry().FindKernel(op, DeviceKind::kCpu);
      ASSERT_NE(factory, nullptr);
      auto kernel = (*factory)(Attributes{});
      ASSERT_TRUE(kernel.ok());
      auto* prepacker = dynamic_cast<ConstantPrepacker*>(kernel->get());
      ASSERT_NE(prepacker, nullptr);
      std::vector<float> packed = b;
      Shape shape = leading_one ? Shape{1, 64, 256} : Shape{64, 256};
      prepacker->Prepack(1, {packed.data(), DType::kFloat32, shape, true});
      if (std::string(op) == "FusedMatMul") prepacker->Prepack(2, {bias.data(), DType::kFloat32, {256}, true});
      for (float& x : packed) x = 2.0f * x + 1.0f;  // behind the kernel's back
      std::vector<float>* with_bias = std::string(op) == "FusedMatMul" ? &bias : nullptr;
      std::vector<float> y(6 * 256);
      std::vector<TensorRef> in = {{a.data(), DType::kFloat32, {2, 3, 64}},
                                   {packed.data(), DType::kFloat32, {64, 256}, true}};
      if (with_bias) in.push_back({bias.data(), DType::kFloat32, {256}, true});
      const TensorRef out[] = {{y.data(), DType::kFloat32, {2, 3, 256}}};
      ASSERT_TRUE((*kernel)->Compute(in, out).ok());
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t j = 0; j < 256; ++j) {
          double want = with_bias ? bias[j] : 0.0;
          for (int64_t p = 0; p < 64; ++p) want += double{a[i * 64 + p]} * b[p * 256 + j];
          ASSERT_NEAR(y[i * 256 + j], want, 1e-4) << i << "," << j;
        }
      }
    }
  }
}

// Float16 constant weights are widened to float32 by Prepack (kernels/prepack.h), at
// the model's load: the first call then makes no float32 copy
// (Float32Constants::widened_total counts them), and its output is that of a kernel
// that widened them on its first call. Conv, ConvTranspose, MatMul, FusedMatMul, Gemm.
TEST(Float16Weights, PrepackWidensThemAtTheLoad) {
  OpRunner runner;
  std::mt19937 rng(29);
  const struct {
    const char* op;
    Shape x, w, y;
  } cases[] = {
      {"Conv", {1, 4, 6, 6}, {5, 4, 3, 3}, {1, 5, 4, 4}},
      {"ConvTranspose", {1, 4, 5, 5}, {4, 3, 3, 3}, {1, 3, 7, 7}},
      {"MatMul", {3, 40}, {40, 24}, {3, 24}},
      {"FusedMatMul", {3, 40}, {40, 24}, {3, 24}},
      {"Gemm", {3, 40}, {40, 24}, {3, 24}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op);
    const std::vector<Half> x = ToHalf(Random(rng, c.x, true)), w = ToHalf(Random(rng, c.w, true));
    const KernelFactory* factory = runner.registry().FindKernel(c.op, DeviceKind::kCpu);
    ASSERT_NE(factory, nullptr);
    auto run = [&](bool prepack) {
      auto kernel = (*factory)(Attributes{});
      EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
      const TensorRef weights{const_cast<Half*>(w.data()), DType::kFloat16, c.w, true};
      if (prepack) {
        auto* prepacker = dynamic_cast<ConstantPrepacker*>(kernel->get());
        EXPECT_NE(prepacker, nullptr);
        const uint64_t before = internal::Float32Constants::widened_total();
        if (prepacker) prepacker->Prepack(1, weights);
        EXPECT_EQ(internal::Float32Constants::widened_total(), before + 1);
      }
      std::vector<Half> y(static_cast<size_t>(*NumElements(c.y)));
      const TensorRef in[] = {{const_cast<Half*>(x.data()), DType::kFloat16, c.x}, weights};
      const TensorRef out[] = {{y.data(), DType::kFloat16, c.y}};
      const uint64_t before = internal::Float32Constants::widened_total();
      Status s = (*kernel)->Compute(in, out);
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(internal::Float32Constants::widened_total() - before, prepack ? 0u : 1u);
      std::vector<uint16_t> bits(y.size());
      std::memcpy(bits.data(), y.data(), y.size() * sizeof(Half));
      return bits;
    };
    EXPECT_EQ(run(true), run(false));
  }
}

// FusedMatMul's primitive takes any number of A's rows (compiled once for B's K and
// N): one kernel, calls of 1, 5, 128 and again 5 rows, each against the product in
// double.
TEST(MatMulWeights, FusedMatMulServesEveryRowCountWithOnePrimitive) {
  OpRunner runner;
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  constexpr int64_t kK = 96, kN = 40;
  std::vector<float> a(128 * kK), b(kK * kN), bias(kN);
  for (auto* v : {&a, &b, &bias}) {
    for (float& x : *v) x = u(rng);
  }
  const KernelFactory* factory = runner.registry().FindKernel("FusedMatMul", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  auto kernel = (*factory)(Attributes{});
  ASSERT_TRUE(kernel.ok());
  for (int64_t rows : {1, 5, 128, 5}) {
    SCOPED_TRACE(rows);
    std::vector<float> y(rows * kN, -1.0f);
    const TensorRef in[] = {{a.data(), DType::kFloat32, {rows, kK}},
                            {b.data(), DType::kFloat32, {kK, kN}, true},
                            {bias.data(), DType::kFloat32, {kN}, true}};
    const TensorRef out[] = {{y.data(), DType::kFloat32, {rows, kN}}};
    ASSERT_TRUE((*kernel)->Compute(in, out).ok());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        double want = bias[j];
        for (int64_t p = 0; p < kK; ++p) want += double{a[i * kK + p]} * b[p * kN + j];
        ASSERT_NEAR(y[i * kN + j], want, 1e-4) << i << "," << j;
      }
    }
  }
}

}  // namespace matmul_test
}  // namespace remex::kernels
