// Leases of farm devices (docs/farm.md): exclusive use of one registered device for as
// long as its holder renews the lease, enforced by the device server itself.
//
// Keys (rpc/farm.h: every key of pool P starts with "remex:{P}:"):
//   remex:{P}:lease:<id>   hash {key, holder, since_ms, ttl_ms} with the lease's TTL.
//                          key: the public half (64 hex digits) of an Ed25519 key pair
//                          the lessee made for this lease (rpc/auth.h); the device's
//                          server accepts only sessions that sign its challenge with the
//                          private half, which never leaves the lessee. Reading the
//                          record therefore gives no use of the device. In a farm with
//                          a farm key (below) also expires_ms and mac.
//   remex:{P}:drain:<id>   present while the device is drained: leased no more (a lease
//                          in progress runs on). No TTL: a drain outlives restarts.
//   remex:{P}:waiting      sorted set: the clients waiting for a device of P, by ticket
//                          (a waiter's id is its ticket: the order it came in).
//   remex:{P}:classes      hash: class -> the selector's terms, for each selector some
//                          waiter has (class: the SHA-1 of the terms, in hex).
//   remex:{P}:class:<c>    sorted set: the waiters of class c, by ticket.
//   remex:{P}:waiters      hash: "<w>:c" waiter w's class, "<w>:t" its lease's public key
//                          (hex), "<w>:h" its holder, "<w>:ttl" the lease's TTL in ms.
//   remex:{P}:alive        sorted set: waiter id -> when it expires (Redis's clock, ms);
//                          its client pushes that forward at each heartbeat, so a waiter
//                          that dies is dropped from the queue once it has expired.
//   remex:{P}:grant:<w>    list: "<id> <serial> <since_ms>", the lease granted to waiter w,
//                          which it blocks on (BLPOP) and pops (with the lease's TTL).
//   remex:{P}:free         sorted set (all scores 0, so ordered by id): the devices that may
//                          be leasable; each is checked (record, health, drain, lease)
//                          before it is granted, and leaves the set when it is not.
//   remex:{P}:freed        list: wake-ups, the ids of devices announced leasable by their
//                          server (registered, healthy again, lease lapsed) or an operator
//                          (undrained), each already added to `free` (farm.h AnnounceFree);
//                          a blocked waiter pops one and runs the assignment.
//   remex:{P}:leases       sorted set: device id -> when its lease lapses (ms); a grant not
//                          yet picked up lapses after a pick-up window of 5 s.
//   remex:{P}:label:<k>=<v>, remex:{P}:label:<k>
//                          sets: the label index (farm.h LabelIndexKey).
//   remex:{P}:ticket       counter giving waiter ids.
//   remex:{P}:served       counter of the leases granted (Lease::serial).
//
// Fairness: first come, first served per pool, with backfill. The assignment runs inside
// Redis, as one Lua script (atomic: no device ever goes to two clients): while a device
// is free, the waiter with the lowest ticket among those whose selector matches a free
// device gets the first such device by id, as a lease created there and then with the
// waiter's own public key; a waiter whose selector matches no free device is passed over
// (it does not hold up the others). Leases are thus granted in the order clients came.
// Waiters with the same selector form a class, so that the assignment looks at the head
// of each class only, and a selector's candidates come from the label index (the smallest
// set of its KEY=VALUE and KEY terms) or, without such a term, from the free devices in
// order: its cost depends on the classes and the matching devices, not on the pool's size
// or the queue's length.
//
// Nothing polls. The assignment runs when a client joins the queue, when a lease is
// released (the device goes to the next waiter at once), and when a waiter pops a wake-up
// from `freed`; each waiter blocks (BLPOP) on its grant and on `freed`, waking at its
// heartbeat (LeaseRequest::heartbeat, 15 s) to push its expiry forward; at most twice a
// second per pool, a heartbeat also sweeps the leases that lapsed (`leases`) and the
// waiters that expired. An idle queue of N waiters thus costs Redis N / heartbeat
// BLPOPs and script calls per second (6 commands each, counting those inside the script).
// A waiter that died is dropped three heartbeats after its last; a device granted to it
// meanwhile lapses after the pick-up window and goes to the next waiter.
// The selector is parsed in C++ (ParseLabelSelector, its one parser) and handed to the
// scripts as terms, which they evaluate against the device's record as
// LabelSelector::Matches does (FarmRedisTest.TheAssignmentMatchesAsTheSelectorDoes). The
// scripts build every key from the pool's prefix; they share the pool's hash tag, so they
// live in its slot of a Redis Cluster.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "rpc/farm.h"

