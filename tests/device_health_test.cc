// Device health over time, end to end: real remex-server processes with a real SQLite
// results store (--results) and, for quarantine, a real redis-server farm. The start
// self-test is recorded with the record's contract; --self-test-interval adds more, and
// a device reset one more; a history seeded at an impossible 10 ns makes the next real
// self-test a latency drift that quarantines the device with the reason; a wrong result
// is recorded as a failure and quarantines; a bad --results URL is a usage error and an
// unreachable PostgreSQL a warning in the log (docs/farm.md, "Health").

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "base/content_hash.h"
#include "device_server/self_test.h"
#include "host_client/tooling/results_store.h"
#include "rpc/redis_test_util.h"
#include "tests/model_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

using namespace std::chrono_literals;
using testing::RedisProcess;
using testing::RunCommand;
using testing::ServerProcess;
using tooling::HistoryFilter;
using tooling::StoredRun;
namespace fs = std::filesystem;

std::string Cli() { return std::string(REMEX_CLI_BIN); }

// The device `id` as `remex farm status --json` lists it; null when absent.
nlohmann::json FarmDevice(const std::string& url, const std::string& id) {
  auto r = RunCommand(Cli() + " farm status --json --farm " + url);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json status = nlohmann::json::parse(r.output, nullptr, false);
  if (status.is_discarded()) return nullptr;
  for (const auto& d : status["devices"]) {
    if (d["id"] == id) return d;
  }
  return nullptr;
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

class DeviceHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remex_device_health_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    url_ = "sqlite://" + (dir_ / "results.sqlite").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The self-test runs of device class `device_class` in the store, oldest first.
  std::vector<StoredRun> Runs(const std::string& device_class) {
    auto store = tooling::OpenResultsStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return {};
    HistoryFilter filter;
    filter.model = "self-test";
    filter.device_class = device_class;
    auto runs = (*store)->ListRuns(filter);
    EXPECT_TRUE(runs.ok()) << runs.status().ToString();
    return runs.ok() ? *runs : std::vector<StoredRun>{};
  }

  // Waits up to `limit` for at least `n` runs of `device_class`; the runs then.
  std::vector<StoredRun> WaitForRuns(const std::string& device_class, size_t n,
                                     std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    std::vector<StoredRun> runs = Runs(device_class);
    while (runs.size() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(200ms);
      runs = Runs(device_class);
    }
    return runs;
  }

  fs::path dir_;
  std::string url_;
};

// (a) The start self-test of a farm device, recorded with the contract a dashboard reads.
TEST_F(DeviceHealthTest, TheStartSelfTestIsRecordedWithItsContract) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ready());
  ServerProcess server({"--farm", redis.url_text(), "--pool", "health", "--results", url_});
  ASSERT_NE(server.port(), 0) << server.banner();
  const std::string device_class = "health/" + server.address();
  // The banner follows the start self-test's judgement: the record is there already.
  const std::vector<StoredRun> runs = Runs(device_class);
  ASSERT_EQ(runs.size(), 1u);
  const StoredRun& run = runs[0];
  EXPECT_EQ(run.kind, "self-test");
  EXPECT_EQ(run.verdict, "pass") << run.error;
  EXPECT_EQ(run.error, "");
  EXPECT_EQ(run.tags.at("farm.pool"), "health");
  EXPECT_EQ(run.tags.at("farm.device"), server.address());
  EXPECT_EQ(run.tags.at("self-test.reason"), "start");
  EXPECT_EQ(run.recorded_at.size(), 20u);
  EXPECT_EQ(run.recorded_at.back(), 'Z');
  EXPECT_EQ(run.summary["count"], server::kSelfTestTimedRuns);
  for (const char* key : {"median_ms", "p90_ms", "min_ms", "max_ms"}) {
    ASSERT_TRUE(run.summary.contains(key)) << run.summary.dump();
    EXPECT_GT(run.summary[key].get<double>(), 0) << key;
  }
  EXPECT_EQ(run.sample_count, static_cast<uint64_t>(server::kSelfTestTimedRuns));
  auto store = tooling::OpenResultsStore(url_);
  ASSERT_TRUE(store.ok());
  auto series = (*store)->ListSeries({});
  ASSERT_TRUE(series.ok());
  ASSERT_EQ(series->size(), 1u);
  EXPECT_EQ((*series)[0].model_name, "self-test");
  EXPECT_EQ((*series)[0].scenario, "self-test");
  EXPECT_EQ((*series)[0].device_class, device_class);
  const std::string description = server::SelfTestDescription();
  EXPECT_EQ((*series)[0].model_hash,
            ContentHash(std::as_bytes(std::span(description.data(), description.size()))));
  auto samples = (*store)->Samples(run.id);
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), static_cast<size_t>(server::kSelfTestTimedRuns));
  for (double ms : *samples) {
    EXPECT_GT(ms, 0);
    EXPECT_GE(ms, run.summary["min_ms"].get<double>());
    EXPECT_LE(ms, run.summary["max_ms"].get<double>());
  }
  auto report = (*store)->Report(run.id);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ((*report)["schema"], "remex.self-test");
  EXPECT_EQ((*report)["drift"]["state"], "insufficient history") << report->dump(2);
  // The farm sees a healthy device, and `remex history` lists the self-test.
  EXPECT_EQ(FarmDevice(redis.url_text(), server.address())["health"], "ok");
  auto history = RunCommand(Cli() + " history --model self-test --json --results " + url_);
  ASSERT_EQ(history.exit_code, 0) << history.output;
  const nlohmann::json h = nlohmann::json::parse(history.output, nullptr, false);
  ASSERT_FALSE(h.is_discarded()) << history.output;
  ASSERT_EQ(h["series"].size(), 1u);
  EXPECT_EQ(h["series"][0]["device_class"], device_class);
}

