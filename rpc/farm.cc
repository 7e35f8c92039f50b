// The device farm's registry in Redis (rpc/farm.h), on hiredis.

#include "rpc/farm.h"

#include "rpc/farm_lease.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <charconv>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

namespace remex::farm {
namespace {

// Every key of pool P starts with "remex:{P}:" (the hash tag keeps a pool in one slot).
std::string PoolPrefix(std::string_view pool) { return "remex:{" + std::string(pool) + "}:"; }
constexpr std::string_view kDevicePattern = "remex:{*}:device:*";
// Bounds on what one reply may hold (RedisClient::Query).
constexpr size_t kMaxReplyElements = 1 << 20;
constexpr size_t kMaxReplyBytes = size_t{64} << 20;
// The entries kept in a pool's list of devices announced free (FreedKey): wake-ups, each
// id already in the free set (FreeKey), so that dropping the oldest loses nothing.
constexpr int64_t kMaxFreedEntries = 64;
// More registered devices than this in one listing is refused (a bound on what a
// listing reads from Redis).
constexpr size_t kMaxDevices = 65536;

bool AllOf(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

constexpr std::string_view kKeyExtra = "_.-/", kValueExtra = "_.-/:+";

bool IsLabelKey(std::string_view k) { return !k.empty() && k.size() <= 64 && AllOf(k, kKeyExtra); }
bool IsLabelValue(std::string_view v) { return v.size() <= 128 && AllOf(v, kValueExtra); }

// Calls f(term) for each comma-separated term of `text` (an empty text has none; an
// empty term is passed on, for f to refuse); at most 32 terms.
template <typename F>
Status ForEachTerm(std::string_view text, std::string_view what, F&& f) {
  if (text.empty()) return OkStatus();
  size_t start = 0, count = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    if (++count > 32) return InvalidArgument("more than 32 " + std::string(what) + "s");
    REMEX_RETURN_IF_ERROR(f(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return OkStatus();
}

StatusOr<int64_t> ParseInt(std::string_view field, std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return InvalidArgument("field '" + std::string(field) + "' is not an integer: '" + std::string(s) + "'");
  }
  return v;
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Frees a hiredis reply on scope exit.
struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

std::string ReplyText(const redisReply* r) { return r && r->str ? std::string(r->str, r->len) : std::string(); }

// A record from HGETALL's flat field/value array; INVALID_ARGUMENT naming the problem.
StatusOr<DeviceRecord> RecordFromReply(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) return InvalidArgument("not a field/value array");
  std::map<std::string, std::string> fields;
  size_t bytes = 0;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply* k = r->element[i];
    const redisReply* v = r->element[i + 1];
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return InvalidArgument("a field is not a string");
    bytes += k->len + v->len;
    if (bytes > kMaxRecordBytes) return InvalidArgument("larger than " + std::to_string(kMaxRecordBytes) + " bytes");
    fields[ReplyText(k)] = ReplyText(v);
  }
  for (const auto& [name, value] : RecordFields(DeviceRecord{})) {
    if (!fields.count(name)) return InvalidArgument("no field '" + name + "'");
  }
  DeviceRecord d;
  d.id = fields["id"];
  d.pool = fields["pool"];
  REMEX_RETURN_IF_ERROR(CheckPoolName(d.pool));
  REMEX_ASSIGN_OR_RETURN(d.labels, ParseLabels(fields["labels"]));
  d.kind = fields["kind"];
  d.device = fields["device"];
  d.description = fields["description"];
  REMEX_ASSIGN_OR_RETURN(int64_t memory, ParseInt("memory_bytes", fields["memory_bytes"]));
  if (memory < 0) return InvalidArgument("negative memory_bytes");
  d.memory_bytes = static_cast<uint64_t>(memory);
  d.version = fields["version"];
  REMEX_ASSIGN_OR_RETURN(d.state, ParseDeviceState(fields["state"]));
  REMEX_ASSIGN_OR_RETURN(d.registered_ms, ParseInt("registered_ms", fields["registered_ms"]));
  REMEX_ASSIGN_OR_RETURN(d.heartbeat_ms, ParseInt("heartbeat_ms", fields["heartbeat_ms"]));
  d.health = fields["health"];
  return d;
}

}  // namespace

namespace {

std::string HostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// "HOST[:PORT]" (an IPv6 host in brackets) into `host` and `port` (left as given when
// absent); the fault, or "" when it parses.
std::string ParseHostPort(std::string_view authority, std::string& host, uint16_t& port) {
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return "unclosed '['";
    host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "expected ':' after ']'";
      port_text = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (host.empty()) return "no host";
  if (!port_text.empty() || authority.back() == ':') {
    int p = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), p);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || p < 1 || p > 65535) return "bad port";
    port = static_cast<uint16_t>(p);
  }
  return "";
}

}  // namespace

std::string RedisUrl::ToString() const {
  const std::string user_at = user.empty() ? "" : user + "@";
  if (!cluster.empty()) {
    std::string hosts;
    for (const auto& [h, p] : cluster) hosts += (hosts.empty() ? "" : ",") + HostPort(h, p);
    return "redis-cluster://" + user_at + hosts;
  }
  if (!sentinels.empty()) {
    std::string hosts;
    for (const auto& [h, p] : sentinels) hosts += (hosts.empty() ? "" : ",") + HostPort(h, p);
    return "redis-sentinel://" + user_at + hosts + "/" + master + "/" + std::to_string(db);
  }
  return "redis://" + user_at + HostPort(host, port) + "/" + std::to_string(db);
}

