// `--dtype float16` (host_client/compiler/passes/precision.h): what the pass converts and what it must
// leave alone, and float16 executables run on the CPU VM against the float32 ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/shape_inference.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace precision_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;

// x [1, 3, 8, 8] -> Conv 3x3 (pad 1, bias) -> Relu -> r [1, 4, 8, 8] -> Resize
// (nearest) to sizes computed in float from r's shape: Shape(r) -> Cast(float) ->
// Mul([1, 1, 1.5, 1.5]) -> Cast(int64) -> [1, 4, 12, 12] -> Softmax(axis 1) -> y.
OnnxModelBuilder ConvResizeSoftmax() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8}).Output("y", onnx::TensorProto::FLOAT, {1, 4, 12, 12});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> w(4 * 3 * 9), bias(4);
  for (float& v : w) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  b.FloatInit("w", {4, 3, 3, 3}, w).FloatInit("bias", {4}, bias).FloatInit("scale", {4}, {1.0f, 1.0f, 1.5f, 1.5f});
  auto* conv = b.Node("Conv", {"x", "w", "bias"}, {"c"}, "conv");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"r"}, "relu");
  b.Node("Shape", {"r"}, {"shape"}, "shape");
  auto* to_float = b.Node("Cast", {"shape"}, {"shape_f"}, "to_float");
  OnnxModelBuilder::IntAttr(to_float, "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"shape_f", "scale"}, {"sizes_f"}, "grow");
  auto* to_int = b.Node("Cast", {"sizes_f"}, {"sizes"}, "to_int");
  OnnxModelBuilder::IntAttr(to_int, "to", onnx::TensorProto::INT64);
  auto* resize = b.Node("Resize", {"r", "", "", "sizes"}, {"z"}, "resize");
  auto* mode = resize->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("nearest");
  auto* sm = b.Node("Softmax", {"z"}, {"y"}, "softmax");
  OnnxModelBuilder::IntAttr(sm, "axis", 1);
  return b;
}

