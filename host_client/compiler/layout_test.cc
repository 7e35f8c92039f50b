// The NHWC layout pass: results equal to the NCHW compile on the CPU VM, layout
// changes only at the graph's edges for convolution chains (float32, and float16 as
// exported), transposes around ops that cannot run NHWC, per-channel constants
// transformed, dynamic shapes, DenseNet's Concat, BatchNormalization and pooling
// channels-last.
#include "host_client/compiler/passes/layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "host_client/tooling/sr_model.h"
#include "kernels/float16.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace layout_test {

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

// `model` compiled NCHW and NHWC, the NHWC compile's statistics in *stats.
struct BothLayouts {
  vm::ExecutableDef nchw, nhwc;
};
StatusOr<BothLayouts> CompileBothLayouts(const std::vector<std::byte>& model, CompileStats* stats) {
  BothLayouts both;
  REMEX_ASSIGN_OR_RETURN(both.nchw, CompileBytes(model, Layout::kNchw, nullptr));
  REMEX_ASSIGN_OR_RETURN(both.nhwc, CompileBytes(model, Layout::kNhwc, stats));
  return both;
}

// |a - b| <= tol + rtol * |b| elementwise.
void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol, float rtol = 0.f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol + rtol * std::fabs(b[i])) << "at " << i;
}

// `v` rounded to float16 and back (kernels/float16.h, nearest even).
std::vector<float> RoundedToHalf(std::vector<float> v) {
  for (float& x : v) x = kernels::HalfToFloat(kernels::FloatToHalf(x));
  return v;
}