StatusOr<RedisUrl> ParseRedisUrl(std::string_view url) {
  const std::string text(url);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("farm URL '" + text + "': " + why +
                           " (expected redis://[USER@]HOST:PORT[/DB], "
                           "redis-sentinel://[USER@]HOST:PORT[,HOST:PORT...]/MASTER[/DB] or "
                           "redis-cluster://[USER@]HOST:PORT[,HOST:PORT...])");
  };
  constexpr std::string_view kPlain = "redis://", kSentinel = "redis-sentinel://", kCluster = "redis-cluster://";
  const bool sentinel = url.substr(0, kSentinel.size()) == kSentinel;
  const bool cluster = url.substr(0, kCluster.size()) == kCluster;
  if (!sentinel && !cluster && url.substr(0, kPlain.size()) != kPlain) {
    return bad("not a redis://, redis-sentinel:// or redis-cluster:// URL");
  }
  std::string_view rest = url.substr(sentinel ? kSentinel.size() : cluster ? kCluster.size() : kPlain.size());
  RedisUrl out;
  std::string_view authority = rest, path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view user = authority.substr(0, at);
    if (user.find(':') != std::string_view::npos) {
      return bad(std::string("a password in the URL would show in process listings: set ") + kFarmPasswordEnv);
    }
    if (user.empty() || user.size() > 64 || !AllOf(user, "_.-")) return bad("the user must be 1-64 letters, digits or _.-");
    out.user = std::string(user);
    authority = authority.substr(at + 1);
  }
  if (const char* password = std::getenv(kFarmPasswordEnv); password && *password) out.password = password;
  if (!out.user.empty() && out.password.empty()) {
    return bad("user '" + out.user + "' needs its password in " + kFarmPasswordEnv);
  }
  if (sentinel || cluster) {
    auto& hosts = sentinel ? out.sentinels : out.cluster;
    const char* what = sentinel ? "Sentinel " : "node ";
    for (size_t start = 0; start <= authority.size();) {
      const size_t comma = std::min(authority.find(',', start), authority.size());
      std::string host;
      uint16_t port = sentinel ? 26379 : 6379;
      if (std::string why = ParseHostPort(authority.substr(start, comma - start), host, port); !why.empty()) {
        return bad(what + std::to_string(hosts.size() + 1) + ": " + why);
      }
      hosts.emplace_back(std::move(host), port);
      if (hosts.size() > 16) return bad(std::string("more than 16 ") + (sentinel ? "Sentinels" : "nodes"));
      start = comma + 1;
    }
    out.host.clear();
  }
  if (cluster) {
    if (!path.empty() && path != "0") return bad("a Redis Cluster has database 0 only");
    path = {};
  } else if (sentinel) {
    const size_t slash = path.find('/');
    const std::string_view master = path.substr(0, slash);
    if (master.empty() || master.size() > 64 || !AllOf(master, "_.-")) {
      return bad("the name of the monitored set (MASTER) must be 1-64 letters, digits or _.-");
    }
    out.master = std::string(master);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    out.host.clear();
  } else if (std::string why = ParseHostPort(authority, out.host, out.port); !why.empty()) {
    return bad(why);
  }
  if (!path.empty()) {
    int db = 0;
    auto [end, ec] = std::from_chars(path.data(), path.data() + path.size(), db);
    if (ec != std::errc() || end != path.data() + path.size() || db < 0 || db > 15) return bad("bad database number");
    out.db = db;
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> ParseLabels(std::string_view text) {
  std::map<std::string, std::string> labels;
  REMEX_RETURN_IF_ERROR(ForEachTerm(text, "label", [&](std::string_view pair) -> Status {
    const auto eq = pair.find('=');
    const std::string where = "label '" + std::string(pair) + "'";
    if (eq == std::string_view::npos) return InvalidArgument(where + ": expected KEY=VALUE");
    const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (!IsLabelKey(key)) return InvalidArgument(where + ": a key is 1-64 letters, digits or '_.-/'");
    if (!IsLabelValue(value)) return InvalidArgument(where + ": a value is 0-128 letters, digits or '_.-/:+'");
    if (!labels.emplace(std::string(key), std::string(value)).second) {
      return InvalidArgument(where + ": key '" + std::string(key) + "' given twice");
    }
    return OkStatus();
  }));
  return labels;
}

Status CheckPoolName(std::string_view pool) {
  if (pool.empty() || pool.size() > 64 || !AllOf(pool, "_.-")) {
    return InvalidArgument("pool name '" + std::string(pool) + "': 1-64 letters, digits or '_.-'");
  }
  return OkStatus();
}

std::string FormatLabels(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

namespace {

// A version's parts: "12.4" -> {12, 4}; nullopt unless dot-separated decimal integers
// (at most 8 parts of at most 9 digits).
std::optional<std::vector<int64_t>> VersionOf(std::string_view s) {
  std::vector<int64_t> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    int64_t v = 0;
    std::from_chars(part.data(), part.data() + part.size(), v);
    parts.push_back(v);
    if (parts.size() > 8) return std::nullopt;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

// -1, 0, 1 as a < b, a == b, a > b (missing parts are 0).
int CompareVersions(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const int64_t x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace

StatusOr<LabelSelector> ParseLabelSelector(std::string_view text) {
  LabelSelector selector;
  REMEX_RETURN_IF_ERROR(ForEachTerm(text, "selector term", [&](std::string_view term) -> Status {
    const std::string where = "selector term '" + std::string(term) + "'";
    LabelTerm t;
    static constexpr std::pair<std::string_view, LabelTerm::Op> kOps[] = {
        {"!=", LabelTerm::Op::kNe}, {">=", LabelTerm::Op::kGe}, {"<=", LabelTerm::Op::kLe},
        {"=", LabelTerm::Op::kEq},  {">", LabelTerm::Op::kGt},  {"<", LabelTerm::Op::kLt}};
    size_t at = std::string_view::npos, len = 0;
    for (const auto& [text_op, op] : kOps) {
      const size_t found = term.find(text_op);
      if (found != std::string_view::npos && (at == std::string_view::npos || found < at ||
                                              (found == at && text_op.size() > len))) {
        at = found;
        len = text_op.size();
        t.op = op;
      }
    }
    if (at == std::string_view::npos) {
      const bool absent = !term.empty() && term.front() == '!';
      t.op = absent ? LabelTerm::Op::kAbsent : LabelTerm::Op::kExists;
      t.key = std::string(absent ? term.substr(1) : term);
    } else {
      t.key = std::string(term.substr(0, at));
      t.value = std::string(term.substr(at + len));
    }
    if (!IsLabelKey(t.key)) return InvalidArgument(where + ": a key is 1-64 letters, digits or '_.-/'");
    if (!IsLabelValue(t.value)) return InvalidArgument(where + ": a value is 0-128 letters, digits or '_.-/:+'");
    const bool ordered = t.op == LabelTerm::Op::kGe || t.op == LabelTerm::Op::kGt || t.op == LabelTerm::Op::kLe ||
                         t.op == LabelTerm::Op::kLt;
    if (ordered && !VersionOf(t.value)) {
      return InvalidArgument(where + ": >=, >, <= and < compare versions (e.g. 12 or 12.4), got '" + t.value + "'");
    }
    selector.terms.push_back(std::move(t));
    return OkStatus();
  }));
  return selector;
}

bool LabelSelector::Matches(const DeviceRecord& device) const {
  for (const LabelTerm& t : terms) {
    std::optional<std::string> have;
    if (auto it = device.labels.find(t.key); it != device.labels.end()) {
      have = it->second;
    } else if (t.key == "pool") {
      have = device.pool;
    } else if (t.key == "kind") {
      have = device.kind;
    }
    bool ok = false;
    switch (t.op) {
      case LabelTerm::Op::kExists: ok = have.has_value(); break;
      case LabelTerm::Op::kAbsent: ok = !have.has_value(); break;
      case LabelTerm::Op::kEq: ok = have && *have == t.value; break;
      case LabelTerm::Op::kNe: ok = !have || *have != t.value; break;
      default: {
        const auto a = have ? VersionOf(*have) : std::nullopt;
        const auto b = VersionOf(t.value);
        if (!a || !b) break;
        const int c = CompareVersions(*a, *b);
        ok = (t.op == LabelTerm::Op::kGe && c >= 0) || (t.op == LabelTerm::Op::kGt && c > 0) ||
             (t.op == LabelTerm::Op::kLe && c <= 0) || (t.op == LabelTerm::Op::kLt && c < 0);
      }
    }
    if (!ok) return false;
  }
  return true;
}

std::string_view DeviceStateName(DeviceState state) {
  switch (state) {
    case DeviceState::kIdle: return "idle";
    case DeviceState::kLeased: return "leased";
    case DeviceState::kDraining: return "draining";
    case DeviceState::kQuarantined: return "quarantined";
  }
  return "idle";
}

StatusOr<DeviceState> ParseDeviceState(std::string_view name) {
  for (DeviceState s : {DeviceState::kIdle, DeviceState::kLeased, DeviceState::kDraining, DeviceState::kQuarantined}) {
    if (DeviceStateName(s) == name) return s;
  }
  return InvalidArgument("unknown device state '" + std::string(name) + "'");
}

std::vector<std::pair<std::string, std::string>> RecordFields(const DeviceRecord& d) {
  return {{"id", d.id},
          {"pool", d.pool},
          {"labels", FormatLabels(d.labels)},
          {"kind", d.kind},
          {"device", d.device},
          {"description", d.description},
          {"memory_bytes", std::to_string(d.memory_bytes)},
          {"version", d.version},
          {"state", std::string(DeviceStateName(d.state))},
          {"registered_ms", std::to_string(d.registered_ms)},
          {"heartbeat_ms", std::to_string(d.heartbeat_ms)},
          {"health", d.health}};
}

std::string PoolKeyPrefix(std::string_view pool) { return PoolPrefix(pool); }
std::string DeviceKey(std::string_view pool, std::string_view id) { return PoolPrefix(pool) + "device:" + std::string(id); }
std::string PoolDevicesKey(std::string_view pool) { return PoolPrefix(pool) + "devices"; }
std::string LeaseKey(std::string_view pool, std::string_view id) { return PoolPrefix(pool) + "lease:" + std::string(id); }
std::string DrainKey(std::string_view pool, std::string_view id) { return PoolPrefix(pool) + "drain:" + std::string(id); }
std::string QueueKey(std::string_view pool) { return PoolPrefix(pool) + "waiting"; }
std::string WaitersKey(std::string_view pool) { return PoolPrefix(pool) + "waiters"; }
std::string AliveKey(std::string_view pool) { return PoolPrefix(pool) + "alive"; }
std::string TicketKey(std::string_view pool) { return PoolPrefix(pool) + "ticket"; }
std::string ServedKey(std::string_view pool) { return PoolPrefix(pool) + "served"; }
std::string FreedKey(std::string_view pool) { return PoolPrefix(pool) + "freed"; }
std::string FreeKey(std::string_view pool) { return PoolPrefix(pool) + "free"; }
std::string LabelIndexKey(std::string_view pool, std::string_view key, std::string_view value) {
  return PoolPrefix(pool) + "label:" + std::string(key) + "=" + std::string(value);
}
std::string LabelIndexKey(std::string_view pool, std::string_view key) {
  return PoolPrefix(pool) + "label:" + std::string(key);
}

uint16_t ClusterSlot(std::string_view key) {
  if (const size_t open = key.find('{'); open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  uint16_t crc = 0;  // CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0
  for (unsigned char c : key) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
  }
  return crc % 16384;
}

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// A new connection to the Redis node `url` names (SELECTed to its database), waiting at
// most `timeout` for it and for each reply later.
StatusOr<redisContext*> OpenNode(const RedisUrl& url, std::chrono::milliseconds timeout) {
  redisContext* c = redisConnectWithTimeout(url.host.c_str(), url.port, ToTimeval(timeout));
  if (c == nullptr) return Unavailable(url.ToString() + ": cannot allocate a Redis connection");
  if (c->err) {
    std::string why = c->errstr;
    redisFree(c);
    return Unavailable(url.ToString() + ": cannot connect to Redis: " + why);
  }
  if (redisSetTimeout(c, ToTimeval(timeout)) != REDIS_OK) {
    redisFree(c);
    return Unavailable(url.ToString() + ": cannot set the reply timeout");
  }
  if (!url.password.empty()) {
    std::vector<const char*> argv = {"AUTH"};
    std::vector<size_t> lengths = {4};
    if (!url.user.empty()) {
      argv.push_back(url.user.data());
      lengths.push_back(url.user.size());
    }
    argv.push_back(url.password.data());
    lengths.push_back(url.password.size());
    ReplyPtr reply(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
      const bool refused = reply != nullptr;
      std::string why = reply ? ReplyText(reply.get()) : (c->err ? c->errstr : "no reply");
      redisFree(c);
      const std::string what = url.ToString() + ": AUTH as " + (url.user.empty() ? "the default user" : url.user) + ": " + why;
      return refused ? PermissionDenied(what) : Unavailable(what);
    }
  }
  if (url.db != 0) {
    const std::string db = std::to_string(url.db);
    ReplyPtr reply(static_cast<redisReply*>(redisCommand(c, "SELECT %s", db.c_str())));
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
      std::string why = reply ? ReplyText(reply.get()) : (c->err ? c->errstr : "no reply");
      redisFree(c);
      return Unavailable(url.ToString() + ": SELECT " + db + ": " + why);
    }
  }
  return c;
}

// The address of the primary of `url.master` as the first Sentinel that answers names it.
Status FindPrimary(RedisUrl& url, std::chrono::milliseconds timeout) {
  std::string why;
  for (const auto& [host, port] : url.sentinels) {
    const std::string where = HostPort(host, port);
    redisContext* s = redisConnectWithTimeout(host.c_str(), port, ToTimeval(timeout));
    if (s == nullptr || s->err) {
      why += "; Sentinel " + where + ": " + (s ? s->errstr : "cannot allocate a connection");
      if (s) redisFree(s);
      continue;
    }
    redisSetTimeout(s, ToTimeval(timeout));
    ReplyPtr reply(static_cast<redisReply*>(redisCommand(s, "SENTINEL get-master-addr-by-name %s", url.master.c_str())));
    std::string host_found;
    int port_found = 0;
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING && reply->element[1]->type == REDIS_REPLY_STRING &&
        reply->element[0]->len > 0 && reply->element[0]->len <= 255) {
      host_found = ReplyText(reply->element[0]);
      const std::string p = ReplyText(reply->element[1]);
      auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port_found);
      if (ec != std::errc() || end != p.data() + p.size()) port_found = 0;
    }
    const std::string answer = reply ? (reply->type == REDIS_REPLY_NIL ? "does not know the set" : ReplyText(reply.get()))
                                     : std::string(s->err ? s->errstr : "no reply");
    redisFree(s);
    if (port_found < 1 || port_found > 65535) {
      why += "; Sentinel " + where + ": " + (answer.empty() ? "no address" : answer);
      continue;
    }
    url.host = host_found;
    url.port = static_cast<uint16_t>(port_found);
    return OkStatus();
  }
  return Unavailable(url.ToString() + ": no Sentinel named the primary of '" + url.master + "'" + why);
}

// A new connection to `url`'s Redis: the node it names, or the primary its Sentinels
// name now (recorded in `url`).
StatusOr<redisContext*> OpenContext(RedisUrl& url, std::chrono::milliseconds timeout) {
  if (url.sentinels.empty()) return OpenNode(url, timeout);
  REMEX_RETURN_IF_ERROR(FindPrimary(url, timeout));
  auto c = OpenNode(url, timeout);
  if (!c.ok()) return Unavailable(url.ToString() + ": the primary " + HostPort(url.host, url.port) + ": " + c.status().message());
  return c;
}

// Whether a command failed because Redis closed the connection (it restarted, or dropped
// an idle client): then the command did not reach the Redis now listening, and may be
// sent again on a new connection. A timeout is not such a failure.
bool ConnectionClosed(const redisContext* c, int saved_errno) {
  return c->err == REDIS_ERR_EOF ||
         (c->err == REDIS_ERR_IO && (saved_errno == ECONNRESET || saved_errno == EPIPE || saved_errno == ENOTCONN));
}

}  // namespace

StatusOr<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisUrl& url, std::chrono::milliseconds timeout) {
  if (!url.cluster.empty()) {
    std::unique_ptr<RedisClient> client(new RedisClient(url, nullptr, timeout));
    REMEX_RETURN_IF_ERROR(client->RefreshSlots());
    return client;
  }
  RedisUrl where = url;
  REMEX_ASSIGN_OR_RETURN(redisContext * c, OpenContext(where, timeout));
  return std::unique_ptr<RedisClient>(new RedisClient(std::move(where), c, timeout));
}

