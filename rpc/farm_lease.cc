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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include "rpc/auth.h"

namespace remex::farm {
namespace {

// Bound on the holder text.
constexpr size_t kMaxHolderBytes = 256;

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

// What every lease script shares (after the lease variant above): the selector's match,
// the eligibility of a device, the grant and the assignment. P is the pool's key prefix
// "remex:{POOL}:"; every key is built from it and hashes to the pool's slot.
//
// A selector arrives as the lines "OP\tKEY\tVALUE" (SelectorTerms: OP eq, ne, ge, gt, le,
// lt, ex, ab), parsed and checked by ParseLabelSelector in C++; matches() evaluates them
// as LabelSelector::Matches does (rpc/farm.cc; FarmRedisTest.TheAssignmentMatchesAsTheSelectorDoes
// checks that both agree).
constexpr std::string_view kAssignLua = R"lua(
local PICKUP_MS = 5000
local function now_ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local function terms_of(s)
  local terms = {}
  for line in string.gmatch(s, '[^\n]+') do
    local op, k, v = string.match(line, '^(%a%a)\t([^\t]*)\t(.*)$')
    if op then terms[#terms + 1] = {op = op, k = k, v = v} end
  end
  return terms
end
local function version(s)
  if s == nil then return nil end
  local parts = {}
  for part in string.gmatch(s .. '.', '([^.]*)%.') do
    if #part == 0 or #part > 9 or string.find(part, '[^0-9]') then return nil end
    parts[#parts + 1] = tonumber(part)
    if #parts > 8 then return nil end
  end
  if #parts == 0 then return nil end
  return parts
end
local function compare(a, b)
  for i = 1, math.max(#a, #b) do
    local x, y = a[i] or 0, b[i] or 0
    if x ~= y then if x < y then return -1 end return 1 end
  end
  return 0
end
-- A device's record as the selector sees it, or nil when it has none.
local function record(P, id)
  local f = redis.call('HMGET', P .. 'device:' .. id, 'state', 'pool', 'kind', 'labels')
  if not f[1] then return nil end
  local labels = {}
  for k, v in string.gmatch(f[4] or '', '([^,=]+)=([^,]*)') do labels[k] = v end
  return {state = f[1], pool = f[2], kind = f[3], labels = labels}
end
local function matches(terms, rec)
  for _, t in ipairs(terms) do
    local have = rec.labels[t.k]
    if have == nil then
      if t.k == 'pool' then have = rec.pool elseif t.k == 'kind' then have = rec.kind end
    end
    local ok
    if t.op == 'ex' then ok = have ~= nil
    elseif t.op == 'ab' then ok = have == nil
    elseif t.op == 'eq' then ok = have ~= nil and have == t.v
    elseif t.op == 'ne' then ok = have == nil or have ~= t.v
    else
      local a, b = version(have), version(t.v)
      ok = false
      if a and b then
        local c = compare(a, b)
        ok = (t.op == 'ge' and c >= 0) or (t.op == 'gt' and c > 0) or (t.op == 'le' and c <= 0) or (t.op == 'lt' and c < 0)
      end
    end
    if not ok then return false end
  end
  return true
end
-- The smallest label index among the selector's terms that a device must be in
-- (KEY=VALUE, KEY; not pool and kind, which are record fields), if smaller than `bound`.
local function index_of(P, terms, bound)
  local best, n = nil, bound
  for _, t in ipairs(terms) do
    if (t.op == 'eq' or t.op == 'ex') and t.k ~= 'pool' and t.k ~= 'kind' then
      local key = P .. 'label:' .. t.k
      if t.op == 'eq' then key = key .. '=' .. t.v end
      local size = redis.call('SCARD', key)
      if size < n then best, n = key, size end
    end
  end
  return best, n
end
local function drop_waiter(P, w)
  local c = redis.call('HGET', P .. 'waiters', w .. ':c')
  if c then redis.call('ZREM', P .. 'class:' .. c, w) end
  redis.call('ZREM', P .. 'waiting', w)
  redis.call('HDEL', P .. 'waiters', w .. ':c', w .. ':t', w .. ':h', w .. ':ttl')
  redis.call('ZREM', P .. 'alive', w)
end
-- A device that can be leased now: registered, healthy, not drained, no live lease.
-- Returns its record, or nil and whether it has no record at all.
local function eligible(P, id, now)
  local rec = record(P, id)
  if rec == nil then return nil, true end
  if rec.state == 'quarantined' or redis.call('EXISTS', P .. 'drain:' .. id) == 1 or lease_live(P, id, now) then
    return nil, false
  end
  return rec, false
end
-- The first device by id of the pool's free set that is eligible and matches `terms`;
-- ids found no longer free leave the set (and the label index, once their record is gone).
local function pick(P, terms, now)
  local free = P .. 'free'
  local index, n = index_of(P, terms, redis.call('ZCARD', free))
  if index then
    if n == 0 then return nil end
    local ids = redis.call('SMEMBERS', index)
    table.sort(ids)
    for _, id in ipairs(ids) do
      if redis.call('ZSCORE', free, id) then
        local rec, gone = eligible(P, id, now)
        if rec == nil then
          redis.call('ZREM', free, id)
          if gone then redis.call('SREM', index, id) end
        elseif matches(terms, rec) then return id end
      end
    end
    return nil
  end
  local after = '-'
  while true do
    local ids = redis.call('ZRANGE', free, after, '+', 'BYLEX', 'LIMIT', 0, 64)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      local rec = eligible(P, id, now)
      if rec == nil then redis.call('ZREM', free, id)
      elseif matches(terms, rec) then return id end
    end
    after = '(' .. ids[#ids]
  end
end
-- Whether any registered device of the pool (free or not) matches `terms`.
local function any_match(P, terms)
  local index = index_of(P, terms, math.huge)
  if index then
    for _, id in ipairs(redis.call('SMEMBERS', index)) do
      local rec = record(P, id)
      if rec and matches(terms, rec) then return true end
    end
    return false
  end
  local cursor = '0'
  repeat
    local r = redis.call('SSCAN', P .. 'devices', cursor, 'COUNT', 128)
    cursor = r[1]
    for _, id in ipairs(r[2]) do
      local rec = record(P, id)
      if rec and matches(terms, rec) then return true end
    end
  until cursor == '0'
  return false
end
-- Grants device `id` to waiter w (a lease with the waiter's public key, and the grant
-- "<id> <serial> <since_ms>" pushed to the list it blocks on); the waiter leaves the queue.
-- False (the waiter dropped, the device still free) when w is no live waiter.
local function grant(P, w, id, now)
  local e = redis.call('ZSCORE', P .. 'alive', w)
  local f = redis.call('HMGET', P .. 'waiters', w .. ':t', w .. ':h', w .. ':ttl')
  if not e or tonumber(e) < now or not f[1] or not f[2] or not f[3] then
    drop_waiter(P, w)
    return false
  end
  drop_waiter(P, w)
  if not lease_write(P, id, f[1], f[2], now, f[3]) then return false end
  redis.call('ZREM', P .. 'free', id)
  -- Until its waiter picks it up (and renews it), the lease lapses after PICKUP_MS.
  redis.call('ZADD', P .. 'leases', now + math.min(tonumber(f[3]), PICKUP_MS), id)
  local serial = redis.call('INCR', P .. 'served')
  redis.call('RPUSH', P .. 'grant:' .. w, id .. ' ' .. serial .. ' ' .. now)
  redis.call('PEXPIRE', P .. 'grant:' .. w, f[3])
  return true
end
-- What may have changed since the last look: leases that lapsed (their records deleted),
-- devices announced free (the wake-ups in 'freed'), waiters that expired. True when a device
-- may have become free.
local function sweep(P, now)
  local found = false
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', now, 'LIMIT', 0, 256)) do
    redis.call('ZREM', P .. 'leases', id)
    redis.call('DEL', P .. 'lease:' .. id)
    redis.call('ZADD', P .. 'free', 0, id)
    found = true
  end
  local freed = redis.call('LRANGE', P .. 'freed', 0, -1)
  if #freed > 0 then
    redis.call('DEL', P .. 'freed')
    for _, id in ipairs(freed) do redis.call('ZADD', P .. 'free', 0, id) end
    found = true
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'alive', '-inf', '(' .. now, 'LIMIT', 0, 1024)) do
    drop_waiter(P, w)
  end
  return found
end
-- The assignment: while a device is free, the waiter with the lowest ticket among the
-- heads of the selector classes that some free device matches gets the first such
-- device by id. Runs only when a device may have become free (`force`, or the sweep).
local function assign(P, now, force)
  if not sweep(P, now) and not force then return end
  if redis.call('ZCARD', P .. 'free') == 0 then return end
  local all = redis.call('HGETALL', P .. 'classes')
  local heads = {}
  for i = 1, #all, 2 do
    local h = redis.call('ZRANGE', P .. 'class:' .. all[i], 0, 0, 'WITHSCORES')
    if #h == 0 then redis.call('HDEL', P .. 'classes', all[i])
    else heads[#heads + 1] = {c = all[i], terms = terms_of(all[i + 1]), w = h[1], t = tonumber(h[2])} end
  end
  while redis.call('ZCARD', P .. 'free') > 0 do
    local best = nil
    for _, h in ipairs(heads) do
      if not h.done and (best == nil or h.t < best.t) then best = h end
    end
    if best == nil then return end
    local id = pick(P, best.terms, now)
    if id == nil then
      best.done = true  -- no free device matches its class (and the free set only shrinks here)
    else
      grant(P, best.w, id, now)
      local h = redis.call('ZRANGE', P .. 'class:' .. best.c, 0, 0, 'WITHSCORES')
      if #h == 0 then best.done = true else best.w, best.t = h[1], tonumber(h[2]) end
    end
  end
end
)lua";

// Joins the queue and runs the assignment. KEYS: the pool's 'waiting' (for routing; the
// rest are built from P). ARGV: P, the selector's terms, key (hex), holder, lease ttl_ms,
// waiter ttl_ms, "1" when the client will wait. Returns {waiter id, outcome, waiting
// ahead}: outcome "granted" (the grant is in its list), "queued", "busy" (not waiting;
// left the queue), "none" (no registered device matches: left the queue).
constexpr std::string_view kJoinLua = R"lua(
local P = ARGV[1]
local now = now_ms()
local w = tostring(redis.call('INCR', P .. 'ticket'))
local c = redis.sha1hex(ARGV[2])
redis.call('ZADD', P .. 'waiting', w, w)
redis.call('ZADD', P .. 'class:' .. c, w, w)
redis.call('HSET', P .. 'classes', c, ARGV[2])
redis.call('HSET', P .. 'waiters', w .. ':c', c, w .. ':t', ARGV[3], w .. ':h', ARGV[4], w .. ':ttl', ARGV[5])
redis.call('ZADD', P .. 'alive', now + tonumber(ARGV[6]), w)
assign(P, now, true)
if redis.call('EXISTS', P .. 'grant:' .. w) == 1 then return {w, 'granted', 0} end
local ahead = redis.call('ZRANK', P .. 'waiting', w) or 0
if not any_match(P, terms_of(ARGV[2])) then drop_waiter(P, w) return {w, 'none', ahead} end
if ARGV[7] ~= '1' then drop_waiter(P, w) return {w, 'busy', ahead} end
return {w, 'queued', ahead}
)lua";
// A waiter's heartbeat, or its turn after it popped a device id from 'freed': pushes its
// expiry forward and runs the assignment when a device may have become free. KEYS as
// join; ARGV P, waiter id, waiter ttl_ms, the popped device id or "". Returns 1 while the
// waiter is queued, 0 when it is not (granted, or dropped).
constexpr std::string_view kTurnLua = R"lua(
local P, w = ARGV[1], ARGV[2]
local now = now_ms()
local queued = redis.call('ZSCORE', P .. 'alive', w) ~= false
if queued then redis.call('ZADD', P .. 'alive', now + tonumber(ARGV[3]), w) end
if ARGV[4] ~= '' then
  redis.call('ZADD', P .. 'free', 0, ARGV[4])
  assign(P, now, true)
elseif redis.call('SET', P .. 'swept', '1', 'PX', 500, 'NX') then
  -- A heartbeat sweeps (lapsed leases, expired waiters) at most twice a second per pool.
  assign(P, now, false)
else
  return queued and 1 or 0
end
if queued and redis.call('ZSCORE', P .. 'alive', w) then return 1 end
return 0
)lua";
// Ends a lease held with a key, then runs the assignment (the device goes to the next
// waiter at once). KEYS: the lease; ARGV P, the lease's public key (hex), the device id.
constexpr std::string_view kReleaseLua = R"lua(
local P = ARGV[1]
if redis.call('HGET', KEYS[1], 'key') == ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', P .. 'leases', ARGV[3])
  redis.call('ZADD', P .. 'free', 0, ARGV[3])
end
assign(P, now_ms(), true)
return 1
)lua";
// Leaves the queue, unless a grant came first. KEYS as join; ARGV P, waiter id. Returns
// the grant (taken) or nil (left the queue).
constexpr std::string_view kLeaveLua = R"lua(
local g = redis.call('LPOP', ARGV[1] .. 'grant:' .. ARGV[2])
if g then return g end
drop_waiter(ARGV[1], ARGV[2])
return false
)lua";
// Extends a lease held with a key. KEYS: the lease; ARGV: its public key (hex), the TTL in
// ms (plain; the signed renewal keeps the record's ttl_ms and refuses a record it did not
// write), P, the device id. Returns 1, or 0 when the lease is not that key's (it ended
// without a release: the device joins the free set, for the next assignment to check).
constexpr std::string_view kPlainRenewLua = R"lua(
if redis.call('HGET', KEYS[1], 'key') ~= ARGV[1] then
  redis.call('ZADD', ARGV[3] .. 'free', 0, ARGV[4])  -- ended (or replaced): the next assignment looks
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', ARGV[3] .. 'leases', now_ms() + tonumber(ARGV[2]), ARGV[4])
return 1
)lua";
constexpr std::string_view kSignedRenewLua = R"lua(
local now = now_ms()
local r = lease_get(KEYS[1], now)
if r == nil or r.key ~= ARGV[1] then
  redis.call('ZADD', ARGV[3] .. 'free', 0, ARGV[4])
  return 0
