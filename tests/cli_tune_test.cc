// `remex tune` against real remex-server processes (and, for a farm, a real redis-server):
// each bucket gets the choice that measured faster beyond the noise, the log replays so a
// second tune measures nothing, `remex compile --tuning-log` writes the very executable
// the tune wrote, a candidate that mismatches the reference is logged and never chosen,
// and a tune over a farm of three servers spreads its buckets over all three and chooses
// as a tune on one server does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "host_client/compiler/onnx_test_util.h"
#include "rpc/redis_test_util.h"
#include "tests/cli_test_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using remex::testing::OnnxModelBuilder;
using remex::testing::ReadText;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

// y = Tanh(Relu(Sigmoid((x + 1) * (x + 1)) * x - 0.5)): x float32 [1, 16, 64, W] (W the
// symbol "d3"). Compiled with --dtype float16 it runs several times slower on the CPU
// device, which has no float16 arithmetic (every kernel widens its inputs and rounds its
// output), so the tunes below start there and must find dtype=model (float32) faster,
// by far, at every W.
std::string SaveChainModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 16, 64, -1}).Output("y", onnx::TensorProto::FLOAT, {1, 16, 64, -1});
  b.FloatInit("one", {1}, {1.0f});
  b.FloatInit("half", {1}, {0.5f});
  b.Node("Add", {"x", "one"}, {"a"}, "add");
  b.Node("Mul", {"a", "a"}, {"m"}, "square");
  b.Node("Sigmoid", {"m"}, {"s"}, "sigmoid");
  b.Node("Mul", {"s", "x"}, {"g"}, "gate");
  b.Node("Sub", {"g", "half"}, {"d"}, "shift");
  b.Node("Relu", {"d"}, {"r"}, "relu");
  b.Node("Tanh", {"r"}, {"y"}, "tanh");
  const std::string path = dir + "/chain.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

