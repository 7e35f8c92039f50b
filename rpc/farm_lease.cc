// Leases of farm devices (rpc/farm_lease.h).

#include "rpc/farm_lease.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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
    if state and state ~= 'quarantined' and redis.call('EXISTS', P .. 'drain:' .. id) == 0
        and not lease_live(P, id, now) then
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
          if lease_write(P, id, redis.call('HGET', waiters, w .. ':t'), redis.call('HGET', waiters, w .. ':h'),
                         now, ttl) then
            local serial = redis.call('INCR', served)
            redis.call('SET', P .. 'grant:' .. w, id .. ' ' .. serial, 'PX', ttl)
            table.remove(free, i)
          end
          drop(w)
          break
        end
      end
    end
  end
end
)lua";

// How the assignment reads and writes lease records. Plain (EVAL, a farm without a farm
// key): a lease is its key's presence.
constexpr std::string_view kPlainLeaseLua = R"lua(
local function lease_live(P, id, now) return redis.call('EXISTS', P .. 'lease:' .. id) == 1 end
local function lease_write(P, id, key, holder, now, ttl)
  local lease = P .. 'lease:' .. id
  redis.call('HSET', lease, 'key', key, 'holder', holder, 'since_ms', now, 'ttl_ms', ttl)
  redis.call('PEXPIRE', lease, ttl)
  return true
end
)lua";

// Signed (the function library, LeaseFunctionsCode): IPAD and OPAD, the farm key's HMAC
// pads, are defined before this. A lease is a record this library wrote (its MAC
// verifies) that has not expired (Redis's clock); any other record at a lease key is
// deleted when the assignment meets it, so that a forged record frees its device.
constexpr std::string_view kSignedLeaseLua = R"lua(
local function unhex(h) return (string.gsub(h, '..', function(c) return string.char(tonumber(c, 16)) end)) end
local function lease_mac(lease, key, holder, since, ttl, expires)
  local m = 'remex-lease-v1'
  for _, v in ipairs({lease, key, holder, since, ttl, expires}) do m = m .. #v .. ':' .. v .. ';' end
  return redis.sha1hex(OPAD .. unhex(redis.sha1hex(IPAD .. m)))
end
local function num(x) return string.format('%.0f', x) end
local function lease_get(lease, now)
  local a = redis.pcall('HGETALL', lease)
  if type(a) ~= 'table' or a['err'] or #a == 0 then return nil end
  local r = {}
  for i = 1, #a - 1, 2 do r[a[i]] = a[i + 1] end
  if not (r.key and r.holder and r.since_ms and r.ttl_ms and r.expires_ms and r.mac) then return nil end
  if lease_mac(lease, r.key, r.holder, r.since_ms, r.ttl_ms, r.expires_ms) ~= r.mac then return nil end
  local e = tonumber(r.expires_ms)
  if e == nil or e < now then return nil end
  return r
end
local function lease_live(P, id, now)
  local lease = P .. 'lease:' .. id
  if lease_get(lease, now) then return true end
  redis.call('DEL', lease)
  return false
end
local function lease_sign(lease, key, holder, since, ttl, expires)
  redis.call('DEL', lease)
  redis.call('HSET', lease, 'key', key, 'holder', holder, 'since_ms', since, 'ttl_ms', ttl, 'expires_ms', expires,
             'mac', lease_mac(lease, key, holder, since, ttl, expires))
  redis.call('PEXPIRE', lease, ttl)
end
local function lease_write(P, id, key, holder, now, ttl)
  local t = tonumber(ttl)
  if t == nil or t < 1000 or t > 86400000 or type(key) ~= 'string' or #key ~= 64
      or string.find(key, '[^0-9a-f]') or type(holder) ~= 'string' or #holder < 1 or #holder > 256
      or string.find(holder, '%c') then
    return false
  end
  lease_sign(P .. 'lease:' .. id, key, holder, num(now), num(t), num(now + t))
  return true
end
)lua";

