// The profile and comparison commands of the remex CLI against a real remex-server
// process: `remex bench --profile` per node (names, run-time shapes, the slowest
// first, the median over several invokes), `--trace` (trace-event JSON), `remex bench
// --variant` (variants benchmarked interleaved in one table) and `remex diff` (two saved
// reports side by side).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "host_client/compiler/onnx_test_util.h"
#include "tests/cli_test_util.h"

namespace remex {
namespace {

using nlohmann::json;
using remex::testing::OnnxModelBuilder;

constexpr int kIn = 8, kOut = 32;

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
  return v;
}

// y = Add(Relu(Conv(x, W, B)), c): x float32 [N, 8, 64, 64] (N symbolic), a 3x3 Conv
// of 8 to 32 channels (pads 1) named conv_1, Relu relu_1 (fused into the Conv), and a
// small Add of a [32, 1, 1] constant named add_1.
std::string SaveModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, kIn, 64, 64})
      .Output("y", onnx::TensorProto::FLOAT, {-1, kOut, 64, 64});
  b.FloatInit("W", {kOut, kIn, 3, 3}, Ramp(kOut * kIn * 9, 0.01f));
  b.FloatInit("B", {kOut}, Ramp(kOut, 0.1f));
  b.FloatInit("c", {kOut, 1, 1}, Ramp(kOut, 0.5f));
  auto* conv = b.Node("Conv", {"x", "W", "B"}, {"h"}, "conv_1");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"h"}, {"r"}, "relu_1");
  b.Node("Add", {"r", "c"}, {"y"}, "add_1");
  const std::string path = dir + "/conv_relu_add.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

class CliProfileTest : public remex::testing::CliTest {
 protected:
  CliProfileTest() : CliTest("remex_cli_profile") {}
  void SetUp() override {
    CliTest::SetUp();
    model_ = SaveModel(dir_);
  }

  json ReadJson(const std::string& path) {
    std::ifstream in(path);
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << path;
    return j;
  }

  std::string model_;
};

// A fixed, short run: exactly the first request's samples (--repeat of them).
constexpr const char* kQuick = " --min-duration-s 0 --min-samples 0 --max-trials 1";

