#include "host_client/compiler/compiler.h"

#include <gtest/gtest.h>

#include <cstring>

#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace compiler_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32;

int CountOp(const vm::ExecutableDef& def, vm::Opcode op) {
  int n = 0;
  for (const auto& inst : def.functions[0].code) n += inst.op == op;
  return n;
}

// x -> Shape -> Slice[0:1] -> Concat with [-1] -> Reshape(x): the flatten chain of
// PaddlePaddle exports (as in the PP-OCR classifier).
OnnxModelBuilder FlattenChain(std::vector<int64_t> dims) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, dims).Output("y", onnx::TensorProto::FLOAT, {-1, -1});
  b.Int64Init("starts", {1}, {0}).Int64Init("ends", {1}, {1}).Int64Init("minus_one", {1}, {-1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Slice", {"s", "starts", "ends"}, {"n"});
  auto* concat = b.Node("Concat", {"n", "minus_one"}, {"shape"});
  OnnxModelBuilder::IntAttr(concat, "axis", 0);
  b.Node("Reshape", {"x", "shape"}, {"y"});
  return b;
}

TEST(CompilerTest, StaticShapesFoldTheShapeChain) {
  auto graph = ImportOnnxBytes(FlattenChain({2, 3, 4}).Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CompileStats stats;
  auto def = CompileGraph(std::move(graph).value(), Registry(), {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.nodes_folded, 3);
  EXPECT_EQ(stats.kernels, 1);  // only the Reshape runs
  EXPECT_EQ(CountOp(*def, vm::Opcode::kInvokeShapeFunc), 0);
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  Shape out_shape;
  EXPECT_EQ(RunFloat32(*def, {2, 3, 4}, x, &out_shape), x);
  EXPECT_EQ(out_shape, (Shape{2, 12}));
}

TEST(CompilerTest, DynamicShapesUseRuntimeShapeFunctions) {
  auto graph = ImportOnnxBytes(FlattenChain({-1, 3, -1}).Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CompileStats stats;
  auto def = CompileGraph(std::move(graph).value(), Registry(), {}, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.nodes_folded, 0);
  EXPECT_GT(CountOp(*def, vm::Opcode::kInvokeShapeFunc), 0);
  EXPECT_EQ(def->functions[0].inputs[0].shape, (Shape{-1, 3, -1}));
  for (Shape shape : {Shape{1, 3, 5}, Shape{4, 3, 2}}) {
    std::vector<float> x(*NumElements(shape));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
    Shape out_shape;
    EXPECT_EQ(RunFloat32(*def, shape, x, &out_shape), x);
    EXPECT_EQ(out_shape, (Shape{shape[0], shape[1] * shape[2]}));
  }
}

TEST(CompilerTest, ShapeOverrideMakesTheGraphStatic) {
  CompileOptions options;
  options.input_shapes["x"] = {2, 3, 7};
  auto graph = ImportOnnxBytes(FlattenChain({-1, 3, -1}).Bytes(), Registry(), options.input_shapes);
  ASSERT_TRUE(graph.ok());
  auto def = CompileGraph(std::move(graph).value(), Registry(), options);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(CountOp(*def, vm::Opcode::kInvokeShapeFunc), 0);
  EXPECT_EQ(def->functions[0].outputs[0].shape, (Shape{2, 21}));

  auto bad = ImportOnnxBytes(FlattenChain({-1, 3, -1}).Bytes(), Registry(), {{"x", {2, 4, 7}}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto unknown = ImportOnnxBytes(FlattenChain({-1, 3, -1}).Bytes(), Registry(), {{"z", {1}}});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
}

TEST(CompilerTest, UnsupportedOpNamesOpAndNode) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("NotAnOnnxOp", {"r"}, {"y"}, "my_node");
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(graph.status().message().find("'NotAnOnnxOp'"), std::string::npos) << graph.status().message();
  EXPECT_NE(graph.status().message().find("'my_node'"), std::string::npos) << graph.status().message();
}

// ONNX requires nodes in topological order, but some exported models are not (a
// graph-input Cast appended last, as in ISNet's float16 export): the importer sorts them,
// keeping the order of nodes that are already in place; a name no node produces is
// still an error naming it.
TEST(CompilerTest, NodesOutOfTopologicalOrderAreSorted) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", onnx::TensorProto::FLOAT, {4});
  b.Node("Relu", {"n"}, {"r"}, "relu");
  b.Node("Add", {"r", "x"}, {"y"}, "add");
  b.Node("Neg", {"x"}, {"n"}, "neg");  // Defines what the first node reads.
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  ASSERT_EQ(graph->nodes.size(), 3u);
  EXPECT_EQ(graph->nodes[0].name, "neg");
  EXPECT_EQ(graph->nodes[1].name, "relu");
  EXPECT_EQ(graph->nodes[2].name, "add");
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  // y = relu(-x) + x.
  EXPECT_EQ(RunFloat32(*def, {4}, {-2.0f, -0.5f, 1.0f, 3.0f}), (std::vector<float>{0.0f, 0.0f, 1.0f, 3.0f}));

  OnnxModelBuilder missing(13);
  missing.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", onnx::TensorProto::FLOAT, {4});
  missing.Node("Add", {"nowhere", "x"}, {"y"}, "add");
  auto bad = ImportOnnxBytes(missing.Bytes(), Registry());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'nowhere'"), std::string::npos) << bad.status().ToString();
}

// Upsample-7 (scales as an attribute) and Upsample-9 (scales as an input) import as
// Resize-10: nearest copies each value into its scale x scale block.
TEST(CompilerTest, UpsampleImportsAsResize10) {
  for (int opset : {7, 9}) {
    OnnxModelBuilder b(opset);
    b.Input("x", onnx::TensorProto::FLOAT, {1, 1, 2, 2}).Output("y", onnx::TensorProto::FLOAT, {1, 1, 4, 6});
    onnx::NodeProto* up = nullptr;
    if (opset == 7) {
      up = b.Node("Upsample", {"x"}, {"y"});
      auto* a = up->add_attribute();
      a->set_name("scales");
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float f : {1.0f, 1.0f, 2.0f, 3.0f}) a->add_floats(f);
    } else {
      b.FloatInit("scales", {4}, {1.0f, 1.0f, 2.0f, 3.0f});
      up = b.Node("Upsample", {"x", "scales"}, {"y"});
    }
    auto* mode = up->add_attribute();
    mode->set_name("mode");
    mode->set_type(onnx::AttributeProto::STRING);
    mode->set_s("nearest");
    auto graph = ImportOnnxBytes(b.Bytes(), Registry());
    ASSERT_TRUE(graph.ok()) << opset << ": " << graph.status().ToString();
    ASSERT_EQ(graph->nodes.size(), 1u);
    EXPECT_EQ(graph->nodes[0].op, "Resize");
    EXPECT_EQ(graph->nodes[0].version, 10);
    auto def = CompileGraph(std::move(graph).value(), Registry(), {});
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    Shape out;
    const std::vector<float> y = RunFloat32(*def, {1, 1, 2, 2}, {1, 2, 3, 4}, &out);
    EXPECT_EQ(out, (Shape{1, 1, 4, 6}));
    EXPECT_EQ(y, (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
  }
}

// Opsets 1-6: PRelu's slope of C values runs along the channel axis (not numpy's last
// axis), Concat-1 without axis concatenates along axis 1, Pad-1 takes `paddings`.
TEST(CompilerTest, LegacyPReluSlopeAndConcatAxis) {
  OnnxModelBuilder b(6);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 1, 3}).Output("y", onnx::TensorProto::FLOAT, {1, 4, 1, 3});
  b.FloatInit("slope", {2}, {0.5f, 2.0f});
  b.Node("PRelu", {"x", "slope"}, {"p"});
  b.Node("Concat", {"p", "x"}, {"y"});
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Shape out;
  const std::vector<float> y = RunFloat32(*def, {1, 2, 1, 3}, {-2, 1, -4, -2, 3, -6}, &out);
  EXPECT_EQ(out, (Shape{1, 4, 1, 3}));
  // Channel 0 negatives halved, channel 1 negatives doubled; then x itself.
  EXPECT_EQ(y, (std::vector<float>{-1, 1, -2, -4, 3, -12, -2, 1, -4, -2, 3, -6}));

  // Pad-1's `paddings` is Pad-2's `pads`.
  OnnxModelBuilder pad(1);
  pad.Input("x", onnx::TensorProto::FLOAT, {1, 2}).Output("y", onnx::TensorProto::FLOAT, {1, 5});
  auto* node = pad.Node("Pad", {"x"}, {"y"});
  auto* paddings = node->add_attribute();
  paddings->set_name("paddings");
  paddings->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 0, 2}) paddings->add_ints(p);
  auto padded = ImportOnnxBytes(pad.Bytes(), Registry());
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  auto pad_def = CompileGraph(std::move(padded).value(), Registry(), {});
  ASSERT_TRUE(pad_def.ok()) << pad_def.status().ToString();
  EXPECT_EQ(RunFloat32(*pad_def, {1, 2}, {3, 4}, &out), (std::vector<float>{0, 3, 4, 0, 0}));
  EXPECT_EQ(out, (Shape{1, 5}));
}

TEST(CompilerTest, NotAnOnnxModelIsInvalidArgument) {
  std::vector<std::byte> junk(100, std::byte{0xff});
  EXPECT_EQ(ImportOnnxBytes(junk, Registry()).status().code(), StatusCode::kInvalidArgument);
}

TEST(CompilerTest, OldClipAttributesBecomeInputs) {
  OnnxModelBuilder b(9);
  b.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", onnx::TensorProto::FLOAT, {4});
  auto* clip = b.Node("Clip", {"x"}, {"y"});
  OnnxModelBuilder::FloatAttr(clip, "min", 0.0f);
  OnnxModelBuilder::FloatAttr(clip, "max", 6.0f);
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  ASSERT_EQ(graph->nodes[0].inputs.size(), 3u);
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(RunFloat32(*def, {4}, {-1.0f, 2.0f, 7.0f, 6.5f}), (std::vector<float>{0.0f, 2.0f, 6.0f, 6.0f}));
}

TEST(CompilerTest, OutputThatIsAnInputIsCopied) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {3}).Output("x", onnx::TensorProto::FLOAT, {3});
  b.Output("y", onnx::TensorProto::FLOAT, {3});
  b.Node("Relu", {"x"}, {"y"});
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok());
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountOp(*def, vm::Opcode::kAllocOutput), 2);
  EXPECT_EQ(RunFloat32(*def, {3}, {-1.0f, 0.5f, 2.0f}), (std::vector<float>{-1.0f, 0.5f, 2.0f}));
}

