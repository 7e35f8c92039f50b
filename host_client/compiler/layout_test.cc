// The NHWC layout pass: results equal to the NCHW compile on the CPU VM, layout
// changes only at the graph's edges for convolution chains, transposes around ops
// that cannot run NHWC, per-channel constants transformed, dynamic shapes.
#include "host_client/compiler/passes/layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "host_client/tooling/sr_model.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

StatusOr<vm::ExecutableDef> CompileBytes(const std::vector<std::byte>& model, Layout layout, CompileStats* stats) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(model, Registry()));
  CompileOptions options;
  options.layout = layout;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

int KernelsWithLayout(const vm::ExecutableDef& def, const std::string& op) {
  int n = 0;
  for (const auto& k : def.kernels) {
    if (k.op != op) continue;
    auto it = k.attrs.all().find("layout");
    if (it != k.attrs.all().end() && std::get<std::string>(it->second) == "NHWC") ++n;
  }
  return n;
}

int KernelsOf(const vm::ExecutableDef& def, const std::string& op) {
  int n = 0;
  for (const auto& k : def.kernels) n += k.op == op;
  return n;
}

TEST(LayoutTest, SrModelRunsNhwcWithLayoutChangesOnlyAtTheEdges) {
  sr::SrModelOptions o;
  o.height = 6;
  o.width = 10;
  auto model = sr::BuildSrModel(o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CompileStats nchw_stats, nhwc_stats;
  auto nchw = CompileBytes(*model, Layout::kNchw, &nchw_stats);
  auto nhwc = CompileBytes(*model, Layout::kNhwc, &nhwc_stats);
  ASSERT_TRUE(nchw.ok()) << nchw.status().ToString();
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().ToString();
  EXPECT_EQ(nchw_stats.transposes, 0);
  EXPECT_EQ(KernelsWithLayout(*nchw, "Conv"), 0);
  // Two layout changes, both at the edges; every Conv and DepthToSpace NHWC.
  EXPECT_EQ(nhwc_stats.transposes, 2);
  EXPECT_EQ(nhwc_stats.transposes_at_edges, 2);
  EXPECT_EQ(nhwc_stats.layout.transposes_at_edges, 2);
  EXPECT_EQ(nhwc_stats.layout.transposes_in_body, 0);
  EXPECT_EQ(KernelsOf(*nhwc, "Transpose"), 2);
  // Conv + LeakyRelu and Conv + Add pairs are FusedConv (epilogue_fusion.h), NHWC too.
  EXPECT_EQ(KernelsWithLayout(*nhwc, "Conv"), 4);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "FusedConv"), 5);
  EXPECT_EQ(KernelsOf(*nhwc, "FusedConv"), 5);
  EXPECT_EQ(KernelsOf(*nchw, "FusedConv"), 5);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "DepthToSpace"), 2);
  EXPECT_EQ(nhwc_stats.kernels, nchw_stats.kernels + 2);
  ASSERT_EQ(nhwc->functions[0].outputs.size(), 1u);
  EXPECT_EQ(nhwc->functions[0].outputs[0].shape, (Shape{1, 3, 24, 40}));
  const Shape in_shape = {1, 3, 6, 10};
  const std::vector<float> x = Random(180, 3);
  Shape s1, s2;
  const std::vector<float> a = RunFloat32(*nchw, in_shape, x, &s1);
  const std::vector<float> b = RunFloat32(*nhwc, in_shape, x, &s2);
  EXPECT_EQ(s1, (Shape{1, 3, 24, 40}));
  EXPECT_EQ(s2, s1);
  ExpectNear(b, a, 1e-4f);
}

// x [1, 4, 5, 6] -> Conv 4->4 -> Add c [4, 1, 1] -> Mul d [6] (broadcast on W) ->
// Softmax(axis 1, not NHWC-capable) -> Conv 4->4 -> Relu -> y.
OnnxModelBuilder MixedModel(std::vector<int64_t> in_dims) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, in_dims).Output("y", onnx::TensorProto::FLOAT, {-1, 4, -1, -1});
  b.FloatInit("w1", {4, 4, 3, 3}, Random(144, 1, 0.3f)).FloatInit("b1", {4}, Random(4, 2));
  b.FloatInit("w2", {4, 4, 1, 1}, Random(16, 3)).FloatInit("c", {4, 1, 1}, {1.f, -2.f, 3.f, -4.f});
  b.FloatInit("d", {6}, {0.5f, 1.f, 1.5f, 2.f, 2.5f, 3.f});
  auto* c1 = b.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  OnnxModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  b.Node("Add", {"c1", "c"}, {"a"}, "add");
  b.Node("Mul", {"a", "d"}, {"m"}, "mul");
  auto* sm = b.Node("Softmax", {"m"}, {"s"}, "softmax");
  OnnxModelBuilder::IntAttr(sm, "axis", 1);
  b.Node("Conv", {"s", "w2"}, {"c2"}, "conv2");
  b.Node("Relu", {"c2"}, {"y"}, "relu");
  return b;
}

