// The device farm end to end: a real redis-server and real remex-server processes
// registered to it with --farm, listed by `remex farm status`; a server killed leaves
// the pool when its record's TTL runs out, a server stopped leaves it at once, and bad
// flags or an unreachable farm are refused with a message that names them. Leases:
// a leased device serves its holder only; the lease's end closes the holder's sessions;
// a killed client loses its lease, a killed server leaves the pool; 20 clients share
// 3 devices fairly and never two at once; drained devices are not leased. What Redis
// holds of a lease does not authenticate; a malformed lease record is refused; a server
// whose Redis restarted honours the next lease at once; `farm lease` stops its command
// when the lease is lost. With a farm key, only lease records the farm's lease functions
// signed are honoured.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "host_client/client/client.h"
#include "host_client/client/npy.h"
#include "host_client/compiler/onnx_test_util.h"
#include "rpc/farm.h"
#include "rpc/auth.h"
#include "rpc/farm_job.h"
#include "rpc/farm_lease.h"
#include "rpc/redis_test_util.h"
#include "tests/model_util.h"
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


// ---------------------------------------------------------------------------------------
// Leases.

std::string Cli() { return std::string(REMEX_CLI_BIN); }

// A farm key file (40 random bytes, mode 600) in the test's temporary folder.
std::string FarmKeyFile() {
  const std::string path = ::testing::TempDir() + "/farm-" + std::to_string(getpid()) + ".key";
  auto bytes = rpc::RandomBytes(40);
  EXPECT_TRUE(bytes.ok());
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << *bytes; }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

// A small ONNX model on disk for `remex run` (y = Relu(x + c), x [?, 4]), with the
// shape to run it at.
std::string ModelFile();
std::string Model() { return ModelFile() + " --shape x=2x4"; }
std::string ModelFile() {
  static const std::string path = [] {
    const std::string p = std::filesystem::temp_directory_path().string() + "/remex_farm_test_" +
                          std::to_string(getpid()) + ".onnx";
    EXPECT_TRUE(testing::AddReluModel().Save(p));
    return p;
  }();
  return path;
}

farm::RedisUrl Url(const RedisProcess& redis) { return redis.url(); }

farm::LeaseRequest Request(const std::string& pool, std::chrono::milliseconds wait = 0ms) {
  farm::LeaseRequest r;
  r.pool = pool;
  r.wait = wait;
  r.holder = "farm_test";
  return r;
}

TEST_F(FarmTest, ALeasedDeviceServesItsHolderOnly) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url, "--pool", "ci"});
  ASSERT_NE(server.port(), 0) << server.banner();
  // `run --farm` leases the device, runs, and releases it.
  auto run = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool ci --json 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(server.address()), std::string::npos) << run.output;
  EXPECT_EQ(Device(FarmList(url), server.address())["state"], "idle");
  // Without a lease, the device refuses the session.
  auto bare = RunCommand(Cli() + " run " + Model() + " --server " + server.address() + " 2>&1");
  EXPECT_EQ(bare.exit_code, 3) << bare.output;
  EXPECT_NE(bare.output.find("lease it with --farm"), std::string::npos) << bare.output;
  // `farm lease -- CMD` hands CMD the address and the token.
  auto leased = RunCommand(Cli() + " farm lease --farm " + url + " --pool ci -- sh -c '" + Cli() + " run " + Model() +
                           " --server \"$REMEX_SERVER\" && echo \"pool $REMEX_LEASE_POOL\"' 2>&1");
  ASSERT_EQ(leased.exit_code, 0) << leased.output;
  EXPECT_NE(leased.output.find("pool ci"), std::string::npos) << leased.output;
  // CMD's exit status is farm lease's.
  EXPECT_EQ(RunCommand(Cli() + " farm lease --farm " + url + " --pool ci -- sh -c 'exit 7'").exit_code, 7);
  // CMD keeps the rest of the environment, and the lease's variables replace any given;
  // a CMD found nowhere on PATH is 127, named.
  auto env = RunCommand("REMEX_LEASE_POOL=stale REMEX_FARM_TEST_KEEP=kept " + Cli() + " farm lease --farm " + url +
                        " --pool ci -- sh -c 'echo \"$REMEX_FARM_TEST_KEEP $REMEX_LEASE_POOL\"' 2>&1");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  EXPECT_NE(env.output.find("kept ci"), std::string::npos) << env.output;
  auto missing = RunCommand(Cli() + " farm lease --farm " + url + " --pool ci -- remex-no-such-command 2>&1");
  EXPECT_EQ(missing.exit_code, 127) << missing.output;
  EXPECT_NE(missing.output.find("cannot run remex-no-such-command: No such file or directory"), std::string::npos)
      << missing.output;
  // While another holds it: the holder is listed, a client not waiting is refused, one
  // waiting is queued (and listed) and served when the lease ends.
  auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("ci"), 2s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  const nlohmann::json d = Device(FarmList(url), server.address());
  EXPECT_EQ(d["state"], "leased");
  EXPECT_EQ(d["holder"], "farm_test");
  auto busy = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool ci 2>&1");
  EXPECT_EQ(busy.exit_code, 3) << busy.output;
  EXPECT_NE(busy.output.find("became free within"), std::string::npos) << busy.output;
  std::atomic<int> waited_rc{-1};
  std::thread waiter([&] {
    waited_rc = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool ci --lease-wait 30").exit_code;
  });
  bool queued = false;
  for (int i = 0; i < 100 && !queued; ++i) {
    const nlohmann::json status = FarmList(url);
    queued = !status.is_null() && status["pools"][0]["waiting"] == 1;
    if (!queued) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(queued) << "the waiting client is not listed";
  (*holder).reset();  // released
  waiter.join();
  EXPECT_EQ(waited_rc, 0);
}

TEST_F(FarmTest, TheEndOfALeaseClosesItsSessions) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("default"), 2s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  client::ConnectOptions options;
  options.token = (*holder)->lease().token;
  auto session = client::Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)->Upload(testing::Floats({256, 1024}, std::vector<float>(256 * 1024, 1.0f))).ok());
  EXPECT_GE(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), 1 << 20);
  // Another client with a wrong token is refused while the lease holds.
  options.token = std::string(32, 'f');
  auto other = client::Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kPermissionDenied) << other.status().ToString();
  ASSERT_TRUE((*holder)->Release().ok());
  // Within a heartbeat (1 s) the server closes the session.
  Status st;
  for (int i = 0; i < 60; ++i) {
    st = (*session)->Upload(testing::Floats({4}, {1, 2, 3, 4})).status();
    if (!st.ok()) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("lease this session was opened with has ended"), std::string::npos) << st.ToString();
  // Its memory (the 1 MiB tensor) is freed with it.
  EXPECT_TRUE(testing::Eventually([&] { return server.Metric("remex_device_memory_bytes{device=\"cpu\"}") == 0; }))
      << server.Metric("remex_device_memory_bytes{device=\"cpu\"}") << " bytes still held";
}

TEST_F(FarmTest, AKilledClientLosesItsLeaseAndAKilledServerLeavesThePool) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  // A client holding a lease (TTL 2 s) is killed: nobody renews it.
  auto bg = RunCommand("(" + Cli() + " farm lease --ttl 2 --farm " + url +
                       " -- sleep 6 >/dev/null 2>&1 & echo $!)");
  const std::string pid = bg.output.substr(0, bg.output.find_first_of("\r\n"));
  ASSERT_FALSE(pid.empty());
  bool leased = false;
  for (int i = 0; i < 100 && !leased; ++i) {
    leased = Device(FarmList(url), server.address())["state"] == "leased";
    if (!leased) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(leased);
  RunCommand("kill -9 " + pid);
  auto after = farm::LeaseHolder::Acquire(Url(redis_), Request("default", 10s), 2s);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  // The server dies while leased: the holder's requests fail, and the device leaves
  // the pool within its record's TTL.
  client::ConnectOptions options;
  options.token = (*after)->lease().token;
  auto session = client::Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE(server.SignalAndWait(SIGKILL, 5s));
  Status st = (*session)->Upload(testing::Floats({4}, {1, 2, 3, 4})).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_TRUE(WaitFor(url, server.address(), false, 8s));
}

