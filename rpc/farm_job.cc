// Jobs of a farm (rpc/farm_job.h).

#include "rpc/farm_job.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "rpc/farm_lease.h"

namespace remex::farm {
namespace {

constexpr int64_t kKeepEndedMs = int64_t{7} * 24 * 3600 * 1000;  // an ended job's record and log
constexpr size_t kMaxTextBytes = 4096;                           // labels, submitter, an argument

// Shared by the scripts: Redis's clock, and what ending a job does besides its record.
constexpr std::string_view kCommonLua = R"lua(
local KEEP_MS = ARGV[#ARGV]
local function now_ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local function log(P, n, stream, line)
  redis.call('XADD', P .. 'job:' .. n .. ':log', 'MAXLEN', '~', 100000, '*', 'stream', stream, 'line', line)
end
local function end_job(P, n, state)
  redis.call('ZREM', P .. 'jobs:running', n)
  redis.call('ZREM', P .. 'jobs:queued', n)
  redis.call('XADD', P .. 'job:' .. n .. ':log', 'MAXLEN', '~', 100000, '*', 'end', state)
  redis.call('DEL', P .. 'job:' .. n .. ':files')
  redis.call('PEXPIRE', P .. 'job:' .. n, KEEP_MS)
  redis.call('PEXPIRE', P .. 'job:' .. n .. ':log', KEEP_MS)
end
)lua";

// Claims the next job. KEYS: the pool's jobs:queued; ARGV: P, worker, heartbeat ttl_ms,
// KEEP_MS. Returns {n, attempt} or nil.
constexpr std::string_view kClaimLua = R"lua(
local P, W, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
for _, n in ipairs(redis.call('ZRANGEBYSCORE', P .. 'jobs:running', '-inf', now, 'LIMIT', 0, 64)) do
  redis.call('ZREM', P .. 'jobs:running', n)
  local job = P .. 'job:' .. n
  local f = redis.call('HMGET', job, 'attempts', 'retries', 'worker', 'state', 'score')
  if f[4] == 'running' then
    local attempts, retries = tonumber(f[1]) or 0, tonumber(f[2]) or 0
    if attempts > retries then
      redis.call('HSET', job, 'state', 'failed', 'finished_ms', now, 'error',
                 'its worker was lost ' .. attempts .. ' time(s) (the last: ' .. (f[3] or '?') .. '): no retries left')
      log(P, n, 'farm', 'worker ' .. (f[3] or '?') .. ' was lost; no retries left')
      end_job(P, n, 'failed')
    else
      redis.call('HSET', job, 'state', 'queued')
      redis.call('ZADD', P .. 'jobs:queued', f[5], n)
      log(P, n, 'farm', 'worker ' .. (f[3] or '?') .. ' was lost; the job waits for another (' .. (retries + 1 - attempts) ..
          ' attempt(s) left)')
    end
  end
end
local top = redis.call('ZRANGE', P .. 'jobs:queued', 0, 0)
if #top == 0 then return false end
local n = top[1]
redis.call('ZREM', P .. 'jobs:queued', n)
local job = P .. 'job:' .. n
local attempt = redis.call('HINCRBY', job, 'attempts', 1)
redis.call('HSET', job, 'state', 'running', 'worker', W, 'started_ms', now, 'cancel', '0')
if redis.call('HGET', job, 'first_started_ms') == '0' then redis.call('HSET', job, 'first_started_ms', now) end
redis.call('ZADD', P .. 'jobs:running', now + ttl, n)
log(P, n, 'farm', 'attempt ' .. attempt .. ' on worker ' .. W)
return {n, attempt}
)lua";

// A heartbeat. KEYS: the job; ARGV: P, n, worker, attempt, ttl_ms, KEEP_MS. Returns 0
// (go on), 1 (cancel requested), -1 (not this attempt's).
constexpr std::string_view kBeatLua = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'worker', 'attempts', 'cancel')
if f[1] ~= 'running' or f[2] ~= ARGV[3] or f[3] ~= ARGV[4] then return -1 end
redis.call('ZADD', ARGV[1] .. 'jobs:running', now_ms() + tonumber(ARGV[5]), ARGV[2])
if f[4] == '1' then return 1 end
return 0
)lua";

// The end of an attempt. KEYS: the job; ARGV: P, n, worker, attempt, state, exit code,
// result, error, KEEP_MS. Returns 1, or 0 when not this attempt's.
constexpr std::string_view kFinishLua = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'worker', 'attempts')
if f[1] ~= 'running' or f[2] ~= ARGV[3] or f[3] ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[5], 'finished_ms', now_ms(), 'exit_code', ARGV[6], 'result', ARGV[7],
           'error', ARGV[8])
