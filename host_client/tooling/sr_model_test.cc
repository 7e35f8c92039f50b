// The synthetic super-resolution model: structure, shapes, dtypes, determinism and
// option checks.
#include "host_client/tooling/sr_model.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/shape_inference.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"

namespace remex::sr {
namespace sr_model_test {

using remex::testing::Registry;

onnx::ModelProto Parse(const std::vector<std::byte>& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  return m;
}

TEST(SrModelTest, StructureAndShapes) {
  SrModelOptions o;
  o.height = 5;
  o.width = 7;
  auto bytes = BuildSrModel(o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  onnx::ModelProto m = Parse(*bytes);
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ops[n.op_type()]++;
  EXPECT_EQ(ops["Conv"], 9);  // head, 2 x 2 in the blocks, body end, 2 upsampling, tail
  EXPECT_EQ(ops["LeakyRelu"], 2);
  EXPECT_EQ(ops["Add"], 3);
  EXPECT_EQ(ops["DepthToSpace"], 2);
  EXPECT_EQ(ops.size(), 4u);
  for (const auto& n : m.graph().node()) {
    for (const auto& a : n.attribute()) {
      if (n.op_type() == "DepthToSpace" && a.name() == "mode") {
        EXPECT_EQ(a.s(), "CRD");
      }
      if (n.op_type() == "LeakyRelu") {
        EXPECT_FLOAT_EQ(a.f(), 0.1f);
      }
    }
  }
  // Shapes through the compiler's own inference.
  auto graph = compiler::ImportOnnxBytes(*bytes, Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  ASSERT_TRUE(compiler::InferShapes(*graph, Registry(), /*fold_constants=*/true).ok());
  const compiler::Value& y = graph->values[graph->outputs[0]];
  EXPECT_EQ(y.shape, (Shape{1, 3, 20, 28}));
  EXPECT_EQ(y.dtype, DType::kFloat32);
  const compiler::Value& x = graph->values[graph->inputs[0]];
  EXPECT_EQ(x.shape, (Shape{1, 3, 5, 7}));
}

TEST(SrModelTest, WeightsAreSeededAndHeScaled) {
  SrModelOptions o;
  o.height = 4;
  o.width = 4;
  auto a = BuildSrModel(o);
  auto b = BuildSrModel(o);
  o.seed = 2;
  auto c = BuildSrModel(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  // The 64->64 weights' standard deviation is sqrt(2 / 576) ~ 0.059.
  onnx::ModelProto m = Parse(*a);
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != "body_end.weight") continue;
    ASSERT_EQ(t.raw_data().size(), 64u * 64 * 9 * 4);
    const float* w = reinterpret_cast<const float*>(t.raw_data().data());
    double sum2 = 0;
    for (size_t i = 0; i < 64 * 64 * 9; ++i) sum2 += double(w[i]) * w[i];
    EXPECT_NEAR(std::sqrt(sum2 / (64 * 64 * 9)), std::sqrt(2.0 / 576), 0.003);
  }
}

TEST(SrModelTest, Float16) {
  SrModelOptions o;
  o.height = 8;
  o.width = 8;
  o.dtype = DType::kFloat16;
  auto bytes = BuildSrModel(o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  onnx::ModelProto m = Parse(*bytes);
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(m.graph().output(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT16);
  for (const auto& t : m.graph().initializer()) {
    EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT16) << t.name();
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    EXPECT_EQ(t.raw_data().size(), static_cast<size_t>(n) * 2) << t.name();
  }
}

TEST(SrModelTest, BadOptionsAreRefused) {
  SrModelOptions o;
  o.height = 0;
  EXPECT_EQ(BuildSrModel(o).status().code(), StatusCode::kInvalidArgument);
  o.height = 8;
  o.width = 1 << 20;
  EXPECT_EQ(BuildSrModel(o).status().code(), StatusCode::kInvalidArgument);
  o.width = 8;
  o.dtype = DType::kInt32;
  auto bad = BuildSrModel(o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("int32"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(WriteSrModel({}, "/nonexistent-dir/sr.onnx").code(), StatusCode::kDataLoss);
}

// The Reshape-Transpose-Reshape form of DepthToSpace computes exactly what the native
// op does: both models, compiled and run on the CPU VM, give the same bytes.
TEST(SrModelTest, DepthToSpaceAsReshapeEqualsNative) {
  SrModelOptions o;
  o.height = 6;
  o.width = 10;
  SrModelOptions r = o;
  r.depth_to_space_as_reshape = true;
  auto native = BuildSrModel(o), reshaped = BuildSrModel(r);
  ASSERT_TRUE(native.ok() && reshaped.ok());
  std::map<std::string, int> ops;
  const onnx::ModelProto reshaped_model = Parse(*reshaped);
  for (const auto& n : reshaped_model.graph().node()) ops[n.op_type()]++;
  EXPECT_EQ(ops.count("DepthToSpace"), 0u);
  EXPECT_EQ(ops["Reshape"], 4);
  EXPECT_EQ(ops["Transpose"], 2);
  std::vector<float> outputs[2];
  const std::vector<std::byte>* models[2] = {&*native, &*reshaped};
  for (int k = 0; k < 2; ++k) {
    auto g = compiler::ImportOnnxBytes(*models[k], Registry());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto def = compiler::CompileGraph(std::move(*g), Registry(), {});
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    remex::testing::CpuMachine m(*def);
    std::vector<float> x(180);
    for (int i = 0; i < 180; ++i) x[i] = static_cast<float>((i * 13) % 29) / 29.0f;
    auto y = m.Run({m.Tensor(DType::kFloat32, {1, 3, 6, 10}, x)});
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    const float* q = static_cast<const float*>((*y)[0]->data());
    outputs[k].assign(q, q + *NumElements((*y)[0]->shape));
  }
  EXPECT_EQ(outputs[0].size(), 3u * 24 * 40);
  EXPECT_EQ(outputs[0], outputs[1]);
}

// Compiled NHWC (float32 and float16), the model's Conv + LeakyRelu and Conv + Add
// pairs become FusedConv kernels and the body keeps no layout change.
TEST(SrModelTest, NhwcCompileFusesConvEpiloguesWithoutTransposesInTheBody) {
  SrModelOptions o;
  o.height = 6;
  o.width = 10;
  auto bytes = BuildSrModel(o);
  ASSERT_TRUE(bytes.ok());
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    auto g = compiler::ImportOnnxBytes(*bytes, Registry());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    compiler::CompileOptions options;
    options.layout = compiler::Layout::kNhwc;
    options.dtype = dtype;
    compiler::CompileStats stats;
    auto def = compiler::CompileGraph(std::move(*g), Registry(), options, &stats);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    std::map<std::string, int> kernels;
    for (const auto& k : def->kernels) kernels[k.op]++;
    EXPECT_EQ(kernels["FusedConv"], 5);  // 2 x (conv1 + LeakyRelu), 2 x (conv2 + Add), body_end + skip
    EXPECT_EQ(kernels["Conv"], 4);       // head, 2 upsampling, tail
    EXPECT_EQ(kernels.count("LeakyRelu"), 0u);
    EXPECT_EQ(kernels.count("Add"), 0u);
    EXPECT_EQ(stats.fused_convs, 5);
    EXPECT_EQ(stats.epilogue_nodes, 5);
    EXPECT_EQ(stats.transposes - stats.transposes_at_edges, 0);
  }
}

TEST(SrModelTest, FlopsCountTheConvolutions) {
  SrModelOptions o;
  o.height = 24;
  o.width = 40;
  // Per pixel of the input: 9 * (3*64 + 4*64*64 + 64*64 + 64*128) multiply-adds at H x W,
  // 9 * 32*64 at 2H x 2W (4 pixels), 9 * 16*3 at 4H x 4W (16 pixels).
  const uint64_t per_pixel = 9 * (192 + 16384 + 4096 + 8192) + 4 * 9 * 2048 + 16 * 9 * 48;
  EXPECT_EQ(SrModelFlops(o), 2 * per_pixel * 24 * 40);
  o.height = 720;
  o.width = 1280;
  EXPECT_NEAR(SrModelFlops(o) / 1e9, 627.5, 0.5);
}

}  // namespace sr_model_test
}  // namespace remex::sr
