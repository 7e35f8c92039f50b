// HardSwish recognition: each way exporters write x * clip(x + 3, 0, 6) / 6 becomes one
// HardSwish node with the same results on the CPU VM as the graph compiled without it;
// near misses (another constant, an intermediate read elsewhere or a graph output) stay
// as they are; after a Conv, the recognised HardSwish becomes the FusedConv's epilogue.
#include "host_client/compiler/passes/activation_patterns.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"

namespace remex::compiler {
namespace {

using remex::testing::CountKernels;
using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;
const Shape kX = {2, 3, 4, 5};

// How the decomposition is written: which scaling, and operand orders.
struct Form {
  bool divide_last = true;   // (x * c) / 6 (or * 1/6); else x * (c / 6)
  bool by_reciprocal = false;  // Mul by 1/6 instead of Div by 6
  bool swap = false;          // constants first, x second, where the op commutes
  float add = 3.0f, max = 6.0f;
};

// y = hardswish(x) written out as `f` says; `extra` also makes the Clip's output a
// graph output.
OnnxModelBuilder HardSwishModel(Form f, bool clip_is_output = false) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  if (clip_is_output) b.Output("c", kFloat, kX);
  b.FloatInit("three", {}, {f.add}).FloatInit("zero", {}, {0.0f}).FloatInit("six", {}, {f.max});
  b.FloatInit("sixth", {1}, {1.0f / 6.0f});
  auto pair = [&](const std::string& v, const std::string& k) {
    return f.swap ? std::vector<std::string>{k, v} : std::vector<std::string>{v, k};
  };
  b.Node("Add", pair("x", "three"), {"a"}, "add");
  b.Node("Clip", {"a", "zero", "six"}, {"c"}, "clip");
  auto scale = [&](const std::string& in, const std::string& out) {
    if (f.by_reciprocal) {
      b.Node("Mul", pair(in, "sixth"), {out}, "scale");
    } else {
      b.Node("Div", {in, "six"}, {out}, "scale");
    }
  };
  if (f.divide_last) {
    b.Node("Mul", pair("x", "c"), {"m"}, "mul");
    scale("m", "y");
  } else {
    scale("c", "d");
    b.Node("Mul", pair("x", "d"), {"y"}, "mul");
  }
  return b;
}

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, bool recognise, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.fuse_elementwise = recognise;  // recognition runs with elementwise fusion
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

// Compiles `b` with and without recognition, checks the count, and that both give
// the same outputs (to a few float32 ulps) on x in [-5, 5], across the kinks at -3, 3.
void ExpectSameResults(const OnnxModelBuilder& b, int expect) {
  CompileStats stats;
  auto got_def = Compile(b, true, &stats);
  ASSERT_TRUE(got_def.ok()) << got_def.status().ToString();
  EXPECT_EQ(stats.hardswish_recognized, expect);
  auto want_def = Compile(b, false);
  ASSERT_TRUE(want_def.ok()) << want_def.status().ToString();
  EXPECT_EQ(CountKernels(*want_def, "Clip"), 1);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  std::vector<float> x(static_cast<size_t>(NumElements(kX).value()));
  for (float& v : x) v = u(rng);
  x[0] = -3.0f;
  x[1] = 3.0f;
  x[2] = 0.0f;
  auto want = RunFloat32Outputs(*want_def, {kX}, {x});
  auto got = RunFloat32Outputs(*got_def, {kX}, {x});
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].size(), got[o].size());
    for (size_t i = 0; i < want[o].size(); ++i) {
      EXPECT_NEAR(got[o][i], want[o][i], 4e-7 * (1.0 + std::fabs(want[o][i]))) << "output " << o << " at " << i;
    }
  }
}

TEST(HardSwishRecognition, EveryFormBecomesOneHardSwish) {
  for (bool divide_last : {true, false}) {
    for (bool by_reciprocal : {false, true}) {
      for (bool swap : {false, true}) {
        SCOPED_TRACE(std::string(divide_last ? "(x*c)/6" : "x*(c/6)") + (by_reciprocal ? " as *1/6" : "") +
                     (swap ? ", constants first" : ""));
        const OnnxModelBuilder b = HardSwishModel(Form{divide_last, by_reciprocal, swap});
        ExpectSameResults(b, 1);
        CompileStats stats;
        auto def = Compile(b, true, &stats);
        ASSERT_TRUE(def.ok());
        // One kernel is left, and no Clip: the HardSwish alone (a fusion of one node
        // stays the node).
        EXPECT_EQ(CountKernels(*def, "Clip"), 0);
        EXPECT_EQ(def->kernels.size(), 1u);
        EXPECT_EQ(CountKernels(*def, "HardSwish"), 1);
        // Named after the four nodes it runs (what profiles and errors show).
        EXPECT_EQ(def->kernels[0].node_name, divide_last ? "add+clip+mul+scale" : "add+clip+scale+mul");
      }
    }
  }
}

TEST(HardSwishRecognition, NearMissesStayAsTheyAre) {
  Form add2;
  add2.add = 2.0f;
  ExpectSameResults(HardSwishModel(add2), 0);
  Form max5;
  max5.max = 5.0f;  // Clip to 5, scale by 1/5: not HardSwish
  ExpectSameResults(HardSwishModel(max5), 0);
  // The Clip's output is also a graph output: nothing may disappear.
  ExpectSameResults(HardSwishModel(Form{}, /*clip_is_output=*/true), 0);
}

TEST(HardSwishRecognition, AfterAConvItBecomesTheFusedConvEpilogue) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  std::vector<float> w(3 * 3 * 3 * 3), bias = {0.5f, -0.5f, 1.0f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) v = u(rng);
  b.FloatInit("w", {3, 3, 3, 3}, w).FloatInit("b", {3}, bias);
  auto* conv = b.Node("Conv", {"x", "w", "b"}, {"h"}, "conv");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.FloatInit("three", {}, {3.0f}).FloatInit("zero", {}, {0.0f}).FloatInit("six", {}, {6.0f});
  b.Node("Add", {"h", "three"}, {"a"}, "add");
  b.Node("Clip", {"a", "zero", "six"}, {"c"}, "clip");
  b.Node("Mul", {"h", "c"}, {"m"}, "mul");
  b.Node("Div", {"m", "six"}, {"y"}, "div");
  ExpectSameResults(b, 1);
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok());
  ASSERT_EQ(def->kernels.size(), 1u);
  EXPECT_EQ(def->kernels[0].op, "FusedConv");
  EXPECT_EQ(def->kernels[0].node_name, "conv+add+clip+mul+div");
  auto activation = def->kernels[0].attrs.String("activation");
  ASSERT_TRUE(activation.ok());
  EXPECT_EQ(*activation, "HardSwish");
}

}  // namespace
}  // namespace remex::compiler