const Value* Named(const Graph& g, const std::string& name) {
  for (const Value& v : g.values) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(PrecisionTest, ActivationsAndWeightsBecomeFloat16AndShapeArithmeticDoesNot) {
  auto g = ImportOnnxBytes(ConvResizeSoftmax().Bytes(), Registry());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(InferShapes(*g, Registry(), /*fold_constants=*/false).ok());
  auto stats = ConvertToFloat16(*g, Registry());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // Conv, Relu, Resize, Softmax; the weight and the bias; a cast at each edge.
  EXPECT_EQ(stats->nodes_converted, 4);
  EXPECT_EQ(stats->constants_converted, 2);
  EXPECT_EQ(stats->casts_inserted, 2);
  for (const char* name : {"c", "r", "z", "y/float16", "x/float16", "w/float16", "bias/float16"}) {
    const Value* v = Named(*g, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->dtype, DType::kFloat16) << name;
  }
  // The sizes are computed in float32, from the same constant as before.
  for (const char* name : {"shape_f", "scale", "sizes_f", "x", "y"}) {
    const Value* v = Named(*g, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->dtype, DType::kFloat32) << name;
  }
  EXPECT_EQ(Named(*g, "scale/float16"), nullptr);
  // The interface is unchanged: input x and output y, float32.
  EXPECT_EQ(g->values[g->inputs[0]].name, "x");
  EXPECT_EQ(g->values[g->outputs[0]].name, "y");
  EXPECT_EQ(g->values[g->outputs[0]].dtype, DType::kFloat32);
}

// Runs `def` on the CPU VM with x (`dtype`, [1, 3, 8, 8]) and returns its one output,
// checked to be `dtype` of `out_shape`.
template <typename T>
std::vector<T> RunOnCpu(const vm::ExecutableDef& def, DType dtype, const Shape& out_shape, const std::vector<T>& x) {
  remex::testing::CpuMachine m(def);
  auto out = m.Run({m.Tensor(dtype, {1, 3, 8, 8}, x)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0]->dtype, dtype);
  EXPECT_EQ((*out)[0]->shape, out_shape);
  const T* p = static_cast<const T*>((*out)[0]->data());
  return std::vector<T>(p, p + *NumElements((*out)[0]->shape));
}

TEST(PrecisionTest, Float16ExecutableMatchesFloat32WithinHalfPrecision) {
  CompileOptions f32, f16;
  f16.dtype = DType::kFloat16;
  auto compile = [](const CompileOptions& o, CompileStats* stats) -> StatusOr<vm::ExecutableDef> {
    REMEX_ASSIGN_OR_RETURN(Graph g, ImportOnnxBytes(ConvResizeSoftmax().Bytes(), Registry()));
    return CompileGraph(std::move(g), Registry(), o, stats);
  };
  CompileStats s32, s16;
  auto d32 = compile(f32, &s32);
  auto d16 = compile(f16, &s16);
  ASSERT_TRUE(d32.ok()) << d32.status().ToString();
  ASSERT_TRUE(d16.ok()) << d16.status().ToString();
  // The weight and the bias (108 + 4 floats) halve; the float32 scale of the sizes stays.
  EXPECT_EQ(s32.constant_bytes - s16.constant_bytes, (108u + 4u) * 2u);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(3 * 64);
  for (float& v : x) v = dist(rng);
  std::vector<float> y32 = RunOnCpu(*d32, DType::kFloat32, {1, 4, 12, 12}, x),
                     y16 = RunOnCpu(*d16, DType::kFloat32, {1, 4, 12, 12}, x);
  ASSERT_EQ(y32.size(), y16.size());
  ASSERT_FALSE(y32.empty());
  double max_err = 0;
  for (size_t i = 0; i < y32.size(); ++i) max_err = std::max(max_err, std::abs(double(y32[i]) - y16[i]));
  // Softmax outputs in [0, 1]: float16 keeps about 3 decimal digits.
  EXPECT_LT(max_err, 2e-3);
  EXPECT_GT(max_err, 0.0) << "the float16 executable gave exactly the float32 results";
}

// A float16 model: x float16 [1, 3, 8, 8] -> Conv 3x3 (pad 1) -> BatchNormalization ->
// Relu -> y float16 [1, 4, 8, 8], weights and BatchNormalization's parameters float16.
// With `float32_interface`, as converters that keep a model's interface write it: x and
// y float32, a Cast to float16 after x ("x16") and one to float32 before y.
OnnxModelBuilder Float16ConvBnRelu(bool float32_interface = false) {
  OnnxModelBuilder b(13);
  const auto io = float32_interface ? onnx::TensorProto::FLOAT : onnx::TensorProto::FLOAT16;
  b.Input("x", io, {1, 3, 8, 8}).Output("y", io, {1, 4, 8, 8});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f), pos(0.5f, 1.5f);
  std::vector<float> w(4 * 3 * 9), scale(4), bias(4), mean(4), var(4);
  for (float& v : w) v = dist(rng);
  for (size_t i = 0; i < 4; ++i) scale[i] = pos(rng), bias[i] = dist(rng), mean[i] = dist(rng), var[i] = pos(rng);
  b.Float16Init("w", {4, 3, 3, 3}, w).Float16Init("scale", {4}, scale).Float16Init("bias", {4}, bias);
  b.Float16Init("mean", {4}, mean).Float16Init("var", {4}, var);
  if (float32_interface) {
    OnnxModelBuilder::IntAttr(b.Node("Cast", {"x"}, {"x16"}, "to_half"), "to", onnx::TensorProto::FLOAT16);
  }
  auto* conv = b.Node("Conv", {float32_interface ? "x16" : "x", "w"}, {"c"}, "conv");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}, "bn");
  b.Node("Relu", {"n"}, {float32_interface ? "y16" : "y"}, "relu");
  if (float32_interface) {
    OnnxModelBuilder::IntAttr(b.Node("Cast", {"y16"}, {"y"}, "to_float"), "to", onnx::TensorProto::FLOAT);
  }
  return b;
}