RedisClient::~RedisClient() {
  if (url_.cluster.empty()) {
    if (context_) redisFree(context_);
    return;
  }
  for (auto& [address, c] : nodes_) {
    if (c) redisFree(c);
  }
}

Status RedisClient::Reconnect() {
  in_transaction_ = false;
  multi_deferred_ = false;
  if (!url_.cluster.empty()) {
    // Drop the node's connection and learn the slots again (a primary may have failed
    // over); the command's next attempt connects to whichever node serves its slot.
    if (context_) redisFree(context_);
    if (auto it = nodes_.find(node_); it != nodes_.end()) it->second = nullptr;
    context_ = nullptr;
    return RefreshSlots();
  }
  if (context_) redisFree(context_);
  context_ = nullptr;
  REMEX_ASSIGN_OR_RETURN(context_, OpenContext(url_, timeout_));
  return OkStatus();
}

namespace {

// The key a command is routed by in a cluster: the first key of a script call or of a
// command whose first argument is a key; nullopt for a command without keys.
std::optional<std::string_view> RoutingKey(const std::vector<std::string>& args) {
  static const std::set<std::string, std::less<>> kKeyless = {
      "PING", "TIME", "INFO", "SCAN", "MULTI", "EXEC", "DISCARD", "SELECT", "AUTH", "FUNCTION", "CLUSTER",
      "SENTINEL", "WAIT", "ACL", "CONFIG", "FLUSHALL", "FLUSHDB", "SLOWLOG", "CLIENT", "ROLE", "DBSIZE", "SCRIPT"};
  if (args.empty()) return std::nullopt;
  std::string command = args[0];
  for (char& c : command) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (command == "EVAL" || command == "EVALSHA" || command == "FCALL" || command == "FCALL_RO") {
    if (args.size() > 3 && args[2] != "0") return args[3];
    return std::nullopt;
  }
  if (kKeyless.count(command) || args.size() < 2) return std::nullopt;
  return args[1];
}

// "MOVED 3999 127.0.0.1:6381" or "ASK ...": the slot and the address.
bool ParseRedirection(const std::string& error, std::string_view kind, int& slot, std::string& address) {
  if (error.compare(0, kind.size() + 1, std::string(kind) + " ") != 0) return false;
  std::istringstream in(error.substr(kind.size() + 1));
  if (!(in >> slot >> address) || slot < 0 || slot >= 16384 || address.empty() || address.size() > 300) return false;
  return true;
}

// "host:port" (the port after the last ':', a bracketed IPv6 host unwrapped).
bool SplitAddress(const std::string& address, std::string& host, uint16_t& port) {
  return ParseHostPort(address, host, port).empty();
}

}  // namespace

