// The tuning log and the search space of `remex tune` (tuning.h), without a server: the
// choices' text and JSON forms, --space, the default space per device, and which
// choices a log gives a compile. tests/cli_tune_test.cc tunes against real servers.
#include "host_client/tooling/tuning.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "host_client/tooling/specs.h"

namespace remex::tooling {
namespace tuning_test {

using compiler::TunedChoices;
using nlohmann::json;

TEST(TuningTest, ChoicesRoundTripThroughJsonAndReadAsVariants) {
  TunedChoices start;
  TunedChoices c = start;
  ASSERT_TRUE(SetTunedChoice(c, "layout", "NHWC").ok());
  ASSERT_TRUE(SetTunedChoice(c, "dtype", "float16").ok());
  ASSERT_TRUE(SetTunedChoice(c, "fuse-elementwise", "false").ok());
  ASSERT_TRUE(SetTunedChoice(c, "compute-threads", "1").ok());
  EXPECT_EQ(TunedChoicesText(c, start), "layout=NHWC,dtype=float16,fuse-elementwise=false,compute-threads=1");
  EXPECT_FALSE(SetTunedChoice(c, "compute-threads", "-1").ok());
  EXPECT_FALSE(SetTunedChoice(c, "compute-threads", "2x").ok());
  EXPECT_EQ(TunedChoicesText(start, start), "start");
  auto back = TunedChoicesFromJson(ToJson(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == c);
  // The text is --variant's: applied to the default specs, it compiles with the choices.
  auto specs = ApplyVariant(CompileSpecs{}, TunedChoicesText(c, start));
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  auto options = ParseCompileSpecs(*specs);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_TRUE(compiler::ChoicesOf(*options) == c);

  EXPECT_FALSE(SetTunedChoice(c, "layout", "NCWH").ok());
  EXPECT_FALSE(SetTunedChoice(c, "fold-batchnorm", "yes").ok());
  auto unknown = SetTunedChoice(c, "threads", "2");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("layout, dtype, fold-batchnorm, fuse-epilogues, fuse-elementwise"),
            std::string::npos);
  json missing = ToJson(c);
  missing.erase("fuse_epilogues");
  EXPECT_FALSE(TunedChoicesFromJson(missing).ok());
}

TEST(TuningTest, SpaceParsesAndTheDefaultDependsOnTheDevice) {
  auto space = ParseTuningSpace({"layout=NCHW,NHWC", "dtype=model,float16,float16"});
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  ASSERT_EQ(space->size(), 2u);
  EXPECT_EQ((*space)[1].values, (std::vector<std::string>{"model", "float16"}));
  for (const char* bad : {"layout", "layout=", "layout=NCHW,NCWH", "cudnn=1"}) {
    auto r = ParseTuningSpace({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("--space '") + bad + "'"), std::string::npos)
        << r.status().ToString();
  }
  EXPECT_FALSE(ParseTuningSpace({"layout=NCHW", "layout=NHWC"}).ok());
  auto has = [](const std::vector<TuningAxis>& s, const std::string& key) {
    for (const auto& a : s) {
      if (a.key == key) return true;
    }
    return false;
  };
  const std::vector<TuningAxis> cpu = DefaultTuningSpace("cpu"), cuda = DefaultTuningSpace("cuda:0");
  EXPECT_FALSE(has(cpu, "dtype"));  // no float16 arithmetic
  EXPECT_TRUE(has(cuda, "dtype"));
  EXPECT_TRUE(has(cpu, "compute-threads"));
  EXPECT_FALSE(has(cuda, "compute-threads"));
  // Each device's per-node axes, and only its own.
  EXPECT_TRUE(has(cpu, "onednn-algo"));
  EXPECT_FALSE(has(cuda, "onednn-algo"));
  for (const char* key : {"cudnn-algo", "cudnn-math", "cublaslt-algo"}) {
    EXPECT_FALSE(has(cpu, key)) << key;
    EXPECT_TRUE(has(cuda, key)) << key;
  }
  auto onednn = ParseTuningSpace({"onednn-algo=1,0"});
  ASSERT_TRUE(onednn.ok()) << onednn.status().ToString();
  EXPECT_EQ((*onednn)[0].values, (std::vector<std::string>{"1", "0"}));
  EXPECT_NE(ParseTuningSpace({"onednn-algo=2"}).status().message().find("onednn-algo takes integers in [0, 1], got '2'"),
            std::string::npos);
}

TEST(TuningTest, FingerprintNamesTheDeviceItHoldsFor) {
  client::ServerInfo info;
  info.devices = {{"cpu", "AMD EPYC", 0, 0}};
  info.environment.cpu_model = "AMD EPYC 7B13";
  info.environment.compute_threads = 8;
  EXPECT_EQ(TuningFingerprint(info), "cpu: AMD EPYC 7B13, 8 compute threads");
  info.devices = {{"cuda:1", "H100", 0, 0}};
  info.environment.gpus.resize(2);
  info.environment.gpus[1].name = "NVIDIA H100 80GB HBM3";
  info.environment.gpus[1].compute_capability = "9.0";
  EXPECT_EQ(TuningFingerprint(info), "gpu: NVIDIA H100 80GB HBM3, compute capability 9.0");
}

json Best(const std::string& fingerprint, const std::string& bucket, const TunedChoices& c) {
  return {{"schema", kTuningLogSchema}, {"schema_version", 1}, {"kind", "best"}, {"fingerprint", fingerprint},
          {"model_hash", "m1"}, {"bucket", bucket}, {"complete", true}, {"choice", ToJson(c)}};
}

TEST(TuningTest, TheLogGivesTheLatestChoicePerBucketOfOneDevice) {
  TunedChoices a, b;
  b.layout = compiler::Layout::kNhwc;
  TuningLog log;
  log.records = {Best("cpu: x", "main[W=1..8]", a), Best("cpu: x", "main[W=9..16]", a),
                 Best("cpu: x", "main[W=1..8]", b)};
  std::string used;
  auto choices = TunedChoicesFromLog(log, "m1", "", &used);
  ASSERT_TRUE(choices.ok()) << choices.status().ToString();
  EXPECT_EQ(used, "cpu: x");
  ASSERT_EQ(choices->size(), 2u);
  EXPECT_TRUE(choices->at("main[W=1..8]") == b);  // the later record
  EXPECT_TRUE(choices->at("main[W=9..16]") == a);
  // Another model: none.
  auto other = TunedChoicesFromLog(log, "m2", "");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
  // Two devices: one must be named.
  log.records.push_back(Best("gpu: y", "main[W=1..8]", a));
  auto ambiguous = TunedChoicesFromLog(log, "m1", "");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_NE(ambiguous.status().message().find("--tuned-for"), std::string::npos);
  auto gpu = TunedChoicesFromLog(log, "m1", "gpu: y");
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ(gpu->size(), 1u);
  auto absent = TunedChoicesFromLog(log, "m1", "gpu: z");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("it has:"), std::string::npos);
}

TEST(TuningTest, ReadingALogSkipsTornLinesAndRefusesANewerSchema) {
  const std::string path = ::testing::TempDir() + "/tuning_test.jsonl";
  auto missing = ReadTuningLog(path + ".none");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->records.empty());
  {
    std::ofstream out(path);
    json wrong_type = Best("cpu: x", "main", TunedChoices{});
    wrong_type["round"] = "three";  // a reader would meet a string where it wants a count
    json no_bucket = Best("cpu: x", "main", TunedChoices{});
    no_bucket.erase("bucket");
    out << Best("cpu: x", "main", TunedChoices{}).dump() << "\n{\"schema\":\"remex.tun\n"
        << json{{"schema", "other"}}.dump() << "\n"
        << wrong_type.dump() << "\n"
        << no_bucket.dump() << "\n";
  }
  auto log = ReadTuningLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->records.size(), 1u);
  EXPECT_EQ(log->skipped_lines, 4u);
  {
    std::ofstream out(path, std::ios::app);
    json newer = Best("cpu: x", "main", TunedChoices{});
    newer["schema_version"] = kTuningLogSchemaVersion + 1;
    out << newer.dump() << "\n";
  }
  auto refused = ReadTuningLog(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("schema_version"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace tuning_test
}  // namespace remex::tooling