// A decoder step's `present = Concat(past, new)`, past a graph input of a length known
// at run time only and present a graph output, becomes ConcatAppend (the VM grows the
// cache in place, vm/opcodes.def); a Concat of anything else stays a kernel.
TEST(CompilerTest, AConcatOfAGrowingInputIntoAnOutputIsAnAppend) {
  OnnxModelBuilder b(13);
  b.Input("past", onnx::TensorProto::FLOAT, {1, 2, -1, 2})
      .Input("new", onnx::TensorProto::FLOAT, {1, 2, 1, 2});
  b.Output("present", onnx::TensorProto::FLOAT, {1, 2, -1, 2})
      .Output("pair", onnx::TensorProto::FLOAT, {1, 2, 2, 2});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"past", "new"}, {"present"}), "axis", -2);
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"new", "new"}, {"pair"}), "axis", 2);
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(CountOp(*def, vm::Opcode::kConcatAppend), 1);
  EXPECT_EQ(testing::CountKernels(*def, "Concat"), 1);
  const std::vector<float> past = {0, 1, 2, 3, 10, 11, 12, 13};  // [1, 2, 2, 2]
  const std::vector<float> next = {4, 5, 14, 15};                // [1, 2, 1, 2]
  std::vector<Shape> shapes;
  auto out = testing::RunFloat32Outputs(*def, {{1, 2, 2, 2}, {1, 2, 1, 2}}, {past, next}, &shapes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(shapes[0], (Shape{1, 2, 3, 2}));
  EXPECT_EQ(out[0], (std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(out[1], (std::vector<float>{4, 5, 4, 5, 14, 15, 14, 15}));
}

TEST(CompilerTest, ExecutableSurvivesSerialization) {
  auto def = CompileOnnxFile("/nonexistent.onnx", Registry(), {});
  EXPECT_EQ(def.status().code(), StatusCode::kNotFound);
  auto graph = ImportOnnxBytes(FlattenChain({-1, 2}).Bytes(), Registry());
  auto compiled = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(compiled.ok());
  auto bytes = vm::SerializeExecutable(*compiled);
  ASSERT_TRUE(bytes.ok());
  auto parsed = vm::ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->functions[0].code.size(), compiled->functions[0].code.size());
  EXPECT_EQ(RunFloat32(*parsed, {3, 2}, {1, 2, 3, 4, 5, 6}), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

}  // namespace compiler_test
}  // namespace remex::compiler
