// The benchmarking and checking commands of the remex CLI against a real remex-server
// process: `remex bench` (statistics, profile, no output data on the wire), `remex
// check` (device-side comparison with a reference folder), the module cache seen from
// the CLI, and --compression.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>
#include <regex>
#include <set>
#include <thread>

#include "host_client/client/npy.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/tooling/results_store.h"
#include "kernels/cpu_features.h"
#include "tests/cli_test_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::OnnxModelBuilder;
using remex::testing::ReadText;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

constexpr int64_t kChannels = 16, kSide = 64;
constexpr uint64_t kOutputBytes = kChannels * kSide * kSide * 4;  // 256 KiB
const float kBias[4] = {0.5f, -0.5f, 1.0f, -1.0f};

// y = Relu(x + b): x float32 [1, 16, 64, 64], b [64] broadcast along the last axis.
std::string SaveModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, kChannels, kSide, kSide})
      .Output("y", onnx::TensorProto::FLOAT, {1, kChannels, kSide, kSide});
  std::vector<float> bias(kSide);
  for (int64_t i = 0; i < kSide; ++i) bias[i] = kBias[i % 4];
  b.FloatInit("b", {kSide}, bias);
  b.Node("Add", {"x", "b"}, {"s"}, "add");
  b.Node("Relu", {"s"}, {"y"}, "relu");
  std::string path = dir + "/add_relu.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

npy::Array Floats(const std::vector<float>& v) {
  npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = {1, kChannels, kSide, kSide};
  a.data.resize(v.size() * 4);
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

// A reference folder computed on the host: DIR/inputs/x.npy and DIR/y.npy.
void WriteReference(const std::string& dir, float perturb_at_5 = 0.0f) {
  fs::create_directories(dir + "/inputs");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(kChannels * kSide * kSide), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = dist(rng);
    y[i] = std::max(0.0f, x[i] + kBias[(i % kSide) % 4]);
  }
  y[5] += perturb_at_5;
  ASSERT_TRUE(npy::Write(dir + "/inputs/x.npy", Floats(x)).ok());
  ASSERT_TRUE(npy::Write(dir + "/y.npy", Floats(y)).ok());
}

class CliBenchTest : public remex::testing::CliTest {
 protected:
  CliBenchTest() : CliTest("remex_cli_bench") {}
  void SetUp() override {
    CliTest::SetUp();
    model_ = SaveModel(dir_);
  }

  std::string model_;
};

// The flags of a quick run: exactly the first request's samples, never extended.
constexpr const char* kQuick = " --min-duration-s 0 --min-samples 0 --max-trials 1";

