// The device farm's registry in Redis: where remex-server processes announce their
// device (docs/farm.md) and where clients find them.
//
// Layout (Redis 6 or later; every key under the prefix "remex:"; all the keys of one
// pool carry the hash tag {POOL}, so that they live in one slot of a Redis Cluster and
// one transaction may touch them):
//   remex:{POOL}:device:<id>  hash, one per registered server, with a time to live: the
//                      fields of DeviceRecord (see RecordFields). <id> is the server's
//                      advertised address, HOST:PORT. The server refreshes the record
//                      (heartbeat_ms and the key's TTL) every heartbeat interval, so
//                      a server that dies leaves the pool when the TTL runs out.
//   remex:{POOL}:devices      set of the ids registered in the pool (an id whose
//                      record is gone is pruned by whoever reads it).
//   Leases, drains and the waiting queue: rpc/farm_lease.h.
//
// A RedisClient speaks to Redis through hiredis (Debian's libhiredis), one command at
// a time; commands are sent as argument vectors, so no value is ever parsed as
// command syntax. Every reply is checked for its type before it is read, and a
// record read back is bounded (kMaxRecordBytes) and validated like any input from
// the network.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <optional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"

struct redisContext;
struct redisReply;

namespace remex::farm {

class LeaseVerifier;  // rpc/farm_lease.h

// redis://[USER@]HOST:PORT[/DB]: HOST a name or an IPv4 address (an IPv6 one in
// brackets), PORT 1-65535 (6379 when absent), DB 0-15 (0 when absent), USER a Redis ACL
// user (1-64 letters, digits or "_.-"). The password is never in the URL (it would show
// in process listings): it comes from the environment variable kFarmPasswordEnv.
// redis-sentinel://[USER@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]: Redis behind Sentinel
// (high availability): the Sentinels (port 26379 when absent; at most 16) are asked for
// the primary of the set named MASTER (1-64 letters, digits or "_.-") at every
// (re)connection, so that a client follows a failover. USER and the password are those of
// the Redis nodes; the Sentinels are asked without authentication.
// redis-cluster://[USER@]HOST:PORT[,HOST:PORT...]: a Redis Cluster, found from these
// nodes (at most 16; port 6379 when absent; database 0 only): each command goes to the
// primary serving its key's slot (CLUSTER SLOTS, refreshed on MOVED and on a lost
// connection; ASK followed once). A pool's keys share a hash tag, so a pool lives on one
// primary and the pools spread over the cluster; listing scans every primary.
inline constexpr const char* kFarmPasswordEnv = "REMEX_FARM_PASSWORD";
struct RedisUrl {
  std::string host;  // With Sentinels: the primary connected to last (empty before).
  uint16_t port = 6379;
  int db = 0;
  // Connect authenticates (AUTH) as `user` with `password`, or as Redis's default user
  // with `password` when only that is set; neither: no AUTH.
  std::string user;
  std::string password;
  // redis-sentinel://: the Sentinels' addresses and the name of the monitored set.
  std::vector<std::pair<std::string, uint16_t>> sentinels;
  std::string master;
  // redis-cluster://: the nodes to learn the cluster's slots from.
  std::vector<std::pair<std::string, uint16_t>> cluster;
  // The URL without the password.
  std::string ToString() const;
};
// INVALID_ARGUMENT naming what is wrong with `url` (a password in it included). The
// password is read from kFarmPasswordEnv when that is set; a URL with a USER and no
// password there is INVALID_ARGUMENT saying so.
StatusOr<RedisUrl> ParseRedisUrl(std::string_view url);

// The Redis Cluster slot of `key` (0-16383): CRC16 (XMODEM) of its hash tag, the part
// between the first '{' and the next '}' when that is not empty, else of the whole key.
uint16_t ClusterSlot(std::string_view key);

// Labels "k=v,k=v": keys of letters, digits and "_.-/" (1-64 bytes), values of
// letters, digits and "_.-/:+" (0-128 bytes), at most 32 pairs, no key twice. An empty
// string is no labels. INVALID_ARGUMENT naming the offending pair.
StatusOr<std::map<std::string, std::string>> ParseLabels(std::string_view text);
// OK when `pool` is a pool name: 1-64 letters, digits or "_.-"; else INVALID_ARGUMENT
// naming it.
Status CheckPoolName(std::string_view pool);
// The canonical form: "k=v,k=v" in key order.
std::string FormatLabels(const std::map<std::string, std::string>& labels);

// A selector of devices by label: terms separated by commas, all of which must hold.
//   KEY=VALUE, KEY!=VALUE     the label equals / does not equal VALUE (!= also holds
//                             when the label is absent)
//   KEY>=V, KEY>V, KEY<=V, KEY<V
//                             the label and V are versions (dot-separated decimal
//                             integers, e.g. 12, 12.4, 9.0.1; missing parts are 0) and
//                             compare so; a label that is no version does not match
//   KEY                       the label is present;  !KEY  it is absent
// KEY may also be one of the record's own fields pool and kind (cpu, cuda). Keys and
// values use the label alphabet (ParseLabels). An empty selector matches every device.
// Example: "gpu=h100,cuda>=12.4,!maintenance".
struct DeviceRecord;
struct LabelTerm {
  enum class Op : uint8_t { kEq, kNe, kGe, kGt, kLe, kLt, kExists, kAbsent };
  std::string key;
  Op op = Op::kEq;
  std::string value;
};
struct LabelSelector {
  std::vector<LabelTerm> terms;
  bool Matches(const DeviceRecord& device) const;
};
// INVALID_ARGUMENT naming the offending term.
StatusOr<LabelSelector> ParseLabelSelector(std::string_view text);

// A device's state in the farm. A server writes kIdle, or kQuarantined when its
// self-test failed (DeviceRecord::health says why); a listing shows kLeased while the
// device has a lease and kDraining while it is drained (rpc/farm_lease.h).
enum class DeviceState : uint8_t { kIdle, kLeased, kDraining, kQuarantined };
std::string_view DeviceStateName(DeviceState state);
StatusOr<DeviceState> ParseDeviceState(std::string_view name);

// One registered device server.
struct DeviceRecord {
  std::string id;           // The advertised address, HOST:PORT (the key's suffix).
  std::string pool;         // Pool name: letters, digits, "_.-" (1-64 bytes).
  std::map<std::string, std::string> labels;
  std::string kind;         // Device kind: "cpu" or "cuda".
  std::string device;       // The server's device: "cpu", "cuda:0", ...
  std::string description;  // Model, cores or compute capability, memory, driver, runtime.
  uint64_t memory_bytes = 0;
  std::string version;      // Remex version of the server.
  DeviceState state = DeviceState::kIdle;
  int64_t registered_ms = 0;  // Unix time, milliseconds: when the server registered.
  int64_t heartbeat_ms = 0;   // Unix time, milliseconds: the last refresh.
  std::string health;         // The self-test's result: "ok", or why it failed.

