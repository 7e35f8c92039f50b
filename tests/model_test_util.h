// Shared fixture of the model tests (ppocr_cls_test, ppocr_dynamic_test, sr_layout_test):
// a remex-server of the test's own, a folder per test and process, the model and ONNX
// Runtime paths from the environment, and one input run by `remex run` and then by ONNX
// Runtime (tests/reference/ort_run.js under node) on the inputs remex saved.
//
// Environment (set by scripts/test.sh): REMEX_MODELS_DIR, the folder of the .onnx models;
// REMEX_ORT_RUN, the path of ort_run.js; REMEX_REQUIRE_MODELS=1 turns a skip for a
// missing model or runner into a failure. The test's folder (executables, saved inputs and
// outputs: tens of MB per model) is removed when the test passes and kept, with its path
// printed, when it fails or when REMEX_KEEP_TEST_FILES=1.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <string>
#include <utility>

#include "host_client/client/npy.h"
#include "tests/process_util.h"

namespace remex::testing {

// Runs ONNX Runtime: `node <ort_run> <model> <out_dir> x=<input>` writes the outputs of
// the ONNX model at `model` on the input in `input` (an .npy path) to `out_dir`, one
// <output name>.npy each.
inline CommandResult RunOnnxRuntime(const std::string& ort_run, const std::string& model,
                                    const std::string& out_dir, const std::string& input) {
  return RunCommand("node " + ort_run + " " + model + " " + out_dir + " x=" + input);
}

class ModelTest : public ::testing::Test {
 protected:
  // `dir_prefix` names the test's folder, TempDir()/<dir_prefix>_<test name>_<pid>.
  // `required_model` (a file name in REMEX_MODELS_DIR; empty: none) is what the test
  // needs besides REMEX_MODELS_DIR and REMEX_ORT_RUN; with none, neither is required.
  // With `reference_optional`, a missing REMEX_ORT_RUN is no reason to skip: the test
  // then compares with the CPU device instead (ort_run_ is empty).
  explicit ModelTest(std::string dir_prefix, std::string required_model = "", bool reference_optional = false)
      : dir_prefix_(std::move(dir_prefix)),
        required_model_(std::move(required_model)),
        reference_optional_(reference_optional) {}

  // Reads the environment, skips (or fails) without the required model, then creates the
  // test's empty folder `dir_` and checks that the server started.
  void SetUp() override {
    namespace fs = std::filesystem;
    models_ = Env("REMEX_MODELS_DIR");
    ort_run_ = Env("REMEX_ORT_RUN");
    if (!required_model_.empty() && (models_.empty() || (ort_run_.empty() && !reference_optional_) ||
                                     !fs::exists(models_ + "/" + required_model_))) {
      if (Env("REMEX_REQUIRE_MODELS") == "1") FAIL() << "models or ONNX Runtime missing";
      GTEST_SKIP() << "REMEX_MODELS_DIR / REMEX_ORT_RUN not set: run scripts/test.sh";
    }
    // Per test and process: ctest runs the tests of a file in parallel.
    dir_ = ::testing::TempDir() + "/" + dir_prefix_ + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_NE(server_.port(), 0);
  }

  // Removes the test's folder unless the test failed or REMEX_KEEP_TEST_FILES=1.
  void TearDown() override {
    if (dir_.empty()) return;
    if (HasFailure() || Env("REMEX_KEEP_TEST_FILES") == "1") {
      std::printf("kept the test's files in %s\n", dir_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Runs `remex run <executable> --shape x=<shape> --seed <seed>` on the server with its
  // inputs and outputs saved under `out`, then ONNX Runtime on the ONNX model at
  // `onnx_model` with the same input into out/ort, and reads the file `output` (e.g.
  // "y.npy") of each: ONNX Runtime's into `expected`, remex's into `actual`. A step that
  // fails is a fatal failure.
  void RunRemexAndOnnxRuntime(const std::string& executable, const std::string& onnx_model,
                              const std::string& shape, int seed, const std::string& out,
                              const std::string& output, npy::Array* expected, npy::Array* actual) {
    RunRemexAndOnnxRuntimeOn(server_.address(), executable, onnx_model, shape, seed, out, output, expected, actual);
  }
  // The same on the server at `address`.
  void RunRemexAndOnnxRuntimeOn(const std::string& address, const std::string& executable,
                                const std::string& onnx_model, const std::string& shape, int seed,
                                const std::string& out, const std::string& output, npy::Array* expected,
                                npy::Array* actual) {
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + executable + " --server " + address +
                        " --shape x=" + shape + " --seed " + std::to_string(seed) + " --output-dir " + out +
                        " --save-inputs");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string ort = out + "/ort";
    auto o = RunOnnxRuntime(ort_run_, onnx_model, ort, out + "/inputs/x.npy");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    auto e = npy::Read(ort + "/" + output);
    auto a = npy::Read(out + "/" + output);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    *expected = std::move(e).value();
    *actual = std::move(a).value();
  }

  std::string models_, ort_run_, dir_;
  ServerProcess server_;

 private:
  std::string dir_prefix_, required_model_;
  bool reference_optional_ = false;
};

}  // namespace remex::testing
