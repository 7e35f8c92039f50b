// Leases of farm devices (rpc/farm_lease.h).

#include "rpc/farm_lease.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

namespace remex::farm {
namespace {

// Bounds on what one round reads: waiters in a queue, and the holder text.
constexpr size_t kMaxWaiters = 100000;
constexpr size_t kMaxHolderBytes = 256;

StatusOr<std::string> NewToken() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Internal("no random bytes for a lease token");
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

// Redis's clock in ms, inside a script (so that every client judges expiry alike).
constexpr std::string_view kNowMs = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) ";

// Joins the queue: KEYS ticket, queue, waiters, alive; ARGV selector, ttl_ms. Returns
// the waiter's id (its ticket).
const std::string& EnqueueScript() {
  static const std::string s = std::string(kNowMs) +
                               "local w = redis.call('INCR', KEYS[1]) redis.call('RPUSH', KEYS[2], w) "
                               "redis.call('HSET', KEYS[3], w, ARGV[1]) "
                               "redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), w) return w";
  return s;
}
// Pushes a waiter's expiry forward: KEYS alive; ARGV id, ttl_ms. 0 when it was dropped.
const std::string& RefreshScript() {
  static const std::string s = std::string(kNowMs) +
                               "if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then return 0 end "
                               "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) return 1";
  return s;
}
// The waiters of the queue that have expired: KEYS queue, alive; returns their ids.
const std::string& ExpiredScript() {
  static const std::string s = std::string(kNowMs) +
                               "local gone = {} for _, w in ipairs(redis.call('LRANGE', KEYS[1], 0, " +
                               "99999)) do local e = redis.call('ZSCORE', KEYS[2], w) "
                               "if e == false or tonumber(e) < now then gone[#gone + 1] = w end end return gone";
  return s;
}

// Removes waiters from the queue (inside or outside a transaction).
Status Dequeue(RedisClient& redis, const std::string& pool, const std::vector<std::string>& ids) {
  for (const std::string& w : ids) {
    REMEX_RETURN_IF_ERROR(redis.Execute({"LREM", QueueKey(pool), "0", w}));
    REMEX_RETURN_IF_ERROR(redis.Execute({"HDEL", WaitersKey(pool), w}));
    REMEX_RETURN_IF_ERROR(redis.Execute({"ZREM", AliveKey(pool), w}));
  }
  return OkStatus();
}

bool Free(const DeviceRecord& d) { return !d.leased && !d.drained && d.state != DeviceState::kQuarantined; }

Status CheckHolder(const std::string& holder) {
  if (holder.empty() || holder.size() > kMaxHolderBytes) {
    return InvalidArgument("the lease holder must be 1-" + std::to_string(kMaxHolderBytes) + " bytes");
  }
  for (char c : holder) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgument("the lease holder '" + holder + "' has a control character");
    }
  }
  return OkStatus();
}

// One round of the pool's queue (see the header): the lease when waiter `me` is served
// now; nullopt when it is not (`retry_now`: the transaction lost a race, look again at
// once). `ahead` and `matching` describe the queue for the timeout's message.
struct Round {
  std::optional<Lease> lease;
  bool retry_now = false;
  bool dropped = false;       // `me` is no longer in the queue (judged expired): join again
  bool next_in_line = false;  // assigned a device, after an earlier waiter yet to claim its own
  size_t ahead = 0;
  size_t matching = 0;
};