// Runs function 0 of `def`, whose one input and one output are float16, on a CPU VM
// with `x` (rounded to float16) of `shape`; returns the output as floats (and its shape
// in `out_shape`). Failures are test failures and return {}.
std::vector<float> RunFloat16(const vm::ExecutableDef& def, const Shape& shape, const std::vector<float>& x,
                              Shape* out_shape = nullptr) {
  remex::testing::CpuMachine m(def);
  std::vector<kernels::Half> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = kernels::FloatToHalf(x[i]);
  auto out = m.Run({m.Tensor(DType::kFloat16, shape, h)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok() || out->size() != 1) return {};
  const vm::TensorPtr& t = (*out)[0];
  EXPECT_EQ(t->dtype, DType::kFloat16);
  if (t->dtype != DType::kFloat16) return {};
  const auto* p = static_cast<const kernels::Half*>(t->data());
  std::vector<float> y(t->nbytes() / sizeof(kernels::Half));
  for (size_t i = 0; i < y.size(); ++i) y[i] = kernels::HalfToFloat(p[i]);
  if (out_shape) *out_shape = t->shape;
  return y;
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

// The SR model exported in float16 (input, weights and output float16, as
// `model.half()` writes it) runs NHWC exactly as its float32 twin does: the same two
// layout changes at the edges, none in the body, the same NHWC kernels.
TEST(LayoutTest, Float16SrModelRunsNhwcWithLayoutChangesOnlyAtTheEdges) {
  sr::SrModelOptions o;
  o.height = 6;
  o.width = 10;
  auto model32 = sr::BuildSrModel(o);
  o.dtype = DType::kFloat16;
  auto model16 = sr::BuildSrModel(o);
  ASSERT_TRUE(model32.ok()) << model32.status().ToString();
  ASSERT_TRUE(model16.ok()) << model16.status().ToString();
  CompileStats stats32, stats16;
  auto nchw32 = CompileBytes(*model32, Layout::kNchw, nullptr);
  auto nhwc32 = CompileBytes(*model32, Layout::kNhwc, &stats32);
  auto nchw16 = CompileBytes(*model16, Layout::kNchw, nullptr);
  auto nhwc16 = CompileBytes(*model16, Layout::kNhwc, &stats16);
  for (const auto* def : {&nchw32, &nhwc32, &nchw16, &nhwc16}) ASSERT_TRUE(def->ok()) << def->status().ToString();
  EXPECT_EQ(stats16.transposes, 2);
  EXPECT_EQ(stats16.transposes_at_edges, 2);
  EXPECT_EQ(stats16.layout.transposes_at_edges, 2);
  EXPECT_EQ(stats16.layout.transposes_in_body, 0);
  EXPECT_EQ(stats16.layout.nodes_nhwc, stats32.layout.nodes_nhwc);
  EXPECT_EQ(stats16.kernels, stats32.kernels);
  EXPECT_EQ(KernelsOf(*nhwc16, "Transpose"), 2);
  for (const char* op : {"Conv", "FusedConv", "DepthToSpace"}) {
    EXPECT_EQ(KernelsWithLayout(*nhwc16, op), KernelsWithLayout(*nhwc32, op)) << op;
  }
  EXPECT_EQ(KernelsWithLayout(*nhwc16, "FusedConv"), 5);
  ASSERT_EQ(nhwc16->functions[0].outputs.size(), 1u);
  EXPECT_EQ(nhwc16->functions[0].outputs[0].dtype, DType::kFloat16);
  EXPECT_EQ(nhwc16->functions[0].outputs[0].shape, (Shape{1, 3, 24, 40}));
  const Shape in_shape = {1, 3, 6, 10};
  const std::vector<float> x = RoundedToHalf(Random(180, 3));
  Shape s16;
  const std::vector<float> a = RunFloat16(*nhwc16, in_shape, x, &s16);
  EXPECT_EQ(s16, (Shape{1, 3, 24, 40}));
  // Each kernel rounds once on store, in either layout: at most a float16 step or two
  // apart (outputs up to about 13 here, where float16's spacing is 1/128).
  ExpectNear(a, RunFloat16(*nchw16, in_shape, x), 2e-2f, 1e-2f);
  // The float32 twin's weights are not rounded: float16 precision of it, no more.
  ExpectNear(a, RunFloat32(*nchw32, in_shape, x), 3e-2f, 1e-2f);
}

// A float16-native graph (opset 13; every value and initializer float16):
// x [1, 4, 6, 8] -> Conv 4->8 3x3 pad 1 -> Mul s [8, 1, 1] -> Add t [8, 1, 1] -> Relu (r)
// -> Conv 8->8 3x3 pad 1 -> Add r -> SpaceToDepth 2 ([1, 32, 3, 4]) -> Conv 32->16 1x1
// -> LeakyRelu -> DepthToSpace 2 CRD ([1, 4, 6, 8]) -> Add x -> y.
// `elem_type` FLOAT gives its float32 twin, with the same (float16-exact) weights.
OnnxModelBuilder ConvBlocksModel(int elem_type) {
  const bool f16 = elem_type == onnx::TensorProto::FLOAT16;
  OnnxModelBuilder b(13);
  auto init = [&](const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    if (f16) {
      b.Float16Init(name, dims, v);
    } else {
      b.FloatInit(name, dims, RoundedToHalf(v));
    }
  };
  b.Input("x", elem_type, {1, 4, 6, 8}).Output("y", elem_type, {1, 4, 6, 8});
  init("w1", {8, 4, 3, 3}, Random(288, 11, 0.3f));
  init("b1", {8}, Random(8, 12, 0.1f));
  init("s", {8, 1, 1}, {0.5f, 1.f, 1.5f, 2.f, -0.5f, -1.f, 0.75f, 1.25f});
  init("t", {8, 1, 1}, Random(8, 13, 0.2f));
  init("w2", {8, 8, 3, 3}, Random(576, 14, 0.2f));
  init("w3", {16, 32, 1, 1}, Random(512, 15, 0.3f));
  init("b3", {16}, Random(16, 16, 0.1f));
  OnnxModelBuilder::IntsAttr(b.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  b.Node("Mul", {"c1", "s"}, {"m1"}, "scale");
  b.Node("Add", {"m1", "t"}, {"a1"}, "shift");
  b.Node("Relu", {"a1"}, {"r"}, "relu");
  OnnxModelBuilder::IntsAttr(b.Node("Conv", {"r", "w2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c2", "r"}, {"res"}, "residual");
  OnnxModelBuilder::IntAttr(b.Node("SpaceToDepth", {"res"}, {"s2d"}, "s2d"), "blocksize", 2);
  b.Node("Conv", {"s2d", "w3", "b3"}, {"c3"}, "conv3");
  OnnxModelBuilder::FloatAttr(b.Node("LeakyRelu", {"c3"}, {"l3"}, "leaky"), "alpha", 0.1f);
  auto* d2s = b.Node("DepthToSpace", {"l3"}, {"d2s"}, "d2s");
  OnnxModelBuilder::IntAttr(d2s, "blocksize", 2);
  auto* mode = d2s->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("CRD");
  b.Node("Add", {"d2s", "x"}, {"y"}, "skip");
  return b;
}

TEST(LayoutTest, Float16ConvBlocksRunNhwcWithoutTransposesInTheBody) {
  const auto model16 = ConvBlocksModel(onnx::TensorProto::FLOAT16).Bytes();
  const auto model32 = ConvBlocksModel(onnx::TensorProto::FLOAT).Bytes();
  CompileStats stats16, stats32;
  auto nchw16 = CompileBytes(model16, Layout::kNchw, nullptr);
  auto nhwc16 = CompileBytes(model16, Layout::kNhwc, &stats16);
  auto nchw32 = CompileBytes(model32, Layout::kNchw, nullptr);
  auto nhwc32 = CompileBytes(model32, Layout::kNhwc, &stats32);
  for (const auto* def : {&nchw16, &nhwc16, &nchw32, &nhwc32}) ASSERT_TRUE(def->ok()) << def->status().ToString();
  // x in and y out at the edges (x's NHWC twin feeds conv1 and the skip Add); nothing
  // in the body; s and t permuted; every node NHWC, as in the float32 twin.
  for (const CompileStats* st : {&stats16, &stats32}) {
    EXPECT_EQ(st->transposes, 2);
    EXPECT_EQ(st->transposes_at_edges, 2);
    EXPECT_EQ(st->layout.transposes_at_edges, 2);
    EXPECT_EQ(st->layout.transposes_in_body, 0);
    EXPECT_EQ(st->layout.constants_permuted, 2);
    EXPECT_EQ(st->layout.nodes_nhwc, 11);
  }
  EXPECT_EQ(stats16.kernels, stats32.kernels);
  EXPECT_EQ(KernelsOf(*nhwc16, "Transpose"), 2);
  EXPECT_EQ(KernelsWithLayout(*nhwc16, "Conv"), 1);       // conv1 (a Mul follows)
  EXPECT_EQ(KernelsWithLayout(*nhwc16, "FusedConv"), 2);  // conv2 + Add r, conv3 + LeakyRelu
  EXPECT_EQ(KernelsWithLayout(*nhwc16, "SpaceToDepth"), 1);
  EXPECT_EQ(KernelsWithLayout(*nhwc16, "DepthToSpace"), 1);
  const Shape shape = {1, 4, 6, 8};
  const std::vector<float> x = RoundedToHalf(Random(192, 17));
  Shape got_shape;
  const std::vector<float> got = RunFloat16(*nhwc16, shape, x, &got_shape);
  EXPECT_EQ(got_shape, shape);
  // Outputs within about 2 here, where float16's spacing is 1/1024 .. 1/512.
  ExpectNear(got, RunFloat16(*nchw16, shape, x), 5e-3f, 2e-3f);
  const std::vector<float> want32 = RunFloat32(*nchw32, shape, x);
  ExpectNear(got, want32, 1e-2f, 5e-3f);
  ExpectNear(RunFloat32(*nhwc32, shape, x), want32, 1e-5f);
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
  auto both = CompileBothLayouts(model, &stats);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  const vm::ExecutableDef* nchw = &both->nchw;
  const vm::ExecutableDef* nhwc = &both->nhwc;
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
  auto both = CompileBothLayouts(model, &stats);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  const vm::ExecutableDef* nchw = &both->nchw;
  const vm::ExecutableDef* nhwc = &both->nhwc;
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

// x float [1, 4, 8, 8] -> QuantizeLinear -> QLinearConv 4->8 3x3 (per-channel scales,
// bias) -> MaxPool 3x3 -> QLinearConv 8->8 1x1 (y_zero_point 128) -> DequantizeLinear -> Relu ->
// QuantizeLinear -> DequantizeLinear -> y: the int8 convolutions and the per-tensor
// QuantizeLinear / DequantizeLinear between them run channels-last.
OnnxModelBuilder QuantizedModel() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 8, 8}).Output("y", onnx::TensorProto::FLOAT, {1, 8, 8, 8});
  auto scalar = [&](const std::string& name, float v) { b.FloatInit(name, {}, {v}); };
  auto u8 = [&](const std::string& name, uint8_t v) { b.RawInit(name, onnx::TensorProto::UINT8, {}, &v, 1); };
  std::mt19937 rng(7);
  std::vector<int8_t> w1(8 * 4 * 9), w2(8 * 8), zeros(8, 0);
  for (int8_t& v : w1) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int8_t& v : w2) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  const std::vector<int32_t> bias = {100, -200, 300, -400, 500, -600, 700, -800};
  scalar("s_x", 0.02f);
  u8("z_x", 128);
  b.RawInit("w1", onnx::TensorProto::INT8, {8, 4, 3, 3}, w1.data(), w1.size());
  b.FloatInit("s_w1", {8}, {0.01f, 0.02f, 0.015f, 0.012f, 0.018f, 0.011f, 0.013f, 0.017f});
  b.RawInit("z_w1", onnx::TensorProto::INT8, {8}, zeros.data(), 8);
  b.RawInit("b1", onnx::TensorProto::INT32, {8}, bias.data(), bias.size() * 4);
  scalar("s_c1", 0.05f);
  u8("z_c1", 0);
  b.RawInit("w2", onnx::TensorProto::INT8, {8, 8, 1, 1}, w2.data(), w2.size());
  scalar("s_w2", 0.01f);
  b.RawInit("z_w2", onnx::TensorProto::INT8, {}, zeros.data(), 1);
  scalar("s_c2", 0.04f);
  u8("z_c2", 128);
  scalar("s_r", 0.03f);
  u8("z_r", 0);
  b.Node("QuantizeLinear", {"x", "s_x", "z_x"}, {"q"}, "quantize");
  auto* c1 = b.Node("QLinearConv", {"q", "s_x", "z_x", "w1", "s_w1", "z_w1", "s_c1", "z_c1", "b1"}, {"c1"}, "conv1");
  OnnxModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  auto* pool = b.Node("MaxPool", {"c1"}, {"p1"}, "pool");  // uint8, 3x3, the shape kept
  OnnxModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
  OnnxModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
  b.Node("QLinearConv", {"p1", "s_c1", "z_c1", "w2", "s_w2", "z_w2", "s_c2", "z_c2"}, {"c2"}, "conv2");
  b.Node("DequantizeLinear", {"c2", "s_c2", "z_c2"}, {"d"}, "dequantize");
  b.Node("Relu", {"d"}, {"r"}, "relu");
  b.Node("QuantizeLinear", {"r", "s_r", "z_r"}, {"q2"}, "quantize2");
  b.Node("DequantizeLinear", {"q2", "s_r", "z_r"}, {"y"}, "dequantize2");
  return b;
}

TEST(LayoutTest, Int8ConvolutionsAndPerTensorQuantizeRunNhwc) {
  auto model = QuantizedModel().Bytes();
  CompileStats stats;
  auto both = CompileBothLayouts(model, &stats);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  const vm::ExecutableDef* nchw = &both->nchw;
  const vm::ExecutableDef* nhwc = &both->nhwc;
  // The first QuantizeLinear reads the NCHW input: its uint8 result is transposed in the
  // body; y goes back at the edge. Nothing between the two convolutions: the uint8
  // MaxPool runs channels-last too.
  EXPECT_EQ(stats.layout.transposes_in_body, 1);
  EXPECT_EQ(stats.layout.transposes_at_edges, 1);
  EXPECT_EQ(stats.layout.nodes_nhwc, 7);  // 2 QLinearConv, MaxPool, 2 DequantizeLinear, Relu, QuantizeLinear
  EXPECT_EQ(KernelsWithLayout(*nhwc, "QLinearConv"), 2);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "MaxPool"), 1);
  const std::vector<float> x = Random(256, 21, 2.f);
  const std::vector<float> want = RunFloat32(*nchw, {1, 4, 8, 8}, x);
  EXPECT_EQ(RunFloat32(*nhwc, {1, 4, 8, 8}, x), want);  // the same bits
  float largest = 0.f;
  for (float v : want) largest = std::max(largest, v);
  EXPECT_GT(largest, 0.f);
}

