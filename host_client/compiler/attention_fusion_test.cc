// The attention fusion pass (passes/attention_fusion.h): an encoder layer's attention
// (heads split by Reshape and Transpose, Div scale, mask Add, Softmax, heads merged)
// and a decoder step's (K and V from Concat with a cache of dynamic length, K^T by a
// Transpose, Mul scale) each become one FusedAttention kernel whose results match the
// same graph compiled without the pass; and what must not fuse (an intermediate that is
// a graph output, Softmax along another axis, a mask that grows the scores, the option
// off).
#include "host_client/compiler/passes/attention_fusion.h"

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
namespace attention_fusion_test {

using remex::testing::CountKernels;
using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::RunFloat32Outputs;

constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<float> Random(size_t n, uint32_t seed) { return remex::testing::UniformFloats(n, seed); }

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, bool fuse, CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(b.Bytes(), Registry()));
  CompileOptions options;
  options.fuse_attention = fuse;
  return CompileGraph(std::move(graph), Registry(), options, stats);
}

// y = MatMul(x, w) with w [in, out] random.
void Linear(OnnxModelBuilder& b, const std::string& x, const std::string& y, int64_t in, int64_t out,
            uint32_t seed) {
  b.FloatInit(y + ".w", {in, out}, Random(static_cast<size_t>(in * out), seed));
  b.Node("MatMul", {x, y + ".w"}, {y}, y);
}

// [B, S, H * D] -> [B, H, S, D]: Reshape by `split`, Transpose [0, 2, 1, 3].
void Heads(OnnxModelBuilder& b, const std::string& x, const std::string& y) {
  b.Node("Reshape", {x, "split"}, {y + ".bshd"}, y + ".reshape");
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {y + ".bshd"}, {y}, y + ".transpose"), "perm", {0, 2, 1, 3});
}

// The query, key and value projections of x [B, S, width] split into heads: qh, kh, vh.
void QueryKeyValueHeads(OnnxModelBuilder& b, int64_t width, uint32_t seed) {
  for (const char* t : {"q", "k", "v"}) {
    Linear(b, "x", t, width, width, seed++);
    Heads(b, t, std::string(t) + "h");
  }
}

struct EncoderVariant {
  int64_t batch = 2;          // x's batch
  Shape mask = {2, 1, 1, 6};  // the mask input's shape
  int64_t softmax_axis = -1;
  bool probs_output = false;  // the probabilities are a graph output too
};

// One encoder layer's attention: x [batch, 6, 32], 4 heads of 8, as torch.onnx.export
// writes a BERT layer: y [2, 6, 32].
OnnxModelBuilder Encoder(const EncoderVariant& v = {}) {
  OnnxModelBuilder b(17);
  b.Input("x", kFloat, {v.batch, 6, 32});
  b.Input("mask", kFloat, v.mask);
  b.Int64Init("split", {4}, {v.batch, 6, 4, 8});
  b.Int64Init("merge", {3}, {2, 6, 32});
  b.FloatInit("sqrt_d", {}, {std::sqrt(8.0f)});
  QueryKeyValueHeads(b, 32, 1);
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"kh"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  b.Node("MatMul", {"qh", "kt"}, {"scores"}, "scores");
  b.Node("Div", {"scores", "sqrt_d"}, {"scaled"}, "scaled");
  b.Node("Add", {"scaled", "mask"}, {"masked"}, "masked");
  OnnxModelBuilder::IntAttr(b.Node("Softmax", {"masked"}, {"probs"}, "probs"), "axis", v.softmax_axis);
  b.Node("MatMul", {"probs", "vh"}, {"ctx"}, "ctx");
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"ctx"}, {"ctx.bshd"}, "ctx.transpose"), "perm",
                             {0, 2, 1, 3});
  b.Node("Reshape", {"ctx.bshd", "merge"}, {"y"}, "y");
  b.Output("y", kFloat, {2, 6, 32});
  if (v.probs_output) b.Output("probs", kFloat, {v.batch, 4, 6, 6});
  return b;
}