StatusOr<Round> TryClaim(RedisClient& redis, const LeaseRequest& request, const std::string& holder,
                         const std::string& me) {
  Round round;
  const std::string& pool = request.pool;
  REMEX_RETURN_IF_ERROR(redis.Execute({"WATCH", QueueKey(pool), PoolDevicesKey(pool)}));
  auto fail = [&](Status st) {
    (void)redis.Execute({"UNWATCH"});
    return st;
  };
  auto ids = redis.Query({"SMEMBERS", PoolDevicesKey(pool)});
  if (!ids.ok()) return fail(ids.status());
  std::vector<std::string> watch = {"WATCH"}, keys;
  for (const RedisValue& id : ids->array) {
    watch.push_back(DeviceKey(pool, id.str));
    watch.push_back(LeaseKey(pool, id.str));
    watch.push_back(DrainKey(pool, id.str));
  }
  if (watch.size() > 1) {
    Status st = redis.Execute(watch);
    if (!st.ok()) return fail(st);
  }
  auto devices = redis.ListPool(pool, nullptr, /*prune=*/false);
  if (!devices.ok()) return fail(devices.status());
  auto queue = redis.Query({"LRANGE", QueueKey(pool), "0", std::to_string(kMaxWaiters)});
  if (!queue.ok()) return fail(queue.status());
  auto expired = redis.Query({"EVAL", ExpiredScript(), "2", QueueKey(pool), AliveKey(pool)});
  if (!expired.ok()) return fail(expired.status());
  std::set<std::string> gone;
  for (const RedisValue& w : expired->array) gone.insert(w.str);
  round.dropped = std::none_of(queue->array.begin(), queue->array.end(), [&](const RedisValue& w) { return w.str == me; });
  std::vector<bool> taken(devices->size(), false);
  std::vector<std::string> dead;
  std::optional<size_t> mine;
  bool earlier_assigned = false;  // a waiter ahead has a device to claim
  for (const RedisValue& w : queue->array) {
    if (gone.count(w.str) && w.str != me) {  // its client is gone
      dead.push_back(w.str);
      continue;
    }
    auto selector_text = redis.Query({"HGET", WaitersKey(pool), w.str});
    if (!selector_text.ok()) return fail(selector_text.status());
    if (selector_text->nil()) {
      dead.push_back(w.str);
      continue;
    }
    auto selector = ParseLabelSelector(selector_text->str);
    if (w.str == me) {
      for (const DeviceRecord& d : *devices) round.matching += selector.ok() && selector->Matches(d);
    }
    bool assigned = false;
    for (size_t i = 0; selector.ok() && i < devices->size(); ++i) {
      if (taken[i] || !Free((*devices)[i]) || !selector->Matches((*devices)[i])) continue;
      taken[i] = true;
      assigned = true;
      if (w.str == me) mine = i;
      break;
    }
    if (w.str == me) break;
    earlier_assigned = earlier_assigned || assigned;
    ++round.ahead;
  }
  if (mine && earlier_assigned) {
    // Leases are granted in the order of the queue: the waiters ahead that have a device
    // claim theirs first.
    mine.reset();
    round.next_in_line = true;
  }
  if (!mine) {
    (void)redis.Execute({"UNWATCH"});
    // Drop the dead waiters (outside a transaction: a waiter that expired never comes
    // back).
    (void)Dequeue(redis, pool, dead);
    return round;
  }
  const DeviceRecord& device = (*devices)[*mine];
  auto token = NewToken();
  if (!token.ok()) return fail(token.status());
  Lease lease;
  lease.pool = pool;
  lease.device_id = device.id;
  lease.token = *token;
  lease.holder = holder;
  lease.since_ms = UnixMillis();
  lease.ttl = request.ttl;
  lease.device = device;
  const std::string key = LeaseKey(pool, device.id);
  REMEX_RETURN_IF_ERROR(redis.Execute({"MULTI"}));
  Status st = redis.Execute({"HSET", key, "token", lease.token, "holder", holder, "since_ms",
                             std::to_string(lease.since_ms), "ttl_ms", std::to_string(request.ttl.count())});
  if (st.ok()) st = redis.Execute({"PEXPIRE", key, std::to_string(request.ttl.count())});
  if (st.ok()) st = redis.Execute({"INCR", ServedKey(pool)});
  if (st.ok()) st = Dequeue(redis, pool, {me});
  if (st.ok()) st = Dequeue(redis, pool, dead);
  if (!st.ok()) {
    (void)redis.Execute({"DISCARD"});
    return st;
  }
  REMEX_ASSIGN_OR_RETURN(RedisValue exec, redis.Query({"EXEC"}));
  if (exec.nil()) {  // a watched key changed: someone else moved first
    round.retry_now = true;
    return round;
  }
  if (exec.type != RedisValue::Type::kArray || exec.array.size() < 3) return Internal("EXEC of a lease returned no result");
  lease.ticket = std::stoll(me);
  lease.serial = exec.array[2].integer;
  round.lease = std::move(lease);
  return round;
}

}  // namespace

