// FusedElementwise: the shape function's program checks, and the CPU kernel against
// the unfused ops (the registry's own kernels run one instruction at a time) on random
// programs over random broadcasting shapes, in float32, float64 and float16.

#include "kernels/ops/fused/fused.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "kernels/float16.h"
#include "kernels/float_test_util.h"
#include "kernels/ops/fused/fused_test_util.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace fused_test {

using testing::Attrs;
using testing::ConvertFloat;
using testing::ExpectAllClose;
using testing::FloatValues;
using testing::HostTensor;
using testing::OpRunner;
using testing::RandomBroadcastInputs;

constexpr int64_t Op(FusedOpcode op) { return static_cast<int64_t>(op); }

Attributes Program(std::vector<int64_t> program, std::vector<float> immediates = {}) {
  Attributes a;
  a.Set("program", std::move(program));
  if (!immediates.empty()) a.Set("immediates", std::move(immediates));
  return a;
}

HostTensor Scalar(DType dtype, double v) { return ConvertFloat(HostTensor::Of<double>({}, {v}), dtype); }

// ---------------------------------------------------------------------------
// Shape function and program checks.

TEST(FusedElementwiseTest, OutputIsTheBroadcastOfTheInputs) {
  OpRunner r;
  // (x0 + x1) * x2
  Attributes a = Program({Op(FusedOpcode::kAdd), 0, 1, -1, Op(FusedOpcode::kMul), 3, 2, -1});
  auto info = r.Infer("FusedElementwise", a,
                      {HostTensor::Zeros(DType::kFloat32, {2, 1, 4}),
                       HostTensor::Zeros(DType::kFloat32, {3, 1}), HostTensor::Zeros(DType::kFloat32, {4})});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ((*info)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*info)[0].shape, (Shape{2, 3, 4}));
  auto bad = r.Infer("FusedElementwise", a,
                     {HostTensor::Zeros(DType::kFloat32, {2, 3}), HostTensor::Zeros(DType::kFloat32, {4}),
                      HostTensor::Zeros(DType::kFloat32, {1})});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(FusedElementwiseTest, SignatureAttributesMustMatchTheInputs) {
  OpRunner r;
  Attributes a = Program({Op(FusedOpcode::kAdd), 0, 1, -1});
  a.Set("num_inputs", int64_t{2});
  a.Set("dtype", std::string("float16"));
  const std::vector<HostTensor> half = {HostTensor::Zeros(DType::kFloat16, {3}),
                                        HostTensor::Zeros(DType::kFloat16, {1})};
  auto ok = r.Infer("FusedElementwise", a, half);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].dtype, DType::kFloat16);
  // Another dtype, another input count, a wrongly typed attribute.
  const std::vector<HostTensor> single = {HostTensor::Zeros(DType::kFloat32, {3}),
                                          HostTensor::Zeros(DType::kFloat32, {1})};
  auto dtype = r.Infer("FusedElementwise", a, single);
  EXPECT_EQ(dtype.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dtype.status().message().find("'dtype' is 'float16'"), std::string::npos) << dtype.status().message();
  Attributes three = a;
  three.Set("num_inputs", int64_t{3});
  auto count = r.Infer("FusedElementwise", three, half);
  EXPECT_EQ(count.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(count.status().message().find("'num_inputs' is 3"), std::string::npos) << count.status().message();
  Attributes typed = a;
  typed.Set("dtype", int64_t{10});
  EXPECT_EQ(r.Infer("FusedElementwise", typed, half).status().code(), StatusCode::kInvalidArgument);
}