end
lease_sign(KEYS[1], r.key, r.holder, r.since_ms, r.ttl_ms, num(now + tonumber(r.ttl_ms)))
redis.call('ZADD', ARGV[3] .. 'leases', now + tonumber(r.ttl_ms), ARGV[4])
return 1
)lua";

// The lease scripts: the function of the library (a farm with a farm key) and the body of
// the EVAL script (a farm without one) of each.
struct LeaseScript {
  const char* function;
  std::string_view body;
};
constexpr LeaseScript kJoin{"remex_v2_join", kJoinLua};
constexpr LeaseScript kTurn{"remex_v2_turn", kTurnLua};
constexpr LeaseScript kRelease{"remex_v2_release", kReleaseLua};
constexpr LeaseScript kLeave{"remex_v2_leave", kLeaveLua};
constexpr LeaseScript kPlainRenew{"remex_v2_renew", kPlainRenewLua};
constexpr LeaseScript kScripts[] = {kJoin, kTurn, kRelease, kLeave};

// The EVAL script of `body` for a farm without a farm key.
const std::string& PlainScript(std::string_view body) {
  static const std::map<std::string_view, std::string> scripts = [] {
    std::map<std::string_view, std::string> m;
    const std::string common = std::string(kPlainLeaseLua) + std::string(kAssignLua);
    for (const LeaseScript& s : kScripts) m[s.body] = common + std::string(s.body);
    m[kPlainRenewLua] = common + std::string(kPlainRenewLua);
    return m;
  }();
  return scripts.at(body);
}