// A Redis reader copies the device's lease record: nothing in it lets it authenticate
// (as a token's proof, or as a lease key), while the lease's holder does.
TEST_F(FarmTest, WhatRedisHoldsOfALeaseDoesNotAuthenticate) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("default"), 2s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  auto reader = farm::RedisClient::Connect(Url(redis_), 2s);
  ASSERT_TRUE(reader.ok());
  auto record = (*reader)->Query({"HGETALL", farm::LeaseKey("default", server.address())});
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->array.size(), 8u);
  std::vector<std::string> stolen;  // every value of the record, and the key as a lease's secret
  for (size_t i = 1; i < record->array.size(); i += 2) stolen.push_back(record->array[i].str);
  stolen.push_back(std::string(rpc::kLeaseSecretPrefix) + (*holder)->lease().public_key);
  for (const std::string& token : stolen) {
    if (token.size() < rpc::kMinTokenBytes) continue;
    client::ConnectOptions options;
    options.token = token;
    auto session = client::Session::Connect("127.0.0.1", server.port(), options);
    ASSERT_FALSE(session.ok()) << token;
    EXPECT_EQ(session.status().code(), StatusCode::kPermissionDenied) << token << ": " << session.status().ToString();
  }
  // The holder's own secret works, and nothing of it is in Redis.
  client::ConnectOptions options;
  options.token = (*holder)->lease().token;
  for (const std::string& v : stolen) {
    if (v.size() >= rpc::kMinTokenBytes) {
      EXPECT_EQ(options.token.find(v), std::string::npos);
    }
  }
  auto session = client::Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_TRUE((*session)->Ping().ok());
  // So does it from the CLI, as REMEX_TOKEN; a copied public key does not.
  auto run = RunCommand("REMEX_TOKEN=" + options.token + " " + Cli() + " run " + Model() + " --server " +
                        server.address() + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  auto forged = RunCommand("REMEX_TOKEN=" + stolen.back() + " " + Cli() + " run " + Model() + " --server " +
                           server.address() + " 2>&1");
  EXPECT_EQ(forged.exit_code, 3) << forged.output;
  EXPECT_NE(forged.output.find("not by the key of this device's current lease"), std::string::npos) << forged.output;
}

// A lease record the server does not recognise (here one of the old form, a token in
// clear) is refused, and the sessions made under it are not served.
TEST_F(FarmTest, AMalformedLeaseRecordIsRefused) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  auto writer = farm::RedisClient::Connect(Url(redis_), 2s);
  ASSERT_TRUE(writer.ok());
  const std::string token(32, 'f');
  ASSERT_TRUE((*writer)->Execute({"HSET", farm::LeaseKey("default", server.address()), "token", token, "holder", "x",
                                  "since_ms", "1", "ttl_ms", "30000"}).ok());
  for (const std::string& t : {token, std::string(rpc::kLeaseSecretPrefix) + std::string(64, 'f')}) {
    client::ConnectOptions options;
    options.token = t;
    auto session = client::Session::Connect("127.0.0.1", server.port(), options);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::kPermissionDenied) << session.status().ToString();
    EXPECT_NE(session.status().message().find("lease record"), std::string::npos) << session.status().ToString();
    EXPECT_NE(session.status().message().find("unknown field 'token'"), std::string::npos) << session.status().ToString();
  }
}

// Redis restarts (empty, on the same port) while a server is registered and its lease
// reader connected: the next lease's holder is served at its first try.
TEST_F(FarmTest, ALeaseIsHonouredAtOnceAfterRedisRestarts) {
  const std::string url = redis_.url_text();
  const uint16_t port = redis_.url().port;
  ServerProcess server({"--farm", url});
  {
    // A first lease and session: the server's lease reader connects.
    auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("default"), 2s);
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    client::ConnectOptions options;
    options.token = (*holder)->lease().token;
    ASSERT_TRUE(client::Session::Connect("127.0.0.1", server.port(), options).ok());
  }
  redis_.Stop();
  RedisProcess again(port);
  ASSERT_TRUE(again.ready());
  // The server registers again within a heartbeat.
  ASSERT_TRUE(WaitFor(url, server.address(), true, 5s)) << "not registered again";
  auto holder = farm::LeaseHolder::Acquire(again.url(), Request("default", 5s), 2s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  client::ConnectOptions options;
  options.token = (*holder)->lease().token;
  auto session = client::Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_TRUE((*session)->Ping().ok());
}