TEST(FusedElementwiseTest, BadProgramsAreRefusedWithAReason) {
  OpRunner r;
  const std::vector<HostTensor> two = {HostTensor::Zeros(DType::kFloat32, {3}),
                                       HostTensor::Zeros(DType::kFloat32, {3})};
  struct Case {
    Attributes attrs;
    std::string message;
  };
  const Case cases[] = {
      {Attributes{}, "program"},
      {Program({}), "empty"},
      {Program({Op(FusedOpcode::kAdd), 0, 1}), "multiple of 4"},
      {Program({99, 0, 1, -1}), "unknown opcode 99"},
      {Program({Op(FusedOpcode::kAdd), 0, 2, -1}), "operand 1 is slot 2"},  // Its own result.
      {Program({Op(FusedOpcode::kAdd), 0, -1, -1}), "operand 1 is slot -1"},
      {Program({Op(FusedOpcode::kRelu), 0, 1, -1}), "must be -1"},
      {Program({Op(FusedOpcode::kAdd), 0, 3, -1}, {1.0f}), "operand 1 is slot 3"},
      {Program({Op(FusedOpcode::kClip), 0, 2, 3}, {0.0f}), "operand 2 is slot 3"},
  };
  for (const Case& c : cases) {
    auto info = r.Infer("FusedElementwise", c.attrs, two);
    ASSERT_FALSE(info.ok()) << c.message;
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(info.status().message().find(c.message), std::string::npos) << info.status().message();
    EXPECT_NE(info.status().message().find("FusedElementwise"), std::string::npos) << info.status().message();
  }
  // Immediates are slots after the inputs: slot 2 is the immediate here.
  EXPECT_TRUE(r.Infer("FusedElementwise", Program({Op(FusedOpcode::kAdd), 0, 2, -1}, {1.0f}), two).ok());

  const Attributes add = Program({Op(FusedOpcode::kAdd), 0, 1, -1});
  auto ints = r.Infer("FusedElementwise", add,
                      {HostTensor::Zeros(DType::kInt32, {3}), HostTensor::Zeros(DType::kInt32, {3})});
  EXPECT_NE(ints.status().message().find("float types only"), std::string::npos) << ints.status().message();
  auto mixed = r.Infer("FusedElementwise", add,
                       {HostTensor::Zeros(DType::kFloat32, {3}), HostTensor::Zeros(DType::kFloat64, {3})});
  EXPECT_NE(mixed.status().message().find("dtypes differ"), std::string::npos) << mixed.status().message();
  auto absent =
      r.Infer("FusedElementwise", add, {HostTensor::Zeros(DType::kFloat32, {3}), HostTensor::Absent()});
  EXPECT_EQ(absent.status().code(), StatusCode::kInvalidArgument);

  // The kernel factory refuses what it can check without the inputs.
  const KernelFactory* factory = r.registry().FindKernel("FusedElementwise", DeviceKind::kCpu);
  ASSERT_NE(factory, nullptr);
  EXPECT_FALSE((*factory)(Program({99, 0, 1, -1})).ok());
  EXPECT_FALSE((*factory)(Attributes{}).ok());
  EXPECT_TRUE((*factory)(add).ok());
}

// ---------------------------------------------------------------------------
// Hand-checked values.

