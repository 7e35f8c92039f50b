// The elementwise fusion pass: what fuses and what must not (intermediates with other
// readers, graph outputs, host nodes, unknown ranks, If/Loop regions), and compiled
// graphs run on the CPU VM against values computed here and against the unfused
// compile.
#include "host_client/compiler/passes/elementwise_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "kernels/ops/fused/fused.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace elementwise_fusion_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::CountKernels;
using remex::testing::RunFloat32Outputs;

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, bool fuse, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.fuse_elementwise = fuse;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

std::vector<float> Ramp(size_t n, float step, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol * (1.0 + std::fabs(expected[i]))) << "at " << i;
  }
}

// y = (HardSwish(x) * scale + bias) with scale, bias per channel and x [N, C, L]: the
// HardSwish/Mul/Add chains of PP-OCRv4 rec.
OnnxModelBuilder HardSwishScaleBias(std::vector<int64_t> x_dims) {
  OnnxModelBuilder b(14);
  b.Input("x", onnx::TensorProto::FLOAT, x_dims).Output("y", onnx::TensorProto::FLOAT, x_dims);
  b.FloatInit("scale", {3, 1}, {2.0f, 0.5f, -1.0f}).FloatInit("bias", {3, 1}, {0.25f, -1.0f, 3.0f});
  b.Node("HardSwish", {"x"}, {"h"});
  b.Node("Mul", {"h", "scale"}, {"m"});
  b.Node("Add", {"m", "bias"}, {"y"});
  return b;
}

std::vector<double> HardSwishScaleBiasReference(const std::vector<float>& x, int64_t c_stride) {
  const double scale[] = {2.0, 0.5, -1.0}, bias[] = {0.25, -1.0, 3.0};
  std::vector<double> y;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const size_t c = (i / c_stride) % 3;
    y.push_back(v * std::min(1.0, std::max(0.0, v / 6.0 + 0.5)) * scale[c] + bias[c]);
  }
  return y;
}

TEST(FusionTest, ChainBecomesOneKernel) {
  auto b = HardSwishScaleBias({2, 3, 5});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 3);
  EXPECT_EQ(stats.kernels, 1);
  ASSERT_EQ(CountKernels(*def, "FusedElementwise"), 1);
  EXPECT_EQ(def->kernels[0].node_name, "HardSwish_0+Mul_1+Add_2");
  // The signature kernels specialise on when created (kernels/ops/fused/fused.h).
  auto num_inputs = def->kernels[0].attrs.Int("num_inputs");
  ASSERT_TRUE(num_inputs.ok()) << num_inputs.status().ToString();
  EXPECT_EQ(*num_inputs, def->kernels[0].num_inputs);
  auto dtype = def->kernels[0].attrs.String("dtype");
  ASSERT_TRUE(dtype.ok()) << dtype.status().ToString();
  EXPECT_EQ(*dtype, "float32");
  auto x = Ramp(30, 0.5f, -7.0f);
  auto y = RunFloat32Outputs(*def, {{2, 3, 5}}, {x});
  ASSERT_EQ(y.size(), 1u);
  ExpectNear(y[0], HardSwishScaleBiasReference(x, 5), 1e-6);

  auto unfused = Compile(b, false);
  ASSERT_TRUE(unfused.ok());
  EXPECT_EQ(CountKernels(*unfused, "FusedElementwise"), 0);
  EXPECT_EQ(unfused->kernels.size(), 3u);
  EXPECT_EQ(RunFloat32Outputs(*unfused, {{2, 3, 5}}, {x}), y);
}

TEST(FusionTest, DynamicShapesRunAtEveryShape) {
  auto b = HardSwishScaleBias({-1, 3, -1});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  for (Shape shape : {Shape{1, 3, 1}, Shape{2, 3, 700}}) {
    const int64_t n = *NumElements(shape);
    auto x = Ramp(static_cast<size_t>(n), 0.01f, -5.0f);
    auto y = RunFloat32Outputs(*def, {shape}, {x});
    ASSERT_EQ(y.size(), 1u);
    ExpectNear(y[0], HardSwishScaleBiasReference(x, shape[2]), 1e-6);
  }
}

