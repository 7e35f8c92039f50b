// The synthetic x4 super-resolution model (`remex gen-sr`) compiled NCHW and NHWC
// (`remex compile --layout`), both run by `remex run` on a real remex-server's CPU
// device at 1x3x24x40: the two agree (atol 1e-4), the NHWC compile changes layout only
// at the graph's two edges (read from `remex compile --stats`), and the NCHW result
// matches ONNX Runtime (onnxruntime-node through tests/reference/ort_run.js, atol 1e-4)
// on the same input. Compiled NHWC with `--dtype float16`, the body still has no layout
// change and the result stays within float16 precision of the float32 one; so does
// the model generated in float16 (`gen-sr --dtype float16`) compiled NHWC.
//
// The ONNX Runtime comparison needs REMEX_ORT_RUN (set by scripts/test.sh) and skips
// itself without it; everything else needs only the Remex binaries.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "host_client/tooling/compare.h"
#include "host_client/client/npy.h"
#include "tests/model_test_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

namespace fs = std::filesystem;
using remex::testing::RunCommand;
using remex::testing::RunOnnxRuntime;

constexpr double kAtol = 1e-4;

class SrLayoutTest : public remex::testing::ModelTest {
 protected:
  SrLayoutTest() : ModelTest("remex_sr") {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ModelTest::SetUp());
    auto g = RunCommand(Cli() + " gen-sr -o " + Model() + " --height 24 --width 40");
    ASSERT_EQ(g.exit_code, 0) << g.output;
  }

  static std::string Cli() { return REMEX_CLI_BIN; }
  std::string Model() const { return dir_ + "/sr.onnx"; }

  // Compiles `model` (default Model()) with `layout` (and `extra` options) to
  // sr_<name>.rmx, `name` defaulting to the layout; returns the --stats text.
  std::string Compile(const std::string& layout, const std::string& extra = "", std::string name = "",
                      std::string model = "") {
    if (name.empty()) name = layout;
    if (model.empty()) model = Model();
    auto c = RunCommand(Cli() + " compile " + model + " -o " + dir_ + "/sr_" + name + ".rmx --layout " + layout +
                        " --stats " + extra);
    EXPECT_EQ(c.exit_code, 0) << c.output;
    return c.output;
  }

  // Runs the `layout` executable on `input` (a .npy path; empty: seeded random input);
  // outputs go to DIR/out_<layout>.
  void Run(const std::string& layout, const std::string& input) {
    std::string cmd = Cli() + " run " + dir_ + "/sr_" + layout + ".rmx --server " + server_.address() +
                      " --output-dir " + dir_ + "/out_" + layout;
    cmd += input.empty() ? " --seed 7 --save-inputs" : " --input x=" + input;
    auto r = RunCommand(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  compare::ArrayComparison CompareFiles(const std::string& expected, const std::string& actual, Shape* shape,
                                        double rtol = 0.0, double atol = kAtol) {
    auto e = npy::Read(expected);
    auto a = npy::Read(actual);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!e.ok() || !a.ok()) return {};
    if (shape) *shape = a->shape;
    return compare::CompareArrays(*e, *a, rtol, atol);
  }
};

TEST_F(SrLayoutTest, NhwcMatchesNchwWithLayoutChangesOnlyAtTheEdges) {
  const std::string nchw = Compile("NCHW");
  const std::string nhwc = Compile("NHWC");
  std::printf("%s%s", nchw.c_str(), nhwc.c_str());
  EXPECT_NE(nchw.find("transpose kernels 0: 0 at the edges, 0 in the body"), std::string::npos) << nchw;
  // Exactly the input's and the output's layout change; none in the body.
  EXPECT_NE(nhwc.find("transpose kernels 2: 2 at the edges, 0 in the body"), std::string::npos) << nhwc;
  EXPECT_NE(nhwc.find("layout NHWC: 2 layout changes (2 at the edges, 0 in the body), 16 nodes NHWC"),
            std::string::npos)
      << nhwc;
  EXPECT_NE(nhwc.find("output  y: float32 [1, 3, 96, 160]"), std::string::npos) << nhwc;
  // The blocks' Conv + LeakyRelu and Conv + Add pairs and the skip's Conv + Add are
  // FusedConv kernels, in either layout.
  for (const std::string* text : {&nchw, &nhwc}) {
    EXPECT_NE(text->find("fused epilogues: 5 FusedConv, 0 FusedMatMul and 0 FusedMatMulInteger kernels absorb 5 Add, "
                         "activation, Cast and Mul nodes"),
              std::string::npos)
        << *text;
  }
  Run("NCHW", "");
  Run("NHWC", dir_ + "/out_NCHW/inputs/x.npy");
  Shape shape;
  auto c = CompareFiles(dir_ + "/out_NCHW/y.npy", dir_ + "/out_NHWC/y.npy", &shape);
  EXPECT_EQ(shape, (Shape{1, 3, 96, 160}));
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  std::printf("[sr] NHWC vs NCHW: max abs error %.3g\n", c.max_abs_error);
}

