// The epilogue fusion pass: what fuses into FusedConv and FusedMatMul and what must
// not (an intermediate with another reader, a graph output, a broadcasting Add, a
// MatMul by a non-constant), and compiled graphs run on the CPU VM against the same
// graphs compiled without the pass, in NCHW, NHWC and float16.
#include "host_client/compiler/passes/epilogue_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::CountKernels;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Variant {
  bool fuse = true;
  Layout layout = Layout::kNchw;
  DType dtype = DType::kFloat32;
  bool elementwise = true;  // CompileOptions::fuse_elementwise
};

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, Variant v, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.fuse_epilogues = v.fuse;
  options.layout = v.layout;
  options.dtype = v.dtype;
  options.fuse_elementwise = v.elementwise;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

const Shape kX = {1, 4, 6, 7};

// x [1, 4, 6, 7] with the 3x3 pads-1 Conv `name` of 4 -> 4 channels (output x's shape)
// and its weights.
OnnxModelBuilder& AddConv(OnnxModelBuilder& b, const std::string& name, const std::string& in,
                          const std::string& out, uint32_t seed) {
  b.FloatInit(name + ".w", {4, 4, 3, 3}, Random(144, seed));
  b.FloatInit(name + ".b", {4}, Random(4, seed + 1));
  auto* n = b.Node("Conv", {in, name + ".w", name + ".b"}, {out}, name);
  OnnxModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
  return b;
}

// Opset 14: the first with HardSwish.
OnnxModelBuilder Base() {
  OnnxModelBuilder b(14);
  b.Input("x", kFloat, kX);
  return b;
}

// Compiles `b` with and without the pass (in the given layout and dtype), expects
// `fused` kernels of `op` (FusedConv or FusedMatMul) absorbing `nodes` Add and
// activation nodes, and equal outputs. Kernel counts: without elementwise fusion the
// pass saves `nodes` kernels; with it, one per fused node in these graphs (elementwise
// fusion would otherwise have merged an Add and its activation into one kernel).
void ExpectFusion(const OnnxModelBuilder& b, int fused, int nodes, Variant v = {}, float tol = 1e-5f,
                  const std::string& op = "FusedConv") {
  CompileStats with_stats, without_stats;
  Variant off = v;
  off.fuse = false;
  auto with = Compile(b, v, &with_stats);
  auto without = Compile(b, off, &without_stats);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  const bool conv = op == "FusedConv";
  EXPECT_EQ(CountKernels(*with, op), fused);
  EXPECT_EQ(CountKernels(*without, op), 0);
  EXPECT_EQ(conv ? with_stats.fused_convs : with_stats.fused_matmuls, fused);
  EXPECT_EQ(conv ? with_stats.fused_matmuls : with_stats.fused_convs, 0);
  EXPECT_EQ(with_stats.epilogue_nodes, nodes);
  EXPECT_EQ(without_stats.fused_convs + without_stats.fused_matmuls, 0);
  EXPECT_EQ(with_stats.kernels, without_stats.kernels - fused);
  Variant plain = v, plain_off = off;
  plain.elementwise = plain_off.elementwise = false;
  CompileStats plain_stats, plain_off_stats;
  ASSERT_TRUE(Compile(b, plain, &plain_stats).ok());
  ASSERT_TRUE(Compile(b, plain_off, &plain_off_stats).ok());
  EXPECT_EQ(plain_stats.kernels, plain_off_stats.kernels - nodes);
  const std::vector<float> x = Random(static_cast<size_t>(*NumElements(kX)), 77);
  auto got = RunFloat32Outputs(*with, {kX}, {x});
  auto want = RunFloat32Outputs(*without, {kX}, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].size(), want[o].size());
    for (size_t i = 0; i < got[o].size(); ++i) {
      ASSERT_NEAR(got[o][i], want[o][i], tol * (1 + std::fabs(want[o][i]))) << "output " << o << " at " << i;
    }
  }
}

// y = Relu(Conv(x) + x).
OnnxModelBuilder ConvAddRelu() {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 1);
  b.Node("Add", {"c", "x"}, {"a"}, "add");
  b.Node("Relu", {"a"}, {"y"}, "relu");
  b.Output("y", kFloat, kX);
  return b;
}

TEST(EpilogueFusionTest, ConvAddRelu) { ExpectFusion(ConvAddRelu(), 1, 2); }

TEST(EpilogueFusionTest, ConvAddReluNhwc) { ExpectFusion(ConvAddRelu(), 1, 2, {true, Layout::kNhwc}); }

TEST(EpilogueFusionTest, ConvAddReluFloat16) {
  // float16 rounds once in FusedConv and after every op unfused.
  ExpectFusion(ConvAddRelu(), 1, 2, {true, Layout::kNchw, DType::kFloat16}, 5e-3f);
  ExpectFusion(ConvAddRelu(), 1, 2, {true, Layout::kNhwc, DType::kFloat16}, 5e-3f);
}

