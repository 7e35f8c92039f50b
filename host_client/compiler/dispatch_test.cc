// Shape-bucket dispatch: the SPEC grammar, the bucket grid within bounds, and
// bucketed executables run on the CPU VM against the generic function: the same
// outputs inside, at the edges of and outside the buckets, the bucket that served
// each call, zero allocations after warm-up, shared weights and the --strict refusal.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/dispatch.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/compiler/vm_test_util.h"
#include "vm/bytecode.h"
#include "vm/vm.h"

namespace remex::compiler {
namespace dispatch_test {

using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(DispatchSpecTest, ParsesTheThreeStrategies) {
  auto log = ParseDispatchSpec("W=log:2:32:2048");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->symbol, "W");
  EXPECT_EQ(log->kind, DispatchSpec::Kind::kLogarithmic);
  EXPECT_EQ(log->base, 2);
  EXPECT_EQ(log->min, 32);
  EXPECT_EQ(log->max, 2048);
  auto uniform = ParseDispatchSpec("p2o.DynamicDimension.1=uniform:64");
  ASSERT_TRUE(uniform.ok()) << uniform.status().ToString();
  EXPECT_EQ(uniform->symbol, "p2o.DynamicDimension.1");
  EXPECT_EQ(uniform->kind, DispatchSpec::Kind::kUniform);
  EXPECT_EQ(uniform->step, 64);
  EXPECT_EQ(uniform->min, -1);
  auto edges = ParseDispatchSpec("x:3=edges:32,100,320");
  ASSERT_TRUE(edges.ok()) << edges.status().ToString();
  EXPECT_EQ(edges->symbol, "x:3");
  EXPECT_EQ(edges->edges, (std::vector<int64_t>{32, 100, 320}));
}

TEST(DispatchSpecTest, RejectsMalformedSpecsByName) {
  for (const char* bad : {"W", "=log:2", "W=cubic:2", "W=log", "W=log:2:32", "W=log:1", "W=log:2:64:32",
                          "W=log:2:0:64", "W=uniform:0", "W=edges:", "W=edges:64,32", "W=edges:8,x", "W=log:-2"}) {
    auto spec = ParseDispatchSpec(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    if (!spec.ok()) {
      EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(spec.status().message().find("--dispatch '"), std::string::npos) << spec.status().ToString();
    }
  }
}

TEST(DispatchSpecTest, BucketsFollowTheEdgesWithinTheBounds) {
  auto ranges = [](const char* text, DimBounds b) {
    auto spec = ParseDispatchSpec(text);
    EXPECT_TRUE(spec.ok()) << text;
    auto r = BucketRanges(*spec, b);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Ranges{};
  };
  EXPECT_EQ(ranges("W=log:2:32:256", {1, -1}), (Ranges{{1, 32}, {33, 64}, {65, 128}, {129, 256}}));
  // The upper bound clips the last bucket and prunes those past it.
  EXPECT_EQ(ranges("W=log:2:32:2048", {1, 200}), (Ranges{{1, 32}, {33, 64}, {65, 128}, {129, 200}}));
  // MAX that is not a power of the base: the last edge is the first power past it.
  EXPECT_EQ(ranges("W=log:4:16:100", {16, -1}), (Ranges{{16, 16}, {17, 64}, {65, 256}}));
  // Without MIN:MAX the spec takes the bounds; uniform edges are multiples of STEP.
  EXPECT_EQ(ranges("W=uniform:100", {1, 250}), (Ranges{{1, 100}, {101, 200}, {201, 250}}));
  EXPECT_EQ(ranges("W=uniform:64:100:300", {1, -1}), (Ranges{{1, 128}, {129, 192}, {193, 256}, {257, 320}}));
  // The lower bound prunes edges below it.
  EXPECT_EQ(ranges("W=edges:16,32,64", {20, 50}), (Ranges{{20, 32}, {33, 50}}));

  auto no_bound = BucketRanges(*ParseDispatchSpec("W=log:2"), {1, -1});
  ASSERT_FALSE(no_bound.ok());
  EXPECT_NE(no_bound.status().message().find("--bound W=MIN:MAX"), std::string::npos);
  auto none_left = BucketRanges(*ParseDispatchSpec("W=edges:8,16"), {32, 64});
  ASSERT_FALSE(none_left.ok());
  EXPECT_NE(none_left.status().message().find("leaves no bucket"), std::string::npos);
}

TEST(DispatchSpecTest, SeveralDimsMultiplyIntoAGrid) {
  std::vector<DispatchSpec> specs = {*ParseDispatchSpec("H=edges:32,64"), *ParseDispatchSpec("W=log:2:32:256")};
  auto grid = MakeBucketGrid(specs, {{"H", {1, 64}}, {"W", {1, 256}}});
  ASSERT_TRUE(grid.ok()) << grid.status().ToString();
  ASSERT_EQ(grid->size(), 8u);
  EXPECT_EQ((*grid)[0].FunctionName("main"), "main[H=1..32,W=1..32]");
  EXPECT_EQ((*grid)[7].FunctionName("main"), "main[H=33..64,W=129..256]");
  auto too_many = MakeBucketGrid(specs, {{"H", {1, 64}}, {"W", {1, 256}}}, 7);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("more than 7 buckets"), std::string::npos);
  specs.push_back(*ParseDispatchSpec("W=edges:8"));
  auto twice = MakeBucketGrid(specs, {{"H", {1, 64}}, {"W", {1, 256}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("names 'W' twice"), std::string::npos);
}

// x [1, 3, 8, d3] -> four 3x3 convolutions (pad 1) -> y [1, 4, 8, d3]: three
// intermediates, the first and the third of which can share memory.
OnnxModelBuilder ConvChain() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, -1}).Output("y", onnx::TensorProto::FLOAT, {1, 4, 8, -1});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  auto weights = [&](size_t n) {
    std::vector<float> w(n);
    for (float& v : w) v = dist(rng);
    return w;
  };
  b.FloatInit("w0", {4, 3, 3, 3}, weights(108));
  for (const char* w : {"w1", "w2", "w3"}) b.FloatInit(w, {4, 4, 3, 3}, weights(144));
  const char* names[] = {"x", "t0", "t1", "t2", "y"};
  const char* ws[] = {"w0", "w1", "w2", "w3"};
  for (int i = 0; i < 4; ++i) {
    auto* conv = b.Node("Conv", {names[i], ws[i]}, {names[i + 1]}, "conv" + std::to_string(i));
    OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  }
  return b;
}