Status RedisClient::RefreshSlots() {
  std::vector<std::string> candidates;
  for (const auto& [h, p] : url_.cluster) candidates.push_back(HostPort(h, p));
  for (const auto& [address, c] : nodes_) candidates.push_back(address);
  std::string why;
  for (const std::string& address : candidates) {
    RedisUrl node = url_;
    node.cluster.clear();
    if (!SplitAddress(address, node.host, node.port)) continue;
    auto c = OpenNode(node, timeout_);
    if (!c.ok()) {
      why += "; " + c.status().message();
      continue;
    }
    ReplyPtr reply(static_cast<redisReply*>(redisCommand(*c, "CLUSTER SLOTS")));
    redisFree(*c);
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 || reply->elements > 16384) {
      why += "; " + address + ": CLUSTER SLOTS: " + (reply ? ReplyText(reply.get()) : std::string("no reply"));
      continue;
    }
    std::vector<std::string> slots(16384);
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* range = reply->element[i];
      if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 || range->element[0]->type != REDIS_REPLY_INTEGER ||
          range->element[1]->type != REDIS_REPLY_INTEGER || range->element[2]->type != REDIS_REPLY_ARRAY ||
          range->element[2]->elements < 2 || range->element[2]->element[0]->type != REDIS_REPLY_STRING ||
          range->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        continue;
      }
      const long long first = range->element[0]->integer, last = range->element[1]->integer;
      const long long port = range->element[2]->element[1]->integer;
      if (first < 0 || last >= 16384 || first > last || port < 1 || port > 65535) continue;
      std::string host = ReplyText(range->element[2]->element[0]);
      if (host.empty() || host == "?") host = node.host;  // the node does not know its own address
      if (host.size() > 255) continue;
      const std::string primary = HostPort(host, static_cast<uint16_t>(port));
      for (long long slot = first; slot <= last; ++slot) slots[slot] = primary;
      nodes_.emplace(primary, nullptr);
    }
    slot_nodes_ = std::move(slots);
    return OkStatus();
  }
  return Unavailable(url_.ToString() + ": no node of the cluster answered CLUSTER SLOTS" + why);
}