namespace remex::farm {

struct LeaseRequest {
  std::string pool = "default";
  std::string selector;  // ParseLabelSelector's grammar; empty: any device of the pool
  // Who holds the lease, as `farm status` shows it (default: user@host pid N).
  std::string holder;
  std::chrono::milliseconds ttl{30000};  // The lease lapses this long after its last renewal.
  // How long to wait for a free device; 0: take one that is free now or fail.
  std::chrono::milliseconds wait{0};
  // While waiting, how often the client tells Redis it still waits (100 ms to 60 s); a
  // waiter not heard from for three heartbeats is dropped from the queue.
  std::chrono::milliseconds heartbeat{15000};
};

struct Lease {
  std::string pool;
  std::string device_id;  // The device's advertised address, HOST:PORT.
  // The lease's secret (rpc/auth.h: kLeaseSecretPrefix and the private key), the
  // client's token for the device (client::ConnectOptions::token, REMEX_TOKEN). Never
  // written to Redis.
  std::string token;
  std::string public_key;  // Its public key, 64 hex digits: what Redis holds.
  std::string holder;
  int64_t since_ms = 0;   // Unix time, milliseconds.
  std::chrono::milliseconds ttl{0};
  DeviceRecord device;    // The device's record when it was leased.
  int64_t ticket = 0;     // Its place in the pool's queue: the order it came in.
  int64_t serial = 0;     // The order it was served in (the pool's leases so far).
};

// The default holder: "USER@HOST pid PID".
std::string DefaultHolder();

// Acquires a device of `request.pool` matching `request.selector`, waiting up to
// `request.wait` in the pool's queue. INVALID_ARGUMENT for a bad pool or selector;
// NOT_FOUND when no registered device of the pool matches the selector at all (naming
// the pool and the selector); DEADLINE_EXCEEDED when none became free in time (with
// the number of waiters ahead and of matching devices); UNAVAILABLE when Redis fails.
StatusOr<Lease> AcquireLease(RedisClient& redis, const LeaseRequest& request);
// Extends the lease by its TTL. ABORTED "lease lost" when the device's lease is no
// longer this one (it lapsed, or was taken over after lapsing).
Status RenewLease(RedisClient& redis, const Lease& lease);
// Ends the lease (OK when it had lapsed already); the device's server then closes the
// holder's sessions.
Status ReleaseLease(RedisClient& redis, const Lease& lease);
// --- Lease records signed with the farm key (docs/farm.md "Signed lease records") ---
//
// A farm may have a farm key K: a secret of at least kMinFarmKeyBytes that the operator
// installs on every farm server and keeps from clients. The operator loads the lease
// logic (join, turn, release, renew) into Redis as a function library with K embedded
// (InstallLeaseFunctions: FUNCTION LOAD), and clients call it with FCALL; their Redis
// user may not read functions' code. The library writes each lease record with two
// more fields: expires_ms (Redis's clock when the lease lapses, pushed forward by each
// renewal) and mac = HMAC-SHA1(K, LeaseMacMessage(...)) in hex. A server given K
// (LeaseVerifier) honours only records whose MAC verifies and that have not expired.
// Redis checks a function's key accesses against the caller's ACL user, so a client
// can still write lease records directly; such a record carries no valid MAC.
inline constexpr size_t kMinFarmKeyBytes = 32;
inline constexpr size_t kMaxFarmKeyBytes = 4096;
// The name of the function library in Redis.
inline constexpr const char* kLeaseLibrary = "remex_farm";
// Reads the farm key from `path` (its bytes, whole, a trailing newline included).
// INVALID_ARGUMENT naming the path when it cannot be read or has fewer than
// kMinFarmKeyBytes or more than kMaxFarmKeyBytes bytes.
StatusOr<std::string> ReadFarmKeyFile(const std::string& path);
// The library's code (Lua, for FUNCTION LOAD) with `farm_key` embedded (as HMAC's inner
// and outer pads): as secret as the key itself.
std::string LeaseFunctionsCode(std::string_view farm_key);
// Loads (or replaces) the library in Redis: FUNCTION LOAD REPLACE. The caller's Redis
// user needs `function|load`. INTERNAL with Redis's message when it refuses.
Status InstallLeaseFunctions(RedisClient& redis, std::string_view farm_key);
// The message a lease record's MAC covers: "remex-lease-v1" then, for each of the lease
// key's name, key, holder, since_ms, ttl_ms and expires_ms, "<bytes>:<value>;".
std::string LeaseMacMessage(std::string_view lease_key, std::string_view key, std::string_view holder,
                            std::string_view since_ms, std::string_view ttl_ms, std::string_view expires_ms);
// HMAC-SHA1(farm_key, message) in lowercase hex (40 digits).
std::string LeaseMac(std::string_view farm_key, std::string_view message);

// Verifies the lease records a farm server reads (CurrentLeaseKey) against the farm key,
// and refuses a record of a lease that this server saw end (a holder writing back its
// own signed record after releasing it). Thread-safe: the session check and the
// heartbeat share one.
class LeaseVerifier {
 public:
  explicit LeaseVerifier(std::string farm_key) : farm_key_(std::move(farm_key)) {}
  // OK when the record (its fields, as read; now_ms Redis's clock) is honoured; else
  // FAILED_PRECONDITION saying why. Remembers the lease for the replay check.
  Status Check(std::string_view lease_key, const std::map<std::string, std::string>& fields, int64_t now_ms);
  // The device has no lease now: the lease seen last has ended.
  void NoLease();