end_job(ARGV[1], ARGV[2], ARGV[5])
return 1
)lua";

// An attempt whose command failed for want of the farm (exit status 3): back to the
// queue while retries remain, else failed. KEYS: the job; ARGV: P, n, worker, attempt,
// exit code, error, KEEP_MS. Returns 2 (requeued), 1 (failed), 0 (not this attempt's).
constexpr std::string_view kRetryLua = R"lua(
local f = redis.call('HMGET', KEYS[1], 'state', 'worker', 'attempts', 'retries', 'score')
if f[1] ~= 'running' or f[2] ~= ARGV[3] or f[3] ~= ARGV[4] then return 0 end
redis.call('ZREM', ARGV[1] .. 'jobs:running', ARGV[2])
if tonumber(f[3]) > tonumber(f[4]) then
  redis.call('HSET', KEYS[1], 'state', 'failed', 'finished_ms', now_ms(), 'exit_code', ARGV[5],
             'error', ARGV[6] .. ' (no retries left)')
  end_job(ARGV[1], ARGV[2], 'failed')
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'queued')
redis.call('ZADD', ARGV[1] .. 'jobs:queued', f[5], ARGV[2])
redis.call('RPUSH', ARGV[1] .. 'jobs:wake', ARGV[2])
log(ARGV[1], ARGV[2], 'farm', ARGV[6] .. '; the job waits for another attempt')
return 2
)lua";

// Cancels. KEYS: the job; ARGV: P, n, KEEP_MS. Returns 1 (ended), 2 (marked: running),
// 0 (already ended), -1 (no such job).
constexpr std::string_view kCancelLua = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state == 'queued' then
  redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_ms', now_ms(), 'error', 'cancelled before it ran')
  log(ARGV[1], ARGV[2], 'farm', 'cancelled before it ran')
  end_job(ARGV[1], ARGV[2], 'cancelled')
  return 1
end
if state == 'running' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  log(ARGV[1], ARGV[2], 'farm', 'cancel requested')
  return 2
end
return 0
)lua";

StatusOr<RedisValue> RunScript(RedisClient& redis, std::string_view body, const std::string& key,
                               std::vector<std::string> argv) {
  std::vector<std::string> args = {"EVAL", std::string(kCommonLua) + std::string(body), "1", key};
  args.insert(args.end(), argv.begin(), argv.end());
  args.push_back(std::to_string(kKeepEndedMs));
  return redis.Query(args);
}

std::string JobKey(std::string_view pool, int64_t n) { return PoolKeyPrefix(pool) + "job:" + std::to_string(n); }

Status CheckText(std::string_view what, std::string_view text) {
  if (text.size() > kMaxTextBytes) return InvalidArgument(std::string(what) + " has more than 4096 bytes");
  return OkStatus();
}

int64_t ToInt(const std::string& s, int64_t fallback = 0) {
  int64_t v = fallback;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() ? v : fallback;
}

// The arguments, NUL-separated (binary-safe in Redis; no argument holds a NUL).
std::string JoinArgs(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) out += (i ? std::string(1, '\0') : std::string()) + args[i];
  return out;
}
std::vector<std::string> SplitArgs(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t nul = text.find('\0', start);
    out.push_back(text.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
    if (nul == std::string::npos) return out;
    start = nul + 1;
  }
}

StatusOr<JobRecord> RecordFrom(const RedisValue& all, std::string_view pool, int64_t n) {
  if (all.type != RedisValue::Type::kArray || all.array.size() % 2 != 0) return Internal("HGETALL returned no pairs");
  std::map<std::string, std::string> f;
  for (size_t i = 0; i + 1 < all.array.size(); i += 2) f[all.array[i].str] = all.array[i + 1].str;
  JobRecord r;
  r.id = std::string(pool) + "/" + std::to_string(n);
  r.pool = std::string(pool);
  r.command = f["command"];
  r.target = f["target"];
  r.labels = f["labels"];
  r.submitter = f["submitter"];
  r.args = SplitArgs(f["args"]);
  r.priority = static_cast<int>(ToInt(f["priority"]));
  r.retries = static_cast<int>(ToInt(f["retries"]));
  auto state = ParseJobState(f["state"]);
  if (!state.ok()) return Internal("job " + r.id + " has the unknown state '" + f["state"].substr(0, 64) + "'");
  r.state = *state;
  r.submitted_ms = ToInt(f["submitted_ms"]);
  r.first_started_ms = ToInt(f["first_started_ms"]);
  r.started_ms = ToInt(f["started_ms"]);
  r.finished_ms = ToInt(f["finished_ms"]);
  r.attempts = static_cast<int>(ToInt(f["attempts"]));
  r.worker = f["worker"];
  r.exit_code = static_cast<int>(ToInt(f["exit_code"], -1));
  r.result = f["result"];
  r.error = f["error"];
  r.cancel_requested = f["cancel"] == "1";
  return r;
}


}  // namespace

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "?";
}