TEST_F(CliBenchTest, BenchReportsStatisticsAndFetchesNoOutput) {
  auto r = Cli("bench " + model_ + " --server " + server_.address() +
               " --number 3 --repeat 5 --warmup 2 --json" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = Json(r);
  const auto& b = j["benchmark"];
  EXPECT_GE(b["number"].get<int>(), 1);
  ASSERT_EQ(b["samples_ms"].size(), 5u);
  EXPECT_EQ(b["repeat"].get<int>(), 5);
  for (const char* key : {"mean_ms", "median_ms", "p90_ms", "min_ms", "max_ms", "std_ms"}) {
    ASSERT_TRUE(b.contains(key)) << key;
    EXPECT_GE(b[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(b["min_ms"].get<double>(), b["median_ms"].get<double>());
  EXPECT_LE(b["median_ms"].get<double>(), b["p90_ms"].get<double>());
  EXPECT_LE(b["p90_ms"].get<double>(), b["max_ms"].get<double>());
  // Five samples bound no percentile (the median needs 6).
  EXPECT_TRUE(b["p99_ms"].is_null()) << r.output;
  for (const auto& p : b["percentiles"]) EXPECT_FALSE(p["bounded"].get<bool>()) << p;
  EXPECT_GT(b["min_ms"].get<double>(), 0.0);
  // One request, not extended; a run this short is one window: too few to judge.
  EXPECT_EQ(b["extended"]["requests"].get<int>(), 1);
  EXPECT_TRUE(b["extended"]["reasons"].empty());
  EXPECT_FALSE(b["stable"].get<bool>());
  EXPECT_EQ(b["stability"]["verdict"], "too few windows (1 of 3)");
  EXPECT_EQ(b["extended"]["unmet"], nlohmann::json::array({"stability"}));
  // Handles, shapes and timings only: far less than one output (256 KiB).
  uint64_t received = j["bytes"]["received"].get<uint64_t>();
  EXPECT_LT(received, 16384u);
  EXPECT_LT(received, kOutputBytes / 8);
  EXPECT_EQ(j["compression"]["raw_received"].get<uint64_t>(), 0u);
}

// A float16 model on a CPU server compiles in float32 unless --dtype says otherwise
// (tooling::CompileForDevice): the report names the dtype used, and the outputs stay
// float16 either way.
TEST_F(CliBenchTest, Float16ModelOnTheCpuDeviceRunsInFloat32UnlessDTypeIsGiven) {
  const std::string sr = dir_ + "/sr16.onnx";
  auto g = Cli("gen-sr -o " + sr + " --dtype float16 --height 12 --width 20");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  for (const auto& [flag, want] : {std::pair<std::string, std::string>{"", "float32"}, {" --dtype float16", "float16"}}) {
    auto r = Cli("bench " + sr + " --server " + server_.address() + " --repeat 3 --json" + flag + kQuick);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto j = Json(r);
    EXPECT_EQ(j["environment"]["executable"]["compile_options"]["dtype"], want) << flag;
  }
  auto run = Cli("run " + sr + " --server " + server_.address() + " --output-dir " + dir_ + "/sr16_out");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("y: float16 [1, 3, 48, 80]"), std::string::npos) << run.output;
}

// An int8 model on a CPU server with int8 dot products compiles NHWC unless --layout says
// otherwise (tooling::CompileForDevice); without them, and with --layout NCHW, NCHW. The
// outputs are the same bytes either way. The model: x float32 [1, 8, 12, 12],
// QuantizeLinear to uint8, two 3x3 QLinearConvs with constant int8 weights, and
// DequantizeLinear.
TEST_F(CliBenchTest, Int8ModelOnTheCpuDeviceRunsNhwcUnlessLayoutIsGiven) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 12, 12}).Output("y", onnx::TensorProto::FLOAT, {1, 8, 12, 12});
  const float x_scale = 0.02f, w_scale = 0.01f, y_scale = 0.05f;
  const uint8_t zero_point = 128;
  std::vector<int8_t> w(8 * 8 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  b.FloatInit("x_scale", {}, {x_scale}).FloatInit("w_scale", {}, {w_scale}).FloatInit("y_scale", {}, {y_scale});
  b.RawInit("zp", onnx::TensorProto::UINT8, {}, &zero_point, 1);
  const int8_t w_zero_point = 0;
  b.RawInit("w_zp", onnx::TensorProto::INT8, {}, &w_zero_point, 1);
  b.RawInit("w", onnx::TensorProto::INT8, {8, 8, 3, 3}, w.data(), w.size());
  b.Node("QuantizeLinear", {"x", "x_scale", "zp"}, {"q0"}, "quantize");
  for (int i = 0; i < 2; ++i) {
    const std::string in = i == 0 ? "q0" : "q1", in_scale = i == 0 ? "x_scale" : "y_scale";
    auto* conv = b.Node("QLinearConv", {in, in_scale, "zp", "w", "w_scale", "w_zp", "y_scale", "zp"},
                        {i == 0 ? "q1" : "q2"}, "conv" + std::to_string(i));
    OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  }
  b.Node("DequantizeLinear", {"q2", "y_scale", "zp"}, {"y"}, "dequantize");
  const std::string model = dir_ + "/int8_convs.onnx";
  ASSERT_TRUE(b.Save(model));

  const std::string automatic = kernels::CpuHasInt8DotProducts() ? "NHWC" : "NCHW";
  std::map<std::string, std::string> outputs;
  for (const auto& [flag, want] : {std::pair<std::string, std::string>{"", automatic}, {" --layout NCHW", "NCHW"}}) {
    auto r = Cli("bench " + model + " --server " + server_.address() + " --repeat 3 --json" + flag + kQuick);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(Json(r)["environment"]["executable"]["compile_options"]["layout"], want) << flag;
    const std::string out = dir_ + "/int8_out" + std::to_string(outputs.size());
    auto run = Cli("run " + model + " --server " + server_.address() + " --seed 3 --output-dir " + out + flag);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream y(out + "/y.npy", std::ios::binary);
    outputs[flag] = std::string(std::istreambuf_iterator<char>(y), {});
    EXPECT_GT(outputs[flag].size(), 8u * 12 * 12 * 4) << run.output;
  }
  EXPECT_EQ(outputs[""], outputs[" --layout NCHW"]);
}

// Every result carries the environment fingerprint (the server's build and command
// line, its host, this host, the executable) and the warnings drawn from it.
TEST_F(CliBenchTest, BenchReportsTheEnvironmentAndItsWarnings) {
  auto r = Cli("bench " + model_ + " --server " + server_.address() + " --repeat 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = Json(r);
  ASSERT_TRUE(j.contains("environment")) << r.output;
  const auto& env = j["environment"];
  const auto& server = env["server"];
  ASSERT_TRUE(server.is_object()) << env.dump(2);
  EXPECT_TRUE(server["remex_version"].is_string());
  EXPECT_TRUE(server["remex_commit"].is_string());
  const auto args = server["args"].get<std::vector<std::string>>();
  ASSERT_GE(args.size(), 3u);
  EXPECT_NE(args[0].find("remex-server"), std::string::npos);
  EXPECT_NE(std::find(args.begin(), args.end(), "--listen"), args.end()) << server.dump();
  // One tree: the client and the server name the same version (their commits differ when
  // one of them was built before the last commit).
  EXPECT_EQ(env["host"]["remex_version"], server["remex_version"]);
  EXPECT_TRUE(env["host"]["remex_commit"].is_string());
  const auto& device = env["device"];
  EXPECT_GE(device["logical_cpus"].get<int>(), 1);
  EXPECT_TRUE(device["cpu_model"].is_string());
  EXPECT_GE(device["compute_threads"].get<int>(), 1);  // the cpu device
  EXPECT_GT(device["memory_bytes"].get<uint64_t>(), 0u);
  ASSERT_TRUE(device["load_average_1m_after_benchmark"].is_number()) << device.dump();
  EXPECT_GE(device["load_average_1m_after_benchmark"].get<double>(), 0.0);
  EXPECT_TRUE(env["gpus"].is_array());
  EXPECT_EQ(env["gpus"].size(), 0u);  // a cpu server uses no GPU
  EXPECT_EQ(env["executable"]["hash"], j["module_cache"]["hash"]);
  EXPECT_EQ(env["executable"]["compile_options"]["layout"], "NCHW");  // compiled for this run
  // The warnings follow from what the report says.
  ASSERT_TRUE(j["warnings"].is_array()) << r.output;
  std::set<std::string> codes;
  for (const auto& w : j["warnings"]) {
    EXPECT_TRUE(w["message"].is_string() && w["fix"].is_string()) << w.dump();
    codes.insert(w["code"].get<std::string>());
  }
  const bool slow_governor = device["governor"].is_string() && device["governor"] != "performance";
  EXPECT_EQ(codes.count("cpu_governor"), slow_governor ? 1u : 0u) << device.dump();
  const bool loaded = device["load_average_1m_after_benchmark"].get<double>() > device["logical_cpus"].get<double>();
  EXPECT_EQ(codes.count("server_load"), loaded ? 1u : 0u) << device.dump();
  EXPECT_EQ(codes.count("gpu_clocks_unlocked"), 0u);
}

// A plain `remex bench MODEL` is a valid run: a second of samples, at least 30, stable
// or extended up to 10 requests, with every field of the JSON report.
TEST_F(CliBenchTest, PlainBenchIsAValidRunWithIntervals) {
  // Room for 100 requests, not the default 10: on a loaded machine the requests sized
  // from early samples can fall short, and a run that stops at its last trial short of
  // a second is valid behaviour (it says so in "unmet"), not what this test checks.
  auto r = Cli("bench " + model_ + " --server " + server_.address() + " --max-trials 100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto b = Json(r)["benchmark"];
  const auto& x = b["extended"];
  const size_t n = b["samples_ms"].size();
  EXPECT_EQ(b["repeat"].get<size_t>(), n);
  EXPECT_GE(n, 30u);
  EXPECT_GE(x["duration_s"].get<double>(), 1.0) << x;
  // The first request (10 samples) is never enough: extended at least once.
  EXPECT_GE(x["requests"].get<int>(), 2);
  EXPECT_LE(x["requests"].get<int>(), 100);
  EXPECT_FALSE(x["reasons"].empty());
  for (const auto& reason : x["reasons"]) {
    EXPECT_TRUE(reason == "min_duration" || reason == "min_samples" || reason == "stability") << reason;
  }
  EXPECT_DOUBLE_EQ(b["confidence"].get<double>(), 0.95);
  EXPECT_DOUBLE_EQ(b["min_duration_s"].get<double>(), 1.0);
  EXPECT_EQ(b["min_samples"].get<int>(), 30);
  // Sample end times: increasing, the last one the run's duration.
  const auto& ends = b["sample_end_s"];
  ASSERT_EQ(ends.size(), n);
  for (size_t i = 1; i < n; ++i) ASSERT_GT(ends[i].get<double>(), ends[i - 1].get<double>()) << i;
  EXPECT_DOUBLE_EQ(ends[n - 1].get<double>(), x["duration_s"].get<double>());

  // median, p90 and p99, each with its interval around the value, in rank order.
  ASSERT_EQ(b["percentiles"].size(), 3u);
  const double qs[] = {50, 90, 99};
  const char* keys[] = {"median_ms", "p90_ms", "p99_ms"};
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = b["percentiles"][i];
    EXPECT_EQ(p["q"].get<double>(), qs[i]);
    const bool bounded = p["bounded"].get<bool>();
    EXPECT_EQ(bounded, i < 2 || n >= 299) << p;
    if (!bounded) {
      EXPECT_EQ(p["min_samples"].get<int>(), 299);
      EXPECT_TRUE(b["p99_ms"].is_null());
      continue;
    }
    EXPECT_DOUBLE_EQ(p["value_ms"].get<double>(), b[keys[i]].get<double>());
    EXPECT_LE(p["lower_ms"].get<double>(), p["upper_ms"].get<double>());
    EXPECT_GE(p["lower_ms"].get<double>(), b["min_ms"].get<double>());
    EXPECT_LE(p["upper_ms"].get<double>(), b["max_ms"].get<double>());
    EXPECT_LT(p["lower_rank"].get<size_t>(), p["upper_rank"].get<size_t>());
    EXPECT_LE(p["upper_rank"].get<size_t>(), n);
    EXPECT_GE(p["coverage"].get<double>(), 0.95);
  }

  // The windows the verdict was judged on.
  const auto& st = b["stability"];
  EXPECT_EQ(st["stable"], b["stable"]);
  EXPECT_GE(st["window_ms"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(st["threshold"].get<double>(), 0.10);
  EXPECT_DOUBLE_EQ(st["percentile"].get<double>(), 50.0);
  EXPECT_EQ(st["windows_judged"].get<int>(), 3);
  ASSERT_GE(st["windows"].size(), 3u) << st;
  size_t in_windows = 0;
  for (const auto& w : st["windows"]) {
    for (const char* key : {"start_s", "duration_s", "samples", "throughput_per_s", "latency_ms"}) {
      ASSERT_TRUE(w.contains(key)) << key;
    }
    EXPECT_DOUBLE_EQ(w["duration_s"].get<double>(), st["window_ms"].get<double>() / 1e3);
    in_windows += w["samples"].get<size_t>();
  }
  EXPECT_LE(in_windows, n);
  if (b["stable"].get<bool>()) {
    EXPECT_TRUE(x["unmet"].empty());
    EXPECT_EQ(st["verdict"].get<std::string>().rfind("stable: the last 3 windows'", 0), 0u) << st["verdict"];
  }
}

TEST_F(CliBenchTest, MinSamplesExtendsTheRunUntilP99IsBounded) {
  // 100 samples in one request: too few for p99 at 95 % (299).
  auto few = Cli("bench " + model_ + " --server " + server_.address() + " --repeat 100 --json" + kQuick);
  ASSERT_EQ(few.exit_code, 0) << few.output;
  auto b = Json(few)["benchmark"];
  EXPECT_TRUE(b["p99_ms"].is_null()) << few.output;
  EXPECT_FALSE(b["percentiles"][2]["bounded"].get<bool>());
  EXPECT_TRUE(b["percentiles"][0]["bounded"].get<bool>());

  // --min-samples 300: the run is extended by more requests until it has them.
  auto more = Cli("bench " + model_ + " --server " + server_.address() +
                  " --repeat 100 --min-duration-s 0 --min-samples 300 --max-trials 5 --window-ms 1 --json");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  b = Json(more)["benchmark"];
  EXPECT_GE(b["samples_ms"].size(), 300u);
  EXPECT_GE(b["extended"]["requests"].get<int>(), 2);
  ASSERT_FALSE(b["extended"]["reasons"].empty());
  EXPECT_EQ(b["extended"]["reasons"][0], "min_samples");
  ASSERT_TRUE(b["p99_ms"].is_number()) << more.output;
  EXPECT_LE(b["p90_ms"].get<double>(), b["p99_ms"].get<double>());
  EXPECT_LE(b["p99_ms"].get<double>(), b["max_ms"].get<double>());
  EXPECT_TRUE(b["percentiles"][2]["bounded"].get<bool>());

  // The text says why it was extended, and gives each interval.
  auto text = Cli("bench " + model_ + " --server " + server_.address() +
                  " --repeat 100 --min-duration-s 0 --min-samples 300 --max-trials 5 --window-ms 1");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("extended for min_samples"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("p99    "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("95 % interval ["), std::string::npos) << text.output;
}

TEST_F(CliBenchTest, BenchTextSaysNotEnoughSamples) {
  auto r =
      Cli("bench " + model_ + " --server " + server_.address() + " --repeat 20 --stable-window 2" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("95 % interval ["), std::string::npos) << r.output;  // 20 bound the median
  EXPECT_NE(r.output.find("p90    not enough samples for a 95 % interval (29 needed, 20 taken)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("p99    not enough samples for a 95 % interval (299 needed, 20 taken)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("too few windows (1 of 2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max trials reached, still lacking stability"), std::string::npos) << r.output;
}

TEST_F(CliBenchTest, FailUnstableExitsOneAfterMaxTrials) {
  // A zero threshold: windows of a real clock never agree exactly, so every extension
  // for stability is spent (3 requests) and the run stays unstable.
  const std::string base =
      "bench " + model_ + " --server " + server_.address() +
      " --min-duration-s 0.05 --min-samples 0 --window-ms 10 --stable-threshold 0 --max-trials 3";
  auto r = Cli(base + " --fail-unstable --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto b = Json(r)["benchmark"];
  EXPECT_FALSE(b["stable"].get<bool>());
  EXPECT_EQ(b["extended"]["requests"].get<int>(), 3);
  // Stability is never met (a loaded machine may also leave the duration short: its
  // samples' end times are what they are).
  const auto& unmet = b["extended"]["unmet"];
  EXPECT_NE(std::find(unmet.begin(), unmet.end(), "stability"), unmet.end()) << unmet;
  const std::string verdict = b["stability"]["verdict"].get<std::string>();
  EXPECT_TRUE(verdict.rfind("unstable: ", 0) == 0 || verdict.rfind("too few windows", 0) == 0) << verdict;
  if (verdict.rfind("unstable: ", 0) == 0) {
    EXPECT_GE(b["stability"]["windows"].size(), 3u);
  }
  // Without --fail-unstable the same run is reported, and exits 0.
  auto ok = Cli(base);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(ok.output.find("unstable: ") != std::string::npos ||
              ok.output.find("too few windows") != std::string::npos)
      << ok.output;
  // A threshold nothing can miss: stable, exit 0 with --fail-unstable.
  auto stable =
      Cli("bench " + model_ + " --server " + server_.address() +
          " --min-duration-s 0.05 --min-samples 0 --window-ms 10 --stable-threshold 1000 --fail-unstable");
  EXPECT_EQ(stable.exit_code, 0) << stable.output;
}

TEST_F(CliBenchTest, BenchUsageErrorsNameTheFlag) {
  const std::string base = "bench " + model_ + " --server " + server_.address();
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {" --confidence 1", "--confidence must be in (0, 1)"},
           {" --confidence 0", "--confidence must be in (0, 1)"},
           {" --max-trials 0", "--max-trials must be in [1, 1000]"},
           {" --window-ms 0", "--window-ms must be in (0, 3600000]"},
           {" --min-duration-s -1", "--min-duration-s must be in [0, 86400]"},
           {" --stable-percentile 101", "--stable-percentile must be in [0, 100]"},
           {" --stable-window 1", "--stable-window must be at least 2"}}) {
    auto r = Cli(base + flag + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flag << ": " << r.output;
  }
}

// `remex ARGS...` started in the background with stdout and stderr in files, SIGINT and
// SIGTERM at their defaults whatever the test runner's were.
pid_t StartCli(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  std::vector<std::string> all = {REMEX_CLI_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(127);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// SIGINT or SIGTERM while remex bench runs: the benchmark is cancelled on the server
// (its log says how long the run took to stop), and the samples taken so far are
// printed, marked partial; the exit status is a shell's for the signal (128 + N).
TEST_F(CliBenchTest, ASignalCancelsTheBenchmarkOnTheServerAndKeepsItsSamples) {
  const std::string log = dir_ + "/server.log";
  auto server =
      remex::testing::ServerProcess::Logging(log, {"--threads", "1", "--benchmark-time-limit-s", "3600"});
  ASSERT_NE(server->port(), 0);
  int cancels = 0;
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGTERM");
    const std::string out = dir_ + "/out.json", err = dir_ + "/err.txt";
    // 5000 samples of 100 calls: minutes unless cancelled.
    const pid_t pid = StartCli(
        {"bench", model_, "--server", server->address(), "--repeat", "5000", "--number", "100", "--json"},
        out, err);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    const auto took = std::chrono::steady_clock::now() - sent;
    const std::string stderr_text = ReadText(err);
    ASSERT_TRUE(WIFEXITED(status)) << stderr_text;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << stderr_text;
    EXPECT_LT(took, std::chrono::seconds(20)) << "the run was not cut short";
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_NE(stderr_text.find("remex: cancelling the request on the server"), std::string::npos)
        << stderr_text;
    EXPECT_NE(stderr_text.find("remex: the benchmark is partial: interrupted by " + name), std::string::npos)
        << stderr_text;
    auto j = nlohmann::json::parse(ReadText(out), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << ReadText(out);
    EXPECT_EQ(j["partial"]["reason"], "interrupted by " + name);
    const size_t samples = j["benchmark"]["samples_ms"].size();
    EXPECT_GE(samples, 1u);
    EXPECT_LT(samples, 5000u);
    EXPECT_EQ(j["benchmark"]["repeat"], samples);
    EXPECT_GT(j["benchmark"]["median_ms"].get<double>(), 0);
    // The server stopped the run soon after the cancel came, with those samples.
    const std::string server_log = ReadText(log);
    const std::regex stopped(
        R"(benchmark stopped ([0-9.]+) ms after its cancel, (\d+) of 5000 samples kept)");
    std::vector<std::smatch> found;
    for (auto it = std::sregex_iterator(server_log.begin(), server_log.end(), stopped);
         it != std::sregex_iterator(); ++it) {
      found.push_back(*it);
    }
    ASSERT_EQ(found.size(), static_cast<size_t>(++cancels)) << server_log;
    EXPECT_LT(std::stod(found.back()[1].str()), 100.0) << found.back()[0];
    EXPECT_EQ(std::stoul(found.back()[2].str()), samples);
  }
}

// How often `pattern` matches in the file at `path` (a server's log).
size_t CountMatches(const std::string& path, const std::regex& pattern) {
  const std::string text = ReadText(path);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

// Waits until `pattern` matches at least `count` times in the log at `path`; false
// after a minute.
bool AwaitLog(const std::string& path, const std::regex& pattern, size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountMatches(path, pattern) < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// SIGINT or SIGTERM during a load scenario: the levels the server completed before it
// are kept (the one in progress is dropped), printed and written (--json, --csv,
// --html) marked partial and recorded as an error, with the signal's exit status; a
// peak search keeps its probes. Interrupted before its first level completed (also
// --from-client, which stops sending its queries): CANCELLED.
TEST_F(CliBenchTest, ASignalKeepsTheLoadLevelsCompletedBeforeIt) {
  const std::string log = dir_ + "/server.log";
  auto server =
      remex::testing::ServerProcess::Logging(log, {"--threads", "1", "--benchmark-time-limit-s", "3600"});
  ASSERT_NE(server->port(), 0);
  const std::regex level_done(R"(loadTest (\S+) at concurrency (\d+): (\d+) of (\d+) queries completed)");
  auto start = [&](const std::vector<std::string>& flags, const std::string& out, const std::string& err) {
    std::vector<std::string> args = {"bench",        model_, "--server",      server->address(),
                                     "--max-trials", "1",    "--min-samples", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    return StartCli(args, out, err);
  };
  auto finish = [](pid_t pid) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };

  {
    SCOPED_TRACE("a sweep, SIGINT");
    const std::string out = dir_ + "/sweep.json", err = dir_ + "/sweep.err";
    const std::string csv = dir_ + "/sweep.csv", html = dir_ + "/sweep.html";
    const std::string url = "sqlite://" + dir_ + "/results.sqlite";
    const size_t before = CountMatches(log, level_done);
    // 64 levels of a second each: over a minute unless interrupted.
    const pid_t pid = start({"--scenario", "single-stream", "--concurrency", "1:64", "--min-duration-s", "1",
                             "--json", "--csv", csv, "--html", html, "--record", url},
                            out, err);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(AwaitLog(log, level_done, before + 1)) << ReadText(log);  // level 1 is done
    ASSERT_EQ(kill(pid, SIGINT), 0);
    const int rc = finish(pid);
    const std::string stderr_text = ReadText(err);
    EXPECT_EQ(rc, 128 + SIGINT) << stderr_text;
    EXPECT_NE(stderr_text.find("remex: the benchmark is partial: interrupted by SIGINT"), std::string::npos)
        << stderr_text;
    auto j = nlohmann::json::parse(ReadText(out), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << ReadText(out) << stderr_text;
    EXPECT_EQ(j["partial"]["reason"], "interrupted by SIGINT");
    const auto& levels = j["load"]["levels"];
    // The levels kept are those the server completed (its log names each), in order.
    const size_t completed = CountMatches(log, level_done) - before;
    ASSERT_GE(levels.size(), 1u);
    EXPECT_LT(levels.size(), 64u);
    EXPECT_EQ(levels.size(), completed) << ReadText(log);
    for (size_t i = 0; i < levels.size(); ++i) {
      EXPECT_EQ(levels[i]["concurrency"].get<size_t>(), i + 1);
      EXPECT_GT(levels[i]["completed"].get<uint64_t>(), 0u);
      EXPECT_EQ(levels[i]["completed"].get<uint64_t>() + levels[i]["dropped"].get<uint64_t>(),
                levels[i]["queries"].get<uint64_t>());
      EXPECT_GE(levels[i]["duration_s"].get<double>(), 0.9);  // a whole level, not one cut short
    }
    // --csv: a row per level kept; --html: marked partial.
    const std::string csv_text = ReadText(csv);
    EXPECT_EQ(static_cast<size_t>(std::count(csv_text.begin(), csv_text.end(), '\n')), levels.size() + 1)
        << csv_text;
    EXPECT_NE(ReadText(html).find("<th>Partial</th><td>interrupted by SIGINT"), std::string::npos);
    // --record: kept as an error, not a measurement.
    auto history = Cli("history --json --results " + url);
    ASSERT_EQ(history.exit_code, 0) << history.output;
    const auto h = Json(history);
    ASSERT_EQ(h["series"].size(), 1u) << h.dump();
    ASSERT_EQ(h["series"][0]["runs"].size(), 1u) << h.dump();
    const auto& run = h["series"][0]["runs"][0];
    EXPECT_EQ(run["verdict"], "error") << run.dump();
    EXPECT_EQ(run["error"], "partial: interrupted by SIGINT") << run.dump();
  }
  {
    SCOPED_TRACE("a peak search, SIGTERM");
    const std::string out = dir_ + "/peak.txt", err = dir_ + "/peak.err";
    const size_t before = CountMatches(log, level_done);
    // Probes from 10 QPS up under a bound the model meets far above it: doubling to
    // 10^6 QPS, a second each.
    const pid_t pid = start({"--scenario", "server", "--find-peak", "--latency-bound-ms", "1000",
                             "--target-qps", "10", "--min-duration-s", "1", "--no-audit"},
                            out, err);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(AwaitLog(log, level_done, before + 1)) << ReadText(log);
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    const int rc = finish(pid);
    const std::string stderr_text = ReadText(err), text = ReadText(out);
    EXPECT_EQ(rc, 128 + SIGTERM) << stderr_text;
    const size_t probes = CountMatches(log, level_done) - before;
    ASSERT_GE(probes, 1u);
    EXPECT_NE(text.find("partial interrupted by SIGTERM after " + std::to_string(probes) +
                        (probes == 1 ? " probe;" : " probes;") + " the numbers below cover only those\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("the search stopped"), std::string::npos) << text;  // the peak line
  }
  {
    // --from-client: the instances' sessions are opened after the handler is installed.
    SCOPED_TRACE("before the first level, --from-client");
    const std::string out = dir_ + "/first.json", err = dir_ + "/first.err";
    const std::regex hello("hello from client");
    const size_t before = CountMatches(log, level_done), hellos = CountMatches(log, hello);
    // Levels of a minute: the signal comes before the first is done.
    const pid_t pid = start({"--scenario", "single-stream", "--concurrency", "1:2", "--min-duration-s", "60",
                             "--json", "--from-client"},
                            out, err);
    ASSERT_GT(pid, 0);
    // The command's session and both instances' have said hello.
    ASSERT_TRUE(AwaitLog(log, hello, hellos + 3)) << ReadText(log);
    ASSERT_EQ(kill(pid, SIGINT), 0);
    const int rc = finish(pid);
    const std::string stderr_text = ReadText(err);
    EXPECT_EQ(rc, 128 + SIGINT) << stderr_text;
    EXPECT_NE(stderr_text.find("remex: CANCELLED: benchmark: interrupted by SIGINT before its first level "
                               "completed: nothing to report"),
              std::string::npos)
        << stderr_text;
    EXPECT_EQ(ReadText(out), "");
    EXPECT_EQ(CountMatches(log, level_done), before);
  }
}

// A run that cannot fit the server's limit is refused from its warm calls, before it
// runs long: the message names the projected time, the limit and the flags to lower,
// with one prefix.
TEST_F(CliBenchTest, ARunOverTheServersLimitIsRefusedNamingTheProjection) {
  remex::testing::ServerProcess server({"--threads", "1", "--benchmark-time-limit-s", "2"});
  ASSERT_NE(server.port(), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = Cli("bench " + model_ + " --server " + server.address() +
               " --repeat 100000 --number 100 --warmup 4 2>&1");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(R"(remex: DEADLINE_EXCEEDED: benchmark: the run would take about ([0-9.]+) s )"
                 R"(\(100000 samples of 100 calls at a median of [0-9.e+-]+ ms per call\), )"
                 R"(over the server's limit of 2 s \(remex-server --benchmark-time-limit-s\); )"
                 R"(lower --repeat or --number)")))
      << r.output;
  EXPECT_GT(std::stod(m[1].str()), 2.0);
  EXPECT_EQ(r.output.find("benchmark: benchmark"), std::string::npos) << r.output;
}

// A request that only extends the run (its first request fits) and would pass the
// server's limit ends the run with the samples it has, the rule unmet and the refusal
// named: exit 0, not the refusal's error.
TEST_F(CliBenchTest, AnExtensionOverTheServersLimitEndsTheRunWithItsSamples) {
  remex::testing::ServerProcess server({"--threads", "1", "--benchmark-time-limit-s", "1"});
  ASSERT_NE(server.port(), 0);
  // 20 samples fit in 1 s; a 1000 s run would need far more than the server allows.
  auto r = Cli("bench " + model_ + " --server " + server.address() +
               " --repeat 20 --min-duration-s 1000 --min-samples 0 --max-trials 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = Json(r);
  const auto& x = j["benchmark"]["extended"];
  EXPECT_EQ(x["requests"].get<int>(), 1) << x;
  const auto& unmet = x["unmet"];
  EXPECT_NE(std::find(unmet.begin(), unmet.end(), "min_duration"), unmet.end()) << x;
  const std::string stopped = x["stopped"].get<std::string>();
  EXPECT_EQ(stopped.rfind("request 2 refused: the run would take about ", 0), 0u) << stopped;
  EXPECT_NE(stopped.find("over the server's limit of 1 s"), std::string::npos) << stopped;
  EXPECT_EQ(stopped.find("lower --repeat"), std::string::npos) << stopped;
  EXPECT_EQ(j["benchmark"]["samples_ms"].size(), 20u);
}

TEST_F(CliBenchTest, BenchProfileListsTheKernels) {
  auto r =
      Cli("bench " + model_ + " --server " + server_.address() + " --repeat 2 --profile --json" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = Json(r);
  ASSERT_TRUE(j.contains("profile")) << r.output;
  std::set<std::string> kernels;
  for (const auto& row : j["profile"]["rows"]) {
    if (row["kind"] == "kernel") {
      kernels.insert(row["name"].get<std::string>());
      EXPECT_GE(row["calls"].get<uint64_t>(), 1u);
    }
  }
  // The CLI compiles with elementwise fusion: Add and Relu run as one kernel.
  EXPECT_TRUE(kernels.count("FusedElementwise")) << r.output;
  EXPECT_EQ(kernels.size(), 1u) << r.output;

  // Device memory: every row carries the fields; the fused kernel's row shows the
  // output buffer allocated for it (256 KiB, a whole size class), and no row allocates
  // more than the output (the input and constants were uploaded before the invoke).
  const auto& profile = j["profile"];
  uint64_t most_allocated = 0;
  for (const auto& row : profile["rows"]) {
    ASSERT_TRUE(row.contains("allocations") && row.contains("allocated_bytes") && row.contains("peak_live_bytes"))
        << row.dump();
    most_allocated = std::max(most_allocated, row["allocated_bytes"].get<uint64_t>());
    if (row["kind"] == "kernel") {
      EXPECT_EQ(row["allocations"].get<uint64_t>(), 1u) << row.dump();
      EXPECT_EQ(row["allocated_bytes"].get<uint64_t>(), kOutputBytes) << row.dump();
      EXPECT_GE(row["peak_live_bytes"].get<uint64_t>(), kOutputBytes) << row.dump();
    }
  }
  EXPECT_EQ(most_allocated, kOutputBytes) << profile.dump();
  const uint64_t before = profile["live_bytes_before"].get<uint64_t>();
  const uint64_t after = profile["live_bytes_after"].get<uint64_t>();
  const uint64_t peak = profile["peak_live_bytes"].get<uint64_t>();
  EXPECT_GE(before, kOutputBytes) << profile.dump();  // the input, at least
  EXPECT_EQ(after, before + kOutputBytes) << profile.dump();  // the output, held
  EXPECT_GE(peak, after) << profile.dump();

  auto text = Cli("bench " + model_ + " --server " + server_.address() + " --repeat 2 --profile" + kQuick);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("share %"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("alloc bytes"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("256.0 KiB"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("device memory live "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("FusedElementwise"), std::string::npos) << text.output;
}

TEST_F(CliBenchTest, CheckPassesAgainstACorrectReference) {
  WriteReference(dir_ + "/ref");
  auto r = Cli("check " + model_ + " --server " + server_.address() + " --reference " + dir_ + "/ref --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = Json(r);
  EXPECT_TRUE(j["match"].get<bool>());
  ASSERT_EQ(j["outputs"].size(), 1u);
  const auto& o = j["outputs"][0];
  EXPECT_EQ(o["name"], "y");
  EXPECT_TRUE(o["match"].get<bool>());
  EXPECT_EQ(o["mismatches"].get<uint64_t>(), 0u);
  EXPECT_EQ(o["count"].get<uint64_t>(), kOutputBytes / 4);
  EXPECT_EQ(o["first_mismatch"].get<int64_t>(), -1);
  // The verdict comes back, not the output.
  EXPECT_LT(j["bytes"]["received"].get<uint64_t>(), kOutputBytes / 8);

  auto text = Cli("check " + model_ + " --server " + server_.address() + " --reference " + dir_ + "/ref");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("match"), std::string::npos) << text.output;
}

TEST_F(CliBenchTest, CheckFailsAgainstAPerturbedReference) {
  WriteReference(dir_ + "/bad", 0.25f);
  auto r = Cli("check " + model_ + " --server " + server_.address() + " --reference " + dir_ + "/bad --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto j = Json(r);
  EXPECT_FALSE(j["match"].get<bool>());
  const auto& o = j["outputs"][0];
  EXPECT_FALSE(o["match"].get<bool>());
  EXPECT_EQ(o["mismatches"].get<uint64_t>(), 1u);
  EXPECT_EQ(o["first_mismatch"].get<int64_t>(), 5);
  EXPECT_NEAR(o["max_abs_error"].get<double>(), 0.25, 1e-6);

  auto text = Cli("check " + model_ + " --server " + server_.address() + " --reference " + dir_ + "/bad");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.output.find("MISMATCH"), std::string::npos) << text.output;
}

TEST_F(CliBenchTest, CheckUsageErrorsExitWithTwo) {
  EXPECT_EQ(Cli("check " + model_ + " --server " + server_.address() + " 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("check " + model_ + " --reference " + dir_ + "/none 2>/dev/null").exit_code, 2);
  fs::create_directories(dir_ + "/ref");
  EXPECT_EQ(Cli("check " + model_ + " --reference " + dir_ + "/ref --compression lz4 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("check " + model_ + " --reference " + dir_ + "/ref --input nope=x.npy 2>/dev/null").exit_code, 2);
}

TEST_F(CliBenchTest, SecondRunUploadsNoExecutableBytes) {
  auto run = [&] {
    auto r = Cli("run " + model_ + " --server " + server_.address() + " --fetch none --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Json(r);
  };
  auto first = run();
  auto second = run();
  uint64_t executable = first["bytes"]["executable"].get<uint64_t>();
  EXPECT_GT(executable, 0u);
  EXPECT_EQ(first["bytes"]["executable_uploaded"].get<uint64_t>(), executable);
  EXPECT_FALSE(first["module_cache"]["hit"].get<bool>());
  EXPECT_EQ(second["bytes"]["executable_uploaded"].get<uint64_t>(), 0u);
  EXPECT_TRUE(second["module_cache"]["hit"].get<bool>());
  EXPECT_EQ(first["module_cache"]["hash"], second["module_cache"]["hash"]);
  EXPECT_LE(second["bytes"]["sent"].get<uint64_t>() + executable, first["bytes"]["sent"].get<uint64_t>() + 256);
  // The fields run always had stay.
  for (const char* key : {"compile", "upload", "run", "fetch"}) EXPECT_TRUE(second["times_ms"].contains(key)) << key;
  EXPECT_FALSE(second["outputs"][0]["fetched"].get<bool>());
}

TEST_F(CliBenchTest, CompressionOptionReachesTheWire) {
  // All-zero input: compresses to almost nothing unless compression is off.
  std::vector<float> zeros(kChannels * kSide * kSide, 0.0f);
  ASSERT_TRUE(npy::Write(dir_ + "/zeros.npy", Floats(zeros)).ok());
  auto run = [&](const std::string& mode) {
    auto r = Cli("run " + model_ + " --server " + server_.address() + " --input x=" + dir_ +
                 "/zeros.npy --fetch none --json --compression " + mode);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Json(r);
  };
  auto none = run("none");
  auto zstd = run("zstd:3");
  auto automatic = run("auto");
  // The input (256 KiB) is an attachment in every run; the executable only in the first.
  auto saved = [](const nlohmann::json& j) {
    return j["compression"]["raw_sent"].get<uint64_t>() - j["compression"]["wire_sent"].get<uint64_t>();
  };
  EXPECT_GE(none["compression"]["raw_sent"].get<uint64_t>(), kOutputBytes);
  EXPECT_EQ(saved(none), 0u);
  EXPECT_GE(zstd["compression"]["raw_sent"].get<uint64_t>(), kOutputBytes);
  EXPECT_GT(saved(zstd), kOutputBytes * 9 / 10);
  // auto sends raw to a server on a loopback address: copying is cheaper than zstd.
  EXPECT_GE(automatic["compression"]["raw_sent"].get<uint64_t>(), kOutputBytes);
  EXPECT_EQ(saved(automatic), 0u);
  EXPECT_EQ(Cli("run " + model_ + " --compression zstd:99 2>/dev/null").exit_code, 2);
}

// --record writes bench and check results to a SQLite store, remex history lists them
// as series with their runs; a store that cannot be written fails the command with
// exit 3 after the result was printed, or only warns with --record-best-effort.
TEST_F(CliBenchTest, RecordedResultsAppearInTheHistory) {
  const std::string url = "sqlite://" + dir_ + "/results.sqlite";
  const std::string env = "REMEX_GIT_COMMIT=c0ffee REMEX_GIT_BRANCH=main REMEX_USER=tester ";
  auto bench = RunCommand(env + REMEX_CLI_BIN + " bench " + model_ + Server() +
                          " --repeat 5 --json --record " + url + " --tag pr=42" + kQuick);
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const auto report = Json(bench);
  WriteReference(dir_ + "/ref");
  auto check =
      Cli("check " + model_ + Server() + " --reference " + dir_ + "/ref --record " + url + " > /dev/null");
  ASSERT_EQ(check.exit_code, 0);
  WriteReference(dir_ + "/bad", 1.0f);
  auto mismatch =
      Cli("check " + model_ + Server() + " --reference " + dir_ + "/bad --record " + url + " > /dev/null");
  EXPECT_EQ(mismatch.exit_code, 1);  // the record keeps the mismatch's status

  auto history = Cli("history --json --results " + url);
  ASSERT_EQ(history.exit_code, 0) << history.output;
  const auto h = Json(history);
  EXPECT_EQ(h["schema"], "remex.history");
  ASSERT_EQ(h["series"].size(), 2u);  // bench (time evaluator) and check
  nlohmann::json bench_series, check_series;
  for (const auto& s : h["series"]) (s["scenario"] == "time-evaluator" ? bench_series : check_series) = s;
  ASSERT_EQ(bench_series["runs"].size(), 1u);
  const auto& run = bench_series["runs"][0];
  EXPECT_EQ(run["git_commit"], "c0ffee");
  EXPECT_EQ(run["git_branch"], "main");
  EXPECT_EQ(run["user"], "tester");
  EXPECT_EQ(run["tags"]["pr"], "42");
  EXPECT_EQ(run["verdict"], "pass");
  EXPECT_EQ(run["samples"], report["benchmark"]["samples_ms"].size());
  EXPECT_EQ(run["summary"]["median_ms"], report["benchmark"]["median_ms"]);
  EXPECT_EQ(bench_series["model_name"], "add_relu.onnx");
  EXPECT_EQ(bench_series["model_hash"].get<std::string>().size(), 32u);
  EXPECT_EQ(bench_series["compile_options"], report["environment"]["executable"]["compile_options"]);
  ASSERT_EQ(check_series["runs"].size(), 2u);
  EXPECT_EQ(check_series["runs"][0]["verdict"], "pass");
  EXPECT_EQ(check_series["runs"][1]["verdict"], "fail");
  EXPECT_EQ(check_series["runs"][1]["summary"]["mismatches"], 1);

  // Filters: another model, a later time.
  EXPECT_TRUE(Json(Cli("history --json --results " + url + " --model other.onnx"))["series"].empty());
  EXPECT_TRUE(Json(Cli("history --json --results " + url + " --since 2999-01-01"))["series"].empty());
  auto text = Cli("history --results " + url);
  EXPECT_NE(text.output.find("add_relu.onnx"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("pr=42"), std::string::npos) << text.output;

  // An unreachable store: the measurement is printed, then exit 3 (or 0, best effort).
  const std::string down = " --record postgresql://remex@127.0.0.1:1/none?connect_timeout=2";
  auto required = Cli("bench " + model_ + Server() + " --repeat 3 --json" + kQuick + down + " 2>/dev/null");
  EXPECT_EQ(required.exit_code, 3);
  EXPECT_EQ(Json(required)["schema"], "remex.bench");
  auto best = Cli("bench " + model_ + Server() + " --repeat 3 --json --record-best-effort" + kQuick + down +
                  " 2>/dev/null");
  EXPECT_EQ(best.exit_code, 0);
  EXPECT_EQ(Json(best)["schema"], "remex.bench");
  // --record alone: REMEX_RESULTS, else a file under XDG_DATA_HOME; history reads the same.
  const std::string env_url = "sqlite://" + dir_ + "/env.sqlite";
  auto from_env = RunCommand("REMEX_RESULTS=" + env_url + " " + REMEX_CLI_BIN + " bench --record " + model_ +
                             Server() + " --repeat 3" + kQuick + " > /dev/null");
  EXPECT_EQ(from_env.exit_code, 0);
  auto env_history = RunCommand("REMEX_RESULTS=" + env_url + " " + REMEX_CLI_BIN + " history --json");
  ASSERT_EQ(env_history.exit_code, 0);
  EXPECT_EQ(Json(env_history)["series"].size(), 1u);
  auto xdg = RunCommand("env -u REMEX_RESULTS XDG_DATA_HOME=" + dir_ + "/xdg " + REMEX_CLI_BIN + " bench " + model_ +
                        Server() + " --repeat 3 --record" + kQuick + " > /dev/null");
  EXPECT_EQ(xdg.exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ + "/xdg/remex/results.sqlite"));
  // Usage errors before any work.
  EXPECT_EQ(Cli("bench " + model_ + " --tag a=b 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("bench " + model_ + " --record postgresql://u:pw@h/db 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("bench " + model_ + " --record mysql://h/db 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("bench " + model_ + " --record " + url + " --tag nokey 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("history --results " + url + " --since yesterday 2>/dev/null").exit_code, 2);
}

// remex regressions judges each recorded series against its history: a series whose two
// newest runs are 20 % slower is a regression (exit 1) naming the runs it compared, an
// unchanged one is no change, one run alone is insufficient data. The runs are written
// with the results store's own API (synthetic samples, so the step is known) and read
// by the CLI.
TEST_F(CliBenchTest, RegressionsNamesTheSeriesThatGotSlower) {
  const std::string url = "sqlite://" + dir_ + "/regressions.sqlite";
  {
    auto store = tooling::OpenResultsStore(url);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::mt19937_64 rng(7);
    auto add = [&](const std::string& model, int minute, double median_ms) {
      tooling::RunRecord r;
      r.recorded_at = "2026-12-01T10:0" + std::to_string(minute) + ":00Z";
      r.kind = "bench";
      r.model_name = model;
      r.model_hash = model + "-hash";
      r.scenario = "time-evaluator";
      r.device_class = "cpu:test";
      r.device = "cpu";
      r.verdict = "pass";
      std::lognormal_distribution<double> noise(0, 0.03);
      for (int i = 0; i < 200; ++i) r.samples_ms.push_back(median_ms * noise(rng));
      r.summary = {{"median_ms", median_ms}, {"count", 200}};
      auto id = (*store)->Record(r);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
    };
    const double drift[] = {1.0, 1.004, 0.997, 1.002, 0.999, 1.001, 0.998};
    for (int run = 0; run < 7; ++run) {  // ids: slower 1, 3, ..., 13; steady 2, 4, ..., 14
      add("slower.onnx", run, 10.0 * drift[run] * (run >= 5 ? 1.2 : 1.0));
      add("steady.onnx", run, 5.0 * drift[run]);
    }
    add("new.onnx", 7, 3.0);  // id 15
  }
  auto r = Cli("regressions --json --results " + url);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = Json(r);
  ASSERT_EQ(j["schema"], "remex.regressions") << r.output;
  EXPECT_EQ(j["regressions"], 1);
  std::map<std::string, nlohmann::json> by_model;
  for (const auto& f : j["findings"]) by_model[f["model_name"].get<std::string>()] = f;
  ASSERT_EQ(by_model.size(), 3u) << r.output;
  const auto& slower = by_model["slower.onnx"];
  EXPECT_EQ(slower["state"], "regression") << slower.dump();
  EXPECT_EQ(slower["candidate_runs"], nlohmann::json({11, 13})) << slower.dump();
  EXPECT_EQ(slower["baseline_runs"], nlohmann::json({1, 3, 5, 7, 9})) << slower.dump();
  EXPECT_NEAR(slower["change_pct"].get<double>(), 20.0, 2.0);
  EXPECT_LE(slower["ci_low_pct"].get<double>(), 20.0);
  EXPECT_GE(slower["ci_high_pct"].get<double>(), 19.0);
  EXPECT_EQ(by_model["steady.onnx"]["state"], "no change") << by_model["steady.onnx"].dump();
  EXPECT_EQ(by_model["new.onnx"]["state"], "insufficient data");
  // The text names the state, the change and the runs; one model alone is judged alone.
  auto text = Cli("regressions --results " + url);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.output.find("runs 11,13 against 1,3,5,7,9"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("3 series judged, 1 regression"), std::string::npos) << text.output;
  auto steady = Cli("regressions --results " + url + " --model steady.onnx");
  EXPECT_EQ(steady.exit_code, 0) << steady.output;
  EXPECT_NE(steady.output.find("1 series judged, 0 regressions"), std::string::npos) << steady.output;
  // Three confirmations: the 20 % step is in two runs only.
  EXPECT_EQ(Cli("regressions --results " + url + " --confirmations 3 > /dev/null").exit_code, 0);
  // Bad options are usage errors; a store that is not there is named.
  EXPECT_EQ(Cli("regressions --results " + url + " --alpha 2 2>/dev/null").exit_code, 2);
  auto none = Cli("regressions --results sqlite://" + dir_ + "/none.sqlite 2>&1");
  EXPECT_EQ(none.exit_code, 3) << none.output;
  EXPECT_NE(none.output.find("no results store at"), std::string::npos) << none.output;
}

// remex suite --record: one record per case (its bench report, else its check report),
// in series of their own ("suite SUITE/CASE bench|check").
TEST_F(CliBenchTest, SuiteRecordsEachCase) {
  const std::string url = "sqlite://" + dir_ + "/results.sqlite";
  WriteReference(dir_ + "/ref");
  std::ofstream(dir_ + "/ci.toml")
      << "name = \"ci\"\n"
         "[[case]]\nname = \"timed\"\nmodel = \"add_relu.onnx\"\n"
         "[case.bench]\nrepeat = 5\n"
         "[[case]]\nname = \"checked\"\nmodel = \"add_relu.onnx\"\nreference = \"ref\"\n";
  auto suite =
      Cli("suite " + dir_ + "/ci.toml" + Server() + " --record " + url + " --tag run=nightly > /dev/null");
  ASSERT_EQ(suite.exit_code, 0);
  const auto h = Json(Cli("history --json --results " + url));
  ASSERT_EQ(h["series"].size(), 2u) << h.dump(2);
  std::set<std::string> scenarios;
  for (const auto& s : h["series"]) {
    scenarios.insert(s["scenario"].get<std::string>());
    ASSERT_EQ(s["runs"].size(), 1u);
    EXPECT_EQ(s["runs"][0]["kind"], "suite");
    EXPECT_EQ(s["runs"][0]["verdict"], "pass");
    EXPECT_EQ(s["runs"][0]["tags"]["run"], "nightly");
  }
  EXPECT_EQ(scenarios, (std::set<std::string>{"suite ci/timed bench", "suite ci/checked check"}));
}

// remex suite --regressions judges the suite's own series after recording them: with a
// history of runs fifty times faster than this one (written through the store's API in
// the timed case's series), the case's new run and the slow one before it are a
// confirmed regression: exit 1 with `fail`, a warning with `warn`. Without history it is
// insufficient data; without --record the flag is a usage error. The history is fifty
// times faster (not a few times) so that a loaded machine's own variation between the
// two real runs cannot hide the step.
TEST_F(CliBenchTest, SuiteRegressionsGateOnTheSuitesOwnSeries) {
  const std::string first_url = "sqlite://" + dir_ + "/first.sqlite";
  std::ofstream(dir_ + "/ci.toml") << "name = \"ci\"\n"
                                      "[[case]]\nname = \"timed\"\nmodel = \"add_relu.onnx\"\n"
                                      "[case.bench]\nrepeat = 20\n";
  auto suite = [&](const std::string& url) { return "suite " + dir_ + "/ci.toml" + Server() + " --record " + url; };
  auto first = Cli(suite(first_url) + " --regressions fail");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("insufficient data"), std::string::npos) << first.output;
  EXPECT_EQ(Cli(suite(first_url) + " --regressions 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("suite " + dir_ + "/ci.toml" + Server() + " --regressions fail 2>/dev/null").exit_code, 2);
  // The case's series as the first store has it, and its median.
  auto store = tooling::OpenResultsStore(first_url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto series = (*store)->ListSeries({});
  ASSERT_TRUE(series.ok() && series->size() == 1u);
  const tooling::SeriesInfo s = series->front();
  // A store whose history of the series is five runs of 10 ns, faster than any real run
  // of the model can be however loaded the machine, then one of 1 us: with the suite's
  // next (real) run, the two newest are slower. No figure here depends on this machine.
  auto seeded = [&](const std::string& name) {
    const std::string url = "sqlite://" + dir_ + "/" + name + ".sqlite";
    auto to = tooling::OpenResultsStore(url);
    EXPECT_TRUE(to.ok()) << to.status().ToString();
    std::mt19937_64 rng(3);
    std::lognormal_distribution<double> noise(0, 0.02);
    for (double run_ms : {1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-3}) {
      tooling::RunRecord r;
      r.recorded_at = "2026-12-01T10:00:00Z";
      r.kind = "suite";
      r.model_name = s.model_name;
      r.model_hash = s.model_hash;
      r.compile_options = s.compile_options;
      r.scenario = s.scenario;
      r.device_class = s.device_class;
      r.verdict = "pass";
      for (int i = 0; i < 50; ++i) r.samples_ms.push_back(run_ms * noise(rng));
      r.summary = {{"median_ms", run_ms}};
      EXPECT_EQ(r.SeriesKey(), s.series_key);
      EXPECT_TRUE(to.ok() && (*to)->Record(r).ok());
    }
    return url;
  };
  auto warned = Cli(suite(seeded("warn")) + " --regressions warn 2>&1");
  EXPECT_EQ(warned.exit_code, 0) << warned.output;
  EXPECT_NE(warned.output.find("1 regression in the suite's series (--regressions warn)"), std::string::npos)
      << warned.output;
  auto failed = Cli(suite(seeded("fail")) + " --regressions fail --json 2>&1");
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("regression  "), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("suite ci/timed bench"), std::string::npos) << failed.output;
}

}  // namespace
}  // namespace remex
