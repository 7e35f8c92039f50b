// The device farm end to end: a real redis-server and real remex-server processes
// registered to it with --farm, listed by `remex farm status`; a server killed leaves
// the pool when its record's TTL runs out, a server stopped leaves it at once, and bad
// flags or an unreachable farm are refused with a message that names them.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "rpc/farm.h"
#include "rpc/redis_test_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

using namespace std::chrono_literals;
using testing::RedisProcess;
using testing::RunCommand;
using testing::ServerProcess;

// `remex farm status --json` of `url`, parsed; null on failure (a test failure).
nlohmann::json FarmList(const std::string& url) {
  auto r = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --json --farm " + url);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.output, nullptr, false);
}

// The device of `status` with this id; null when absent.
nlohmann::json Device(const nlohmann::json& status, const std::string& id) {
  if (status.is_null()) return nullptr;
  for (const auto& d : status["devices"]) {
    if (d["id"] == id) return d;
  }
  return nullptr;
}

// Waits up to `limit` for `want` (present or not) of device `id`; true when reached.
bool WaitFor(const std::string& url, const std::string& id, bool want, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (Device(FarmList(url), id).is_null() != want) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

class FarmTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.ready()) << "redis-server did not start (scripts/setup-deps.sh installs it)"; }
  RedisProcess redis_;
};

TEST_F(FarmTest, ServersRegisterAndAreListedWithTheirPoolsAndLabels) {
  const std::string url = redis_.url_text();
  ServerProcess a({"--farm", url, "--pool", "cpus", "--labels", "rack=a1,ci=yes"});
  ServerProcess b({"--farm", url + "/0", "--pool", "edge"});
  ASSERT_NE(a.port(), 0) << a.banner();
  ASSERT_NE(b.port(), 0) << b.banner();
  const nlohmann::json status = FarmList(url);
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["farm"], url + "/0");
  ASSERT_EQ(status["devices"].size(), 2u) << status.dump(2);
  const nlohmann::json da = Device(status, a.address());
  ASSERT_FALSE(da.is_null()) << status.dump(2);
  EXPECT_EQ(da["pool"], "cpus");
  EXPECT_EQ(da["state"], "idle");
  EXPECT_EQ(da["kind"], "cpu");
  EXPECT_EQ(da["device"], "cpu");
  EXPECT_EQ(da["labels"]["rack"], "a1");
  EXPECT_EQ(da["labels"]["ci"], "yes");
  EXPECT_GT(da["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(da["version"].get<std::string>().empty());
  EXPECT_LT(da["heartbeat_age_ms"].get<int64_t>(), 3000);
  const nlohmann::json db = Device(status, b.address());
  ASSERT_FALSE(db.is_null());
  EXPECT_EQ(db["pool"], "edge");
  EXPECT_TRUE(db["labels"].empty());
  ASSERT_EQ(status["pools"].size(), 2u);
  EXPECT_EQ(status["pools"][0]["name"], "cpus");
  EXPECT_EQ(status["pools"][0]["idle"], 1);
  // The table: a header, a row per device with its labels, a row per pool.
  auto text = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --farm " + url);
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find("2 devices in 2 pools"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("POOL"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(a.address()), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("ci=yes,rack=a1"), std::string::npos) << text.output;
  // A label selector lists the matching devices only, and their pools.
  auto selected = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --json --labels 'rack=a1,ci!=no' --farm " + url);
  ASSERT_EQ(selected.exit_code, 0) << selected.output;
  const nlohmann::json only_a = nlohmann::json::parse(selected.output, nullptr, false);
  ASSERT_EQ(only_a["devices"].size(), 1u) << selected.output;
  EXPECT_EQ(only_a["devices"][0]["id"], a.address());
  EXPECT_EQ(only_a["pools"].size(), 1u);
  EXPECT_EQ(only_a["selector"], "rack=a1,ci!=no");
  auto none = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --json --labels pool=nowhere --farm " + url);
  ASSERT_EQ(none.exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(none.output)["devices"].empty());
  auto bad = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --labels 'cuda>=x' --farm " + url + " 2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("cuda>=x"), std::string::npos) << bad.output;
  // REMEX_FARM stands for --farm.
  auto env = RunCommand("REMEX_FARM=" + url + " " + std::string(REMEX_CLI_BIN) + " farm status --json");
  ASSERT_EQ(env.exit_code, 0);
  EXPECT_NE(env.output.find(b.address()), std::string::npos);
}

TEST_F(FarmTest, AKilledServerLeavesThePoolWithinItsTtlAndAStoppedOneAtOnce) {
  const std::string url = redis_.url_text();
  ServerProcess killed({"--farm", url});
  ServerProcess stopped({"--farm", url});
  ASSERT_FALSE(Device(FarmList(url), killed.address()).is_null());
  ASSERT_FALSE(Device(FarmList(url), stopped.address()).is_null());
  // SIGKILL: no goodbye; the record expires (TTL 5 s, refreshed every second).
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(killed.SignalAndWait(SIGKILL, 5s));
  EXPECT_TRUE(WaitFor(url, killed.address(), false, 8s)) << "still listed after 8 s";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 2s);  // It did wait for the TTL.
  // The other server kept its record alive throughout.
  EXPECT_FALSE(Device(FarmList(url), stopped.address()).is_null());
  // SIGTERM: removed as the server stops.
  ASSERT_TRUE(stopped.SignalAndWait(SIGTERM, 10s));
  EXPECT_TRUE(Device(FarmList(url), stopped.address()).is_null());
  // A server started again registers again.
  ServerProcess again({"--farm", url});
  EXPECT_FALSE(Device(FarmList(url), again.address()).is_null());
}

TEST_F(FarmTest, BadFlagsAndAnUnreachableFarmAreRefused) {
  const std::string server = REMEX_SERVER_BIN;
  auto run = [&](const std::string& args) { return RunCommand(server + " --listen 127.0.0.1:0 --quiet " + args + " 2>&1"); };
  auto r = run("--labels gpu=h100");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("need --farm"), std::string::npos) << r.output;
  r = run("--farm " + redis_.url_text() + " --labels 'gpu h100'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("gpu h100"), std::string::npos) << r.output;
  r = run("--farm http://x:1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("redis://"), std::string::npos) << r.output;
  r = run("--farm " + redis_.url_text() + " --pool 'a b'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // Nothing listens there: the server exits 1 naming the farm, and prints no banner.
  const std::string dead = "redis://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  r = run("--farm " + dead);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dead), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("listening on"), std::string::npos) << r.output;
  // The CLI: an infrastructure error (3) naming the farm; no URL at all is a usage error.
  auto cli = RunCommand(std::string(REMEX_CLI_BIN) + " farm status --timeout 1 --farm " + dead + " 2>&1");
  EXPECT_EQ(cli.exit_code, 3) << cli.output;
  EXPECT_NE(cli.output.find("127.0.0.1"), std::string::npos) << cli.output;
  cli = RunCommand("env -u REMEX_FARM " + std::string(REMEX_CLI_BIN) + " farm status 2>&1");
  EXPECT_EQ(cli.exit_code, 2) << cli.output;
}

}  // namespace
}  // namespace remex
