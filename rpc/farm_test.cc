// The device farm's registry (rpc/farm.h): URL and label parsing, and the Redis client
// and registration against a real redis-server on loopback (rpc/redis_test_util.h).

#include "rpc/farm.h"
#include "rpc/farm_lease.h"
#include "rpc/auth.h"

#include <gtest/gtest.h>

#include <sstream>

#include <chrono>
#include <set>
#include <thread>

#include "rpc/redis_test_util.h"

namespace remex::farm {
namespace farm_test {

using namespace std::chrono_literals;

TEST(FarmUrlTest, ParsesRedisUrls) {
  auto u = ParseRedisUrl("redis://127.0.0.1:6380/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  u = ParseRedisUrl("redis://farm.example");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->db, 0);
  u = ParseRedisUrl("redis://[::1]:7000");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->ToString(), "redis://[::1]:7000/0");
  for (const char* bad : {"http://host:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:65536", "redis://h:x",
                          "redis://h:", "redis://h:1/16", "redis://h:1/a", "redis://user:pw@h:1", "redis://@h:1", "redis://us er@h:1", "redis://[::1"}) {
    auto r = ParseRedisUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  // A user takes its password from REMEX_FARM_PASSWORD, never from the URL; it is never
  // printed.
  unsetenv(kFarmPasswordEnv);
  u = ParseRedisUrl("redis://ci@h:1");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("REMEX_FARM_PASSWORD"), std::string::npos) << u.status().message();
  setenv(kFarmPasswordEnv, "s3cret-pw", 1);
  u = ParseRedisUrl("redis://ci-runner@h:1/3");
  unsetenv(kFarmPasswordEnv);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "ci-runner");
  EXPECT_EQ(u->password, "s3cret-pw");
  EXPECT_EQ(u->host, "h");
  EXPECT_EQ(u->ToString(), "redis://ci-runner@h:1/3");
}

TEST(FarmUrlTest, ParsesSentinelAndClusterUrls) {
  auto u = ParseRedisUrl("redis-sentinel://s1:26380,[::1],s3/farm-main/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->sentinels.size(), 3u);
  EXPECT_EQ(u->sentinels[0], (std::pair<std::string, uint16_t>{"s1", 26380}));
  EXPECT_EQ(u->sentinels[1], (std::pair<std::string, uint16_t>{"::1", 26379}));
  EXPECT_EQ(u->master, "farm-main");
  EXPECT_EQ(u->db, 2);
  EXPECT_TRUE(u->host.empty());
  EXPECT_EQ(u->ToString(), "redis-sentinel://s1:26380,[::1]:26379,s3:26379/farm-main/2");
  u = ParseRedisUrl("redis-cluster://a:7000,b");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->cluster.size(), 2u);
  EXPECT_EQ(u->cluster[1], (std::pair<std::string, uint16_t>{"b", 6379}));
  EXPECT_EQ(u->ToString(), "redis-cluster://a:7000,b:6379");
  std::string seventeen = "redis-cluster://";
  for (int i = 0; i < 17; ++i) seventeen += (i ? ",h" : "h") + std::to_string(i);
  for (const std::string& bad : std::vector<std::string>{"redis-sentinel://s1", "redis-sentinel://s1/", "redis-sentinel://s1/bad name",
                                "redis-sentinel://s1,,s2/m", "redis-sentinel://s1:0/m", "redis-cluster://a:1/1",
                                "redis-cluster://", "redis-cluster://a,:1", seventeen}) {
    auto r = ParseRedisUrl(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The slot of a key: that of its hash tag (the examples of the Redis Cluster spec).
  EXPECT_EQ(ClusterSlot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(ClusterSlot("{user1000}.following"), ClusterSlot("user1000"));
  EXPECT_EQ(ClusterSlot("foo{}{bar}"), ClusterSlot("foo{}{bar}"));
  EXPECT_NE(ClusterSlot("foo{}{bar}"), ClusterSlot("bar"));
  EXPECT_EQ(ClusterSlot(PoolKeyPrefix("p") + "device:x"), ClusterSlot(PoolKeyPrefix("p") + "waiting"));
}

TEST(FarmLabelsTest, ParsesAndFormatsLabels) {
  auto l = ParseLabels("gpu=h100,cuda=13.0,rack=b/7,spare=");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->size(), 4u);
  EXPECT_EQ(l->at("cuda"), "13.0");
  EXPECT_EQ(l->at("spare"), "");
  EXPECT_EQ(FormatLabels(*l), "cuda=13.0,gpu=h100,rack=b/7,spare=");
  EXPECT_TRUE(ParseLabels("")->empty());
  for (const char* bad : {"gpu", "=x", "gpu=h100,gpu=a100", "g pu=1", "gpu=h 100", "a=1,,b=2", "k=v;rm"}) {
    auto r = ParseLabels(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  EXPECT_FALSE(ParseLabels(many).ok());
  EXPECT_FALSE(ParseLabels(std::string(65, 'k') + "=v").ok());
}

TEST(FarmSelectorTest, MatchesLabelsVersionsPresenceAndRecordFields) {
  DeviceRecord d;
  d.pool = "h100";
  d.kind = "cuda";
  d.labels = {{"gpu", "h100"}, {"cuda", "12.4"}, {"driver", "580.159.04"}, {"os", "debian"}};
  auto match = [&](const char* text) {
    auto s = ParseLabelSelector(text);
    EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
    return s.ok() && s->Matches(d);
  };
  EXPECT_TRUE(match(""));
  EXPECT_TRUE(match("gpu=h100"));
  EXPECT_FALSE(match("gpu=a100"));
  EXPECT_TRUE(match("gpu!=a100"));
  EXPECT_TRUE(match("rack!=b7"));  // Absent: != holds.
  EXPECT_TRUE(match("cuda>=12"));
  EXPECT_TRUE(match("cuda>=12.4"));
  EXPECT_FALSE(match("cuda>12.4"));
  EXPECT_TRUE(match("cuda>12.3.9"));
  EXPECT_TRUE(match("cuda<13"));
  EXPECT_FALSE(match("cuda<=12.3"));
  EXPECT_TRUE(match("driver>=580.100"));  // 159 > 100 as numbers, not as text.
  EXPECT_FALSE(match("os>=1"));           // Not a version: no order.
  EXPECT_FALSE(match("rack>=1"));         // Absent.
  EXPECT_TRUE(match("os"));
  EXPECT_FALSE(match("maintenance"));
  EXPECT_TRUE(match("!maintenance"));
  EXPECT_FALSE(match("!os"));
  EXPECT_TRUE(match("pool=h100,kind=cuda,gpu=h100,cuda>=12,!maintenance"));
  EXPECT_FALSE(match("pool=h100,kind=cpu"));
  for (const char* bad : {"cuda>=x", "gpu==h100", "=h100", "gpu=h 100", "a,,b", "cuda>", "!"}) {
    auto s = ParseLabelSelector(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

DeviceRecord Record(const std::string& id, const std::string& pool) {
  DeviceRecord d;
  d.id = id;
  d.pool = pool;
  d.labels = {{"gpu", "none"}, {"rack", "a1"}};
  d.kind = "cpu";
  d.device = "cpu";
  d.description = "test CPU, 2 compute threads";
  d.memory_bytes = uint64_t{24} << 30;
  d.version = "0.1.0";
  d.registered_ms = UnixMillis();
  d.heartbeat_ms = d.registered_ms;
  return d;
}

class FarmRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.ready()) << "redis-server did not start (scripts/setup-deps.sh installs it)";
    auto c = RedisClient::Connect(redis_.url(), 2s);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }
  remex::testing::RedisProcess redis_;
  std::unique_ptr<RedisClient> client_;
};

TEST_F(FarmRedisTest, WritesListsRefreshesAndExpiresRecords) {
  const DeviceRecord a = Record("127.0.0.1:9001", "gpus"), b = Record("127.0.0.1:9002", "cpus");
  ASSERT_TRUE(client_->WriteDevice(a, 10s).ok());
  ASSERT_TRUE(client_->WriteDevice(b, 300ms).ok());
  auto list = client_->ListDevices();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, b.id);  // by pool: cpus before gpus
  const DeviceRecord& got = (*list)[1];
  EXPECT_EQ(got.pool, "gpus");
  EXPECT_EQ(got.labels, a.labels);
  EXPECT_EQ(got.memory_bytes, a.memory_bytes);
  EXPECT_EQ(got.description, a.description);
  EXPECT_EQ(got.state, DeviceState::kIdle);
  EXPECT_EQ(got.registered_ms, a.registered_ms);
  // A refresh moves the heartbeat; b, not refreshed, expires.
  ASSERT_TRUE(client_->RefreshDevice(a.pool, a.id, a.heartbeat_ms + 1234, 10s).ok());
  std::this_thread::sleep_for(600ms);
  list = client_->ListDevices();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].heartbeat_ms, a.heartbeat_ms + 1234);
  Status gone = client_->RefreshDevice(b.pool, b.id, UnixMillis(), 10s);
  EXPECT_EQ(gone.code(), StatusCode::kNotFound) << gone.ToString();
  // Nothing of b came back half-written.
  EXPECT_EQ(client_->ListDevices()->size(), 1u);
  ASSERT_TRUE(client_->RemoveDevice(a.pool, a.id).ok());
  EXPECT_TRUE(client_->ListDevices()->empty());
  EXPECT_TRUE(client_->RemoveDevice(a.pool, a.id).ok());  // Removing nothing is fine.
}

TEST_F(FarmRedisTest, MalformedRecordsAreSkippedAndNamed) {
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9003", "p"), 10s).ok());
  // A record with an unknown state, one missing fields, one whose id is not its key, and
  // a key of another type under the prefix.
  ASSERT_TRUE(client_->Execute({"HSET", DeviceKey("p", "bad-state"), "id", "bad-state", "pool", "p", "labels", "",
                                "kind", "cpu", "device", "cpu", "description", "", "memory_bytes", "1", "version",
                                "0", "state", "on-fire", "registered_ms", "1", "heartbeat_ms", "1", "health", "ok"})
                  .ok());
  ASSERT_TRUE(client_->Execute({"HSET", DeviceKey("p", "partial"), "id", "partial"}).ok());
  ASSERT_TRUE(client_->Execute({"HSET", DeviceKey("p", "other"), "id", "someone-else", "pool", "p", "labels", "", "kind",
                                "cpu", "device", "cpu", "description", "", "memory_bytes", "1", "version", "0",
                                "state", "idle", "registered_ms", "1", "heartbeat_ms", "1", "health", "ok"})
                  .ok());
  ASSERT_TRUE(client_->Execute({"SET", DeviceKey("p", "not-a-hash"), "x"}).ok());
  std::vector<std::string> skipped;
  auto list = client_->ListDevices(&skipped);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "127.0.0.1:9003");
  ASSERT_EQ(skipped.size(), 4u);
  std::string all;
  for (const auto& s : skipped) all += s + "\n";
  EXPECT_NE(all.find("on-fire"), std::string::npos) << all;
  EXPECT_NE(all.find("no field"), std::string::npos) << all;
  EXPECT_NE(all.find("do not match the key"), std::string::npos) << all;
  EXPECT_NE(all.find("WRONGTYPE"), std::string::npos) << all;
}

TEST_F(FarmRedisTest, RegistrationKeepsTheRecordAliveAndRemovesItOnStop) {
  Registration::Options o;
  o.interval = 100ms;
  o.ttl = 1000ms;  // Ten beats: a loaded machine delaying one beat does not expire it.
  auto reg = Registration::Start(redis_.url(), Record("127.0.0.1:9004", "p"), o);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  auto first = client_->ListDevices();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  // Several TTLs later it is still there, its heartbeat moving.
  std::this_thread::sleep_for(1200ms);
  auto later = client_->ListDevices();
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->size(), 1u);
  EXPECT_GT((*later)[0].heartbeat_ms, (*first)[0].heartbeat_ms);
  EXPECT_EQ((*later)[0].registered_ms, (*first)[0].registered_ms);
  // Deleted behind its back (as when Redis restarts empty): written again at the next beat.
  ASSERT_TRUE(client_->RemoveDevice("p", "127.0.0.1:9004").ok());
  std::this_thread::sleep_for(400ms);
  ASSERT_EQ(client_->ListDevices()->size(), 1u);
  // Redis goes away and comes back empty on the same port: the registration reconnects
  // at a later beat and writes the record again.
  const uint16_t port = redis_.url().port;
  client_.reset();
  redis_.Stop();
  std::this_thread::sleep_for(300ms);
  remex::testing::RedisProcess again(port);
  ASSERT_TRUE(again.ready());
  auto fresh = RedisClient::Connect(again.url(), 2s);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  bool back = false;
  for (int i = 0; i < 40 && !back; ++i) {
    std::this_thread::sleep_for(100ms);
    auto list = (*fresh)->ListDevices();
    back = list.ok() && list->size() == 1;
  }
  EXPECT_TRUE(back) << "not registered again within 4 s of Redis coming back";
  (*reg)->Stop();
  EXPECT_TRUE((*fresh)->ListDevices()->empty());
}