// `--dtype float16` with `--layout NHWC`: the body still has no layout change (the
// float16 casts sit at the edges, outside the transposes), and the result stays
// within float16 precision of the float32 NCHW one (outputs up to about 18 here).
TEST_F(SrLayoutTest, Float16NhwcKeepsLayoutChangesAtTheEdgesAndMatchesFloat32) {
  Compile("NCHW");
  const std::string f16 = Compile("NHWC", "--dtype float16", "NHWC_f16");
  std::printf("%s", f16.c_str());
  EXPECT_NE(f16.find("transpose kernels 2: 2 at the edges, 0 in the body"), std::string::npos) << f16;
  EXPECT_NE(f16.find("dtype float16: 18 nodes converted, 18 constants converted, 2 casts inserted"),
            std::string::npos)
      << f16;
  EXPECT_NE(f16.find("output  y: float32 [1, 3, 96, 160]"), std::string::npos) << f16;
  EXPECT_NE(f16.find("fused epilogues: 5 FusedConv, 0 FusedMatMul and 0 FusedMatMulInteger kernels absorb 5 Add, "
                         "activation, Cast and Mul nodes"),
            std::string::npos)
      << f16;
  Run("NCHW", "");
  Run("NHWC_f16", dir_ + "/out_NCHW/inputs/x.npy");
  Shape shape;
  // float16's spacing is 1/64 between 16 and 32: atol 3e-2 is two steps there.
  auto c = CompareFiles(dir_ + "/out_NCHW/y.npy", dir_ + "/out_NHWC_f16/y.npy", &shape, 1e-2, 3e-2);
  EXPECT_EQ(shape, (Shape{1, 3, 96, 160}));
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  EXPECT_GT(c.max_abs_error, 0.0) << "float16 gave exactly the float32 result";
  std::printf("[sr] float16 NHWC vs float32 NCHW: max abs error %.3g\n", c.max_abs_error);
}

// The model exported in float16 (`gen-sr --dtype float16`: input, weights and output
// float16) compiled NHWC: the same two layout changes at the edges and 16 NHWC nodes
// as the float32 model, and the result within a float16 step or two of its NCHW
// compile's (each kernel rounds once on store, in either layout).
TEST_F(SrLayoutTest, Float16ModelRunsNhwcWithLayoutChangesOnlyAtTheEdges) {
  const std::string model = dir_ + "/sr16.onnx";
  auto g = RunCommand(Cli() + " gen-sr -o " + model + " --height 24 --width 40 --dtype float16");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  Compile("NCHW", "", "NCHW_h", model);
  const std::string nhwc = Compile("NHWC", "", "NHWC_h", model);
  std::printf("%s", nhwc.c_str());
  EXPECT_NE(nhwc.find("transpose kernels 2: 2 at the edges, 0 in the body"), std::string::npos) << nhwc;
  EXPECT_NE(nhwc.find("layout NHWC: 2 layout changes (2 at the edges, 0 in the body), 16 nodes NHWC"),
            std::string::npos)
      << nhwc;
  EXPECT_NE(nhwc.find("output  y: float16 [1, 3, 96, 160]"), std::string::npos) << nhwc;
  EXPECT_NE(nhwc.find("fused epilogues: 5 FusedConv, 0 FusedMatMul and 0 FusedMatMulInteger kernels absorb 5 Add, "
                         "activation, Cast and Mul nodes"),
            std::string::npos)
      << nhwc;
  Run("NCHW_h", "");
  Run("NHWC_h", dir_ + "/out_NCHW_h/inputs/x.npy");
  Shape shape;
  auto c = CompareFiles(dir_ + "/out_NCHW_h/y.npy", dir_ + "/out_NHWC_h/y.npy", &shape, 1e-2, 3e-2);
  EXPECT_EQ(shape, (Shape{1, 3, 96, 160}));
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  std::printf("[sr] float16 model, NHWC vs NCHW: max abs error %.3g\n", c.max_abs_error);
}

TEST_F(SrLayoutTest, NchwMatchesOnnxRuntime) {
  if (ort_run_.empty()) GTEST_SKIP() << "REMEX_ORT_RUN not set: run scripts/test.sh";
  Compile("NCHW");
  Run("NCHW", "");
  const std::string ort = dir_ + "/ort";
  auto o = RunOnnxRuntime(ort_run_, Model(), ort, dir_ + "/out_NCHW/inputs/x.npy");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  Shape shape;
  auto c = CompareFiles(ort + "/y.npy", dir_ + "/out_NCHW/y.npy", &shape);
  EXPECT_EQ(shape, (Shape{1, 3, 96, 160}));
  EXPECT_TRUE(c.ok) << c.reason << ", max abs error " << c.max_abs_error;
  std::printf("[sr] NCHW vs ONNX Runtime: max abs error %.3g\n", c.max_abs_error);
}

}  // namespace
}  // namespace remex