Status RedisClient::Route(const std::vector<std::string>& args) {
  std::string target = node_;
  const bool asking = !ask_node_.empty();
  if (asking) {
    target = std::exchange(ask_node_, std::string());
  } else if (auto key = RoutingKey(args); key && !(in_transaction_ && !multi_deferred_)) {
    target = slot_nodes_.empty() ? std::string() : slot_nodes_[ClusterSlot(*key)];
    if (target.empty()) return Unavailable(url_.ToString() + ": no node serves the slot of key '" + std::string(*key) + "'");
  }
  if (target.empty()) {
    if (nodes_.empty()) return Unavailable(url_.ToString() + ": no node of the cluster is known");
    target = nodes_.begin()->first;
  }
  redisContext*& c = nodes_[target];
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    c = nullptr;
    RedisUrl node = url_;
    node.cluster.clear();
    if (!SplitAddress(target, node.host, node.port)) return Internal("bad cluster node address '" + target + "'");
    REMEX_ASSIGN_OR_RETURN(c, OpenNode(node, timeout_));
  }
  context_ = c;
  node_ = target;
  auto send = [&](const char* command) -> Status {
    ReplyPtr reply(static_cast<redisReply*>(redisCommand(context_, command)));
    if (!reply) return Unavailable(url_.ToString() + ": " + command + ": " + (context_->err ? context_->errstr : "no reply"));
    if (reply->type == REDIS_REPLY_ERROR) return Internal(url_.ToString() + ": " + command + ": " + ReplyText(reply.get()));
    return OkStatus();
  };
  if (multi_deferred_ && RoutingKey(args)) {
    multi_deferred_ = false;
    REMEX_RETURN_IF_ERROR(send("MULTI"));
  }
  if (asking) REMEX_RETURN_IF_ERROR(send("ASKING"));
  return OkStatus();
}

std::vector<std::string> RedisClient::Primaries() const {
  std::set<std::string> primaries(slot_nodes_.begin(), slot_nodes_.end());
  primaries.erase(std::string());
  return {primaries.begin(), primaries.end()};
}

Status RedisClient::ExecuteOnEachPrimary(const std::vector<std::string>& args) {
  if (url_.cluster.empty()) return Command(args);
  for (const std::string& primary : Primaries()) {
    node_ = primary;
    if (Status st = Command(args); !st.ok()) return st.WithContext("on the cluster node " + primary);
  }
  return OkStatus();
}