StatusOr<vm::ExecutableDef> Compile(const OnnxModelBuilder& b, const CompileOptions& options,
                                    CompileStats* stats = nullptr) {
  REMEX_ASSIGN_OR_RETURN(Graph g, ImportOnnxBytes(b.Bytes(), Registry()));
  return CompileGraph(std::move(g), Registry(), options, stats);
}

struct Machine : remex::testing::CpuMachine {
  using CpuMachine::CpuMachine;
  using CpuMachine::Run;
  vm::TensorPtr Input(int64_t width) {
    auto t = vm::AllocateTensor(*allocator, DType::kFloat32, {1, 3, 8, width});
    float* p = static_cast<float*>((*t)->data());
    for (int64_t i = 0; i < 24 * width; ++i) p[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
    return *t;
  }
  StatusOr<std::vector<float>> Run(int64_t width) {
    REMEX_ASSIGN_OR_RETURN(auto out, Run(std::vector<vm::TensorPtr>{Input(width)}));
    const float* p = static_cast<const float*>(out[0]->data());
    return std::vector<float>(p, p + *NumElements(out[0]->shape));
  }
  std::string Served() const {
    return vm->executable().def().functions[vm->last_invoke_function()].name;
  }
};

CompileOptions Bucketed(const char* spec, bool strict = false) {
  CompileOptions o;
  o.bounds = {{"d3", {1, 64}}};
  o.dispatch = {*ParseDispatchSpec(spec)};
  o.strict_dispatch = strict;
  return o;
}

TEST(DispatchTest, BucketsServeTheirShapesWithTheGenericOutputs) {
  CompileOptions generic_options;
  generic_options.bounds = {{"d3", {1, 64}}};
  auto generic = Compile(ConvChain(), generic_options);
  ASSERT_TRUE(generic.ok()) << generic.status().ToString();
  // The bound is wider than the buckets, so 33..64 runs the generic function.
  CompileStats stats;
  auto bucketed = Compile(ConvChain(), Bucketed("d3=edges:16,17,32"), &stats);
  ASSERT_TRUE(bucketed.ok()) << bucketed.status().ToString();
  ASSERT_EQ(stats.buckets, 3);
  ASSERT_EQ(bucketed->functions.size(), 5u);
  EXPECT_EQ(bucketed->functions[0].name, "main");
  EXPECT_EQ(bucketed->functions[1].name, "main[d3=1..16]");
  EXPECT_EQ(bucketed->functions[2].name, "main[d3=17]");
  EXPECT_EQ(bucketed->functions[3].name, "main[d3=18..32]");
  EXPECT_EQ(bucketed->functions[4].name, "main.generic");

  Machine g(*generic), b(*bucketed);
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {1, "main[d3=1..16]"},  {9, "main[d3=1..16]"},   {16, "main[d3=1..16]"}, {17, "main[d3=17]"},
      {18, "main[d3=18..32]"}, {32, "main[d3=18..32]"}, {33, "main.generic"},  {64, "main.generic"}};
  for (const auto& [width, served] : cases) {
    auto want = g.Run(width);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = b.Run(width);
    ASSERT_TRUE(got.ok()) << "width " << width << ": " << got.status().ToString();
    EXPECT_EQ(*got, *want) << "width " << width;
    EXPECT_EQ(b.Served(), served) << "width " << width;
  }
}