std::string Shape(const json& operand) {
  if (operand.is_null()) return "-";
  std::string s = operand["dtype"].get<std::string>() + "[";
  for (size_t i = 0; i < operand["shape"].size(); ++i) s += (i ? "," : "") + operand["shape"][i].dump();
  return s + "]";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per node: the model's node names (a fused kernel names every node it runs), its op,
// the operands' shapes as they were at run time (the executable's batch is symbolic:
// the shape comes from the call), the slowest node first, and the median over the runs.
TEST_F(CliProfileTest, ProfilePerNodeNamesShapesAndMedianOverRuns) {
  const std::string rmx = dir_ + "/m.rmx";
  ASSERT_EQ(Cli("compile " + model_ + " -o " + rmx + " > /dev/null").exit_code, 0);
  auto r = Cli("bench " + rmx + Server() +
               " --shape x=2x8x64x64 --profile --profile-runs 5 --json --repeat 3" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json profile = Json(r)["profile"];
  // The op-kind summary is kept.
  std::set<std::string> kernel_rows;
  for (const auto& row : profile["rows"]) {
    if (row["kind"] == "kernel") kernel_rows.insert(row["name"].get<std::string>());
  }
  EXPECT_TRUE(kernel_rows.count("FusedConv")) << profile.dump(1);
  EXPECT_EQ(profile["runs"], 5);
  EXPECT_TRUE(profile["synchronized"].get<bool>());
  ASSERT_EQ(profile["run_total_ms"].size(), 5u);
  // The rows and the total are the median run's.
  EXPECT_DOUBLE_EQ(profile["total_ms"].get<double>(),
                   Median(profile["run_total_ms"].get<std::vector<double>>()));

  const json& nodes = profile["nodes"];
  std::map<std::string, json> by_name;
  for (const auto& n : nodes) by_name[n["name"].get<std::string>()] = n;
  ASSERT_TRUE(by_name.count("conv_1+relu_1")) << nodes.dump(1);
  ASSERT_TRUE(by_name.count("add_1")) << nodes.dump(1);
  const json& conv = by_name["conv_1+relu_1"];
  EXPECT_EQ(conv["op"], "FusedConv");
  EXPECT_EQ(conv["calls"], 1);
  ASSERT_EQ(conv["inputs"].size(), 3u);
  EXPECT_EQ(Shape(conv["inputs"][0]), "float32[2,8,64,64]");
  EXPECT_EQ(Shape(conv["inputs"][1]), "float32[32,8,3,3]");
  EXPECT_EQ(Shape(conv["inputs"][2]), "float32[32]");
  ASSERT_EQ(conv["outputs"].size(), 1u);
  EXPECT_EQ(Shape(conv["outputs"][0]), "float32[2,32,64,64]");
  EXPECT_EQ(Shape(by_name["add_1"]["inputs"][1]), "float32[32,1,1]");
  // The nodes come slowest first. (Which node is slowest is the machine's business: under
  // the sanitizers the instrumented Add outlasts oneDNN's convolution.)
  for (size_t i = 1; i < nodes.size(); ++i) {
    EXPECT_GE(nodes[i - 1]["median_ms"].get<double>(), nodes[i]["median_ms"].get<double>());
  }
  for (const auto& n : nodes) {
    ASSERT_EQ(n["run_ms"].size(), 5u) << n.dump();
    const auto runs = n["run_ms"].get<std::vector<double>>();
    EXPECT_DOUBLE_EQ(n["median_ms"].get<double>(), Median(runs)) << n.dump();
    EXPECT_DOUBLE_EQ(n["min_ms"].get<double>(), *std::min_element(runs.begin(), runs.end()));
    EXPECT_DOUBLE_EQ(n["max_ms"].get<double>(), *std::max_element(runs.begin(), runs.end()));
    EXPECT_GT(n["median_ms"].get<double>(), 0.0);
  }
  // The slowest node's share of the median invoke.
  EXPECT_NEAR(conv["share_percent"].get<double>(),
              100 * conv["median_ms"].get<double>() / profile["total_ms"].get<double>(), 1e-6);

  // The text lists the --profile-top slowest nodes with their shapes.
  auto text = Cli("bench " + rmx + Server() +
                  " --shape x=2x8x64x64 --profile --profile-runs 3 --profile-top 1 --repeat 3" + kQuick);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("profile 3 invokes"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("share %"), std::string::npos) << text.output;  // the op-kind table
  EXPECT_NE(text.output.find("slowest nodes: 1 of " + std::to_string(nodes.size())), std::string::npos)
      << text.output;
  // One node listed, named, with its shapes: the convolution or the Add, whichever was
  // slower in this run.
  const bool conv_listed = text.output.find("conv_1+relu_1") != std::string::npos;
  const bool add_listed = text.output.find("add_1") != std::string::npos;
  EXPECT_NE(conv_listed, add_listed) << text.output;
  EXPECT_NE(text.output.find(conv_listed ? "float32[2,8,64,64], float32[32,8,3,3], float32[32] -> float32[2,32,64,64]"
                                         : "float32[32,1,1]"),
            std::string::npos)
      << text.output;
}

TEST_F(CliProfileTest, ProfileUsageErrors) {
  auto runs = Cli("bench " + model_ + Server() +
                  " --shape x=1x8x64x64 --profile --profile-runs 0 --repeat 3" + kQuick + " 2>&1");
  EXPECT_EQ(runs.exit_code, 2) << runs.output;
  EXPECT_NE(runs.output.find("--profile-runs must be in [1, 100]"), std::string::npos) << runs.output;
  auto alone = Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --profile-top 3 --repeat 3" + kQuick +
                   " 2>&1");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("need --profile"), std::string::npos) << alone.output;
}

