// Shell without a terminal: commands against an embedded server, their output read back
// from a memory stream, and the completions of each kind of word. The terminal side
// (libedit, history, Ctrl-C, scripts on stdin) is tests/shell_test.py's.
#include "host_client/cli/shell.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host_client/client/npy.h"
#include "host_client/compiler/onnx_test_util.h"
#include "host_client/tooling/results_store.h"

namespace remex::cli {
namespace shell_test {

namespace fs = std::filesystem;
using Words = std::vector<std::string>;

// `text` (evaluated once) holds `part`.
::testing::AssertionResult Has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' is not in:\n" << text;
}
#define EXPECT_HAS(text, part) EXPECT_TRUE(Has(text, part))

npy::Array Floats(const Shape& shape, const std::vector<float>& values) {
  npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = shape;
  a.data.resize(values.size() * sizeof(float));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

class ShellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);  // the embedded server's
    dir_ = fs::temp_directory_path() / ("remex-shell-unit-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "models");
    // y = a + b, a and b of shape [n, 3].
    testing::OnnxModelBuilder b;
    b.Input("a", onnx::TensorProto::FLOAT, {-1, 3}).Input("b", onnx::TensorProto::FLOAT, {-1, 3});
    b.Output("y", onnx::TensorProto::FLOAT, {-1, 3});
    b.Node("Add", {"a", "b"}, {"y"});
    ASSERT_TRUE(b.Save((dir_ / "add.onnx").string()));
    ASSERT_TRUE(npy::Write((dir_ / "a.npy").string(), Floats({1, 3}, {1, 2, 3})).ok());
    std::ofstream((dir_ / "add.txt").string()) << "not a model";
    auto session = tooling::InteractiveSession::Open(tooling::ServerOptions{});
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    out_ = open_memstream(&buffer_, &size_);
    shell_ = std::make_unique<Shell>(std::move(session).value(), out_);
  }
  void TearDown() override {
    shell_.reset();
    if (out_) std::fclose(out_);
    std::free(buffer_);
    fs::remove_all(dir_);
  }
  // Runs `line`; returns what it printed.
  std::string Ok(const std::string& line) {
    const size_t before = Printed().size();
    Status st = shell_->Execute(line);
    EXPECT_TRUE(st.ok()) << line << ": " << st.ToString();
    return Printed().substr(before);
  }
  std::string Printed() {
    std::fflush(out_);
    return std::string(buffer_, size_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  FILE* out_ = nullptr;
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<Shell> shell_;
};

TEST_F(ShellTest, TensorsKeepTheirIdsWhileTheirNamesMoveToTheNewest) {
  EXPECT_HAS(Ok("load " + Path("add.onnx")), "input   a: float32 [d0, 3]");
  EXPECT_EQ(shell_->current_model(), "add");
  EXPECT_HAS(Ok("upload a=" + Path("a.npy")), "%1 a: float32 [1, 3] (12 B)");
  Status missing = shell_->Execute("run");
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(missing.message(), "no tensor for the input(s) b of add");
  EXPECT_HAS(Ok("run b=a"), "%2 y: float32 [1, 3]  [2, 4, 6]  argmax 2");
  EXPECT_HAS(Ok("run b=y --fetch none"), "%3 y: float32 [1, 3]\n");
  EXPECT_HAS(Ok("fetch y"), "%3 y: float32 [1, 3]  [3, 6, 9]");
  EXPECT_HAS(Ok("fetch %2"), "%2: float32 [1, 3]  [2, 4, 6]");  // unnamed now
  EXPECT_HAS(Ok("handles"), "%3 y (y of add)");
  EXPECT_HAS(Ok("free y %2"), "freed %3 y, %2");
  EXPECT_EQ(shell_->Execute("fetch %3").code(), StatusCode::kNotFound);
  EXPECT_EQ(shell_->Execute("fetch y").code(), StatusCode::kNotFound);
  EXPECT_HAS(Ok("run b=%1 --fetch y"), "%4 y");  // ids are never reused
}

// The tooling layer's Run, which the Python client calls: array inputs
// uploaded, the invoke and the fetched outputs in one round trip, nothing left behind.
class InteractiveRunTest : public ShellTest {
 protected:
  // The session's tensors on the server: handle -> shape.
  std::map<uint64_t, Shape> Tensors() {
    std::map<uint64_t, Shape> t;
    auto handles = shell_->session().client().ListHandles();
    EXPECT_TRUE(handles.ok()) << handles.status().ToString();
    if (handles.ok()) {
      for (const auto& h : *handles) {
        if (h.kind == "tensor") t[h.handle] = h.shape;
      }
    }
    return t;
  }
  static tooling::RunInput Bytes(const std::string& name, const npy::Array& a) {
    return {.name = name, .dtype = a.dtype, .shape = a.shape, .bytes = a.data};
  }
};

TEST_F(InteractiveRunTest, OneRoundTripUploadsInvokesAndFetchesAndLeavesOnlyWhatItReturns) {
  Ok("load " + Path("add.onnx"));
  tooling::InteractiveSession& s = shell_->session();
  tooling::SessionModel* m = *s.Model("add");
  auto b = s.client().Upload(Floats({1, 3}, {10, 20, 30}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const npy::Array a = Floats({1, 3}, {1, 2, 3});
  std::vector<tooling::RunInput> in = {Bytes("a", a), {.name = "b", .handle = b->handle}};
  const auto tensors = Tensors();
  uint64_t trips = s.client().round_trips();
  auto r = s.Run(*m, in, {true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(s.client().round_trips() - trips, 1u);
  ASSERT_TRUE(r->fetched.at(0).has_value());
  const float* y = reinterpret_cast<const float*>(r->fetched[0]->data.data());
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(Tensors(), tensors);  // the upload and the fetched output are freed

  // Not fetched: the output stays, as the handle the report names.
  trips = s.client().round_trips();
  r = s.Run(*m, in, {false});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(s.client().round_trips() - trips, 1u);
  EXPECT_FALSE(r->fetched.at(0).has_value());
  const uint64_t kept = r->invoke.result.outputs.at(0).handle;
  EXPECT_LT(kept, uint64_t{1} << 63);  // the server's own handle, not a client-named one
  auto after = Tensors();
  EXPECT_EQ(after.size(), tensors.size() + 1);
  EXPECT_EQ(after.count(kept), 1u);
  auto data = s.client().Download(kept);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->data, Floats({1, 3}, {11, 22, 33}).data);
  ASSERT_TRUE(s.client().Free({kept}).ok());

  // A bound output: fetched from its own tensor, no second handle left.
  auto bound = s.client().Upload(Floats({1, 3}, {0, 0, 0}));
  ASSERT_TRUE(bound.ok());
  ASSERT_TRUE(s.SetOutput(*m, "y", bound->handle).ok());
  const auto with_bound = Tensors();
  r = s.Run(*m, in, {true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->invoke.result.outputs.at(0).handle, bound->handle);
  EXPECT_EQ(Tensors(), with_bound);
  data = s.client().Download(bound->handle);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->data, Floats({1, 3}, {11, 22, 33}).data);
  ASSERT_TRUE(s.SetOutput(*m, "y", 0).ok());
}

TEST_F(InteractiveRunTest, AFailedRunLeavesNothingAndTheSessionGoesOn) {
  Ok("load " + Path("add.onnx"));
  tooling::InteractiveSession& s = shell_->session();
  tooling::SessionModel* m = *s.Model("add");
  const auto tensors = Tensors();
  const npy::Array a = Floats({1, 3}, {1, 2, 3});
  const npy::Array wrong = Floats({2, 3}, {1, 2, 3, 4, 5, 6});  // b's rows differ from a's
  std::vector<tooling::RunInput> in = {Bytes("a", a), Bytes("b", wrong)};
  auto r = s.Run(*m, in, {true});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(Tensors(), tensors);  // both uploads freed, no output made
  // Refused before anything is sent: a missing input, an unknown one, a wrong count.
  EXPECT_EQ(s.Run(*m, std::vector<tooling::RunInput>{Bytes("a", a)}, {true}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Run(*m, std::vector<tooling::RunInput>{Bytes("a", a), Bytes("c", a)}, {true}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Run(*m, std::vector<tooling::RunInput>{Bytes("a", a), Bytes("b", a)}, {}).status().code(),
            StatusCode::kInvalidArgument);
  in = {Bytes("a", a), Bytes("b", a)};
  r = s.Run(*m, in, {true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const float* y = reinterpret_cast<const float*>(r->fetched.at(0)->data.data());
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(Tensors(), tensors);
}

TEST_F(ShellTest, BenchRecordsItsResultAsRemexBenchRecordDoes) {
  const std::string url = "sqlite://" + Path("results.sqlite");
  Ok("load " + Path("add.onnx"));
  Ok("upload a=" + Path("a.npy"));
  // Refused before any work: a bad URL, a bad tag, --tag alone.
  EXPECT_EQ(shell_->Execute("bench a=a b=a --record mysql://x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shell_->Execute("bench a=a b=a --record " + url + " --tag =x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shell_->Execute("bench a=a b=a --tag k=v").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(Path("results.sqlite")));
  EXPECT_HAS(Ok("bench a=a b=a --repeat 5 --min-duration-s 0 --min-samples 0 --max-trials 1 --record " + url +
                " --tag from=shell"),
             "recorded as run 1 in " + url);
  auto store = tooling::OpenResultsStore(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns({});
  ASSERT_TRUE(runs.ok() && runs->size() == 1u);
  const tooling::StoredRun& run = runs->front();
  EXPECT_EQ(run.kind, "bench");
  EXPECT_EQ(run.verdict, "pass");
  EXPECT_EQ(run.tags, (std::map<std::string, std::string>{{"from", "shell"}}));
  EXPECT_EQ(run.sample_count, 5u);
  EXPECT_TRUE(run.summary.contains("median_ms")) << run.summary.dump();
  auto series = (*store)->ListSeries({});
  ASSERT_TRUE(series.ok() && series->size() == 1u);
  EXPECT_EQ(series->front().model_name, "add.onnx");
  EXPECT_FALSE(series->front().model_hash.empty());
}

// load takes every compile option of `remex compile`, --compute-threads and
// --tuning-log included (the tuning log of another model is refused, naming the log).
TEST_F(ShellTest, LoadTakesComputeThreadsAndATuningLog) {
  EXPECT_HAS(Ok("load " + Path("add.onnx") + " --compute-threads 1 --as one"), "input   a: float32 [d0, 3]");
  EXPECT_HAS(Ok("upload a=" + Path("a.npy")), "%1 a");
  EXPECT_HAS(Ok("run b=a"), "[2, 4, 6]");
  EXPECT_EQ(shell_->Execute("load " + Path("add.onnx") + " --compute-threads x").code(), StatusCode::kInvalidArgument);
  std::ofstream(Path("other.jsonl")) << "";
  Status other = shell_->Execute("load " + Path("add.onnx") + " --tuning-log " + Path("other.jsonl"));
  EXPECT_EQ(other.code(), StatusCode::kNotFound);
  EXPECT_HAS(other.message(), "no tuned bucket for this model");
  EXPECT_EQ(shell_->Execute("load " + Path("add.onnx") + " --tuned-for x").code(), StatusCode::kInvalidArgument);
}

TEST_F(ShellTest, CommentsBlankLinesAndQuit) {
  EXPECT_EQ(Ok("   # load nothing"), "");
  EXPECT_EQ(Ok(""), "");
  Status unknown = shell_->Execute("fecth %1");
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(unknown.message(), "did you mean fetch?");
  EXPECT_EQ(shell_->Execute("load 'open").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shell_->Execute("run").code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(shell_->done());
  Ok("quit");
  EXPECT_TRUE(shell_->done());
}

TEST_F(ShellTest, CompareSaysWhetherTheTensorsDiffer) {
  Ok("load " + Path("add.onnx"));
  Ok("upload a=" + Path("a.npy") + " b=" + Path("a.npy"));
  EXPECT_HAS(Ok("compare a b"), "match: 3 values");
  EXPECT_FALSE(shell_->mismatch());
  Ok("run");
  EXPECT_HAS(Ok("compare y a"), "MISMATCH: 3 of 3 values differ, the first at flat index 0");
  EXPECT_TRUE(shell_->mismatch());
  EXPECT_EQ(shell_->Execute("compare y a --rtol -1").code(), StatusCode::kInvalidArgument);
}

TEST_F(ShellTest, CompletesCommandsOptionsAndTheirValues) {
  EXPECT_EQ(shell_->Complete("lo"), (Words{"load"}));
  EXPECT_EQ(shell_->Complete("").size(), Shell::CommandNames().size());
  EXPECT_EQ(shell_->Complete("help ru"), (Words{"run"}));
  EXPECT_EQ(shell_->Complete("load --la"), (Words{"--layout"}));
  EXPECT_EQ(shell_->Complete("load m.onnx --layout "), (Words{"NCHW", "NHWC"}));
  EXPECT_EQ(shell_->Complete("load --dtype=f"), (Words{"float32", "float16"}));
  EXPECT_EQ(shell_->Complete("load --as "), Words{});
  EXPECT_EQ(shell_->Complete("bench --repeat "), Words{});
  EXPECT_EQ(shell_->Complete("bench --scenario "), (Words{"single-stream", "multi-stream", "server", "offline"}));
  EXPECT_EQ(shell_->Complete("bench --scenario=s"), (Words{"single-stream", "server"}));
  EXPECT_EQ(shell_->Complete("bench --target"), (Words{"--target-qps"}));
  EXPECT_EQ(shell_->Complete("nonsense "), Words{});
}

TEST_F(ShellTest, CompletesFilesInputsTensorsAndModels) {
  fs::create_directories(dir_ / "models");
  EXPECT_EQ(shell_->Complete("load " + Path("ad")), (Words{Path("add.onnx")}));  // not add.txt
  EXPECT_EQ(shell_->Complete("load " + Path("mo")), (Words{Path("models/")}));
  EXPECT_EQ(shell_->Complete("run "), Words{});  // no model: no inputs
  Ok("load " + Path("add.onnx"));
  EXPECT_EQ(shell_->Complete("run "), (Words{"a=", "b="}));
  EXPECT_EQ(shell_->Complete("upload b"), (Words{"b="}));
  EXPECT_EQ(shell_->Complete("upload a=" + Path("a.n")), (Words{Path("a.npy")}));
  Ok("upload a=" + Path("a.npy"));
  EXPECT_EQ(shell_->Complete("run a=a b="), (Words{"a", "%1"}));
  EXPECT_EQ(shell_->Complete("run --fetch "), (Words{"all", "none", "y"}));
  EXPECT_EQ(shell_->Complete("stats %"), (Words{"%1"}));
  EXPECT_EQ(shell_->Complete("fetch a -o " + Path("a.")), (Words{Path("a.npy")}));
  EXPECT_EQ(shell_->Complete("use "), (Words{"add"}));
}

}  // namespace shell_test
}  // namespace remex::cli
