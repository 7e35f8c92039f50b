// Activation recognition: each way exporters write x * clip(x + 3, 0, 6) / 6 becomes one
// HardSwish node, each way they write the SiLU x * sigmoid(x) (or x * sigmoid(alpha * x))
// one Swish node, and each way they write the erf GELU one Gelu node, with the same results on the CPU VM as the graph compiled without it;
// near misses (another constant, an intermediate read elsewhere or a graph output) stay
// as they are; after a Conv (or a MatMul by a constant), the recognised activation
// becomes the FusedConv's (FusedMatMul's) epilogue.
#include "host_client/compiler/passes/activation_patterns.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"

namespace remex::compiler {
namespace activation_patterns_test {

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

// x [2, 3, 4, 5] (one input of shape kX each in `xs`): `got` gives `want`'s outputs on
// the CPU VM to `tol` relative.
void ExpectOutputsNear(const vm::ExecutableDef& want_def, const vm::ExecutableDef& got_def,
                       const std::vector<std::vector<float>>& xs, double tol) {
  const std::vector<Shape> shapes(xs.size(), kX);
  auto want = RunFloat32Outputs(want_def, shapes, xs);
  auto got = RunFloat32Outputs(got_def, shapes, xs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].size(), got[o].size());
    for (size_t i = 0; i < want[o].size(); ++i) {
      EXPECT_NEAR(got[o][i], want[o][i], tol * (1.0 + std::fabs(want[o][i]))) << "output " << o << " at " << i;
    }
  }
}

// `inputs` tensors of kX's shape with values in [-8, 8] from `seed`, each starting with
// `first`.
std::vector<std::vector<float>> RandomInputs(int inputs, uint32_t seed, const std::vector<float>& first) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<std::vector<float>> xs(static_cast<size_t>(inputs));
  for (auto& x : xs) {
    x.resize(static_cast<size_t>(NumElements(kX).value()));
    for (float& v : x) v = u(rng);
    std::copy(first.begin(), first.end(), x.begin());
  }
  return xs;
}

// x [2, 3, 4, 5] through a 3x3 pads-1 Conv (3 -> 3 channels, weights from `seed`) into
// "h"; the graph's output "y" of kX's shape is left to the caller to write.
OnnxModelBuilder ConvModel(uint32_t seed) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  std::vector<float> w(3 * 3 * 3 * 3), bias = {0.5f, -0.5f, 1.0f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) v = u(rng);
  b.FloatInit("w", {3, 3, 3, 3}, w).FloatInit("b", {3}, bias);
  auto* conv = b.Node("Conv", {"x", "w", "b"}, {"h"}, "conv");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
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
  ExpectOutputsNear(*want_def, *got_def, {x}, 4e-7);
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
  OnnxModelBuilder b = ConvModel(3);
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

// ---------------------------------------------------------------------------
// SiLU / Swish.

// y = x * sigmoid(x) written out as Mul(x, Sigmoid(x)), or with `alpha` as
// Mul(x, Sigmoid(Mul(x, alpha))); `swap` puts the Sigmoid (and alpha) first in each Mul.
// `alpha_shape`: the alpha constant's shape ({} a scalar). `sigmoid_is_output` also
// makes the Sigmoid's output a graph output; `other` multiplies the Sigmoid of x by
// another input instead of x.
struct SiluForm {
  bool scaled = false;
  bool swap = false;
  float alpha = 1.702f;
  Shape alpha_shape = {};
  bool sigmoid_is_output = false;
  bool scale_is_output = false;  // alpha * x is also a graph output
  bool other = false;
};

OnnxModelBuilder SiluModel(const SiluForm& f) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  if (f.other) b.Input("z", kFloat, kX);
  if (f.sigmoid_is_output) b.Output("s", kFloat, kX);
  if (f.scale_is_output) b.Output("t", kFloat, kX);
  auto pair = [&](const std::string& v, const std::string& k) {
    return f.swap ? std::vector<std::string>{k, v} : std::vector<std::string>{v, k};
  };
  std::string t = "x";
  if (f.scaled) {
    const size_t n = static_cast<size_t>(NumElements(f.alpha_shape).value());
    b.FloatInit("alpha", f.alpha_shape, std::vector<float>(n, f.alpha));
    b.Node("Mul", pair("x", "alpha"), {"t"}, "scale");
    t = "t";
  }
  b.Node("Sigmoid", {t}, {"s"}, "sigmoid");
  b.Node("Mul", pair(f.other ? "z" : "x", "s"), {"y"}, "mul");
  return b;
}