// --trace: the trace-event JSON of every profiled run on one time line, one complete
// slice per VM instruction, each kernel named by its node, each run in one slice.
TEST_F(CliProfileTest, TraceWritesOneSlicePerKernelAndInstruction) {
  const std::string trace_path = dir_ + "/trace.json";
  auto r = Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --profile-runs 2 --trace " + trace_path +
               " --json --repeat 3" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json profile = Json(r)["profile"];  // --trace profiles
  std::set<std::string> node_names;
  for (const auto& n : profile["nodes"]) node_names.insert(n["name"].get<std::string>());
  uint64_t instructions_per_run = 0;
  for (const auto& row : profile["rows"]) {
    if (row["kind"] == "instruction") instructions_per_run += row["calls"].get<uint64_t>();
  }

  const json trace = ReadJson(trace_path);
  ASSERT_TRUE(trace["traceEvents"].is_array()) << trace.dump().substr(0, 500);
  std::set<std::string> kernel_names;
  std::map<int, std::vector<std::pair<double, double>>> slices_by_run;  // [ts, ts + dur)
  size_t invokes = 0, kernels = 0, others = 0;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("name") && e.contains("ph") && e.contains("pid")) << e.dump();
    if (e["ph"] == "M") continue;  // process and thread names
    ASSERT_EQ(e["ph"], "X") << e.dump();
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e.contains("tid") && e.contains("cat"))
        << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["cat"] == "invoke") {
      ++invokes;
      continue;
    }
    (e["cat"] == "kernel" ? kernels : others)++;
    if (e["cat"] == "kernel") {
      kernel_names.insert(e["name"].get<std::string>());
      EXPECT_EQ(e["args"]["opcode"], "InvokeKernel");
      EXPECT_TRUE(e["args"]["inputs"].is_array()) << e.dump();
    } else {
      EXPECT_EQ(e["cat"], "instruction") << e.dump();
      EXPECT_EQ(e["name"], e["args"]["opcode"]) << e.dump();
    }
    slices_by_run[e["args"]["run"].get<int>()].push_back(
        {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  }
  EXPECT_EQ(invokes, 2u);
  EXPECT_EQ(kernel_names, node_names);  // the slices are named by the profile's nodes
  EXPECT_EQ(kernels, 2 * node_names.size());
  EXPECT_EQ(kernels + others, 2 * instructions_per_run);
  // One after the other: the instructions of a run never overlap, and the second run
  // starts after the first.
  ASSERT_EQ(slices_by_run.size(), 2u);
  for (auto& [run, slices] : slices_by_run) {
    std::sort(slices.begin(), slices.end());
    for (size_t i = 1; i < slices.size(); ++i) EXPECT_LE(slices[i - 1].second, slices[i].first + 1e-3) << run;
  }
  EXPECT_LE(slices_by_run[1].back().second, slices_by_run[2].front().first);
}