TEST(FusionTest, ScalarConstantsBecomeImmediates) {
  // y = Clip(x * 0.5 + 3, 0, 6) / 6 ** 2 with one-element constants.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", onnx::TensorProto::FLOAT, {4});
  b.FloatInit("half", {}, {0.5f}).FloatInit("three", {1}, {3.0f}).FloatInit("zero", {}, {0.0f});
  b.FloatInit("six", {}, {6.0f}).FloatInit("two", {}, {2.0f});
  b.Node("Mul", {"x", "half"}, {"a"});
  b.Node("Add", {"a", "three"}, {"c"});
  b.Node("Clip", {"c", "zero", "six"}, {"d"});
  b.Node("Div", {"d", "six"}, {"e"});
  b.Node("Pow", {"e", "two"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 5);
  ASSERT_EQ(def->kernels.size(), 1u);
  // One input (x); the five constants are immediates and left the constant table.
  EXPECT_EQ(def->kernels[0].num_inputs, 1);
  EXPECT_TRUE(def->constants.empty());
  auto imms = def->kernels[0].attrs.Floats("immediates");
  ASSERT_TRUE(imms.ok());
  EXPECT_EQ(imms->size(), 5u);  // 0.5, 3, 0, 6, 2 (6 once).
  std::vector<float> x = {-10.0f, -2.0f, 1.0f, 20.0f};
  auto y = RunFloat32Outputs(*def, {{4}}, {x});
  std::vector<double> want;
  for (float v : x) {
    const double c = std::min(6.0, std::max(0.0, v * 0.5 + 3.0)) / 6.0;
    want.push_back(c * c);
  }
  ASSERT_EQ(y.size(), 1u);
  ExpectNear(y[0], want, 1e-6);
  // The bytes survive serialization.
  auto bytes = vm::SerializeExecutable(*def);
  ASSERT_TRUE(bytes.ok());
  auto parsed = vm::ParseExecutable(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(RunFloat32Outputs(*parsed, {{4}}, {x}), y);
}

TEST(FusionTest, SharedIntermediateInsideTheGroupFusesAsADag) {
  // t = x * w + b; y = t * Tanh(t) (with Sigmoid, the SiLU: one Swish node, see
  // activation_patterns_test.cc).
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 4}).Output("y", onnx::TensorProto::FLOAT, {2, 4});
  b.FloatInit("w", {4}, {1.0f, -1.0f, 2.0f, 0.5f}).FloatInit("b", {2, 1}, {0.5f, -0.5f});
  b.Node("Mul", {"x", "w"}, {"m"});
  b.Node("Add", {"m", "b"}, {"t"});
  b.Node("Tanh", {"t"}, {"s"});
  b.Node("Mul", {"t", "s"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 4);
  ASSERT_EQ(def->kernels.size(), 1u);
  EXPECT_EQ(def->kernels[0].num_inputs, 3);  // x, w, b
  auto x = Ramp(8, 0.75f, -3.0f);
  const double w[] = {1.0, -1.0, 2.0, 0.5}, bias[] = {0.5, -0.5};
  std::vector<double> want;
  for (size_t i = 0; i < 8; ++i) {
    const double t = x[i] * w[i % 4] + bias[i / 4];
    want.push_back(t * std::tanh(t));
  }
  auto y = RunFloat32Outputs(*def, {{2, 4}}, {x});
  ASSERT_EQ(y.size(), 1u);
  ExpectNear(y[0], want, 1e-6);
}

TEST(FusionTest, IntermediateWithAnotherReaderStaysOutside) {
  // a = x + 1 is also read by a Reshape: Add stays, Relu and Mul fuse.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3}).Output("y", onnx::TensorProto::FLOAT, {2, 3});
  b.Output("z", onnx::TensorProto::FLOAT, {6});
  b.FloatInit("one", {}, {1.0f}).FloatInit("two", {}, {2.0f}).Int64Init("flat", {1}, {6});
  b.Node("Add", {"x", "one"}, {"a"});
  b.Node("Relu", {"a"}, {"r"});
  b.Node("Mul", {"r", "two"}, {"y"});
  b.Node("Reshape", {"a", "flat"}, {"z"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 2);
  EXPECT_EQ(CountKernels(*def, "Add"), 1);
  EXPECT_EQ(CountKernels(*def, "Reshape"), 1);
  EXPECT_EQ(CountKernels(*def, "Relu") + CountKernels(*def, "Mul"), 0);
  auto x = Ramp(6, 1.0f, -3.0f);
  auto out = RunFloat32Outputs(*def, {{2, 3}}, {x});
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> y, z;
  for (float v : x) {
    z.push_back(v + 1.0f);
    y.push_back(std::max(0.0f, v + 1.0f) * 2.0f);
  }
  EXPECT_EQ(out[0], y);
  EXPECT_EQ(out[1], z);
}

TEST(FusionTest, GraphOutputsAreNotFusedAway) {
  // s = Sigmoid(x) is a graph output: it stays, and Mul alone is not worth a fused node.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {3}).Output("s", onnx::TensorProto::FLOAT, {3});
  b.Output("y", onnx::TensorProto::FLOAT, {3});
  b.Node("Sigmoid", {"x"}, {"s"});
  b.Node("Mul", {"s", "x"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 0);
  EXPECT_EQ(CountKernels(*def, "Sigmoid"), 1);
  EXPECT_EQ(CountKernels(*def, "Mul"), 1);
  std::vector<float> x = {-1.0f, 0.0f, 2.0f};
  auto out = RunFloat32Outputs(*def, {{3}}, {x});
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 3; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    EXPECT_NEAR(out[0][i], s, 1e-6);
    EXPECT_NEAR(out[1][i], s * x[i], 1e-6);
  }
}

TEST(FusionTest, NonConstantPowExponentsAndClipBoundsAreNotFused) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {3}).Input("e", onnx::TensorProto::FLOAT, {1});
  b.Input("lo", onnx::TensorProto::FLOAT, {});
  b.Output("y", onnx::TensorProto::FLOAT, {3});
  b.Node("Exp", {"x"}, {"a"});
  b.Node("Pow", {"a", "e"}, {"p"});
  b.Node("Clip", {"p", "lo"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 0);
  EXPECT_EQ(def->kernels.size(), 3u);
}

// A hand-built graph: x -> Exp -> Neg -> Sigmoid -> y, all [4] float32.
Graph ExpNegSigmoid() {
  Graph g;
  auto value = [&](const char* name) {
    Value v;
    v.name = name;
    v.dtype = DType::kFloat32;
    v.shape = {4};
    v.rank_known = true;
    return g.AddValue(v);
  };
  const int x = value("x"), a = value("a"), b = value("b"), y = value("y");
  g.inputs = {x};
  g.outputs = {y};
  g.nodes.push_back(Node{"Exp", "exp", {}, {x}, {a}, {}, false});
  g.nodes.push_back(Node{"Neg", "neg", {}, {a}, {b}, {}, false});
  g.nodes.push_back(Node{"Sigmoid", "sigmoid", {}, {b}, {y}, {}, false});
  return g;
}

TEST(FusionTest, PassFusesTheHandBuiltChain) {
  Graph g = ExpNegSigmoid();
  FusionStats stats = FuseElementwise(g, Registry());
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 3);
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& n = g.nodes[0];
  EXPECT_EQ(n.op, "FusedElementwise");
  EXPECT_EQ(n.inputs, (std::vector<int>{0}));
  EXPECT_EQ(n.outputs, (std::vector<int>{3}));
  using kernels::FusedOpcode;
  auto program = n.attrs.Ints("program");
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(*program, (std::vector<int64_t>{static_cast<int64_t>(FusedOpcode::kExp), 0, -1, -1,
                                            static_cast<int64_t>(FusedOpcode::kNeg), 1, -1, -1,
                                            static_cast<int64_t>(FusedOpcode::kSigmoid), 2, -1, -1}));
}

