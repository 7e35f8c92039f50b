// Common-subexpression elimination (passes/common_subexpressions.h): what is computed
// once (the dynamic quantizer's repeated DynamicQuantizeLinear, repeated Shape chains),
// what is not (other attributes, other inputs, a graph output), and compiled graphs run
// on the CPU VM against the same graphs compiled without the pass.
#include "host_client/compiler/passes/common_subexpressions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/bytecode.h"

namespace remex::compiler {
namespace common_subexpressions_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;
const Shape kX = {3, 16};

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, bool cse, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.eliminate_common_subexpressions = cse;
  options.fuse_elementwise = false;  // the ops stay themselves, to be counted
  options.fuse_epilogues = false;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

std::vector<float> Random(size_t n, uint32_t seed) { return remex::testing::UniformFloats(n, seed, -2, 2); }

// How many times the main function invokes a kernel of `op` (the kernel table shares
// one entry among nodes alike).
int Invocations(const vm::ExecutableDef& def, const std::string& op) {
  int n = 0;
  for (const auto& inst : def.functions[0].code) {
    if (inst.op != vm::Opcode::kInvokeKernel) continue;
    vm::VisitOperands(inst, [&](char kind, int64_t v) {
      if (kind == 'k' && def.kernels[static_cast<size_t>(v)].op == op) ++n;
    });
  }
  return n;
}

// Compiles `b` with and without the pass: `removed` nodes computed once for several,
// `op` invoked `with` and `without` times, and the same outputs bit for bit.
void ExpectShared(const OnnxModelBuilder& b, int removed, const std::string& op, int with, int without) {
  CompileStats on_stats, off_stats;
  auto on = Compile(b, true, &on_stats);
  auto off = Compile(b, false, &off_stats);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(on_stats.common_subexpressions, removed);
  EXPECT_EQ(off_stats.common_subexpressions, 0);
  EXPECT_EQ(Invocations(*on, op), with);
  EXPECT_EQ(Invocations(*off, op), without);
  const std::vector<float> x = Random(static_cast<size_t>(*NumElements(kX)), 7);
  auto got = RunFloat32Outputs(*on, {kX}, {x});
  auto want = RunFloat32Outputs(*off, {kX}, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(got[o], want[o]) << "output " << o;
}

// x quantized three times, as ONNX Runtime's dynamic quantizer writes it before a
// layer's query, key and value MatMuls: one DynamicQuantizeLinear remains.
TEST(CommonSubexpressionsTest, RepeatedDynamicQuantizeLinearIsComputedOnce) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX);
  const int8_t zero = 0;
  b.RawInit("w_zp", onnx::TensorProto::INT8, {}, &zero, 1);
  b.FloatInit("w_scale", {}, {0.02f});
  int seed = 29;
  for (const std::string p : {"q", "k", "v"}) {
    std::vector<int8_t> w(16 * 8);  // each projection its own weights
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * seed % 255) - 127);
    seed += 2;
    b.RawInit(p + "_w", onnx::TensorProto::INT8, {16, 8}, w.data(), w.size());
    b.Node("DynamicQuantizeLinear", {"x"}, {p + "_x", p + "_s", p + "_zp"}, p + "_dql");
    b.Node("MatMulInteger", {p + "_x", p + "_w", p + "_zp", "w_zp"}, {p + "_acc"}, p + "_mmi");
    OnnxModelBuilder::IntAttr(b.Node("Cast", {p + "_acc"}, {p + "_f"}, p + "_cast"), "to", kFloat);
    b.Node("Mul", {p + "_s", "w_scale"}, {p + "_scale"}, p + "_scale");
    b.Node("Mul", {p + "_f", p + "_scale"}, {p}, p + "_mul");
    b.Output(p, kFloat, {3, 8});
  }
  // Each Mul of the scales is computed once too: 2 DynamicQuantizeLinears and 2 Muls.
  ExpectShared(b, 4, "DynamicQuantizeLinear", 1, 3);
}

// Shape chains repeated as exporters write them, and Transposes that differ only in
// their attributes: the chains merge, the Transposes do not.
TEST(CommonSubexpressionsTest, SameOpsWithOtherAttributesOrInputsStayApart) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Input("z", kFloat, kX);
  b.Node("Relu", {"x"}, {"r1"}, "relu1");
  b.Node("Relu", {"x"}, {"r2"}, "relu2");  // the same: merged
  b.Node("Relu", {"z"}, {"r3"}, "relu3");  // another input: kept
  b.Node("Add", {"r1", "r2"}, {"a"}, "add");
  b.Node("Add", {"a", "r3"}, {"s"}, "sum");
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"s"}, {"t1"}, "t1"), "perm", {1, 0});
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"s"}, {"t2"}, "t2"), "perm", {0, 1});  // other perm: kept
  b.Output("t1", kFloat, {16, 3}).Output("t2", kFloat, kX);
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.common_subexpressions, 1);
  EXPECT_EQ(Invocations(*def, "Transpose"), 2);
  EXPECT_EQ(Invocations(*def, "Relu"), 2);
}

// A node whose output is a graph output keeps it, under its own name.
TEST(CommonSubexpressionsTest, GraphOutputsAreNotMerged) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX);
  b.Node("Sigmoid", {"x"}, {"y1"}, "s1");
  b.Node("Sigmoid", {"x"}, {"y2"}, "s2");
  b.Output("y1", kFloat, kX).Output("y2", kFloat, kX);
  ExpectShared(b, 0, "Sigmoid", 2, 2);
  // Read by another node instead, the second one goes.
  OnnxModelBuilder c(13);
  c.Input("x", kFloat, kX);
  c.Node("Sigmoid", {"x"}, {"y1"}, "s1");
  c.Node("Sigmoid", {"x"}, {"h"}, "s2");
  c.Node("Neg", {"h"}, {"y2"}, "neg");
  c.Output("y1", kFloat, kX).Output("y2", kFloat, kX);
  ExpectShared(c, 1, "Sigmoid", 1, 2);
}

}  // namespace common_subexpressions_test
}  // namespace remex::compiler