StatusOr<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    if (JobStateName(s) == name) return s;
  }
  return InvalidArgument("unknown job state '" + std::string(name) + "' (queued, running, succeeded, failed, cancelled)");
}

int64_t JobRecord::queue_ms(int64_t now_ms) const {
  if (first_started_ms > 0) return first_started_ms - submitted_ms;
  if (state == JobState::kQueued) return now_ms - submitted_ms;
  return finished_ms > 0 ? finished_ms - submitted_ms : -1;
}

int64_t JobRecord::run_ms(int64_t now_ms) const {
  if (started_ms <= 0) return -1;
  if (state == JobState::kRunning) return now_ms - started_ms;
  return finished_ms > 0 ? finished_ms - started_ms : -1;
}

StatusOr<std::pair<std::string, int64_t>> ParseJobId(std::string_view id) {
  const size_t slash = id.rfind('/');
  auto bad = [&] { return InvalidArgument("job id '" + std::string(id) + "': expected POOL/N, as job submit printed it"); };
  if (slash == std::string_view::npos) return bad();
  const std::string pool(id.substr(0, slash));
  if (!CheckPoolName(pool).ok()) return bad();
  int64_t n = 0;
  const std::string_view number = id.substr(slash + 1);
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || end != number.data() + number.size() || n < 1) return bad();
  return std::make_pair(pool, n);
}

StatusOr<std::string> SubmitJob(RedisClient& redis, const JobSpec& spec) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(spec.pool));
  if (spec.command != "suite" && spec.command != "bench" && spec.command != "check" && spec.command != "run") {
    return InvalidArgument("a job's command is suite, bench, check or run, not '" + spec.command + "'");
  }
  REMEX_RETURN_IF_ERROR(ParseLabelSelector(spec.labels).status());
  if (spec.priority < -1000 || spec.priority > 1000) return InvalidArgument("--priority must be in [-1000, 1000]");
  if (spec.retries < 0 || spec.retries > 100) return InvalidArgument("--retries must be in [0, 100]");
  if (spec.args.size() > kMaxJobArgs) return InvalidArgument("a job has at most 256 arguments");
  for (const std::string& a : spec.args) {
    REMEX_RETURN_IF_ERROR(CheckText("an argument", a));
    if (a.find('\0') != std::string::npos) return InvalidArgument("an argument holds a NUL byte");
  }
  REMEX_RETURN_IF_ERROR(CheckText("the labels", spec.labels));
  REMEX_RETURN_IF_ERROR(CheckText("the target", spec.target));
  if (spec.files.size() > kMaxJobFiles) return InvalidArgument("a job carries at most 1024 files");
  size_t bytes = 0;
  for (const auto& [path, content] : spec.files) bytes += path.size() + content.size();
  if (bytes > kMaxJobFileBytes) {
    return InvalidArgument("a job's files are " + std::to_string(bytes >> 20) + " MiB; at most " +
                           std::to_string(kMaxJobFileBytes >> 20) + " MiB travel with a job");
  }
  const std::string submitter = spec.submitter.empty() ? DefaultHolder() : spec.submitter.substr(0, kMaxTextBytes);
  const std::string prefix = PoolKeyPrefix(spec.pool);
  REMEX_ASSIGN_OR_RETURN(RedisValue seq, redis.Query({"INCR", prefix + "jobs:seq"}));
  const int64_t n = seq.integer;
  const std::string key = JobKey(spec.pool, n);
  // The files first (kept 7 days should the submission stop here), then the job.
  for (const auto& [path, content] : spec.files) {
    REMEX_RETURN_IF_ERROR(redis.Execute({"HSET", key + ":files", path, content}));
  }
  if (!spec.files.empty()) REMEX_RETURN_IF_ERROR(redis.Execute({"PEXPIRE", key + ":files", std::to_string(kKeepEndedMs)}));
  REMEX_ASSIGN_OR_RETURN(const int64_t now, redis.TimeMillis());
  // Higher priority first, then the order of submission (exact in a double: |priority| <=
  // 1000, n < 2^40).
  const std::string score = std::to_string(-static_cast<int64_t>(spec.priority) * (int64_t{1} << 40) + n);
  REMEX_RETURN_IF_ERROR(redis.Execute({"MULTI"}));
  std::vector<std::vector<std::string>> commands = {
      {"HSET", key, "command", spec.command, "target", spec.target, "args", JoinArgs(spec.args), "labels", spec.labels,
       "priority", std::to_string(spec.priority), "retries", std::to_string(spec.retries), "submitter", submitter,
       "state", "queued", "submitted_ms", std::to_string(now), "first_started_ms", "0", "started_ms", "0",
       "finished_ms", "0", "attempts", "0", "exit_code", "-1", "score", score},
      {"ZADD", prefix + "jobs:queued", score, std::to_string(n)},
      {"ZADD", prefix + "jobs", std::to_string(now), std::to_string(n)},
      {"XADD", key + ":log", "MAXLEN", "~", std::to_string(kMaxLogEntries), "*", "stream", "farm", "line",
       "submitted by " + submitter},
      {"RPUSH", prefix + "jobs:wake", std::to_string(n)},
      {"LTRIM", prefix + "jobs:wake", "-1024", "-1"}};
  for (const auto& c : commands) {
    if (Status st = redis.Execute(c); !st.ok()) {
      (void)redis.Execute({"DISCARD"});
      return st;
    }
  }
  REMEX_RETURN_IF_ERROR(redis.Execute({"EXEC"}));
  return spec.pool + "/" + std::to_string(n);
}