Status RedisClient::Command(const std::vector<std::string>& args, redisReply** out) {
  const bool cluster = !url_.cluster.empty();
  if (cluster && args[0] == "MULTI") {
    // In a cluster a transaction runs on the node of its keys: MULTI is sent there with
    // the transaction's first key (Route).
    multi_deferred_ = in_transaction_ = true;
    return OkStatus();
  }
  if (cluster && multi_deferred_ && (args[0] == "EXEC" || args[0] == "DISCARD")) {
    multi_deferred_ = in_transaction_ = false;
    if (args[0] == "EXEC") return Internal(url_.ToString() + ": EXEC of a transaction without a key");
    return OkStatus();
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  // Forgets the current connection (a cluster's node too).
  auto drop_connection = [&] {
    if (context_) redisFree(context_);
    if (cluster) nodes_[node_] = nullptr;
    context_ = nullptr;
  };
  redisReply* reply = nullptr;
  for (int attempt = 0;; ++attempt) {
    if (cluster) {
      if (Status routed = Route(args); !routed.ok()) {
        if (attempt == 0 && !in_transaction_ && Reconnect().ok()) continue;
        in_transaction_ = multi_deferred_ = false;
        return routed.code() == StatusCode::kUnavailable ? routed : Unavailable(routed.message());
      }
    }
    if (context_ == nullptr || context_->err) {
      // A connection broken earlier (a timeout, a failed reconnect): one more try, unless
      // a transaction was open on it (its queued commands are gone with it).
      if (attempt == 0 && !in_transaction_ && Reconnect().ok()) continue;
      in_transaction_ = false;
      return Unavailable(url_.ToString() + ": the Redis connection is broken" +
                         (context_ && context_->err ? std::string(": ") + context_->errstr : std::string()));
    }
    if (block_.count() > 0) redisSetTimeout(context_, ToTimeval(timeout_ + block_));
    errno = 0;
    reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    const int saved_errno = errno;
    if (block_.count() > 0 && !context_->err) redisSetTimeout(context_, ToTimeval(timeout_));
    if (reply != nullptr && cluster && reply->type == REDIS_REPLY_ERROR && attempt < 3) {
      // The slot moved (a resharding, a failover): MOVED names its node for good, ASK for
      // this command only. Sent again there, outside a transaction.
      int slot = 0;
      std::string address;
      const std::string error = ReplyText(reply);
      const bool moved = ParseRedirection(error, "MOVED", slot, address);
      const bool ask = !moved && ParseRedirection(error, "ASK", slot, address);
      if (moved || ask) {
        freeReplyObject(reply);
        reply = nullptr;
        nodes_.emplace(address, nullptr);
        if (moved) {
          slot_nodes_[slot] = address;
          (void)RefreshSlots();  // the cluster changed: learn the rest of it too
        } else {
          ask_node_ = address;
        }
        if (in_transaction_) {
          in_transaction_ = multi_deferred_ = false;
          return Unavailable(url_.ToString() + ": " + args[0] + ": the slot moved during a transaction (" + error + ")");
        }
        continue;
      }
    }
    if (reply != nullptr) break;
    // Redis closed the connection (it restarted): reconnect and send the command once
    // more, outside a transaction. Anything else (a timeout) fails at once.
    if (attempt == 0 && !in_transaction_ && ConnectionClosed(context_, saved_errno)) {
      const std::string why = context_->errstr;
      Status reconnected = Reconnect();
      if (reconnected.ok()) {
        spdlog::info("farm: {}: the Redis connection was closed ({}); reconnected", url_.ToString(), why);
        continue;
      }
      in_transaction_ = false;
      return Unavailable(url_.ToString() + ": " + args[0] + ": " + why + "; reconnecting: " + reconnected.message());
    }
    in_transaction_ = false;
    return Unavailable(url_.ToString() + ": " + args[0] + ": " + (context_->err ? context_->errstr : "no reply"));
  }
  if (args[0] == "MULTI") in_transaction_ = true;
  if (args[0] == "EXEC" || args[0] == "DISCARD") in_transaction_ = false;
  // A replica refused a write: this node is no longer the primary (a failover demoted
  // it). Nothing ran; the next command connects again (asking the Sentinels).
  if (reply->type == REDIS_REPLY_ERROR && ReplyText(reply).find("READONLY") != std::string::npos) {
    const std::string why = ReplyText(reply);
    freeReplyObject(reply);
    drop_connection();
    in_transaction_ = false;
    return Unavailable(url_.ToString() + ": " + args[0] + ": " + why);
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    Status st = Internal(url_.ToString() + ": " + args[0] + ": Redis error: " + ReplyText(reply));
    freeReplyObject(reply);
    return st;
  }
  if (out) {
    *out = reply;
  } else {
    freeReplyObject(reply);
  }
  return OkStatus();
}

namespace {

Status ToValue(const redisReply* r, RedisValue& out, size_t& elements, size_t& bytes, int depth) {
  if (depth > 8) return ResourceExhausted("Redis reply nested more than 8 deep");
  if (++elements > kMaxReplyElements) return ResourceExhausted("Redis reply of more than 1048576 elements");
  switch (r->type) {
    case REDIS_REPLY_NIL: out.type = RedisValue::Type::kNil; return OkStatus();
    case REDIS_REPLY_INTEGER: out.type = RedisValue::Type::kInteger; out.integer = r->integer; return OkStatus();
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      bytes += r->len;
      if (bytes > kMaxReplyBytes) return ResourceExhausted("Redis reply of more than 64 MiB");
      out.type = RedisValue::Type::kString;
      out.str = ReplyText(r);
      return OkStatus();
    case REDIS_REPLY_ARRAY:
      out.type = RedisValue::Type::kArray;
      out.array.resize(r->elements);
      for (size_t i = 0; i < r->elements; ++i) {
        REMEX_RETURN_IF_ERROR(ToValue(r->element[i], out.array[i], elements, bytes, depth + 1));
      }
      return OkStatus();
    case REDIS_REPLY_ERROR: return Internal("Redis error: " + ReplyText(r));
    default: return Internal("unexpected Redis reply type " + std::to_string(r->type));
  }
}

}  // namespace

StatusOr<RedisValue> RedisClient::Query(const std::vector<std::string>& args) {
  redisReply* raw = nullptr;
  REMEX_RETURN_IF_ERROR(Command(args, &raw));
  ReplyPtr reply(raw);
  RedisValue v;
  size_t elements = 0, bytes = 0;
  Status st = ToValue(reply.get(), v, elements, bytes, 0);
  if (!st.ok()) return st.WithContext(url_.ToString() + ": " + args[0]);
  return v;
}

StatusOr<int64_t> RedisClient::TimeMillis() {
  REMEX_ASSIGN_OR_RETURN(RedisValue time, Query({"TIME"}));
  if (time.type != RedisValue::Type::kArray || time.array.size() != 2) return Internal("TIME returned no pair");
  int64_t seconds = 0, micros = 0;
  for (auto [field, out] : {std::pair{&time.array[0].str, &seconds}, std::pair{&time.array[1].str, &micros}}) {
    auto [end, ec] = std::from_chars(field->data(), field->data() + field->size(), *out);
    if (ec != std::errc() || end != field->data() + field->size() || *out < 0) {
      return Internal("TIME returned no pair of integers");
    }
  }
  return seconds * 1000 + micros / 1000;
}

StatusOr<RedisValue> RedisClient::BlockingQuery(const std::vector<std::string>& args, std::chrono::milliseconds block) {
  block_ = block;
  auto r = Query(args);
  block_ = std::chrono::milliseconds(0);
  return r;
}

Status RedisClient::AnnounceFree(std::string_view pool, std::string_view id) {
  // The id into the free set first, then the wake-up (a waiter that wakes finds it there).
  REMEX_RETURN_IF_ERROR(Command({"ZADD", FreeKey(pool), "0", std::string(id)}));
  REMEX_ASSIGN_OR_RETURN(RedisValue n, Query({"RPUSH", FreedKey(pool), std::string(id)}));
  if (n.integer > kMaxFreedEntries) return Command({"LTRIM", FreedKey(pool), std::to_string(-kMaxFreedEntries), "-1"});
  return OkStatus();
}

Status RedisClient::WriteDevice(const DeviceRecord& d, std::chrono::milliseconds ttl) {
  const std::string key = DeviceKey(d.pool, d.id);
  std::vector<std::string> hset = {"HSET", key};
  for (auto& [name, value] : RecordFields(d)) {
    hset.push_back(std::move(name));
    hset.push_back(std::move(value));
  }
  // One transaction: no reader sees the record without its TTL. The label index and
  // the announcement that the device may be leasable go with it.
  std::vector<std::vector<std::string>> commands = {
      {"DEL", key}, std::move(hset), {"PEXPIRE", key, std::to_string(ttl.count())}, {"SADD", PoolDevicesKey(d.pool), d.id}};
  for (const auto& [k, v] : d.labels) {
    commands.push_back({"SADD", LabelIndexKey(d.pool, k, v), d.id});
    commands.push_back({"SADD", LabelIndexKey(d.pool, k), d.id});
  }
  commands.push_back({"ZADD", FreeKey(d.pool), "0", d.id});
  commands.push_back({"RPUSH", FreedKey(d.pool), d.id});
  commands.push_back({"LTRIM", FreedKey(d.pool), std::to_string(-kMaxFreedEntries), "-1"});
  REMEX_RETURN_IF_ERROR(Command({"MULTI"}));
  for (const auto& c : commands) {
    if (Status st = Command(c); !st.ok()) {
      (void)Command({"DISCARD"});
      return st;
    }
  }
  redisReply* raw = nullptr;
  REMEX_RETURN_IF_ERROR(Command({"EXEC"}, &raw));
  ReplyPtr exec(raw);
  if (exec->type != REDIS_REPLY_ARRAY || exec->elements != commands.size()) {
    return Internal(url_.ToString() + ": EXEC of the device record returned no result");
  }
  for (size_t i = 0; i < exec->elements; ++i) {
    if (exec->element[i]->type == REDIS_REPLY_ERROR) {
      return Internal(url_.ToString() + ": writing the device record: " + ReplyText(exec->element[i]));
    }
  }
  return OkStatus();
}

Status RedisClient::RefreshDevice(std::string_view pool, std::string_view id, int64_t heartbeat_ms,
                                  std::chrono::milliseconds ttl) {
  // Atomic: a key that has expired is not brought back half-written.
  static const std::string script =
      "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
      "redis.call('HSET', KEYS[1], 'heartbeat_ms', ARGV[1]) "
      "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1";
  redisReply* raw = nullptr;
  REMEX_RETURN_IF_ERROR(Command(
      {"EVAL", script, "1", DeviceKey(pool, id), std::to_string(heartbeat_ms), std::to_string(ttl.count())}, &raw));
  ReplyPtr reply(raw);
  if (reply->type != REDIS_REPLY_INTEGER) return Internal(url_.ToString() + ": the heartbeat script returned no integer");
  if (reply->integer == 0) return NotFound("device record " + DeviceKey(pool, id) + " is gone");
  return OkStatus();
}

Status RedisClient::RemoveDevice(std::string_view pool, std::string_view id) {
  REMEX_RETURN_IF_ERROR(Command({"DEL", DeviceKey(pool, id)}));
  return Command({"SREM", PoolDevicesKey(pool), std::string(id)});
}

StatusOr<std::vector<DeviceRecord>> RedisClient::ListDevices(std::vector<std::string>* skipped) {
  std::vector<std::string> keys;
  // A cluster's keys are spread over its primaries: each is scanned.
  const std::vector<std::string> nodes = url_.cluster.empty() ? std::vector<std::string>{""} : Primaries();
  for (const std::string& node : nodes) {
    std::string cursor = "0";
    do {
      if (!node.empty()) node_ = node;  // SCAN has no key: it goes to node_
      redisReply* raw = nullptr;
      REMEX_RETURN_IF_ERROR(
          Command({"SCAN", cursor, "MATCH", std::string(kDevicePattern), "COUNT", "256"}, &raw));
      ReplyPtr reply(raw);
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
          reply->element[1]->type != REDIS_REPLY_ARRAY) {
        return Internal(url_.ToString() + ": SCAN returned an unexpected reply");
      }
      cursor = ReplyText(reply->element[0]);
      const redisReply* batch = reply->element[1];
      for (size_t i = 0; i < batch->elements; ++i) {
        if (batch->element[i]->type == REDIS_REPLY_STRING) keys.push_back(ReplyText(batch->element[i]));
      }
      if (keys.size() > kMaxDevices) {
        return ResourceExhausted(url_.ToString() + ": more than " + std::to_string(kMaxDevices) + " device records");
      }
    } while (cursor != "0");
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());  // SCAN may repeat a key.
  std::vector<DeviceRecord> devices;
  REMEX_RETURN_IF_ERROR(ReadDevices(keys, devices, skipped));
  std::sort(devices.begin(), devices.end(), [](const DeviceRecord& a, const DeviceRecord& b) {
    return std::tie(a.pool, a.id) < std::tie(b.pool, b.id);
  });
  return devices;
}

