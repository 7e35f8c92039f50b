// Registry, attributes, InferShapes and the elementwise / normalisation / pooling /
// matmul kernels.

#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/internal.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace kernels_test {

using testing::Attrs;
using testing::HostTensor;
using testing::OpRunner;

// ---------------------------------------------------------------------------
// Attributes and registry.

TEST(AttributesTest, GettersCheckTypesAndDefaults) {
  Attributes a;
  a.Set("i", int64_t{3});
  a.Set("f", 0.5f);
  a.Set("s", std::string("SAME_UPPER"));
  a.Set("is", std::vector<int64_t>{1, 2});
  a.Set("fs", std::vector<float>{1.5f});
  EXPECT_EQ(*a.Int("i"), 3);
  EXPECT_EQ(*a.Float("f"), 0.5f);
  EXPECT_EQ(*a.String("s"), "SAME_UPPER");
  EXPECT_EQ(*a.Ints("is"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*a.Floats("fs"), (std::vector<float>{1.5f}));
  EXPECT_EQ(*a.Int("missing", 7), 7);
  EXPECT_EQ(a.Int("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(a.Int("f").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Int("f", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Floats("is").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(a.Has("s"));
  EXPECT_FALSE(a.Has("t"));
}

TEST(RegistryTest, RegistersEveryOpWithACpuKernel) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterOpDefs(registry).ok());
  ASSERT_TRUE(RegisterCpuKernels(registry).ok());
  // The skeleton's ops and those of dynamic-shape models (PP-OCRv4 det/rec and the
  // ONNX operator coverage list).
  for (const char* op :
       {"Conv", "BatchNormalization", "Add", "Mul", "Div", "Clip", "Relu", "HardSigmoid",
        "GlobalAveragePool", "MaxPool", "Shape", "Cast", "Slice", "Concat", "Reshape", "MatMul",
        "Softmax", "Identity", "Resize", "ConvTranspose", "Sigmoid", "Tanh", "LeakyRelu", "PRelu",
        "HardSwish", "Exp", "Log", "Erf", "Sqrt", "Pow", "Sub", "Neg", "Abs", "Reciprocal", "Min",
        "Max", "Equal", "Less", "Greater", "Not", "And", "Or", "Where", "Transpose", "Squeeze",
        "Unsqueeze", "Flatten", "Expand", "Tile", "Gather", "Split", "Pad", "Range",
        "ConstantOfShape", "Size", "Dropout", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
        "ReduceProd", "ArgMax", "TopK", "AveragePool", "LRN", "Gemm", "InstanceNormalization",
        "LayerNormalization", "DepthToSpace", "SpaceToDepth", "LSTM", "GRU"}) {
    EXPECT_NE(registry.FindOp(op), nullptr) << op;
    EXPECT_NE(registry.FindKernel(op, DeviceKind::kCpu), nullptr) << op;
    EXPECT_EQ(registry.FindKernel(op, DeviceKind::kCuda), nullptr) << op;
  }
  for (const std::string& op : registry.OpNames()) {
    EXPECT_NE(registry.FindKernel(op, DeviceKind::kCpu), nullptr) << op;
  }
  EXPECT_EQ(registry.FindOp("StringNormalizer"), nullptr);
}

TEST(RegistryTest, DuplicatesAreRefused) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterOpDefs(registry).ok());
  EXPECT_EQ(RegisterOpDefs(registry).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(RegisterCpuKernels(registry).ok());
  EXPECT_EQ(RegisterCpuKernels(registry).code(), StatusCode::kAlreadyExists);
}

TEST(RegistryTest, DeviceKindNames) {
  EXPECT_EQ(DeviceKindName(DeviceKind::kCpu), "cpu");
  EXPECT_EQ(DeviceKindName(DeviceKind::kCuda), "cuda");
}