// (b) Periodic self-tests, and one after a device reset, without a farm ("local").
TEST_F(DeviceHealthTest, SelfTestsFollowAtEveryIntervalAndAfterAReset) {
  ServerProcess server({"--results", url_, "--self-test-interval", "1s"});
  ASSERT_NE(server.port(), 0) << server.banner();
  const std::string device_class = "local/" + server.address();
  const std::vector<StoredRun> runs = WaitForRuns(device_class, 3, 15s);
  ASSERT_GE(runs.size(), 3u);
  EXPECT_EQ(runs[0].tags.at("self-test.reason"), "start");
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].tags.at("self-test.reason"), "interval");
    EXPECT_EQ(runs[i].tags.at("farm.pool"), "local");
  }

  // A device fault on the first kernel after the start self-test's: the reset's self-test.
  const int start_kernels = 4 * (server::kSelfTestWarmupRuns + server::kSelfTestTimedRuns);
  ServerProcess faulty({"--results", url_, "--self-test-interval", "0", "--inject-device-fault",
                        std::to_string(start_kernels + 1)});
  ASSERT_NE(faulty.port(), 0) << faulty.banner();
  const std::string model = (dir_ / "add_relu.onnx").string();
  ASSERT_TRUE(testing::AddReluModel().Save(model));
  auto run = RunCommand(Cli() + " run " + model + " --shape x=2x4 --server " + faulty.address() + " 2>&1");
  EXPECT_NE(run.exit_code, 0) << run.output;
  const std::vector<StoredRun> reset = WaitForRuns("local/" + faulty.address(), 2, 15s);
  ASSERT_EQ(reset.size(), 2u);
  EXPECT_EQ(reset[0].tags.at("self-test.reason"), "start");
  EXPECT_EQ(reset[0].verdict, "pass") << reset[0].error;
  EXPECT_NE(run.output.find("device fault"), std::string::npos) << run.output;
  EXPECT_EQ(reset[1].tags.at("self-test.reason"), "reset");
  EXPECT_EQ(reset[1].verdict, "pass") << reset[1].error;
  // Interval 0: no periodic self-test follows.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Runs("local/" + faulty.address()).size(), 2u);
}

// (c) A history at 10 ns, faster than any device: the next real self-test drifted, and
// the device is quarantined with that reason.
TEST_F(DeviceHealthTest, ALatencyDriftQuarantinesTheDevice) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ready());
  const std::string id = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const std::vector<std::string> args = {
      "--farm", redis.url_text(),       "--pool", "drift", "--advertise", id, "--results",
      url_,     "--self-test-interval", "0"};
  tooling::SeriesInfo series;
  {
    ServerProcess first(args);
    ASSERT_NE(first.port(), 0) << first.banner();
    EXPECT_EQ(FarmDevice(redis.url_text(), id)["state"], "idle");
    auto store = tooling::OpenResultsStore(url_);
    ASSERT_TRUE(store.ok());
    auto all = (*store)->ListSeries({});
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->size(), 1u);
    series = (*all)[0];
  }
  EXPECT_TRUE(FarmDevice(redis.url_text(), id).is_null());
  {
    // Ten passing self-tests of the same series, each of 20 samples at 10 ns.
    auto store = tooling::OpenResultsStore(url_);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 10; ++i) {
      tooling::RunRecord r;
      r.recorded_at = UtcNow();
      r.kind = "self-test";
      r.model_name = series.model_name;
      r.model_hash = series.model_hash;
      r.compile_options = series.compile_options;
      r.scenario = series.scenario;
      r.device_class = series.device_class;
      r.device = "cpu";
      r.tags = {{"farm.pool", "drift"}, {"farm.device", id}, {"self-test.reason", "interval"}};
      r.samples_ms.assign(20, 1e-5);
      r.summary = {{"count", 20}, {"median_ms", 1e-5}, {"p90_ms", 1e-5}, {"min_ms", 1e-5}, {"max_ms", 1e-5}};
      r.verdict = "pass";
      ASSERT_TRUE((*store)->Record(r).ok());
    }
  }
  ServerProcess second(args);
  ASSERT_NE(second.port(), 0) << second.banner();
  const nlohmann::json device = FarmDevice(redis.url_text(), id);
  ASSERT_FALSE(device.is_null());
  EXPECT_EQ(device["state"], "quarantined") << device.dump(2);
  const std::string health = device["health"];
  EXPECT_EQ(health.rfind("self-test: latency drift: median ", 0), 0u) << health;
  EXPECT_NE(health.find("against its last 10 passing self-tests (1e-05 ms; drift threshold 25 %)"),
            std::string::npos)
      << health;
  const std::vector<StoredRun> runs = Runs(series.device_class);
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(runs.back().verdict, "fail");
  EXPECT_EQ(runs.back().error, health);
  EXPECT_EQ(runs.back().tags.at("self-test.reason"), "start");
  // The listing shows why.
  auto text = RunCommand(Cli() + " farm status --farm " + redis.url_text());
  EXPECT_NE(text.output.find("quarantined (self-test: latency drift"), std::string::npos) << text.output;
}