// ---------------------------------------------------------------------------------------
// Leases (rpc/farm_lease.h), against a real redis-server with records written directly.

LeaseRequest Request(std::string pool, std::string selector = "", std::chrono::milliseconds wait = 0ms) {
  LeaseRequest r;
  r.pool = std::move(pool);
  r.selector = std::move(selector);
  r.wait = wait;
  r.holder = "farm_test";
  return r;
}

TEST_F(FarmRedisTest, LeasesAreExclusiveRenewableAndReleased) {
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9101", "p"), 60s).ok());
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9102", "p"), 60s).ok());
  auto a = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->device_id, "127.0.0.1:9101");  // the first free device by id
  EXPECT_EQ(b->device_id, "127.0.0.1:9102");
  // The lease's secret is an Ed25519 key the client made; Redis holds its public key only.
  EXPECT_TRUE(rpc::IsLeaseSecret(a->token));
  EXPECT_NE(a->token, b->token);
  EXPECT_EQ(rpc::ToHex(*CurrentLeaseKey(*client_, "p", a->device_id)), a->public_key);
  EXPECT_EQ(*CurrentLeaseKey(*client_, "p", a->device_id), *rpc::LeasePublicKey(a->token));
  auto record = client_->Query({"HGETALL", LeaseKey("p", a->device_id)});
  ASSERT_TRUE(record.ok());
  for (const RedisValue& v : record->array) {
    EXPECT_EQ(v.str.find(a->token.substr(rpc::kLeaseSecretPrefix.size())), std::string::npos) << v.str;
  }
  // Both taken: a third client, not waiting, is told how things stand.
  auto c = AcquireLease(*client_, Request("p"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find("0 waiting ahead, 2 devices match"), std::string::npos) << c.status().message();
  // The listing shows the holder, never the token.
  auto list = client_->ListDevices();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)[0].leased);
  EXPECT_EQ((*list)[0].holder, "farm_test");
  EXPECT_TRUE(RenewLease(*client_, *a).ok());
  ASSERT_TRUE(ReleaseLease(*client_, *a).ok());
  EXPECT_EQ(*CurrentLeaseKey(*client_, "p", a->device_id), "");
  Status renew = RenewLease(*client_, *a);
  EXPECT_EQ(renew.code(), StatusCode::kAborted) << renew.ToString();
  EXPECT_TRUE(ReleaseLease(*client_, *a).ok());  // releasing twice is harmless
  c = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->device_id, a->device_id);
  // Releasing an old lease does not end the new one of the same device.
  ASSERT_TRUE(ReleaseLease(*client_, *a).ok());
  EXPECT_EQ(rpc::ToHex(*CurrentLeaseKey(*client_, "p", c->device_id)), c->public_key);
}

