// Leases of farm devices (rpc/farm_lease.h).

#include "rpc/farm_lease.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <set>

#include "rpc/auth.h"

namespace remex::farm {
namespace {

// Bound on the holder text.
constexpr size_t kMaxHolderBytes = 256;
// A waiter runs the assignment itself at most this often (releases and joins run it at
// once; this catches leases that lapsed and devices that came back).
constexpr std::chrono::milliseconds kAssignEvery{200};
// A waiter refreshes its list of matching devices this often.
constexpr std::chrono::milliseconds kCandidatesEvery{1000};

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

// The assignment, as a Lua function run inside Redis (so that it is atomic and no
// client's view can go stale): every free device of the pool, by id, and the queue, in
// order; each live waiter gets the first free device among its candidates (the ids its
// selector matched, which its client keeps current), as a lease created here with the
// waiter's own public key and a grant the waiter picks up; expired waiters are dropped.
// KEYS: queue, waiters, alive, devices, served; P is the pool's key prefix
// "remex:{POOL}:" (the keys it builds from it, device:, lease:, drain:, grant:, hash to
// the same slot as KEYS).
constexpr std::string_view kAssignLua = R"lua(
local function assign(P, queue, waiters, alive, devices, served)
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local ids = redis.call('SMEMBERS', devices)
  table.sort(ids)
  local free = {}
  for _, id in ipairs(ids) do
    local state = redis.call('HGET', P .. 'device:' .. id, 'state')
    if state and state ~= 'quarantined' and redis.call('EXISTS', P .. 'lease:' .. id) == 0
        and redis.call('EXISTS', P .. 'drain:' .. id) == 0 then
      free[#free + 1] = id
    end
  end
  local function drop(w)
    redis.call('LREM', queue, 0, w)
    redis.call('HDEL', waiters, w .. ':c', w .. ':t', w .. ':h', w .. ':ttl')
    redis.call('ZREM', alive, w)
  end
  for _, w in ipairs(redis.call('LRANGE', queue, 0, 99999)) do
    local e = redis.call('ZSCORE', alive, w)
    if e == false or tonumber(e) < now then
      drop(w)
    elseif #free > 0 then
      local cands = redis.call('HGET', waiters, w .. ':c') or ''
      for i, id in ipairs(free) do
        if string.find(cands, ',' .. id .. ',', 1, true) then
          local ttl = redis.call('HGET', waiters, w .. ':ttl')
          local lease = P .. 'lease:' .. id
          redis.call('HSET', lease, 'key', redis.call('HGET', waiters, w .. ':t'), 'holder',
                     redis.call('HGET', waiters, w .. ':h'), 'since_ms', now, 'ttl_ms', ttl)
          redis.call('PEXPIRE', lease, ttl)
          local serial = redis.call('INCR', served)
          redis.call('SET', P .. 'grant:' .. w, id .. ' ' .. serial, 'PX', ttl)
          drop(w)
          table.remove(free, i)
          break
        end
      end
    end
  end
end
)lua";

// Joins the queue and runs the assignment: KEYS as assign; ARGV P, candidates, key (hex),
// holder, lease ttl_ms, waiter ttl_ms. Returns the waiter's id (its ticket).
const std::string& JoinScript() {
  static const std::string s = std::string(kAssignLua) + R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local w = tostring(redis.call('INCR', ARGV[1] .. 'ticket'))
redis.call('RPUSH', KEYS[1], w)
redis.call('HSET', KEYS[2], w .. ':c', ARGV[2], w .. ':t', ARGV[3], w .. ':h', ARGV[4], w .. ':ttl', ARGV[5])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[6]), w)
assign(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return w
)lua";
  return s;
}
// A waiter's turn: pushes its expiry forward, updates its candidates (when given), and
// (when asked) runs the assignment. KEYS as assign; ARGV P, id, waiter ttl_ms,
// candidates or "", assign "1"/"0". Returns 0 when the waiter is no longer queued.
const std::string& TurnScript() {
  static const std::string s = std::string(kAssignLua) + R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local queued = redis.call('ZSCORE', KEYS[3], ARGV[2]) ~= false
if queued then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
  if ARGV[4] ~= '' then redis.call('HSET', KEYS[2], ARGV[2] .. ':c', ARGV[4]) end
end
if ARGV[5] == '1' then assign(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]) end
if queued then return 1 end
return 0
)lua";
  return s;
}
// Ends a lease held with a key, then runs the assignment (the device goes to the next
// waiter at once). KEYS as assign, then the lease; ARGV P, the lease's public key (hex).
const std::string& ReleaseScript() {
  static const std::string s = std::string(kAssignLua) + R"lua(
if redis.call('HGET', KEYS[6], 'key') == ARGV[2] then redis.call('DEL', KEYS[6]) end
assign(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return 1
)lua";
  return s;
}
// Leaves the queue, unless a grant came first: KEYS queue, waiters, alive, the waiter's
// grant; ARGV id. Returns the grant ("<id> <serial>", taken) or nil (left the queue).
const std::string& LeaveScript() {
  static const std::string s =
      "local g = redis.call('GET', KEYS[4]) if g then redis.call('DEL', KEYS[4]) return g end "
      "redis.call('LREM', KEYS[1], 0, ARGV[1]) "
      "redis.call('HDEL', KEYS[2], ARGV[1] .. ':c', ARGV[1] .. ':t', ARGV[1] .. ':h', ARGV[1] .. ':ttl') "
      "redis.call('ZREM', KEYS[3], ARGV[1]) return false";
  return s;
}

