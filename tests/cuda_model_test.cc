// Whole models on the CUDA device: PP-OCR cls, det and rec compiled once and run by
// `remex run` on a real `remex-server --device cuda:0`, against ONNX Runtime
// (onnxruntime-node, CPU) on the same inputs; the super-resolution model in float16
// NHWC on the GPU against float32 NCHW on the CPU server; a transformer decoder step with
// a KV cache on the GPU against the CPU server; and rec with width buckets on the GPU
// against the generic executable. Label `cuda`: without a GPU every test skips
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

// A transformer on the GPU: bench/decoder_step.py's two-layer decoder step (as
// torch.onnx.export writes one: Shape/Gather/Concat into Reshape, LayerNormalization,
// Erf GELU, attention's MatMul, mask and Softmax (unfused: `remex compile` knows no
// device, and only the CPU device fuses attention), Concat of the KV cache), written by
// the onnx package, compiled once and run on the GPU server and the CPU server on the same
// inputs: three new tokens after a cache of 5 (a causal mask over 8 keys), and one token
// after 7 (a decode step's single query row). The logits and the grown cache agree.
TEST_F(CudaModelTest, DecoderStepWithAKvCacheMatchesTheCpuDevice) {
  // The model is written with Python's onnx and numpy (scripts/setup-deps.sh --tests
  // installs them); a GPU machine given only the built binaries may lack them.
  if (RunCommand("/usr/bin/python3 -c 'import numpy, onnx'").exit_code != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 with numpy and onnx: the decoder step cannot be written";
  }
  const std::string model = dir_ + "/decoder_step.onnx";
  const std::string script = std::string("import sys, numpy as np, onnx; sys.path.insert(0, '") + REMEX_SOURCE_DIR +
                             "/bench'); import decoder_step as d; "
                             "onnx.save(d.build(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seed=3), '" +
                             model + "'); r = np.random.default_rng(5); o = '" + dir_ + "/'\n"
                             "for tag, new, past in (('a', 3, 5), ('b', 1, 7)):\n"
                             "    np.save(o + tag + '_ids.npy', r.integers(0, 256, (1, new)).astype(np.int64))\n"
                             "    [np.save(o + tag + '_' + n + '.npy', r.standard_normal((1, 4, past, 16)).astype(np.float32))"
                             " for n in ('past_key_0', 'past_value_0', 'past_key_1', 'past_value_1')]\n";
  auto g = RunCommand("/usr/bin/python3 -c \"" + script + "\"");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const std::string rmx = Compile(model, "decoder_step");
  for (const char* tag : {"a", "b"}) {
    SCOPED_TRACE(tag);
    std::string inputs = " --input input_ids=" + dir_ + "/" + tag + "_ids.npy";
    for (const char* n : {"past_key_0", "past_value_0", "past_key_1", "past_value_1"}) {
      inputs += std::string(" --input ") + n + "=" + dir_ + "/" + tag + "_" + n + ".npy";
    }
    const std::string out = dir_ + "/decoder_" + tag;
    auto gpu = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + gpu_->address() + inputs +
                          " --output-dir " + out + "/gpu");
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    auto cpu = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() + inputs +
                          " --output-dir " + out + "/cpu");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    for (const char* output : {"logits", "present_key_0", "present_value_1"}) {
      auto e = npy::Read(out + "/cpu/" + output + ".npy"), a = npy::Read(out + "/gpu/" + output + ".npy");
      ASSERT_TRUE(e.ok() && a.ok()) << output;
      auto c = compare::CompareArrays(*e, *a, 1e-3, 1e-4);
      EXPECT_TRUE(c.ok) << output << ": " << c.reason << ", max abs error " << c.max_abs_error;
      std::printf("[cuda] decoder step %s %s on the GPU vs the CPU: max abs error %.3g\n", tag, output,
                  c.max_abs_error);
    }
  }
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

// A server with --cuda-graphs: the classifier, and rec dispatched over width buckets,
// run again and again in one shell session. The first call with a shape runs as
// usual, the second and later launch a CUDA Graph (the shell says "a device graph"),
// and every call's output is the plain GPU server's.
TEST_F(CudaModelTest, CudaGraphsServeRepeatedCallsWithTheSameOutputs) {
  ServerProcess graphs(std::vector<std::string>{"--device", "cuda:0", "--cuda-graphs"});
  ASSERT_NE(graphs.port(), 0) << "remex-server --device cuda:0 --cuda-graphs did not start";
  const struct {
    const char* model;
    const char* compile;
    const char* shape;
    int runs;
  } cases[] = {
      {"ch_ppocr_mobile_v2.0_cls_infer.onnx", "", "1x3x48x192", 3},
      {"ch_PP-OCRv4_rec_infer.onnx", "--bound p2o.DynamicDimension.0=1:4 --dispatch p2o.DynamicDimension.1=log:2:32:2048",
       "1x3x48x64", 2},
  };
  for (const auto& c : cases) {
    const std::string rmx = Compile(models_ + "/" + c.model, std::string("graphs_") + c.model, c.compile);
    const std::string out = dir_ + "/graphs_" + c.model;
    // The plain GPU server's output, and the input it ran on.
    auto plain = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + gpu_->address() +
                            " --shape x=" + c.shape + " --seed 7 --save-inputs --output-dir " + out + " 2>&1");
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    std::string script = "load " + rmx + "\nupload x=" + out + "/inputs/x.npy\n";
    for (int i = 0; i < c.runs; ++i) script += "run\n";
    const std::string script_path = out + "/script.txt";
    FILE* f = std::fopen(script_path.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs(script.c_str(), f);
    std::fclose(f);
    auto shell = RunCommand(std::string(REMEX_CLI_BIN) + " shell --no-history --server " + graphs.address() + " < " +
                            script_path + " 2>&1");
    ASSERT_EQ(shell.exit_code, 0) << shell.output;
    // Each run prints "<model>: main in ... ms (...)[, served by ...][, a device graph]"
    // and its outputs' first values.
    std::vector<std::string> calls, values;
    size_t at = 0;
    while ((at = shell.output.find(": main in ", at)) != std::string::npos) {
      const size_t eol = shell.output.find('\n', at);
      calls.push_back(shell.output.substr(at, eol - at));
      const size_t next = shell.output.find('\n', eol + 1);
      values.push_back(shell.output.substr(eol + 1, next - eol - 1));
      at = eol;
    }
    ASSERT_EQ(calls.size(), static_cast<size_t>(c.runs)) << shell.output;
    // The output's summary (its values, or their statistics), after "%N name: dtype [shape]  ".
    auto summary = [](const std::string& line) {
      const size_t shape_end = line.find("]  ", line.find('%'));
      return shape_end == std::string::npos ? line : line.substr(shape_end + 3);
    };
    for (int i = 0; i < c.runs; ++i) {
      EXPECT_EQ(calls[i].find("a device graph") != std::string::npos, i > 0) << c.model << " call " << i << ": "
                                                                           << calls[i];
      EXPECT_EQ(summary(values[i]), summary(values[0])) << c.model << " call " << i;
    }
    if (std::string(c.compile).find("--dispatch") != std::string::npos) {
      EXPECT_NE(calls.back().find("served by main["), std::string::npos) << calls.back();
    }
    // The calls' outputs are the plain server's (remex run prints the same summary).
    EXPECT_NE(plain.output.find(summary(values[0])), std::string::npos)
        << "plain server:\n" << plain.output << "\ngraphs server: " << values[0];
  }
}

}  // namespace
}  // namespace remex
