// ONNX sequences and optionals through the compiler: kinds given at import, the ops as
// VM instructions, memory planning around them, and the errors for misuse.
#include <gtest/gtest.h>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"

namespace remex::compiler {
namespace sequence_test {

using testing::OnnxModelBuilder;
using testing::Registry;

// s = SequenceConstruct(Relu(a), b); y = SequenceAt(s, -2) + Neg(b);
// n = SequenceLength(s) (opset 15), a and b float32 [2]. Relu(a) is read only through
// the sequence after Neg(b) is made.
OnnxModelBuilder ConstructAtModel() {
  OnnxModelBuilder b(15);
  b.Input("a", onnx::TensorProto::FLOAT, {2}).Input("b", onnx::TensorProto::FLOAT, {2});
  b.Output("y", onnx::TensorProto::FLOAT, {2}).Output("n", onnx::TensorProto::INT64, {});
  b.Int64Init("first", {}, {-2});
  b.Node("Relu", {"a"}, {"r"});
  b.Node("SequenceConstruct", {"r", "b"}, {"s"});
  b.Node("Neg", {"b"}, {"u"});
  b.Node("SequenceAt", {"s", "first"}, {"e"});
  b.Node("Add", {"e", "u"}, {"y"});
  b.Node("SequenceLength", {"s"}, {"n"});
  return b;
}

TEST(SequenceCompileTest, ConstructAtAndLengthRunWithAndWithoutMemoryPlanning) {
  for (bool plan : {false, true}) {
    SCOPED_TRACE(plan ? "planned" : "not planned");
    auto graph = ImportOnnxBytes(ConstructAtModel().Bytes(), Registry());
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    CompileOptions options;
    options.plan_memory = plan;
    options.fuse_elementwise = false;  // keep Neg's output a tensor of its own
    CompileStats stats;
    auto def = CompileGraph(std::move(graph).value(), Registry(), options, &stats);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    testing::CpuMachine m(*def);
    auto out = m.Run({m.Tensor<float>(DType::kFloat32, {2}, {-1, 2}), m.Tensor<float>(DType::kFloat32, {2}, {10, 20})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const float* y = static_cast<const float*>((*out)[0]->data());
    EXPECT_EQ(y[0], -10);  // Relu(a) - b
    EXPECT_EQ(y[1], -18);
    EXPECT_EQ(*static_cast<const int64_t*>((*out)[1]->data()), 2);
    // Relu(a) lives on inside the sequence after its register dies: the plan must not
    // give its memory to Neg(b) (it escapes, like a returned tensor).
    if (plan) {
      EXPECT_EQ(stats.memory.planned, 1);  // Neg's output only
    }
  }
}

TEST(SequenceCompileTest, AKernelReadingASequenceIsRefusedAtImport) {
  OnnxModelBuilder b(15);
  b.Input("a", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  b.Node("SequenceConstruct", {"a"}, {"s"});
  b.Node("Relu", {"s"}, {"y"}, "relu");
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(graph.status().message().find("node 'relu' (Relu, #1): input 0 's' is an ONNX sequence, and Relu takes tensors"),
            std::string::npos)
      << graph.status().ToString();
}

TEST(SequenceCompileTest, SequenceOpsBeforeTheirOpsetAreNamed) {
  OnnxModelBuilder b(10);
  b.Input("a", onnx::TensorProto::FLOAT, {2}).Output("n", onnx::TensorProto::INT64, {});
  b.Node("SequenceConstruct", {"a"}, {"s"});
  b.Node("SequenceLength", {"s"}, {"n"});
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(graph.status().message().find("SequenceConstruct at opset 10 is not supported; Remex implements "
                                          "SequenceConstruct for opsets 11-17"),
            std::string::npos)
      << graph.status().ToString();
}

TEST(SequenceCompileTest, Float16ConversionOfASequenceIsRefusedByName) {
  auto graph = ImportOnnxBytes(ConstructAtModel().Bytes(), Registry());
  ASSERT_TRUE(graph.ok());
  CompileOptions options;
  options.dtype = DType::kFloat16;
  auto def = CompileGraph(std::move(graph).value(), Registry(), options);
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(def.status().message().find("--dtype float16 does not convert sequences and optionals yet"),
            std::string::npos)
      << def.status().ToString();
}

// A graph whose input and output are sequences: the function's signature says so, and
// the VM takes and gives sequences (Identity of a sequence is a move; the outputs are
// copies).
TEST(SequenceCompileTest, SequenceInputsAndOutputsAreInTheSignature) {
  OnnxModelBuilder b(15);
  b.SequenceInput("s", onnx::TensorProto::FLOAT).SequenceOutput("t", onnx::TensorProto::FLOAT);
  b.Node("Identity", {"s"}, {"t"});
  auto graph = ImportOnnxBytes(b.Bytes(), Registry());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto def = CompileGraph(std::move(graph).value(), Registry(), {});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  const vm::FunctionDef& fn = def->functions[0];
  EXPECT_EQ(fn.inputs[0].kind, vm::ValueKind::kSequence);
  EXPECT_FALSE(fn.inputs[0].rank_known);
  EXPECT_EQ(fn.outputs[0].kind, vm::ValueKind::kSequence);
  testing::CpuMachine m(*def);
  vm::TensorPtr x = m.Tensor<float>(DType::kFloat32, {3}, {1, 2, 3});
  vm::TensorPtr y = m.Tensor<float>(DType::kFloat32, {1, 2}, {4, 5});
  ASSERT_TRUE(m.vm->SetInputValues(0, {vm::Value::OfSequence({x, y})}).ok());
  auto got = m.vm->InvokeValues(0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ((*got)[0].elements.size(), 2u);
  EXPECT_EQ((*got)[0].elements[1]->shape, (Shape{1, 2}));
  EXPECT_EQ(static_cast<const float*>((*got)[0].elements[1]->data())[1], 5);
  EXPECT_NE((*got)[0].elements[0]->data(), x->data());
}

// Runs `b` (one float32 input x of `shape` holding 0, 1, 2, ...) on a CPU VM; returns the
// outputs, or the first error.
StatusOr<std::vector<vm::TensorPtr>> RunOnIota(const OnnxModelBuilder& b, const Shape& shape) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef def, CompileGraph(std::move(graph), Registry(), {}));
  static std::vector<std::unique_ptr<testing::CpuMachine>> machines;  // outputs stay valid
  machines.push_back(std::make_unique<testing::CpuMachine>(def));
  testing::CpuMachine& m = *machines.back();
  std::vector<float> x(static_cast<size_t>(*NumElements(shape)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  return m.Run({m.Tensor<float>(DType::kFloat32, shape, x)});
}

std::vector<float> Values(const vm::TensorPtr& t) {
  const float* p = static_cast<const float*>(t->data());
  return std::vector<float>(p, p + *NumElements(t->shape));
}

// SplitToSequence-11 and ConcatFromSequence-11 (lowered to Loops, or to Split for
// constant lengths): pieces as numpy.array_split-like chunks, and back.
TEST(SequenceCompileTest, SplitToSequenceInChunksAndConcatFromSequenceRoundTrip) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {5, 2});
  b.Output("y", onnx::TensorProto::FLOAT, {-1, 2}).Output("n", onnx::TensorProto::INT64, {});
  b.Output("last", onnx::TensorProto::FLOAT, {-1, 2});
  b.Int64Init("two", {}, {2}).Int64Init("minus_one", {}, {-1});
  b.Node("SplitToSequence", {"x", "two"}, {"s"});  // rows [0, 2), [2, 4), [4, 5)
  OnnxModelBuilder::IntAttr(b.Node("ConcatFromSequence", {"s"}, {"y"}), "axis", 0);
  b.Node("SequenceLength", {"s"}, {"n"});
  b.Node("SequenceAt", {"s", "minus_one"}, {"last"});
  auto out = RunOnIota(b, {5, 2});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values((*out)[0]), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ((*out)[0]->shape, (Shape{5, 2}));
  EXPECT_EQ(*static_cast<const int64_t*>((*out)[1]->data()), 3);
  EXPECT_EQ((*out)[2]->shape, (Shape{1, 2}));
  EXPECT_EQ(Values((*out)[2]), (std::vector<float>{8, 9}));
}

TEST(SequenceCompileTest, SplitToSequenceWithoutSplitDropsTheAxisAndNewAxisRestoresIt) {
  for (int opset : {11, 13}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    OnnxModelBuilder b(opset);
    b.Input("x", onnx::TensorProto::FLOAT, {2, 3}).Output("y", onnx::TensorProto::FLOAT, {2, 3});
    b.Output("col", onnx::TensorProto::FLOAT, {2});
    b.Int64Init("one", {}, {1});
    auto* split = b.Node("SplitToSequence", {"x"}, {"s"});
    OnnxModelBuilder::IntAttr(split, "axis", 1);
    OnnxModelBuilder::IntAttr(split, "keepdims", 0);  // three columns of shape [2]
    auto* concat = b.Node("ConcatFromSequence", {"s"}, {"y"});
    OnnxModelBuilder::IntAttr(concat, "axis", -1);
    OnnxModelBuilder::IntAttr(concat, "new_axis", 1);
    b.Node("SequenceAt", {"s", "one"}, {"col"});
    auto out = RunOnIota(b, {2, 3});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0]->shape, (Shape{2, 3}));
    EXPECT_EQ(Values((*out)[0]), (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(Values((*out)[1]), (std::vector<float>{1, 4}));
  }
}

TEST(SequenceCompileTest, SplitToSequenceWithLengthsChecksTheirSum) {
  for (bool fits : {true, false}) {
    OnnxModelBuilder b(13);
    b.Input("x", onnx::TensorProto::FLOAT, {5, 2}).Output("n", onnx::TensorProto::INT64, {});
    b.Int64Init("lengths", {2}, {1, fits ? 4 : 3});
    b.Node("SplitToSequence", {"x", "lengths"}, {"s"}, "split");
    b.Node("SequenceLength", {"s"}, {"n"});
    auto out = RunOnIota(b, {5, 2});
    if (fits) {
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ(*static_cast<const int64_t*>((*out)[0]->data()), 2);
    } else {
      ASSERT_FALSE(out.ok());
      EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(out.status().ToString().find("split/split"), std::string::npos) << out.status().ToString();
    }
  }
}

TEST(SequenceCompileTest, ConcatFromSequenceOfAnEmptySequenceIsAnError) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {0, 2}).Output("y", onnx::TensorProto::FLOAT, {-1, 2});
  b.Node("SplitToSequence", {"x"}, {"s"});  // no rows: an empty sequence
  OnnxModelBuilder::IntAttr(b.Node("ConcatFromSequence", {"s"}, {"y"}, "cat"), "axis", 0);
  auto out = RunOnIota(b, {0, 2});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(out.status().ToString().find("sequence position 0 is outside"), std::string::npos)
      << out.status().ToString();
}

}  // namespace sequence_test
}  // namespace remex::compiler