std::string DefaultHolder() {
  const char* user = std::getenv("USER");
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  std::string holder = std::string(user && *user ? user : "user") + "@" + (host[0] ? host : "host") + " pid " +
                       std::to_string(getpid());
  return holder.substr(0, kMaxHolderBytes);
}

StatusOr<Lease> AcquireLease(RedisClient& redis, const LeaseRequest& request) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(request.pool));
  REMEX_ASSIGN_OR_RETURN(LabelSelector selector, ParseLabelSelector(request.selector));
  const std::string holder = request.holder.empty() ? DefaultHolder() : request.holder;
  REMEX_RETURN_IF_ERROR(CheckHolder(holder));
  if (request.ttl < std::chrono::seconds(1) || request.ttl > std::chrono::hours(24)) {
    return InvalidArgument("a lease's TTL must be between 1 s and 24 h");
  }
  // A selector that no registered device of the pool matches is most likely a mistake:
  // refused at once rather than waited on.
  REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> devices, redis.ListPool(request.pool));
  const bool any = std::any_of(devices.begin(), devices.end(), [&](const DeviceRecord& d) { return selector.Matches(d); });
  if (!any) {
    return NotFound("no device of pool '" + request.pool + "' matches '" + request.selector + "' (" +
                    std::to_string(devices.size()) + " registered in the pool)");
  }
  const auto waiter_ttl = std::max<std::chrono::milliseconds>(std::chrono::seconds(2), request.poll * 10);
  auto join = [&]() -> StatusOr<std::string> {
    REMEX_ASSIGN_OR_RETURN(RedisValue ticket,
                           redis.Query({"EVAL", EnqueueScript(), "4", TicketKey(request.pool), QueueKey(request.pool),
                                        WaitersKey(request.pool), AliveKey(request.pool), request.selector,
                                        std::to_string(waiter_ttl.count())}));
    return std::to_string(ticket.integer);
  };
  REMEX_ASSIGN_OR_RETURN(std::string me, join());
  auto leave = [&](Status st) {
    (void)Dequeue(redis, request.pool, {me});
    return st;
  };
  const auto deadline = std::chrono::steady_clock::now() + request.wait;
  for (;;) {
    auto round = TryClaim(redis, request, holder, me);
    if (!round.ok()) return leave(round.status());
    if (round->lease) return std::move(*round->lease);
    if (round->retry_now) continue;
    if (round->dropped) {  // stalled past its expiry: back in the queue, at its end
      auto again = join();
      if (!again.ok()) return leave(again.status());
      me = *again;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return leave(DeadlineExceeded("no device of pool '" + request.pool + "' matching '" + request.selector +
                                    "' became free within " + std::to_string(request.wait.count() / 1000.0).substr(0, 5) +
                                    " s (" + std::to_string(round->ahead) + " waiting ahead, " +
                                    std::to_string(round->matching) + " devices match)"));
    }
    Status st = redis.Query({"EVAL", RefreshScript(), "1", AliveKey(request.pool), me,
                             std::to_string(waiter_ttl.count())}).status();
    if (!st.ok()) return leave(st);
    const std::chrono::nanoseconds pause = round->next_in_line ? std::chrono::milliseconds(1) : request.poll;
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(pause, deadline - std::chrono::steady_clock::now() + std::chrono::milliseconds(1)));
  }
}

Status RenewLease(RedisClient& redis, const Lease& lease) {
  static const std::string script =
      "if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then "
      "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end return 0";
  REMEX_ASSIGN_OR_RETURN(RedisValue r, redis.Query({"EVAL", script, "1", LeaseKey(lease.pool, lease.device_id),
                                                     lease.token, std::to_string(lease.ttl.count())}));
  if (r.integer != 1) {
    return Aborted("lease lost: the lease of " + lease.device_id + " lapsed (not renewed within its TTL of " +
                   std::to_string(lease.ttl.count()) + " ms) or was released");
  }
  return OkStatus();
}