// x [1, 4, 6, 6] -> Conv 1x1 (identity weights: the same values in either layout) ->
// DynamicQuantizeLinear -> ConvInteger 4->8 3x3 (uint8 weights, zero point 128) -> Cast
// -> Mul by the input's scale -> Mul by the weights' -> y, as dynamically quantized
// models write it: every node channels-last, DynamicQuantizeLinear's scalars included.
TEST(LayoutTest, DynamicQuantizeLinearAndConvIntegerRunNhwc) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 6, 6}).Output("y", onnx::TensorProto::FLOAT, {1, 8, 6, 6});
  std::vector<float> eye(16, 0.f);
  for (int i = 0; i < 4; ++i) eye[i * 5] = 1.f;
  b.FloatInit("eye", {4, 4, 1, 1}, eye);
  std::mt19937 rng(11);
  std::vector<uint8_t> w(8 * 4 * 9);
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng() % 256);
  const uint8_t zp = 128;
  b.RawInit("w", onnx::TensorProto::UINT8, {8, 4, 3, 3}, w.data(), w.size());
  b.RawInit("w_zp", onnx::TensorProto::UINT8, {}, &zp, 1);
  b.FloatInit("w_scale", {}, {0.01f});
  b.Node("Conv", {"x", "eye"}, {"c"}, "identity");
  b.Node("DynamicQuantizeLinear", {"c"}, {"q", "q_scale", "q_zp"}, "dynamic_quantize");
  auto* ci = b.Node("ConvInteger", {"q", "w", "q_zp", "w_zp"}, {"s"}, "conv_integer");
  OnnxModelBuilder::IntsAttr(ci, "pads", {1, 1, 1, 1});
  auto* cast = b.Node("Cast", {"s"}, {"f"}, "cast");
  OnnxModelBuilder::IntAttr(cast, "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"f", "q_scale"}, {"m"}, "scale_x");
  b.Node("Mul", {"m", "w_scale"}, {"y"}, "scale_w");
  const auto model = b.Bytes();
  CompileStats stats;
  auto both = CompileBothLayouts(model, &stats);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  const vm::ExecutableDef* nchw = &both->nchw;
  const vm::ExecutableDef* nhwc = &both->nhwc;
  EXPECT_EQ(stats.layout.transposes_at_edges, 2);
  EXPECT_EQ(stats.layout.transposes_in_body, 0);
  EXPECT_EQ(stats.layout.nodes_nhwc, 6);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "ConvInteger"), 1);
  const std::vector<float> x = Random(144, 5, 3.f);
  const std::vector<float> want = RunFloat32(*nchw, {1, 4, 6, 6}, x);
  EXPECT_EQ(RunFloat32(*nhwc, {1, 4, 6, 6}, x), want);
}

