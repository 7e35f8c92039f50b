// Whole models on the CUDA device: PP-OCR cls, det and rec compiled once and run by
// `remex run` on a real `remex-server --device cuda:0`, against ONNX Runtime
// (onnxruntime-node, CPU) on the same inputs; the super-resolution model in float16
// NHWC on the GPU against float32 NCHW on the CPU server; and rec with width buckets on
// the GPU against the generic executable. Label `cuda`: without a GPU every test skips
// itself, before it needs the models. In an emulation build (label `cuda-emu`) the
// server's cuda:0 is the host emulation, and the images are smaller.
//
// Environment as in ppocr_cls_test.cc (set by scripts/test.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "host_client/tooling/compare.h"
#include "host_client/client/npy.h"
#include "tests/model_test_util.h"
#include "tests/process_util.h"
#include "vm/device/cuda_device.h"

namespace remex {
namespace {

using remex::testing::RunCommand;
using remex::testing::ServerProcess;

class CudaModelTest : public remex::testing::ModelTest {
 protected:
  // ONNX Runtime is optional: without REMEX_ORT_RUN (the GPU machines have no node) the
  // reference is the CPU device of the test's own CPU server.
  CudaModelTest() : ModelTest("remex_cuda_model", "ch_ppocr_mobile_v2.0_cls_infer.onnx", true) {}

  void SetUp() override {
    if (vm::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU visible: whole-model GPU tests not run";
    ASSERT_NO_FATAL_FAILURE(ModelTest::SetUp());
    gpu_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--device", "cuda:0"});
    ASSERT_NE(gpu_->port(), 0) << "remex-server --device cuda:0 did not start";
  }

  std::string Compile(const std::string& model, const std::string& name, const std::string& args = "") {
    std::string rmx = dir_ + "/" + name + ".rmx";
    auto c = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + model + " -o " + rmx + " " + args);
    EXPECT_EQ(c.exit_code, 0) << c.output;
    return rmx;
  }

  // Runs `rmx` on the GPU server and ONNX Runtime on `model` at `shape` (without
  // REMEX_ORT_RUN: `rmx` on the CPU server, same input); compares `output` within `atol`
  // (rtol 1e-3).
  void MatchOnnxRuntime(const std::string& model, const std::string& rmx, const std::string& shape,
                        const std::string& output, double atol) {
    npy::Array expected, actual;
    const std::string out = dir_ + "/gpu_" + shape;
    const char* reference = "ONNX Runtime";
    if (!ort_run_.empty()) {
      ASSERT_NO_FATAL_FAILURE(RunRemexAndOnnxRuntimeOn(gpu_->address(), rmx, models_ + "/" + model, shape, 7,
                                                       out, output + ".npy", &expected, &actual));
    } else {
      reference = "the CPU device";
      auto g = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + gpu_->address() +
                          " --shape x=" + shape + " --seed 7 --save-inputs --output-dir " + out);
      ASSERT_EQ(g.exit_code, 0) << g.output;
      auto c = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() +
                          " --input x=" + out + "/inputs/x.npy --output-dir " + out + "/cpu");
      ASSERT_EQ(c.exit_code, 0) << c.output;
      auto e = npy::Read(out + "/cpu/" + output + ".npy"), a = npy::Read(out + "/" + output + ".npy");
      ASSERT_TRUE(e.ok() && a.ok());
      expected = std::move(e).value();
      actual = std::move(a).value();
    }
    auto c = compare::CompareArrays(expected, actual, 1e-3, atol);
    EXPECT_TRUE(c.ok) << model << " " << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
    std::printf("[cuda] %s %s: max abs error against %s %.3g\n", model.c_str(), shape.c_str(), reference,
                c.max_abs_error);
  }

  std::unique_ptr<ServerProcess> gpu_;
};