std::string Prefix(std::string_view pool) { return PoolKeyPrefix(pool); }
std::vector<std::string> AssignKeys(const std::string& pool) {
  return {QueueKey(pool), WaitersKey(pool), AliveKey(pool), PoolDevicesKey(pool), ServedKey(pool)};
}

// ",id1,id2," of the pool's registered devices that `selector` matches, and how many.
StatusOr<std::pair<std::string, size_t>> Candidates(RedisClient& redis, const std::string& pool,
                                                    const LabelSelector& selector) {
  REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> devices, redis.ListPool(pool, nullptr, /*leases=*/false));
  std::string ids = ",";
  size_t n = 0;
  for (const DeviceRecord& d : devices) {
    if (!selector.Matches(d)) continue;
    ids += d.id + ",";
    ++n;
  }
  return std::make_pair(ids, n);
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
  const std::string& pool = request.pool;
  const std::string prefix = Prefix(pool);
  // A selector that no registered device of the pool matches is most likely a mistake:
  // refused at once rather than waited on.
  REMEX_ASSIGN_OR_RETURN(auto candidates, Candidates(redis, pool, selector));
  if (candidates.second == 0) {
    REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> all, redis.ListPool(pool, nullptr, /*leases=*/false));
    return NotFound("no device of pool '" + pool + "' matches '" + request.selector + "' (" +
                    std::to_string(all.size()) + " registered in the pool)");
  }
  // The lease's credential: a key pair of its own; Redis gets the public key only.
  REMEX_ASSIGN_OR_RETURN(rpc::LeaseKeyPair key_pair, rpc::NewLeaseKeyPair());
  const std::string public_key = rpc::ToHex(key_pair.public_key);
  const auto waiter_ttl = std::max<std::chrono::milliseconds>(std::chrono::seconds(2), request.poll * 10);
  std::vector<std::string> keys = AssignKeys(pool);
  auto run = [&](const std::string& script, std::vector<std::string> argv) {
    std::vector<std::string> args = {"EVAL", script, std::to_string(keys.size())};
    args.insert(args.end(), keys.begin(), keys.end());
    args.insert(args.end(), argv.begin(), argv.end());
    return redis.Query(args);
  };
  auto join = [&]() -> StatusOr<std::string> {
    REMEX_ASSIGN_OR_RETURN(RedisValue w, run(JoinScript(), {prefix, candidates.first, public_key, holder,
                                                            std::to_string(request.ttl.count()),
                                                            std::to_string(waiter_ttl.count())}));
    return w.str;
  };
  REMEX_ASSIGN_OR_RETURN(std::string me, join());
  // The lease of a grant "<id> <serial>".
  auto granted = [&](const std::string& grant) {
    const size_t space = grant.find(' ');
    Lease lease;
    lease.pool = pool;
    lease.device_id = grant.substr(0, space);
    lease.token = key_pair.secret;
    lease.public_key = public_key;
    lease.holder = holder;
    lease.ttl = request.ttl;
    lease.ticket = std::stoll(me);
    lease.serial = space == std::string::npos ? 0 : std::stoll(grant.substr(space + 1));
    auto since = redis.Query({"HGET", LeaseKey(pool, lease.device_id), "since_ms"});
    lease.since_ms = since.ok() && !since->nil() ? std::stoll(since->str) : UnixMillis();
    auto device = redis.ReadDevice(pool, lease.device_id);
    if (device.ok()) lease.device = std::move(device).value();
    return lease;
  };
  // Leaves the queue with `st`; a grant that came meanwhile is the result instead (a
  // lease is never left behind unheld).
  auto leave = [&](Status st) -> StatusOr<Lease> {
    auto g = redis.Query(
        {"EVAL", LeaveScript(), "4", QueueKey(pool), WaitersKey(pool), AliveKey(pool), prefix + "grant:" + me, me});
    if (g.ok() && !g->nil()) return granted(g->str);
    return st;
  };
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + request.wait;
  auto last_assign = start, last_candidates = start;
  for (;;) {
    // Granted? (GETDEL: a grant is picked up once.)
    auto grant = redis.Query({"GETDEL", prefix + "grant:" + me});
    if (!grant.ok()) return leave(grant.status());
    if (!grant->nil()) return granted(grant->str);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      auto ahead = redis.Query({"LPOS", QueueKey(pool), me});
      const int64_t position = ahead.ok() && !ahead->nil() ? ahead->integer : 0;
      return leave(DeadlineExceeded("no device of pool '" + pool + "' matching '" + request.selector +
                                    "' became free within " + std::to_string(request.wait.count() / 1000.0).substr(0, 5) +
                                    " s (" + std::to_string(position) + " waiting ahead, " +
                                    std::to_string(candidates.second) + " devices match)"));
    }
    std::string new_candidates;
    if (now - last_candidates >= kCandidatesEvery) {
      auto c = Candidates(redis, pool, selector);
      if (!c.ok()) return leave(c.status());
      candidates = *c;
      new_candidates = candidates.first;
      last_candidates = now;
    }
    const bool assign = now - last_assign >= kAssignEvery;
    if (assign) last_assign = now;
    auto turn = run(TurnScript(), {prefix, me, std::to_string(waiter_ttl.count()), new_candidates, assign ? "1" : "0"});
    if (!turn.ok()) return leave(turn.status());
    if (turn->integer == 0) {
      // Dropped (stalled past its expiry) or just granted: a grant is picked up next.
      auto has_grant = redis.Query({"EXISTS", prefix + "grant:" + me});
      if (!has_grant.ok()) return leave(has_grant.status());
      if (has_grant->integer == 0) {
        auto again = join();  // back in the queue, at its end
        if (!again.ok()) return leave(again.status());
        me = *again;
      }
      continue;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(request.poll, deadline - std::chrono::steady_clock::now() + std::chrono::milliseconds(1)));
  }
}