TEST(LayoutTest, ConstantsAreTransformedAndUnsupportedOpsGetTransposesAround) {
  auto model = MixedModel({1, 4, 5, 6}).Bytes();
  CompileStats stats;
  auto nchw = CompileBytes(model, Layout::kNchw, nullptr);
  auto nhwc = CompileBytes(model, Layout::kNhwc, &stats);
  ASSERT_TRUE(nchw.ok()) << nchw.status().ToString();
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().ToString();
  // In at the edge; around Softmax in the body (back to NCHW, then NHWC again); out.
  EXPECT_EQ(stats.layout.transposes_at_edges, 2);
  EXPECT_EQ(stats.layout.transposes_in_body, 2);
  EXPECT_EQ(stats.transposes, 4);
  EXPECT_EQ(stats.transposes_at_edges, 2);
  EXPECT_EQ(stats.layout.constants_permuted, 2);  // c [4,1,1] and d [6]
  EXPECT_EQ(stats.layout.nodes_nhwc, 5);          // 2 Conv, Add, Mul, Relu
  EXPECT_EQ(KernelsWithLayout(*nhwc, "Conv"), 1);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "FusedConv"), 1);  // conv2 + Relu
  const std::vector<float> x = Random(120, 9);
  ExpectNear(RunFloat32(*nhwc, {1, 4, 5, 6}, x), RunFloat32(*nchw, {1, 4, 5, 6}, x), 1e-5f);
}

TEST(LayoutTest, DynamicInputShapes) {
  // N, H symbolic; W fixed by the [6] constant.
  auto model = MixedModel({-1, 4, -1, 6}).Bytes();
  CompileStats stats;
  auto nchw = CompileBytes(model, Layout::kNchw, nullptr);
  auto nhwc = CompileBytes(model, Layout::kNhwc, &stats);
  ASSERT_TRUE(nchw.ok()) << nchw.status().ToString();
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().ToString();
  EXPECT_EQ(KernelsWithLayout(*nhwc, "Conv"), 1);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "FusedConv"), 1);  // conv2 + Relu
  EXPECT_GT(stats.runtime_shape_functions, 0);
  for (const Shape& s : {Shape{1, 4, 3, 6}, Shape{2, 4, 7, 6}}) {
    const std::vector<float> x = Random(static_cast<size_t>(*NumElements(s)), 4);
    Shape got_shape, want_shape;
    const std::vector<float> got = RunFloat32(*nhwc, s, x, &got_shape);
    const std::vector<float> want = RunFloat32(*nchw, s, x, &want_shape);
    EXPECT_EQ(got_shape, want_shape);
    EXPECT_EQ(got_shape, (Shape{s[0], 4, s[2], 6}));
    ExpectNear(got, want, 1e-5f);
  }
}

TEST(LayoutTest, GraphsWithoutConvolutionsAreLeftAlone) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 3, 4}).Output("y", onnx::TensorProto::FLOAT, {1, 2, 3, 4});
  b.Node("Relu", {"x"}, {"y"});
  CompileStats stats;
  auto def = CompileBytes(b.Bytes(), Layout::kNhwc, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.transposes, 0);
  EXPECT_EQ(stats.layout.nodes_nhwc, 0);
  EXPECT_EQ(stats.kernels, 1);
}

TEST(LayoutTest, ParseLayout) {
  EXPECT_EQ(*ParseLayout("NHWC"), Layout::kNhwc);
  EXPECT_EQ(*ParseLayout("nchw"), Layout::kNchw);
  auto bad = ParseLayout("NCWH");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("NCWH"), std::string::npos);
}

}  // namespace
}  // namespace remex::compiler
