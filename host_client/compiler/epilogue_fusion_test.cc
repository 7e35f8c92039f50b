// The epilogue fusion pass: what fuses into FusedConv, FusedMatMul and
// FusedMatMulInteger and what must not (an intermediate with another reader, a graph
// output, a broadcasting Add, a MatMul by a non-constant), and compiled graphs run on the CPU VM against the same
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
namespace epilogue_fusion_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::CountKernels;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<float> Random(size_t n, uint32_t seed) { return remex::testing::UniformFloats(n, seed); }

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

// Per FusedConv kernel call with a residual Z: whether its output register is Z's (the
// code generator gave Y Z's buffer: OpTraits::output_overwrites_input).
std::vector<bool> ResidualBuffersTakenOver(const vm::ExecutableDef& def) {
  std::vector<bool> taken;
  for (const auto& inst : def.functions.at(0).code) {
    if (inst.op != vm::Opcode::kInvokeKernel) continue;
    if (def.kernels.at(static_cast<size_t>(inst.scalars.at(0))).op != "FusedConv") continue;
    const auto& ins = inst.lists.at(0);
    if (ins.size() < 4 || ins[3] < 0) continue;
    taken.push_back(inst.lists.at(1).at(0) == ins[3]);
  }
  return taken;
}

// y = conv3(Relu(conv1(x) + conv2(x))) (a graph output is written in place, so the
// FusedConv's output is none), conv2's output read again by `extra` ("" none, "relu": a
// Relu after the FusedConv, "output": a graph output).
OnnxModelBuilder ResidualConvs(const std::string& extra) {
  OnnxModelBuilder b = Base();
  AddConv(b, "conv1", "x", "c1", 14);
  AddConv(b, "conv2", "x", "c2", 16);
  b.Node("Add", {"c1", "c2"}, {"a"}, "add");
  b.Node("Relu", {"a"}, {"r"}, "relu");
  AddConv(b, "conv3", "r", "y", 18);
  b.Output("y", kFloat, kX);
  if (extra == "relu") {
    b.Node("Relu", {"c2"}, {"z"}, "relu2");
    b.Output("z", kFloat, kX);
  } else if (extra == "output") {
    b.Output("c2", kFloat, kX);
  }
  return b;
}

// The residual's buffer becomes Y's where Z dies at the FusedConv (no allocation, no copy
// of Z into Y), with the unfused graph's values; never a graph input's (the caller's
// tensor), nor a value read after the node or returned.
TEST(EpilogueFusionTest, YTakesOverTheBufferOfAResidualThatDiesThere) {
  for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
    SCOPED_TRACE(LayoutName(layout));
    auto def = Compile(ResidualConvs(""), {true, layout});
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    EXPECT_EQ(ResidualBuffersTakenOver(*def), std::vector<bool>{true});
    ExpectFusion(ResidualConvs(""), 1, 2, {true, layout});
  }
  for (const char* extra : {"relu", "output"}) {
    SCOPED_TRACE(extra);
    auto def = Compile(ResidualConvs(extra), {});
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    EXPECT_EQ(ResidualBuffersTakenOver(*def), std::vector<bool>{false});
  }
  OnnxModelBuilder from_input = Base();  // Z is the graph input x
  AddConv(from_input, "conv1", "x", "c1", 14);
  from_input.Node("Add", {"c1", "x"}, {"a"}, "add");
  AddConv(from_input, "conv3", "a", "y", 18);
  from_input.Output("y", kFloat, kX);
  auto input = Compile(from_input, {});
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  EXPECT_EQ(ResidualBuffersTakenOver(*input), std::vector<bool>{false});
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