// A lease record that is not one a lessee writes is refused (FAILED_PRECONDITION naming
// the fault), never read past its bounds.
TEST_F(FarmRedisTest, MalformedLeaseRecordsAreRefused) {
  const std::string key = LeaseKey("p", "127.0.0.1:9101");
  const std::string good(64, 'a');
  auto write = [&](std::vector<std::string> fields) {
    ASSERT_TRUE(client_->Execute({"DEL", key}).ok());
    std::vector<std::string> args = {"HSET", key};
    args.insert(args.end(), fields.begin(), fields.end());
    ASSERT_TRUE(client_->Execute(args).ok());
  };
  auto refused = [&](const std::string& what) {
    auto k = CurrentLeaseKey(*client_, "p", "127.0.0.1:9101");
    EXPECT_EQ(k.status().code(), StatusCode::kFailedPrecondition) << what << ": " << k.status().ToString();
    return k.status().message();
  };
  write({"key", good, "holder", "h", "since_ms", "1", "ttl_ms", "30000"});
  auto ok = CurrentLeaseKey(*client_, "p", "127.0.0.1:9101");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, std::string(32, '\xaa'));
  write({"key", std::string(64, 'g'), "holder", "h", "since_ms", "1", "ttl_ms", "30000"});
  EXPECT_NE(refused("hex").find("64 lowercase hex digits"), std::string::npos);
  write({"key", good.substr(2), "holder", "h", "since_ms", "1", "ttl_ms", "30000"});
  refused("short key");
  write({"token", std::string(32, 'f'), "holder", "h", "since_ms", "1", "ttl_ms", "30000"});
  EXPECT_NE(refused("old token").find("unknown field 'token'"), std::string::npos);
  write({"key", good, "holder", std::string(1 << 20, 'x'), "since_ms", "1", "ttl_ms", "30000"});
  EXPECT_NE(refused("huge holder").find("more than 512 bytes"), std::string::npos);
  write({"key", good, "holder", "h\n", "since_ms", "1", "ttl_ms", "30000"});
  refused("control character");
  write({"key", good, "holder", "h", "since_ms", "-1", "ttl_ms", "30000"});
  refused("negative time");
  write({"key", good, "holder", "h", "since_ms", "1"});
  EXPECT_NE(refused("missing").find("no field 'ttl_ms'"), std::string::npos);
  std::vector<std::string> many = {"key", good, "holder", "h", "since_ms", "1", "ttl_ms", "30000"};
  for (int i = 0; i < 10; ++i) {
    many.push_back("f" + std::to_string(i));
    many.push_back("v");
  }
  write(many);
  EXPECT_NE(refused("many").find("more than 8 fields"), std::string::npos);
  ASSERT_TRUE(client_->Execute({"DEL", key}).ok());
  ASSERT_TRUE(client_->Execute({"SET", key, good}).ok());
  EXPECT_NE(refused("string").find("a string, not a hash"), std::string::npos);
  ASSERT_TRUE(client_->Execute({"DEL", key}).ok());
  EXPECT_EQ(*CurrentLeaseKey(*client_, "p", "127.0.0.1:9101"), "");
}