// The outputs of `b` compiled with and without the pass on the same inputs, and the
// fused executable's FusedAttention kernels.
struct Comparison {
  int fused = -1;
  double max_diff = 1e9;
  CompileStats stats;
};
Comparison Compare(const OnnxModelBuilder& b, const std::vector<Shape>& shapes) {
  Comparison c;
  auto fused = Compile(b, true, &c.stats);
  auto plain = Compile(b, false);
  EXPECT_TRUE(fused.ok()) << fused.status().ToString();
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
  if (!fused.ok() || !plain.ok()) return c;
  EXPECT_EQ(CountKernels(*plain, "FusedAttention"), 0);
  c.fused = CountKernels(*fused, "FusedAttention");
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    inputs.push_back(Random(static_cast<size_t>(*NumElements(shapes[i])), 10 + i));
  const auto want = RunFloat32Outputs(*plain, shapes, inputs);
  const auto got = RunFloat32Outputs(*fused, shapes, inputs);
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return c;
  c.max_diff = 0;
  for (size_t o = 0; o < got.size(); ++o) {
    EXPECT_EQ(got[o].size(), want[o].size());
    for (size_t i = 0; i < got[o].size() && i < want[o].size(); ++i) {
      c.max_diff = std::max(c.max_diff, static_cast<double>(std::abs(got[o][i] - want[o][i])));
    }
  }
  return c;
}

TEST(AttentionFusionTest, AnEncoderLayersAttentionBecomesOneKernel) {
  const Comparison c = Compare(Encoder(), {{2, 6, 32}, {2, 1, 1, 6}});
  EXPECT_EQ(c.fused, 1);
  EXPECT_LT(c.max_diff, 1e-5);
  EXPECT_EQ(c.stats.fused_attentions, 1);
  // The Q, K, V and K^T Transposes, two MatMuls, Div, Add, Softmax and the merging Transpose.
  EXPECT_EQ(c.stats.attention_nodes, 10);
  auto fused = Compile(Encoder(), true);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(CountKernels(*fused, "Softmax"), 0);
  EXPECT_EQ(CountKernels(*fused, "Transpose"), 0);
  // A mask of the scores' whole shape, one without its leading dims, none.
  EXPECT_EQ(Compare(Encoder({.mask = {2, 4, 6, 6}}), {{2, 6, 32}, {2, 4, 6, 6}}).fused, 1);
  EXPECT_LT(Compare(Encoder({.mask = {6, 6}}), {{2, 6, 32}, {6, 6}}).max_diff, 1e-5);
}

