// The remex CLI's contract with users and CI, against a real remex-server process:
// one set of compile options for every subcommand that takes an .onnx, the exit
// codes (0 success, 1 mismatch or failed threshold, 2 usage, 3 infrastructure),
// contradictions refused, errors that name the valid values, --version.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "host_client/client/npy.h"
#include "host_client/compiler/onnx_test_util.h"
#include "tests/cli_test_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::OnnxModelBuilder;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

// y = Relu(Conv(x, w) + b): x float32 [1, 4, 8, W], W dynamic (the symbol "d3"), a layout-sensitive
// model (the NHWC pass rewrites it) with a symbolic dim.
std::string SaveConvModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 8, -1}).Output("y", onnx::TensorProto::FLOAT, {1, 4, 8, -1});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> w(4 * 4 * 3 * 3), bias(4);
  for (float& v : w) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  b.FloatInit("w", {4, 4, 3, 3}, w);
  b.FloatInit("b", {4}, bias);
  OnnxModelBuilder::IntsAttr(b.Node("Conv", {"x", "w", "b"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"y"}, "relu");
  std::string path = dir + "/conv.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

npy::Array Floats(Shape shape, float value) {
  npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = std::move(shape);
  std::vector<float> v(static_cast<size_t>(*NumElements(a.shape)), value);
  a.data.resize(v.size() * 4);
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

class CliContractTest : public remex::testing::CliTest {
 protected:
  CliContractTest() : CliTest("remex_cli_contract") {}
  void SetUp() override {
    CliTest::SetUp();
    model_ = SaveConvModel(dir_);
  }

  std::string model_;
};

// `run model.onnx --layout NHWC` builds exactly the executable `compile --layout NHWC`
// writes: the same bytes (content hash) and the same outputs. (--shape is a compile
// option too: it fixes the input's shape; the dynamic input here comes from a file.)
TEST_F(CliContractTest, RunCompilesAsCompileDoes) {
  ASSERT_TRUE(npy::Write(dir_ + "/x.npy", Floats({1, 4, 8, 20}, 0.25f)).ok());
  const std::string input = " --input x=" + dir_ + "/x.npy";
  const std::string options = " --layout NHWC --bound x:3=1:64 --dispatch d3=edges:16,32";
  auto c = Cli("compile " + model_ + " -o " + dir_ + "/conv.rmx" + options + " --json");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  auto compiled = Json(c);
  EXPECT_EQ(compiled["options"]["layout"], "NHWC");
  EXPECT_EQ(compiled["options"]["buckets"], 2);
  const auto bytes = fs::file_size(dir_ + "/conv.rmx");
  EXPECT_EQ(compiled["executable_bytes"].get<uint64_t>(), bytes);

  auto from_onnx = Cli("run " + model_ + options + Server() + input + " --output-dir " + dir_ + "/onnx --json");
  ASSERT_EQ(from_onnx.exit_code, 0) << from_onnx.output;
  auto from_rmx = Cli("run " + dir_ + "/conv.rmx" + Server() + input + " --output-dir " + dir_ + "/rmx --json");
  ASSERT_EQ(from_rmx.exit_code, 0) << from_rmx.output;
  auto a = Json(from_onnx), b = Json(from_rmx);
  EXPECT_EQ(a["module_cache"]["hash"], b["module_cache"]["hash"]);
  EXPECT_TRUE(b["module_cache"]["hit"].get<bool>()) << "the .rmx is the module run already loaded";
  EXPECT_EQ(a["function"], "main[d3=17..32]");
  auto same = Cli("compare " + dir_ + "/onnx " + dir_ + "/rmx --rtol 0 --atol 0");
  EXPECT_EQ(same.exit_code, 0) << same.output;

  // Without the options, run builds a different executable.
  auto plain = Cli("run " + model_ + Server() + input + " --fetch none --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(Json(plain)["module_cache"]["hash"], a["module_cache"]["hash"]);
  // bench and check take the same options.
  auto bench = Cli("bench " + model_ + options + Server() + input +
                   " --repeat 2 --min-duration-s 0 --min-samples 0 --max-trials 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_EQ(Json(bench)["module_cache"]["hash"], a["module_cache"]["hash"]);
  auto check = Cli("check " + model_ + options + Server() + input + " --reference " + dir_ + "/onnx --json");
  ASSERT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(Json(check)["module_cache"]["hash"], a["module_cache"]["hash"]);
}

TEST_F(CliContractTest, SymbolsAreNamedByTheModelOrByInputAndAxis) {
  auto by_site = Cli("compile " + model_ + " -o " + dir_ + "/a.rmx --bound x:3=8:128");
  ASSERT_EQ(by_site.exit_code, 0) << by_site.output;
  EXPECT_NE(by_site.output.find("symbol  d3 in [8, 128]  (x:3)"), std::string::npos) << by_site.output;
  auto wrong = Cli("compile " + model_ + " -o " + dir_ + "/b.rmx --bound N=1:4 2>&1");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("--bound names 'N', which is no symbolic input dimension; the model's: d3 (x:3)"),
            std::string::npos)
      << wrong.output;
}

TEST_F(CliContractTest, ExitCodesTellMismatchUsageAndInfrastructureApart) {
  // 1: a mismatch.
  fs::create_directories(dir_ + "/e");
  fs::create_directories(dir_ + "/a");
  ASSERT_TRUE(npy::Write(dir_ + "/e/y.npy", Floats({2, 2}, 1.0f)).ok());
  ASSERT_TRUE(npy::Write(dir_ + "/a/y.npy", Floats({2, 2}, 1.5f)).ok());
  EXPECT_EQ(Cli("compare " + dir_ + "/e " + dir_ + "/a").exit_code, 1);
  // 2: usage, the CLI's own and the compiler's.
  EXPECT_EQ(Cli("run " + model_ + " --layout NCWH 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("run " + model_ + " --no-such-flag 2>/dev/null").exit_code, 2);
  EXPECT_EQ(Cli("compare " + dir_ + "/e " + dir_ + "/a --rtol -1 2>/dev/null").exit_code, 2);
  // 3: infrastructure: no server there, a model file that does not exist.
  std::string address;
  {
    ServerProcess gone;
    address = gone.address();
  }  // stopped: nothing listens there now
  auto refused = Cli("run " + model_ + " --shape x=1x4x8x8 --server " + address + " 2>&1");
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("connecting to"), std::string::npos) << refused.output;
  auto missing = Cli("run " + dir_ + "/nope.rmx 2>&1");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("No such file or directory"), std::string::npos) << missing.output;
  // A model that cannot be opened leaves no empty --output-dir behind.
  auto nothing = Cli("run " + dir_ + "/nope.onnx --output-dir " + dir_ + "/never 2>&1");
  EXPECT_EQ(nothing.exit_code, 3) << nothing.output;
  EXPECT_FALSE(fs::exists(dir_ + "/never")) << nothing.output;
}

TEST_F(CliContractTest, AMissingReferenceIsNotAMismatch) {
  fs::create_directories(dir_ + "/ref");
  auto r = Cli("check " + model_ + Server() + " --shape x=1x4x8x8 --reference " + dir_ + "/ref --json");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  auto j = Json(r);
  EXPECT_TRUE(j["missing_reference"].get<bool>());
  EXPECT_EQ(j["outputs"][0]["verdict"], "missing");
  auto text = Cli("check " + model_ + Server() + " --shape x=1x4x8x8 --reference " + dir_ + "/ref 2>&1");
  EXPECT_EQ(text.exit_code, 3);
  EXPECT_EQ(text.output.find("MISMATCH"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("NO REFERENCE"), std::string::npos) << text.output;
}

TEST_F(CliContractTest, ContradictionsAreRefused) {
  // --shape against the --input file's shape.
  ASSERT_TRUE(npy::Write(dir_ + "/x.npy", Floats({1, 4, 8, 8}, 0.5f)).ok());
  auto shape = Cli("run " + model_ + Server() + " --input x=" + dir_ + "/x.npy --shape x=1x4x8x16 2>&1");
  EXPECT_EQ(shape.exit_code, 2) << shape.output;
  EXPECT_NE(shape.output.find("--shape x gives [1, 4, 8, 16] but"), std::string::npos) << shape.output;
  // Compile options on an executable compiled already.
  ASSERT_EQ(Cli("compile " + model_ + " -o " + dir_ + "/m.rmx").exit_code, 0);
  auto rmx = Cli("run " + dir_ + "/m.rmx --layout NHWC --shape x=1x4x8x8 2>&1");
  EXPECT_EQ(rmx.exit_code, 2) << rmx.output;
  EXPECT_NE(rmx.output.find("is compiled already"), std::string::npos) << rmx.output;
  // Negative tolerances; arrays of different shapes.
  fs::create_directories(dir_ + "/ref");
  EXPECT_EQ(Cli("check " + model_ + " --reference " + dir_ + "/ref --atol -1 2>/dev/null").exit_code, 2);
  ASSERT_TRUE(npy::Write(dir_ + "/p.npy", Floats({2, 2}, 1.0f)).ok());
  ASSERT_TRUE(npy::Write(dir_ + "/q.npy", Floats({4}, 1.0f)).ok());
  auto shapes = Cli("compare " + dir_ + "/p.npy " + dir_ + "/q.npy 2>&1");
  EXPECT_EQ(shapes.exit_code, 2) << shapes.output;
  EXPECT_NE(shapes.output.find("cannot compare an array of shape [4] with an expected one of shape [2, 2]"),
            std::string::npos)
      << shapes.output;
}

TEST_F(CliContractTest, ErrorsNameTheValidValuesOnce) {
  auto fetch = Cli("run " + model_ + Server() + " --shape x=1x4x8x8 --fetch z 2>&1");
  EXPECT_EQ(fetch.exit_code, 2) << fetch.output;
  EXPECT_NE(fetch.output.find("use all, none or output names (y)"), std::string::npos) << fetch.output;
  auto input = Cli("run " + model_ + Server() + " --shape x=1x4x8x8 --input q=" + dir_ + "/q.npy 2>&1");
  EXPECT_EQ(input.exit_code, 2) << input.output;
  EXPECT_NE(input.output.find("no input of the model (x)"), std::string::npos) << input.output;
  // One line, not the same reason twice.
  EXPECT_EQ(std::count(input.output.begin(), input.output.end(), '\n'), 1) << input.output;
  // An output folder that cannot be written is refused before anything runs.
  std::ofstream(dir_ + "/file") << "x";
  auto out = Cli("run " + model_ + Server() + " --shape x=1x4x8x8 --output-dir " + dir_ + "/file/sub 2>&1");
  EXPECT_EQ(out.exit_code, 3) << out.output;
  EXPECT_NE(out.output.find("Not a directory"), std::string::npos) << out.output;
}

TEST_F(CliContractTest, PlainRunKeepsWireDetailForVerbose) {
  auto plain = Cli("run " + model_ + Server() + " --shape x=1x4x8x8 --fetch none");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("y: float32 [1, 4, 8, 8]  (not fetched)"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find("handle"), std::string::npos) << "a handle that dies with the session is noise";
  EXPECT_EQ(plain.output.find("wire"), std::string::npos) << plain.output;
  auto verbose = Cli("run " + model_ + Server() + " --shape x=1x4x8x8 --fetch none --verbose");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.output;
  EXPECT_NE(verbose.output.find("wire"), std::string::npos) << verbose.output;
  EXPECT_NE(verbose.output.find("allocs"), std::string::npos) << verbose.output;
}

TEST_F(CliContractTest, BenchFailUnstableExitsOne) {
  // One request of five samples is one measurement window: too few to judge stability,
  // whatever the clock says.
  const std::string quick = " --shape x=1x4x8x8 --repeat 5 --min-duration-s 0 --min-samples 0 --max-trials 1";
  auto r = Cli("bench " + model_ + Server() + quick + " --fail-unstable");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("too few windows (1 of 3)"), std::string::npos) << r.output;
  auto ok = Cli("bench " + model_ + Server() + quick);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(CliContractTest, CompareJsonHasCheckMetrics) {
  fs::create_directories(dir_ + "/e");
  fs::create_directories(dir_ + "/a");
  ASSERT_TRUE(npy::Write(dir_ + "/e/y.npy", Floats({2, 2}, 1.0f)).ok());
  ASSERT_TRUE(npy::Write(dir_ + "/a/y.npy", Floats({2, 2}, 1.25f)).ok());
  auto r = Cli("compare " + dir_ + "/e " + dir_ + "/a --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto j = Json(r);
  EXPECT_FALSE(j["match"].get<bool>());
  const auto& f = j["files"][0];
  for (const char* key : {"count", "mismatches", "max_abs_error", "max_rel_error", "first_mismatch"}) {
    EXPECT_TRUE(f.contains(key)) << key;
  }
  EXPECT_EQ(f["count"], 4);
  EXPECT_EQ(f["mismatches"], 4);
  EXPECT_EQ(f["first_mismatch"], 0);
  EXPECT_DOUBLE_EQ(f["max_abs_error"].get<double>(), 0.25);
}

// NaN where the reference has NaN is a match for compare and check unless
// --no-equal-nan (numpy.isclose's equal_nan, as ONNX's backend tests compare).
TEST_F(CliContractTest, EqualNanIsOnByDefault) {
  fs::create_directories(dir_ + "/e");
  fs::create_directories(dir_ + "/a");
  npy::Array with_nan = Floats({2, 2}, 1.0f);
  reinterpret_cast<float*>(with_nan.data.data())[1] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(npy::Write(dir_ + "/e/y.npy", with_nan).ok());
  ASSERT_TRUE(npy::Write(dir_ + "/a/y.npy", with_nan).ok());
  auto same = Cli("compare " + dir_ + "/e " + dir_ + "/a --json");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_TRUE(Json(same)["equal_nan"].get<bool>());
  auto strict = Cli("compare " + dir_ + "/e " + dir_ + "/a --no-equal-nan --json");
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_FALSE(Json(strict)["equal_nan"].get<bool>());
  EXPECT_EQ(Json(strict)["files"][0]["first_mismatch"], 1);

  // check, on the server: y = Sqrt(x) is NaN where x < 0.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 2}).Output("y", onnx::TensorProto::FLOAT, {2, 2});
  b.Node("Sqrt", {"x"}, {"y"}, "sqrt");
  const std::string sqrt_model = dir_ + "/sqrt.onnx";
  ASSERT_TRUE(b.Save(sqrt_model));
  npy::Array x = Floats({2, 2}, 4.0f);
  reinterpret_cast<float*>(x.data.data())[2] = -1.0f;
  ASSERT_TRUE(npy::Write(dir_ + "/x.npy", x).ok());
  const std::string input = " --input x=" + dir_ + "/x.npy";
  auto run = Cli("run " + sqrt_model + Server() + input + " --output-dir " + dir_ + "/ref");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto ref = npy::Read(dir_ + "/ref/y.npy");
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(std::isnan(reinterpret_cast<const float*>(ref->data.data())[2]));
  auto check = Cli("check " + sqrt_model + Server() + input + " --reference " + dir_ + "/ref --json");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  auto j = Json(check);
  EXPECT_TRUE(j["equal_nan"].get<bool>());
  ASSERT_FALSE(j["outputs"].empty());
  EXPECT_EQ(j["outputs"][0]["mismatches"], 0);
  auto check_strict =
      Cli("check " + sqrt_model + Server() + input + " --reference " + dir_ + "/ref --no-equal-nan --json");
  EXPECT_EQ(check_strict.exit_code, 1) << check_strict.output;
  EXPECT_EQ(Json(check_strict)["outputs"][0]["mismatches"], 1);
  EXPECT_EQ(Json(check_strict)["outputs"][0]["first_mismatch"], 2);
}

TEST_F(CliContractTest, VersionEverywhere) {
  auto cli = Cli("--version");
  EXPECT_EQ(cli.exit_code, 0);
  EXPECT_EQ(cli.output.rfind("remex ", 0), 0u) << cli.output;
  auto server = RunCommand(std::string(REMEX_SERVER_BIN) + " --version");
  EXPECT_EQ(server.exit_code, 0);
  EXPECT_EQ(server.output.rfind("remex-server ", 0), 0u) << server.output;
}

}  // namespace
}  // namespace remex