StatusOr<JobRecord> ReadJob(RedisClient& redis, std::string_view id) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(id));
  REMEX_ASSIGN_OR_RETURN(RedisValue all, redis.Query({"HGETALL", JobKey(parsed.first, parsed.second)}));
  if (all.array.empty()) return NotFound("no job " + std::string(id) + " (never submitted, or ended more than 7 days ago)");
  return RecordFrom(all, parsed.first, parsed.second);
}

StatusOr<std::vector<JobRecord>> ListJobs(RedisClient& redis, std::string_view pool, size_t limit) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(pool));
  const std::string prefix = PoolKeyPrefix(pool);
  REMEX_ASSIGN_OR_RETURN(RedisValue ids, redis.Query({"ZREVRANGE", prefix + "jobs", "0", std::to_string(limit * 2)}));
  std::vector<JobRecord> out;
  for (const RedisValue& v : ids.array) {
    const int64_t n = ToInt(v.str);
    REMEX_ASSIGN_OR_RETURN(RedisValue all, redis.Query({"HGETALL", JobKey(pool, n)}));
    if (all.array.empty()) {  // expired: forget it
      (void)redis.Execute({"ZREM", prefix + "jobs", v.str});
      continue;
    }
    REMEX_ASSIGN_OR_RETURN(JobRecord r, RecordFrom(all, pool, n));
    out.push_back(std::move(r));
    if (out.size() >= limit) break;
  }
  return out;
}

Status CancelJob(RedisClient& redis, std::string_view id) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(id));
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunScript(redis, kCancelLua, JobKey(parsed.first, parsed.second),
                                                  {PoolKeyPrefix(parsed.first), std::to_string(parsed.second)}));
  if (r.integer == -1) return NotFound("no job " + std::string(id));
  if (r.integer == 0) return FailedPrecondition("job " + std::string(id) + " has ended already");
  return OkStatus();
}

StatusOr<std::vector<LogEntry>> ReadJobLog(RedisClient& redis, std::string_view id, const std::string& after,
                                           size_t count, std::chrono::milliseconds block) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(id));
  const std::string key = JobKey(parsed.first, parsed.second) + ":log";
  std::vector<std::string> args = {"XREAD", "COUNT", std::to_string(std::max<size_t>(1, count))};
  if (block.count() > 0) args.insert(args.end(), {"BLOCK", std::to_string(block.count())});
  args.insert(args.end(), {"STREAMS", key, after});
  REMEX_ASSIGN_OR_RETURN(RedisValue r, block.count() > 0 ? redis.BlockingQuery(args, block) : redis.Query(args));
  std::vector<LogEntry> out;
  if (r.type != RedisValue::Type::kArray || r.array.empty()) return out;
  const RedisValue& stream = r.array[0];
  if (stream.array.size() != 2) return out;
  for (const RedisValue& e : stream.array[1].array) {
    if (e.array.size() != 2) continue;
    LogEntry entry;
    entry.id = e.array[0].str;
    for (size_t i = 0; i + 1 < e.array[1].array.size(); i += 2) entry.fields[e.array[1].array[i].str] = e.array[1].array[i + 1].str;
    out.push_back(std::move(entry));
  }
  return out;
}