TEST(AttentionFusionTest, WhatMustNotFuseStaysApart) {
  // The probabilities are also a graph output.
  EXPECT_EQ(Compare(Encoder({.probs_output = true}), {{2, 6, 32}, {2, 1, 1, 6}}).fused, 0);
  // Softmax along the queries, not the keys.
  EXPECT_EQ(Compare(Encoder({.softmax_axis = 2}), {{2, 6, 32}, {2, 1, 1, 6}}).fused, 0);
  // A batch-1 x whose mask has batch 2: the Add grows the scores to [2, 4, 6, 6].
  EXPECT_EQ(Compare(Encoder({.batch = 1, .mask = {2, 1, 1, 6}}), {{1, 6, 32}, {2, 1, 1, 6}}).fused, 0);
  // The option off (CompileOptions::fuse_attention; the CUDA device's default).
  auto plain = Compile(Encoder(), false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(CountKernels(*plain, "Softmax"), 1);
}

// A decoder step: x [1, new, 16] (new tokens), 2 heads of 8, the caches past_k and
// past_v [1, 2, past, 8]: both lengths dynamic, the head shapes computed from x's shape
// (Shape, Gather, Unsqueeze, Concat) as exporters write them; present_k and present_v are
// outputs as well. Inference names the keys' length past + new by no expression ("?"),
// only by its samples. With `causal_mask`, the mask [new, past + new] is built as
// exporters build it (Range, Less, Where: -1e9 where a key lies after the query).
OnnxModelBuilder DecoderStep(bool causal_mask) {
  OnnxModelBuilder b(17);
  b.Input("x", kFloat, {1, -1, 16});
  b.Input("past_k", kFloat, {1, 2, -1, 8});
  b.Input("past_v", kFloat, {1, 2, -1, 8});
  b.Int64Init("one_1", {1}, {1});
  b.Int64Init("heads_1", {1}, {2});
  b.Int64Init("dim_1", {1}, {8});
  b.Int64Init("hidden_1", {1}, {16});
  b.Int64Init("axis0", {1}, {0});
  b.Int64Init("axis1", {1}, {1});
  b.Int64Init("i1", {}, {1});
  b.Node("Shape", {"x"}, {"x_shape"}, "x_shape");
  OnnxModelBuilder::IntAttr(b.Node("Gather", {"x_shape", "i1"}, {"new_len"}, "new_len"), "axis", 0);
  b.Node("Unsqueeze", {"new_len", "axis0"}, {"new_1"}, "new_1");
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"one_1", "new_1", "heads_1", "dim_1"}, {"split"}, "split"), "axis", 0);
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"one_1", "new_1", "hidden_1"}, {"merge"}, "merge"), "axis", 0);
  b.FloatInit("inv_sqrt_d", {}, {1.0f / std::sqrt(8.0f)});
  QueryKeyValueHeads(b, 16, 4);
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"past_k", "kh"}, {"present_k"}, "present_k"), "axis", 2);
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"past_v", "vh"}, {"present_v"}, "present_v"), "axis", 2);
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"present_k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  b.Node("MatMul", {"qh", "kt"}, {"scores"}, "scores");
  b.Node("Mul", {"inv_sqrt_d", "scores"}, {"scaled"}, "scaled");
  std::string logits = "scaled";
  if (causal_mask) {
    b.Int64Init("two", {}, {2});
    b.Int64Init("zero", {}, {0});
    b.FloatInit("neg", {}, {-1e9f});
    b.FloatInit("none", {}, {0.0f});
    b.Node("Shape", {"past_k"}, {"past_shape"}, "past_shape");
    OnnxModelBuilder::IntAttr(b.Node("Gather", {"past_shape", "two"}, {"past_len"}, "past_len"), "axis", 0);
    b.Node("Add", {"past_len", "new_len"}, {"total"}, "total");
    b.Node("Range", {"past_len", "total", "i1"}, {"rows"}, "rows");
    b.Node("Range", {"zero", "total", "i1"}, {"cols"}, "cols");
    b.Node("Unsqueeze", {"rows", "axis1"}, {"rows2"}, "rows2");
    b.Node("Unsqueeze", {"cols", "axis0"}, {"cols2"}, "cols2");
    b.Node("Less", {"rows2", "cols2"}, {"later"}, "later");
    b.Node("Where", {"later", "neg", "none"}, {"mask"}, "mask");
    b.Node("Add", {"scaled", "mask"}, {"masked"}, "masked");
    logits = "masked";
  }
  OnnxModelBuilder::IntAttr(b.Node("Softmax", {logits}, {"probs"}, "probs"), "axis", 3);
  b.Node("MatMul", {"probs", "present_v"}, {"ctx"}, "ctx");
  OnnxModelBuilder::IntsAttr(b.Node("Transpose", {"ctx"}, {"ctx.bshd"}, "ctx.transpose"), "perm", {0, 2, 1, 3});
  b.Node("Reshape", {"ctx.bshd", "merge"}, {"y"}, "y");
  b.Output("y", kFloat, {1, -1, 16});
  b.Output("present_k", kFloat, {1, 2, -1, 8});
  b.Output("present_v", kFloat, {1, 2, -1, 8});
  return b;
}

TEST(AttentionFusionTest, ADecoderStepWithACacheOfAnyLengthBecomesOneKernel) {
  for (bool causal_mask : {false, true}) {
    for (int64_t past : {0, 1, 5}) {
      const Comparison c = Compare(DecoderStep(causal_mask), {{1, 3, 16}, {1, 2, past, 8}, {1, 2, past, 8}});
      EXPECT_EQ(c.fused, 1) << "past " << past << " causal mask " << causal_mask;
      EXPECT_LT(c.max_diff, 1e-5) << "past " << past << " causal mask " << causal_mask;
      // Q's head Transpose, K^T, two MatMuls, Mul, (Add), Softmax, the merging Transpose;
      // K's and V's head Transposes feed the Concats and stay.
      EXPECT_EQ(c.stats.attention_nodes, causal_mask ? 8 : 7);
    }
  }
}

}  // namespace attention_fusion_test
}  // namespace remex::compiler
