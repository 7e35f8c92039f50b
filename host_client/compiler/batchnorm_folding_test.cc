// BatchNormalization folding (and the decomposition of the others into Mul and Add): which BatchNormalization nodes fold into their Conv
// (with and without a Conv bias, grouped convolutions) and which must not (a Conv output
// read elsewhere or a graph output, non-constant statistics, training mode), and the
// folded graphs run on the CPU VM against the same graphs compiled without folding, in
// NCHW, NHWC and float16, with the epilogue fusion after it.
#include "host_client/compiler/passes/batchnorm_folding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"

namespace remex::compiler {
namespace batchnorm_folding_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::CountKernels;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;
const Shape kX = {2, 4, 5, 6};

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  return remex::testing::UniformFloats(n, seed, lo, hi);
}

// Conv `name` (3x3, pads 1, 4 -> 4 channels, `group`) of `in`, then a
// BatchNormalization of its output into `out`, with statistics far from the identity
// (var in [0.2, 3], mean in [-1, 1], scale in [0.5, 2]) so that folding shows.
// `half`: the weights and statistics are float16 initializers (a float16 model).
onnx::NodeProto* AddConvBn(OnnxModelBuilder& b, const std::string& name, const std::string& in, const std::string& out,
               uint32_t seed, bool conv_bias = true, int64_t group = 1, bool half = false) {
  auto init = [&](const std::string& n, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    if (half) {
      b.Float16Init(n, dims, v);
    } else {
      b.FloatInit(n, dims, v);
    }
  };
  init(name + ".w", {4, 4 / group, 3, 3}, Random(static_cast<size_t>(36 * 4 / group), seed));
  std::vector<std::string> conv_in = {in, name + ".w"};
  if (conv_bias) {
    init(name + ".b", {4}, Random(4, seed + 1));
    conv_in.push_back(name + ".b");
  }
  auto* conv = b.Node("Conv", conv_in, {name + ".y"}, name);
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  OnnxModelBuilder::IntAttr(conv, "group", group);
  init(name + ".scale", {4}, Random(4, seed + 2, 0.5f, 2.0f));
  init(name + ".beta", {4}, Random(4, seed + 3));
  init(name + ".mean", {4}, Random(4, seed + 4));
  init(name + ".var", {4}, Random(4, seed + 5, 0.2f, 3.0f));
  auto* bn = b.Node("BatchNormalization", {name + ".y", name + ".scale", name + ".beta", name + ".mean", name + ".var"},
                    {out}, name + ".bn");
  OnnxModelBuilder::FloatAttr(bn, "epsilon", 1e-3f);
  return bn;
}

struct Variant {
  bool fold = true;
  Layout layout = Layout::kNchw;
  DType dtype = DType::kFloat32;
  bool fuse_elementwise = true;
};

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, Variant v, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.fold_batchnorm = v.fold;
  options.layout = v.layout;
  options.dtype = v.dtype;
  options.fuse_elementwise = v.fuse_elementwise;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

// Compiles `b` with and without folding in `v`'s layout and dtype, checks the folded
// count and that both give the same outputs on x.
void ExpectSameResults(const OnnxModelBuilder& b, Variant v, int expect_folded, double tolerance) {
  CompileStats stats;
  auto folded = Compile(b, v, &stats);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(stats.batchnorms_folded, expect_folded);
  Variant plain = v;
  plain.fold = false;
  auto reference = Compile(b, plain);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  // The ones left are rewritten as Mul and Add (DecomposeBatchNormalization) where their
  // statistics are constants.
  EXPECT_EQ(CountKernels(*folded, "BatchNormalization") + expect_folded + stats.batchnorms_decomposed,
            CountKernels(*reference, "BatchNormalization"));
  const std::vector<float> x = Random(static_cast<size_t>(NumElements(kX).value()), 99);
  auto want = RunFloat32Outputs(*reference, {kX}, {x});
  auto got = RunFloat32Outputs(*folded, {kX}, {x});
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].size(), got[o].size());
    double worst = 0;
    for (size_t i = 0; i < want[o].size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(want[o][i]) - got[o][i]) /
                                  (1.0 + std::abs(static_cast<double>(want[o][i]))));
    }
    EXPECT_LE(worst, tolerance) << "output " << o;
  }
}

OnnxModelBuilder TwoBlocks(bool first_bias, int64_t group) {
  OnnxModelBuilder b(15);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  AddConvBn(b, "c1", "x", "h", 10, first_bias, group);
  b.Node("Relu", {"h"}, {"r"}, "relu");
  AddConvBn(b, "c2", "r", "y", 20);
  return b;
}

TEST(BatchNormFolding, FoldsIntoTheConvWithOrWithoutBiasAndGroups) {
  for (bool bias : {true, false}) {
    for (int64_t group : {1, 2, 4}) {
      SCOPED_TRACE("conv bias " + std::to_string(bias) + ", group " + std::to_string(group));
      ExpectSameResults(TwoBlocks(bias, group), Variant{}, 2, 2e-6);
    }
  }
}