TEST(EpilogueFusionTest, ConvLeakyRelu) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 2);
  OnnxModelBuilder::FloatAttr(b.Node("LeakyRelu", {"c"}, {"y"}, "lrelu"), "alpha", 0.2f);
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 1, 1);
  ExpectFusion(b, 1, 1, {true, Layout::kNhwc});
}

TEST(EpilogueFusionTest, ConvAddOnly) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 3);
  b.Node("Add", {"x", "c"}, {"y"}, "add");  // The Conv's output second.
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 1, 1);
}

// Every activation after Conv + Add, the residual another Conv's output (defined after
// the first Conv, before the Add).
TEST(EpilogueFusionTest, ConvEveryActivationAfterAResidualConv) {
  struct Act {
    std::string op;
    std::vector<std::pair<std::string, float>> attrs;
    std::vector<float> clip;  // Clip's min, max constants.
  };
  const Act acts[] = {{"Relu", {}, {}},         {"LeakyRelu", {{"alpha", 0.3f}}, {}},
                      {"Clip", {}, {-0.25f, 0.5f}}, {"Sigmoid", {}, {}},
                      {"Tanh", {}, {}},         {"HardSigmoid", {{"alpha", 0.3f}, {"beta", 0.4f}}, {}},
                      {"HardSwish", {}, {}}};
  for (const Act& act : acts) {
    SCOPED_TRACE(act.op);
    OnnxModelBuilder b = Base();
    AddConv(b, "conv1", "x", "c1", 4);
    AddConv(b, "conv2", "x", "c2", 6);
    b.Node("Add", {"c1", "c2"}, {"a"}, "add");
    std::vector<std::string> in = {"a"};
    if (!act.clip.empty()) {
      b.FloatInit("lo", {}, {act.clip[0]});
      b.FloatInit("hi", {}, {act.clip[1]});
      in = {"a", "lo", "hi"};
    }
    auto* n = b.Node(act.op, in, {"y"}, "act");
    for (const auto& [name, v] : act.attrs) OnnxModelBuilder::FloatAttr(n, name, v);
    b.Output("y", kFloat, kX);
    ExpectFusion(b, 1, 2);
  }
}

TEST(EpilogueFusionTest, ConvClipWithAbsentBoundFuses) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 8);
  b.FloatInit("lo", {}, {0.1f});
  b.Node("Clip", {"c", "lo"}, {"y"}, "clip");
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 1, 1);
}

TEST(EpilogueFusionTest, ConvOutputReadElsewhereDoesNotFuse) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 9);
  b.Node("Relu", {"c"}, {"y"}, "relu");
  b.Node("Sigmoid", {"c"}, {"z"}, "sigmoid");
  b.Output("y", kFloat, kX);
  b.Output("z", kFloat, kX);
  ExpectFusion(b, 0, 0);
}

TEST(EpilogueFusionTest, ConvAddOutputReadElsewhereKeepsTheActivation) {
  // Conv + Add fuse; the Add's output has two readers, so the Relu stays.
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 10);
  b.Node("Add", {"c", "x"}, {"a"}, "add");
  b.Node("Relu", {"a"}, {"y"}, "relu");
  b.Node("Tanh", {"a"}, {"z"}, "tanh");
  b.Output("y", kFloat, kX);
  b.Output("z", kFloat, kX);
  ExpectFusion(b, 1, 1);
}

TEST(EpilogueFusionTest, ConvOutputThatIsAGraphOutputDoesNotFuse) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 11);
  b.Node("Relu", {"c"}, {"y"}, "relu");
  b.Output("c", kFloat, kX);
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 0, 0);
}

TEST(EpilogueFusionTest, ConvBroadcastingAddDoesNotFuse) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 12);
  b.FloatInit("bias", {4, 1, 1}, Random(4, 13));
  b.Node("Add", {"c", "bias"}, {"a"}, "add");
  b.Node("Relu", {"a"}, {"y"}, "relu");
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 0, 0);
}

TEST(EpilogueFusionTest, ConvAddOfTheConvOutputWithItselfDoesNotFuse) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv", "x", "c", 14);
  b.Node("Add", {"c", "c"}, {"y"}, "add");
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 0, 0);
}

TEST(EpilogueFusionTest, ConvGroupedAndPointwiseConvsFuse) {
  OnnxModelBuilder b = Base();
  b.FloatInit("dw.w", {4, 1, 3, 3}, Random(36, 15));
  auto* dw = b.Node("Conv", {"x", "dw.w"}, {"d"}, "dw");
  OnnxModelBuilder::IntAttr(dw, "group", 4);
  OnnxModelBuilder::IntsAttr(dw, "pads", {1, 1, 1, 1});
  b.Node("HardSwish", {"d"}, {"h"}, "hswish");
  b.FloatInit("pw.w", {4, 4, 1, 1}, Random(16, 16));
  b.Node("Conv", {"h", "pw.w"}, {"p"}, "pw");
  b.Node("Add", {"p", "x"}, {"y"}, "add");
  b.Output("y", kFloat, kX);
  ExpectFusion(b, 2, 2);
  ExpectFusion(b, 2, 2, {true, Layout::kNhwc});
}

