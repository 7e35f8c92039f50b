// `remex tune`'s per-node phase on a real `remex-server --device cuda:0`: every value of
// cuDNN's algorithm and cuBLASLt's result index is compiled into the nodes that take it,
// checked against the CPU reference, profiled per node, and the per-node picks are kept
// only when they measure faster; the tuned executable runs, and `remex compile
// --tuning-log` writes it byte for byte. Label `cuda`: without a GPU the test skips
// itself; in an emulation build (label `cuda-emu`) cuda:0 is the host emulation of CUDA,
// which runs two convolution algorithms (others fall back to the heuristic's) and
// returns two cuBLASLt results.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "host_client/compiler/onnx_test_util.h"
#include "tests/cli_test_util.h"
#include "vm/device/cuda_device.h"

namespace remex {
namespace {

using nlohmann::json;
using remex::testing::OnnxModelBuilder;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

// x [1, 4, 16, 16] -> Conv 3x3 (8) -> Relu -> Conv 3x3 (8) -> MatMul by [16, 16] -> y.
std::string SaveConvMatMulModel(const std::string& dir) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 16, 16}).Output("y", onnx::TensorProto::FLOAT, {1, 8, 16, 16});
  auto weights = [](size_t n, float scale) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = scale * static_cast<float>(static_cast<int>((i * 37) % 17) - 8) / 8.0f;
    return w;
  };
  b.FloatInit("w0", {8, 4, 3, 3}, weights(288, 0.2f));
  b.FloatInit("w1", {8, 8, 3, 3}, weights(576, 0.1f));
  b.FloatInit("m", {16, 16}, weights(256, 0.25f));
  auto* c0 = b.Node("Conv", {"x", "w0"}, {"c0"}, "conv0");
  OnnxModelBuilder::IntsAttr(c0, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c0"}, {"r0"}, "relu0");
  auto* c1 = b.Node("Conv", {"r0", "w1"}, {"c1"}, "conv1");
  OnnxModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  b.Node("MatMul", {"c1", "m"}, {"y"}, "matmul");
  const std::string path = dir + "/conv_matmul.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CudaTuneTest, PerNodeChoicesAreCheckedProfiledAndKeptOnlyWhenFaster) {
  if (vm::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU visible: per-node tuning not run";
  ServerProcess gpu(std::vector<std::string>{"--device", "cuda:0"});
  ASSERT_NE(gpu.port(), 0) << "remex-server --device cuda:0 did not start";
  const std::string dir = ::testing::TempDir() + "/remex_cuda_tune";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string model = SaveConvMatMulModel(dir);
  const std::string cli = std::string(REMEX_CLI_BIN);
  auto r = RunCommand(cli + " tune " + model + " --server " + gpu.address() +
                      " --space cudnn-algo=0,1,5 --space cublaslt-algo=0,1 --min-duration-s 0.2 --min-samples 10 "
                      "--log " + dir + "/tuning.jsonl -o " + dir + "/tuned.rmx --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["fingerprint"].get<std::string>().rfind("gpu: ", 0), 0u) << j["fingerprint"];
  ASSERT_EQ(j["buckets"].size(), 1u);
  EXPECT_TRUE(j["buckets"][0]["complete"].get<bool>());

  // One per-node round: a candidate per value, each checked (all pass: an algorithm
  // cuDNN lacks for a call falls back to its heuristic's) and profiled per node.
  std::ifstream in(dir + "/tuning.jsonl");
  std::string line;
  std::set<std::string> labels;
  int rounds = 0;
  while (std::getline(in, line)) {
    const json rec = json::parse(line);
    if (rec["kind"] == "round") {
      EXPECT_EQ(rec["phase"], "nodes") << line;
      rounds++;
    }
    if (rec["kind"] != "measure" || rec.value("phase", "") != "nodes") continue;
    EXPECT_EQ(rec["status"], "ok") << line;
    const std::string label = rec["label"];
    labels.insert(label);
    if (label.rfind("cudnn-algo=", 0) == 0) {
      EXPECT_TRUE(rec["node_median_ms"].contains("conv1")) << line;  // conv0 is fused with relu0
      for (const auto& [node, attrs] : rec["choice"]["node_attrs"].items()) {
        EXPECT_TRUE(attrs.contains("cudnn_algo")) << node;
      }
    }
  }
  EXPECT_EQ(rounds, 1);
  for (const char* want : {"cudnn-algo=0", "cudnn-algo=1", "cudnn-algo=5", "cublaslt-algo=0", "cublaslt-algo=1"}) {
    EXPECT_TRUE(labels.count(want)) << want;
  }

  // The tuned executable runs, and the log compiles to it again.
  auto run = RunCommand(cli + " run " + dir + "/tuned.rmx --server " + gpu.address() + " --fetch none");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  auto compiled = RunCommand(cli + " compile " + model + " --tuning-log " + dir + "/tuning.jsonl -o " + dir +
                             "/compiled.rmx");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  EXPECT_EQ(Bytes(dir + "/compiled.rmx"), Bytes(dir + "/tuned.rmx"));
}

}  // namespace
}  // namespace remex
