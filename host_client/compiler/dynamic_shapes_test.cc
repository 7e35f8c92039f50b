// Symbolic shapes and bounds, the data-dependence rule of shape functions (what the
// VM copies device-to-host), and If/Loop control flow, compiled from ONNX models
// built in memory and run on the CPU VM.
#include <gtest/gtest.h>

#include <cstring>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/shape_inference.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace dynamic_shapes_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;

using Machine = remex::testing::CpuMachine;

std::vector<float> Floats(const vm::TensorPtr& t) {
  const float* p = static_cast<const float*>(t->data());
  return std::vector<float>(p, p + *NumElements(t->shape));
}

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, CompileOptions options = {},
                                    CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph g, ImportOnnxBytes(b.Bytes(), Registry()));
  return CompileGraph(std::move(g), Registry(), options, stats);
}

// x [N, 3, H, W] -> Conv 3x3 stride 2 pad 1 -> y [N, 4, H', W'].
OnnxModelBuilder StridedConv() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 3, -1, -1}).Output("y", onnx::TensorProto::FLOAT, {-1, 4, -1, -1});
  b.FloatInit("w", {4, 3, 3, 3}, std::vector<float>(108, 0.5f));
  auto* conv = b.Node("Conv", {"x", "w"}, {"y"});
  OnnxModelBuilder::IntsAttr(conv, "strides", {2, 2});
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  return b;
}

TEST(SymbolicShapeTest, DimParamsBecomeSymbolsThroughTheGraph) {
  OnnxModelBuilder b = StridedConv();
  auto g = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::map<std::string, DimBounds> bounds = {{"d0", {1, 8}}, {"d2", {32, 1024}}, {"d3", {32, 640}}};
  ASSERT_TRUE(InferShapes(*g, Registry(), true, bounds).ok());
  const Value& y = g->values[g->outputs[0]];
  ASSERT_TRUE(y.rank_known);
  EXPECT_EQ(y.shape, (Shape{-1, 4, -1, -1}));
  EXPECT_EQ(SymbolicShapeString(y), "[d0, 4, d2/2, d3/2]");
  ASSERT_EQ(y.bounds.size(), 4u);
  EXPECT_EQ(y.bounds[0].min, 1);
  EXPECT_EQ(y.bounds[0].max, 8);
  EXPECT_EQ(y.bounds[2].min, 16);  // floor((32 + 2 - 3) / 2) + 1
  EXPECT_EQ(y.bounds[2].max, 512);
  EXPECT_EQ(y.bounds[3].max, 320);
}

TEST(SymbolicShapeTest, ShapeChainsStayKnownThroughReshape) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the second dim is 3*H*W.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 3, -1, -1}).Output("y", onnx::TensorProto::FLOAT, {-1, -1});
  b.Int64Init("starts", {1}, {0}).Int64Init("ends", {1}, {1}).Int64Init("minus_one", {1}, {-1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Slice", {"s", "starts", "ends"}, {"n"});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"n", "minus_one"}, {"shape"}), "axis", 0);
  b.Node("Reshape", {"x", "shape"}, {"y"});
  auto g = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(InferShapes(*g, Registry(), true).ok());
  const Value& y = g->values[g->outputs[0]];
  EXPECT_EQ(SymbolicShapeString(y), "[d0, ?]");
  // The shape tensor's values are known per sample, so Reshape's output rank is too.
  EXPECT_EQ(y.samples.size(), 3u);
}

TEST(SymbolicShapeTest, OneExecutableServesEveryShapeAndChecksBounds) {
  CompileOptions options;
  options.bounds = {{"d2", {8, 64}}};
  auto def = Compile(StridedConv(), options);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ(def->symbols.size(), 3u);
  EXPECT_EQ(def->functions[0].outputs[0].dims[2], "d2/2");
  Machine m(*def);
  for (Shape s : {Shape{1, 3, 8, 8}, Shape{2, 3, 17, 5}, Shape{1, 3, 64, 33}}) {
    auto out = m.Run({m.Tensor<float>(DType::kFloat32, s, std::vector<float>(*NumElements(s), 1.0f))});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0]->shape, (Shape{s[0], 4, (s[2] - 1) / 2 + 1, (s[3] - 1) / 2 + 1}));
  }
  auto too_big = m.Run({m.Tensor<float>(DType::kFloat32, {1, 3, 65, 8}, std::vector<float>{})});
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("outside its bounds [8, 64]"), std::string::npos)
      << too_big.status().ToString();
}