  // Read from the lease and drain keys by ListDevices (not fields of the record).
  bool leased = false;
  std::string holder;         // The lease's holder, as it named itself.
  int64_t lease_since_ms = 0;
  bool drained = false;
};

// The hash fields of a record and their values, in this order: the one list that writing
// and reading a record follow.
std::vector<std::pair<std::string, std::string>> RecordFields(const DeviceRecord& record);
// A record larger than this (all fields and values) is refused when read.
inline constexpr size_t kMaxRecordBytes = 16 * 1024;
// The keys of a device's record, and of the set of a pool's device ids; and those of
// leases, drains and the waiting queue (rpc/farm_lease.h says what each holds).
// "remex:{POOL}:", which every key of the pool starts with.
std::string PoolKeyPrefix(std::string_view pool);
std::string DeviceKey(std::string_view pool, std::string_view id);
std::string PoolDevicesKey(std::string_view pool);
std::string LeaseKey(std::string_view pool, std::string_view id);
std::string DrainKey(std::string_view pool, std::string_view id);
std::string QueueKey(std::string_view pool);
std::string WaitersKey(std::string_view pool);
std::string AliveKey(std::string_view pool);
std::string TicketKey(std::string_view pool);
std::string ServedKey(std::string_view pool);
std::string FreedKey(std::string_view pool);
std::string FreeKey(std::string_view pool);
// The label index, written by each registration and read by the assignment to narrow a
// selector's candidates: the set of the pool's device ids with label KEY=VALUE, and the
// set of those with label KEY at all. An id stays in them until the assignment finds its
// record gone (the record, not the index, decides whether a device matches).
std::string LabelIndexKey(std::string_view pool, std::string_view key, std::string_view value);
std::string LabelIndexKey(std::string_view pool, std::string_view key);

// A Redis reply, read whole and bounded (RedisClient::Query).
struct RedisValue {
  enum class Type : uint8_t { kNil, kInteger, kString, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // kString (also status replies such as OK)
  std::vector<RedisValue> array;
  bool nil() const { return type == Type::kNil; }
};

// Milliseconds since the Unix epoch.
int64_t UnixMillis();

class RedisClient {
 public:
  // Connects (authenticates as RedisUrl says, and SELECTs `url.db`), waiting at most
  // `timeout` for the connection and for each reply later. UNAVAILABLE "redis://...: ..."
  // when Redis cannot be reached, PERMISSION_DENIED when it refuses the user or password.
  //
  // Every command that finds the connection closed by Redis (it restarted, or dropped
  // the client) or broken by an earlier failure reconnects and is sent once more
  // before it fails, except inside a MULTI transaction (whose queued commands died
  // with the connection: the command fails UNAVAILABLE and the caller starts over). A
  // command that timed out is not sent again. The command then did not reach the Redis
  // now listening, so sending it again runs it once there; the one case where it may
  // run twice is a Redis that executed it and then closed the connection before
  // replying, with its data kept (persistence): a join of the queue or a grant's
  // pick-up may then be repeated, the rest of the farm's commands are idempotent.
  static StatusOr<std::unique_ptr<RedisClient>> Connect(const RedisUrl& url, std::chrono::milliseconds timeout);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Writes `record` whole and sets its key to expire after `ttl` (one transaction).
  Status WriteDevice(const DeviceRecord& record, std::chrono::milliseconds ttl);
  // Refreshes a record's heartbeat_ms and TTL. NOT_FOUND when the key is gone (it
  // expired, or Redis lost it): the caller writes the record again.
  Status RefreshDevice(std::string_view pool, std::string_view id, int64_t heartbeat_ms,
                       std::chrono::milliseconds ttl);
  // Deletes a record (OK when there is none).
  Status RemoveDevice(std::string_view pool, std::string_view id);
  // Every registered device, ordered by pool then id, with its lease and drain. A
  // record that does not parse is left out and named in `skipped` (when given).
  StatusOr<std::vector<DeviceRecord>> ListDevices(std::vector<std::string>* skipped = nullptr);
  // The registered devices of one pool, ordered by id, with their leases and drains
  // unless `leases` is false (the records alone, one command per device: enough to
  // match label selectors). Ids whose record is gone are pruned from the pool's set.
  StatusOr<std::vector<DeviceRecord>> ListPool(std::string_view pool, std::vector<std::string>* skipped = nullptr,
                                               bool leases = true);