// A farm with a farm key: leases granted through the lease functions carry a MAC that a
// server holding the key verifies (the function's HMAC, computed in Lua, equals
// OpenSSL's); a record written around the functions is refused, however faithfully it
// copies a real one; a lease written back after its end is refused; and the assignment
// frees a device whose lease record is forged.
TEST_F(FarmRedisTest, LeaseRecordsSignedWithTheFarmKeyAreHonouredAndForgedOnesRefused) {
  const std::string farm_key = "0123456789abcdef0123456789abcdef-test-farm-key";
  ASSERT_TRUE(InstallLeaseFunctions(*client_, farm_key).ok());
  LeaseVerifier verifier(farm_key), verifier2(farm_key);  // d1's server's and d2's
  const std::string d1 = "127.0.0.1:9101", d2 = "127.0.0.1:9102";
  ASSERT_TRUE(client_->WriteDevice(Record(d1, "p"), 60s).ok());
  ASSERT_TRUE(client_->WriteDevice(Record(d2, "p"), 60s).ok());
  auto a = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->device_id, d1);
  EXPECT_EQ(client_->lease_functions, true);  // granted by FCALL, not EVAL
  auto honoured = CurrentLeaseKey(*client_, "p", d1, &verifier);
  ASSERT_TRUE(honoured.ok()) << honoured.status().ToString();
  EXPECT_EQ(rpc::ToHex(*honoured), a->public_key);
  auto read = [&](const std::string& id) {
    std::map<std::string, std::string> f;
    auto all = client_->Query({"HGETALL", LeaseKey("p", id)});
    EXPECT_TRUE(all.ok());
    for (size_t i = 0; all.ok() && i + 1 < all->array.size(); i += 2) f[all->array[i].str] = all->array[i + 1].str;
    return f;
  };
  std::map<std::string, std::string> real = read(d1);
  ASSERT_EQ(real.size(), 6u);
  EXPECT_EQ(real["mac"], LeaseMac(farm_key, LeaseMacMessage(LeaseKey("p", d1), real["key"], real["holder"],
                                                             real["since_ms"], real["ttl_ms"], real["expires_ms"])));
  // A renewal signs a later expiry.
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(RenewLease(*client_, *a).ok());
  std::map<std::string, std::string> renewed = read(d1);
  EXPECT_GT(std::stoll(renewed["expires_ms"]), std::stoll(real["expires_ms"]));
  EXPECT_NE(renewed["mac"], real["mac"]);
  EXPECT_TRUE(CurrentLeaseKey(*client_, "p", d1, &verifier).ok());
  // A key the farm does not use: the genuine record is refused too.
  LeaseVerifier other("another farm's key, 32 bytes or more.....");
  EXPECT_EQ(CurrentLeaseKey(*client_, "p", d1, &other).status().code(), StatusCode::kFailedPrecondition);

  // Forgeries at the idle device d2, by a writer with a key pair of its own.
  auto attacker = rpc::NewLeaseKeyPair();
  ASSERT_TRUE(attacker.ok());
  const std::string attacker_key = rpc::ToHex(attacker->public_key);
  const std::string k2 = LeaseKey("p", d2);
  auto forge = [&](std::map<std::string, std::string> fields) {
    ASSERT_TRUE(client_->Execute({"DEL", k2}).ok());
    std::vector<std::string> args = {"HSET", k2};
    for (auto& [f, v] : fields) {
      args.push_back(f);
      args.push_back(v);
    }
    ASSERT_TRUE(client_->Execute(args).ok());
  };
  auto refused = [&](const std::string& what) {
    auto k = CurrentLeaseKey(*client_, "p", d2, &verifier2);
    EXPECT_EQ(k.status().code(), StatusCode::kFailedPrecondition) << what << ": " << k.status().ToString();
    return k.status().message();
  };
  std::map<std::string, std::string> copy = renewed;
  copy["key"] = attacker_key;  // every field of a real record, the attacker's key
  forge(copy);
  EXPECT_NE(refused("copied fields").find("not signed by the farm key"), std::string::npos);
  // Without the farm key the same record is a lease (the weaker mode): the check above
  // is what refuses it.
  EXPECT_EQ(rpc::ToHex(*CurrentLeaseKey(*client_, "p", d2)), attacker_key);
  forge(renewed);  // d1's genuine record, MAC and all, at d2's key
  EXPECT_NE(refused("record of another device").find("not signed by the farm key"), std::string::npos);
  forge({{"key", attacker_key}, {"holder", "h"}, {"since_ms", "1"}, {"ttl_ms", "30000"}});
  EXPECT_NE(refused("unsigned").find("not signed by the farm key"), std::string::npos);
  // A MAC made with the key, but expired by Redis's clock.
  const std::string past = std::to_string(UnixMillis() - 60000);
  forge({{"key", attacker_key}, {"holder", "h"}, {"since_ms", past}, {"ttl_ms", "30000"}, {"expires_ms", past},
         {"mac", LeaseMac(farm_key, LeaseMacMessage(k2, attacker_key, "h", past, "30000", past))}});
  EXPECT_NE(refused("expired").find("expired"), std::string::npos);
  // The assignment deletes the forged record: d2 is granted to the next client.
  forge(copy);
  auto b = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->device_id, d2);
  EXPECT_EQ(rpc::ToHex(*CurrentLeaseKey(*client_, "p", d2, &verifier2)), b->public_key);
  // A renewal does not sign a forged record: d1's record replaced by one with a's key
  // and the attacker's fields is no lease of a's to renew.
  ASSERT_TRUE(client_->Execute({"HSET", LeaseKey("p", d1), "holder", "attacker"}).ok());
  EXPECT_EQ(RenewLease(*client_, *a).code(), StatusCode::kAborted);
  EXPECT_EQ(CurrentLeaseKey(*client_, "p", d1, &verifier).status().code(), StatusCode::kFailedPrecondition);

  // A lease written back after its end: b's holder releases, the server sees the device
  // free, then the old record is written back (MAC valid, not yet expired).
  std::map<std::string, std::string> old_b = read(d2);
  ASSERT_TRUE(ReleaseLease(*client_, *b).ok());
  EXPECT_EQ(*CurrentLeaseKey(*client_, "p", d2, &verifier2), "");
  forge(old_b);
  EXPECT_NE(refused("written back").find("saw end"), std::string::npos);
}