// --variant: the model as given and each variant, compiled, loaded at once and
// benchmarked interleaved (one sample of each in turn), in one table.
TEST_F(CliProfileTest, VariantsRunInterleavedInOneTable) {
  auto r =
      Cli("bench " + model_ + Server() +
          " --shape x=1x8x64x64 --layout NHWC --variant layout=NCHW --variant fuse-epilogues=false,fold-batchnorm=false "
          "--min-samples 6 --min-duration-s 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = Json(r);
  EXPECT_EQ(j["schema"], "remex.variants");
  EXPECT_EQ(j["schema_version"], 1);
  const json& variants = j["variants"];
  ASSERT_EQ(variants.size(), 3u);
  EXPECT_EQ(variants[0]["label"], "base");
  EXPECT_EQ(variants[1]["label"], "layout=NCHW");
  EXPECT_EQ(variants[2]["label"], "fuse-epilogues=false,fold-batchnorm=false");
  // Each compiled with its own options (the base's --layout given, not the device's
  // choice): three executables.
  EXPECT_EQ(variants[0]["compile_options"]["layout"], "NHWC") << variants[0]["compile_options"].dump();
  EXPECT_EQ(variants[1]["compile_options"]["layout"], "NCHW") << variants[1]["compile_options"].dump();
  EXPECT_EQ(variants[2]["compile_options"]["layout"], "NHWC") << variants[2]["compile_options"].dump();
  std::set<std::string> hashes;
  for (const auto& v : variants) hashes.insert(v["module_cache"]["hash"].get<std::string>());
  EXPECT_EQ(hashes.size(), 3u);
  // Interleaved: 0, 1, 2, 0, 1, 2, ...; every variant has one sample per round.
  const uint32_t rounds = j["rounds"].get<uint32_t>();
  EXPECT_GE(rounds, 6u);
  EXPECT_TRUE(j["complete"].get<bool>());
  const auto order = j["order"].get<std::vector<int>>();
  ASSERT_EQ(order.size(), 3u * rounds);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i % 3)) << i;
  for (const auto& v : variants) {
    EXPECT_EQ(v["samples_ms"].size(), rounds);
    EXPECT_EQ(v["samples"], rounds);
    EXPECT_GT(v["median_ms"].get<double>(), 0.0);
  }
  // The first is the baseline; the others carry their ratio with its interval and
  // the test's verdict.
  EXPECT_TRUE(variants[0]["ratio"].is_null());
  EXPECT_TRUE(variants[0]["beyond_noise"].is_null());
  for (size_t v = 1; v < 3; ++v) {
    const double ratio = variants[v]["ratio"].get<double>();
    EXPECT_GT(ratio, 0.0);
    EXPECT_LE(variants[v]["ratio_low"].get<double>(), ratio);
    EXPECT_GE(variants[v]["ratio_high"].get<double>(), ratio);
    EXPECT_GE(variants[v]["p_value"].get<double>(), 0.0);
    EXPECT_LE(variants[v]["p_value"].get<double>(), 1.0);
    EXPECT_TRUE(variants[v]["beyond_noise"].is_boolean());
  }

  auto text =
      Cli("bench " + model_ + Server() +
          " --shape x=1x8x64x64 --variant fuse-epilogues=false --min-samples 6 --min-duration-s 0 --profile "
          "--profile-runs 1");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const char* s : {"2 variants of", "interleaved", "variant", "median ms", "ratio", "beyond noise",
                        "base", "fuse-epilogues=false", "largest differences per op"}) {
    EXPECT_NE(text.output.find(s), std::string::npos) << s << "\n" << text.output;
  }
}