  // One registered device with its lease and drain; NOT_FOUND when it has no record.
  StatusOr<DeviceRecord> ReadDevice(std::string_view pool, std::string_view id);

  // Runs one command on every primary of a cluster (on the one Redis otherwise): for
  // FUNCTION LOAD, which each primary needs.
  Status ExecuteOnEachPrimary(const std::vector<std::string>& args);
  // Runs one command given as its arguments (binary-safe); the reply is dropped.
  // INTERNAL with Redis's message for an error reply.
  Status Execute(const std::vector<std::string>& args) { return Command(args); }
  // Runs one command and returns its reply. INTERNAL with Redis's message for an error
  // reply; RESOURCE_EXHAUSTED for a reply of more than 1,048,576 elements or 64 MiB.
  StatusOr<RedisValue> Query(const std::vector<std::string>& args);
  // Query for a command that blocks in Redis for up to `block` (BLPOP): the reply may
  // take that much longer than the connection's timeout.
  StatusOr<RedisValue> BlockingQuery(const std::vector<std::string>& args, std::chrono::milliseconds block);
  // Tells the waiters of `pool` that device `id` may have become leasable (it registered,
  // passed its self-test again, was undrained, or its lease ended): the id joins the
  // pool's free set (FreeKey; checked before it is granted) and is pushed to the list
  // FreedKey (its last 64 entries kept), which one blocked waiter pops to run the
  // assignment (rpc/farm_lease.h).
  Status AnnounceFree(std::string_view pool, std::string_view id);

  // Redis's clock (TIME), Unix milliseconds, on the node of the last command (the one a
  // pool's keys live on, in a cluster). INTERNAL for a reply that is not two integers.
  StatusOr<int64_t> TimeMillis();

  const RedisUrl& url() const { return url_; }