TEST(FusedElementwiseTest, HardSwishTimesScalePlusBias) {
  OpRunner r;
  // HardSwish(x) * s + b, s and b broadcast per channel ([C, 1]).
  Attributes a = Program({Op(FusedOpcode::kHardSwish), 0, -1, -1, Op(FusedOpcode::kMul), 3, 1, -1,
                          Op(FusedOpcode::kAdd), 4, 2, -1});
  std::vector<float> x = {-4.0f, -1.0f, 0.0f, 1.0f, 2.5f, 4.0f};
  auto out = r.Run("FusedElementwise", a,
                   {HostTensor::Of<float>({2, 3}, x), HostTensor::Of<float>({2, 1}, {2.0f, -1.0f}),
                    HostTensor::Of<float>({2, 1}, {0.5f, 10.0f})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double hs = v * std::min(1.0, std::max(0.0, v / 6.0 + 0.5));
    expected.push_back(i < 3 ? hs * 2.0 + 0.5 : hs * -1.0 + 10.0);
  }
  ExpectAllClose(FloatValues((*out)[0]), expected, 1e-6, 1e-6, "hardswish");
}

// A BatchNormalization of an NHWC value as the compiler rewrites it, Relu(x * s + b)
// with s [C] and b [1, 1, 1, C]: the per-channel operands repeat with period C, which
// does not divide the block, over several blocks and both compute threads.
TEST(FusedElementwiseTest, PerChannelOperandsOfAChannelsLastValue) {
  OpRunner r;
  const int64_t h = 5, w = 7, c = 96;
  Attributes a = Program({Op(FusedOpcode::kMul), 0, 1, -1, Op(FusedOpcode::kAdd), 3, 2, -1,
                          Op(FusedOpcode::kRelu), 4, -1, -1});
  std::vector<float> x(static_cast<size_t>(2 * h * w * c)), s(c), b(c);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int64_t>(i % 37) - 18) / 8.0f;
  for (int64_t k = 0; k < c; ++k) {
    s[k] = static_cast<float>(k % 5 + 1) / 4.0f;
    b[k] = static_cast<float>(k % 7 - 3) / 2.0f;
  }
  auto out = r.Run("FusedElementwise", a,
                   {HostTensor::Of<float>({2, h, w, c}, x), HostTensor::Of<float>({c}, s),
                    HostTensor::Of<float>({1, 1, 1, c}, b)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = i % static_cast<size_t>(c);
    expected.push_back(std::max(0.0, static_cast<double>(x[i] * s[k]) + b[k]));
  }
  ExpectAllClose(FloatValues((*out)[0]), expected, 0, 1e-6, "per-channel affine");
}

// The same of an NCHW value, Relu(x * s + b) with s [C, 1, 1] and b [1, C, 1, 1], at
// batch 1 and 2: each operand is one value per run of H * W (851, longer than a block
// and no multiple of it), read once per run; blocks within a run, across runs, and
// across both compute threads all see their own channel's values. The program as it is
// (the affine one-pass loop) and with a Max(r, r) after it, which the block loops run.
TEST(FusedElementwiseTest, PerChannelOperandsOfAChannelsFirstValue) {
  for (const bool affine : {true, false}) {
    for (const int64_t n : {int64_t{1}, int64_t{2}}) {
      SCOPED_TRACE("batch " + std::to_string(n) + (affine ? ", affine" : ", block loops"));
      OpRunner r;
      const int64_t c = 5, h = 23, w = 37;
      std::vector<int64_t> program = {Op(FusedOpcode::kMul),  0, 1,  -1, Op(FusedOpcode::kAdd), 3, 2, -1,
                                      Op(FusedOpcode::kRelu), 4, -1, -1};
      if (!affine) program.insert(program.end(), {Op(FusedOpcode::kMax), 5, 5, -1});
      Attributes a = Program(program);
      std::vector<float> x(static_cast<size_t>(n * c * h * w)), s(c), b(c);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>(static_cast<int64_t>(i % 37) - 18) / 8.0f;
      for (int64_t k = 0; k < c; ++k) {
        s[k] = static_cast<float>(k + 1) / 4.0f;
        b[k] = static_cast<float>(k % 3 - 1) / 2.0f;
      }
      auto out = r.Run("FusedElementwise", a,
                       {HostTensor::Of<float>({n, c, h, w}, x), HostTensor::Of<float>({c, 1, 1}, s),
                        HostTensor::Of<float>({1, c, 1, 1}, b)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      std::vector<double> expected;
      for (size_t i = 0; i < x.size(); ++i) {
        const size_t k = i / static_cast<size_t>(h * w) % static_cast<size_t>(c);
        expected.push_back(std::max(0.0, static_cast<double>(x[i] * s[k]) + b[k]));
      }
      ExpectAllClose(FloatValues((*out)[0]), expected, 0, 1e-6, "per-channel affine");

      // Runs of 7 * 7, shorter than a block, with a per-channel operand read whole (as a,
      // so its slot is filled) and one read as a uniform b: Max(b - x, s).
      const int64_t small = 7;
      std::vector<float> x2(static_cast<size_t>(n * c * small * small));
      for (size_t i = 0; i < x2.size(); ++i)
        x2[i] = static_cast<float>(static_cast<int64_t>(i % 29) - 14) / 4.0f;
      Attributes a2 = Program({Op(FusedOpcode::kSub), 2, 0, -1, Op(FusedOpcode::kMax), 3, 1, -1});
      out = r.Run("FusedElementwise", a2,
                  {HostTensor::Of<float>({n, c, small, small}, x2), HostTensor::Of<float>({c, 1, 1}, s),
                   HostTensor::Of<float>({1, c, 1, 1}, b)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      expected.clear();
      for (size_t i = 0; i < x2.size(); ++i) {
        const size_t k = i / static_cast<size_t>(small * small) % static_cast<size_t>(c);
        expected.push_back(std::max(static_cast<double>(b[k] - x2[i]), static_cast<double>(s[k])));
      }
      ExpectAllClose(FloatValues((*out)[0]), expected, 0, 0, "max(b - x, s)");
    }
  }
}

// Per-channel affine programs, Relu(x * s + b) and its parts (the one-pass loop of
// fused.cc's AffineProgram), against the unfused Mul, Add and Relu kernels run one after
// another, bit for bit: channels-last (s and b [C]) and channels-first (s [C, 1, 1], b
// [1, C, 1, 1]) values, batch 2, 70 channels (no multiple of a vector), operands either
// way round, x with NaNs, infinities, -0 and negatives; also a program that is not one
// (b as big as x), which the block loops run.
TEST(FusedElementwiseTest, PerChannelAffineProgramsGiveTheUnfusedOpsBits) {
  OpRunner r;
  const int64_t n = 2, c = 70, h = 5, w = 9;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<float> x(static_cast<size_t>(n * c * h * w)), s(c), b(c), big(x.size());
  for (float& v : x) v = value(rng);
  for (size_t i = 0; i < x.size(); i += 13) x[i] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 5; i < x.size(); i += 29) x[i] = -std::numeric_limits<float>::infinity();
  for (size_t i = 7; i < x.size(); i += 31) x[i] = -0.0f;
  for (int64_t k = 0; k < c; ++k) {
    s[k] = value(rng);
    b[k] = value(rng);
  }
  for (float& v : big) v = value(rng);
  const int kMul = 1, kAdd = 2, kRelu = 4;
  struct Case {
    const char* name;
    std::vector<int64_t> program;
    int ops;
    bool swapped;  // Mul's and Add's operands: the per-channel one first
  };
  const int64_t mul = Op(FusedOpcode::kMul), add = Op(FusedOpcode::kAdd), relu = Op(FusedOpcode::kRelu);
  const std::vector<Case> cases = {
      {"relu(x * s + b)", {mul, 0, 1, -1, add, 3, 2, -1, relu, 4, -1, -1}, kMul | kAdd | kRelu, false},
      {"relu(b + s * x)", {mul, 1, 0, -1, add, 2, 3, -1, relu, 4, -1, -1}, kMul | kAdd | kRelu, true},
      {"x * s + b", {mul, 0, 1, -1, add, 3, 2, -1}, kMul | kAdd, false},
      {"relu(x * s)", {mul, 0, 1, -1, relu, 3, -1, -1}, kMul | kRelu, false},
      {"relu(b + x)", {add, 2, 0, -1, relu, 3, -1, -1}, kAdd | kRelu, true},
  };
  for (const bool channels_last : {true, false}) {
    const Shape xs = channels_last ? Shape{n, h, w, c} : Shape{n, c, h, w};
    const HostTensor st = channels_last ? HostTensor::Of<float>({c}, s) : HostTensor::Of<float>({c, 1, 1}, s);
    const HostTensor bt =
        channels_last ? HostTensor::Of<float>({c}, b) : HostTensor::Of<float>({1, c, 1, 1}, b);
    for (const bool per_channel_b : {true, false}) {
      const HostTensor b_in = per_channel_b ? bt : HostTensor::Of<float>(xs, big);
      for (const Case& k : cases) {
        SCOPED_TRACE(std::string(k.name) + (channels_last ? ", channels-last" : ", channels-first") +
                     (per_channel_b ? "" : ", b as big as x"));
        const HostTensor xt = HostTensor::Of<float>(xs, x);
        auto fused = r.Run("FusedElementwise", Program(k.program), {xt, st, b_in});
        ASSERT_TRUE(fused.ok()) << fused.status().ToString();
        // The same ops one at a time, each operand order as the program's.
        HostTensor v = xt;
        if (k.ops & kMul) {
          auto m = k.swapped ? r.Run("Mul", {}, {st, v}) : r.Run("Mul", {}, {v, st});
          ASSERT_TRUE(m.ok());
          v = (*m)[0];
        }
        if (k.ops & kAdd) {
          auto m = k.swapped ? r.Run("Add", {}, {b_in, v}) : r.Run("Add", {}, {v, b_in});
          ASSERT_TRUE(m.ok());
          v = (*m)[0];
        }
        if (k.ops & kRelu) {
          auto m = r.Run("Relu", {}, {v});
          ASSERT_TRUE(m.ok());
          v = (*m)[0];
        }
        const std::vector<float> got = (*fused)[0].Values<float>(), want = v.Values<float>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(want[i])) {
            ASSERT_TRUE(std::isnan(got[i])) << i;
          } else {
            uint32_t gb, wb;
            std::memcpy(&gb, &got[i], 4);
            std::memcpy(&wb, &want[i], 4);
            ASSERT_EQ(gb, wb) << i << ": " << got[i] << " against " << want[i];
          }
        }
      }
    }
  }
}

TEST(FusedElementwiseTest, NaNPropagatesThroughMinAndMaxAndClipOrdersBounds) {
  OpRunner r;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Max(x0, x1), Min(x0, x1), Clip(x0, 2, 1) (lo > hi: every value becomes hi).
  auto max =
      r.Run("FusedElementwise", Program({Op(FusedOpcode::kMax), 0, 1, -1}),
            {HostTensor::Of<float>({3}, {nan, 1.0f, 3.0f}), HostTensor::Of<float>({3}, {0.0f, nan, 2.0f})});
  ASSERT_TRUE(max.ok());
  auto mv = (*max)[0].Values<float>();
  EXPECT_TRUE(std::isnan(mv[0]));
  EXPECT_TRUE(std::isnan(mv[1]));
  EXPECT_EQ(mv[2], 3.0f);
  auto min =
      r.Run("FusedElementwise", Program({Op(FusedOpcode::kMin), 0, 1, -1}),
            {HostTensor::Of<float>({3}, {nan, 1.0f, 3.0f}), HostTensor::Of<float>({3}, {0.0f, nan, 2.0f})});
  ASSERT_TRUE(min.ok());
  auto nv = (*min)[0].Values<float>();
  EXPECT_TRUE(std::isnan(nv[0]));
  EXPECT_TRUE(std::isnan(nv[1]));
  EXPECT_EQ(nv[2], 2.0f);
  auto clip = r.Run("FusedElementwise", Program({Op(FusedOpcode::kClip), 0, 1, 2}, {2.0f, 1.0f}),
                    {HostTensor::Of<float>({3}, {-5.0f, 1.5f, 5.0f})});
  ASSERT_TRUE(clip.ok());
  EXPECT_EQ((*clip)[0].Values<float>(), (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(FusedElementwiseTest, PowSquaresExactlyWhateverTheExponentsShape) {
  // 70000^2 = 4.9e9 lies halfway between two floats: x * x rounds to even, glibc's
  // powf rounds up. Exponent 2 squares and 1 copies, per element, as in the Pow
  // kernels and the CUDA kernel's generated source, whether the exponent is an
  // immediate, a scalar input, a tensor or a one-element output's input.
  OpRunner r;
  const float x = 70000.0f, square = x * x;
  const std::vector<int64_t> pow = {Op(FusedOpcode::kPow), 0, 1, -1};
  auto imm = r.Run("FusedElementwise", Program({Op(FusedOpcode::kPow), 0, 1, -1}, {2.0f}),
                   {HostTensor::Of<float>({2}, {x, -x})});
  ASSERT_TRUE(imm.ok()) << imm.status().ToString();
  EXPECT_EQ((*imm)[0].Values<float>(), (std::vector<float>{square, square}));
  auto tensor = r.Run("FusedElementwise", Program(pow),
                      {HostTensor::Of<float>({4}, {x, x, 3.0f, 0.25f}), HostTensor::Of<float>({4}, {2, 1, 2, 0.5f})});
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  EXPECT_EQ((*tensor)[0].Values<float>(), (std::vector<float>{square, x, 9.0f, 0.5f}));
  auto one = r.Run("FusedElementwise", Program(pow), {HostTensor::Of<float>({1}, {x}), HostTensor::Of<float>({}, {2})});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*one)[0].Values<float>(), (std::vector<float>{square}));
  // The unfused Pow kernel agrees.
  auto unfused = r.Run("Pow", {}, {HostTensor::Of<float>({3}, {x, x, 3.0f}), HostTensor::Of<float>({3}, {2, 1, 2})});
  ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
  EXPECT_EQ((*unfused)[0].Values<float>(), (std::vector<float>{square, x, 9.0f}));
}

TEST(FusedElementwiseTest, OutputMayShareAnInputsBuffer) {
  OpRunner r;
  // Sigmoid(x0) * x0 + x1 over 3 blocks, the output written over x0.
  Attributes a = Program({Op(FusedOpcode::kSigmoid), 0, -1, -1, Op(FusedOpcode::kMul), 2, 0, -1,
                          Op(FusedOpcode::kAdd), 3, 1, -1});
  const int64_t n = 1300;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
  std::vector<HostTensor> in = {HostTensor::Of<float>({n}, x), HostTensor::Of<float>({1}, {0.5f})};
  auto expected = r.Run("FusedElementwise", a, in);
  ASSERT_TRUE(expected.ok());
  auto kernel = (*r.registry().FindKernel("FusedElementwise", DeviceKind::kCpu))(a);
  ASSERT_TRUE(kernel.ok());
  std::vector<TensorRef> refs = {in[0].Ref(), in[1].Ref()};
  ASSERT_TRUE((*kernel)->Compute(refs, {&refs[0], 1}).ok());
  EXPECT_EQ(in[0].Values<float>(), (*expected)[0].Values<float>());
  std::vector<double> want;
  for (float v : x) want.push_back(v / (1.0 + std::exp(-static_cast<double>(v))) + 0.5);
  ExpectAllClose(FloatValues(in[0]), want, 1e-5, 1e-6, "aliased");
}

// ---------------------------------------------------------------------------
// Random programs against the unfused kernels.

struct RandomProgram {
  std::vector<int64_t> program;
  std::vector<float> immediates;
  std::vector<HostTensor> inputs;  // float64 values (exact in float16).
};

RandomProgram MakeRandomProgram(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  RandomProgram p;
  // Output shape, then inputs broadcasting to it.
  p.inputs = RandomBroadcastInputs(rng).inputs;
  const int nin = static_cast<int>(p.inputs.size());
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  const int nimm = 1 + pick(3);
  for (int i = 0; i < nimm; ++i)
    p.immediates.push_back(static_cast<float>(std::round(value(rng) * 8.0) / 8.0));
  // Pow exponents come from their own immediates.
  const auto& kExponents = testing::kRandomPowExponents;
  const auto& kOps = testing::kRandomProgramOpcodes;
  const int count = 1 + pick(8);
  // Slots are numbered after all immediates are known: keep operands symbolic
  // (>= 0: input or result, via `slot`; < 0: immediate -1 - i) until the end.
  struct Ins {
    FusedOpcode op;
    int a, b, c;
  };
  std::vector<Ins> code;
  auto any_value = [&](int j) {  // An input or an earlier result; inputs n..: results.
    return pick(nin + j);
  };
  auto any_operand = [&](int j) {
    if (pick(5) == 0) return -1 - pick(nimm);
    return any_value(j);
  };
  for (int j = 0; j < count; ++j) {
    const FusedOpcode op = kOps[pick(static_cast<int>(std::size(kOps)))];
    Ins ins{op, any_value(j), -2000, -2000};
    const int arity = FusedOperandCount(static_cast<int64_t>(op));
    if (op == FusedOpcode::kPow) {
      p.immediates.push_back(kExponents[pick(static_cast<int>(std::size(kExponents)))]);
      ins.b = -static_cast<int>(p.immediates.size());
    } else if (op == FusedOpcode::kLeakyRelu || op == FusedOpcode::kSwish || op == FusedOpcode::kHardSigmoid ||
               op == FusedOpcode::kClip) {
      ins.b = -1 - pick(nimm);
      if (arity == 3) ins.c = -1 - pick(nimm);
    } else if (arity == 2) {
      ins.b = any_operand(j);
    }
    code.push_back(ins);
  }
  const int total_imm = static_cast<int>(p.immediates.size());
  auto slot = [&](int s) -> int64_t {
    if (s == -2000) return -1;
    if (s < 0) return nin + (-1 - s);
    if (s < nin) return s;
    return nin + total_imm + (s - nin);
  };
  for (const Ins& ins : code) {
    p.program.insert(p.program.end(), {static_cast<int64_t>(ins.op), slot(ins.a), slot(ins.b), slot(ins.c)});
  }
  return p;
}

// Evaluates the program one op at a time with the registry's unfused kernels, in
// `dtype`; the result is broadcast (Expand) to `out`.
StatusOr<HostTensor> EvalUnfused(OpRunner& r, const RandomProgram& p, DType dtype, const Shape& out) {
  const size_t nin = p.inputs.size();
  std::vector<HostTensor> slots;
  for (const HostTensor& t : p.inputs) slots.push_back(ConvertFloat(t, dtype));
  for (float f : p.immediates) slots.push_back(Scalar(dtype, f));
  auto imm = [&](int64_t s) { return p.immediates[static_cast<size_t>(s) - nin]; };
  for (size_t j = 0; j < p.program.size() / kFusedWidth; ++j) {
    const int64_t* e = &p.program[j * kFusedWidth];
    const std::string name(FusedOpcodeName(e[0]));
    std::vector<HostTensor> in = {slots[e[1]]};
    Attributes attrs;
    switch (static_cast<FusedOpcode>(e[0])) {
      case FusedOpcode::kLeakyRelu:
      case FusedOpcode::kSwish:
        attrs = Attrs({{"alpha", imm(e[2])}});
        break;
      case FusedOpcode::kHardSigmoid:
        attrs = Attrs({{"alpha", imm(e[2])}, {"beta", imm(e[3])}});
        break;
      case FusedOpcode::kClip:
        in.push_back(slots[e[2]]);
        in.push_back(slots[e[3]]);
        break;
      default:
        if (FusedOperandCount(e[0]) == 2) in.push_back(slots[e[2]]);
        break;
    }
    REMEX_ASSIGN_OR_RETURN(std::vector<HostTensor> res, r.Run(name, attrs, in));
    slots.push_back(std::move(res[0]));
  }
  std::vector<int64_t> dims(out.begin(), out.end());
  REMEX_ASSIGN_OR_RETURN(
      std::vector<HostTensor> expanded,
      r.Run("Expand", {},
            {slots.back(), HostTensor::Of<int64_t>({static_cast<int64_t>(dims.size())}, dims)}));
  return expanded[0];
}

TEST(FusedElementwiseTest, RandomProgramsMatchTheUnfusedOps) {
  OpRunner r;
  std::mt19937 rng(20240611);
  int elements = 0;
  for (int iter = 0; iter < 150; ++iter) {
    RandomProgram p = MakeRandomProgram(rng);
    const Attributes attrs = Program(p.program, p.immediates);
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
      std::vector<HostTensor> in;
      for (const HostTensor& t : p.inputs) in.push_back(ConvertFloat(t, dtype));
      auto fused = r.Run("FusedElementwise", attrs, in);
      ASSERT_TRUE(fused.ok()) << fused.status().ToString();
      const Shape& out = (*fused)[0].shape;
      const std::string what = "program " + std::to_string(iter) + " in " + std::string(DTypeName(dtype)) +
                               ", output " + ShapeToString(out);
      if (dtype == DType::kFloat16) {
        // float16 computes in float32 and rounds once: the float32 chain, rounded.
        auto ref = EvalUnfused(r, p, DType::kFloat32, out);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        ExpectAllClose(FloatValues((*fused)[0]), FloatValues(ConvertFloat(*ref, DType::kFloat16)), 1e-3, 1e-7,
                       what);
      } else {
        auto ref = EvalUnfused(r, p, dtype, out);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        ASSERT_EQ(ref->shape, out) << what;
        const double rtol = dtype == DType::kFloat32 ? 1e-6 : 1e-13;
        ExpectAllClose(FloatValues((*fused)[0]), FloatValues(*ref), rtol, rtol, what);
      }
      if (::testing::Test::HasFailure()) return;
      elements += static_cast<int>(*NumElements(out));
    }
  }
  // The shapes include multi-block outputs with broadcast inputs.
  EXPECT_GT(elements, 100000);
}

}  // namespace fused_test
}  // namespace remex::kernels