TEST(FusionTest, HostNodesAreNotFused) {
  Graph g = ExpNegSigmoid();
  g.nodes[1].host = true;  // Neg
  g.values[2].host = true;
  EXPECT_EQ(FuseElementwise(g, Registry()).fused_kernels, 0);
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(FusionTest, ValuesOfUnknownRankAreNotFused) {
  Graph g = ExpNegSigmoid();
  g.values[2].rank_known = false;  // b = Neg(a)
  g.values[2].shape.clear();
  // Exp -> Neg would read a known-rank value but write b; Sigmoid reads b: neither
  // Neg nor Sigmoid qualifies, and Exp alone is one node.
  EXPECT_EQ(FuseElementwise(g, Registry()).fused_kernels, 0);
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(FusionTest, ReadsInsideRegionsCountAndRegionsAreLeftAlone) {
  Graph g = ExpNegSigmoid();
  Value cond;
  cond.name = "cond";
  cond.dtype = DType::kBool;
  cond.rank_known = true;
  const int c = g.AddValue(cond);
  g.inputs.push_back(c);
  Value out = g.values[3];
  out.name = "z";
  const int z = g.AddValue(out);
  const int t0 = g.AddValue(g.values[3]), t1 = g.AddValue(g.values[3]);
  // If(cond): then z = Relu(Abs(a)) (reads the intermediate a), else z = Abs(x).
  Node branch_then1{"Abs", "abs_then", {}, {1}, {t0}, {}, false};
  Node branch_then2{"Relu", "relu_then", {}, {t0}, {t1}, {}, false};
  Node branch_else{"Abs", "abs_else", {}, {0}, {t1 + 1}, {}, false};
  g.AddValue(g.values[3]);  // t1 + 1
  Node if_node{"If", "if", {}, {c}, {z}, {}, false};
  if_node.regions.push_back(Region{{branch_then1, branch_then2}, {}, {t1}});
  if_node.regions.push_back(Region{{branch_else}, {}, {t1 + 1}});
  g.nodes.push_back(if_node);
  g.outputs.push_back(z);
  FusionStats stats = FuseElementwise(g, Registry());
  // a is read inside the then-branch: Exp stays; Neg -> Sigmoid fuse.
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(stats.nodes_fused, 2);
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].op, "Exp");
  EXPECT_EQ(g.nodes[1].op, "FusedElementwise");
  EXPECT_EQ(g.nodes[1].inputs, (std::vector<int>{1}));
  ASSERT_EQ(g.nodes[2].op, "If");
  EXPECT_EQ(g.nodes[2].regions[0].nodes.size(), 2u);
  EXPECT_EQ(g.nodes[2].regions[0].nodes[0].op, "Abs");
  EXPECT_EQ(g.nodes[2].regions[0].nodes[1].op, "Relu");
}