StatusOr<std::vector<DeviceRecord>> RedisClient::ListPool(std::string_view pool, std::vector<std::string>* skipped,
                                                          bool leases) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(pool));
  REMEX_ASSIGN_OR_RETURN(RedisValue ids, Query({"SMEMBERS", PoolDevicesKey(pool)}));
  if (ids.type != RedisValue::Type::kArray) return Internal(url_.ToString() + ": SMEMBERS returned no array");
  if (ids.array.size() > kMaxDevices) {
    return ResourceExhausted(url_.ToString() + ": more than " + std::to_string(kMaxDevices) + " devices in pool " +
                             std::string(pool));
  }
  std::vector<std::string> keys;
  for (const RedisValue& id : ids.array) keys.push_back(DeviceKey(pool, id.str));
  std::sort(keys.begin(), keys.end());
  std::vector<DeviceRecord> devices;
  REMEX_RETURN_IF_ERROR(ReadDevices(keys, devices, skipped, leases));
  // Prune the ids whose record has expired (their servers died).
  std::set<std::string> live;
  for (const DeviceRecord& d : devices) live.insert(d.id);
  for (const RedisValue& id : ids.array) {
    if (!live.count(id.str)) (void)Command({"SREM", PoolDevicesKey(pool), id.str});
  }
  std::sort(devices.begin(), devices.end(), [](const DeviceRecord& a, const DeviceRecord& b) { return a.id < b.id; });
  return devices;
}