// The client role's Redis user (docs/farm.md, verbatim) leases through the functions but
// cannot read their code (which holds the farm key) nor load others; it can still write
// a lease record directly (Redis checks a function's key accesses against its caller),
// which a server with the farm key refuses.
TEST_F(FarmRedisTest, TheClientRoleCannotReadTheLeaseFunctions) {
  const std::string farm_key(40, 'k');
  ASSERT_TRUE(InstallLeaseFunctions(*client_, farm_key).ok());
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9101", "p"), 60s).ok());
  const std::string rule =
      "resetkeys ~remex:{*}:lease:* ~remex:{*}:waiting ~remex:{*}:classes ~remex:{*}:class:* ~remex:{*}:waiters "
      "~remex:{*}:alive ~remex:{*}:grant:* ~remex:{*}:free ~remex:{*}:freed ~remex:{*}:leases ~remex:{*}:label:* "
      "~remex:{*}:swept ~remex:{*}:ticket ~remex:{*}:served ~remex:{*}:devices %R~remex:* -@all +ping +select +eval "
      "+evalsha +fcall +time +scan +incr +rpush +lpop +blpop +hset +hget +hmget +hgetall +hdel +zadd +zscore +zrem "
      "+zrange +zrank +zcard +zcount +zrangebyscore +lrange +scard +sscan +smembers +srem +exists +pexpire +set +get +del";
  std::vector<std::string> acl = {"ACL", "SETUSER", "remex-client", "on", ">client-secret"};
  std::istringstream words(rule);
  for (std::string w; words >> w;) acl.push_back(w);
  ASSERT_TRUE(client_->Execute(acl).ok());
  RedisUrl url = redis_.url();
  url.user = "remex-client";
  url.password = "client-secret";
  auto c = RedisClient::Connect(url, 2s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  RedisClient& lessee = **c;
  for (std::vector<std::string> read : {std::vector<std::string>{"FUNCTION", "LIST", "WITHCODE"},
                                        std::vector<std::string>{"FUNCTION", "LIST"},
                                        std::vector<std::string>{"FUNCTION", "DUMP"},
                                        std::vector<std::string>{"FUNCTION", "LOAD", "REPLACE",
                                                                 "#!lua name=remex_farm\nredis.register_function('x', function() return 1 end)"},
                                        std::vector<std::string>{"FUNCTION", "FLUSH"},
                                        std::vector<std::string>{"SLOWLOG", "GET"},
                                        std::vector<std::string>{"CONFIG", "GET", "*"}}) {
    auto r = lessee.Query(read);
    ASSERT_FALSE(r.ok()) << read[0] << " " << read[1];
    EXPECT_NE(r.status().message().find("NOPERM"), std::string::npos) << r.status().ToString();
  }
  // The library is intact, and leases through it.
  auto lease = AcquireLease(lessee, Request("p"));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lessee.lease_functions, true);
  LeaseVerifier verifier(farm_key);
  EXPECT_EQ(rpc::ToHex(*CurrentLeaseKey(*client_, "p", lease->device_id, &verifier)), lease->public_key);
  // A direct write is possible, and no lease.
  ASSERT_TRUE(lessee.Execute({"HSET", LeaseKey("p", lease->device_id), "key", std::string(64, 'a')}).ok());
  EXPECT_EQ(CurrentLeaseKey(*client_, "p", lease->device_id, &verifier).status().code(), StatusCode::kFailedPrecondition);
}