TEST(BatchNormFolding, SameResultsInNhwcAndFloat16) {
  ExpectSameResults(TwoBlocks(true, 1), Variant{true, Layout::kNhwc, DType::kFloat32}, 2, 2e-6);
  // float16 weights round differently once scaled: within float16's precision.
  ExpectSameResults(TwoBlocks(true, 2), Variant{true, Layout::kNchw, DType::kFloat16}, 2, 1e-2);
}

// A float16 model (float16 weights and statistics; float32 at its edges, as converters
// that keep the interface write one) compiled in its own dtype: each BatchNormalization
// folds into its float16 Conv, the first through a grouped one, and the rest of a
// float16 BatchNormalization (after a Relu, no Conv) becomes a float16 Mul and Add.
TEST(BatchNormFolding, FoldsAFloat16ModelInFloat16) {
  OnnxModelBuilder b(15);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  auto* cast = b.Node("Cast", {"x"}, {"xh"}, "to_half");
  OnnxModelBuilder::IntAttr(cast, "to", onnx::TensorProto::FLOAT16);
  AddConvBn(b, "c1", "xh", "h", 10, true, 2, /*half=*/true);
  b.Node("Relu", {"h"}, {"r"}, "relu");
  AddConvBn(b, "c2", "r", "h2", 20, false, 1, /*half=*/true);
  b.Float16Init("s", {4}, Random(4, 4, 0.5f, 2.0f));
  b.Float16Init("beta", {4}, Random(4, 5));
  b.Float16Init("mean", {4}, Random(4, 6));
  b.Float16Init("var", {4}, Random(4, 7, 0.5f, 2));
  b.Node("Relu", {"h2"}, {"r2"}, "relu2");
  b.Node("BatchNormalization", {"r2", "s", "beta", "mean", "var"}, {"yh"}, "bn3");
  auto* back = b.Node("Cast", {"yh"}, {"y"}, "to_float");
  OnnxModelBuilder::IntAttr(back, "to", kFloat);
  CompileStats stats;
  auto def = Compile(b, Variant{.dtype = DType::kUndefined}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.batchnorms_folded, 2);
  EXPECT_EQ(stats.batchnorms_decomposed, 1);
  EXPECT_EQ(CountKernels(*def, "BatchNormalization"), 0);
  for (const vm::ConstantDef& c : def->constants) {
    EXPECT_NE(c.dtype, DType::kFloat32) << "a float32 constant in a float16 model";
  }
  // The folded weights round once where the unfolded Conv rounds its output: within
  // float16's precision of the graph compiled without folding.
  ExpectSameResults(b, Variant{.dtype = DType::kUndefined}, 2, 1e-2);
}

TEST(BatchNormFolding, FoldedConvStillTakesItsEpilogue) {
  CompileStats stats;
  auto def = Compile(TwoBlocks(true, 1), Variant{}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.batchnorms_folded, 2);
  EXPECT_EQ(CountKernels(*def, "BatchNormalization"), 0);
  // The first Conv takes the Relu after its folded BatchNormalization; the last has no
  // epilogue and stays a Conv.
  EXPECT_EQ(stats.fused_convs, 1);
  EXPECT_EQ(CountKernels(*def, "FusedConv"), 1);
  EXPECT_EQ(CountKernels(*def, "Conv"), 1);
  // Each kernel is named after every node it runs (what profiles and errors show).
  std::set<std::string> names;
  for (const auto& k : def->kernels) names.insert(k.node_name);
  EXPECT_TRUE(names.count("c1+c1.bn+relu")) << ::testing::PrintToString(names);
  EXPECT_TRUE(names.count("c2+c2.bn")) << ::testing::PrintToString(names);
}

TEST(BatchNormFolding, LeavesWhatItMustNotFold) {
  // The Conv's output is also a graph output: folding would change it.
  {
    OnnxModelBuilder b(15);
    b.Input("x", kFloat, kX).Output("y", kFloat, kX).Output("c1.y", kFloat, kX);
    AddConvBn(b, "c1", "x", "y", 1);
    ExpectSameResults(b, Variant{}, 0, 0);
  }
  // The Conv's output has a second reader.
  {
    OnnxModelBuilder b(15);
    b.Input("x", kFloat, kX).Output("y", kFloat, kX);
    AddConvBn(b, "c1", "x", "n", 2);
    b.Node("Add", {"n", "c1.y"}, {"y"}, "add");
    ExpectSameResults(b, Variant{}, 0, 0);
  }
  // Statistics that are graph inputs, not constants.
  {
    OnnxModelBuilder b(15);
    b.Input("x", kFloat, kX).Input("mean", kFloat, {4}).Output("y", kFloat, kX);
    b.FloatInit("w", {4, 4, 1, 1}, Random(16, 3));
    b.FloatInit("s", {4}, Random(4, 4));
    b.FloatInit("beta", {4}, Random(4, 5));
    b.FloatInit("var", {4}, Random(4, 6, 0.5f, 2));
    b.Node("Conv", {"x", "w"}, {"c"}, "conv");
    b.Node("BatchNormalization", {"c", "s", "beta", "mean", "var"}, {"y"}, "bn");
    CompileStats stats;
    auto def = Compile(b, Variant{}, &stats);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    EXPECT_EQ(stats.batchnorms_folded, 0);
    EXPECT_EQ(CountKernels(*def, "BatchNormalization"), 1);
  }
  // A BatchNormalization after something other than a Conv.
  {
    OnnxModelBuilder b(15);
    b.Input("x", kFloat, kX).Output("y", kFloat, kX);
    b.Node("Relu", {"x"}, {"r"}, "relu");
    b.FloatInit("s", {4}, Random(4, 4));
    b.FloatInit("beta", {4}, Random(4, 5));
    b.FloatInit("mean", {4}, Random(4, 6));
    b.FloatInit("var", {4}, Random(4, 7, 0.5f, 2));
    b.Node("BatchNormalization", {"r", "s", "beta", "mean", "var"}, {"y"}, "bn");
    ExpectSameResults(b, Variant{}, 0, 0);
  }
}