TEST(FusionTest, HigherRankScalarKeepsTheOutputRank) {
  // x [3] + c [1, 1] -> [1, 3]: the constant cannot be an immediate (the inputs'
  // broadcast would lose a dim); it becomes an input.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {3}).Output("y", onnx::TensorProto::FLOAT, {1, 3});
  b.FloatInit("c", {1, 1}, {2.0f});
  b.Node("Add", {"x", "c"}, {"a"});
  b.Node("Relu", {"a"}, {"y"});
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(stats.fused_kernels, 1);
  EXPECT_EQ(def->kernels[0].num_inputs, 2);
  EXPECT_EQ(def->functions[0].outputs[0].shape, (Shape{1, 3}));
  auto y = RunFloat32Outputs(*def, {{3}}, {{-5.0f, 0.0f, 1.0f}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0], (std::vector<float>{0.0f, 2.0f, 3.0f}));
}

// Occurrences of x * Clip(x + 3, 0, 6) / 6 in a FusedElementwise program.
int CountHardSwish(const std::vector<int64_t>& p, const std::vector<float>& imms, int num_inputs) {
  using kernels::FusedOpcode;
  const int64_t first_result = num_inputs + static_cast<int64_t>(imms.size());
  auto instr = [&](int64_t slot) -> const int64_t* {
    if (slot < first_result) return nullptr;
    return &p[static_cast<size_t>((slot - first_result) * kernels::kFusedWidth)];
  };
  auto is = [&](int64_t slot, float v) {
    return slot >= num_inputs && slot < first_result && imms[static_cast<size_t>(slot - num_inputs)] == v;
  };
  auto op = [](const int64_t* e, FusedOpcode o) { return e && e[0] == static_cast<int64_t>(o); };
  int count = 0;
  for (size_t j = 0; j < p.size(); j += kernels::kFusedWidth) {
    const int64_t* div = &p[j];
    if (!op(div, FusedOpcode::kDiv) || !is(div[2], 6.0f)) continue;
    const int64_t* mul = instr(div[1]);
    if (!op(mul, FusedOpcode::kMul)) continue;
    for (int side = 0; side < 2; ++side) {
      const int64_t x = mul[1 + side];
      const int64_t* clip = instr(mul[2 - side]);
      if (!op(clip, FusedOpcode::kClip) || !is(clip[2], 0.0f) || !is(clip[3], 6.0f)) continue;
      const int64_t* add = instr(clip[1]);
      if (op(add, FusedOpcode::kAdd) &&
          ((add[1] == x && is(add[2], 3.0f)) || (add[2] == x && is(add[1], 3.0f)))) {
        ++count;
        break;
      }
    }
  }
  return count;
}