// Redis restarts (its port the same): a client connected before reconnects at its next
// command and the command runs, instead of failing "Server closed the connection"; a
// transaction open across the restart fails instead (its queued commands are gone).
TEST_F(FarmRedisTest, ACommandAfterRedisRestartedReconnectsOnce) {
  const uint16_t port = redis_.url().port;
  ASSERT_TRUE(client_->Execute({"SET", "k", "1"}).ok());
  auto in_multi = RedisClient::Connect(redis_.url(), 2s);
  ASSERT_TRUE(in_multi.ok());
  ASSERT_TRUE((*in_multi)->Execute({"MULTI"}).ok());
  redis_.Stop();
  remex::testing::RedisProcess again(port);
  ASSERT_TRUE(again.ready());
  auto v = client_->Query({"GET", "k"});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->nil());  // the new Redis, empty
  EXPECT_TRUE(client_->Execute({"SET", "k", "2"}).ok());
  Status st = (*in_multi)->Execute({"SET", "k", "3"});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  // That connection is usable again afterwards (a new one, no transaction open).
  EXPECT_EQ((*in_multi)->Query({"GET", "k"})->str, "2");
  again.Stop();
  // No Redis at all: UNAVAILABLE after the one reconnection tried.
  st = client_->Execute({"PING"});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
}