// Joins the queue and runs the assignment: KEYS as assign; ARGV P, candidates, key (hex),
// holder, lease ttl_ms, waiter ttl_ms. Returns the waiter's id (its ticket).
constexpr std::string_view kJoinLua = R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local w = tostring(redis.call('INCR', ARGV[1] .. 'ticket'))
redis.call('RPUSH', KEYS[1], w)
redis.call('HSET', KEYS[2], w .. ':c', ARGV[2], w .. ':t', ARGV[3], w .. ':h', ARGV[4], w .. ':ttl', ARGV[5])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[6]), w)
assign(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return w
)lua";
// A waiter's turn: pushes its expiry forward, updates its candidates (when given), and
// (when asked) runs the assignment. KEYS as assign; ARGV P, id, waiter ttl_ms,
// candidates or "", assign "1"/"0". Returns 0 when the waiter is no longer queued.
constexpr std::string_view kTurnLua = R"lua(
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
// Ends a lease held with a key, then runs the assignment (the device goes to the next
// waiter at once). KEYS as assign, then the lease; ARGV P, the lease's public key (hex).
constexpr std::string_view kReleaseLua = R"lua(
if redis.call('HGET', KEYS[6], 'key') == ARGV[2] then redis.call('DEL', KEYS[6]) end
assign(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return 1
)lua";
// Extends a lease held with a key. KEYS: the lease; ARGV: its public key (hex), the TTL
// in ms (plain; the signed renewal keeps the record's ttl_ms and refuses a record it
// did not write). Returns 1, or 0 when the lease is not that key's.
constexpr std::string_view kPlainRenewLua = R"lua(
if redis.call('HGET', KEYS[1], 'key') == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0
)lua";
constexpr std::string_view kSignedRenewLua = R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local r = lease_get(KEYS[1], now)
if r == nil or r.key ~= ARGV[1] then return 0 end
lease_sign(KEYS[1], r.key, r.holder, r.since_ms, r.ttl_ms, num(now + tonumber(r.ttl_ms)))
return 1
)lua";

// The EVAL scripts of a farm without a farm key.
const std::string& PlainScript(std::string_view body) {
  static const std::string join = std::string(kPlainLeaseLua) + std::string(kAssignLua) + std::string(kJoinLua);
  static const std::string turn = std::string(kPlainLeaseLua) + std::string(kAssignLua) + std::string(kTurnLua);
  static const std::string release = std::string(kPlainLeaseLua) + std::string(kAssignLua) + std::string(kReleaseLua);
  static const std::string renew(kPlainRenewLua);
  if (body == kJoinLua) return join;
  if (body == kTurnLua) return turn;
  if (body == kReleaseLua) return release;
  return renew;
}

// Runs a lease script: the library's function `name` when the farm has it, else the
// plain script of `body` with EVAL (a farm without a farm key; or a Redis user that may
// not FCALL, whose records a server with a farm key then refuses).
StatusOr<RedisValue> RunLeaseScript(RedisClient& redis, const char* name, std::string_view body,
                                    const std::vector<std::string>& keys, const std::vector<std::string>& argv) {
  auto args = [&](std::string command, std::string what) {
    std::vector<std::string> a = {std::move(command), std::move(what), std::to_string(keys.size())};
    a.insert(a.end(), keys.begin(), keys.end());
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  };
  if (redis.lease_functions.value_or(true)) {
    auto r = redis.Query(args("FCALL", name));
    const std::string& why = r.status().message();
    if (r.ok() || (why.find("Function not found") == std::string::npos &&
                   why.find("permissions to run the 'fcall' command") == std::string::npos &&
                   why.find("unknown command") == std::string::npos)) {
      if (r.ok()) redis.lease_functions = true;
      return r;
    }
    redis.lease_functions = false;
  }
  return redis.Query(args("EVAL", PlainScript(body)));
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

// Lua's decimal escape of every byte of `bytes`, quoted.
std::string LuaBytes(std::string_view bytes) {
  std::string out = "'";
  for (unsigned char c : bytes) out += "\\" + std::to_string(static_cast<int>(c));
  return out + "'";
}

}  // namespace