TEST(InferShapesTest, ChecksInputCountAndNamesTheOp) {
  OpRunner r;
  auto s = r.Infer("Add", {}, {HostTensor::Zeros(DType::kFloat32, {2})});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Add"), std::string::npos) << s.status().message();
  s = r.Infer("Relu", {},
              {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  // A required input may not be absent.
  s = r.Infer("Add", {}, {HostTensor::Absent(), HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

TEST(InferShapesTest, DataDependentInputsNeedData) {
  OpRunner r;
  const OpDef* def = r.registry().FindOp("Reshape");
  ASSERT_NE(def, nullptr);
  std::vector<ShapeFnArg> args(2);
  args[0] = {true, DType::kFloat32, {2, 3}, nullptr};
  args[1] = {true, DType::kInt64, {1}, nullptr};  // kData but no data.
  EXPECT_EQ(InferShapes(*def, {}, args).status().code(), StatusCode::kInvalidArgument);
}

TEST(InferShapesTest, ShapeDepsAreDeclared) {
  OpRunner r;
  const OpDef* reshape = r.registry().FindOp("Reshape");
  EXPECT_EQ(reshape->DepOf(0), ShapeDep::kShape);
  EXPECT_EQ(reshape->DepOf(1), ShapeDep::kData);
  const OpDef* slice = r.registry().FindOp("Slice");
  EXPECT_EQ(slice->DepOf(0), ShapeDep::kShape);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(slice->DepOf(i), ShapeDep::kData) << i;
  for (const char* op : {"Conv", "Add", "MatMul", "Concat", "Shape", "Cast", "MaxPool"}) {
    const OpDef* def = r.registry().FindOp(op);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(def->DepOf(i), ShapeDep::kShape) << op;
  }
}

// ---------------------------------------------------------------------------
// Binary elementwise.

TEST(BinaryTest, BroadcastShapes) {
  OpRunner r;
  auto s = r.Infer(
      "Add", {},
      {HostTensor::Zeros(DType::kFloat32, {2, 1, 4}), HostTensor::Zeros(DType::kFloat32, {3, 1})});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)[0].shape, (Shape{2, 3, 4}));
  EXPECT_EQ((*s)[0].dtype, DType::kFloat32);
  s = r.Infer("Mul", {},
              {HostTensor::Zeros(DType::kInt64, {}), HostTensor::Zeros(DType::kInt64, {5, 0})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].shape, (Shape{5, 0}));
}

TEST(BinaryTest, IncompatibleShapesAndDtypesAreRefused) {
  OpRunner r;
  auto s = r.Infer(
      "Add", {},
      {HostTensor::Zeros(DType::kFloat32, {2, 3}), HostTensor::Zeros(DType::kFloat32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Add"), std::string::npos);
  s = r.Infer("Div", {},
              {HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kInt32, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s = r.Infer("Mul", {},
              {HostTensor::Zeros(DType::kBool, {2}), HostTensor::Zeros(DType::kBool, {2})});
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

// Naive reference of broadcasting for random shapes.
TEST(BinaryTest, GeneralBroadcastMatchesReference) {
  OpRunner r;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2, 2);
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3, 4}, {2, 3, 4}},
                                                      {{2, 3, 4}, {}},
                                                      {{1}, {2, 3}},
                                                      {{2, 1, 4}, {3, 1}},
                                                      {{1, 8, 5, 5}, {1, 8, 1, 1}},
                                                      {{4, 1, 3}, {1, 5, 1}},
                                                      {{2, 3, 1, 2}, {3, 4, 1}},
                                                      {{1, 1}, {1, 1}},
                                                      {{3, 1}, {1, 1, 4}}};
  for (const auto& [sa, sb] : cases) {
    auto inferred =
        r.Infer("Add", {},
                {HostTensor::Zeros(DType::kFloat32, sa), HostTensor::Zeros(DType::kFloat32, sb)});
    ASSERT_TRUE(inferred.ok());
    const Shape so = (*inferred)[0].shape;
    std::vector<float> a(*NumElements(sa)), b(*NumElements(sb));
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng) + 3;  // Away from zero for Div.
    for (const char* op : {"Add", "Mul", "Div"}) {
      auto out = r.Run(op, {}, {HostTensor::Of(sa, a), HostTensor::Of(sb, b)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      std::vector<float> got = (*out)[0].Values<float>();
      ASSERT_EQ((*out)[0].shape, so);
      const size_t rank = so.size();
      std::vector<int64_t> idx(rank, 0);
      for (size_t flat = 0; flat < got.size(); ++flat) {
        // Decompose flat into idx.
        int64_t rem = static_cast<int64_t>(flat);
        for (size_t d = rank; d-- > 0;) {
          idx[d] = rem % so[d];
          rem /= so[d];
        }
        auto offset = [&](const Shape& s) {
          int64_t off = 0;
          for (size_t d = 0; d < s.size(); ++d) {
            const int64_t i = idx[rank - s.size() + d];
            off = off * s[d] + (s[d] == 1 ? 0 : i);
          }
          return off;
        };
        const float x = a[offset(sa)], y = b[offset(sb)];
        const float want = op[0] == 'A' ? x + y : op[0] == 'M' ? x * y : x / y;
        ASSERT_FLOAT_EQ(got[flat], want)
            << op << " " << ShapeToString(sa) << " " << ShapeToString(sb) << " at " << flat;
      }
    }
  }
}

TEST(BinaryTest, IntegerTypes) {
  OpRunner r;
  auto out = r.Run(
      "Div", {},
      {HostTensor::Of<int32_t>({4}, {7, -7, 7, -7}), HostTensor::Of<int32_t>({4}, {2, 2, -2, -2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{3, -3, -3, 3}));
  out = r.Run("Add", {}, {HostTensor::Of<int64_t>({2}, {1, 2}), HostTensor::Of<int64_t>({}, {10})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{11, 12}));
  out = r.Run("Mul", {},
              {HostTensor::Of<uint8_t>({2}, {200, 3}), HostTensor::Of<uint8_t>({2}, {2, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{144, 12}));  // Wraps.
  out =
      r.Run("Div", {},
            {HostTensor::Of<int64_t>({2}, {INT64_MIN, 5}), HostTensor::Of<int64_t>({2}, {-1, 5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{INT64_MIN, 1}));
  out =
      r.Run("Add", {}, {HostTensor::Of<double>({2}, {0.5, 1.5}), HostTensor::Of<double>({1}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{1.5, 2.5}));
}

TEST(BinaryTest, IntegerDivisionByZeroIsAnError) {
  OpRunner r;
  auto out = r.Run("Div", {},
                   {HostTensor::Of<int32_t>({2}, {1, 2}), HostTensor::Of<int32_t>({2}, {1, 0})});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(BinaryTest, Float16) {
  OpRunner r;
  auto out = r.Run("Add", {},
                   {HostTensor::Of<Half>({2}, {FloatToHalf(1.5f), FloatToHalf(-2.0f)}),
                    HostTensor::Of<Half>({}, {FloatToHalf(0.25f)})});
  ASSERT_TRUE(out.ok());
  auto v = (*out)[0].Values<Half>();
  EXPECT_EQ(HalfToFloat(v[0]), 1.75f);
  EXPECT_EQ(HalfToFloat(v[1]), -1.75f);
}

TEST(KernelTest, RejectsMismatchedOutputs) {
  OpRunner r;
  auto factory = r.registry().FindKernel("Add", DeviceKind::kCpu);
  auto kernel = (*factory)(Attributes{});
  ASSERT_TRUE(kernel.ok());
  std::vector<HostTensor> in = {HostTensor::Of<float>({2}, {1, 2}),
                                HostTensor::Of<float>({2}, {3, 4})};
  // Wrong output shape.
  auto s = OpRunner::RunKernel(**kernel, {{DType::kFloat32, {3}}}, in, std::nullopt);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  // Wrong output dtype.
  s = OpRunner::RunKernel(**kernel, {{DType::kFloat64, {2}}}, in, std::nullopt);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  // Wrong input count.
  std::vector<HostTensor> one = {HostTensor::Of<float>({2}, {1, 2})};
  s = OpRunner::RunKernel(**kernel, {{DType::kFloat32, {2}}}, one, std::nullopt);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  // Missing data pointer.
  std::vector<TensorRef> ins = {in[0].Ref(), in[1].Ref()};
  ins[1].data = nullptr;
  HostTensor o = HostTensor::Zeros(DType::kFloat32, {2});
  std::vector<TensorRef> outs = {o.Ref()};
  EXPECT_EQ((*kernel)->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Unary ops and Clip.

TEST(UnaryTest, Relu) {
  OpRunner r;
  auto out = r.Run("Relu", {}, {HostTensor::Of<float>({4}, {-1, 0, 2.5f, -0.0f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 2.5f, 0}));
  out = r.Run("Relu", {}, {HostTensor::Of<int8_t>({3}, {-5, 0, 7})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{0, 0, 7}));
}

TEST(UnaryTest, HardSigmoid) {
  OpRunner r;
  auto out = r.Run("HardSigmoid", {}, {HostTensor::Of<float>({4}, {-5, 0, 1, 5})});
  ASSERT_TRUE(out.ok());
  auto v = (*out)[0].Values<float>();
  EXPECT_FLOAT_EQ(v[0], 0);
  EXPECT_FLOAT_EQ(v[1], 0.5f);
  EXPECT_FLOAT_EQ(v[2], 0.7f);
  EXPECT_FLOAT_EQ(v[3], 1);
  out = r.Run("HardSigmoid", Attrs({{"alpha", 0.5f}, {"beta", 0.25f}}),
              {HostTensor::Of<float>({2}, {1, -0.25f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0.75f, 0.125f}));
  // Integer input and a badly typed attribute are refused.
  EXPECT_FALSE(r.Infer("HardSigmoid", {}, {HostTensor::Zeros(DType::kInt32, {1})}).ok());
  EXPECT_EQ(r.Run("HardSigmoid", Attrs({{"alpha", int64_t{1}}}), {HostTensor::Of<float>({1}, {1})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(ClipTest, Bounds) {
  OpRunner r;
  const std::vector<float> x = {-3, -1, 0, 1, 3};
  auto out = r.Run("Clip", {},
                   {HostTensor::Of<float>({5}, x), HostTensor::Of<float>({}, {-1.5f}),
                    HostTensor::Of<float>({}, {2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1.5f, -1, 0, 1, 2}));
  // Only max.
  out =
      r.Run("Clip", {},
            {HostTensor::Of<float>({5}, x), HostTensor::Absent(), HostTensor::Of<float>({}, {0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-3, -1, 0, 0, 0}));
  // No bounds: identity, infinities included.
  const float inf = std::numeric_limits<float>::infinity();
  out = r.Run("Clip", {}, {HostTensor::Of<float>({2}, {-inf, inf})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-inf, inf}));
  // min > max: everything becomes max.
  out = r.Run("Clip", {},
              {HostTensor::Of<float>({5}, x), HostTensor::Of<float>({}, {2}),
               HostTensor::Of<float>({}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>(5, 1)));
  // int8 with a min only.
  out = r.Run("Clip", {},
              {HostTensor::Of<int8_t>({3}, {-128, 0, 127}), HostTensor::Of<int8_t>({}, {-3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-3, 0, 127}));
}

TEST(ClipTest, BoundsMustBeScalarsOfTheInputType) {
  OpRunner r;
  EXPECT_EQ(
      r.Infer("Clip", {},
              {HostTensor::Zeros(DType::kFloat32, {3}), HostTensor::Zeros(DType::kFloat64, {})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      r.Infer("Clip", {},
              {HostTensor::Zeros(DType::kFloat32, {3}), HostTensor::Zeros(DType::kFloat32, {2})})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// BatchNormalization, Softmax.

TEST(BatchNormTest, Inference) {
  OpRunner r;
  // X [1, 2, 1, 2].
  auto out = r.Run("BatchNormalization", Attrs({{"epsilon", 0.0f}}),
                   {HostTensor::Of<float>({1, 2, 1, 2}, {1, 2, 3, 4}),
                    HostTensor::Of<float>({2}, {1, 2}), HostTensor::Of<float>({2}, {0, 1}),
                    HostTensor::Of<float>({2}, {1, 3}), HostTensor::Of<float>({2}, {4, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto v = (*out)[0].Values<float>();
  // ch0: (x-1)/2*1+0; ch1: (x-3)/1*2+1.
  EXPECT_FLOAT_EQ(v[0], 0);
  EXPECT_FLOAT_EQ(v[1], 0.5f);
  EXPECT_FLOAT_EQ(v[2], 1);
  EXPECT_FLOAT_EQ(v[3], 3);
}

TEST(BatchNormTest, Errors) {
  OpRunner r;
  std::vector<HostTensor> in = {
      HostTensor::Zeros(DType::kFloat32, {1, 2, 2}), HostTensor::Zeros(DType::kFloat32, {2}),
      HostTensor::Zeros(DType::kFloat32, {2}), HostTensor::Zeros(DType::kFloat32, {2}),
      HostTensor::Zeros(DType::kFloat32, {3})};
  EXPECT_EQ(r.Infer("BatchNormalization", {}, in).status().code(), StatusCode::kInvalidArgument);
  in[4] = HostTensor::Zeros(DType::kFloat32, {2});
  EXPECT_TRUE(r.Infer("BatchNormalization", {}, in).ok());
  EXPECT_EQ(r.Run("BatchNormalization", {}, in, 3).status().code(), StatusCode::kUnimplemented);
  // Training mode has three outputs (kernels/ops/nn/norm_test.cc checks their values);
  // spatial = 0 is not supported.
  auto training = r.Infer("BatchNormalization", Attrs({{"training_mode", int64_t{1}}}), in);
  ASSERT_TRUE(training.ok()) << training.status().ToString();
  EXPECT_EQ(training->size(), 3u);
  EXPECT_EQ(r.Infer("BatchNormalization", Attrs({{"spatial", int64_t{0}}}), in).status().code(),
            StatusCode::kUnimplemented);
}

TEST(SoftmaxTest, AxisAndStability) {
  OpRunner r;
  // [2, 3] along the last axis, with large values.
  auto out = r.Run("Softmax", {}, {HostTensor::Of<float>({2, 3}, {1000, 1001, 1002, 0, 0, 0})});
  ASSERT_TRUE(out.ok());
  auto v = (*out)[0].Values<float>();
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  EXPECT_NEAR(v[0], e2 / z, 1e-6);
  EXPECT_NEAR(v[1], e1 / z, 1e-6);
  EXPECT_NEAR(v[2], 1 / z, 1e-6);
  EXPECT_NEAR(v[3], 1.0 / 3, 1e-6);
  // axis 0 of [2, 2].
  out = r.Run("Softmax", Attrs({{"axis", int64_t{0}}}),
              {HostTensor::Of<float>({2, 2}, {0, 1, 0, 3})});
  ASSERT_TRUE(out.ok());
  v = (*out)[0].Values<float>();
  EXPECT_NEAR(v[0], 0.5, 1e-6);
  EXPECT_NEAR(v[1], 1 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(v[3], 1 / (1 + std::exp(-2.0)), 1e-6);
  // Softmax-1 (opsets 1-12): axis 1 (its default) of [1, 2, 2] normalises over all 4
  // values; Softmax-13 over the last axis only.
  out = r.Run("Softmax-12", {}, {HostTensor::Of<float>({1, 2, 2}, {0, 0, 0, 0})});
  ASSERT_TRUE(out.ok());
  for (float x : (*out)[0].Values<float>()) EXPECT_NEAR(x, 0.25, 1e-6);
  out = r.Run("Softmax-13", {}, {HostTensor::Of<float>({1, 2, 2}, {0, 0, 0, 0})});
  ASSERT_TRUE(out.ok());
  for (float x : (*out)[0].Values<float>()) EXPECT_NEAR(x, 0.5, 1e-6);
  EXPECT_EQ(r.Infer("Softmax", Attrs({{"axis", int64_t{2}}}),
                    {HostTensor::Zeros(DType::kFloat32, {2, 2})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Pooling.

// GlobalLpPool-2: (sum |x|^p)^(1/p) per plane; LpNormalization-1: x / ||x||_p along an
// axis, a zero vector giving zeros; p outside what each defines is refused.
TEST(LpTest, GlobalLpPoolAndLpNormalizationCompute) {
  OpRunner r;
  auto l2 = r.Run("GlobalLpPool", {}, {HostTensor::Of<float>({1, 2, 2}, {3, -4, 1, 1})});
  ASSERT_TRUE(l2.ok()) << l2.status().ToString();
  EXPECT_EQ((*l2)[0].shape, (Shape{1, 2, 1}));
  EXPECT_FLOAT_EQ((*l2)[0].Values<float>()[0], 5.0f);
  EXPECT_FLOAT_EQ((*l2)[0].Values<float>()[1], std::sqrt(2.0f));
  Attributes p1;
  p1.Set("p", int64_t{1});
  auto l1 = r.Run("GlobalLpPool", p1, {HostTensor::Of<float>({1, 1, 3}, {1, -2, 3})});
  ASSERT_TRUE(l1.ok());
  EXPECT_FLOAT_EQ((*l1)[0].Values<float>()[0], 6.0f);
  Attributes p0;
  p0.Set("p", int64_t{0});
  EXPECT_FALSE(r.Run("GlobalLpPool", p0, {HostTensor::Of<float>({1, 1, 1}, {1})}).ok());
  Attributes axis0;
  axis0.Set("axis", int64_t{0});
  auto n = r.Run("LpNormalization", axis0, {HostTensor::Of<float>({2, 2}, {3, 0, 4, 0})});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_FLOAT_EQ((*n)[0].Values<float>()[0], 0.6f);
  EXPECT_FLOAT_EQ((*n)[0].Values<float>()[2], 0.8f);
  EXPECT_EQ((*n)[0].Values<float>()[1], 0.0f);  // the zero column
  EXPECT_EQ((*n)[0].Values<float>()[3], 0.0f);
  Attributes p3;
  p3.Set("p", int64_t{3});
  auto bad = r.Run("LpNormalization", p3, {HostTensor::Of<float>({2}, {1, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p must be 1 or 2"), std::string::npos) << bad.status().ToString();
}

TEST(GlobalAveragePoolTest, Averages) {
  OpRunner r;
  auto out = r.Run("GlobalAveragePool", {},
                   {HostTensor::Of<float>({1, 2, 2, 2}, {1, 2, 3, 4, 10, 10, 10, 14})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 1, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f, 11}));
  EXPECT_FALSE(r.Infer("GlobalAveragePool", {}, {HostTensor::Zeros(DType::kFloat32, {2, 2})}).ok());
}

TEST(GlobalMaxPoolTest, MaximaAndNan) {
  OpRunner r;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = r.Run("GlobalMaxPool", {}, {HostTensor::Of<float>({1, 3, 2}, {1, -2, -5, -3, 4, nan})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 1}));
  const auto v = (*out)[0].Values<float>();
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -3);
  EXPECT_TRUE(std::isnan(v[2]));  // a NaN in the plane
  auto d = r.Run("GlobalMaxPool", {}, {HostTensor::Of<double>({1, 1, 2, 2}, {0.5, 7.25, -1, 7})});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].Values<double>(), (std::vector<double>{7.25}));
  EXPECT_EQ(r.Infer("GlobalMaxPool", {}, {HostTensor::Zeros(DType::kInt32, {1, 1, 2})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(MaxPoolTest, PadsStridesAndIndices) {
  OpRunner r;
  // 1x1x3x3, kernel 2, stride 1, pads 1 on the end only.
  std::vector<float> x = {1, 2, 3, 4, 9, 6, 7, 8, 5};
  auto out = r.Run("MaxPool",
                   Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                          {"pads", std::vector<int64_t>{0, 0, 1, 1}}}),
                   {HostTensor::Of<float>({1, 1, 3, 3}, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{9, 9, 6, 9, 9, 6, 8, 8, 5}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{4, 4, 5, 4, 4, 5, 7, 7, 8}));
  // Column-major indices.
  out = r.Run("MaxPool",
              Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                     {"pads", std::vector<int64_t>{0, 0, 1, 1}},
                     {"storage_order", int64_t{1}}}),
              {HostTensor::Of<float>({1, 1, 3, 3}, x)});
  ASSERT_TRUE(out.ok());
  // (h, w) -> h + 3 w.
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{4, 4, 7, 4, 4, 7, 5, 5, 8}));
  // One output only.
  out = r.Run("MaxPool", Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}}}),
              {HostTensor::Of<float>({1, 1, 3, 3}, x)}, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{9}));
}

// The 2-D path without Indices (separable: down the columns, then across) gives the
// general loop's values (Indices requested), NaNs included: a NaN only where it is a
// window's first tap. Random float32 and uint8 planes, kernels 2 to 3, strides 1 to 2,
// pads, ceil_mode.
TEST(MaxPoolTest, SeparablePathMatchesTheGeneralLoop) {
  OpRunner r;
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    int64_t k, s, pad;
    bool ceil;
  };
  for (const Case c : {Case{3, 2, 1, false}, Case{2, 2, 0, true}, Case{3, 1, 1, false}, Case{2, 1, 1, true}}) {
    const Attributes attrs = Attrs({{"kernel_shape", std::vector<int64_t>{c.k, c.k}},
                                    {"strides", std::vector<int64_t>{c.s, c.s}},
                                    {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}},
                                    {"ceil_mode", int64_t{c.ceil}}});
    std::vector<float> x(2 * 3 * 9 * 11);
    std::vector<uint8_t> xu(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = rng() % 9 == 0 ? nan : value(rng);
      xu[i] = static_cast<uint8_t>(rng());
    }
    auto fast = r.Run("MaxPool", attrs, {HostTensor::Of<float>({2, 3, 9, 11}, x)}, 1);
    auto loop = r.Run("MaxPool", attrs, {HostTensor::Of<float>({2, 3, 9, 11}, x)}, 2);
    ASSERT_TRUE(fast.ok() && loop.ok());
    const auto a = (*fast)[0].Values<float>(), b = (*loop)[0].Values<float>();
    ASSERT_EQ(a.size(), b.size());
    int nans = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      nans += std::isnan(b[i]);
      if (std::isnan(b[i])) {
        EXPECT_TRUE(std::isnan(a[i])) << i;
      } else {
        EXPECT_EQ(a[i], b[i]) << i;
      }
    }
    EXPECT_GT(nans, 0);  // the case has NaN first taps
    auto fast_u8 = r.Run("MaxPool", attrs, {HostTensor::Of<uint8_t>({2, 3, 9, 11}, xu)}, 1);
    auto loop_u8 = r.Run("MaxPool", attrs, {HostTensor::Of<uint8_t>({2, 3, 9, 11}, xu)}, 2);
    ASSERT_TRUE(fast_u8.ok() && loop_u8.ok());
    EXPECT_EQ((*fast_u8)[0].Values<uint8_t>(), (*loop_u8)[0].Values<uint8_t>());
  }
}

// layout NHWC (the layout pass's, for int8 models): the NCHW kernel's values on the
// transposed tensors, bit for bit (the general loop's rule: the first tap, then any
// greater, so a NaN first tap wins), for uint8, int8 and float32 with NaNs; strides,
// pads, dilations, ceil_mode. Indices are refused in that layout.
TEST(MaxPoolTest, ChannelsLastGivesTheChannelsFirstValues) {
  OpRunner r;
  std::mt19937 rng(43);
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = 2, h = 9, w = 11;
  // 5 channels, and 70: the float kernels' blocks of 64 and a remainder.
  for (const int64_t c : {int64_t{5}, int64_t{70}}) {
    SCOPED_TRACE(std::to_string(c) + " channels");
    auto to_nhwc = [&](const auto& v) {
      auto out = v;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t k = 0; k < c; ++k)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < w; ++j)
              out[((b * h + i) * w + j) * c + k] = v[((b * c + k) * h + i) * w + j];
      return out;
    };
    struct Case {
      int64_t k, s, pad, dilation;
      bool ceil;
    };
    // {2, 2, 2}: the first output row's and column's windows lie wholly in the padding.
    for (const Case cs : {Case{3, 2, 1, 1, false}, Case{2, 2, 0, 1, true}, Case{3, 1, 1, 2, false},
                          Case{2, 2, 2, 1, false}}) {
      Attributes nchw = Attrs({{"kernel_shape", std::vector<int64_t>{cs.k, cs.k}},
                               {"strides", std::vector<int64_t>{cs.s, cs.s}},
                               {"pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad}},
                               {"dilations", std::vector<int64_t>{cs.dilation, cs.dilation}},
                               {"ceil_mode", int64_t{cs.ceil}}});
      Attributes nhwc = nchw;
      nhwc.Set("layout", std::string("NHWC"));
      std::vector<float> x(static_cast<size_t>(n * c * h * w));
      std::vector<uint8_t> xu(x.size());
      std::vector<int8_t> xi(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = rng() % 9 == 0 ? nan : value(rng);
        xu[i] = static_cast<uint8_t>(rng());
        xi[i] = static_cast<int8_t>(rng());
      }
      auto check = [&](auto tag, const auto& v) {
        using T = decltype(tag);
        auto first = r.Run("MaxPool", nchw, {HostTensor::Of<T>({n, c, h, w}, v)}, 2);
        auto last = r.Run("MaxPool", nhwc, {HostTensor::Of<T>({n, h, w, c}, to_nhwc(v))}, 1);
        ASSERT_TRUE(first.ok() && last.ok())
            << (last.ok() ? first.status().ToString() : last.status().ToString());
        const Shape& s = (*first)[0].shape;
        ASSERT_EQ((*last)[0].shape, (Shape{s[0], s[2], s[3], s[1]}));
        const auto a = (*first)[0].template Values<T>(), b = (*last)[0].template Values<T>();
        for (int64_t bb = 0; bb < s[0]; ++bb)
          for (int64_t k = 0; k < s[1]; ++k)
            for (int64_t i = 0; i < s[2]; ++i)
              for (int64_t j = 0; j < s[3]; ++j) {
                const T want = a[((bb * s[1] + k) * s[2] + i) * s[3] + j];
                const T got = b[((bb * s[2] + i) * s[3] + j) * s[1] + k];
                if constexpr (std::is_floating_point_v<T>) {
                  if (std::isnan(want)) {
                    EXPECT_TRUE(std::isnan(got));
                    continue;
                  }
                }
                EXPECT_EQ(got, want);
              }
      };
      check(float{}, x);
      check(uint8_t{}, xu);
      check(int8_t{}, xi);
    }
  }
  auto indices = r.Run("MaxPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"layout", std::string("NHWC")}}),
                       {HostTensor::Of<uint8_t>({1, 2, 2, 1}, {1, 2, 3, 4})}, 2);
  EXPECT_FALSE(indices.ok());
}

// AveragePool and GlobalAveragePool with layout NHWC (the layout pass's, on the CPU
// device): the NCHW kernels' values on the transposed tensors (AveragePool's bit for
// bit: the same taps added in the same order; GlobalAveragePool's sums run in another
// order), count_include_pad both ways, strides, pads, ceil_mode, dilations; a 3-D X is
// refused in that layout.
TEST(AveragePoolTest, ChannelsLastGivesTheChannelsFirstValues) {
  OpRunner r;
  std::mt19937 rng(47);
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  const int64_t n = 2, h = 9, w = 11;
  // 5 channels, and 70: the float kernels' blocks of 64 and a remainder.
  for (const int64_t c : {int64_t{5}, int64_t{70}}) {
    SCOPED_TRACE(std::to_string(c) + " channels");
    std::vector<float> x(static_cast<size_t>(n * c * h * w));
    for (float& v : x) v = value(rng);
    std::vector<float> x_nhwc(x.size());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < w; ++j)
            x_nhwc[((b * h + i) * w + j) * c + k] = x[((b * c + k) * h + i) * w + j];
    // Y's NCHW values at (b, k, i, j) against the NHWC ones.
    auto expect_transposed = [](const HostTensor& first, const HostTensor& last, float tolerance) {
      const Shape& s = first.shape;
      ASSERT_EQ(last.shape, (Shape{s[0], s[2], s[3], s[1]}));
      const auto a = first.Values<float>(), b = last.Values<float>();
      for (int64_t bb = 0; bb < s[0]; ++bb)
        for (int64_t k = 0; k < s[1]; ++k)
          for (int64_t i = 0; i < s[2]; ++i)
            for (int64_t j = 0; j < s[3]; ++j) {
              const float want = a[((bb * s[1] + k) * s[2] + i) * s[3] + j];
              const float got = b[((bb * s[2] + i) * s[3] + j) * s[1] + k];
              if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got));
              } else if (tolerance == 0) {
                EXPECT_EQ(got, want);
              } else {
                EXPECT_NEAR(got, want, tolerance);
              }
            }
    };
    struct Case {
      int64_t k, s, pad, dilation;
      bool ceil, count_pad;
    };
    // {2, 2, 2}: the first output row's and column's windows lie wholly in the padding
    // (NaN without count_include_pad, 0 with it).
    for (const Case cs :
         {Case{3, 2, 1, 1, false, false}, Case{3, 2, 1, 1, false, true}, Case{2, 2, 0, 1, true, false},
          Case{3, 1, 1, 2, false, true}, Case{2, 2, 2, 1, false, false}, Case{2, 2, 2, 1, false, true}}) {
      Attributes nchw = Attrs({{"kernel_shape", std::vector<int64_t>{cs.k, cs.k}},
                               {"strides", std::vector<int64_t>{cs.s, cs.s}},
                               {"pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad}},
                               {"dilations", std::vector<int64_t>{cs.dilation, cs.dilation}},
                               {"ceil_mode", int64_t{cs.ceil}},
                               {"count_include_pad", int64_t{cs.count_pad}}});
      Attributes nhwc = nchw;
      nhwc.Set("layout", std::string("NHWC"));
      auto first = r.Run("AveragePool", nchw, {HostTensor::Of<float>({n, c, h, w}, x)}, 1);
      auto last = r.Run("AveragePool", nhwc, {HostTensor::Of<float>({n, h, w, c}, x_nhwc)}, 1);
      ASSERT_TRUE(first.ok() && last.ok())
          << (last.ok() ? first.status().ToString() : last.status().ToString());
      expect_transposed((*first)[0], (*last)[0], 0);
    }
    auto first = r.Run("GlobalAveragePool", Attributes{}, {HostTensor::Of<float>({n, c, h, w}, x)}, 1);
    auto last = r.Run("GlobalAveragePool", Attrs({{"layout", std::string("NHWC")}}),
                      {HostTensor::Of<float>({n, h, w, c}, x_nhwc)}, 1);
    ASSERT_TRUE(first.ok() && last.ok()) << (last.ok() ? first.status().ToString() : last.status().ToString());
    expect_transposed((*first)[0], (*last)[0], 1e-6f);
  }
  auto rank3 = r.Run("AveragePool", Attrs({{"kernel_shape", std::vector<int64_t>{2}}, {"layout", std::string("NHWC")}}),
                     {HostTensor::Of<float>({1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}, 1);
  EXPECT_FALSE(rank3.ok());
  auto gap3 = r.Run("GlobalAveragePool", Attrs({{"layout", std::string("NHWC")}}),
                    {HostTensor::Of<float>({1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}, 1);
  EXPECT_FALSE(gap3.ok());
}

TEST(MaxPoolTest, CeilModeDilationsAndSamePadding) {
  OpRunner r;
  // ONNX test_maxpool_2d_ceil: 4x4, kernel 3, stride 2, ceil -> 2x2.
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  auto out = r.Run("MaxPool",
                   Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                          {"strides", std::vector<int64_t>{2, 2}},
                          {"ceil_mode", int64_t{1}}}),
                   {HostTensor::Of<float>({1, 1, 4, 4}, x)}, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{11, 12, 15, 16}));
  // test_maxpool_2d_dilations: 4x4, kernel 2, dilation 2 -> 2x2.
  out = r.Run("MaxPool",
              Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                     {"dilations", std::vector<int64_t>{2, 2}}}),
              {HostTensor::Of<float>({1, 1, 4, 4}, x)}, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{11, 12, 15, 16}));
  // SAME_LOWER on 1-D: [1, 3, 2], kernel 2 -> pads begin 1.
  out = r.Run(
      "MaxPool",
      Attrs({{"kernel_shape", std::vector<int64_t>{2}}, {"auto_pad", std::string("SAME_LOWER")}}),
      {HostTensor::Of<float>({1, 1, 3}, {1, 3, 2})}, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3, 3}));
  out = r.Run(
      "MaxPool",
      Attrs({{"kernel_shape", std::vector<int64_t>{2}}, {"auto_pad", std::string("SAME_UPPER")}}),
      {HostTensor::Of<float>({1, 1, 3}, {1, 3, 2})}, 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 3, 2}));
}

TEST(MaxPoolTest, BadAttributes) {
  OpRunner r;
  auto factory = r.registry().FindKernel("MaxPool", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attributes{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(Attrs({{"kernel_shape", std::vector<int64_t>{2}},
                              {"strides", std::vector<int64_t>{0}}}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*factory)(Attrs({{"kernel_shape", std::vector<int64_t>{2}},
                              {"auto_pad", std::string("SAME")}}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // Kernel rank differs from input rank.
  EXPECT_EQ(r.Infer("MaxPool", Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}),
                    {HostTensor::Zeros(DType::kFloat32, {1, 1, 4})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // Kernel larger than the input.
  EXPECT_EQ(r.Infer("MaxPool", Attrs({{"kernel_shape", std::vector<int64_t>{5}}}),
                    {HostTensor::Zeros(DType::kFloat32, {1, 1, 4})})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// MatMul.

template <typename T>
std::vector<T> NaiveBatchedMatMul(const std::vector<T>& a, const std::vector<T>& b, int64_t batch,
                                  int64_t m, int64_t k, int64_t n, bool a_bcast, bool b_bcast) {
  std::vector<T> c(batch * m * n, T(0));
  for (int64_t bi = 0; bi < batch; ++bi) {
    const T* pa = a.data() + (a_bcast ? 0 : bi * m * k);
    const T* pb = b.data() + (b_bcast ? 0 : bi * k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += pa[i * k + p] * pb[p * n + j];
        c[bi * m * n + i * n + j] = acc;
      }
  }
  return c;
}

TEST(MatMulTest, ShapesWithVectorsAndBroadcast) {
  OpRunner r;
  auto infer = [&](Shape a, Shape b) {
    return r.Infer("MatMul", {},
                   {HostTensor::Zeros(DType::kFloat32, a), HostTensor::Zeros(DType::kFloat32, b)});
  };
  EXPECT_EQ((*infer({3}, {3}))[0].shape, (Shape{}));
  EXPECT_EQ((*infer({3}, {3, 4}))[0].shape, (Shape{4}));
  EXPECT_EQ((*infer({2, 3}, {3}))[0].shape, (Shape{2}));
  EXPECT_EQ((*infer({5, 1, 2, 3}, {4, 3, 6}))[0].shape, (Shape{5, 4, 2, 6}));
  EXPECT_EQ(infer({2, 3}, {4, 5}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(infer({2, 2, 3}, {3, 3, 5}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(infer({}, {3}).status().code(), StatusCode::kInvalidArgument);
}

TEST(MatMulTest, Float32AndIntegersMatchReference) {
  OpRunner r;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dist(-4, 4);
  const int64_t batch = 3, m = 5, k = 7, n = 4;
  std::vector<float> a(batch * m * k), b(k * n);
  for (float& v : a) v = static_cast<float>(dist(rng));
  for (float& v : b) v = static_cast<float>(dist(rng));
  auto out = r.Run("MatMul", {},
                   {HostTensor::Of<float>({batch, m, k}, a), HostTensor::Of<float>({k, n}, b)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{batch, m, n}));
  EXPECT_EQ((*out)[0].Values<float>(), NaiveBatchedMatMul(a, b, batch, m, k, n, false, true));

  std::vector<int64_t> ai(m * k), bi(batch * k * n);
  for (auto& v : ai) v = dist(rng);
  for (auto& v : bi) v = dist(rng);
  out = r.Run("MatMul", {},
              {HostTensor::Of<int64_t>({m, k}, ai), HostTensor::Of<int64_t>({batch, k, n}, bi)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), NaiveBatchedMatMul(ai, bi, batch, m, k, n, true, false));

  // Vector x vector.
  out = r.Run("MatMul", {},
              {HostTensor::Of<float>({3}, {1, 2, 3}), HostTensor::Of<float>({3}, {4, 5, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{32}));
}

}  // namespace kernels_test
}  // namespace remex::kernels

namespace remex::kernels {
namespace kernels_test {

// What the compiler knows of a node whose shapes are unknown: the op's own dtype rule.
TEST(RegistryTest, OutputDTypesComeFromTheOpDefinition) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok());
  auto dtypes = [&](const char* op, const Attributes& attrs, std::vector<DType> in, size_t n) {
    return OutputDTypes(*testing::FindVersionedOp(**registry, op), attrs, in, n);
  };
  const DType f16 = DType::kFloat16, i64 = DType::kInt64, b = DType::kBool;
  EXPECT_EQ(dtypes("Add", {}, {f16, f16}, 1), std::vector<DType>{f16});
  EXPECT_EQ(dtypes("TopK", {}, {f16, i64}, 2), (std::vector<DType>{f16, i64}));
  EXPECT_EQ(dtypes("MaxPool", {}, {f16}, 2), (std::vector<DType>{f16, i64}));
  EXPECT_EQ(dtypes("Shape", {}, {f16}, 1), std::vector<DType>{i64});
  EXPECT_EQ(dtypes("ArgMin", {}, {f16}, 1), std::vector<DType>{i64});
  EXPECT_EQ(dtypes("Less", {}, {f16, f16}, 1), std::vector<DType>{b});
  EXPECT_EQ(dtypes("Where", {}, {b, i64, i64}, 1), std::vector<DType>{i64});
  Attributes cast;
  cast.Set("to", int64_t{7});
  EXPECT_EQ(dtypes("Cast", cast, {f16}, 1), std::vector<DType>{i64});
  // Dropout's mask is bool from opset 10, the data's dtype before.
  EXPECT_EQ(dtypes("Dropout", {}, {f16}, 2), (std::vector<DType>{f16, b}));
  EXPECT_EQ(dtypes("Dropout-10", {}, {f16}, 2), (std::vector<DType>{f16, b}));
  EXPECT_EQ(dtypes("Dropout-9", {}, {f16}, 2), (std::vector<DType>{f16, f16}));
  EXPECT_EQ(dtypes("ConstantOfShape", {}, {i64}, 1), std::vector<DType>{DType::kFloat32});
}

}  // namespace kernels_test
}  // namespace remex::kernels

namespace remex::kernels::internal {
namespace kernels_test {

// ParallelFor covers [0, n) once, in at most CpuComputeThreads() parts of at least
// `grain` (one part below it), numbering parts below ParallelParts.
TEST(ParallelFor, CoversTheRangeOnceInBoundedParts) {
  SetCpuComputeThreads(3);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{99}, int64_t{100000}}) {
    for (int64_t grain : {int64_t{1}, int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0}, max_part{-1};
      ParallelFor(n, grain, [&](int64_t b, int64_t e, int part) {
        ++calls;
        int seen = max_part.load();
        while (part > seen && !max_part.compare_exchange_weak(seen, part)) {
        }
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " at " << i;
      const int parts = ParallelParts(n, grain);
      EXPECT_LE(parts, 3);
      EXPECT_EQ(calls.load(), n == 0 ? 0 : parts);
      EXPECT_LT(max_part.load(), parts);
      if (n < grain) {
        EXPECT_EQ(parts, 1);
      }
    }
  }
  EXPECT_EQ(ParallelParts(100000, 1000), 3);
}

// ScopedComputeThreads lowers the team size and restores it; it never raises it.
TEST(ParallelFor, ScopedComputeThreadsRestores) {
  SetCpuComputeThreads(2);
  {
    ScopedComputeThreads one(1);
    EXPECT_EQ(CpuComputeThreads(), 1);
    EXPECT_EQ(ParallelParts(1 << 20, 1), 1);
  }
  EXPECT_EQ(CpuComputeThreads(), 2);
  {
    ScopedComputeThreads more(8), all(0);
    EXPECT_EQ(CpuComputeThreads(), 2);
  }
  EXPECT_EQ(ThreadsForMacs(kSmallPrimitiveMacs - 1), 1);
  EXPECT_EQ(ThreadsForMacs(kSmallPrimitiveMacs), 2);
}

}  // namespace kernels_test
}  // namespace remex::kernels::internal