// A dynamically quantized MatMul as ONNX Runtime's quantizer writes it: x float32
// [2, 5, 64], DynamicQuantizeLinear, MatMulInteger by constant weights [64, 48] (int8 at
// zero point 0, or uint8 at 128), Cast to float32, Mul by x_scale * w_scale (one value,
// or per column with `per_column`), then Add of a [48] bias unless `bias` is false.
constexpr int64_t kQK = 64, kQN = 48;
const Shape kQX = {2, 5, kQK};
// With `bias_input`, the bias is a graph input instead of a constant; with
// `activation`, that op follows (Relu; Gelu: decomposed, as exporters write it).
OnnxModelBuilder QuantizedMatMul(bool bias, bool per_column = false, bool uint8_weights = false,
                                 bool bias_input = false, const std::string& activation = "") {
  const std::string out = activation.empty() ? "y" : "pre";
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kQX);
  if (bias_input) b.Input("bias", kFloat, {kQN});
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<uint8_t> w(kQK * kQN);
  for (uint8_t& v : w) v = static_cast<uint8_t>(dist(rng) + (uint8_weights ? 128 : 0));
  const int type = uint8_weights ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  const uint8_t w_zp = uint8_weights ? 128 : 0;
  b.RawInit("w", type, {kQK, kQN}, w.data(), w.size());
  b.RawInit("w_zp", type, {}, &w_zp, 1);
  if (per_column) {
    std::vector<float> scales = Random(kQN, 51);
    for (float& v : scales) v = 0.01f + std::fabs(v) * 0.01f;
    b.FloatInit("w_scale", {kQN}, scales);
  } else {
    b.FloatInit("w_scale", {}, {0.0123f});
  }
  b.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xzp"}, "dql");
  b.Node("MatMulInteger", {"xq", "w", "xzp", "w_zp"}, {"acc"}, "mmi");
  OnnxModelBuilder::IntAttr(b.Node("Cast", {"acc"}, {"accf"}, "cast"), "to", kFloat);
  b.Node("Mul", {"xs", "w_scale"}, {"scale"}, "scale");
  b.Node("Mul", {"scale", "accf"}, {bias ? "m" : out}, "mul");
  if (bias) {
    if (!bias_input) b.FloatInit("bias", {kQN}, Random(kQN, 52));
    b.Node("Add", {"m", "bias"}, {out}, "add");
  }
  if (activation == "Gelu") {  // as torch.onnx.export writes it: x * 0.5 * (1 + erf(x / sqrt(2)))
    b.FloatInit("sqrt2", {}, {1.4142135f}).FloatInit("one", {}, {1.0f}).FloatInit("half", {}, {0.5f});
    b.Node("Div", {out, "sqrt2"}, {"g0"}, "gelu_div");
    b.Node("Erf", {"g0"}, {"g1"}, "gelu_erf");
    b.Node("Add", {"g1", "one"}, {"g2"}, "gelu_add");
    b.Node("Mul", {out, "g2"}, {"g3"}, "gelu_mul");
    b.Node("Mul", {"g3", "half"}, {"y"}, "gelu_half");
  } else if (!activation.empty()) {
    b.Node(activation, {out}, {"y"}, "act");
  }
  b.Output("y", kFloat, {2, 5, kQN});
  return b;
}

// Compiles `b` with and without epilogue fusion: `fused` FusedMatMulInteger kernels
// absorbing `nodes` nodes, and the outputs of both within float32 rounding (the sums
// are exact either way; oneDNN may round the scale and bias once).
void ExpectQuantizedFusion(const OnnxModelBuilder& b, int fused, int nodes, float tol = 1e-6f) {
  CompileStats with_stats, without_stats;
  auto with = Compile(b, {}, &with_stats);
  auto without = Compile(b, {false}, &without_stats);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_EQ(CountKernels(*with, "FusedMatMulInteger"), fused);
  EXPECT_EQ(CountKernels(*with, "MatMulInteger"), 1 - fused);
  EXPECT_EQ(CountKernels(*without, "FusedMatMulInteger"), 0);
  EXPECT_EQ(with_stats.fused_matmul_integers, fused);
  EXPECT_EQ(with_stats.epilogue_nodes, nodes);
  for (uint32_t seed : {61u, 62u}) {
    const std::vector<float> x = Random(static_cast<size_t>(*NumElements(kQX)), seed);
    auto got = RunFloat32Outputs(*with, {kQX}, {x});
    auto want = RunFloat32Outputs(*without, {kQX}, {x});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), want[0].size());
    for (size_t i = 0; i < got[0].size(); ++i) {
      ASSERT_NEAR(got[0][i], want[0][i], tol * (1 + std::fabs(want[0][i]))) << "at " << i;
    }
  }
}