// The lease of `farm lease -- CMD` is lost (its key deleted, as by an operator or a
// lapse): CMD's process group gets SIGTERM, then SIGKILL after --stop-grace when it
// ignores SIGTERM; farm lease says why and exits 75.
TEST_F(FarmTest, FarmLeaseStopsItsCommandWhenTheLeaseIsLost) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  auto writer = farm::RedisClient::Connect(Url(redis_), 2s);
  ASSERT_TRUE(writer.ok());
  const std::string lease_key = farm::LeaseKey("default", server.address());
  auto lose_lease_while = [&](const std::string& command) {
    testing::CommandResult result;
    std::thread t([&] { result = RunCommand(command); });
    bool leased = false;
    for (int i = 0; i < 200 && !leased; ++i) {
      auto n = (*writer)->Query({"EXISTS", lease_key});
      leased = n.ok() && n->integer == 1;
      if (!leased) std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(leased);
    std::this_thread::sleep_for(300ms);  // the command is running
    EXPECT_TRUE((*writer)->Execute({"DEL", lease_key}).ok());
    t.join();
    return result;
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = lose_lease_while(Cli() + " farm lease --ttl 3 --farm " + url + " -- sleep 60 2>&1");
  EXPECT_EQ(r.exit_code, 75) << r.output;
  EXPECT_NE(r.output.find("lease lost"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SIGTERM to its process group"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "sleep 60 was not stopped";
  // A command that ignores SIGTERM (its children too) is killed after the grace period.
  const auto t1 = std::chrono::steady_clock::now();
  r = lose_lease_while(Cli() + " farm lease --ttl 3 --stop-grace 1 --farm " + url +
                       " -- sh -c 'trap \"\" TERM; sleep 60; echo survived' 2>&1");
  EXPECT_EQ(r.exit_code, 75) << r.output;
  EXPECT_NE(r.output.find("SIGKILL"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("survived"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 30s) << "the command was not killed";
  // The device is free again.
  EXPECT_EQ(RunCommand(Cli() + " farm lease --farm " + url + " -- true").exit_code, 0);
}

// Redis ACL users per role (docs/farm.md, "Threat model", the rules below verbatim):
// each role does its part of the farm, and Redis refuses it the rest.
constexpr const char* kServerAcl =
    "on >farm-test-pw resetkeys ~remex:{*}:device:* ~remex:{*}:devices ~remex:{*}:label:* ~remex:{*}:free "
    "~remex:{*}:freed %R~remex:{*}:lease:* -@all +ping +select +multi +exec +discard +del +hset +pexpire +sadd +srem "
    "+zadd +rpush +ltrim +eval "
    "+exists +type +hlen +hstrlen +hgetall +time";
constexpr const char* kClientAcl =
    "on >farm-test-pw resetkeys ~remex:{*}:lease:* ~remex:{*}:waiting ~remex:{*}:classes ~remex:{*}:class:* "
    "~remex:{*}:waiters ~remex:{*}:alive ~remex:{*}:grant:* ~remex:{*}:free ~remex:{*}:freed ~remex:{*}:leases "
    "~remex:{*}:label:* ~remex:{*}:swept ~remex:{*}:ticket ~remex:{*}:served ~remex:{*}:devices ~remex:{*}:job:* "
    "~remex:{*}:jobs ~remex:{*}:jobs:* %R~remex:* -@all +ping +select +multi +exec +discard +eval +evalsha +fcall +time "
    "+scan +incr +hincrby +rpush +lpop +blpop +ltrim +hset +hget +hmget +hgetall +hdel +zadd +zscore +zrem +zrange "
    "+zrevrange +zrank +zcard +zcount +zrangebyscore +lrange +scard +sscan +smembers +srem +exists +pexpire +set +get "
    "+del +xadd +xread";
constexpr const char* kStatusAcl =
    "on >farm-test-pw resetkeys %R~remex:* -@all +ping +select +scan +hgetall +hmget +exists +time +lrange "
    "+zrangebyscore +zcount +smembers";
constexpr const char* kOperatorAcl =
    "on >farm-test-pw resetkeys %R~remex:* ~remex:{*}:drain:* ~remex:{*}:free ~remex:{*}:freed -@all +ping +select "
    "+scan +hgetall +hmget +exists +time +lrange +zrangebyscore +zcount +smembers +set +del +zadd +rpush +ltrim "
    "+function|load";

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

TEST_F(FarmTest, RedisAclRolesLetEachRoleDoItsPartOnly) {
  // The rules tested here are those docs/farm.md gives operators, word for word.
  {
    std::ifstream doc(std::string(REMEX_SOURCE_DIR) + "/docs/farm.md");
    const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
    for (auto [user, rules] : {std::pair{"remex-server", kServerAcl}, std::pair{"remex-client", kClientAcl},
                               std::pair{"remex-status", kStatusAcl}, std::pair{"remex-operator", kOperatorAcl}}) {
      std::string line = std::string("ACL SETUSER ") + user;
      for (const std::string& w : Words(rules)) line += " " + (w == ">farm-test-pw" ? std::string(">SECRET") : w);
      EXPECT_NE(text.find(line + "\n"), std::string::npos) << "docs/farm.md lacks: " << line;
    }
  }
  const std::string host = "127.0.0.1:" + std::to_string(redis_.url().port);
  {
    auto admin = farm::RedisClient::Connect(Url(redis_), 2s);
    ASSERT_TRUE(admin.ok());
    for (auto [user, rules] : {std::pair{"remex-server", kServerAcl}, std::pair{"remex-client", kClientAcl},
                               std::pair{"remex-status", kStatusAcl}, std::pair{"remex-operator", kOperatorAcl}}) {
      std::vector<std::string> args = {"ACL", "SETUSER", user};
      for (std::string& w : Words(rules)) args.push_back(std::move(w));
      ASSERT_TRUE((*admin)->Execute(args).ok()) << user;
    }
    ASSERT_TRUE((*admin)->Execute({"ACL", "SETUSER", "default", "off"}).ok());
  }
  setenv(farm::kFarmPasswordEnv, "farm-test-pw", 1);
  struct Unset {
    ~Unset() { unsetenv(farm::kFarmPasswordEnv); }
  } unset;
  auto url = [&](const std::string& user) { return "redis://" + user + "@" + host; };
  auto as = [&](const std::string& user) {
    auto c = farm::RedisClient::Connect(*farm::ParseRedisUrl(url(user)), 2s);
    EXPECT_TRUE(c.ok()) << user << ": " << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  };
  // Nobody without a role: the default user is off.
  auto anonymous = farm::RedisClient::Connect(Url(redis_), 2s);
  ASSERT_TRUE(anonymous.ok());
  EXPECT_FALSE((*anonymous)->Execute({"PING"}).ok());
  // Each role does its part: an operator loads the lease functions (with the farm key), a
  // server registers, a lister lists, a client leases and runs, an operator drains.
  const std::string key_file = FarmKeyFile();
  auto install = RunCommand(Cli() + " farm install-functions --farm " + url("remex-client") + " --farm-key-file " +
                            key_file + " 2>&1");
  EXPECT_EQ(install.exit_code, 3) << install.output;
  EXPECT_NE(install.output.find("NOPERM"), std::string::npos) << install.output;
  install = RunCommand(Cli() + " farm install-functions --farm " + url("remex-operator") + " --farm-key-file " +
                       key_file + " 2>&1");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  ServerProcess server({"--farm", url("remex-server"), "--pool", "acl", "--farm-key-file", key_file});
  ASSERT_NE(server.port(), 0) << server.banner();
  auto status = RunCommand(Cli() + " farm status --json --farm " + url("remex-status") + " 2>&1");
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find(server.address()), std::string::npos) << status.output;
  auto run = RunCommand(Cli() + " run " + Model() + " --farm " + url("remex-client") + " --pool acl 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(RunCommand(Cli() + " farm lease --farm " + url("remex-client") + " --pool acl -- true").exit_code, 0);
  // A client submits a job, runs it as a worker, and reads its end.
  auto job = RunCommand(Cli() + " job submit --farm " + url("remex-client") + " --pool acl " + ModelFile() +
                        " --command run -- --shape x=2x4 2>&1");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const std::string job_id = job.output.substr(0, job.output.find('\n'));
  auto worked = RunCommand(Cli() + " worker --once --heartbeat 0.5 --farm " + url("remex-client") + " --pool acl 2>&1");
  EXPECT_EQ(worked.exit_code, 0) << worked.output;
  auto waited = RunCommand(Cli() + " job wait " + job_id + " --timeout 30 --farm " + url("remex-client") + " 2>&1");
  EXPECT_EQ(waited.exit_code, 0) << waited.output;
  auto drain = RunCommand(Cli() + " farm drain --farm " + url("remex-operator") + " " + server.address() + " 2>&1");
  EXPECT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_EQ(RunCommand(Cli() + " farm undrain --farm " + url("remex-operator") + " " + server.address()).exit_code, 0);
  // ... and nothing else. A server writes no lease, not even from a script.
  const std::string lease = farm::LeaseKey("acl", server.address());
  const std::string device = farm::DeviceKey("acl", server.address());
  const std::string drain_key = farm::DrainKey("acl", server.address());
  auto srv = as("remex-server");
  ASSERT_NE(srv, nullptr);
  EXPECT_FALSE(srv->Execute({"HSET", lease, "key", std::string(64, 'a')}).ok());
  EXPECT_FALSE(srv->Execute({"EVAL", "return redis.call('HSET', KEYS[1], 'key', 'a')", "1", lease}).ok());
  EXPECT_FALSE(srv->Execute({"EVAL", "return redis.call('DEL', '" + lease + "')", "0"}).ok());
  EXPECT_FALSE(srv->Execute({"SET", drain_key, "1"}).ok());
  // A client writes no device record and no drain.
  auto cli = as("remex-client");
  ASSERT_NE(cli, nullptr);
  EXPECT_FALSE(cli->Execute({"HSET", device, "state", "quarantined"}).ok());
  EXPECT_FALSE(cli->Execute({"EVAL", "return redis.call('HSET', '" + device + "', 'state', 'quarantined')", "0"}).ok());
  EXPECT_FALSE(cli->Execute({"SET", drain_key, "1"}).ok());
  EXPECT_FALSE(cli->Execute({"FLUSHALL"}).ok());
  // ... nor reads the lease functions' code, which holds the farm key.
  EXPECT_FALSE(cli->Execute({"FUNCTION", "LIST", "WITHCODE"}).ok());
  EXPECT_FALSE(cli->Execute({"FUNCTION", "DUMP"}).ok());
  auto cli_drain = RunCommand(Cli() + " farm drain --farm " + url("remex-client") + " " + server.address() + " 2>&1");
  EXPECT_EQ(cli_drain.exit_code, 3) << cli_drain.output;
  // A lister writes nothing.
  auto lister = as("remex-status");
  ASSERT_NE(lister, nullptr);
  EXPECT_FALSE(lister->Execute({"DEL", device}).ok());
  EXPECT_FALSE(lister->Execute({"HSET", lease, "key", std::string(64, 'a')}).ok());
  EXPECT_FALSE(lister->Execute({"EVAL", "return 1", "1", lease}).ok());
  EXPECT_EQ(farm::RedisClient::Connect(*farm::ParseRedisUrl(url("remex-status")), 2s).ok(), true);
  // The device record is intact and the device idle after all that.
  auto after = RunCommand(Cli() + " farm status --json --farm " + url("remex-status"));
  ASSERT_EQ(after.exit_code, 0);
  nlohmann::json d = Device(nlohmann::json::parse(after.output, nullptr, false), server.address());
  EXPECT_EQ(d["state"], "idle") << after.output;
  // A wrong password: refused, naming the user.
  setenv(farm::kFarmPasswordEnv, "wrong", 1);
  auto wrong = RunCommand(Cli() + " farm status --farm " + url("remex-status") + " 2>&1");
  EXPECT_EQ(wrong.exit_code, 3) << wrong.output;
  EXPECT_NE(wrong.output.find("AUTH as remex-status"), std::string::npos) << wrong.output;
}

// A client waiting for a lease on a connection of its own, on a thread: `wait` and
// `heartbeat` as LeaseRequest has them; the outcome lands in `out`.
std::thread WaitForLease(const farm::RedisUrl& url, farm::LeaseRequest request, std::chrono::milliseconds wait,
                         std::chrono::milliseconds heartbeat, StatusOr<farm::Lease>& out) {
  return std::thread([url, request, wait, heartbeat, &out]() mutable {
    auto c = farm::RedisClient::Connect(url, 2s);
    if (!c.ok()) {
      out = c.status();
      return;
    }
    request.wait = wait;
    request.heartbeat = heartbeat;
    out = farm::AcquireLease(**c, request);
  });
}

// Redis behind Sentinel: a primary, its replica and three Sentinels on loopback; two
// servers register, two clients hold leases and a third waits, all through a
// redis-sentinel:// URL. The primary is killed (SIGKILL) mid-lease: the Sentinels promote
// the replica, and the servers register there again, the holders' renewals go on there,
// and the waiter, still queued, is granted the device released after the failover. No
// device is ever leased to two clients.
TEST_F(FarmTest, ServersHoldersAndWaitersFollowASentinelFailover) {
  RedisProcess primary(std::vector<std::string>{});
  ASSERT_TRUE(primary.ready());
  RedisProcess replica({"--replicaof", "127.0.0.1", std::to_string(primary.port())});
  ASSERT_TRUE(replica.ready());
  auto admin = farm::RedisClient::Connect(primary.url(), 2s);
  ASSERT_TRUE(admin.ok());
  auto in_sync = [&] {
    auto info = (*admin)->Query({"INFO", "replication"});
    return info.ok() && info->str.find("connected_slaves:1") != std::string::npos &&
           info->str.find("state=online") != std::string::npos;
  };
  for (int i = 0; i < 100 && !in_sync(); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(in_sync()) << "the replica did not sync";
  const auto dir = std::filesystem::temp_directory_path() / ("remex_sentinel_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove_all(p); }
  } remove_dir{dir};
  std::vector<std::unique_ptr<RedisProcess>> sentinels;
  std::string hosts;
  for (int i = 0; i < 3; ++i) {
    const std::string conf = (dir / ("sentinel" + std::to_string(i) + ".conf")).string();
    std::ofstream(conf) << "sentinel monitor m 127.0.0.1 " << primary.port() << " 2\n"
                        << "sentinel down-after-milliseconds m 1000\n"
                        << "sentinel failover-timeout m 4000\n";
    sentinels.push_back(std::make_unique<RedisProcess>(std::vector<std::string>{}, conf));
    ASSERT_TRUE(sentinels.back()->ready());
    hosts += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(sentinels.back()->port());
  }
  // Each Sentinel knows the replica and the two other Sentinels (a failover needs them).
  auto sentinel_query = [&](int i, std::vector<std::string> args) -> StatusOr<farm::RedisValue> {
    auto c = farm::RedisClient::Connect(sentinels[i]->url(), 1s);
    if (!c.ok()) return c.status();
    return (*c)->Query(args);
  };
  auto ready = [&] {
    for (int i = 0; i < 3; ++i) {
      auto r = sentinel_query(i, {"SENTINEL", "REPLICAS", "m"});
      auto s = sentinel_query(i, {"SENTINEL", "SENTINELS", "m"});
      if (!r.ok() || r->array.size() != 1 || !s.ok() || s->array.size() != 2) return false;
    }
    return true;
  };
  for (int i = 0; i < 300 && !ready(); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(ready()) << "the Sentinels did not find the replica and each other";
  const std::string url_text = "redis-sentinel://" + hosts + "/m";
  const auto url = farm::ParseRedisUrl(url_text);
  ASSERT_TRUE(url.ok()) << url.status().ToString();

  ServerProcess a({"--farm", url_text, "--pool", "ha"});
  ServerProcess b({"--farm", url_text, "--pool", "ha"});
  ASSERT_NE(a.port(), 0) << a.banner();
  ASSERT_NE(b.port(), 0) << b.banner();
  auto registered = [&](farm::RedisClient& redis) {
    auto list = redis.ListPool("ha", nullptr, false);
    return list.ok() && list->size() == 2;
  };
  auto client = farm::RedisClient::Connect(*url, 2s);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->url().port, primary.port());
  for (int i = 0; i < 50 && !registered(**client); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(registered(**client));
  farm::LeaseRequest request;
  request.pool = "ha";
  request.holder = "failover-test";
  request.ttl = 15s;
  auto h1 = farm::LeaseHolder::Acquire(*url, request, 2s);
  ASSERT_TRUE(h1.ok()) << h1.status().ToString();
  auto h2 = farm::LeaseHolder::Acquire(*url, request, 2s);
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  StatusOr<farm::Lease> waited = Unavailable("not run");
  std::thread waiter = WaitForLease(*url, request, 60s, 1s, waited);
  for (int i = 0; i < 100 && (*client)->Query({"ZCARD", farm::QueueKey("ha")})->integer < 1; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ((*client)->Query({"ZCARD", farm::QueueKey("ha")})->integer, 1);
  ASSERT_TRUE((*admin)->Query({"WAIT", "1", "2000"}).ok());  // the replica has it all

  primary.Kill();
  const auto killed = std::chrono::steady_clock::now();
  const int64_t killed_ms = farm::UnixMillis();
  // The Sentinels promote the replica.
  auto promoted = [&] {
    auto r = sentinel_query(0, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m"});
    return r.ok() && r->array.size() == 2 && r->array[1].str == std::to_string(replica.port());
  };
  while (!promoted() && std::chrono::steady_clock::now() - killed < 30s) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(promoted()) << "no failover within 30 s";
  const auto failover = std::chrono::steady_clock::now() - killed;
  // Servers beat on the new primary (their records refreshed after the kill); the
  // holders still hold.
  auto on_replica = farm::RedisClient::Connect(replica.url(), 2s);
  ASSERT_TRUE(on_replica.ok());
  auto beating = [&] {
    auto list = (*on_replica)->ListPool("ha", nullptr, false);
    if (!list.ok() || list->size() != 2) return false;
    for (const farm::DeviceRecord& d : *list) {
      if (d.heartbeat_ms <= killed_ms) return false;
    }
    return true;
  };
  while (!beating() && std::chrono::steady_clock::now() - killed < 40s) std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(beating()) << "the servers did not beat on the promoted replica";
  const auto servers_back = std::chrono::steady_clock::now() - killed;
  std::this_thread::sleep_for(request.ttl / 3 + 1s);  // a renewal on the new primary
  EXPECT_TRUE((*h1)->lost().ok()) << (*h1)->lost().ToString();
  EXPECT_TRUE((*h2)->lost().ok()) << (*h2)->lost().ToString();
  // The device released now goes to the waiter, who waited through the failover.
  const std::string released = (*h2)->lease().device_id;
  const auto release = std::chrono::steady_clock::now();
  ASSERT_TRUE((*h2)->Release().ok());
  waiter.join();
  const auto waiter_served = std::chrono::steady_clock::now() - release;
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ(waited->device_id, released);
  EXPECT_EQ(rpc::ToHex(*farm::CurrentLeaseKey(**on_replica, "ha", (*h1)->lease().device_id)), (*h1)->lease().public_key);
  EXPECT_EQ(rpc::ToHex(*farm::CurrentLeaseKey(**on_replica, "ha", released)), waited->public_key);
  // Both devices held: nobody else gets one.
  auto third = farm::AcquireLease(**on_replica, request);
  EXPECT_EQ(third.status().code(), StatusCode::kDeadlineExceeded) << third.status().ToString();
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::printf("failover: the replica promoted %lld ms after the kill, both servers beating there after %lld ms; the "
              "waiter served %lld ms after the release\n", static_cast<long long>(ms(failover)),
              static_cast<long long>(ms(servers_back)), static_cast<long long>(ms(waiter_served)));
  EXPECT_LT(servers_back, 30s);
}

// A Redis Cluster of three primaries on loopback, reached through a redis-cluster:// URL:
// three pools, one on each primary, each with a remex-server; the farm is listed whole
// (every primary scanned), each pool's keys live on its own primary, runs lease a device
// of each pool, a waiter is woken on its pool's primary, an operator drains across the
// cluster, and the lease functions are loaded on every primary.
TEST_F(FarmTest, PoolsSpreadOverARedisClusterOfThreePrimaries) {
  const auto dir = std::filesystem::temp_directory_path() / ("remex_cluster_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove_all(p); }
  } remove_dir{dir};
  std::vector<std::unique_ptr<RedisProcess>> nodes;
  std::vector<std::unique_ptr<farm::RedisClient>> admin;
  for (int i = 0; i < 3; ++i) {
    // Each node's cluster bus listens on its port + 10000: a port with that one free too.
    const uint16_t port = testing::FreeClusterPort();
    ASSERT_NE(port, 0) << "no free port pair for a cluster node";
    nodes.push_back(std::make_unique<RedisProcess>(port, std::vector<std::string>{
        "--cluster-enabled", "yes", "--cluster-config-file", (dir / ("nodes" + std::to_string(i) + ".conf")).string(),
        "--cluster-node-timeout", "2000"}));
    ASSERT_TRUE(nodes.back()->ready()) << "the cluster node on port " << port << " did not start";
    auto c = farm::RedisClient::Connect(nodes.back()->url(), 2s);
    ASSERT_TRUE(c.ok());
    admin.push_back(std::move(c).value());
  }
  const int first_slot[3] = {0, 5461, 10923}, last_slot[3] = {5460, 10922, 16383};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(admin[i]->Execute({"CLUSTER", "ADDSLOTSRANGE", std::to_string(first_slot[i]), std::to_string(last_slot[i])}).ok());
  }
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(admin[0]->Execute({"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes[i]->port())}).ok());
  }
  auto cluster_ok = [&] {
    for (auto& a : admin) {
      auto info = a->Query({"CLUSTER", "INFO"});
      if (!info.ok() || info->str.find("cluster_state:ok") == std::string::npos ||
          info->str.find("cluster_known_nodes:3") == std::string::npos) {
        return false;
      }
    }
    return true;
  };
  for (int i = 0; i < 200 && !cluster_ok(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(cluster_ok()) << "the cluster did not form";
  const std::string url = "redis-cluster://127.0.0.1:" + std::to_string(nodes[0]->port());
  // A pool on each primary (its hash tag's slot in that primary's range).
  std::string pools[3];
  for (int k = 0; pools[0].empty() || pools[1].empty() || pools[2].empty(); ++k) {
    const std::string name = "pool" + std::to_string(k);
    const int slot = farm::ClusterSlot(farm::PoolKeyPrefix(name));
    for (int i = 0; i < 3; ++i) {
      if (slot >= first_slot[i] && slot <= last_slot[i] && pools[i].empty()) pools[i] = name;
    }
  }
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(std::vector<std::string>{"--farm", url, "--pool", pools[i]}));
    ASSERT_NE(servers.back()->port(), 0) << servers.back()->banner();
  }
  // Listed whole, each pool's record on its own primary.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitFor(url, servers[i]->address(), true, 10s)) << "not listed: " << servers[i]->address();
    EXPECT_EQ(admin[i]->Query({"EXISTS", farm::DeviceKey(pools[i], servers[i]->address())})->integer, 1) << pools[i];
    auto elsewhere = admin[(i + 1) % 3]->Query({"EXISTS", farm::DeviceKey(pools[i], servers[i]->address())});
    EXPECT_NE(elsewhere.status().message().find("MOVED"), std::string::npos) << elsewhere.status().ToString();
  }
  nlohmann::json list = FarmList(url);
  ASSERT_FALSE(list.is_null());
  EXPECT_EQ(list["devices"].size(), 3u) << list.dump();
  // A run leases a device of each pool.
  for (int i = 0; i < 3; ++i) {
    auto run = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool " + pools[i] + " --json 2>&1");
    EXPECT_EQ(run.exit_code, 0) << pools[i] << ": " << run.output;
  }
  // A waiter on pool 1, woken when the holder releases.
  auto parsed = farm::ParseRedisUrl(url);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  farm::LeaseRequest request;
  request.pool = pools[1];
  request.holder = "cluster-test";
  auto held = farm::LeaseHolder::Acquire(*parsed, request, 2s);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(admin[1]->Query({"EXISTS", farm::LeaseKey(pools[1], servers[1]->address())})->integer, 1);
  StatusOr<farm::Lease> waited = Unavailable("not run");
  std::thread waiter = WaitForLease(*parsed, request, 30s, 20s, waited);
  for (int i = 0; i < 200 && admin[1]->Query({"ZCARD", farm::QueueKey(pools[1])})->integer < 1; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE((*held)->Release().ok());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ(waited->device_id, servers[1]->address());
  EXPECT_LT(std::chrono::steady_clock::now() - released, 5s) << "the waiter was not woken";
  auto c = farm::RedisClient::Connect(*parsed, 2s);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(farm::ReleaseLease(**c, *waited).ok());
  // An operator drains a device of pool 2 through the cluster, and undrains it.
  auto drain = RunCommand(Cli() + " farm drain --farm " + url + " " + servers[2]->address() + " 2>&1");
  EXPECT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_EQ(admin[2]->Query({"EXISTS", farm::DrainKey(pools[2], servers[2]->address())})->integer, 1);
  EXPECT_EQ(RunCommand(Cli() + " farm undrain --farm " + url + " " + servers[2]->address()).exit_code, 0);
  // The lease functions go to every primary; leases then go through them on each.
  auto install = RunCommand(Cli() + " farm install-functions --farm " + url + " --farm-key-file " + FarmKeyFile() + " 2>&1");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  for (int i = 0; i < 3; ++i) {
    auto libs = admin[i]->Query({"FUNCTION", "LIST", "LIBRARYNAME", farm::kLeaseLibrary});
    ASSERT_TRUE(libs.ok());
    EXPECT_EQ(libs->array.size(), 1u) << "node " << i;
    EXPECT_EQ(RunCommand(Cli() + " farm lease --farm " + url + " --pool " + pools[i] + " -- true").exit_code, 0);
  }
}

// A `remex worker` process of pool "jobs" (killed with SIGKILL by Kill, else stopped with
// SIGTERM and reaped).
class WorkerProcess {
 public:
  WorkerProcess(const std::string& url, const std::string& name) {
    std::vector<std::string> args = {Cli(), "worker", "--farm", url, "--pool", "jobs", "--name", name, "--heartbeat", "0.5"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// Jobs that outlive their client: `job submit` returns an id at once and exits; a worker
// runs the job and records its result, queue time and run time; a worker killed mid-job
// (SIGKILL) loses the job to the queue and another worker finishes it; with no retries
// left the job fails naming the lost worker; queued and running jobs are cancelled. Every
// job ends in exactly one terminal state.
TEST_F(FarmTest, JobsOutliveTheirClientAndAKilledWorkersJobIsRetried) {
  const std::string url = redis_.url_text();
  ServerProcess a({"--farm", url, "--pool", "jobs"});
  ServerProcess b({"--farm", url, "--pool", "jobs"});  // a killed command's lease lapses; the retry takes the other
  ASSERT_NE(a.port(), 0) << a.banner();
  ASSERT_NE(b.port(), 0) << b.banner();
  auto submit = [&](const std::string& args) {
    auto r = RunCommand(Cli() + " job submit --farm " + url + " --pool jobs " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output.substr(0, r.output.find('\n'));
  };
  auto status = [&](const std::string& id) {
    auto r = RunCommand(Cli() + " job status " + id + " --json --farm " + url);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  };
  auto wait_running = [&](const std::string& id) {
    for (int i = 0; i < 200; ++i) {
      if (status(id)["state"] == "running") return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };
  const std::string slow_args = " -- --shape x=2x4 --repeat 30 --min-samples 30 --min-duration-s 0 --cooldown-ms 300";
  // A job submitted with no worker: queued, and its submitter gone.
  const std::string quick = submit(ModelFile() + " --command run -- --shape x=2x4");
  EXPECT_EQ(quick, "jobs/1");
  EXPECT_EQ(status(quick)["state"], "queued");
  // A queued job cancelled.
  const std::string dropped = submit(ModelFile() + slow_args);
  auto cancel = RunCommand(Cli() + " job cancel " + dropped + " --farm " + url + " 2>&1");
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
  EXPECT_EQ(status(dropped)["state"], "cancelled");
  EXPECT_EQ(RunCommand(Cli() + " job cancel " + dropped + " --farm " + url).exit_code, 2);  // ended already
  // A worker runs the queued job.
  auto w1 = std::make_unique<WorkerProcess>(url, "w1");
  auto wait = RunCommand(Cli() + " job wait " + quick + " --timeout 60 --json --farm " + url);
  ASSERT_EQ(wait.exit_code, 0) << wait.output;
  nlohmann::json done = nlohmann::json::parse(wait.output, nullptr, false);
  EXPECT_EQ(done["state"], "succeeded") << wait.output;
  EXPECT_EQ(done["attempts"], 1);
  EXPECT_EQ(done["worker"], "w1");
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_GE(done["queue_ms"].get<int64_t>(), 0);
  EXPECT_GE(done["run_ms"].get<int64_t>(), 0);
  EXPECT_TRUE(done["result"].is_object()) << wait.output;  // `remex run --json`'s report
  auto logs = RunCommand(Cli() + " job logs " + quick + " --farm " + url + " 2>&1");
  EXPECT_EQ(logs.exit_code, 0);
  EXPECT_NE(logs.output.find("attempt 1 on worker w1"), std::string::npos) << logs.output;
  // A long job whose worker is killed mid-run: back in the queue, finished by another.
  const std::string slow = submit(ModelFile() + slow_args);
  ASSERT_TRUE(wait_running(slow));
  w1->Kill();
  auto w2 = std::make_unique<WorkerProcess>(url, "w2");
  wait = RunCommand(Cli() + " job wait " + slow + " --timeout 120 --json --farm " + url);
  ASSERT_EQ(wait.exit_code, 0) << wait.output;
  done = nlohmann::json::parse(wait.output, nullptr, false);
  EXPECT_EQ(done["attempts"], 2) << wait.output;
  EXPECT_EQ(done["worker"], "w2");
  logs = RunCommand(Cli() + " job logs " + slow + " --farm " + url + " 2>&1");
  EXPECT_NE(logs.output.find("worker w1 was lost"), std::string::npos) << logs.output;
  // A running job cancelled: its worker stops the command.
  const std::string stopped = submit(ModelFile() + slow_args);
  ASSERT_TRUE(wait_running(stopped));
  EXPECT_EQ(RunCommand(Cli() + " job cancel " + stopped + " --farm " + url).exit_code, 0);
  wait = RunCommand(Cli() + " job wait " + stopped + " --timeout 60 --json --farm " + url);
  EXPECT_EQ(wait.exit_code, 1) << wait.output;
  EXPECT_EQ(nlohmann::json::parse(wait.output, nullptr, false)["state"], "cancelled") << wait.output;
  // No retries left: the job fails, naming the lost worker.
  const std::string fragile = submit("--retries 0 " + ModelFile() + slow_args);
  ASSERT_TRUE(wait_running(fragile));
  w2->Kill();
  WorkerProcess w3(url, "w3");
  wait = RunCommand(Cli() + " job wait " + fragile + " --timeout 60 --json --farm " + url);
  EXPECT_EQ(wait.exit_code, 1) << wait.output;
  done = nlohmann::json::parse(wait.output, nullptr, false);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_NE(done["error"].get<std::string>().find("no retries left"), std::string::npos) << wait.output;
  EXPECT_NE(done["error"].get<std::string>().find("w2"), std::string::npos) << wait.output;
  // A suite travels with the files its cases name, and runs on a worker elsewhere (here: a
  // folder of its own, the submitter's copy removed first).
  const auto suite_dir = std::filesystem::temp_directory_path() / ("remex_job_suite_" + std::to_string(getpid()));
  std::filesystem::create_directories(suite_dir / "models");
  std::filesystem::copy_file(ModelFile(), suite_dir / "models" / "relu.onnx",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(suite_dir / "suite.toml") << "name = \"jobsuite\"\n[[case]]\nname = \"relu\"\nmodel = \"models/relu.onnx\"\n"
                                             "shapes = [\"x=2x4\"]\nreference = \"cpu\"\n";
  const std::string suite = submit((suite_dir / "suite.toml").string());
  std::filesystem::remove_all(suite_dir);
  wait = RunCommand(Cli() + " job wait " + suite + " --timeout 60 --json --farm " + url);
  ASSERT_EQ(wait.exit_code, 0) << wait.output;
  done = nlohmann::json::parse(wait.output, nullptr, false);
  EXPECT_EQ(done["command"], "suite");
  EXPECT_EQ(done["result"]["suite"], "jobsuite") << wait.output;
  EXPECT_EQ(done["result"]["passed"], 1) << wait.output;
  // Every job in one terminal state, listed newest first.
  auto list = RunCommand(Cli() + " job list --pool jobs --json --farm " + url);
  ASSERT_EQ(list.exit_code, 0) << list.output;
  nlohmann::json jobs = nlohmann::json::parse(list.output, nullptr, false)["jobs"];
  ASSERT_EQ(jobs.size(), 6u) << list.output;
  std::map<std::string, std::string> states;
  for (const auto& j : jobs) states[j["id"]] = j["state"];
  EXPECT_EQ(states, (std::map<std::string, std::string>{{quick, "succeeded"}, {dropped, "cancelled"}, {slow, "succeeded"},
                                                        {stopped, "cancelled"}, {fragile, "failed"}, {suite, "succeeded"}}));
  EXPECT_EQ(jobs[0]["id"], suite);
}

// A farm for the job tests that kill Redis: a Redis with an append-only file synced at every
// write (in a folder of its own, removed after) and two servers in pool "jobs".
struct JobFarm {
  // A new folder of the system's temporary one.
  static std::filesystem::path NewDir(const std::string& name) {
    const auto d = std::filesystem::temp_directory_path() / ("remex_" + name + "_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }
  explicit JobFarm(const std::string& name)
      : dir(NewDir(name)),
        aof({"--appendonly", "yes", "--appendfsync", "always", "--dir", dir.string()}),
        redis(std::make_unique<RedisProcess>(aof)),
        url("redis://127.0.0.1:" + std::to_string(redis->port())),
        a({"--farm", url, "--pool", "jobs"}),
        b({"--farm", url, "--pool", "jobs"}) {}
  ~JobFarm() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  bool ready() const { return redis->ready() && a.port() != 0 && b.port() != 0; }
  // `remex job submit` of `args` to pool "jobs": the job's id.
  std::string Submit(const std::string& args) const {
    auto r = RunCommand(Cli() + " job submit --farm " + url + " --pool jobs " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output.substr(0, r.output.find('\n'));
  }
  // SIGKILL, then, after `down`, a Redis again on the same port from its append-only file.
  bool KillRedisAndRestart(std::chrono::milliseconds down) {
    const uint16_t port = redis->port();
    redis->Kill();
    std::this_thread::sleep_for(down);
    redis = std::make_unique<RedisProcess>(port, aof);
    return redis->ready();
  }

  const std::filesystem::path dir;
  const std::vector<std::string> aof;
  std::unique_ptr<RedisProcess> redis;
  const std::string url;
  ServerProcess a, b;
};

// Redis killed (SIGKILL) while a job runs and another waits, then started again from its
// append-only file on the same port: both jobs succeed, each ending once; the running one
// on its first attempt (its heartbeat resumes on the restarted Redis) or, when its
// command failed for want of Redis (exit 3), on a retry.
TEST_F(FarmTest, JobsSurviveARedisRestartFromItsAppendOnlyFile) {
  JobFarm jobs_farm("aof");
  ASSERT_TRUE(jobs_farm.ready());
  const std::string& url = jobs_farm.url;
  const std::string slow_args = " -- --shape x=2x4 --repeat 20 --min-samples 20 --min-duration-s 0 --cooldown-ms 300";
  const std::string running = jobs_farm.Submit(ModelFile() + slow_args);
  const std::string waiting = jobs_farm.Submit(ModelFile() + " --command run -- --shape x=2x4");
  WorkerProcess worker(url, "w1");
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    auto r = RunCommand(Cli() + " job status " + running + " --json --farm " + url);
    started = nlohmann::json::parse(r.output, nullptr, false)["state"] == "running";
    if (!started) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(started);
  ASSERT_TRUE(jobs_farm.KillRedisAndRestart(1s)) << "Redis did not start again";
  for (const std::string& id : {running, waiting}) {
    auto r = RunCommand(Cli() + " job wait " + id + " --timeout 120 --json --farm " + url);
    nlohmann::json job = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(job.is_discarded()) << id << ": " << r.output;
    const std::string log = RunCommand(Cli() + " job logs " + id + " --farm " + url + " 2>&1").output;
    // Its first attempt runs on, or (when its command was leasing as Redis died, exit 3)
    // it is retried: either way it succeeds, once.
    EXPECT_EQ(job["state"], "succeeded") << r.output << log;
    EXPECT_GE(job["attempts"].get<int>(), 1) << log;
    EXPECT_LE(job["attempts"].get<int>(), 3) << log;
  }
  auto list = RunCommand(Cli() + " job list --pool jobs --json --farm " + url);
  nlohmann::json jobs = nlohmann::json::parse(list.output, nullptr, false)["jobs"];
  ASSERT_EQ(jobs.size(), 2u) << list.output;
}

// Workers and Redis killed at random moments (a seeded schedule, printed): six jobs, two
// workers killed with SIGKILL and replaced, Redis killed once and started again from its
// append-only file, a `job wait` client killed; every job ends in exactly one terminal
// state (one end in its log), with its result when it succeeded and the reason when not,
// within its attempts.
TEST_F(FarmTest, JobsEndOnceWhateverIsKilledWhen) {
  JobFarm jobs_farm("chaos");
  ASSERT_TRUE(jobs_farm.ready());
  const std::string& url = jobs_farm.url;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    const std::string args = i % 3 == 2 ? " --command run -- --shape x=2x4"
                                        : " -- --shape x=2x4 --repeat 10 --min-samples 10 --min-duration-s 0 --cooldown-ms 150";
    ids.push_back(jobs_farm.Submit(ModelFile() + args));
  }
  const unsigned seed = static_cast<unsigned>(::testing::UnitTest::GetInstance()->random_seed()) + 7;
  std::printf("kill schedule seed %u\n", seed);
  std::mt19937 rng(seed);
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  int named = 0;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<WorkerProcess>(url, "w" + std::to_string(++named)));
  bool redis_killed = false;
  auto ended = [&] {
    auto list = RunCommand(Cli() + " job list --pool jobs --json --farm " + url);
    nlohmann::json j = nlohmann::json::parse(list.output, nullptr, false);
    if (j.is_discarded()) return false;
    size_t n = 0;
    for (const auto& job : j["jobs"]) n += job["state"] == "succeeded" || job["state"] == "failed" || job["state"] == "cancelled";
    return n == ids.size();
  };
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until && !ended()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 1200));
    const unsigned action = rng() % 4;
    if (action == 0) {  // a worker dies; another starts
      auto& w = workers[rng() % workers.size()];
      w->Kill();
      w = std::make_unique<WorkerProcess>(url, "w" + std::to_string(++named));
    } else if (action == 1 && !redis_killed) {  // Redis dies, and comes back from its file
      redis_killed = true;
      ASSERT_TRUE(jobs_farm.KillRedisAndRestart(std::chrono::milliseconds(200 + rng() % 800))) << "Redis did not start again";
    } else if (action == 2) {  // a client waiting on a job is killed
      RunCommand("timeout -s KILL 0.3 " + Cli() + " job wait " + ids[rng() % ids.size()] + " --farm " + url + " > /dev/null");
    }
  }
  auto client = farm::RedisClient::Connect(jobs_farm.redis->url(), 2s);
  ASSERT_TRUE(client.ok());
  for (const std::string& id : ids) {
    auto r = RunCommand(Cli() + " job wait " + id + " --timeout 120 --json --farm " + url);
    nlohmann::json job = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(job.is_discarded()) << id << ": " << r.output;
    const std::string log = RunCommand(Cli() + " job logs " + id + " --farm " + url + " 2>&1").output;
    if (job["state"] == "succeeded") {
      EXPECT_TRUE(job["result"].is_object()) << r.output;
    } else {
      EXPECT_EQ(job["state"], "failed") << r.output;
      EXPECT_FALSE(job["error"].get<std::string>().empty()) << r.output;
    }
    EXPECT_LE(job["attempts"].get<int>(), 3) << log;
    auto entries = farm::ReadJobLog(**client, id, "0", 100000, 0ms);
    ASSERT_TRUE(entries.ok()) << entries.status().ToString();
    int ends = 0;
    for (const auto& e : *entries) ends += static_cast<int>(e.fields.count("end"));
    EXPECT_EQ(ends, 1) << id << " ended " << ends << " times:\n" << log;
  }
}

// A farm with a farm key: a lease granted through the lease functions is honoured by a
// server given the key; a lease record written around them is refused, whether it copies
// every field of a real one with the writer's own key pair or copies a real MAC too.
TEST_F(FarmTest, OnlyLeaseRecordsSignedWithTheFarmKeyAreHonoured) {
  const std::string url = redis_.url_text();
  const std::string key_file = FarmKeyFile();
  auto install = RunCommand(Cli() + " farm install-functions --farm " + url + " --farm-key-file " + key_file + " 2>&1");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  ServerProcess server({"--farm", url, "--pool", "signed", "--farm-key-file", key_file});
  ASSERT_NE(server.port(), 0) << server.banner();
  auto run = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool signed --json 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // A real record, taken while a lease holds, to copy from.
  auto writer = farm::RedisClient::Connect(Url(redis_), 2s);
  ASSERT_TRUE(writer.ok());
  const std::string lease_key = farm::LeaseKey("signed", server.address());
  std::map<std::string, std::string> real;
  {
    auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("signed"), 2s);
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    client::ConnectOptions options;
    options.token = (*holder)->lease().token;
    auto session = client::Session::Connect("127.0.0.1", server.port(), options);
    ASSERT_TRUE(session.ok()) << session.status().ToString();  // honoured
    auto all = (*writer)->Query({"HGETALL", lease_key});
    ASSERT_TRUE(all.ok());
    for (size_t i = 0; i + 1 < all->array.size(); i += 2) real[all->array[i].str] = all->array[i + 1].str;
  }
  ASSERT_TRUE(real.count("mac")) << "the lease was not granted through the lease functions";
  auto attacker = rpc::NewLeaseKeyPair();
  ASSERT_TRUE(attacker.ok());
  // The writer's own record for the idle device: every field of the real one (its MAC
  // included), its own key, a fresh since_ms; then the real one with only the key swapped.
  std::map<std::string, std::string> fresh = real, swapped = real;
  fresh["key"] = swapped["key"] = rpc::ToHex(attacker->public_key);
  fresh["since_ms"] = std::to_string(farm::UnixMillis());
  fresh["expires_ms"] = std::to_string(farm::UnixMillis() + 30000);
  for (const auto& forged : {fresh, swapped}) {
    std::vector<std::string> args = {"HSET", lease_key};
    for (const auto& [f, v] : forged) {
      args.push_back(f);
      args.push_back(v);
    }
    ASSERT_TRUE((*writer)->Execute({"DEL", lease_key}).ok());
    ASSERT_TRUE((*writer)->Execute(args).ok());
    ASSERT_TRUE((*writer)->Execute({"PEXPIRE", lease_key, "30000"}).ok());
    client::ConnectOptions options;
    options.token = attacker->secret;
    auto session = client::Session::Connect("127.0.0.1", server.port(), options);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::kPermissionDenied) << session.status().ToString();
    EXPECT_NE(session.status().message().find("not signed by the farm key"), std::string::npos)
        << session.status().ToString();
  }
  // The forged record does not keep the device from honest clients: the assignment
  // deletes it and grants the device.
  auto again = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool signed --json 2>&1");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  // A key file readable by others, or too short, is refused.
  const std::string loose = ::testing::TempDir() + "/loose.key";
  { std::ofstream(loose) << std::string(40, 'k'); }
  std::filesystem::permissions(loose, std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  auto bad = RunCommand(std::string(REMEX_SERVER_BIN) + " --listen 127.0.0.1:0 --farm " + url +
                        " --farm-key-file " + loose + " 2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("chmod 600"), std::string::npos) << bad.output;
}

// 20 clients, 3 devices: every client is served, no device ever has two holders at
// once, and leases are granted in the order the clients queued.
TEST_F(FarmTest, ContendedLeasesAreExclusiveAndFirstComeFirstServed) {
  const std::string url = redis_.url_text();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<ServerProcess>(std::vector<std::string>{"--farm", url, "--pool", "fair"}));
  constexpr int kClients = 20;
  std::mutex mu;
  std::map<std::string, int> holders;  // device -> holders now
  int overlaps = 0;
  std::vector<farm::Lease> leases(kClients);
  std::vector<Status> errors(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto holder = farm::LeaseHolder::Acquire(Url(redis_), Request("fair", 60s), 5s);
      if (!holder.ok()) {
        errors[i] = holder.status();
        return;
      }
      const farm::Lease& lease = (*holder)->lease();
      {
        std::lock_guard<std::mutex> lock(mu);
        if (++holders[lease.device_id] > 1) ++overlaps;
      }
      // The lease works: a session on the device with its token.
      client::ConnectOptions options;
      options.token = lease.token;
      uint16_t port = static_cast<uint16_t>(std::stoi(lease.device_id.substr(lease.device_id.rfind(':') + 1)));
      auto session = client::Session::Connect("127.0.0.1", port, options);
      errors[i] = session.status();
      std::this_thread::sleep_for(30ms);
      {
        std::lock_guard<std::mutex> lock(mu);
        --holders[lease.device_id];
      }
      leases[i] = lease;
      if (errors[i].ok()) errors[i] = (*holder)->Release();
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) ASSERT_TRUE(errors[i].ok()) << i << ": " << errors[i].ToString();
  EXPECT_EQ(overlaps, 0);
  std::sort(leases.begin(), leases.end(), [](const farm::Lease& a, const farm::Lease& b) { return a.ticket < b.ticket; });
  for (int i = 1; i < kClients; ++i) {
    EXPECT_EQ(leases[i].serial, leases[i - 1].serial + 1)
        << "ticket " << leases[i].ticket << " was not served right after ticket " << leases[i - 1].ticket;
  }
}

TEST_F(FarmTest, DrainedDevicesAreNotLeased) {
  const std::string url = redis_.url_text();
  ServerProcess server({"--farm", url});
  auto drain = RunCommand(Cli() + " farm drain --farm " + url + " " + server.address());
  ASSERT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_EQ(Device(FarmList(url), server.address())["state"], "draining");
  auto refused = RunCommand(Cli() + " run " + Model() + " --farm " + url + " 2>&1");
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  ASSERT_EQ(RunCommand(Cli() + " farm undrain --farm " + url + " " + server.address()).exit_code, 0);
  EXPECT_EQ(RunCommand(Cli() + " run " + Model() + " --farm " + url).exit_code, 0);
  auto unknown = RunCommand(Cli() + " farm drain --farm " + url + " 127.0.0.1:1 2>&1");
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_NE(unknown.output.find("no registered device '127.0.0.1:1'"), std::string::npos) << unknown.output;
}

// Health: a server runs its self-test at start; one that fails it joins the pool
// quarantined, with the reason listed, and is not leased. A healthy one says "ok".
TEST_F(FarmTest, ADeviceFailingItsSelfTestIsQuarantined) {
  const std::string url = redis_.url_text();
  ServerProcess sick({"--farm", url, "--pool", "q", "--inject-self-test-failure"});
  ServerProcess well({"--farm", url, "--pool", "ok"});
  const nlohmann::json status = FarmList(url);
  const nlohmann::json s = Device(status, sick.address());
  ASSERT_FALSE(s.is_null()) << status.dump(2);
  EXPECT_EQ(s["state"], "quarantined");
  EXPECT_NE(s["health"].get<std::string>().find("self-test: cpu computes"), std::string::npos) << s.dump(2);
  EXPECT_EQ(Device(status, well.address())["health"], "ok");
  auto text = RunCommand(Cli() + " farm status --farm " + url);
  EXPECT_NE(text.output.find("quarantined (self-test"), std::string::npos) << text.output;
  auto refused = RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool q --lease-wait 1 2>&1");
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("became free within"), std::string::npos) << refused.output;
  EXPECT_EQ(RunCommand(Cli() + " run " + Model() + " --farm " + url + " --pool ok").exit_code, 0);
}

// `remex suite`: five cases over three leased devices at once; the JUnit report, the
// JSON and the exit status say which passed, which failed (a wrong reference, a median
// over its limit) and which could not run (a missing input file).
TEST_F(FarmTest, ASuiteIsShardedOverLeasedDevicesWithAJUnitReport) {
  const std::string url = redis_.url_text();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(std::vector<std::string>{"--farm", url, "--pool", "suite"}));
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("remex_suite_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "wrong" / "inputs");
  ASSERT_TRUE(testing::AddReluModel().Save((dir / "add_relu.onnx").string()));
  // A reference that does not hold: y = Relu(x + b) is never -1.
  ASSERT_TRUE(npy::Write((dir / "wrong" / "inputs" / "x.npy").string(), testing::Floats({2, 4}, std::vector<float>(8, 1))).ok());
  ASSERT_TRUE(npy::Write((dir / "wrong" / "y.npy").string(), testing::Floats({2, 4}, std::vector<float>(8, -1))).ok());
  {
    std::ofstream baseline(dir / "baseline.json");
    baseline << R"({"stats": {"median_ms": 100000}})";
  }
  std::ofstream(dir / "suite.toml") << R"(name = "farm-suite"
[[case]]
name = "against-cpu"
model = "add_relu.onnx"
shapes = ["x=2x4"]
reference = "cpu"

[[case]]
name = "wrong-reference"
model = "add_relu.onnx"
reference = "wrong"

[[case]]
name = "too-slow"
model = "add_relu.onnx"
shapes = ["x=2x4"]
[case.bench]
repeat = 3
median_ms_max = 0.000001

[[case]]
name = "fast-enough"
model = "add_relu.onnx"
shapes = ["x=64x4"]
reference = "cpu"
[case.bench]
repeat = 3
median_ms_max = 10000
baseline = "baseline.json"
max_regression = 0.1

[[case]]
name = "missing-input"
model = "add_relu.onnx"
inputs = ["x=nowhere.npy"]
)";
  const std::string junit = (dir / "report.xml").string();
  auto r = RunCommand(Cli() + " suite " + (dir / "suite.toml").string() + " --farm " + url +
                      " --pool suite --lease-wait 60 --jobs 3 --json --junit " + junit + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["passed"], 2) << j.dump(2);
  EXPECT_EQ(j["failed"], 2) << j.dump(2);
  EXPECT_EQ(j["errors"], 1) << j.dump(2);
  std::map<std::string, nlohmann::json> by_name;
  std::set<std::string> devices;
  for (const auto& c : j["cases"]) {
    by_name[c["name"]] = c;
    const std::string device = c["device"];
    if (!device.empty()) devices.insert(device.substr(0, device.find(' ')));
  }
  EXPECT_EQ(by_name["against-cpu"]["outcome"], "passed");
  EXPECT_EQ(by_name["wrong-reference"]["outcome"], "failed");
  EXPECT_NE(by_name["wrong-reference"]["message"].get<std::string>().find("output 'y': mismatch"), std::string::npos);
  EXPECT_EQ(by_name["too-slow"]["outcome"], "failed");
  EXPECT_NE(by_name["too-slow"]["message"].get<std::string>().find("above the limit"), std::string::npos);
  EXPECT_EQ(by_name["fast-enough"]["outcome"], "passed");
  EXPECT_EQ(by_name["fast-enough"]["baseline_median_ms"], 100000);
  EXPECT_EQ(by_name["missing-input"]["outcome"], "error");
  EXPECT_NE(by_name["missing-input"]["message"].get<std::string>().find("nowhere.npy"), std::string::npos);
  // Every case ran on a leased farm device, more than one of them at once.
  EXPECT_GE(devices.size(), 2u);
  for (const std::string& d : devices) EXPECT_NE(d.find("127.0.0.1:"), std::string::npos) << d;
  // The JUnit file, as CI servers read it.
  const std::string xml = remex::testing::ReadText(junit);
  EXPECT_NE(xml.find("<testsuite name=\"farm-suite\" tests=\"5\" failures=\"2\" errors=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase classname=\"farm-suite\" name=\"against-cpu\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure message=\"output &apos;y&apos;: mismatch"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<error message="), std::string::npos) << xml;
  // The devices went back to the pool.
  for (const auto& s : servers) EXPECT_EQ(Device(FarmList(url), s->address())["state"], "idle");
  // Without --farm: the embedded CPU server; a suite whose cases all pass exits 0.
  std::ofstream(dir / "ok.toml") << "[[case]]\nname = \"a\"\nmodel = \"add_relu.onnx\"\nshapes = [\"x=1x4\"]\n"
                                     "reference = \"cpu\"\n";
  auto ok = RunCommand(Cli() + " suite " + (dir / "ok.toml").string() + " 2>&1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("1 passed, 0 failed, 0 errors"), std::string::npos) << ok.output;
  // A suite file with an unknown key is a usage error naming it.
  std::ofstream(dir / "bad.toml") << "[[case]]\nname = \"a\"\nmodel = \"add_relu.onnx\"\nrtoll = 1\n";
  auto bad = RunCommand(Cli() + " suite " + (dir / "bad.toml").string() + " 2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown key 'rtoll'"), std::string::npos) << bad.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace remex