// The ops of the kernels `fn` invokes, by count.
std::map<std::string, int> KernelOps(const vm::ExecutableDef& def, const vm::FunctionDef& fn) {
  std::map<std::string, int> ops;
  for (const vm::Instruction& inst : fn.code) {
    vm::VisitOperands(inst, [&](char kind, int64_t v) {
      if (kind == 'k') ops[def.kernels[v].op]++;
    });
  }
  return ops;
}

TEST(DispatchTest, EachBucketCompilesWithItsTunedChoices) {
  // The second bucket channels-last, the first as the options say.
  CompileOptions options = Bucketed("d3=edges:16,32");
  TunedChoices nhwc = ChoicesOf(options);
  nhwc.layout = Layout::kNhwc;
  nhwc.compute_threads = 1;
  options.bucket_choices["main[d3=17..32]"] = nhwc;
  CompileStats stats;
  auto def = Compile(ConvChain(), options, &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_EQ(def->functions.size(), 4u);
  ASSERT_EQ(def->functions[2].name, "main[d3=17..32]");
  // Channels-last: Transposes at the graph's edges.
  EXPECT_EQ(KernelOps(*def, def->functions[1])["Transpose"], 0);
  EXPECT_GT(KernelOps(*def, def->functions[2])["Transpose"], 0);
  EXPECT_EQ(KernelOps(*def, def->functions[3])["Transpose"], 0);
  // Its compute threads are the bucket's own; the others keep the device's (0).
  EXPECT_EQ(def->functions[2].compute_threads, 1u);
  EXPECT_EQ(def->functions[1].compute_threads, 0u);
  EXPECT_EQ(def->functions[3].compute_threads, 0u);  // the generic function: the options'
  // The same outputs as the untuned executable, each bucket serving its widths.
  auto plain = Compile(ConvChain(), Bucketed("d3=edges:16,32"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  Machine p(*plain), t(*def);
  for (int64_t width : {9, 20, 32}) {
    auto want = p.Run(width);
    auto got = t.Run(width);
    ASSERT_TRUE(want.ok() && got.ok()) << width;
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) ASSERT_NEAR((*got)[i], (*want)[i], 1e-4f) << width << " at " << i;
  }
  EXPECT_EQ(t.Served(), "main[d3=17..32]");

  // A name that is no bucket, and without --dispatch any name but "main", are refused.
  CompileOptions stale = Bucketed("d3=edges:16,32");
  stale.bucket_choices["main[d3=1..8]"] = nhwc;
  auto refused = Compile(ConvChain(), stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("'main[d3=1..8]', which is no bucket of this --dispatch (its buckets: "
                                            "main[d3=1..16], main[d3=17..32])"),
            std::string::npos)
      << refused.status().ToString();
  CompileOptions single;
  single.bounds = {{"d3", {1, 64}}};
  single.bucket_choices["main[d3=17..32]"] = nhwc;
  EXPECT_FALSE(Compile(ConvChain(), single).ok());
  // "main" without --dispatch: the whole function takes the choices.
  single.bucket_choices = {{"main", nhwc}};
  auto whole = Compile(ConvChain(), single);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_GT(KernelOps(*whole, whole->functions[0])["Transpose"], 0);
}

// The attribute `name` of the kernel of node `node` in function `fn`; -100 when absent.
int64_t NodeAttr(const vm::ExecutableDef& def, const vm::FunctionDef& fn, const std::string& node,
                 const std::string& name) {
  int64_t out = -100;
  for (const vm::Instruction& inst : fn.code) {
    vm::VisitOperands(inst, [&](char kind, int64_t v) {
      if (kind == 'k' && def.kernels[v].node_name == node && def.kernels[v].attrs.Has(name)) {
        out = *def.kernels[v].attrs.Int(name);
      }
    });
  }
  return out;
}

TEST(DispatchTest, NodeAttrsReachTheNamedKernelsWithinTheOpsRanges) {
  CompileOptions options = Bucketed("d3=edges:16,32");
  TunedChoices tuned = ChoicesOf(options);
  tuned.node_attrs = {{"conv1", {{"cudnn_algo", 1}, {"cudnn_math", 3}}}};
  options.bucket_choices["main[d3=17..32]"] = tuned;
  auto def = Compile(ConvChain(), options);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  const vm::FunctionDef& narrow = def->functions[1];
  const vm::FunctionDef& wide = def->functions[2];
  ASSERT_EQ(wide.name, "main[d3=17..32]");
  EXPECT_EQ(NodeAttr(*def, wide, "conv1", "cudnn_algo"), 1);
  EXPECT_EQ(NodeAttr(*def, wide, "conv1", "cudnn_math"), 3);
  EXPECT_EQ(NodeAttr(*def, wide, "conv0", "cudnn_algo"), -100);
  EXPECT_EQ(NodeAttr(*def, narrow, "conv1", "cudnn_algo"), -100);  // the other bucket: untouched
  // The CPU kernels ignore them: the same outputs.
  auto plain = Compile(ConvChain(), Bucketed("d3=edges:16,32"));
  ASSERT_TRUE(plain.ok());
  Machine p(*plain), t(*def);
  EXPECT_EQ(*t.Run(20), *p.Run(20));

  auto refused = [&](NodeAttrs attrs, const std::string& why) {
    CompileOptions o;
    o.bounds = {{"d3", {1, 64}}};
    o.node_attrs = std::move(attrs);
    auto r = Compile(ConvChain(), o);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().ToString();
  };
  refused({{"conv9", {{"cudnn_algo", 0}}}}, "tuned node 'conv9' is no node of the compiled graph");
  refused({{"conv1", {{"cublaslt_algo", 0}}}}, "Conv has no tunable attribute 'cublaslt_algo'");
  refused({{"conv1", {{"cudnn_algo", 8}}}}, "cudnn_algo must be in [-1, 7], got 8");
  refused({{"conv1", {{"cudnn_math", -2}}}}, "cudnn_math must be in [-1, 3], got -2");
}

TEST(DispatchTest, ClonesPlanTheirMemoryAndShareTheWeights) {
  CompileStats stats;
  auto def = Compile(ConvChain(), Bucketed("d3=edges:16,17,32"), &stats);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  // One copy of each weight, however many functions load it.
  EXPECT_EQ(def->constants.size(), 4u);
  const uint64_t weight_bytes = (108 + 3 * 144) * 4;
  EXPECT_EQ(stats.constant_bytes, weight_bytes);
  EXPECT_EQ(stats.constant_bytes_unshared, 4 * weight_bytes);  // 3 clones + generic

  ASSERT_EQ(stats.functions.size(), 5u);
  for (size_t i = 1; i <= 3; ++i) {
    const FunctionStats& f = stats.functions[i];
    EXPECT_EQ(f.role, "bucket");
    EXPECT_EQ(f.memory.planned, 3) << f.name;
    EXPECT_EQ(f.memory.dynamic, 0) << f.name;
    // t0 and t2 share a slot: the arena holds two intermediates, not three.
    EXPECT_LT(f.memory.arena_bytes[0], f.memory.unshared_bytes[0]) << f.name;
  }
  // Every slot starts and ends on a 256-byte boundary (what cuBLASLt assumes of its
  // operands), whatever the tensor sizes.
  int planned = 0;
  for (const vm::FunctionDef& fn : def->functions) {
    for (const vm::Instruction& inst : fn.code) {
      if (inst.op != vm::Opcode::kAllocPlanned) continue;
      ++planned;
      EXPECT_EQ(inst.scalars[4] % 256, 0) << fn.name << " slot offset " << inst.scalars[4];
      EXPECT_EQ(inst.scalars[5] % 256, 0) << fn.name << " slot size " << inst.scalars[5];
    }
  }
  EXPECT_EQ(planned, 9);
  // The width-16 bucket plans for its upper edge: [1, 4, 8, 16] float32 per slot.
  EXPECT_EQ(stats.functions[1].memory.arena_bytes[0], 2u * 4 * 8 * 16 * 4);
  // A single-size bucket is static: no shape function at run time.
  EXPECT_EQ(stats.functions[2].runtime_shape_functions, 0);
  EXPECT_GT(stats.functions[3].runtime_shape_functions, 0);
  EXPECT_EQ(stats.functions[0].role, "dispatcher");
  EXPECT_EQ(stats.functions[4].role, "generic");
}

TEST(DispatchTest, AfterWarmUpABucketedCallAllocatesNothing) {
  auto def = Compile(ConvChain(), Bucketed("d3=log:2:8:32"));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Machine m(*def);
  // Outputs written into bound buffers, as set_output / invoke_with_outputs do.
  auto run_bound = [&](int64_t width) -> uint64_t {
    auto y = vm::AllocateTensor(*m.allocator, DType::kFloat32, {1, 4, 8, width});
    EXPECT_TRUE(y.ok());
    EXPECT_TRUE(m.vm->SetOutput(0, 0, *y).ok());
    auto out = m.Run(width);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return m.vm->last_invoke_allocations();
  };
  // First call into a bucket: its arena. Then nothing, at any width of the bucket.
  EXPECT_EQ(run_bound(20), 1u);
  EXPECT_EQ(run_bound(20), 0u);
  EXPECT_EQ(run_bound(17), 0u);
  EXPECT_EQ(run_bound(32), 0u);
  EXPECT_EQ(run_bound(5), 1u);  // another bucket's first call
  EXPECT_EQ(run_bound(8), 0u);
  // The generic function (width 40 is past every bucket) allocates every intermediate.
  EXPECT_EQ(run_bound(40), 3u);
  EXPECT_EQ(run_bound(40), 3u);
  // An output not bound is one allocation.
  ASSERT_TRUE(m.vm->SetOutput(0, 0, nullptr).ok());
  ASSERT_TRUE(m.Run(20).ok());
  EXPECT_EQ(m.vm->last_invoke_allocations(), 1u);
}

TEST(DispatchTest, StrictRefusesShapesOutsideEveryBucket) {
  auto def = Compile(ConvChain(), Bucketed("d3=edges:16,32", /*strict=*/true));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  for (const auto& f : def->functions) EXPECT_NE(f.name, "main.generic");
  ASSERT_EQ(def->symbols.size(), 1u);
  EXPECT_EQ(def->symbols[0].max, 32);
  Machine m(*def);
  ASSERT_TRUE(m.Run(32).ok());
  EXPECT_EQ(m.Served(), "main[d3=17..32]");
  auto outside = m.Run(33);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("outside its bounds [1, 32]"), std::string::npos)
      << outside.status().ToString();
  // The VM keeps serving.
  ASSERT_TRUE(m.Run(3).ok());
  EXPECT_EQ(m.Served(), "main[d3=1..16]");
}

TEST(DispatchTest, SpecsMustNameSymbolicInputDims) {
  CompileOptions o;
  o.dispatch = {*ParseDispatchSpec("W=edges:16")};
  auto def = Compile(ConvChain(), o);
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("'W', which is no symbolic input dimension; the model's: d3 (x:3)"),
            std::string::npos)
      << def.status().ToString();
  // A symbol may be named by its site INPUT:AXIS, in --dispatch and --bound alike.
  o.dispatch = {*ParseDispatchSpec("x:3=edges:16")};
  o.bounds = {{"x:3", {1, 32}}};
  def = Compile(ConvChain(), o);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->functions[1].name, "main[d3=1..16]");
  EXPECT_EQ(def->symbols.at(0).max, 32);
  o.bounds = {{"x:2", {1, 32}}};  // a static dim
  def = Compile(ConvChain(), o);
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("--bound names 'x:2'"), std::string::npos) << def.status().ToString();
  o.bounds = {};
  o.dispatch = {*ParseDispatchSpec("d3=log:2")};  // no bounds, no MIN:MAX
  def = Compile(ConvChain(), o);
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("needs MIN:MAX or an upper bound"), std::string::npos)
      << def.status().ToString();
}

}  // namespace dispatch_test
}  // namespace remex::compiler