// SHA-1 of a script's text in hex: its name in Redis's script cache (EVALSHA).
const std::string& ScriptSha(const std::string& body) {
  static std::mutex mutex;
  static std::map<const std::string*, std::string> shas;
  std::lock_guard<std::mutex> lock(mutex);
  std::string& sha = shas[&body];
  if (sha.empty()) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
    sha = rpc::ToHex(std::string_view(reinterpret_cast<const char*>(digest), SHA_DIGEST_LENGTH));
  }
  return sha;
}

// Runs a lease script: the library's function when the farm has it, else the plain
// script with EVAL (a farm without a farm key; or a Redis user that may not FCALL, whose
// records a server with a farm key then refuses).
StatusOr<RedisValue> RunLeaseScript(RedisClient& redis, const LeaseScript& script, const std::vector<std::string>& keys,
                                    const std::vector<std::string>& argv) {
  auto args = [&](std::string command, std::string what) {
    std::vector<std::string> a = {std::move(command), std::move(what), std::to_string(keys.size())};
    a.insert(a.end(), keys.begin(), keys.end());
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  };
  if (redis.lease_functions.value_or(true)) {
    auto r = redis.Query(args("FCALL", script.function));
    const std::string& why = r.status().message();
    if (r.ok() || (why.find("Function not found") == std::string::npos &&
                   why.find("permissions to run the 'fcall' command") == std::string::npos &&
                   why.find("unknown command") == std::string::npos)) {
      if (r.ok()) redis.lease_functions = true;
      return r;
    }
    redis.lease_functions = false;
  }
  // EVALSHA: Redis has the script cached after its first EVAL (the body, several KiB, is
  // not sent and hashed at every call); EVAL when it has not (NOSCRIPT).
  const std::string& body = PlainScript(script.body);
  auto r = redis.Query(args("EVALSHA", ScriptSha(body)));
  if (r.ok() || r.status().message().find("NOSCRIPT") == std::string::npos) return r;
  return redis.Query(args("EVAL", body));
}