TEST_F(CudaModelTest, PpOcrModelsMatchOnnxRuntime) {
  const struct {
    const char* model;
    const char* output;
    const char* shapes[2];
    double atol;
  } cases[] = {
#if defined(REMEX_CUDA_EMULATION)
    // The emulated device computes convolutions by reference loops under the
    // sanitizers: smaller images, the same paths (batch 1 and > 1, every layer).
    {"ch_ppocr_mobile_v2.0_cls_infer.onnx", "softmax_0.tmp_0", {"1x3x48x192", "2x3x48x96"}, 1e-4},
    {"ch_PP-OCRv4_det_infer.onnx", "sigmoid_0.tmp_0", {"1x3x64x64", "2x3x32x96"}, 1e-3},
    {"ch_PP-OCRv4_rec_infer.onnx", "softmax_11.tmp_0", {"1x3x48x64", "2x3x48x96"}, 1e-4},
#else
    {"ch_ppocr_mobile_v2.0_cls_infer.onnx", "softmax_0.tmp_0", {"1x3x48x192", "4x3x48x192"}, 1e-4},
    {"ch_PP-OCRv4_det_infer.onnx", "sigmoid_0.tmp_0", {"1x3x640x640", "2x3x320x480"}, 1e-3},
    {"ch_PP-OCRv4_rec_infer.onnx", "softmax_11.tmp_0", {"1x3x48x320", "8x3x48x640"}, 1e-4},
#endif
  };
  for (const auto& c : cases) {
    const std::string rmx = Compile(models_ + "/" + c.model, c.model);
    for (const char* shape : c.shapes) MatchOnnxRuntime(c.model, rmx, shape, c.output, c.atol);
  }
}

TEST_F(CudaModelTest, SuperResolutionFloat16NhwcMatchesFloat32OnTheCpu) {
  const std::string sr = dir_ + "/sr.onnx";
#if defined(REMEX_CUDA_EMULATION)
  const char* size = " --height 12 --width 20";  // Reference convolutions on the host.
#else
  const char* size = " --height 72 --width 128";
#endif
  auto g = RunCommand(std::string(REMEX_CLI_BIN) + " gen-sr -o " + sr + size);
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const std::string f32 = Compile(sr, "sr_f32"), f16 = Compile(sr, "sr_f16", "--layout NHWC --dtype float16");
  auto cpu = RunCommand(std::string(REMEX_CLI_BIN) + " run " + f32 + " --server " + server_.address() +
                        " --seed 7 --save-inputs --output-dir " + dir_ + "/cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  auto gpu = RunCommand(std::string(REMEX_CLI_BIN) + " run " + f16 + " --server " + gpu_->address() + " --input x=" +
                        dir_ + "/cpu/inputs/x.npy --output-dir " + dir_ + "/gpu");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  auto e = npy::Read(dir_ + "/cpu/y.npy"), a = npy::Read(dir_ + "/gpu/y.npy");
  ASSERT_TRUE(e.ok() && a.ok());
  auto c = compare::CompareArrays(*e, *a, 1e-2, 3e-2);  // float16: 1/64 apart between 16 and 32
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  std::printf("[cuda] SR float16 NHWC on the GPU vs float32 on the CPU: max abs error %.3g\n", c.max_abs_error);
}

TEST_F(CudaModelTest, RecWidthBucketsMatchTheGenericFunctionOnTheGpu) {
  const std::string model = models_ + "/ch_PP-OCRv4_rec_infer.onnx";
  const std::string generic = Compile(model, "rec_generic", "--bound p2o.DynamicDimension.0=1:4");
  const std::string bucketed = Compile(model, "rec_bucketed",
                                       "--bound p2o.DynamicDimension.0=1:4 --dispatch p2o.DynamicDimension.1=log:2:32:2048");
#if defined(REMEX_CUDA_EMULATION)
  // Two buckets (33..64 and 65..128, batch 1 and 2) on the emulated device, a CPU under
  // both sanitizers (52 s here, 84 s with 2x3x48x200); the wider ones are left to GPUs.
  const char* const shapes[] = {"1x3x48x64", "2x3x48x72"};
#else
  const char* const shapes[] = {"1x3x48x64", "2x3x48x200", "1x3x48x2100"};
#endif
  for (const char* shape : shapes) {
    npy::Array arrays[2];
    const std::string* files[2] = {&generic, &bucketed};
    for (int k = 0; k < 2; ++k) {
      const std::string out = dir_ + "/bucket_" + std::to_string(k) + "_" + shape;
      auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + *files[k] + " --server " + gpu_->address() +
                          " --shape x=" + shape + " --seed 7 --output-dir " + out);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      auto a = npy::Read(out + "/softmax_11.tmp_0.npy");
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      arrays[k] = std::move(a).value();
    }
    auto c = compare::CompareArrays(arrays[0], arrays[1], 0.0, 1e-5);
    EXPECT_TRUE(c.ok) << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
  }
}

}  // namespace
}  // namespace remex