// Dynamic H and W: the Add's operands agree by their symbolic dims.
TEST(EpilogueFusionTest, ConvSymbolicShapesFuse) {
  OnnxModelBuilder b;
  b.Input("x", kFloat, {1, 4, -1, -1});
  AddConv(b, "conv", "x", "c", 17);
  b.Node("Add", {"c", "x"}, {"a"}, "add");
  b.Node("Relu", {"a"}, {"y"}, "relu");
  b.Output("y", kFloat, {1, 4, -1, -1});
  CompileStats stats;
  auto def = Compile(b, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountKernels(*def, "FusedConv"), 1);
  auto plain = Compile(b, {false});
  ASSERT_TRUE(plain.ok());
  for (const Shape& s : {Shape{1, 4, 5, 9}, Shape{1, 4, 8, 3}}) {
    const std::vector<float> x = Random(static_cast<size_t>(*NumElements(s)), 18);
    auto got = RunFloat32Outputs(*def, {s}, {x});
    auto want = RunFloat32Outputs(*plain, {s}, {x});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), want[0].size());
    for (size_t i = 0; i < got[0].size(); ++i) ASSERT_NEAR(got[0][i], want[0][i], 1e-5f) << "at " << i;
  }
}

// MatMul chains: x [1, 4, 6, 7] (batch dims [1, 4]) times the constant w [7, 5].
constexpr int64_t kN = 5;
const Shape kY = {1, 4, 6, kN};

OnnxModelBuilder& AddMatMul(OnnxModelBuilder& b, const std::string& out, uint32_t seed) {
  b.FloatInit("w", {kX.back(), kN}, Random(static_cast<size_t>(kX.back() * kN), seed));
  b.Node("MatMul", {"x", "w"}, {out}, "matmul");
  return b;
}

void ExpectMatMulFusion(const OnnxModelBuilder& b, int fused, int nodes, Variant v = {}, float tol = 1e-5f) {
  ExpectFusion(b, fused, nodes, v, tol, "FusedMatMul");
}

// y = Relu(MatMul(x, w) + bias).
OnnxModelBuilder MatMulAddRelu(bool bias_first) {
  OnnxModelBuilder b = Base();
  AddMatMul(b, "m", 30);
  b.FloatInit("bias", {kN}, Random(kN, 31));
  b.Node("Add", bias_first ? std::vector<std::string>{"bias", "m"} : std::vector<std::string>{"m", "bias"}, {"a"},
         "add");
  b.Node("Relu", {"a"}, {"y"}, "relu");
  b.Output("y", kFloat, kY);
  return b;
}

TEST(EpilogueFusionTest, MatMulAddRelu) {
  ExpectMatMulFusion(MatMulAddRelu(false), 1, 2);
  ExpectMatMulFusion(MatMulAddRelu(true), 1, 2);  // The bias as the Add's first operand.
}

TEST(EpilogueFusionTest, MatMulAddReluFloat16) {
  ExpectMatMulFusion(MatMulAddRelu(false), 1, 2, {true, Layout::kNchw, DType::kFloat16}, 5e-3f);
}

TEST(EpilogueFusionTest, MatMulAddOnly) {
  OnnxModelBuilder b = Base();
  AddMatMul(b, "m", 32);
  b.FloatInit("bias", {kN}, Random(kN, 33));
  b.Node("Add", {"bias", "m"}, {"y"}, "add");
  b.Output("y", kFloat, kY);
  ExpectMatMulFusion(b, 1, 1);
}

TEST(EpilogueFusionTest, MatMulWithEveryActivation) {
  struct Act {
    std::string op;
    std::vector<std::pair<std::string, float>> attrs;
    std::vector<float> clip;
  };
  const Act acts[] = {{"Relu", {}, {}},         {"LeakyRelu", {{"alpha", 0.3f}}, {}},
                      {"Clip", {}, {-0.25f, 0.5f}}, {"Sigmoid", {}, {}},
                      {"Tanh", {}, {}},         {"HardSigmoid", {{"alpha", 0.3f}, {"beta", 0.4f}}, {}},
                      {"HardSwish", {}, {}}};
  for (const Act& act : acts) {
    for (bool bias : {false, true}) {
      SCOPED_TRACE(act.op + (bias ? " with bias" : ""));
      OnnxModelBuilder b = Base();
      AddMatMul(b, "m", 34);
      std::string v = "m";
      if (bias) {
        b.FloatInit("bias", {kN}, Random(kN, 35));
        b.Node("Add", {"m", "bias"}, {"a"}, "add");
        v = "a";
      }
      std::vector<std::string> in = {v};
      if (!act.clip.empty()) {
        b.FloatInit("lo", {}, {act.clip[0]});
        b.FloatInit("hi", {}, {act.clip[1]});
        in = {v, "lo", "hi"};
      }
      auto* n = b.Node(act.op, in, {"y"}, "act");
      for (const auto& [name, value] : act.attrs) OnnxModelBuilder::FloatAttr(n, name, value);
      b.Output("y", kFloat, kY);
      ExpectMatMulFusion(b, 1, bias ? 2 : 1);
    }
  }
}