TEST(EpilogueFusionTest, QuantizedMatMulCastMulAddFuses) {
  ExpectQuantizedFusion(QuantizedMatMul(true), 1, 3);
  ExpectQuantizedFusion(QuantizedMatMul(true, /*per_column=*/true), 1, 3);
  ExpectQuantizedFusion(QuantizedMatMul(true, false, /*uint8_weights=*/true), 1, 3);
  ExpectQuantizedFusion(QuantizedMatMul(false), 1, 2);  // no bias: Cast and Mul
}

// The decomposed GELU is one Gelu node once recognised (passes/activation_patterns.h);
// the tolerance takes oneDNN's gelu_erf post-op.
TEST(EpilogueFusionTest, QuantizedMatMulTakesTheActivationAfterIt) {
  ExpectQuantizedFusion(QuantizedMatMul(true, false, false, false, "Relu"), 1, 4);
  ExpectQuantizedFusion(QuantizedMatMul(false, true, false, false, "Relu"), 1, 3);
  ExpectQuantizedFusion(QuantizedMatMul(true, false, false, false, "Gelu"), 1, 4, 1e-5f);
}

TEST(EpilogueFusionTest, QuantizedMatMulChainsThatMustNotFuse) {
  // The Cast's output read elsewhere too.
  OnnxModelBuilder read = QuantizedMatMul(true);
  read.Node("Relu", {"accf"}, {"r"}, "relu");
  read.Output("r", kFloat, {2, 5, kQN});
  CompileStats stats;
  auto def = Compile(read, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_matmul_integers, 0);
  EXPECT_EQ(CountKernels(*def, "MatMulInteger"), 1);

  // A Mul by a value that is neither one element nor [N]: [2, 5, 1] broadcast.
  OnnxModelBuilder rows(13);
  rows.Input("a", onnx::TensorProto::UINT8, {2, 5, kQK}).Input("s", kFloat, {2, 5, 1});
  std::vector<int8_t> w(kQK * kQN, 3);
  rows.RawInit("w", onnx::TensorProto::INT8, {kQK, kQN}, w.data(), w.size());
  rows.Node("MatMulInteger", {"a", "w"}, {"acc"}, "mmi");
  OnnxModelBuilder::IntAttr(rows.Node("Cast", {"acc"}, {"accf"}, "cast"), "to", kFloat);
  rows.Node("Mul", {"accf", "s"}, {"y"}, "mul");
  rows.Output("y", kFloat, {2, 5, kQN});
  def = Compile(rows, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_matmul_integers, 0);

  // A bias that is not a constant: the Mul fuses, the Add stays.
  def = Compile(QuantizedMatMul(true, false, false, /*bias_input=*/true), {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_matmul_integers, 1);
  EXPECT_EQ(stats.epilogue_nodes, 2);
  EXPECT_EQ(CountKernels(*def, "Add") + CountKernels(*def, "FusedElementwise"), 1);
}

// A quantized residual connection as a QOperator quantizer writes it: a and b
// quantized (uint8, zero points 128 and 3), dequantized, added, Relu (or not),
// quantized again (zero point 0), dequantized for the graph output. One
// FusedQLinearAdd replaces the middle, and the outputs are the unfused graph's bits.
// With `dynamic`, x has a symbolic batch and z is -x (one symbol for both).
OnnxModelBuilder QuantizedResidual(bool relu, bool dynamic = false) {
  OnnxModelBuilder b(13);
  const Shape dims = dynamic ? Shape{-1, kX[1], kX[2], kX[3]} : kX;
  b.Input("x", kFloat, dims);
  if (dynamic) {
    b.Node("Neg", {"x"}, {"z"}, "neg_x");
  } else {
    b.Input("z", kFloat, kX);
  }
  const uint8_t zp128 = 128, zp3 = 3, zp0 = 0;
  b.FloatInit("s", {}, {0.05f}).FloatInit("t", {}, {0.03f});
  b.RawInit("zp128", onnx::TensorProto::UINT8, {}, &zp128, 1);
  b.RawInit("zp3", onnx::TensorProto::UINT8, {}, &zp3, 1);
  b.RawInit("zp0", onnx::TensorProto::UINT8, {}, &zp0, 1);
  b.Node("QuantizeLinear", {"x", "s", "zp128"}, {"qa"}, "qa");
  b.Node("QuantizeLinear", {"z", "t", "zp3"}, {"qb"}, "qb");
  b.Node("DequantizeLinear", {"qa", "s", "zp128"}, {"fa"}, "da");
  b.Node("DequantizeLinear", {"qb", "t", "zp3"}, {"fb"}, "db");
  b.Node("Add", {"fa", "fb"}, {relu ? "sum" : "r"}, "add");
  if (relu) b.Node("Relu", {"sum"}, {"r"}, "relu");
  b.Node("QuantizeLinear", {"r", "s", "zp0"}, {"q"}, "q");
  b.Node("DequantizeLinear", {"q", "s", "zp0"}, {"y"}, "dy");
  b.Output("y", kFloat, dims);
  return b;
}

TEST(EpilogueFusionTest, QuantizedResidualAddIsOneFusedQLinearAdd) {
  for (bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "with Relu" : "without Relu");
    const OnnxModelBuilder b = QuantizedResidual(relu);
    CompileStats with_stats;
    auto with = Compile(b, {}, &with_stats);
    Variant plain;
    plain.elementwise = false;  // the pass runs with elementwise fusion
    auto without = Compile(b, plain);
    ASSERT_TRUE(with.ok()) << with.status().ToString();
    ASSERT_TRUE(without.ok()) << without.status().ToString();
    EXPECT_EQ(with_stats.quantized_adds, 1);
    EXPECT_EQ(CountKernels(*with, "FusedQLinearAdd"), 1);
    EXPECT_EQ(CountKernels(*without, "FusedQLinearAdd"), 0);
    EXPECT_EQ(CountKernels(*with, "Add") + CountKernels(*with, "Relu") + CountKernels(*with, "FusedElementwise"), 0);
    std::vector<float> x = Random(static_cast<size_t>(*NumElements(kX)), 91);
    std::vector<float> z = Random(x.size(), 92);
    for (float& v : x) v *= 6;  // past both ends of the quantized range
    auto got = RunFloat32Outputs(*with, {kX, kX}, {x, z});
    auto want = RunFloat32Outputs(*without, {kX, kX}, {x, z});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], want[0]);
  }
  // A symbolic batch: the shapes agree by their symbols.
  CompileStats dynamic_stats;
  auto dynamic = Compile(QuantizedResidual(true, true), {}, &dynamic_stats);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().ToString();
  EXPECT_EQ(dynamic_stats.quantized_adds, 1);
  auto dynamic_plain = Compile(QuantizedResidual(true, true), {true, Layout::kNchw, DType::kFloat32, false});
  ASSERT_TRUE(dynamic_plain.ok());
  const Shape two = {2, kX[1], kX[2], kX[3]};
  const std::vector<float> x2 = Random(static_cast<size_t>(*NumElements(two)), 93);
  EXPECT_EQ(RunFloat32Outputs(*dynamic, {two}, {x2}), RunFloat32Outputs(*dynamic_plain, {two}, {x2}));
  // The sum also read elsewhere: nothing fuses.
  OnnxModelBuilder read = QuantizedResidual(true);
  read.Node("Neg", {"sum"}, {"n"}, "neg");
  read.Output("n", kFloat, kX);
  CompileStats stats;
  ASSERT_TRUE(Compile(read, {}, &stats).ok());
  EXPECT_EQ(stats.quantized_adds, 0);
}

}  // namespace epilogue_fusion_test
}  // namespace remex::compiler