// A DenseNet block in small: x [1, 4, 8, 8] -> Conv 4->8 3x3 -> Relu -> MaxPool 2x2/2
// (p [1, 8, 4, 4]) -> BatchNormalization -> Relu -> Conv 8->4 3x3 -> Concat(p, .) on the
// channels [1, 12, 4, 4] -> BatchNormalization -> Relu -> AveragePool 3x3/2 pads 1 (the
// pads not counted) [1, 12, 2, 2] -> GlobalAveragePool -> y [1, 12, 1, 1].
OnnxModelBuilder DenseBlockModel() {
  OnnxModelBuilder b(15);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 8, 8}).Output("y", onnx::TensorProto::FLOAT, {1, 12, 1, 1});
  b.FloatInit("w1", {8, 4, 3, 3}, Random(288, 41, 0.3f)).FloatInit("w2", {4, 8, 3, 3}, Random(288, 42, 0.3f));
  auto* c1 = b.Node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  OnnxModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r1"}, "relu1");
  auto* mp = b.Node("MaxPool", {"r1"}, {"p"}, "maxpool");
  OnnxModelBuilder::IntsAttr(mp, "kernel_shape", {2, 2});
  OnnxModelBuilder::IntsAttr(mp, "strides", {2, 2});
  for (const char* bn : {"bn1", "bn2"}) {
    const int64_t c = std::string(bn) == "bn1" ? 8 : 12;
    const uint32_t seed = std::string(bn) == "bn1" ? 50 : 60;
    const std::string n(bn);
    b.FloatInit(n + ".s", {c}, Random(c, seed)).FloatInit(n + ".b", {c}, Random(c, seed + 1));
    std::vector<float> var = Random(c, seed + 2);
    for (float& v : var) v = 1.5f + v;
    b.FloatInit(n + ".m", {c}, Random(c, seed + 3)).FloatInit(n + ".v", {c}, var);
  }
  b.Node("BatchNormalization", {"p", "bn1.s", "bn1.b", "bn1.m", "bn1.v"}, {"n1"}, "bn1");
  b.Node("Relu", {"n1"}, {"r2"}, "relu2");
  auto* c2 = b.Node("Conv", {"r2", "w2"}, {"c2"}, "conv2");
  OnnxModelBuilder::IntsAttr(c2, "pads", {1, 1, 1, 1});
  auto* cat = b.Node("Concat", {"p", "c2"}, {"cat"}, "concat");
  OnnxModelBuilder::IntAttr(cat, "axis", 1);
  b.Node("BatchNormalization", {"cat", "bn2.s", "bn2.b", "bn2.m", "bn2.v"}, {"n2"}, "bn2");
  b.Node("Relu", {"n2"}, {"r3"}, "relu3");
  auto* ap = b.Node("AveragePool", {"r3"}, {"a"}, "avgpool");
  OnnxModelBuilder::IntsAttr(ap, "kernel_shape", {3, 3});
  OnnxModelBuilder::IntsAttr(ap, "strides", {2, 2});
  OnnxModelBuilder::IntsAttr(ap, "pads", {1, 1, 1, 1});
  b.Node("GlobalAveragePool", {"a"}, {"y"}, "gap");
  return b;
}