Status ReleaseLease(RedisClient& redis, const Lease& lease) {
  static const std::string script =
      "if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0";
  return redis.Query({"EVAL", script, "1", LeaseKey(lease.pool, lease.device_id), lease.token}).status();
}

StatusOr<std::string> CurrentLeaseToken(RedisClient& redis, std::string_view pool, std::string_view id) {
  REMEX_ASSIGN_OR_RETURN(RedisValue r, redis.Query({"HGET", LeaseKey(pool, id), "token"}));
  return r.nil() ? std::string() : r.str;
}

Status SetDrained(RedisClient& redis, std::string_view id, bool drained) {
  REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> devices, redis.ListDevices());
  for (const DeviceRecord& d : devices) {
    if (d.id != id) continue;
    if (drained) return redis.Execute({"SET", DrainKey(d.pool, d.id), std::to_string(UnixMillis())});
    return redis.Execute({"DEL", DrainKey(d.pool, d.id)});
  }
  return NotFound("no registered device '" + std::string(id) + "' in the farm");
}

StatusOr<std::map<std::string, int64_t>> QueueLengths(RedisClient& redis, const std::vector<std::string>& pools) {
  std::map<std::string, int64_t> lengths;
  for (const std::string& pool : pools) {
    REMEX_ASSIGN_OR_RETURN(RedisValue length, redis.Query({"LLEN", QueueKey(pool)}));
    REMEX_ASSIGN_OR_RETURN(RedisValue expired, redis.Query({"EVAL", ExpiredScript(), "2", QueueKey(pool), AliveKey(pool)}));
    lengths[pool] = length.integer - static_cast<int64_t>(expired.array.size());
  }
  return lengths;
}

StatusOr<std::unique_ptr<LeaseHolder>> LeaseHolder::Acquire(const RedisUrl& url, const LeaseRequest& request,
                                                            std::chrono::milliseconds timeout) {
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<RedisClient> client, RedisClient::Connect(url, timeout));
  REMEX_ASSIGN_OR_RETURN(Lease lease, AcquireLease(*client, request));
  std::unique_ptr<LeaseHolder> holder(new LeaseHolder(url, std::move(lease), std::move(client), timeout));
  holder->thread_ = std::thread([p = holder.get()] { p->Run(); });
  return holder;
}

LeaseHolder::~LeaseHolder() {
  Status st = Release();
  if (!st.ok()) spdlog::warn("farm: releasing the lease of {}: {}", lease_.device_id, st.ToString());
}

Status LeaseHolder::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

void LeaseHolder::Run() {
  const auto every = lease_.ttl / 3;
  auto last_renewal = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, every, [&] { return stopping_; })) {
    lock.unlock();
    Status st = OkStatus();
    if (!client_) {
      auto c = RedisClient::Connect(url_, timeout_);
      st = c.status();
      if (c.ok()) client_ = std::move(c).value();
    }
    if (st.ok()) st = RenewLease(*client_, lease_);
    lock.lock();
    if (st.ok()) {
      last_renewal = std::chrono::steady_clock::now();
    } else if (st.code() == StatusCode::kAborted || std::chrono::steady_clock::now() - last_renewal > lease_.ttl) {
      lost_ = st.code() == StatusCode::kAborted ? st : Aborted("lease lost: no renewal reached Redis within its TTL: " + st.message());
      spdlog::warn("farm: {}", lost_.ToString());
      return;
    } else {
      client_.reset();  // reconnect at the next renewal
    }
  }
}

Status LeaseHolder::Release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return OkStatus();
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!client_) {
    auto c = RedisClient::Connect(url_, timeout_);
    if (!c.ok()) return c.status();
    client_ = std::move(c).value();
  }
  return ReleaseLease(*client_, lease_);
}

}  // namespace remex::farm