  // Whether the farm's lease function library (farm_lease.h, kLeaseLibrary) answers on
  // this connection: unknown until a lease command tried it. Used by farm_lease.cc only.
  std::optional<bool> lease_functions;

 private:
  RedisClient(RedisUrl url, redisContext* context, std::chrono::milliseconds timeout)
      : url_(std::move(url)), context_(context), timeout_(timeout) {}
  // Replaces the connection by a new one (OK), or leaves none (UNAVAILABLE).
  Status Reconnect();
  // Runs one command (its arguments as given, binary-safe); the reply's error, or OK.
  Status Command(const std::vector<std::string>& args, ::redisReply** reply = nullptr);
  // Reads the device records of `keys` (with their leases and drains when `leases`)
  // into `out`.
  Status ReadDevices(const std::vector<std::string>& keys, std::vector<DeviceRecord>& out,
                     std::vector<std::string>* skipped, bool leases = true);

  // Redis Cluster: learns which primary serves each slot (CLUSTER SLOTS from any node
  // that answers), UNAVAILABLE when none does.
  Status RefreshSlots();
  // Makes context_ the connection to the primary serving the key of `args` (for a
  // command without a key: the node of the open transaction or of the last command; a
  // deferred MULTI is sent there first), opening it when needed.
  Status Route(const std::vector<std::string>& args);
  // The addresses of the cluster's primaries ("host:port").
  std::vector<std::string> Primaries() const;

  RedisUrl url_;
  redisContext* context_;
  std::chrono::milliseconds timeout_;
  bool in_transaction_ = false;  // MULTI sent, EXEC or DISCARD not yet
  // Cluster mode only: a connection per node (null until used), the node serving each of
  // the 16384 slots, the node of context_, a MULTI not yet sent (it goes to the node of
  // the transaction's first key), and a node an ASK redirection names for one command.
  std::map<std::string, redisContext*> nodes_;
  std::vector<std::string> slot_nodes_;
  std::string node_;
  bool multi_deferred_ = false;
  std::string ask_node_;
  std::chrono::milliseconds block_{0};  // BlockingQuery's extra reply time, while it runs
};

// Keeps a device registered while it lives: Start writes the record, then a thread of
// its own refreshes it every `interval` (writing it again when the key has gone) and
// reconnects when Redis goes away, logging each failure once until it recovers. Stop
// (also on destruction) ends the thread and deletes the record, so a server that stops
// cleanly leaves the pool at once.
class Registration {
 public:
  struct Options {
    std::chrono::milliseconds interval{1000};  // Heartbeat period.
    std::chrono::milliseconds ttl{5000};       // The record's time to live: > interval.
    std::chrono::milliseconds timeout{2000};   // Connection and reply timeout.
    // Called on the registration's thread at every beat with the public key of the
    // device's current lease (farm_lease.h CurrentLeaseKey; "" when it has none or its
    // record is malformed): the server closes the sessions made with any other lease
    // (one released, lapsed or replaced since).
    std::function<void(const std::string& public_key)> on_lease;
    // A farm with a farm key: the lease records read for on_lease are verified with it
    // (farm_lease.h; a record it refuses counts as no lease). Shared with the server's
    // session check.
    std::shared_ptr<LeaseVerifier> verifier;
  };
  // Connects and writes the record: UNAVAILABLE when Redis cannot be reached, so a
  // server started with --farm fails at once when the farm is down.
  static StatusOr<std::unique_ptr<Registration>> Start(const RedisUrl& url, DeviceRecord record, Options options);
  ~Registration();
  void Stop();
  // Marks the device quarantined (its self-test failed: `why`) or healthy again, in the
  // record now and at every later write. Called from any thread.
  void SetHealth(const std::string& why, bool healthy);

 private:
  Registration(RedisUrl url, DeviceRecord record, Options options, std::unique_ptr<RedisClient> client);
  void Run();

  const RedisUrl url_;
  DeviceRecord record_;  // The thread's copy; health changes come through pending_health_.
  std::optional<std::pair<std::string, bool>> pending_health_;  // Guarded by mutex_.
  bool beat_now_ = false;  // Guarded by mutex_: SetHealth wants a beat before the interval.
  bool had_lease_ = false;  // The thread's: the device had a lease at the last beat.
  const Options options_;
  std::unique_ptr<RedisClient> client_;  // Used by the thread only once it runs.
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace remex::farm