// PP-OCRv4 rec (REMEX_MODELS_DIR, see scripts/test.sh): its hard-swish/Mul/Add chains
// fuse, and the fused executable computes what the unfused one does.
TEST(FusionTest, PpOcrRecHardSwishChainsFuseAndMatchUnfused) {
  const char* dir = std::getenv("REMEX_MODELS_DIR");
  const std::string model = std::string(dir ? dir : "") + "/ch_PP-OCRv4_rec_infer.onnx";
  if (!dir || !std::filesystem::exists(model)) GTEST_SKIP() << "REMEX_MODELS_DIR not set";
  const Shape shape = {1, 3, 48, 160};
  CompileOptions options;
  options.input_shapes["x"] = shape;
  CompileStats fused_stats, unfused_stats;
  auto fused = CompileOnnxFile(model, Registry(), options, &fused_stats);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  options.fuse_elementwise = false;
  auto unfused = CompileOnnxFile(model, Registry(), options, &unfused_stats);
  ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
  EXPECT_EQ(unfused_stats.fused_kernels, 0);
  EXPECT_EQ(unfused_stats.hardswish_recognized, 0);
  EXPECT_GE(fused_stats.fused_kernels, 20);
  // PaddlePaddle exports hard-swish as x * Clip(x + 3, 0, 6) / 6 between affine
  // Mul/Add pairs: each becomes one HardSwish (its 4 nodes 1), which fusion takes into
  // the program of the affine pairs around it. Its 7 SiLUs, written x * Sigmoid(x * 1),
  // become one Swish each (their 3 nodes 1).
  EXPECT_GE(fused_stats.hardswish_recognized, 20);
  EXPECT_EQ(fused_stats.swish_recognized, 7);
  EXPECT_EQ(fused_stats.activation_nodes_absorbed,
            3 * fused_stats.hardswish_recognized + 2 * fused_stats.swish_recognized);
  EXPECT_EQ(fused_stats.kernels, unfused_stats.kernels - fused_stats.activation_nodes_absorbed -
                                     (fused_stats.epilogue_nodes - unfused_stats.epilogue_nodes) -
                                     fused_stats.nodes_fused + fused_stats.fused_kernels);
  int hardswish_ops = 0, decomposed = 0;
  for (const auto& k : fused->kernels) {
    if (k.op != "FusedElementwise") continue;
    auto program = k.attrs.Ints("program");
    auto imms = k.attrs.Floats("immediates", {});
    ASSERT_TRUE(program.ok() && imms.ok());
    decomposed += CountHardSwish(*program, *imms, k.num_inputs);
    for (size_t j = 0; j < program->size(); j += kernels::kFusedWidth) {
      hardswish_ops += (*program)[j] == static_cast<int64_t>(kernels::FusedOpcode::kHardSwish);
    }
  }
  EXPECT_EQ(decomposed, 0);
  EXPECT_GE(hardswish_ops, 20);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(*NumElements(shape)));
  for (float& v : x) v = u(rng);
  auto a = RunFloat32Outputs(*fused, {shape}, {x});
  auto b = RunFloat32Outputs(*unfused, {shape}, {x});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a[0].size(), b[0].size());
  double max_err = 0;
  for (size_t i = 0; i < a[0].size(); ++i) max_err = std::max(max_err, std::fabs(double(a[0][i]) - b[0][i]));
  EXPECT_LE(max_err, 1e-5);
}

}  // namespace elementwise_fusion_test
}  // namespace remex::compiler