TEST(BatchNormFolding, TrainingModeIsNotFolded) {
  OnnxModelBuilder b(15);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  OnnxModelBuilder::IntAttr(AddConvBn(b, "c1", "x", "y", 7), "training_mode", 1);
  Graph g = ImportOnnxBytes(b.Bytes(), Registry()).value();
  EXPECT_EQ(FoldBatchNormalization(g), 0);
}

// DenseNet's pre-activation: a BatchNormalization after a Concat (no Conv to fold into)
// and a Relu, before the next Conv.
OnnxModelBuilder ConcatBnRelu() {
  OnnxModelBuilder b(15);
  b.Input("x", kFloat, kX).Output("y", kFloat, {2, 4, 5, 6});
  b.FloatInit("w1", {4, 4, 3, 3}, Random(144, 31));
  auto* c1 = b.Node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  OnnxModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  auto* cat = b.Node("Concat", {"x", "c1"}, {"cat"}, "concat");
  OnnxModelBuilder::IntAttr(cat, "axis", 1);
  b.FloatInit("s", {8}, Random(8, 32, 0.5f, 2.0f));
  b.FloatInit("beta", {8}, Random(8, 33));
  b.FloatInit("mean", {8}, Random(8, 34));
  b.FloatInit("var", {8}, Random(8, 35, 0.2f, 3.0f));
  auto* bn = b.Node("BatchNormalization", {"cat", "s", "beta", "mean", "var"}, {"n"}, "bn");
  OnnxModelBuilder::FloatAttr(bn, "epsilon", 1e-3f);
  b.Node("Relu", {"n"}, {"r"}, "relu");
  b.FloatInit("w2", {4, 8, 1, 1}, Random(32, 36));
  b.Node("Conv", {"r", "w2"}, {"y"}, "conv2");
  return b;
}

TEST(BatchNormDecomposition, BatchNormWithNoConvBeforeItBecomesMulAndAddFusedWithTheRelu) {
  CompileStats stats;
  auto def = Compile(ConcatBnRelu(), Variant{}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.batchnorms_folded, 0);
  EXPECT_EQ(stats.batchnorms_decomposed, 1);
  EXPECT_EQ(CountKernels(*def, "BatchNormalization"), 0);
  EXPECT_EQ(CountKernels(*def, "Relu"), 0);
  EXPECT_EQ(CountKernels(*def, "FusedElementwise"), 1);  // Mul, Add, Relu in one pass
  // The same values as the BatchNormalization kernel (compiled without folding), in
  // either layout.
  for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
    SCOPED_TRACE(LayoutName(layout));
    ExpectSameResults(ConcatBnRelu(), Variant{true, layout}, 0, 1e-6);
  }
}

TEST(BatchNormDecomposition, NotWithoutElementwiseFusionNorForTrainingMode) {
  // Without fusion, two passes (Mul, Add) would cost more than the one BatchNormalization.
  CompileStats stats;
  auto def = Compile(ConcatBnRelu(), Variant{.fuse_elementwise = false}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.batchnorms_decomposed, 0);
  EXPECT_EQ(CountKernels(*def, "BatchNormalization"), 1);
  OnnxModelBuilder b(15);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  b.FloatInit("s", {4}, Random(4, 4));
  b.FloatInit("beta", {4}, Random(4, 5));
  b.FloatInit("mean", {4}, Random(4, 6));
  b.FloatInit("var", {4}, Random(4, 7, 0.5f, 2));
  auto* bn = b.Node("BatchNormalization", {"x", "s", "beta", "mean", "var"}, {"y"}, "bn");
  OnnxModelBuilder::IntAttr(bn, "training_mode", 1);
  Graph g = ImportOnnxBytes(b.Bytes(), Registry()).value();
  EXPECT_EQ(DecomposeBatchNormalization(g), 0);
}

}  // namespace batchnorm_folding_test
}  // namespace remex::compiler