// Compiles `b` (inputs of shape kX each, `inputs` of them) with and without
// recognition, checks the count of Swish nodes made, and that both give the same
// outputs on values in [-8, 8] to `tol` relative.
void ExpectSameSwishResults(const OnnxModelBuilder& b, int expect, int inputs = 1, double tol = 4e-7) {
  CompileStats stats;
  auto got_def = Compile(b, true, &stats);
  ASSERT_TRUE(got_def.ok()) << got_def.status().ToString();
  EXPECT_EQ(stats.swish_recognized, expect);
  EXPECT_EQ(stats.hardswish_recognized, 0);
  CompileStats off_stats;
  auto want_def = Compile(b, false, &off_stats);
  ASSERT_TRUE(want_def.ok()) << want_def.status().ToString();
  EXPECT_EQ(off_stats.swish_recognized, 0);
  EXPECT_EQ(CountKernels(*want_def, "Sigmoid"), 1);
  ExpectOutputsNear(*want_def, *got_def, RandomInputs(inputs, 9, {0.0f}), tol);
}

TEST(SwishRecognition, EveryFormBecomesOneSwish) {
  for (bool scaled : {false, true}) {
    for (bool swap : {false, true}) {
      SiluForm f;
      f.scaled = scaled;
      f.swap = swap;
      SCOPED_TRACE(std::string(scaled ? "x * sigmoid(alpha * x)" : "x * sigmoid(x)") + (swap ? ", swapped" : ""));
      const OnnxModelBuilder b = SiluModel(f);
      ExpectSameSwishResults(b, 1);
      auto def = Compile(b, true);
      ASSERT_TRUE(def.ok());
      // One kernel is left: the Swish, with the alpha it was written with.
      ASSERT_EQ(def->kernels.size(), 1u);
      EXPECT_EQ(def->kernels[0].op, "Swish");
      auto alpha = def->kernels[0].attrs.Float("alpha");
      ASSERT_TRUE(alpha.ok());
      EXPECT_EQ(*alpha, scaled ? 1.702f : 1.0f);
      // Named after the nodes it runs (what profiles and errors show).
      EXPECT_EQ(def->kernels[0].node_name, scaled ? "scale+sigmoid+mul" : "sigmoid+mul");
    }
  }
  // A one-element alpha of rank up to x's is a scalar too.
  SiluForm ranked;
  ranked.scaled = true;
  ranked.alpha_shape = {1, 1, 1, 1};
  ExpectSameSwishResults(SiluModel(ranked), 1);
}

TEST(SwishRecognition, NearMissesStayAsTheyAre) {
  // The Sigmoid's output is also a graph output: nothing may disappear.
  SiluForm out;
  out.sigmoid_is_output = true;
  ExpectSameSwishResults(SiluModel(out), 0);
  // sigmoid(x) times another tensor: a gate, not a SiLU.
  SiluForm other;
  other.other = true;
  ExpectSameSwishResults(SiluModel(other), 0, 2);
  // alpha * x is read elsewhere too (here: a graph output).
  SiluForm scale_out;
  scale_out.scaled = true;
  scale_out.scale_is_output = true;
  ExpectSameSwishResults(SiluModel(scale_out), 0);
  // A per-channel alpha is no scalar.
  SiluForm per_channel;
  per_channel.scaled = true;
  per_channel.alpha_shape = {1, 3, 1, 1};
  ExpectSameSwishResults(SiluModel(per_channel), 0);
}

TEST(SwishRecognition, AfterAConvItBecomesTheFusedConvEpilogue) {
  for (bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "x * sigmoid(alpha * x)" : "x * sigmoid(x)");
    OnnxModelBuilder b = ConvModel(4);
    std::string t = "h";
    if (scaled) {
      b.FloatInit("alpha", {}, {0.5f});
      b.Node("Mul", {"alpha", "h"}, {"t"}, "scale");
      t = "t";
    }
    b.Node("Sigmoid", {t}, {"s"}, "sigmoid");
    b.Node("Mul", {"s", "h"}, {"y"}, "mul");
    // oneDNN's swish post-op against the Sigmoid and Mul kernels: their exp functions differ.
    ExpectSameSwishResults(b, 1, 1, 1e-5);
    CompileStats stats;
    auto def = Compile(b, true, &stats);
    ASSERT_TRUE(def.ok());
    EXPECT_EQ(stats.fused_convs, 1);
    ASSERT_EQ(def->kernels.size(), 1u);
    EXPECT_EQ(def->kernels[0].op, "FusedConv");
    EXPECT_EQ(def->kernels[0].node_name, scaled ? "conv+scale+sigmoid+mul" : "conv+sigmoid+mul");
    auto activation = def->kernels[0].attrs.String("activation");
    ASSERT_TRUE(activation.ok());
    EXPECT_EQ(*activation, "Swish");
    auto params = def->kernels[0].attrs.Floats("activation_params");
    ASSERT_TRUE(params.ok());
    EXPECT_EQ(*params, std::vector<float>{scaled ? 0.5f : 1.0f});
  }
}