TEST(SymbolicShapeTest, ASymbolAdmitsZeroUnlessItsBoundSaysOtherwise) {
  // A KV cache's append: present = Concat(past, step) along the sequence axis. A decoder's
  // first step has an empty cache (past of length 0), which ONNX Runtime accepts.
  OnnxModelBuilder b(13);
  b.Input("past", onnx::TensorProto::FLOAT, {1, 2, -1, 4})
      .Input("step", onnx::TensorProto::FLOAT, {1, 2, 1, 4})
      .Output("present", onnx::TensorProto::FLOAT, {1, 2, -1, 4});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"past", "step"}, {"present"}), "axis", 2);
  auto def = Compile(b);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ(def->symbols.size(), 1u);
  EXPECT_EQ(def->symbols[0].min, 0);
  EXPECT_EQ(def->symbols[0].max, -1);
  Machine m(*def);
  std::vector<float> step(8);
  for (size_t i = 0; i < step.size(); ++i) step[i] = static_cast<float>(i);
  auto first = m.Run({m.Tensor<float>(DType::kFloat32, {1, 2, 0, 4}, std::vector<float>{}),
                      m.Tensor<float>(DType::kFloat32, {1, 2, 1, 4}, step)});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0]->shape, (Shape{1, 2, 1, 4}));
  EXPECT_EQ(Floats((*first)[0]), step);
  // The cache fed back grows by one step.
  auto second = m.Run({(*first)[0], m.Tensor<float>(DType::kFloat32, {1, 2, 1, 4}, step)});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0]->shape, (Shape{1, 2, 2, 4}));

  // A lower bound given with --bound is kept.
  CompileOptions options;
  options.bounds = {{def->symbols[0].name, {1, -1}}};
  auto bounded = Compile(b, options);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  Machine mb(*bounded);
  auto refused = mb.Run({mb.Tensor<float>(DType::kFloat32, {1, 2, 0, 4}, std::vector<float>{}),
                         mb.Tensor<float>(DType::kFloat32, {1, 2, 1, 4}, step)});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is 0, outside its bounds [1, inf]"), std::string::npos)
      << refused.status().ToString();
}