StatusOr<std::optional<ClaimedJob>> ClaimJob(RedisClient& redis, std::string_view pool, std::string_view worker,
                                             std::chrono::milliseconds heartbeat_ttl) {
  REMEX_RETURN_IF_ERROR(CheckPoolName(pool));
  const std::string prefix = PoolKeyPrefix(pool);
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunScript(redis, kClaimLua, prefix + "jobs:queued",
                                                  {prefix, std::string(worker), std::to_string(heartbeat_ttl.count())}));
  if (r.type != RedisValue::Type::kArray || r.array.size() != 2) return std::optional<ClaimedJob>();
  const int64_t n = ToInt(r.array[0].str.empty() ? std::to_string(r.array[0].integer) : r.array[0].str);
  ClaimedJob claimed;
  claimed.attempt = static_cast<int>(r.array[1].integer);
  REMEX_ASSIGN_OR_RETURN(RedisValue all, redis.Query({"HGETALL", JobKey(pool, n)}));
  REMEX_ASSIGN_OR_RETURN(claimed.job, RecordFrom(all, pool, n));
  REMEX_ASSIGN_OR_RETURN(RedisValue files, redis.Query({"HGETALL", JobKey(pool, n) + ":files"}));
  for (size_t i = 0; i + 1 < files.array.size(); i += 2) claimed.files[files.array[i].str] = files.array[i + 1].str;
  return std::optional<ClaimedJob>(std::move(claimed));
}

Status WaitForJobs(RedisClient& redis, std::string_view pool, std::chrono::milliseconds block) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", block.count() / 1000.0);
  return redis.BlockingQuery({"BLPOP", PoolKeyPrefix(pool) + "jobs:wake", seconds}, block).status();
}

StatusOr<Heartbeat> BeatJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt,
                            std::chrono::milliseconds heartbeat_ttl) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(job.id));
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunScript(redis, kBeatLua, JobKey(parsed.first, parsed.second),
                                                  {PoolKeyPrefix(parsed.first), std::to_string(parsed.second),
                                                   std::string(worker), std::to_string(attempt),
                                                   std::to_string(heartbeat_ttl.count())}));
  if (r.integer < 0) return Heartbeat::kLost;
  return r.integer == 1 ? Heartbeat::kCancel : Heartbeat::kContinue;
}

Status AppendJobLog(RedisClient& redis, const JobRecord& job, std::string_view stream, std::string_view line) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(job.id));
  return redis.Execute({"XADD", JobKey(parsed.first, parsed.second) + ":log", "MAXLEN", "~",
                        std::to_string(kMaxLogEntries), "*", "stream", std::string(stream), "line",
                        std::string(line.substr(0, 64 * 1024))});
}

Status FinishJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt, JobState state,
                 int exit_code, std::string_view result, std::string_view error) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(job.id));
  REMEX_ASSIGN_OR_RETURN(
      RedisValue r,
      RunScript(redis, kFinishLua, JobKey(parsed.first, parsed.second),
                {PoolKeyPrefix(parsed.first), std::to_string(parsed.second), std::string(worker),
                 std::to_string(attempt), std::string(JobStateName(state)), std::to_string(exit_code),
                 std::string(result.substr(0, kMaxJobResultBytes)), std::string(error.substr(0, kMaxTextBytes))}));
  if (r.integer != 1) return FailedPrecondition("job " + job.id + " is no longer attempt " + std::to_string(attempt) + "'s");
  return OkStatus();
}

StatusOr<bool> RetryJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt, int exit_code,
                        std::string_view error) {
  REMEX_ASSIGN_OR_RETURN(auto parsed, ParseJobId(job.id));
  REMEX_ASSIGN_OR_RETURN(RedisValue r, RunScript(redis, kRetryLua, JobKey(parsed.first, parsed.second),
                                                  {PoolKeyPrefix(parsed.first), std::to_string(parsed.second),
                                                   std::string(worker), std::to_string(attempt), std::to_string(exit_code),
                                                   std::string(error.substr(0, kMaxTextBytes))}));
  if (r.integer == 0) return FailedPrecondition("job " + job.id + " is no longer attempt " + std::to_string(attempt) + "'s");
  return r.integer == 2;
}

}  // namespace remex::farm