TEST(SwishRecognition, AfterAMatMulByAConstantItBecomesTheFusedMatMulEpilogue) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, {2, 3, 4, 6});
  std::vector<float> w(5 * 6), bias(6);
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  b.FloatInit("w", {5, 6}, w).FloatInit("bias", {6}, bias);
  b.Node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.Node("Add", {"m", "bias"}, {"h"}, "add");
  b.Node("Sigmoid", {"h"}, {"s"}, "sigmoid");
  b.Node("Mul", {"h", "s"}, {"y"}, "mul");
  ExpectSameSwishResults(b, 1, 1, 1e-5);
  CompileStats stats;
  auto def = Compile(b, true, &stats);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(stats.fused_matmuls, 1);
  ASSERT_EQ(def->kernels.size(), 1u);
  EXPECT_EQ(def->kernels[0].op, "FusedMatMul");
  auto activation = def->kernels[0].attrs.String("activation");
  ASSERT_TRUE(activation.ok());
  EXPECT_EQ(*activation, "Swish");
}

// ---------------------------------------------------------------------------
// GELU.

// y = gelu(x) = x * (1 + erf(x / sqrt(2))) / 2 written out with e = Add(Erf(scale), 1),
// the scale Div(x, sqrt(2)) or (`by_reciprocal`) Mul(x, 1 / sqrt(2)), then by `kind`:
//   0  Mul(Mul(x, e) "mul", 0.5) "half"      1  Div(Mul(x, e) "mul", 2) "half"
//   2  Mul(Mul(x, 0.5) "half", e) "mul"      3  Mul(x, Mul(e, 0.5) "half") "mul"
// `swap` puts constants (and e) first in each Mul and Add. The near misses: `sqrt2` is
// the divisor, `one` what is added; `erf_is_output` also makes the Erf's output a graph
// output; `other` multiplies by input z where x belongs (its core still reads x).
struct GeluForm {
  int kind = 0;
  bool by_reciprocal = false;
  bool swap = false;
  float sqrt2 = 1.41421356f;
  float one = 1.0f;
  bool erf_is_output = false;
  bool other = false;
};

OnnxModelBuilder GeluModel(const GeluForm& f, OnnxModelBuilder b, const std::string& x = "x") {
  if (f.other) b.Input("z", kFloat, kX);
  if (f.erf_is_output) b.Output("r", kFloat, kX);
  auto pair = [&](const std::string& v, const std::string& k) {
    return f.swap ? std::vector<std::string>{k, v} : std::vector<std::string>{v, k};
  };
  b.FloatInit("sqrt2", {}, {f.sqrt2}).FloatInit("rsqrt2", {1}, {1.0f / f.sqrt2});
  b.FloatInit("one", {}, {f.one}).FloatInit("half_k", {}, {0.5f}).FloatInit("two", {}, {2.0f});
  if (f.by_reciprocal) {
    b.Node("Mul", pair(x, "rsqrt2"), {"t"}, "scale");
  } else {
    b.Node("Div", {x, "sqrt2"}, {"t"}, "scale");
  }
  b.Node("Erf", {"t"}, {"r"}, "erf");
  b.Node("Add", pair("r", "one"), {"e"}, "add");
  const std::string xs = f.other ? "z" : x;
  switch (f.kind) {
    case 0:
      b.Node("Mul", pair(xs, "e"), {"p"}, "mul");
      b.Node("Mul", pair("p", "half_k"), {"y"}, "half");
      break;
    case 1:
      b.Node("Mul", pair(xs, "e"), {"p"}, "mul");
      b.Node("Div", {"p", "two"}, {"y"}, "half");
      break;
    case 2:
      b.Node("Mul", pair(xs, "half_k"), {"p"}, "half");
      b.Node("Mul", pair("p", "e"), {"y"}, "mul");
      break;
    default:
      b.Node("Mul", pair("e", "half_k"), {"p"}, "half");
      b.Node("Mul", pair(xs, "p"), {"y"}, "mul");
      break;
  }
  return b;
}

OnnxModelBuilder GeluModel(const GeluForm& f) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  return GeluModel(f, std::move(b));
}

