// Op versions against ONNX: every registry entry starts at a real ONNX definition
// (OpSchema::since_version), an op's first entry at the definition in effect at opset 7,
// and the frontend binds each node to the entry covering its model's opset, refusing an
// opset no entry covers.

#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/executable.h"

namespace remex::compiler {
namespace op_versions_onnx_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32;

constexpr int kNewestOpset = 17;

// The ONNX since_version of `op`'s definition in `domain` (empty: the default one) in
// effect at `opset`; 0 when none.
int OnnxSince(const std::string& op, int opset, const std::string& domain = "") {
  const auto* schema = onnx::OpSchemaRegistry::Schema(op, opset, domain);
  return schema ? schema->since_version() : 0;
}

TEST(OpVersionsOnnxTest, EntriesOfOtherDomainsStartAtTheirOnnxDefinitions) {
  int checked = 0;
  for (const std::string& op : Registry().OpNames()) {
    const std::vector<const kernels::OpDef*> entries = Registry().OpVersions(op);
    const std::string& domain = entries.front()->domain;
    if (domain.empty()) continue;
    SCOPED_TRACE(domain + "::" + op);
    for (const kernels::OpDef* e : entries) {
      EXPECT_EQ(e->domain, domain);
      EXPECT_EQ(OnnxSince(op, e->since_version, domain), e->since_version);
    }
    // Not also an op of the default domain, which the frontend would bind elsewhere.
    EXPECT_EQ(OnnxSince(op, kNewestOpset), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 3);  // Adagrad, Adam, Momentum (ai.onnx.preview.training).
}

TEST(OpVersionsOnnxTest, EntriesStartAtOnnxDefinitions) {
  int checked = 0;
  for (const std::string& op : Registry().OpNames()) {
    if (OnnxSince(op, kNewestOpset) == 0) continue;  // Remex's own ops (Fused*), other domains.
    SCOPED_TRACE(op);
    const std::vector<const kernels::OpDef*> entries = Registry().OpVersions(op);
    for (const kernels::OpDef* e : entries) {
      EXPECT_TRUE(e->domain.empty());
      EXPECT_EQ(OnnxSince(op, e->since_version), e->since_version)
          << op << "-" << e->since_version << " is not an ONNX definition";
    }
    // The first entry: the definition in effect at opset 7, or the op's first one when
    // it is newer. Clip and Slice start later: the frontend rewrites their older forms.
    int first = OnnxSince(op, 7);
    for (int v = 7; first == 0 && v <= kNewestOpset; ++v) first = OnnxSince(op, v);
    const int want = op == "Clip" ? 11 : op == "Slice" ? 10 : first;
    EXPECT_EQ(entries.front()->since_version, want);
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

// A model at `opset` running `op` on x [1, 2, 2] (float32) into y.
OnnxModelBuilder OneOp(int opset, const std::string& op) {
  OnnxModelBuilder b(opset);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 2}).Output("y", onnx::TensorProto::FLOAT, {-1, -1, -1});
  b.Node(op, {"x"}, {"y"}, "n0");
  return b;
}

TEST(OpVersionsOnnxTest, NodesBindToTheEntryOfTheModelsOpset) {
  struct Case {
    int opset;
    const char* op;
    int bound;
  };
  for (const Case& c : std::vector<Case>{{11, "Softmax", 1},
                                         {12, "Softmax", 1},
                                         {13, "Softmax", 13},
                                         {17, "Softmax", 13},
                                         {9, "Dropout", 7},
                                         {12, "Dropout", 10},
                                         {9, "Flatten", 1},
                                         {11, "Flatten", 11},
                                         {6, "Relu", 6},
                                         {5, "Relu", 6},     // Relu-1 without consumed_inputs is Relu-6.
                                         {1, "Sigmoid", 6},
                                         {5, "Clip", 11},    // Clip-1, rewritten as Clip-11.
                                         {9, "Clip", 11},    // Clip-6, rewritten as Clip-11.
                                         {13, "Clip", 11}}) {
    SCOPED_TRACE(std::string(c.op) + " at opset " + std::to_string(c.opset));
    auto graph = ImportOnnxBytes(OneOp(c.opset, c.op).Bytes(), Registry());
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    EXPECT_EQ(graph->nodes[0].version, c.bound);
    EXPECT_FALSE(graph->nodes[0].attrs.Has("since_version"));
  }
}

TEST(OpVersionsOnnxTest, SoftmaxOfOpset11RunsAsSoftmax1ThroughTheExecutable) {
  // Softmax-1: axis 1 (the default) of [1, 2, 2] normalises over all four values.
  auto graph = ImportOnnxBytes(OneOp(11, "Softmax").Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ(def->kernels.size(), 1u);
  EXPECT_EQ(def->kernels[0].version, 1);
  auto bytes = vm::SerializeExecutable(*def);
  ASSERT_TRUE(bytes.ok());
  auto parsed = vm::ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->kernels[0].version, 1);
  EXPECT_EQ(RunFloat32(*parsed, {1, 2, 2}, {0, 0, 0, 0}), (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}));
  // Softmax-13: along the last axis.
  auto graph13 = ImportOnnxBytes(OneOp(13, "Softmax").Bytes(), Registry());
  ASSERT_TRUE(graph13.ok());
  auto def13 = CompileGraph(std::move(graph13).value(), Registry(), {});
  ASSERT_TRUE(def13.ok()) << def13.status().ToString();
  EXPECT_EQ(def13->kernels[0].version, 13);
  EXPECT_EQ(RunFloat32(*def13, {1, 2, 2}, {0, 0, 0, 0}), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

// Momentum (ai.onnx.preview.training) over x [2] with R, T, G and V as initializers:
// ONNX's test_momentum case. `training_only`: the model imports no default-domain opset.
OnnxModelBuilder MomentumModel(bool training_only) {
  OnnxModelBuilder b(13);
  if (training_only) b.DropDefaultDomain();
  b.ImportDomain("ai.onnx.preview.training", 1);
  b.Input("x", onnx::TensorProto::FLOAT, {2})
      .Output("x_new", onnx::TensorProto::FLOAT, {2})
      .Output("v_new", onnx::TensorProto::FLOAT, {2});
  b.FloatInit("r", {}, {0.1f}).Int64Init("t", {}, {0});
  b.FloatInit("g", {2}, {-0.94f, -2.5f}).FloatInit("v", {2}, {1.7f, 3.6f});
  auto* n = b.Node("Momentum", {"r", "t", "x", "g", "v"}, {"x_new", "v_new"}, "momentum");
  n->set_domain("ai.onnx.preview.training");
  OnnxModelBuilder::FloatAttr(n, "alpha", 0.95f);
  OnnxModelBuilder::FloatAttr(n, "beta", 0.1f);
  OnnxModelBuilder::FloatAttr(n, "norm_coefficient", 0.001f);
  OnnxModelBuilder::StringAttr(n, "mode", "standard");
  return b;
}

TEST(OpVersionsOnnxTest, TrainingDomainNodesBindAtTheirDomainsOpsetAndRun) {
  for (bool training_only : {true, false}) {
    SCOPED_TRACE(training_only ? "training domain only" : "with the default domain");
    auto graph = ImportOnnxBytes(MomentumModel(training_only).Bytes(), Registry());
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    EXPECT_EQ(graph->nodes[0].version, 1);
    auto def = CompileGraph(std::move(graph).value(), Registry(), {});
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    auto bytes = vm::SerializeExecutable(*def);
    ASSERT_TRUE(bytes.ok());
    auto parsed = vm::ParseExecutable(*bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const auto out = remex::testing::RunFloat32Outputs(*parsed, {{2}}, {{1.2f, 2.8f}});
    ASSERT_EQ(out.size(), 2u);
    // ONNX's expected values (onnx/backend/test/case/node/momentum.py).
    EXPECT_NEAR(out[0][0], 1.13238f, 1e-5f);
    EXPECT_NEAR(out[0][1], 2.70772f, 1e-5f);
    EXPECT_NEAR(out[1][0], 0.6762f, 1e-5f);
    EXPECT_NEAR(out[1][1], 0.9227998f, 1e-5f);
  }
}

TEST(OpVersionsOnnxTest, NodesBindOnlyToOpsOfTheirOwnDomain) {
  auto expect_unimplemented = [](const OnnxModelBuilder& b, const std::string& says) {
    auto graph = ImportOnnxBytes(b.Bytes(), Registry());
    ASSERT_FALSE(graph.ok()) << says;
    EXPECT_EQ(graph.status().code(), StatusCode::kUnimplemented) << graph.status().ToString();
    EXPECT_NE(graph.status().message().find(says), std::string::npos) << graph.status().message();
  };
  // Momentum in the default domain: Remex's Momentum is the training domain's.
  OnnxModelBuilder in_default(13);
  in_default.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  in_default.Node("Momentum", {"x"}, {"y"}, "m");
  expect_unimplemented(in_default, "domain 'ai.onnx.preview.training'");
  // A training-domain node in a model that does not import the domain.
  OnnxModelBuilder without(13);
  without.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  without.Node("Adagrad", {"x"}, {"y"}, "a")->set_domain("ai.onnx.preview.training");
  expect_unimplemented(without, "imports no opset of domain 'ai.onnx.preview.training'");
  // A default-domain node in a model of the training domain only.
  OnnxModelBuilder relu = MomentumModel(true);
  relu.Output("r", onnx::TensorProto::FLOAT, {2});
  relu.Node("Relu", {"x"}, {"r"}, "relu");
  expect_unimplemented(relu, "imports no default-domain opset");
  // An op of a domain Remex has no ops of, named with its domain.
  OnnxModelBuilder contrib(13);
  contrib.ImportDomain("com.microsoft", 1);
  contrib.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  contrib.Node("BiasGelu", {"x", "x"}, {"y"}, "g")->set_domain("com.microsoft");
  expect_unimplemented(contrib, "unsupported op 'com.microsoft::BiasGelu'");
  // A model of such a domain only is refused as a whole.
  OnnxModelBuilder contrib_only(13);
  contrib_only.DropDefaultDomain().ImportDomain("com.microsoft", 1);
  contrib_only.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  contrib_only.Node("BiasGelu", {"x", "x"}, {"y"}, "g")->set_domain("com.microsoft");
  expect_unimplemented(contrib_only, "model imports no default-domain opset (only 'com.microsoft')");
}

// Opsets 1-6 (the definitions before opset 7): the legacy attributes are normalised
// into the opset-7 forms where that is exact, and refused where it is not.
std::vector<float> CompileAndRun(const OnnxModelBuilder& b, const Shape& shape, const std::vector<float>& x) {
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return {};
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  EXPECT_TRUE(def.ok()) << def.status().ToString();
  if (!def.ok()) return {};
  return RunFloat32(*def, shape, x);
}

TEST(OpVersionsOnnxTest, Opset6BroadcastAxisConsumedInputsAndBatchNormRun) {
  // y = Relu(x * s + b) per channel, as an opset-6 exporter wrote it: Mul and Add with
  // broadcast = 1, axis = 1 and [C] constants; Relu-1 with consumed_inputs.
  OnnxModelBuilder b(6);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 2, 2}).Output("y", onnx::TensorProto::FLOAT, {1, 2, 2, 2});
  b.FloatInit("s", {2}, {2, -1});
  b.FloatInit("b", {2}, {0.5f, 10});
  auto* mul = b.Node("Mul", {"x", "s"}, {"m"}, "mul");
  OnnxModelBuilder::IntAttr(mul, "broadcast", 1);
  OnnxModelBuilder::IntAttr(mul, "axis", 1);
  auto* add = b.Node("Add", {"m", "b"}, {"a"}, "add");
  OnnxModelBuilder::IntAttr(add, "broadcast", 1);
  OnnxModelBuilder::IntAttr(add, "axis", 1);
  OnnxModelBuilder::IntsAttr(b.Node("Relu", {"a"}, {"y"}, "relu"), "consumed_inputs", {0});
  EXPECT_EQ(CompileAndRun(b, {1, 2, 2, 2}, {1, 2, 3, 4, 1, 2, 3, 20}),
            (std::vector<float>{2.5f, 4.5f, 6.5f, 8.5f, 9, 8, 7, 0}));

  // broadcast = 1 without axis aligns B with A's last dims, as numpy does.
  OnnxModelBuilder t(6);
  t.Input("x", onnx::TensorProto::FLOAT, {2, 3}).Output("y", onnx::TensorProto::FLOAT, {2, 3});
  t.FloatInit("c", {3}, {1, 2, 3});
  OnnxModelBuilder::IntAttr(t.Node("Sub", {"x", "c"}, {"y"}, "sub"), "broadcast", 1);
  EXPECT_EQ(CompileAndRun(t, {2, 3}, {1, 1, 1, 5, 5, 5}), (std::vector<float>{0, -1, -2, 4, 3, 2}));

  // BatchNormalization-6 with is_test = 1, spatial = 1 and consumed_inputs.
  OnnxModelBuilder n(6);
  n.Input("x", onnx::TensorProto::FLOAT, {1, 2, 1, 2}).Output("y", onnx::TensorProto::FLOAT, {1, 2, 1, 2});
  n.FloatInit("scale", {2}, {1, 2}).FloatInit("bias", {2}, {0, 1}).FloatInit("mean", {2}, {1, 0});
  n.FloatInit("var", {2}, {1, 4});
  auto* bn = n.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn");
  OnnxModelBuilder::IntAttr(bn, "is_test", 1);
  OnnxModelBuilder::IntAttr(bn, "spatial", 1);
  OnnxModelBuilder::FloatAttr(bn, "epsilon", 0);
  OnnxModelBuilder::IntsAttr(bn, "consumed_inputs", {0, 0, 0, 1, 1});
  EXPECT_EQ(CompileAndRun(n, {1, 2, 1, 2}, {1, 3, 2, -2}), (std::vector<float>{0, 2, 3, -1}));
}

TEST(OpVersionsOnnxTest, Opset6FormsWithoutAnExactRewriteAreRefused) {
  struct Case {
    std::string what;
    OnnxModelBuilder model;
    const char* mention;
  };
  std::vector<Case> cases;
  {  // BatchNormalization in training mode.
    OnnxModelBuilder n(6);
    n.Input("x", onnx::TensorProto::FLOAT, {1, 1, 1, 1}).Output("y", onnx::TensorProto::FLOAT, {1, 1, 1, 1});
    n.FloatInit("s", {1}, {1}).FloatInit("b", {1}, {0}).FloatInit("m", {1}, {0}).FloatInit("v", {1}, {1});
    OnnxModelBuilder::IntAttr(n.Node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}, "bn"), "is_test", 0);
    cases.push_back({"is_test 0", n, "is_test = 0"});
  }
  {  // A broadcast axis on a non-constant B.
    OnnxModelBuilder a(6);
    a.Input("x", onnx::TensorProto::FLOAT, {1, 2, 2}).Input("z", onnx::TensorProto::FLOAT, {2});
    a.Output("y", onnx::TensorProto::FLOAT, {1, 2, 2});
    auto* add = a.Node("Add", {"x", "z"}, {"y"}, "add");
    OnnxModelBuilder::IntAttr(add, "broadcast", 1);
    OnnxModelBuilder::IntAttr(add, "axis", 1);
    cases.push_back({"axis of a non-constant", a, "non-constant B"});
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto graph = ImportOnnxBytes(c.model.Bytes(), Registry());
    ASSERT_FALSE(graph.ok());
    EXPECT_EQ(graph.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(graph.status().message().find(c.mention), std::string::npos) << graph.status().message();
  }
}

TEST(OpVersionsOnnxTest, AnOpsetNoEntryCoversIsRefusedNamingOpOpsetAndVersions) {
  struct Case {
    int opset;
    const char* op;
    std::vector<const char*> mentions;
  };
  for (const Case& c : std::vector<Case>{
           {9, "Range", {"Range at opset 9", "opsets 11+", "'n0'"}},
           {4, "Reshape", {"Reshape at opset 4", "opsets 5+"}},
           {9, "Resize", {"Resize at opset 9", "opsets 10, 11-12, 13+"}},
           {8, "Where", {"Where at opset 8", "opsets 9+"}}}) {
    SCOPED_TRACE(std::string(c.op) + " at opset " + std::to_string(c.opset));
    auto graph = ImportOnnxBytes(OneOp(c.opset, c.op).Bytes(), Registry());
    ASSERT_FALSE(graph.ok());
    EXPECT_EQ(graph.status().code(), StatusCode::kUnimplemented);
    for (const char* m : c.mentions) {
      EXPECT_NE(graph.status().message().find(m), std::string::npos)
          << "'" << m << "' not in: " << graph.status().message();
    }
  }
}

TEST(OpVersionsOnnxTest, AnExecutableNamingAnUncoveredVersionIsRefusedAtLoad) {
  auto graph = ImportOnnxBytes(OneOp(13, "Softmax").Bytes(), Registry());
  ASSERT_TRUE(graph.ok());
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok());
  def->kernels[0].op = "Resize";
  def->kernels[0].version = 9;
  const Status s = vm::VerifyExecutable(*def, Registry());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("'Resize' version 9"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("10, 11-12, 13+"), std::string::npos) << s.message();
}

}  // namespace op_versions_onnx_test
}  // namespace remex::compiler