TEST_F(FarmRedisTest, SelectorsPoolsDrainsAndQuarantinesDecideWhatIsLeasable) {
  DeviceRecord h100 = Record("127.0.0.1:9111", "gpus");
  h100.labels = {{"gpu", "h100"}, {"cuda", "12.4"}};
  DeviceRecord a100 = Record("127.0.0.1:9112", "gpus");
  a100.labels = {{"gpu", "a100"}, {"cuda", "11.8"}};
  DeviceRecord sick = Record("127.0.0.1:9113", "gpus");
  sick.labels = {{"gpu", "h100"}, {"cuda", "12.4"}};
  sick.state = DeviceState::kQuarantined;
  sick.health = "self-test: output differs from the CPU's";
  for (const DeviceRecord& d : {h100, a100, sick}) ASSERT_TRUE(client_->WriteDevice(d, 60s).ok());
  // No device of the pool matches: NOT_FOUND at once, naming the selector.
  auto none = AcquireLease(*client_, Request("gpus", "gpu=v100", 5s));
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound) << none.status().ToString();
  EXPECT_NE(none.status().message().find("gpu=v100"), std::string::npos);
  EXPECT_EQ(AcquireLease(*client_, Request("nowhere")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(AcquireLease(*client_, Request("bad pool!")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AcquireLease(*client_, Request("gpus", "cuda>>12")).status().code(), StatusCode::kInvalidArgument);
  // A drained device is not leased; the quarantined twin never is.
  ASSERT_TRUE(SetDrained(*client_, h100.id, true).ok());
  auto h = AcquireLease(*client_, Request("gpus", "cuda>=12"));
  EXPECT_EQ(h.status().code(), StatusCode::kDeadlineExceeded) << h.status().ToString();
  EXPECT_TRUE(client_->ListDevices()->at(0).drained);
  ASSERT_TRUE(SetDrained(*client_, h100.id, false).ok());
  h = AcquireLease(*client_, Request("gpus", "cuda>=12"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->device_id, h100.id);
  auto a = AcquireLease(*client_, Request("gpus", "cuda>=11"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device_id, a100.id);
  EXPECT_EQ(SetDrained(*client_, "127.0.0.1:1", true).code(), StatusCode::kNotFound);
}

TEST_F(FarmRedisTest, ALapsedLeaseFreesTheDeviceAndCannotBeRenewed) {
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9121", "p"), 60s).ok());
  LeaseRequest r = Request("p");
  r.ttl = 1s;
  auto first = AcquireLease(*client_, r);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(AcquireLease(*client_, Request("p")).status().code(), StatusCode::kDeadlineExceeded);
  // Its holder died: nobody renews it. A waiter gets the device once the TTL has run out.
  auto second = AcquireLease(*client_, Request("p", "", 5s));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(RenewLease(*client_, *first).code(), StatusCode::kAborted);
}

// One device, clients queued in a known order: they are served in that order, and a
// client that died while waiting (its waiter key expired) does not hold up the others.
TEST_F(FarmRedisTest, WaitersAreServedFirstComeFirstServed) {
  ASSERT_TRUE(client_->WriteDevice(Record("127.0.0.1:9131", "p"), 60s).ok());
  auto held = AcquireLease(*client_, Request("p"));
  ASSERT_TRUE(held.ok());
  // A dead waiter ahead of everyone: in the queue and its class (that of any device),
  // its expiry gone.
  const std::string any_class = "da39a3ee5e6b4b0d3255bfef95601890afd80709";  // SHA-1 of no terms
  ASSERT_TRUE(client_->Execute({"ZADD", QueueKey("p"), "0", "0"}).ok());
  ASSERT_TRUE(client_->Execute({"ZADD", PoolKeyPrefix("p") + "class:" + any_class, "0", "0"}).ok());
  ASSERT_TRUE(client_->Execute({"HSET", PoolKeyPrefix("p") + "classes", any_class, ""}).ok());
  ASSERT_TRUE(client_->Execute({"HSET", WaitersKey("p"), "0:c", any_class, "0:t", std::string(64, 'a'), "0:h", "dead",
                                "0:ttl", "30000"}).ok());
  constexpr int kClients = 6;
  std::vector<std::thread> clients;
  std::vector<Lease> got(kClients);
  std::vector<Status> errors(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto c = RedisClient::Connect(redis_.url(), 2s);
      if (!c.ok()) {
        errors[i] = c.status();
        return;
      }
      auto lease = AcquireLease(**c, Request("p", "", 30s));
      if (!lease.ok()) {
        errors[i] = lease.status();
        return;
      }
      got[i] = *lease;
      std::this_thread::sleep_for(30ms);
      errors[i] = ReleaseLease(**c, *lease);
    });
    // Each client enqueues before the next starts (the held lease took ticket 1):
    // their tickets increase with i.
    for (int k = 0; k < 400; ++k) {
      auto ticket = client_->Query({"GET", TicketKey("p")});
      if (ticket.ok() && !ticket->nil() && std::stoll(ticket->str) >= i + 2) break;
      std::this_thread::sleep_for(5ms);
    }
  }
  ASSERT_TRUE(ReleaseLease(*client_, *held).ok());
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) ASSERT_TRUE(errors[i].ok()) << i << ": " << errors[i].ToString();
  for (int i = 1; i < kClients; ++i) {
    EXPECT_GT(got[i].ticket, got[i - 1].ticket);
    EXPECT_EQ(got[i].serial, got[i - 1].serial + 1) << "client " << i << " was not served right after client " << i - 1;
  }
  auto waiting = QueueLengths(*client_, {"p"});
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->at("p"), 0);
}