StatusOr<std::string> ReadFarmKeyFile(const std::string& path) {
  const std::string where = "farm key file '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InvalidArgument(where + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument(where + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    return InvalidArgument(where + ": readable or writable by group or others (chmod 600 it): it is the farm's secret");
  }
  if (static_cast<size_t>(st.st_size) > kMaxFarmKeyBytes) {
    return InvalidArgument(where + ": more than " + std::to_string(kMaxFarmKeyBytes) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(where + ": cannot be opened");
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (key.size() < kMinFarmKeyBytes || key.size() > kMaxFarmKeyBytes) {
    return InvalidArgument(where + ": " + std::to_string(key.size()) + " bytes; a farm key has " +
                           std::to_string(kMinFarmKeyBytes) + "-" + std::to_string(kMaxFarmKeyBytes) +
                           " (e.g. head -c 32 /dev/urandom | base64 > FILE)");
  }
  return key;
}

std::string LeaseMacMessage(std::string_view lease_key, std::string_view key, std::string_view holder,
                            std::string_view since_ms, std::string_view ttl_ms, std::string_view expires_ms) {
  std::string m = "remex-lease-v1";
  for (std::string_view v : {lease_key, key, holder, since_ms, ttl_ms, expires_ms}) {
    m += std::to_string(v.size()) + ":" + std::string(v) + ";";
  }
  return m;
}

std::string LeaseMac(std::string_view farm_key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha1(), farm_key.data(), static_cast<int>(farm_key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  return rpc::ToHex(std::string_view(reinterpret_cast<const char*>(mac), n));
}

std::string LeaseFunctionsCode(std::string_view farm_key) {
  // HMAC's pads (RFC 2104): a key longer than SHA-1's block is hashed first.
  constexpr size_t kBlock = 64;
  std::string k(farm_key);
  if (k.size() > kBlock) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(k.data()), k.size(), digest);
    k.assign(reinterpret_cast<const char*>(digest), SHA_DIGEST_LENGTH);
  }
  k.resize(kBlock, '\0');
  std::string ipad(kBlock, '\0'), opad(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<char>(k[i] ^ 0x36);
    opad[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  std::string code = "#!lua name=" + std::string(kLeaseLibrary) + "\n";
  code += "local IPAD = " + LuaBytes(ipad) + "\nlocal OPAD = " + LuaBytes(opad) + "\n";
  code += std::string(kSignedLeaseLua) + std::string(kAssignLua);
  auto add = [&](const char* name, std::string_view body) {
    code += "redis.register_function('" + std::string(name) + "', function(KEYS, ARGV)\n" + std::string(body) +
            "\nend)\n";
  };
  add("remex_join", kJoinLua);
  add("remex_turn", kTurnLua);
  add("remex_release", kReleaseLua);
  add("remex_renew", kSignedRenewLua);
  return code;
}

Status InstallLeaseFunctions(RedisClient& redis, std::string_view farm_key) {
  if (farm_key.size() < kMinFarmKeyBytes) {
    return InvalidArgument("a farm key has at least " + std::to_string(kMinFarmKeyBytes) + " bytes");
  }
  auto r = redis.Query({"FUNCTION", "LOAD", "REPLACE", LeaseFunctionsCode(farm_key)});
  if (!r.ok()) return r.status().WithContext("loading the farm's lease functions (FUNCTION LOAD)");
  return OkStatus();
}

Status LeaseVerifier::Check(std::string_view lease_key, const std::map<std::string, std::string>& fields,
                            int64_t now_ms) {
  const std::string name(lease_key);
  auto field = [&](const char* f) -> const std::string* {
    auto it = fields.find(f);
    return it == fields.end() ? nullptr : &it->second;
  };
  const std::string *key = field("key"), *holder = field("holder"), *since = field("since_ms"),
                    *ttl = field("ttl_ms"), *expires = field("expires_ms"), *mac = field("mac");
  if (!key || !holder || !since || !ttl || !expires || !mac) {
    return FailedPrecondition("lease record " + name + " is not signed by the farm key (it has no mac or expires_ms: "
                              "it was not written by the farm's lease functions)");
  }
  const std::string expected = LeaseMac(farm_key_, LeaseMacMessage(lease_key, *key, *holder, *since, *ttl, *expires));
  if (mac->size() != expected.size() || CRYPTO_memcmp(mac->data(), expected.data(), expected.size()) != 0) {
    return FailedPrecondition("lease record " + name + " is not signed by the farm key (its mac does not verify: "
                              "it was not written by the farm's lease functions)");
  }
  int64_t since_ms = 0, expires_ms = 0;
  for (auto [text, out] : {std::pair{since, &since_ms}, std::pair{expires, &expires_ms}}) {
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), *out);
    if (ec != std::errc() || end != text->data() + text->size()) {
      return FailedPrecondition("lease record " + name + ": a time is not an integer");
    }
  }
  if (expires_ms < now_ms) {
    return FailedPrecondition("lease record " + name + " expired " + std::to_string(now_ms - expires_ms) +
                              " ms ago (expires_ms, by Redis's clock): a lease written back after it lapsed");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (since_ms < ended_since_ || (since_ms == ended_since_ && *key == ended_key_)) {
    return FailedPrecondition("lease record " + name + " is of a lease that this server saw end (since_ms " +
                              std::to_string(since_ms) + "): a lease written back after its end");
  }
  if (!last_key_.empty() && (*key != last_key_ || since_ms != last_since_) && last_since_ >= ended_since_) {
    ended_key_ = last_key_;  // the lease seen before has ended: a new one replaced it
    ended_since_ = last_since_;
  }
  last_key_ = *key;
  last_since_ = since_ms;
  return OkStatus();
}

void LeaseVerifier::NoLease() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!last_key_.empty() && last_since_ >= ended_since_) {
    ended_key_ = last_key_;
    ended_since_ = last_since_;
  }
  last_key_.clear();
  last_since_ = -1;
}

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
  auto join = [&]() -> StatusOr<std::string> {
    REMEX_ASSIGN_OR_RETURN(RedisValue w, RunLeaseScript(redis, "remex_join", kJoinLua, keys, {prefix, candidates.first, public_key, holder,
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
    auto turn = RunLeaseScript(redis, "remex_turn", kTurnLua, keys, {prefix, me, std::to_string(waiter_ttl.count()), new_candidates, assign ? "1" : "0"});
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
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunLeaseScript(redis, "remex_renew", kPlainRenewLua,
                                                       {LeaseKey(lease.pool, lease.device_id)},
                                                       {lease.public_key, std::to_string(lease.ttl.count())}));
  if (r.integer != 1) {
    return Aborted("lease lost: the lease of " + lease.device_id + " lapsed (not renewed within its TTL of " +
                   std::to_string(lease.ttl.count()) + " ms) or was released");
  }
  return OkStatus();
}

Status ReleaseLease(RedisClient& redis, const Lease& lease) {
  std::vector<std::string> keys = AssignKeys(lease.pool);
  keys.push_back(LeaseKey(lease.pool, lease.device_id));
  return RunLeaseScript(redis, "remex_release", kReleaseLua, keys, {Prefix(lease.pool), lease.public_key}).status();
}

StatusOr<std::string> CurrentLeaseKey(RedisClient& redis, std::string_view pool, std::string_view id,
                                      LeaseVerifier* verifier) {
  const std::string key = LeaseKey(pool, id);
  auto refuse = [&](const std::string& why) { return FailedPrecondition("lease record " + key + " is malformed: " + why); };
  // The key's type first: a key of another type is refused, not read.
  REMEX_ASSIGN_OR_RETURN(RedisValue type, redis.Query({"TYPE", key}));
  if (type.str == "none") {
    if (verifier) verifier->NoLease();
    return std::string();
  }
  if (type.str != "hash") return refuse("a " + type.str + ", not a hash");
  REMEX_ASSIGN_OR_RETURN(RedisValue n, redis.Query({"HLEN", key}));
  if (n.type != RedisValue::Type::kInteger || n.integer > static_cast<int64_t>(kMaxLeaseFields)) {
    return refuse("more than " + std::to_string(kMaxLeaseFields) + " fields");
  }
  // Each value bounded before it is read in full: HSTRLEN of the fields read.
  static constexpr std::string_view kFields[] = {"key", "holder", "since_ms", "ttl_ms"};
  // Written by the farm's lease functions (a farm with a farm key): required and checked
  // with a verifier, allowed without one.
  static constexpr std::string_view kSignedFields[] = {"expires_ms", "mac"};
  std::vector<std::string_view> read(std::begin(kFields), std::end(kFields));
  read.insert(read.end(), std::begin(kSignedFields), std::end(kSignedFields));
  for (std::string_view f : read) {
    REMEX_ASSIGN_OR_RETURN(RedisValue len, redis.Query({"HSTRLEN", key, std::string(f)}));
    if (len.integer > static_cast<int64_t>(kMaxLeaseValueBytes)) {
      return refuse("field '" + std::string(f) + "' has more than " + std::to_string(kMaxLeaseValueBytes) + " bytes");
    }
  }
  REMEX_ASSIGN_OR_RETURN(RedisValue all, redis.Query({"HGETALL", key}));
  if (all.type != RedisValue::Type::kArray) return refuse("HGETALL returned no array");
  if (all.array.empty()) {  // lapsed meanwhile
    if (verifier) verifier->NoLease();
    return std::string();
  }
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < all.array.size(); i += 2) {
    const std::string& name = all.array[i].str;
    if (std::find(read.begin(), read.end(), name) == read.end()) {
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
  if (verifier) {
    REMEX_ASSIGN_OR_RETURN(RedisValue time, redis.Query({"TIME"}));
    int64_t seconds = -1, micros = -1;
    if (time.type == RedisValue::Type::kArray && time.array.size() == 2) {
      std::from_chars(time.array[0].str.data(), time.array[0].str.data() + time.array[0].str.size(), seconds);
      std::from_chars(time.array[1].str.data(), time.array[1].str.data() + time.array[1].str.size(), micros);
    }
    if (seconds < 0 || micros < 0) return Internal("TIME returned no pair of integers");
    REMEX_RETURN_IF_ERROR(verifier->Check(key, fields, seconds * 1000 + micros / 1000));
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