 private:
  const std::string farm_key_;
  std::mutex mutex_;
  // The lease seen last (its key and since_ms), and the newest one seen end: a record
  // with an older since_ms, or that ended lease itself, is refused.
  std::string last_key_;
  int64_t last_since_ = -1;
  std::string ended_key_;
  int64_t ended_since_ = -1;
};

// Bounds on a lease record a server reads (CurrentLeaseKey).
inline constexpr size_t kMaxLeaseFields = 8;
inline constexpr size_t kMaxLeaseValueBytes = 512;
// The public key (32 bytes) of the device's current lease; "" when it has none.
// FAILED_PRECONDITION naming the key and the fault for a record that is not a lease's:
// another type than a hash, more than kMaxLeaseFields fields, a value of more than
// kMaxLeaseValueBytes, a field other than key, holder, since_ms and ttl_ms or one of
// them missing, a key that is not 64 lowercase hex digits, a holder of 0 or more than
// 256 bytes or with a control character, times that are no non-negative integers.
// UNAVAILABLE when Redis fails.
// With a `verifier` (a farm with a farm key), the record must also have the fields
// expires_ms and mac, its MAC must verify and it must not have expired by Redis's clock
// (LeaseVerifier): else FAILED_PRECONDITION "... is not signed by the farm key" or saying
// why. Without one, the fields expires_ms and mac are allowed and not checked.
StatusOr<std::string> CurrentLeaseKey(RedisClient& redis, std::string_view pool, std::string_view id,
                                      LeaseVerifier* verifier = nullptr);

// Drains (or undrains) device `id`, found in whichever pool it is registered.
// NOT_FOUND when no registered device has that id. A drained device is not leased; a
// lease in progress runs on.
Status SetDrained(RedisClient& redis, std::string_view id, bool drained);

// The waiting clients of each pool: pool -> queue length (live waiters).
StatusOr<std::map<std::string, int64_t>> QueueLengths(RedisClient& redis, const std::vector<std::string>& pools);

// Holds a lease while it lives: acquires it, renews it every third of its TTL on a
// thread of its own (with a connection of its own), and releases it on destruction.
// When a renewal finds the lease lost, lost() says why; the device's server has closed
// (or will close) the sessions made with it.
class LeaseHolder {
 public:
  static StatusOr<std::unique_ptr<LeaseHolder>> Acquire(const RedisUrl& url, const LeaseRequest& request,
                                                        std::chrono::milliseconds timeout);
  ~LeaseHolder();
  LeaseHolder(const LeaseHolder&) = delete;
  LeaseHolder& operator=(const LeaseHolder&) = delete;

  const Lease& lease() const { return lease_; }
  // OK while the lease holds; ABORTED once a renewal found it lost.
  Status lost() const;
  // Releases now (also done by the destructor).
  Status Release();

 private:
  LeaseHolder(RedisUrl url, Lease lease, std::unique_ptr<RedisClient> client, std::chrono::milliseconds timeout)
      : url_(std::move(url)), lease_(std::move(lease)), client_(std::move(client)), timeout_(timeout) {}
  void Run();

  const RedisUrl url_;
  const Lease lease_;
  std::unique_ptr<RedisClient> client_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Status lost_;
  std::thread thread_;
};

}  // namespace remex::farm