// (d) A wrong result: recorded as a failure, and the device quarantined.
TEST_F(DeviceHealthTest, AFailedSelfTestIsRecordedAndQuarantines) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ready());
  ServerProcess server(
      {"--farm", redis.url_text(), "--pool", "sick", "--results", url_, "--inject-self-test-failure"});
  ASSERT_NE(server.port(), 0) << server.banner();
  const std::vector<StoredRun> runs = Runs("sick/" + server.address());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].verdict, "fail");
  EXPECT_EQ(runs[0].error.rfind("self-test: cpu computes Softmax(Relu(x W + b)) unlike the CPU", 0), 0u)
      << runs[0].error;
  EXPECT_EQ(runs[0].summary["count"], server::kSelfTestTimedRuns);  // it ran: its latency is kept
  const nlohmann::json device = FarmDevice(redis.url_text(), server.address());
  EXPECT_EQ(device["state"], "quarantined");
  EXPECT_EQ(device["health"], runs[0].error);
}

// (e) A bad --results is a usage error; a store that cannot be reached, a warning.
TEST_F(DeviceHealthTest, ABadStoreUrlIsRefusedAndAnUnreachableOneIsAWarning) {
  const std::string server = REMEX_SERVER_BIN;
  auto bad = RunCommand(server + " --listen 127.0.0.1:0 --quiet --results mysql://db/x 2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--results"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("sqlite://"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("listening on"), std::string::npos) << bad.output;
  auto env = RunCommand("REMEX_RESULTS=nowhere " + server + " --listen 127.0.0.1:0 --quiet 2>&1");
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_NE(env.output.find("--results ($REMEX_RESULTS)"), std::string::npos) << env.output;
  for (const std::string& flags :
       {std::string("--self-test-interval 10m"), std::string("--self-test-drift 10")}) {
    auto alone = RunCommand(server + " --listen 127.0.0.1:0 --quiet " + flags + " 2>&1");
    EXPECT_EQ(alone.exit_code, 2) << alone.output;
    EXPECT_NE(alone.output.find("needs --"), std::string::npos) << alone.output;
  }
  for (const char* interval : {"10", "1ms", "-1s", "8d", "1.5h"}) {
    auto r = RunCommand(server + " --listen 127.0.0.1:0 --quiet --results " + url_ +
                        " --self-test-interval " + interval + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << interval << ": " << r.output;
    EXPECT_NE(r.output.find("--self-test-interval"), std::string::npos) << r.output;
  }
  // Nothing listens there: the server serves, the farm sees a healthy device (correctness
  // only), and the log says why nothing is recorded.
  RedisProcess redis;
  ASSERT_TRUE(redis.ready());
  const std::string pg =
      "postgresql://remex@127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()) + "/remex";
  const std::string log = (dir_ / "server.log").string();
  auto unreachable = ServerProcess::Logging(log, {"--farm", redis.url_text(), "--results", pg});
  ASSERT_NE(unreachable->port(), 0) << unreachable->banner();
  EXPECT_TRUE(unreachable->alive());
  const nlohmann::json device = FarmDevice(redis.url_text(), unreachable->address());
  EXPECT_EQ(device["state"], "idle");
  EXPECT_EQ(device["health"], "ok");
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("[warning] results store postgresql://remex@127.0.0.1:"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("health on correctness only"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace remex