std::string Prefix(std::string_view pool) { return PoolKeyPrefix(pool); }

// How many of the pool's registered devices `selector` matches, read record by record
// (for the error messages only).
StatusOr<size_t> MatchingDevices(RedisClient& redis, const std::string& pool, const LabelSelector& selector) {
  REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> devices, redis.ListPool(pool, nullptr, /*leases=*/false));
  return static_cast<size_t>(std::count_if(devices.begin(), devices.end(),
                                           [&](const DeviceRecord& d) { return selector.Matches(d); }));
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
  for (const LeaseScript& script : kScripts) add(script.function, script.body);
  add(kPlainRenew.function, kSignedRenewLua);
  return code;
}

Status InstallLeaseFunctions(RedisClient& redis, std::string_view farm_key) {
  if (farm_key.size() < kMinFarmKeyBytes) {
    return InvalidArgument("a farm key has at least " + std::to_string(kMinFarmKeyBytes) + " bytes");
  }
  Status st = redis.ExecuteOnEachPrimary({"FUNCTION", "LOAD", "REPLACE", LeaseFunctionsCode(farm_key)});
  if (!st.ok()) return st.WithContext("loading the farm's lease functions (FUNCTION LOAD)");
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

namespace {

// The selector's terms as the lease scripts read them (kAssignLua): "OP\tKEY\tVALUE" lines,
// sorted, so that one selector written two ways is one class of waiters.
std::string SelectorTerms(const LabelSelector& selector) {
  std::vector<std::string> lines;
  for (const LabelTerm& t : selector.terms) {
    static constexpr const char* kOps[] = {"eq", "ne", "ge", "gt", "le", "lt", "ex", "ab"};
    lines.push_back(std::string(kOps[static_cast<int>(t.op)]) + "\t" + t.key + "\t" + t.value);
  }
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace

StatusOr<Lease> AcquireLease(RedisClient& redis, const LeaseRequest& request) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(request.pool));
  REMEX_ASSIGN_OR_RETURN(LabelSelector selector, ParseLabelSelector(request.selector));
  const std::string holder = request.holder.empty() ? DefaultHolder() : request.holder;
  REMEX_RETURN_IF_ERROR(CheckHolder(holder));
  if (request.ttl < std::chrono::seconds(1) || request.ttl > std::chrono::hours(24)) {
    return InvalidArgument("a lease's TTL must be between 1 s and 24 h");
  }
  if (request.heartbeat < std::chrono::milliseconds(100) || request.heartbeat > std::chrono::minutes(1)) {
    return InvalidArgument("a waiter's heartbeat must be between 100 ms and 60 s");
  }
  const std::string& pool = request.pool;
  const std::string prefix = Prefix(pool);
  // The lease's credential: a key pair of its own; Redis gets the public key only.
  REMEX_ASSIGN_OR_RETURN(rpc::LeaseKeyPair key_pair, rpc::NewLeaseKeyPair());
  const std::string public_key = rpc::ToHex(key_pair.public_key);
  const auto waiter_ttl = request.heartbeat * 3;
  const std::vector<std::string> keys = {prefix + "waiting"};
  const std::string terms = SelectorTerms(selector);
  const bool wait = request.wait.count() > 0;
  auto join = [&]() -> StatusOr<RedisValue> {
    REMEX_ASSIGN_OR_RETURN(RedisValue r, RunLeaseScript(redis, kJoin, keys,
                                                        {prefix, terms, public_key, holder,
                                                         std::to_string(request.ttl.count()),
                                                         std::to_string(waiter_ttl.count()), wait ? "1" : "0"}));
    if (r.type != RedisValue::Type::kArray || r.array.size() != 3) return Internal("the queue's join returned no triple");
    return r;
  };
  REMEX_ASSIGN_OR_RETURN(RedisValue joined, join());
  std::string me = joined.array[0].str;
  // How many devices the selector matches, for the messages (reads the pool's records).
  auto matching = [&]() -> std::string {
    auto n = MatchingDevices(redis, pool, selector);
    return n.ok() ? std::to_string(*n) : std::string("?");
  };
  if (joined.array[1].str == "none") {
    REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> all, redis.ListPool(pool, nullptr, /*leases=*/false));
    return NotFound("no device of pool '" + pool + "' matches '" + request.selector + "' (" +
                    std::to_string(all.size()) + " registered in the pool)");
  }
  auto busy = [&](int64_t ahead, std::chrono::milliseconds waited) {
    return DeadlineExceeded("no device of pool '" + pool + "' matching '" + request.selector + "' became free within " +
                            std::to_string(waited.count() / 1000.0).substr(0, 5) + " s (" + std::to_string(ahead) +
                            " waiting ahead, " + matching() + " devices match)");
  };
  if (joined.array[1].str == "busy") return busy(joined.array[2].integer, request.wait);
  // The lease of a grant "<id> <serial> <since_ms>": confirmed by a renewal at once (a
  // grant nobody picks up lapses after the pick-up window, kAssignLua's PICKUP_MS).
  auto granted = [&](const std::string& grant) -> StatusOr<Lease> {
    Lease lease;
    lease.pool = pool;
    const size_t s1 = grant.find(' '), s2 = grant.find(' ', s1 == std::string::npos ? s1 : s1 + 1);
    lease.device_id = grant.substr(0, s1);
    int64_t serial = 0, since = 0;
    if (s1 != std::string::npos) std::from_chars(grant.data() + s1 + 1, grant.data() + grant.size(), serial);
    if (s2 != std::string::npos) std::from_chars(grant.data() + s2 + 1, grant.data() + grant.size(), since);
    lease.token = key_pair.secret;
    lease.public_key = public_key;
    lease.holder = holder;
    lease.ttl = request.ttl;
    lease.ticket = std::stoll(me);
    lease.serial = serial;
    lease.since_ms = since > 0 ? since : UnixMillis();
    REMEX_RETURN_IF_ERROR(RenewLease(redis, lease));
    auto device = redis.ReadDevice(pool, lease.device_id);
    if (device.ok()) lease.device = std::move(device).value();
    return lease;
  };
  // Leaves the queue with `st`; a grant that came meanwhile is the result instead (a
  // lease is never left behind unheld).
  auto leave = [&](Status st) -> StatusOr<Lease> {
    auto g = RunLeaseScript(redis, kLeave, keys, {prefix, me});
    if (g.ok() && !g->nil()) return granted(g->str);
    return st;
  };
  if (joined.array[1].str == "granted") return leave(Internal("the grant of waiter " + me + " vanished"));
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + request.wait;
  std::string grant_key = prefix + "grant:" + me;
  const std::string freed_key = prefix + "freed";
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      auto ahead = redis.Query({"ZRANK", prefix + "waiting", me});
      return leave(busy(ahead.ok() && !ahead->nil() ? ahead->integer : 0, request.wait));
    }
    // Blocks until the grant comes, a device is announced free (then this waiter runs
    // the assignment for the pool), or the heartbeat is due.
    const auto block = std::min<std::chrono::milliseconds>(
        request.heartbeat, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + std::chrono::milliseconds(1));
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f", block.count() / 1000.0);
    auto popped = redis.BlockingQuery({"BLPOP", grant_key, freed_key, seconds}, block);
    // Redis went away (restarted, or failed over to a replica): the wait goes on, the
    // client connecting again at its next command, until the deadline.
    auto unavailable = [&](const Status& st) {
      if (st.code() != StatusCode::kUnavailable) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      return true;
    };
    if (!popped.ok() && unavailable(popped.status())) continue;
    if (!popped.ok()) return leave(popped.status());
    std::string freed;
    if (popped->type == RedisValue::Type::kArray && popped->array.size() == 2) {
      if (popped->array[0].str == grant_key) return granted(popped->array[1].str);
      freed = popped->array[1].str;
    }
    auto turn = RunLeaseScript(redis, kTurn, keys, {prefix, me, std::to_string(waiter_ttl.count()), freed});
    if (!turn.ok() && unavailable(turn.status())) continue;
    if (!turn.ok()) return leave(turn.status());
    if (turn->integer == 0) {
      // Granted meanwhile (picked up next), or dropped (it stalled past its expiry).
      auto has_grant = redis.Query({"EXISTS", grant_key});
      if (!has_grant.ok()) return leave(has_grant.status());
      if (has_grant->integer == 0) {
        auto again = join();  // back in the queue, at its end
        if (!again.ok()) return leave(again.status());
        me = again->array[0].str;
        if (again->array[1].str == "none") return leave(NotFound("no device of pool '" + pool + "' matches '" + request.selector + "' any more"));
        grant_key = prefix + "grant:" + me;
      }
    }
  }
}