// Compiles `b` with and without recognition, checks the count of Gelu nodes made, and
// that both give the same outputs on values in [-8, 8] (and 0, +-1e-3) to `tol`
// relative.
void ExpectSameGeluResults(const OnnxModelBuilder& b, int expect, int inputs = 1, double tol = 1e-6) {
  CompileStats stats;
  auto got_def = Compile(b, true, &stats);
  ASSERT_TRUE(got_def.ok()) << got_def.status().ToString();
  EXPECT_EQ(stats.gelu_recognized, expect);
  EXPECT_EQ(stats.swish_recognized + stats.hardswish_recognized, 0);
  CompileStats off_stats;
  auto want_def = Compile(b, false, &off_stats);
  ASSERT_TRUE(want_def.ok()) << want_def.status().ToString();
  EXPECT_EQ(off_stats.gelu_recognized, 0);
  EXPECT_EQ(CountKernels(*want_def, "Erf"), 1);
  EXPECT_EQ(CountKernels(*want_def, "Gelu"), 0);
  ExpectOutputsNear(*want_def, *got_def, RandomInputs(inputs, 11, {0.0f, 1e-3f, -1e-3f}), tol);
}

TEST(GeluRecognition, EveryFormBecomesOneGelu) {
  for (int kind = 0; kind < 4; ++kind) {
    for (bool by_reciprocal : {false, true}) {
      for (bool swap : {false, true}) {
        GeluForm f;
        f.kind = kind;
        f.by_reciprocal = by_reciprocal;
        f.swap = swap;
        SCOPED_TRACE("kind " + std::to_string(kind) + (by_reciprocal ? ", x * (1/sqrt(2))" : ", x / sqrt(2)") +
                     (swap ? ", swapped" : ""));
        const OnnxModelBuilder b = GeluModel(f);
        ExpectSameGeluResults(b, 1);
        CompileStats stats;
        auto def = Compile(b, true, &stats);
        ASSERT_TRUE(def.ok());
        // One kernel is left: the Gelu, named after the five nodes it runs.
        ASSERT_EQ(def->kernels.size(), 1u);
        EXPECT_EQ(def->kernels[0].op, "Gelu");
        EXPECT_EQ(def->kernels[0].node_name, kind < 2 ? "scale+erf+add+mul+half" : "scale+erf+add+half+mul");
        EXPECT_EQ(stats.activation_nodes_absorbed, 4);
      }
    }
  }
}

TEST(GeluRecognition, NearMissesStayAsTheyAre) {
  GeluForm not_sqrt2;
  not_sqrt2.sqrt2 = 1.5f;
  ExpectSameGeluResults(GeluModel(not_sqrt2), 0);
  GeluForm not_one;
  not_one.one = 2.0f;
  not_one.kind = 3;
  ExpectSameGeluResults(GeluModel(not_one), 0);
  // The Erf's output is also a graph output: nothing may disappear.
  for (int kind = 0; kind < 4; ++kind) {
    GeluForm out;
    out.kind = kind;
    out.erf_is_output = true;
    ExpectSameGeluResults(GeluModel(out), 0);
    // z * (1 + erf(x / sqrt(2))) / 2: a gate of z by x, not x's GELU.
    GeluForm other;
    other.kind = kind;
    other.other = true;
    ExpectSameGeluResults(GeluModel(other), 0, 2);
  }
}

// The GELU after MatMul + bias (a transformer's feed-forward layer) becomes the
// FusedMatMul's epilogue (oneDNN's gelu_erf post-op on the CPU), as PyTorch writes it
// (kind 0), and after a Conv, the FusedConv's.
TEST(GeluRecognition, AfterAMatMulOrConvItBecomesTheEpilogue) {
  OnnxModelBuilder b(13);
  b.Input("x", kFloat, kX).Output("y", kFloat, kX);
  std::vector<float> w(5 * 5), bias(5);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  b.FloatInit("w", {5, 5}, w).FloatInit("bias", {5}, bias);
  b.Node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.Node("Add", {"m", "bias"}, {"h"}, "bias_add");
  const OnnxModelBuilder mm = GeluModel(GeluForm{}, std::move(b), "h");
  const OnnxModelBuilder conv = GeluModel(GeluForm{}, ConvModel(8), "h");
  for (const OnnxModelBuilder* model : {&mm, &conv}) {
    const bool is_mm = model == &mm;
    SCOPED_TRACE(is_mm ? "MatMul" : "Conv");
    // oneDNN's gelu_erf post-op against the Erf kernel: their erf functions differ.
    ExpectSameGeluResults(*model, 1, 1, 1e-5);
    CompileStats stats;
    auto def = Compile(*model, true, &stats);
    ASSERT_TRUE(def.ok());
    ASSERT_EQ(def->kernels.size(), 1u);
    EXPECT_EQ(def->kernels[0].op, is_mm ? "FusedMatMul" : "FusedConv");
    EXPECT_EQ(def->kernels[0].node_name,
              std::string(is_mm ? "matmul+bias_add" : "conv") + "+scale+erf+add+mul+half");
    auto activation = def->kernels[0].attrs.String("activation");
    ASSERT_TRUE(activation.ok());
    EXPECT_EQ(*activation, "Gelu");
  }
}

}  // namespace activation_patterns_test
}  // namespace remex::compiler