// With pooling NHWC (the CPU device's compiles), the whole block runs channels-last:
// a layout change at each edge and none in the body; without it, transposes around
// each pooling op.
TEST(LayoutTest, DenseBlocksRunNhwcWithPoolingAndConcatChannelsLast) {
  const auto model = DenseBlockModel().Bytes();
  auto compile = [&](Layout layout, bool pooling, CompileStats* stats) -> StatusOr<vm::ExecutableDef> {
    REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(model, Registry()));
    CompileOptions options;
    options.layout = layout;
    options.nhwc_pooling = pooling;
    return CompileGraph(std::move(graph), Registry(), options, stats);
  };
  CompileStats stats, without_pooling;
  auto nchw = compile(Layout::kNchw, true, nullptr);
  auto nhwc = compile(Layout::kNhwc, true, &stats);
  auto nhwc_convs = compile(Layout::kNhwc, false, &without_pooling);
  for (const auto* def : {&nchw, &nhwc, &nhwc_convs}) ASSERT_TRUE(def->ok()) << def->status().ToString();
  EXPECT_EQ(stats.layout.transposes_at_edges, 2);
  EXPECT_EQ(stats.layout.transposes_in_body, 0);
  EXPECT_EQ(stats.batchnorms_decomposed, 2);
  EXPECT_EQ(stats.layout.constants_permuted, 4);  // the two BatchNormalizations' mul and add
  EXPECT_EQ(KernelsWithLayout(*nhwc, "MaxPool"), 1);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "AveragePool"), 1);
  EXPECT_EQ(KernelsWithLayout(*nhwc, "GlobalAveragePool"), 1);
  EXPECT_EQ(KernelsOf(*nhwc, "BatchNormalization"), 0);
  for (const auto& k : nhwc->kernels) {
    if (k.op == "Concat") EXPECT_EQ(std::get<int64_t>(k.attrs.all().at("axis")), 3);
  }
  // The CUDA device's pooling reads NCHW: conv1's output to NCHW for MaxPool, whose
  // output goes NHWC for the Concat, the first BatchNormalization's output (computed
  // NCHW: it reads no NHWC value) NHWC for conv2, and the second's NCHW for AveragePool.
  EXPECT_EQ(KernelsWithLayout(*nhwc_convs, "MaxPool") + KernelsWithLayout(*nhwc_convs, "AveragePool") +
                KernelsWithLayout(*nhwc_convs, "GlobalAveragePool"),
            0);
  EXPECT_EQ(without_pooling.layout.transposes_in_body, 4);
  const std::vector<float> x = Random(256, 43);
  const std::vector<float> want = RunFloat32(*nchw, {1, 4, 8, 8}, x);
  ExpectNear(RunFloat32(*nhwc, {1, 4, 8, 8}, x), want, 1e-5f, 1e-5f);
  ExpectNear(RunFloat32(*nhwc_convs, {1, 4, 8, 8}, x), want, 1e-5f, 1e-5f);
  float largest = 0.f;
  for (float v : want) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 0.f);
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

}  // namespace layout_test
}  // namespace remex::compiler