Status RenewLease(RedisClient& redis, const Lease& lease) {
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunLeaseScript(redis, kPlainRenew, {LeaseKey(lease.pool, lease.device_id)},
                                                       {lease.public_key, std::to_string(lease.ttl.count()),
                                                        Prefix(lease.pool), lease.device_id}));
  if (r.integer != 1) {
    return Aborted("lease lost: the lease of " + lease.device_id + " lapsed (not renewed within its TTL of " +
                   std::to_string(lease.ttl.count()) + " ms) or was released");
  }
  return OkStatus();
}

Status ReleaseLease(RedisClient& redis, const Lease& lease) {
  return RunLeaseScript(redis, kRelease, {LeaseKey(lease.pool, lease.device_id)},
                        {Prefix(lease.pool), lease.public_key, lease.device_id})
      .status();
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
    REMEX_ASSIGN_OR_RETURN(int64_t now_ms, redis.TimeMillis());
    REMEX_RETURN_IF_ERROR(verifier->Check(key, fields, now_ms));
  }
  return *rpc::FromHex(hex);
}

Status SetDrained(RedisClient& redis, std::string_view id, bool drained) {
  REMEX_ASSIGN_OR_RETURN(std::vector<DeviceRecord> devices, redis.ListDevices());
  for (const DeviceRecord& d : devices) {
    if (d.id != id) continue;
    if (drained) return redis.Execute({"SET", DrainKey(d.pool, d.id), std::to_string(UnixMillis())});
    REMEX_RETURN_IF_ERROR(redis.Execute({"DEL", DrainKey(d.pool, d.id)}));
    return redis.AnnounceFree(d.pool, d.id);  // its waiters may have it now
  }
  return NotFound("no registered device '" + std::string(id) + "' in the farm");
}

StatusOr<std::map<std::string, int64_t>> QueueLengths(RedisClient& redis, const std::vector<std::string>& pools) {
  // Read-only commands, no script (a script's keys need write access: docs/farm.md's
  // read-only role lists the farm too): the waiters alive by Redis's clock.
  std::map<std::string, int64_t> lengths;
  if (pools.empty()) return lengths;
  REMEX_ASSIGN_OR_RETURN(int64_t now_ms, redis.TimeMillis());
  const std::string now = std::to_string(now_ms);
  for (const std::string& pool : pools) {
    REMEX_ASSIGN_OR_RETURN(RedisValue alive, redis.Query({"ZCOUNT", AliveKey(pool), now, "+inf"}));
    lengths[pool] = alive.integer;
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