// A waiter whose selector no free device matches does not hold up those behind it
// (backfill), and is served first when its device comes free.
TEST_F(FarmRedisTest, AWaiterForABusyKindDoesNotBlockOthers) {
  DeviceRecord a = Record("127.0.0.1:9141", "p"), b = Record("127.0.0.1:9142", "p");
  a.labels = {{"gpu", "a"}};
  b.labels = {{"gpu", "b"}};
  ASSERT_TRUE(client_->WriteDevice(a, 60s).ok());
  ASSERT_TRUE(client_->WriteDevice(b, 60s).ok());
  auto held = AcquireLease(*client_, Request("p", "gpu=a"));
  ASSERT_TRUE(held.ok());
  std::atomic<bool> served{false};
  std::thread waiter([&] {
    auto c = RedisClient::Connect(redis_.url(), 2s);
    ASSERT_TRUE(c.ok());
    auto lease = AcquireLease(**c, Request("p", "gpu=a", 30s));
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    served = true;
  });
  for (int k = 0; k < 200 && client_->Query({"ZCARD", QueueKey("p")})->integer < 1; ++k) std::this_thread::sleep_for(5ms);
  auto other = AcquireLease(*client_, Request("p", "gpu=b"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->device_id, b.id);
  EXPECT_FALSE(served);
  ASSERT_TRUE(ReleaseLease(*client_, *held).ok());
  waiter.join();
  EXPECT_TRUE(served);
}

// The assignment evaluates selectors inside Redis (kAssignLua) from the terms the C++
// parser gives it: for each selector, the devices a client can lease are exactly those
// LabelSelector::Matches accepts, the label index narrowing the candidates or not.
TEST_F(FarmRedisTest, TheAssignmentMatchesAsTheSelectorDoes) {
  std::vector<DeviceRecord> devices;
  auto add = [&](const std::string& port, std::map<std::string, std::string> labels, const std::string& kind = "cpu") {
    DeviceRecord d = Record("127.0.0.1:" + port, "m");
    d.labels = std::move(labels);
    d.kind = kind;
    devices.push_back(d);
    ASSERT_TRUE(client_->WriteDevice(d, 60s).ok());
  };
  add("9201", {{"gpu", "h100"}, {"cuda", "12.4"}}, "cuda");
  add("9202", {{"gpu", "a100"}, {"cuda", "11.8"}}, "cuda");
  add("9203", {{"gpu", "h100"}, {"cuda", "12.10.1"}, {"maintenance", ""}}, "cuda");
  add("9204", {{"cores", "16"}, {"os", "debian/12"}});
  add("9205", {{"cores", "2"}, {"kind", "special"}, {"v", "x.1"}});
  add("9206", {});
  for (const char* text :
       {"", "gpu=h100", "gpu!=h100", "gpu", "!gpu", "cuda>=12.4", "cuda>12.4", "cuda<12", "cuda<=11.8", "cuda>=12,!maintenance",
        "maintenance", "maintenance=", "kind=cuda", "kind=cpu", "kind=special", "kind!=cuda", "pool=m", "pool=other",
        "cores>=4", "cores<4", "v>=1", "os=debian/12", "gpu=h100,kind=cuda,cuda>=12.10", "gpu=v100", "nosuch!=x"}) {
    SCOPED_TRACE(text);
    auto selector = ParseLabelSelector(text);
    ASSERT_TRUE(selector.ok()) << selector.status().ToString();
    std::set<std::string> expected, got;
    for (const DeviceRecord& d : devices) {
      if (selector->Matches(d)) expected.insert(d.id);
    }
    std::vector<Lease> leases;
    for (;;) {
      auto lease = AcquireLease(*client_, Request("m", text));
      if (!lease.ok()) {
        EXPECT_EQ(lease.status().code(), expected.empty() ? StatusCode::kNotFound : StatusCode::kDeadlineExceeded)
            << lease.status().ToString();
        break;
      }
      EXPECT_TRUE(got.insert(lease->device_id).second) << lease->device_id << " leased twice";
      leases.push_back(*lease);
      ASSERT_LE(leases.size(), devices.size());
    }
    EXPECT_EQ(got, expected);
    for (const Lease& l : leases) ASSERT_TRUE(ReleaseLease(*client_, l).ok());
  }
}

// Waiters block in Redis instead of polling: a queue of waiting clients costs a few
// commands per waiter per heartbeat, and a device announced free (here: undrained) reaches
// a waiter long before its next heartbeat.
TEST_F(FarmRedisTest, WaitersBlockUntilADeviceIsAnnouncedFree) {
  DeviceRecord d = Record("127.0.0.1:9211", "w");
  ASSERT_TRUE(client_->WriteDevice(d, 60s).ok());
  ASSERT_TRUE(SetDrained(*client_, d.id, true).ok());
  // A number of Redis's INFO section `section`: the value after "`field`:", -1 if none.
  auto info_number = [&](const char* section, const std::string& field) -> int64_t {
    auto info = client_->Query({"INFO", section});
    if (!info.ok()) return -1;
    const size_t at = info->str.find(field + ":");
    return at == std::string::npos ? -1 : std::stoll(info->str.substr(at + field.size() + 1));
  };
  auto commands = [&] { return info_number("stats", "total_commands_processed"); };
  constexpr int kWaiters = 8;
  std::vector<std::thread> waiters;
  std::vector<Status> results(kWaiters);
  std::vector<std::chrono::steady_clock::time_point> served(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      auto c = RedisClient::Connect(redis_.url(), 2s);
      if (!c.ok()) {
        results[i] = c.status();
        return;
      }
      LeaseRequest r = Request("w", "", 60s);
      r.heartbeat = 20s;
      auto lease = AcquireLease(**c, r);
      served[i] = std::chrono::steady_clock::now();
      results[i] = lease.status();
      if (lease.ok()) results[i] = ReleaseLease(**c, *lease);
    });
  }
  for (int k = 0; k < 400 && client_->Query({"ZCARD", QueueKey("w")})->integer < kWaiters; ++k) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(client_->Query({"ZCARD", QueueKey("w")})->integer, kWaiters);
  // Each waiter's last commands after joining the queue, up to its BLPOP, may come late
  // on a busy machine: the window opens once Redis counts every waiter blocked.
  auto blocked = [&] { return info_number("clients", "blocked_clients"); };
  for (int k = 0; k < 400 && blocked() < kWaiters; ++k) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(blocked(), kWaiters);
  // Two seconds of waiting: the commands here (INFO twice) and nothing from the waiters,
  // whose heartbeat is 20 s. Polling every 20 ms would have sent about 1,600.
  const int64_t before = commands();
  std::this_thread::sleep_for(2s);
  const int64_t idle = commands() - before;
  EXPECT_LE(idle, 4) << "commands while " << kWaiters << " clients waited";
  const auto undrained = std::chrono::steady_clock::now();
  ASSERT_TRUE(SetDrained(*client_, d.id, false).ok());
  for (auto& t : waiters) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
    EXPECT_LT(served[i] - undrained, 10s) << "waiter " << i << " was not woken";
  }
}

TEST(FarmRedisDownTest, ConnectingToNothingIsUnavailableNamingTheUrl) {
  RedisUrl url;
  url.host = "127.0.0.1";
  url.port = remex::testing::FreeLoopbackPort();
  auto c = RedisClient::Connect(url, 500ms);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find(url.ToString()), std::string::npos) << c.status().message();
  auto reg = Registration::Start(url, Record("127.0.0.1:9005", "p"), {});
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().code(), StatusCode::kUnavailable);
}

}  // namespace farm_test
}  // namespace remex::farm