Status RenewLease(RedisClient& redis, const Lease& lease) {
  static const std::string script =
      "if redis.call('HGET', KEYS[1], 'key') == ARGV[1] then "
      "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end return 0";
  REMEX_ASSIGN_OR_RETURN(RedisValue r, redis.Query({"EVAL", script, "1", LeaseKey(lease.pool, lease.device_id),
                                                     lease.public_key, std::to_string(lease.ttl.count())}));
  if (r.integer != 1) {
    return Aborted("lease lost: the lease of " + lease.device_id + " lapsed (not renewed within its TTL of " +
                   std::to_string(lease.ttl.count()) + " ms) or was released");
  }
  return OkStatus();
}

Status ReleaseLease(RedisClient& redis, const Lease& lease) {
  std::vector<std::string> args = {"EVAL", ReleaseScript(), "6"};
  for (const std::string& k : AssignKeys(lease.pool)) args.push_back(k);
  args.push_back(LeaseKey(lease.pool, lease.device_id));
  args.push_back(Prefix(lease.pool));
  args.push_back(lease.public_key);
  return redis.Query(args).status();
}

StatusOr<std::string> CurrentLeaseKey(RedisClient& redis, std::string_view pool, std::string_view id) {
  const std::string key = LeaseKey(pool, id);
  auto refuse = [&](const std::string& why) { return FailedPrecondition("lease record " + key + " is malformed: " + why); };
  // The key's type first: a key of another type is refused, not read.
  REMEX_ASSIGN_OR_RETURN(RedisValue type, redis.Query({"TYPE", key}));
  if (type.str == "none") return std::string();
  if (type.str != "hash") return refuse("a " + type.str + ", not a hash");
  REMEX_ASSIGN_OR_RETURN(RedisValue n, redis.Query({"HLEN", key}));
  if (n.type != RedisValue::Type::kInteger || n.integer > static_cast<int64_t>(kMaxLeaseFields)) {
    return refuse("more than " + std::to_string(kMaxLeaseFields) + " fields");
  }
  // Each value bounded before it is read in full: HSTRLEN of the fields read.
  static constexpr std::string_view kFields[] = {"key", "holder", "since_ms", "ttl_ms"};
  for (std::string_view f : kFields) {
    REMEX_ASSIGN_OR_RETURN(RedisValue len, redis.Query({"HSTRLEN", key, std::string(f)}));
    if (len.integer > static_cast<int64_t>(kMaxLeaseValueBytes)) {
      return refuse("field '" + std::string(f) + "' has more than " + std::to_string(kMaxLeaseValueBytes) + " bytes");
    }
  }
  REMEX_ASSIGN_OR_RETURN(RedisValue all, redis.Query({"HGETALL", key}));
  if (all.type != RedisValue::Type::kArray) return refuse("HGETALL returned no array");
  if (all.array.empty()) return std::string();  // lapsed meanwhile
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < all.array.size(); i += 2) {
    const std::string& name = all.array[i].str;
    if (std::find(std::begin(kFields), std::end(kFields), name) == std::end(kFields)) {
      return refuse("unknown field '" + name.substr(0, 64) + "'");
    }
    fields[name] = all.array[i + 1].str;
  }
  for (std::string_view f : kFields) {
    if (!fields.count(std::string(f))) return refuse("no field '" + std::string(f) + "'");
  }
  const std::string& hex = fields["key"];
  if (hex.size() != 2 * rpc::kLeasePublicKeyBytes ||
      !std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return refuse("field 'key' is not " + std::to_string(2 * rpc::kLeasePublicKeyBytes) +
                  " lowercase hex digits (an Ed25519 public key)");
  }
  if (Status st = CheckHolder(fields["holder"]); !st.ok()) return refuse(st.message());
  for (const char* f : {"since_ms", "ttl_ms"}) {
    const std::string& v = fields[f];
    if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return refuse("field '" + std::string(f) + "' is not a non-negative integer");
    }
  }
  return *rpc::FromHex(hex);
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
  // Read-only commands, no script (a script's keys need write access: docs/farm.md's
  // read-only role lists the farm too): the queue, and the waiters alive by Redis's clock.
  std::map<std::string, int64_t> lengths;
  if (pools.empty()) return lengths;
  REMEX_ASSIGN_OR_RETURN(RedisValue time, redis.Query({"TIME"}));
  if (time.type != RedisValue::Type::kArray || time.array.size() != 2) return Internal("TIME returned no pair");
  int64_t seconds = 0, micros = 0;
  for (auto [field, out] : {std::pair{&time.array[0].str, &seconds}, std::pair{&time.array[1].str, &micros}}) {
    auto [end, ec] = std::from_chars(field->data(), field->data() + field->size(), *out);
    if (ec != std::errc() || end != field->data() + field->size()) return Internal("TIME returned no integers");
  }
  const std::string now = std::to_string(seconds * 1000 + micros / 1000);
  for (const std::string& pool : pools) {
    REMEX_ASSIGN_OR_RETURN(RedisValue queue, redis.Query({"LRANGE", QueueKey(pool), "0", "99999"}));
    REMEX_ASSIGN_OR_RETURN(RedisValue alive, redis.Query({"ZRANGEBYSCORE", AliveKey(pool), now, "+inf"}));
    std::set<std::string> live;
    for (const RedisValue& w : alive.array) live.insert(w.str);
    int64_t n = 0;
    for (const RedisValue& w : queue.array) n += live.count(w.str);
    lengths[pool] = n;
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