// The log's records, one per line.
std::vector<json> LogRecords(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Short rounds: the gain measured here is large (about 7x in the plain tree, 1.6x in the
// sanitized one, where three servers sharing two cores leave 10 samples too noisy to
// call it every time).
constexpr const char* kQuick = " --min-duration-s 0.2 --min-samples 30";

class CliTuneTest : public remex::testing::CliTest {
 protected:
  CliTuneTest() : CliTest("remex_cli_tune") {}
  void SetUp() override {
    CliTest::SetUp();
    model_ = SaveChainModel(dir_);
  }
  std::string model_;
};

TEST_F(CliTuneTest, EachBucketGetsTheFasterChoiceAndTheLogIsReused) {
  const std::string log = dir_ + "/tuning.jsonl";
  const std::string options = " --bound d3=1:256 --dispatch d3=edges:128,256 --dtype float16";
  const std::string tune = "tune " + model_ + options + Server() + kQuick + " --space dtype=model,float16 --log " +
                           log + " --json -o ";
  auto r = Cli(tune + dir_ + "/tuned.rmx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = Json(r);
  EXPECT_EQ(j["schema"], "remex.tune");
  ASSERT_EQ(j["buckets"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["buckets"][0]["bucket"], "main[d3=1..128]");
  EXPECT_EQ(j["buckets"][1]["bucket"], "main[d3=129..256]");
  EXPECT_EQ(j["buckets"][1]["shapes"]["x"], json({1, 16, 64, 256}));  // the bucket's upper edge
  for (const json& b : j["buckets"]) {
    SCOPED_TRACE(b.dump());
    EXPECT_EQ(b["start"]["dtype"], "float16");
    EXPECT_EQ(b["choice"]["dtype"], "model");
    EXPECT_EQ(b["label"], "dtype=model");
    // Confirmed side by side against the start.
    EXPECT_LT(b["ratio"].get<double>(), 1.0);
    EXPECT_LT(b["ratio_high"].get<double>(), 1.0);
    EXPECT_TRUE(b["beyond_noise"].get<bool>());
    EXPECT_EQ(b["measured"], 1);
    EXPECT_TRUE(b["complete"].get<bool>());
    EXPECT_FALSE(b["from_log"].get<bool>());
  }
  EXPECT_EQ(j["measured"], 2);
  const std::vector<json> records = LogRecords(log);
  std::map<std::string, int> kinds;
  for (const json& rec : records) {
    EXPECT_EQ(rec["schema"], "remex.tuning");
    EXPECT_EQ(rec["fingerprint"], j["fingerprint"]);
    EXPECT_EQ(rec["model_hash"], j["model_hash"]);
    kinds[rec["kind"]]++;
  }
  EXPECT_EQ(kinds["best"], 2);
  EXPECT_EQ(kinds["round"], 2);   // the second round has no candidate left: not logged
  EXPECT_EQ(kinds["measure"], 4);  // incumbent and candidate, per bucket

  // The tuned executable serves both buckets.
  for (const char* shape : {"1x16x64x100", "1x16x64x200"}) {
    auto run = Cli("run " + dir_ + "/tuned.rmx --shape x=" + shape + Server() + " --fetch none");
    EXPECT_EQ(run.exit_code, 0) << run.output;
  }

  // Again with the same log: every bucket is in it, nothing is measured, nothing logged,
  // and the executable is the same.
  auto again = Cli(tune + dir_ + "/again.rmx");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  json k = Json(again);
  EXPECT_EQ(k["measured"], 0);
  for (const json& b : k["buckets"]) EXPECT_TRUE(b["from_log"].get<bool>()) << b.dump();
  EXPECT_EQ(LogRecords(log).size(), records.size());
  EXPECT_EQ(k["output_hash"], j["output_hash"]);
  EXPECT_EQ(Bytes(dir_ + "/again.rmx"), Bytes(dir_ + "/tuned.rmx"));

  // `remex compile --tuning-log` compiles exactly that executable, with no server.
  auto compiled = Cli("compile " + model_ + options + " --tuning-log " + log + " -o " + dir_ + "/compiled.rmx --json");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  EXPECT_EQ(Bytes(dir_ + "/compiled.rmx"), Bytes(dir_ + "/tuned.rmx"));
  // Without the log, the same options compile something else (float16 everywhere).
  auto plain = Cli("compile " + model_ + options + " -o " + dir_ + "/plain.rmx");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(Bytes(dir_ + "/plain.rmx"), Bytes(dir_ + "/tuned.rmx"));
}

TEST_F(CliTuneTest, ABudgetOrASignalStopsATuneThatTheSameCommandResumes) {
  const std::string log = dir_ + "/tuning.jsonl";
  const std::string tune = "tune " + model_ + " --bound d3=1:256 --dispatch d3=edges:64,128,192,256 --dtype float16" +
                           Server() + " --space dtype=model,float16 --log " + log + " --json";
  // No budget left: nothing measured, each bucket keeps the start, logged as not complete.
  auto spent = Cli(tune + kQuick + " --budget-s 0.000001 -o " + dir_ + "/spent.rmx");
  ASSERT_EQ(spent.exit_code, 0) << spent.output;
  json j = Json(spent);
  EXPECT_EQ(j["stopped"], "budget");
  EXPECT_EQ(j["measured"], 0);
  for (const json& b : j["buckets"]) {
    EXPECT_FALSE(b["complete"].get<bool>()) << b.dump();
    EXPECT_EQ(b["choice"]["dtype"], "float16");
  }
  // A signal during the next run: the round in progress ends, no executable is written,
  // exit 128 + SIGINT.
  auto cut = RunCommand("timeout --preserve-status -s INT 4 " + std::string(REMEX_CLI_BIN) + " " + tune +
                        " --min-duration-s 0.5 --min-samples 10 -o " + dir_ + "/cut.rmx");
  EXPECT_EQ(cut.exit_code, 130) << cut.output;
  EXPECT_FALSE(fs::exists(dir_ + "/cut.rmx"));
  int rounds_before = 0;
  for (const json& rec : LogRecords(log)) rounds_before += rec["kind"] == "round" ? 1 : 0;
  EXPECT_GE(rounds_before, 1);
  EXPECT_LT(rounds_before, 4);
  // The same command goes on from the log: a round logged before the signal is not
  // measured again, so each bucket has exactly one round (its winner, dtype=model; the
  // next round has no candidate left), and every bucket completes.
  auto resumed = Cli(tune + kQuick + " -o " + dir_ + "/tuned.rmx");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  j = Json(resumed);
  EXPECT_TRUE(j["stopped"].is_null());
  EXPECT_EQ(j["measured"].get<int>(), 4 - rounds_before) << j.dump(2);
  for (const json& b : j["buckets"]) {
    EXPECT_TRUE(b["complete"].get<bool>()) << b.dump();
    EXPECT_EQ(b["choice"]["dtype"], "model") << b.dump();
    EXPECT_EQ(b["rounds"], 1) << b.dump();
  }
  std::map<std::string, int> rounds, complete;
  for (const json& rec : LogRecords(log)) {
    if (rec["kind"] == "round") rounds[rec["bucket"]]++;
    if (rec["kind"] == "best" && rec["complete"].get<bool>()) complete[rec["bucket"]]++;
  }
  EXPECT_EQ(rounds.size(), 4u);
  for (const auto& [bucket, n] : rounds) EXPECT_EQ(n, 1) << bucket;
  for (const auto& [bucket, n] : complete) EXPECT_EQ(n, 1) << bucket;
  EXPECT_TRUE(fs::exists(dir_ + "/tuned.rmx"));
}

TEST_F(CliTuneTest, ACandidateThatMismatchesIsLoggedAndNeverChosen) {
  // float16 checked with no tolerance at all cannot match the float32 reference.
  const std::string log = dir_ + "/tuning.jsonl";
  auto r = Cli("tune " + model_ + " --shape x=1x16x64x64" + Server() + kQuick +
               " --space dtype=model,float16 --float16-rtol 0 --float16-atol 0 --log " + log + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = Json(r);
  ASSERT_EQ(j["buckets"].size(), 1u);
  const json& b = j["buckets"][0];
  EXPECT_EQ(b["bucket"], "main");
  EXPECT_EQ(b["choice"]["dtype"], "model");
  EXPECT_EQ(b["rejected"], 1);
  EXPECT_EQ(b["measured"], 0);
  EXPECT_TRUE(b["complete"].get<bool>());
  EXPECT_TRUE(b["ratio"].is_null());  // the start stays: nothing to confirm
  EXPECT_TRUE(j["output"].is_null());
  int rejected = 0;
  for (const json& rec : LogRecords(log)) {
    if (rec["kind"] != "measure") continue;
    EXPECT_EQ(rec["status"], "rejected") << rec.dump();
    EXPECT_EQ(rec["choice"]["dtype"], "float16");
    EXPECT_EQ(rec["reason"].get<std::string>().rfind("mismatch: output y", 0), 0u) << rec.dump();
    rejected++;
  }
  EXPECT_EQ(rejected, 1);
}

TEST_F(CliTuneTest, UsageAndLogErrorsAreClear) {
  const std::string log = dir_ + "/tuning.jsonl";
  auto rmx = Cli("compile " + model_ + " --shape x=1x16x64x8 -o " + dir_ + "/m.rmx");
  ASSERT_EQ(rmx.exit_code, 0) << rmx.output;
  auto r = Cli("tune " + dir_ + "/m.rmx" + Server() + " --log " + log + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("takes an .onnx model"), std::string::npos) << r.output;
  r = Cli("tune " + model_ + Server() + " --space threads=1,2 --log " + log + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--space 'threads=1,2': unknown choice 'threads'"), std::string::npos) << r.output;
  r = Cli("tune " + model_ + Server() + " --space cudnn-algo=0,1 --log " + log + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--space cudnn-algo: the cpu device's kernels do not take cudnn_algo (a cuda device's do)"),
            std::string::npos)
      << r.output;
  r = Cli("tune " + model_ + Server() + " --space cudnn-algo=9 --log " + log + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cudnn-algo takes integers in [0, 7], got '9'"), std::string::npos) << r.output;
  r = Cli("tune " + model_ + Server() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--log"), std::string::npos) << r.output;
  // --compute-threads, the search's CPU axis, is a compile option everywhere.
  r = Cli("bench " + model_ + " --shape x=1x16x64x8 --compute-threads 1" + Server() +
          " --min-duration-s 0 --min-samples 0 --max-trials 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Json(r)["environment"]["executable"]["compile_options"]["compute_threads"], 1) << r.output;
  r = Cli("compile " + model_ + " --compute-threads 2000 -o " + dir_ + "/x.rmx 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = Cli("compile " + model_ + " --tuned-for 'cpu: x' -o " + dir_ + "/x.rmx 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tuned-for needs --tuning-log"), std::string::npos) << r.output;

  // A log of buckets that are not this compile's, and a log without this model.
  std::ofstream(log) << R"({"schema":"remex.tuning","schema_version":1,"kind":"best","fingerprint":"cpu: x",)"
                     << R"("model_hash":"0123","bucket":"main[d3=1..64]","complete":true,)"
                     << R"("choice":{"layout":"NCHW","dtype":"model","fold_batchnorm":true,"fuse_epilogues":true,"fuse_elementwise":true}})"
                     << "\n{torn line\n";
  r = Cli("compile " + model_ + " --tuning-log " + log + " -o " + dir_ + "/x.rmx 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no tuned bucket for this model"), std::string::npos) << r.output;
}

// Three servers in one pool of a real Redis: the tune leases all three, each measures
// buckets, and every bucket chooses what a tune on one of them chooses.
// x [1, 64, 12, 12] -> Conv 3x3 (64, pads 1) -> Relu -> y: a convolution the CPU
// kernel may run as oneDNN's direct or Winograd algorithm (onednn_algo).
std::string SaveWinogradConvModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 64, 12, 12}).Output("y", onnx::TensorProto::FLOAT, {1, 64, 12, 12});
  std::vector<float> w(64 * 64 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(static_cast<int>((i * 37) % 17) - 8) / 8.0f;
  b.FloatInit("w", {64, 64, 3, 3}, w);
  auto* c = b.Node("Conv", {"x", "w"}, {"c"}, "conv");
  OnnxModelBuilder::IntsAttr(c, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"y"}, "relu");
  const std::string path = dir + "/winograd_conv.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

// The CPU device's per-node axis: each value of onednn-algo is checked against the
// reference and profiled per node, and the log compiles to the tuned executable again.
TEST_F(CliTuneTest, TheCpuConvolutionAlgorithmIsTunedPerNode) {
  const std::string model = SaveWinogradConvModel(dir_);
  const std::string log = dir_ + "/winograd.jsonl";
  auto r = Cli("tune " + model + Server() + " --space onednn-algo=0,1" + kQuick + " --log " + log + " -o " + dir_ +
               "/tuned.rmx --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["fingerprint"].get<std::string>().rfind("cpu: ", 0), 0u) << j["fingerprint"];
  ASSERT_EQ(j["buckets"].size(), 1u);
  EXPECT_TRUE(j["buckets"][0]["complete"].get<bool>());
  std::set<std::string> labels;
  for (const json& rec : LogRecords(log)) {
    if (rec["kind"] != "measure" || rec.value("phase", "") != "nodes") continue;
    EXPECT_EQ(rec["status"], "ok") << rec.dump();
    labels.insert(rec["label"].get<std::string>());
    if (rec.contains("node_median_ms")) {
      EXPECT_TRUE(rec["node_median_ms"].contains("conv+relu")) << rec.dump();
    }
    for (const auto& [node, attrs] : rec["choice"]["node_attrs"].items()) {
      EXPECT_TRUE(attrs.contains("onednn_algo")) << node;
    }
  }
  EXPECT_TRUE(labels.count("onednn-algo=0") && labels.count("onednn-algo=1")) << j.dump();
  auto compiled = Cli("compile " + model + " --tuning-log " + log + " -o " + dir_ + "/compiled.rmx");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  EXPECT_EQ(Bytes(dir_ + "/compiled.rmx"), Bytes(dir_ + "/tuned.rmx"));
  auto run = Cli("run " + dir_ + "/tuned.rmx" + Server() + " --fetch none");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST(FarmTuneTest, BucketsSpreadOverThreeServersAndChooseAsOneServerDoes) {
  remex::testing::RedisProcess redis;
  ASSERT_TRUE(redis.ready()) << "redis-server did not start (scripts/setup-deps.sh installs it)";
  const std::string url = redis.url_text();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) {
    // One compute thread each: three servers share this machine's cores, and kernels
    // whose threads wait for each other slow by far when they outnumber the cores (a
    // real farm gives each server its own device).
    servers.push_back(std::make_unique<ServerProcess>(
        std::vector<std::string>{"--farm", url, "--pool", "tune", "--threads", "1"}));
    ASSERT_NE(servers.back()->port(), 0) << servers.back()->banner();
  }
  const std::string dir = ::testing::TempDir() + "/remex_farm_tune";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = SaveChainModel(dir);
  const std::string common = std::string(REMEX_CLI_BIN) + " tune " + model +
                             " --bound d3=1:256 --dispatch d3=edges:64,128,192,256 --dtype float16" + kQuick +
                             " --space dtype=model,float16 --json";
  auto farm = RunCommand(common + " --farm " + url + " --pool tune --log " + dir + "/farm.jsonl");
  ASSERT_EQ(farm.exit_code, 0) << farm.output;
  const json f = json::parse(farm.output);
  EXPECT_EQ(f["servers"].size(), 3u) << f.dump(2);
  std::set<std::string> measured_on;
  for (const json& rec : LogRecords(dir + "/farm.jsonl")) {
    if (rec["kind"] == "measure") measured_on.insert(rec["server"].get<std::string>());  // "HOST:PORT (leased ...)"
  }
  EXPECT_EQ(measured_on.size(), 3u);
  for (const auto& s : servers) {
    EXPECT_TRUE(measured_on.count(s->address() + " (leased from pool tune)")) << s->address();
  }

  // One device of the same farm.
  auto one = RunCommand(common + " --farm " + url + " --pool tune --devices 1 --log " + dir + "/one.jsonl");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const json o = json::parse(one.output);
  EXPECT_EQ(o["servers"].size(), 1u);
  EXPECT_EQ(o["fingerprint"], f["fingerprint"]);
  ASSERT_EQ(o["buckets"].size(), 4u);
  ASSERT_EQ(f["buckets"].size(), 4u);
  // A bucket whose choice was confirmed faster than the start beyond the noise chose the
  // unwidened model, on the farm as on one server. Where a run's search or confirmation
  // stayed within the noise the choice may be either: three servers share two cores
  // here, and at the smallest widths float16's widening is small against a call's
  // overhead.
  auto confirmed_faster = [](const json& b) {
    return b["beyond_noise"].get<bool>() && b["ratio"].is_number() && b["ratio"].get<double>() < 1.0;
  };
  for (size_t i = 0; i < 4; ++i) {
    const json& fb = f["buckets"][i];
    const json& ob = o["buckets"][i];
    SCOPED_TRACE(fb.dump() + "\n" + ob.dump());
    EXPECT_EQ(fb["bucket"], ob["bucket"]);
    if (confirmed_faster(fb) && confirmed_faster(ob)) {
      EXPECT_EQ(fb["choice"], ob["choice"]);
      EXPECT_EQ(fb["choice"]["dtype"], "model");
    }
  }
  // The widest bucket widens 16 x 64 x 256 values a call: far past the noise on both.
  EXPECT_TRUE(confirmed_faster(f["buckets"][3])) << f["buckets"][3].dump();
  EXPECT_TRUE(confirmed_faster(o["buckets"][3])) << o["buckets"][3].dump();
}

}  // namespace
}  // namespace remex