TEST_F(CliProfileTest, VariantUsageErrorsExitWithTwo) {
  auto unknown = Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --variant colour=red 2>&1");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("unknown key 'colour' (keys: layout, dtype,"), std::string::npos)
      << unknown.output;
  auto boolean = Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --variant strict=maybe 2>&1");
  EXPECT_EQ(boolean.exit_code, 2) << boolean.output;
  auto layout = Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --variant layout=NWHC 2>&1");
  EXPECT_EQ(layout.exit_code, 2) << layout.output;
  const std::string rmx = dir_ + "/m.rmx";
  ASSERT_EQ(Cli("compile " + model_ + " -o " + rmx + " > /dev/null").exit_code, 0);
  auto compiled = Cli("bench " + rmx + Server() + " --shape x=1x8x64x64 --variant layout=NHWC 2>&1");
  EXPECT_EQ(compiled.exit_code, 2) << compiled.output;
  auto scenario = Cli("bench " + model_ + Server() +
                      " --shape x=1x8x64x64 --variant layout=NHWC --scenario offline 2>&1");
  EXPECT_EQ(scenario.exit_code, 2) << scenario.output;
}

// remex diff: two saved reports in the same table, per op and node when both are
// profiled; exit 1 when the difference is beyond the noise.
TEST_F(CliProfileTest, DiffComparesTwoSavedReports) {
  const std::string a = dir_ + "/a.json", b = dir_ + "/b.json";
  ASSERT_EQ(Cli("bench " + model_ + Server() + " --shape x=1x8x64x64 --profile --profile-runs 3 --json" +
                kQuick + " --repeat 8 > " + a)
                .exit_code,
            0);
  ASSERT_EQ(Cli("bench " + model_ + Server() +
                " --shape x=1x8x64x64 --no-fuse-epilogues --profile --profile-runs 3 --json" + kQuick +
                " --repeat 8 > " + b)
                .exit_code,
            0);
  auto r = Cli("diff " + a + " " + b + " --json");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.output;
  const json d = Json(r);
  EXPECT_EQ(d["schema"], "remex.diff");
  ASSERT_EQ(d["variants"].size(), 2u);
  EXPECT_EQ(d["variants"][0]["label"], a);
  EXPECT_EQ(d["variants"][1]["label"], b);
  EXPECT_EQ(d["variants"][1]["samples"], 8);
  EXPECT_EQ(r.exit_code == 1, d["beyond_noise"].get<bool>());
  // Per op: the Conv with its Relu only in a; in b the Conv alone, and its Relu fused
  // with the Add instead.
  std::map<std::string, json> ops, nodes;
  for (const auto& o : d["profile_diff"]["ops"])
    ops[o["kind"].get<std::string>() + " " + o["name"].get<std::string>()] = o;
  ASSERT_TRUE(ops.count("kernel FusedConv") && ops.count("kernel Conv") &&
              ops.count("instruction InvokeKernel"))
      << d.dump(1);
  EXPECT_TRUE(ops["kernel FusedConv"]["b_ms"].is_null());
  EXPECT_FALSE(ops["kernel FusedConv"]["a_ms"].is_null());
  EXPECT_TRUE(ops["kernel Conv"]["a_ms"].is_null());
  EXPECT_FALSE(ops["instruction InvokeKernel"]["a_ms"].is_null());
  EXPECT_FALSE(ops["instruction InvokeKernel"]["b_ms"].is_null());
  for (const auto& n : d["profile_diff"]["nodes"]) nodes[n["name"].get<std::string>()] = n;
  ASSERT_TRUE(nodes.count("conv_1+relu_1") && nodes.count("add_1") && nodes.count("conv_1") &&
              nodes.count("relu_1+add_1"))
      << d.dump(1);
  EXPECT_TRUE(nodes["conv_1+relu_1"]["b_ms"].is_null());
  EXPECT_EQ(nodes["conv_1+relu_1"]["kind"], "FusedConv");
  EXPECT_TRUE(nodes["conv_1"]["a_ms"].is_null());
  EXPECT_EQ(nodes["conv_1"]["kind"], "Conv");
  const json& rows = d["profile_diff"]["ops"];
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GE(std::abs(rows[i - 1]["delta_ms"].get<double>()), std::abs(rows[i]["delta_ms"].get<double>()));
  }

  // A report against itself: within the noise, exit 0.
  auto same = Cli("diff " + a + " " + a);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("beyond noise"), std::string::npos) << same.output;
  EXPECT_NE(same.output.find("largest differences per node"), std::string::npos) << same.output;
  // Every sample three times as long: beyond the noise, exit 1. The samples are set
  // (8 within 1 % of each other), not measured: a loaded machine's own spread (one
  // sample ten times another under the sanitizers) could hide even a threefold step.
  json steady = ReadJson(a);
  json slow = steady;
  for (size_t i = 0; i < steady["benchmark"]["samples_ms"].size(); ++i) {
    steady["benchmark"]["samples_ms"][i] = 1.0 + 0.001 * static_cast<double>(i);
    slow["benchmark"]["samples_ms"][i] = 3.0 * (1.0 + 0.001 * static_cast<double>(i));
  }
  const std::string a2 = dir_ + "/a2.json", c = dir_ + "/c.json";
  std::ofstream(a2) << steady.dump();
  std::ofstream(c) << slow.dump();
  auto slower = Cli("diff " + a2 + " " + c + " --json");
  EXPECT_EQ(slower.exit_code, 1) << slower.output;
  const json ds = Json(slower);
  EXPECT_TRUE(ds["beyond_noise"].get<bool>());
  EXPECT_NEAR(ds["variants"][1]["ratio"].get<double>(), 3.0, 1e-6);

  // Not a bench report: a usage error; a file that is not there: exit 3.
  std::ofstream(dir_ + "/other.json") << R"({"schema": "remex.run", "schema_version": 1})";
  EXPECT_EQ(Cli("diff " + a + " " + dir_ + "/other.json 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("diff " + a + " " + dir_ + "/missing.json 2>/dev/null").exit_code, 3);
}

}  // namespace
}  // namespace remex