TEST(PrecisionTest, Float16ModelWithAFloat32InterfaceStartsAtItsCast) {
  CompileOptions f32;
  f32.dtype = DType::kFloat32;
  CompileStats own, stats;
  auto g = ImportOnnxBytes(Float16ConvBnRelu(true).Bytes(), Registry());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(CompileGraph(std::move(*g), Registry(), CompileOptions{}, &own).ok());
  auto g32 = ImportOnnxBytes(Float16ConvBnRelu(true).Bytes(), Registry());
  ASSERT_TRUE(g32.ok());
  auto def = CompileGraph(std::move(*g32), Registry(), f32, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(own.batchnorms_folded, 1);  // in float16 (batchnorm_folding.h)
  EXPECT_EQ(stats.batchnorms_folded, 1);
  EXPECT_EQ(stats.precision.casts_inserted, 0);  // the interface is float32 already
  auto graph = ImportOnnxBytes(Float16ConvBnRelu(true).Bytes(), Registry());
  ASSERT_TRUE(graph.ok());
  ASSERT_TRUE(InferShapes(*graph, Registry(), /*fold_constants=*/false).ok());
  ASSERT_TRUE(ConvertToFloat32(*graph, Registry()).ok());
  for (const char* name : {"x16", "c", "n", "y16", "y"}) {
    const Value* v = Named(*graph, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->dtype, DType::kFloat32) << name;
  }
}

TEST(PrecisionTest, Float16ModelInFloat32KeepsItsInterfaceAndComputesInFloat32) {
  auto g = ImportOnnxBytes(Float16ConvBnRelu().Bytes(), Registry());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(InferShapes(*g, Registry(), /*fold_constants=*/false).ok());
  auto stats = ConvertToFloat32(*g, Registry());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->nodes_converted, 3);       // Conv, BatchNormalization, Relu
  EXPECT_EQ(stats->constants_converted, 5);   // the weight and BatchNormalization's four
  EXPECT_EQ(stats->casts_inserted, 2);        // x in, y out
  for (const char* name : {"x/float32", "c", "n", "y/float32", "w/float32", "var/float32"}) {
    const Value* v = Named(*g, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->dtype, DType::kFloat32) << name;
  }
  EXPECT_EQ(g->values[g->inputs[0]].name, "x");
  EXPECT_EQ(g->values[g->inputs[0]].dtype, DType::kFloat16);
  EXPECT_EQ(g->values[g->outputs[0]].name, "y");
  EXPECT_EQ(g->values[g->outputs[0]].dtype, DType::kFloat16);
}

TEST(PrecisionTest, Float16ModelInFloat32FoldsAndFusesAndMatchesTheFloat16Executable) {
  CompileOptions own, f32;
  f32.dtype = DType::kFloat32;
  auto compile = [](const CompileOptions& o, CompileStats* stats) -> StatusOr<vm::ExecutableDef> {
    REMEX_ASSIGN_OR_RETURN(Graph g, ImportOnnxBytes(Float16ConvBnRelu().Bytes(), Registry()));
    return CompileGraph(std::move(g), Registry(), o, stats);
  };
  CompileStats s_own, s32;
  auto d_own = compile(own, &s_own);
  auto d32 = compile(f32, &s32);
  ASSERT_TRUE(d_own.ok()) << d_own.status().ToString();
  ASSERT_TRUE(d32.ok()) << d32.status().ToString();
  // Both fold the BatchNormalization (float16 in float16, batchnorm_folding.h) and fuse
  // the Relu into the Conv.
  EXPECT_EQ(s_own.batchnorms_folded, 1);
  EXPECT_EQ(s_own.fused_convs, 1);
  EXPECT_EQ(s32.batchnorms_folded, 1);
  EXPECT_EQ(s32.fused_convs, 1);
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> x(3 * 64);
  for (uint16_t& v : x) v = kernels::FloatToHalf(dist(rng)).bits;
  std::vector<uint16_t> y_own = RunOnCpu(*d_own, DType::kFloat16, {1, 4, 8, 8}, x),
                        y32 = RunOnCpu(*d32, DType::kFloat16, {1, 4, 8, 8}, x);
  ASSERT_EQ(y_own.size(), y32.size());
  ASSERT_FALSE(y32.empty());
  double max_err = 0, max_abs = 0;
  for (size_t i = 0; i < y32.size(); ++i) {
    const double a = kernels::HalfToFloat({y_own[i]}), b = kernels::HalfToFloat({y32[i]});
    max_err = std::max(max_err, std::abs(a - b));
    max_abs = std::max(max_abs, std::abs(a));
  }
  ASSERT_GT(max_abs, 0.5);
  // One rounding at the output against one per op: a few float16 steps apart at most.
  EXPECT_LT(max_err, 8e-3 * max_abs);
}

TEST(PrecisionTest, RefusesOtherDtypes) {
  CompileOptions o;
  o.dtype = DType::kInt8;
  auto g = ImportOnnxBytes(ConvResizeSoftmax().Bytes(), Registry());
  ASSERT_TRUE(g.ok());
  auto def = CompileGraph(std::move(*g), Registry(), o);
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("float32 or float16"), std::string::npos) << def.status().ToString();
}

}  // namespace precision_test
}  // namespace remex::compiler