StatusOr<DeviceRecord> RedisClient::ReadDevice(std::string_view pool, std::string_view id) {
  std::vector<DeviceRecord> one;
  std::vector<std::string> skipped;
  REMEX_RETURN_IF_ERROR(ReadDevices({DeviceKey(pool, id)}, one, &skipped));
  if (one.empty()) {
    return NotFound("no device record " + DeviceKey(pool, id) + (skipped.empty() ? "" : ": " + skipped[0]));
  }
  return one[0];
}

Status RedisClient::ReadDevices(const std::vector<std::string>& keys, std::vector<DeviceRecord>& devices,
                                std::vector<std::string>* skipped, bool leases) {
  for (const std::string& key : keys) {
    redisReply* raw = nullptr;
    Status st = Command({"HGETALL", key}, &raw);
    if (st.code() == StatusCode::kInternal) {  // An error reply (a key of another type): skipped.
      if (skipped) skipped->push_back(key + ": " + st.message());
      continue;
    }
    REMEX_RETURN_IF_ERROR(st);
    ReplyPtr reply(raw);
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 0) continue;  // Expired since the scan.
    auto record = RecordFromReply(reply.get());
    if (!record.ok() || DeviceKey(record->pool, record->id) != key) {
      if (skipped) skipped->push_back(key + ": " + (record.ok() ? "pool and id do not match the key" : record.status().message()));
      continue;
    }
    if (!leases) {
      devices.push_back(std::move(record).value());
      continue;
    }
    // The lease (never its token) and the drain.
    auto lease = Query({"HMGET", LeaseKey(record->pool, record->id), "holder", "since_ms"});
    REMEX_RETURN_IF_ERROR(lease.status());
    if (lease->type == RedisValue::Type::kArray && lease->array.size() == 2 && !lease->array[1].nil()) {
      record->leased = true;
      record->holder = lease->array[0].str.substr(0, 256);
      auto since = ParseInt("since_ms", lease->array[1].str);
      record->lease_since_ms = since.ok() ? *since : 0;
    }
    REMEX_ASSIGN_OR_RETURN(RedisValue drained, Query({"EXISTS", DrainKey(record->pool, record->id)}));
    record->drained = drained.integer == 1;
    devices.push_back(std::move(record).value());
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<Registration>> Registration::Start(const RedisUrl& url, DeviceRecord record,
                                                            Options options) {
  if (options.interval.count() <= 0 || options.ttl <= options.interval) {
    return InvalidArgument("farm registration: the TTL must be longer than the heartbeat interval");
  }
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<RedisClient> client, RedisClient::Connect(url, options.timeout));
  record.registered_ms = record.heartbeat_ms = UnixMillis();
  REMEX_RETURN_IF_ERROR(client->WriteDevice(record, options.ttl));
  std::unique_ptr<Registration> r(new Registration(url, std::move(record), options, std::move(client)));
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

Registration::Registration(RedisUrl url, DeviceRecord record, Options options, std::unique_ptr<RedisClient> client)
    : url_(std::move(url)), record_(std::move(record)), options_(options), client_(std::move(client)) {}

Registration::~Registration() { Stop(); }

void Registration::Run() {
  bool failing = false;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // A beat every interval, and at once when the health changes.
    wake_.wait_for(lock, options_.interval, [&] { return stopping_ || beat_now_; });
    if (stopping_) break;
    beat_now_ = false;
    lock.unlock();
    Status st = OkStatus();
    if (!client_) {
      auto c = RedisClient::Connect(url_, options_.timeout);
      st = c.status();
      if (c.ok()) client_ = std::move(c).value();
    }
    std::optional<std::pair<std::string, bool>> health;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      health = std::exchange(pending_health_, std::nullopt);
    }
    if (health) {
      record_.state = health->second ? DeviceState::kIdle : DeviceState::kQuarantined;
      record_.health = health->first;
    }
    if (st.ok()) {
      record_.heartbeat_ms = UnixMillis();
      st = health ? NotFound("health changed")
                  : client_->RefreshDevice(record_.pool, record_.id, record_.heartbeat_ms, options_.ttl);
      if (st.code() == StatusCode::kNotFound) st = client_->WriteDevice(record_, options_.ttl);
    }
    if (st.ok()) {
      // The lease: sessions of any other lease than the current one end (all of them
      // when the record is malformed: it is no lease).
      auto lease = CurrentLeaseKey(*client_, record_.pool, record_.id, options_.verifier.get());
      if (lease.status().code() == StatusCode::kFailedPrecondition) lease = std::string();
      st = lease.status();
      if (lease.ok() && options_.on_lease) options_.on_lease(*lease);
      // A lease that ended without a release (it lapsed): the pool's waiters may have
      // the device now.
      if (lease.ok() && lease->empty() && had_lease_) st = client_->AnnounceFree(record_.pool, record_.id);
      if (lease.ok() && st.ok()) had_lease_ = !lease->empty();
    }
    if (!st.ok() && health) {
      std::lock_guard<std::mutex> guard(mutex_);
      if (!pending_health_) pending_health_ = health;  // written at a later beat
    }
    if (!st.ok()) {
      if (!failing) spdlog::warn("farm: cannot refresh {} in {}: {}", record_.id, url_.ToString(), st.ToString());
      failing = true;
      client_.reset();  // Reconnect on the next beat.
    } else if (failing) {
      spdlog::info("farm: {} registered in {} again", record_.id, url_.ToString());
      failing = false;
    }
    lock.lock();
  }
}

void Registration::SetHealth(const std::string& why, bool healthy) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_health_ = std::make_pair(why, healthy);
    beat_now_ = true;
  }
  wake_.notify_all();
}

void Registration::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!client_) {
    auto c = RedisClient::Connect(url_, options_.timeout);
    if (c.ok()) client_ = std::move(c).value();
  }
  Status st = client_ ? client_->RemoveDevice(record_.pool, record_.id) : Unavailable("no connection");
  if (!st.ok()) spdlog::warn("farm: cannot remove {} from {}: {}", record_.id, url_.ToString(), st.ToString());
  client_.reset();
}

}  // namespace remex::farm