TEST(EpilogueFusionTest, MatMulBiasThatBroadcastsOtherwiseDoesNotFuse) {
  // [6, 5] and [1, 5] broadcast too, but are not FusedMatMul's [N] bias.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, kN}, std::vector<int64_t>{1, kN}}) {
    OnnxModelBuilder b = Base();
    AddMatMul(b, "m", 36);
    b.FloatInit("bias", shape, Random(static_cast<size_t>(shape[0] * shape[1]), 37));
    b.Node("Add", {"m", "bias"}, {"a"}, "add");
    b.Node("Relu", {"a"}, {"y"}, "relu");
    b.Output("y", kFloat, kY);
    ExpectMatMulFusion(b, 0, 0);
  }
}

TEST(EpilogueFusionTest, MatMulOutputReadElsewhereOrAGraphOutputDoesNotFuse) {
  OnnxModelBuilder b = Base();
  AddMatMul(b, "m", 38);
  b.Node("Relu", {"m"}, {"y"}, "relu");
  b.Node("Sigmoid", {"m"}, {"z"}, "sigmoid");
  b.Output("y", kFloat, kY);
  b.Output("z", kFloat, kY);
  ExpectMatMulFusion(b, 0, 0);
  OnnxModelBuilder c = Base();
  AddMatMul(c, "m", 39);
  c.Node("Tanh", {"m"}, {"y"}, "tanh");
  c.Output("m", kFloat, kY);
  c.Output("y", kFloat, kY);
  ExpectMatMulFusion(c, 0, 0);
}

// B an input rather than an initializer, and a bias that is an input: compiled only
// (the runs feed one input).
TEST(EpilogueFusionTest, MatMulByANonConstantOrWithANonConstantBias) {
  OnnxModelBuilder b = Base();
  b.Input("w", kFloat, {kX.back(), kN});
  b.Node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.Node("Relu", {"m"}, {"y"}, "relu");
  b.Output("y", kFloat, kY);
  CompileStats stats;
  auto def = Compile(b, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountKernels(*def, "FusedMatMul"), 0);
  EXPECT_EQ(stats.fused_matmuls, 0);
  // A constant B, the bias an input: MatMul and the activation do not meet (the Add
  // stays between them), so nothing fuses.
  OnnxModelBuilder c = Base();
  c.Input("bias", kFloat, {kN});
  AddMatMul(c, "m", 40);
  c.Node("Add", {"m", "bias"}, {"a"}, "add");
  c.Node("Relu", {"a"}, {"y"}, "relu");
  c.Output("y", kFloat, kY);
  def = Compile(c, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountKernels(*def, "FusedMatMul"), 0);
}

// A 2-D A (no batch dims) with a dynamic row count.
TEST(EpilogueFusionTest, MatMulWithADynamicRowCountFuses) {
  OnnxModelBuilder b;
  b.Input("x", kFloat, {-1, 7});
  b.FloatInit("w", {7, kN}, Random(7 * kN, 41));
  b.Node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.FloatInit("bias", {kN}, Random(kN, 42));
  b.Node("Add", {"m", "bias"}, {"a"}, "add");
  b.Node("Sigmoid", {"a"}, {"y"}, "sigmoid");
  b.Output("y", kFloat, {-1, kN});
  CompileStats stats;
  auto def = Compile(b, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountKernels(*def, "FusedMatMul"), 1);
  EXPECT_EQ(stats.epilogue_nodes, 2);
  auto plain = Compile(b, {false});
  ASSERT_TRUE(plain.ok());
  for (const Shape& s : {Shape{1, 7}, Shape{13, 7}}) {
    const std::vector<float> x = Random(static_cast<size_t>(*NumElements(s)), 43);
    auto got = RunFloat32Outputs(*def, {s}, {x});
    auto want = RunFloat32Outputs(*plain, {s}, {x});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), want[0].size());
    for (size_t i = 0; i < got[0].size(); ++i) ASSERT_NEAR(got[0][i], want[0][i], 1e-5f) << "at " << i;
  }
}

}  // namespace
}  // namespace remex::compiler