TEST(SymbolicShapeTest, InputsSharingASymbolMustAgree) {
  OnnxModelBuilder b(13);
  b.Input("a", onnx::TensorProto::FLOAT, {-1}).Output("c", onnx::TensorProto::FLOAT, {-1});
  // Both inputs name their dim "d0".
  b.Input("b", onnx::TensorProto::FLOAT, {-1});
  b.Node("Add", {"a", "b"}, {"c"});
  auto def = Compile(b);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ(def->symbols.size(), 1u);
  Machine m(*def);
  auto ok = m.Run({m.Tensor<float>(DType::kFloat32, {3}, std::vector<float>{1, 2, 3}),
                   m.Tensor<float>(DType::kFloat32, {3}, std::vector<float>{1, 1, 1})});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(Floats((*ok)[0]), (std::vector<float>{2, 3, 4}));
  auto bad = m.vm->SetInputs(0, {m.Tensor<float>(DType::kFloat32, {3}, std::vector<float>{}),
                                 m.Tensor<float>(DType::kFloat32, {4}, std::vector<float>{})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("symbol d0 is 3"), std::string::npos) << bad.ToString();
}

TEST(DataDependenceTest, ReshapeFedByADeviceTensorCopiesOnlyTheShape) {
  // The shape comes from the device (a graph input): the VM copies its 16 bytes to
  // the host for the shape function, and never the 96 bytes of data.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4, 6}).Input("s", onnx::TensorProto::INT64, {2});
  b.Output("y", onnx::TensorProto::FLOAT, {-1, -1});
  b.Node("Reshape", {"x", "s"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.copies_to_host, 1);
  Machine m(*def);
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto out = m.Run({m.Tensor<float>(DType::kFloat32, {4, 6}, x), m.Tensor<int64_t>(DType::kInt64, {2}, {3, -1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0]->shape, (Shape{3, 8}));
  EXPECT_EQ(Floats((*out)[0]), x);
  const vm::CopyStats& c = m.vm->last_invoke_copies();
  EXPECT_EQ(c.device_to_host_count, 1u);
  EXPECT_EQ(c.device_to_host_bytes, 16u);
  EXPECT_EQ(c.host_to_device_count, 0u);
}

TEST(DataDependenceTest, ShapeArithmeticRunsOnTheHostWithoutCopies) {
  // Shape -> Slice -> Concat -> Reshape: the chain runs on the host, fed by the
  // device tensor's shape alone, so an inference copies nothing.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 3, -1}).Output("y", onnx::TensorProto::FLOAT, {-1, -1});
  b.Int64Init("starts", {1}, {0}).Int64Init("ends", {1}, {1}).Int64Init("minus_one", {1}, {-1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Slice", {"s", "starts", "ends"}, {"n"});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"n", "minus_one"}, {"shape"}), "axis", 0);
  b.Node("Reshape", {"x", "shape"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.host_kernels, 3);
  EXPECT_EQ(stats.copies_to_host, 0);
  Machine m(*def);
  for (Shape s : {Shape{2, 3, 5}, Shape{7, 3, 1}}) {
    auto out = m.Run({m.Tensor<float>(DType::kFloat32, s, std::vector<float>(*NumElements(s), 2.0f))});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0]->shape, (Shape{s[0], 3 * s[2]}));
    EXPECT_EQ(m.vm->last_invoke_copies().device_to_host_count, 0u);
    EXPECT_EQ(m.vm->last_invoke_copies().host_to_device_count, 0u);
  }
  // Without host placement the same model copies the shape tensor every call.
  CompileOptions no_host;
  no_host.place_on_host = false;
  auto def2 = Compile(b, no_host);
  ASSERT_TRUE(def2.ok());
  Machine m2(*def2);
  auto out = m2.Run({m2.Tensor<float>(DType::kFloat32, {2, 3, 5}, std::vector<float>(30, 1.0f))});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(m2.vm->last_invoke_copies().device_to_host_count, 1u);
  EXPECT_EQ(m2.vm->last_invoke_copies().device_to_host_bytes, 16u);
}

// Control flow. Subgraphs are built with the ONNX protobuf API.
void GraphAttr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

void Info(onnx::ValueInfoProto* v, const std::string& name, int type, std::vector<int64_t> dims, bool ranked = true) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  if (!ranked) return;
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) shape->add_dim()->set_dim_param("n");
    else shape->add_dim()->set_dim_value(d);
  }
}

onnx::NodeProto* AddNode(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

// then: y = x + 1 (shape [n]); else: y = Concat(x, x) (shape [2n]), or, nested, an If
// on c2 choosing x * x or x.
OnnxModelBuilder IfModel(bool nested) {
  OnnxModelBuilder b(13);
  b.Input("c", onnx::TensorProto::BOOL, {}).Input("x", onnx::TensorProto::FLOAT, {-1});
  if (nested) b.Input("c2", onnx::TensorProto::BOOL, {});
  b.Output("y", onnx::TensorProto::FLOAT, {-1});
  b.FloatInit("one", {1}, {1.0f});
  onnx::GraphProto then_g, else_g;
  AddNode(then_g, "Add", {"x", "one"}, {"t"});
  Info(then_g.add_output(), "t", onnx::TensorProto::FLOAT, {-1});
  if (nested) {
    onnx::GraphProto in_then, in_else;
    AddNode(in_then, "Mul", {"x", "x"}, {"sq"});
    Info(in_then.add_output(), "sq", onnx::TensorProto::FLOAT, {-1});
    AddNode(in_else, "Identity", {"x"}, {"id"});
    Info(in_else.add_output(), "id", onnx::TensorProto::FLOAT, {-1});
    auto* inner = AddNode(else_g, "If", {"c2"}, {"e"});
    GraphAttr(inner, "then_branch", in_then);
    GraphAttr(inner, "else_branch", in_else);
  } else {
    OnnxModelBuilder::IntAttr(AddNode(else_g, "Concat", {"x", "x"}, {"e"}), "axis", 0);
  }
  Info(else_g.add_output(), "e", onnx::TensorProto::FLOAT, {-1});
  auto* n = b.Node("If", {"c"}, {"y"});
  GraphAttr(n, "then_branch", then_g);
  GraphAttr(n, "else_branch", else_g);
  return b;
}

TEST(ControlFlowTest, IfRunsEitherBranchWithItsOwnOutputShape) {
  auto def = Compile(IfModel(false));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  std::vector<float> x = {1, 2, 3};
  auto t = m.Run({m.Tensor<uint8_t>(DType::kBool, {}, {1}), m.Tensor<float>(DType::kFloat32, {3}, x)});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(Floats((*t)[0]), (std::vector<float>{2, 3, 4}));
  auto e = m.Run({m.Tensor<uint8_t>(DType::kBool, {}, {0}), m.Tensor<float>(DType::kFloat32, {3}, x)});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)[0]->shape, (Shape{6}));
  EXPECT_EQ(Floats((*e)[0]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  // The condition lives on the device: reading it is one counted 1-byte copy.
  EXPECT_EQ(m.vm->last_invoke_copies().device_to_host_count, 1u);
  EXPECT_EQ(m.vm->last_invoke_copies().device_to_host_bytes, 1u);
}

TEST(ControlFlowTest, NestedIfReadsOuterScopeValues) {
  auto def = Compile(IfModel(true));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  std::vector<float> x = {1, 2, 3};
  auto run = [&](bool c, bool c2) {
    auto out = m.Run({m.Tensor<uint8_t>(DType::kBool, {}, {c}), m.Tensor<float>(DType::kFloat32, {3}, x),
                      m.Tensor<uint8_t>(DType::kBool, {}, {c2})});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? Floats((*out)[0]) : std::vector<float>{};
  };
  EXPECT_EQ(run(true, true), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(run(false, true), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(run(false, false), (std::vector<float>{1, 2, 3}));
}

// Loop(M, cond, v) with body (i, c, v) -> (c_out, v + x, scan = v + x), where c_out is
// `i < limit` when `stop_early`, else c. With `grow`, v = Concat(v, x) instead.
OnnxModelBuilder LoopModel(bool stop_early, bool grow) {
  OnnxModelBuilder b(13);
  b.Input("m", onnx::TensorProto::INT64, {}).Input("x", onnx::TensorProto::FLOAT, {2});
  b.Output("v_final", onnx::TensorProto::FLOAT, {-1});
  if (!grow) b.Output("scan", onnx::TensorProto::FLOAT, {-1, 2});
  b.Int64Init("limit", {}, {2});
  auto* t = b.Node("Constant", {}, {"true"});
  auto* a = t->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->add_int32_data(1);
  onnx::GraphProto body;
  Info(body.add_input(), "i", onnx::TensorProto::INT64, {});
  Info(body.add_input(), "c", onnx::TensorProto::BOOL, {});
  Info(body.add_input(), "v", onnx::TensorProto::FLOAT, {-1});
  if (stop_early) AddNode(body, "Less", {"i", "limit"}, {"c_out"});
  else AddNode(body, "Identity", {"c"}, {"c_out"});
  if (grow) OnnxModelBuilder::IntAttr(AddNode(body, "Concat", {"v", "x"}, {"v_out"}), "axis", 0);
  else AddNode(body, "Add", {"v", "x"}, {"v_out"});
  Info(body.add_output(), "c_out", onnx::TensorProto::BOOL, {});
  Info(body.add_output(), "v_out", onnx::TensorProto::FLOAT, {-1});
  if (!grow) {
    AddNode(body, "Identity", {"v_out"}, {"s"});
    Info(body.add_output(), "s", onnx::TensorProto::FLOAT, {2});
  }
  auto* loop = b.Node("Loop", {"m", "true", "x"}, grow ? std::vector<std::string>{"v_final"}
                                                       : std::vector<std::string>{"v_final", "scan"});
  GraphAttr(loop, "body", body);
  return b;
}

TEST(ControlFlowTest, LoopCarriesValuesAndStacksScanOutputs) {
  auto def = Compile(LoopModel(false, false));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  for (int64_t trips : {0, 1, 5}) {
    auto out = m.Run({m.Tensor<int64_t>(DType::kInt64, {}, {trips}),
                      m.Tensor<float>(DType::kFloat32, {2}, {1, 10})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    float k = static_cast<float>(trips + 1);
    EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{k, 10 * k})) << trips;
    EXPECT_EQ((*out)[1]->shape, (Shape{trips, 2}));
    std::vector<float> scan;
    for (int64_t i = 0; i < trips; ++i) {
      scan.push_back(static_cast<float>(i + 2));
      scan.push_back(static_cast<float>(10 * (i + 2)));
    }
    EXPECT_EQ(Floats((*out)[1]), scan);
  }
}

TEST(ControlFlowTest, LoopStopsOnItsConditionAndCarriesGrowingShapes) {
  auto def = Compile(LoopModel(true, true));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  // c_out = i < 2: iterations 0, 1 and 2 run, then the condition is false.
  auto out = m.Run({m.Tensor<int64_t>(DType::kInt64, {}, {10}), m.Tensor<float>(DType::kFloat32, {2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0]->shape, (Shape{8}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  // The trip count bounds it first.
  auto two = m.Run({m.Tensor<int64_t>(DType::kInt64, {}, {1}), m.Tensor<float>(DType::kFloat32, {2}, {1, 2})});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ((*two)[0]->shape, (Shape{4}));
}

// Scan-16, lowered to Loop by the importer: state s [2]; scan inputs x [T, 2] (axis 0,
// forward) and w [2, T] (axis 1, reversed); body: s' = s + x_t * w_t. Scan outputs:
// s' stacked along axis 1 ([2, T]), and x_t stacked in reverse order ([T, 2]).
OnnxModelBuilder ScanModel(int64_t trips, int64_t num_scan_inputs = 2) {
  OnnxModelBuilder b(16);
  b.Input("s0", onnx::TensorProto::FLOAT, {2})
      .Input("x", onnx::TensorProto::FLOAT, {trips, 2})
      .Input("w", onnx::TensorProto::FLOAT, {2, trips});
  b.Output("s_final", onnx::TensorProto::FLOAT, {2})
      .Output("s_all", onnx::TensorProto::FLOAT, {2, trips})
      .Output("x_reversed", onnx::TensorProto::FLOAT, {trips, 2});
  onnx::GraphProto body;
  Info(body.add_input(), "s", onnx::TensorProto::FLOAT, {2});
  Info(body.add_input(), "x_t", onnx::TensorProto::FLOAT, {2});
  Info(body.add_input(), "w_t", onnx::TensorProto::FLOAT, {2});
  AddNode(body, "Mul", {"x_t", "w_t"}, {"p"});
  AddNode(body, "Add", {"s", "p"}, {"s_out"});
  AddNode(body, "Identity", {"s_out"}, {"s_scan"});
  AddNode(body, "Identity", {"x_t"}, {"x_scan"});
  Info(body.add_output(), "s_out", onnx::TensorProto::FLOAT, {2});
  Info(body.add_output(), "s_scan", onnx::TensorProto::FLOAT, {2});
  Info(body.add_output(), "x_scan", onnx::TensorProto::FLOAT, {2});
  auto* scan = b.Node("Scan", {"s0", "x", "w"}, {"s_final", "s_all", "x_reversed"});
  GraphAttr(scan, "body", body);
  OnnxModelBuilder::IntAttr(scan, "num_scan_inputs", num_scan_inputs);
  OnnxModelBuilder::IntsAttr(scan, "scan_input_axes", {0, -1});
  OnnxModelBuilder::IntsAttr(scan, "scan_input_directions", {0, 1});
  OnnxModelBuilder::IntsAttr(scan, "scan_output_axes", {1, 0});
  OnnxModelBuilder::IntsAttr(scan, "scan_output_directions", {0, 1});
  return b;
}

TEST(ControlFlowTest, ScanSlicesAlongAxesInEitherDirectionAndStacksItsOutputs) {
  constexpr int64_t kTrips = 4;
  auto def = Compile(ScanModel(kTrips));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  std::vector<float> s0 = {1, -1}, x(kTrips * 2), w(2 * kTrips);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 1;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 3) + 1;
  auto out = m.Run({m.Tensor<float>(DType::kFloat32, {2}, s0), m.Tensor<float>(DType::kFloat32, {kTrips, 2}, x),
                    m.Tensor<float>(DType::kFloat32, {2, kTrips}, w)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  // The reference: the Scan loop written out.
  std::vector<float> s = s0, s_all(2 * kTrips), x_reversed(kTrips * 2);
  for (int64_t t = 0; t < kTrips; ++t) {
    const int64_t wt = kTrips - 1 - t;  // w is read in reverse
    for (int64_t c = 0; c < 2; ++c) {
      s[c] += x[t * 2 + c] * w[c * kTrips + wt];
      s_all[c * kTrips + t] = s[c];
      x_reversed[(kTrips - 1 - t) * 2 + c] = x[t * 2 + c];
    }
  }
  EXPECT_EQ(Floats((*out)[0]), s);
  EXPECT_EQ((*out)[1]->shape, (Shape{2, kTrips}));
  EXPECT_EQ(Floats((*out)[1]), s_all);
  EXPECT_EQ((*out)[2]->shape, (Shape{kTrips, 2}));
  EXPECT_EQ(Floats((*out)[2]), x_reversed);
}

TEST(ControlFlowTest, ScanWhoseAttributesDoNotFitIsRefused) {
  OnnxModelBuilder b = ScanModel(3, 5);
  auto g = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("num_scan_inputs 5"), std::string::npos) << g.status().ToString();
}

TEST(ControlFlowTest, VerifierRejectsAJumpOutOfTheFunction) {
  auto def = Compile(IfModel(false));
  ASSERT_TRUE(def.ok());
  for (auto& inst : def->functions[0].code) {
    if (inst.op == vm::Opcode::kIf) inst.scalars[1] = 100000;
  }
  auto exe = vm::Executable::FromDef(*def, Registry());
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("jump target"), std::string::npos) << exe.status().ToString();
}

}  // namespace dynamic_shapes_test
}  // namespace remex::compiler
