// Jobs of a farm (docs/farm.md, "Jobs"): work submitted to a pool's queue in Redis that
// outlives the client that submitted it, run by `remex worker` processes, with its log
// and its result kept in Redis.
//
// A job is a Remex command (suite, bench, check or run) on one file (SUITE.toml or a
// model) and its arguments; the files it needs travel with it (stored in Redis, at most
// kMaxJobFileBytes in all). A worker claims the job with the highest priority, then the
// oldest, runs the command with the farm's flags (the command leases its own device of
// the pool, matching the job's labels), streams its output into the job's log, and
// records its exit status and its JSON result.
//
// Keys (every key of pool P starts with "remex:{P}:", so that a pool's jobs live with
// its devices in one slot of a Redis Cluster):
//   remex:{P}:job:<n>         hash: the job (JobRecord's fields); kept 7 days once ended.
//   remex:{P}:job:<n>:files   hash: relative path -> the file's bytes; deleted once ended.
//   remex:{P}:job:<n>:log     stream: the log, entries {line, stream (out|err|farm)}, the
//                             last kMaxLogEntries kept; an entry {end: STATE} when it ends.
//   remex:{P}:jobs:queued     sorted set: the waiting jobs, by priority then order.
//   remex:{P}:jobs:running    sorted set: the running jobs, by when their worker's
//                             heartbeat lapses (ms, Redis's clock).
//   remex:{P}:jobs            sorted set: every job by submission time (for `job list`).
//   remex:{P}:jobs:seq        counter giving job numbers.
//   remex:{P}:jobs:wake       list: a token per submitted job, which an idle worker pops
//                             (BLPOP) instead of polling.
//
// Guarantees: the claim, the heartbeat, the end and the requeue are Lua scripts (atomic),
// so a job runs on at most one worker at a time: each attempt has a number, and a worker
// whose heartbeat finds the job no longer its attempt stops its command and records
// nothing. A worker that dies stops beating; the next claim in the pool finds its
// heartbeat lapsed and puts the job back in the queue (in its place by priority and
// order), up to its retries, then ends it failed with the reason. Persistence is
// Redis's: with AOF (appendonly yes) a job survives a Redis restart.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "rpc/farm.h"

namespace remex::farm {

// Bounds: the files of one job in all, the arguments, the result kept, the log kept.
inline constexpr size_t kMaxJobFileBytes = size_t{256} << 20;
inline constexpr size_t kMaxJobFiles = 1024;
inline constexpr size_t kMaxJobArgs = 256;
inline constexpr size_t kMaxJobResultBytes = size_t{16} << 20;
inline constexpr int64_t kMaxLogEntries = 100000;

// A job's state: queued -> running -> succeeded | failed | cancelled (running -> queued
// again when its worker was lost and retries remain).
enum class JobState : uint8_t { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view JobStateName(JobState state);
StatusOr<JobState> ParseJobState(std::string_view name);
inline bool JobEnded(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled; }

// What a client submits.
struct JobSpec {
  std::string pool = "default";
  std::string command;               // "suite", "bench", "check" or "run"
  std::string target;                // the file the command takes, as a path relative to the job's folder
  std::vector<std::string> args;     // the command's further arguments
  std::string labels;                // the selector its device must match (ParseLabelSelector)
  int priority = 0;                  // -1000..1000: higher runs first
  int retries = 2;                   // 0..100: further attempts after a worker is lost
  std::string submitter;             // who submitted it (default: USER@HOST pid N)
  std::map<std::string, std::string> files;  // relative path -> bytes
};

// A job as Redis holds it.
struct JobRecord {
  std::string id;                    // "<pool>/<n>"
  std::string pool;
  std::string command, target, labels, submitter;
  std::vector<std::string> args;
  int priority = 0, retries = 0;
  JobState state = JobState::kQueued;
  int64_t submitted_ms = 0;          // Unix time, ms (Redis's clock)
  int64_t first_started_ms = 0;      // when a worker first took it (0: never)
  int64_t started_ms = 0;            // when the last attempt started
  int64_t finished_ms = 0;
  int attempts = 0;
  std::string worker;                // the worker of the last attempt
  int exit_code = -1;                // the command's exit status (-1: none)
  std::string result;                // the command's JSON output (may be empty)
  std::string error;                 // why it failed or was cancelled
  bool cancel_requested = false;
  // Queue time (submitted to first start) and run time (last start to end, or to now
  // while running), ms; -1 when not applicable.
  int64_t queue_ms(int64_t now_ms) const;
  int64_t run_ms(int64_t now_ms) const;
};

// "<pool>/<n>" into the pool and the number. INVALID_ARGUMENT naming the id.
StatusOr<std::pair<std::string, int64_t>> ParseJobId(std::string_view id);

// Submits a job: INVALID_ARGUMENT for a bad pool, command, selector, priority, retries, or
// files over the bounds; UNAVAILABLE when Redis fails. Returns the job's id.
StatusOr<std::string> SubmitJob(RedisClient& redis, const JobSpec& spec);
// The job; NOT_FOUND when there is none (never submitted, or ended more than 7 days ago).
StatusOr<JobRecord> ReadJob(RedisClient& redis, std::string_view id);
// The jobs of `pool`, newest first, at most `limit`.
StatusOr<std::vector<JobRecord>> ListJobs(RedisClient& redis, std::string_view pool, size_t limit = 100);
// Cancels a job: a queued one ends cancelled at once; a running one is marked, and its
// worker stops its command at its next heartbeat. FAILED_PRECONDITION when it has ended.
Status CancelJob(RedisClient& redis, std::string_view id);
// The log entries after stream id `after` ("0": from the start), at most `count`, waiting
// up to `block` for one when there is none yet (0: no wait). Each entry: its stream id and
// fields. A field "end" marks the job's end.
struct LogEntry {
  std::string id;
  std::map<std::string, std::string> fields;
};
StatusOr<std::vector<LogEntry>> ReadJobLog(RedisClient& redis, std::string_view id, const std::string& after,
                                           size_t count, std::chrono::milliseconds block);

// --- The worker's side ---
struct ClaimedJob {
  JobRecord job;
  int attempt = 0;
  std::map<std::string, std::string> files;
};
// Takes the next job of `pool` (requeueing or failing first the jobs whose worker's
// heartbeat lapsed), with a heartbeat lease of `heartbeat_ttl`; nullopt when none waits.
StatusOr<std::optional<ClaimedJob>> ClaimJob(RedisClient& redis, std::string_view pool, std::string_view worker,
                                             std::chrono::milliseconds heartbeat_ttl);
// Waits up to `block` for a job to be submitted to `pool` (a wake-up token).
Status WaitForJobs(RedisClient& redis, std::string_view pool, std::chrono::milliseconds block);
// Pushes the attempt's heartbeat forward. Returns kContinue, kCancel (cancel requested:
// stop the command and end the job cancelled) or kLost (the job is no longer this
// attempt's: stop the command and record nothing).
enum class Heartbeat : uint8_t { kContinue, kCancel, kLost };
StatusOr<Heartbeat> BeatJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt,
                            std::chrono::milliseconds heartbeat_ttl);
// Appends lines to the job's log.
Status AppendJobLog(RedisClient& redis, const JobRecord& job, std::string_view stream, std::string_view line);
// Ends the attempt: state succeeded, failed or cancelled, the exit status, the result (at
// most kMaxJobResultBytes) and the reason. FAILED_PRECONDITION when the job is no longer
// this attempt's (nothing recorded).
Status FinishJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt, JobState state,
                 int exit_code, std::string_view result, std::string_view error);

// Ends an attempt whose command failed for want of the farm (an infrastructure error:
// Redis, a connection, a device): the job goes back to the queue, in its place, while
// retries remain (true), else ends failed with `error` (false). FAILED_PRECONDITION when
// the job is no longer this attempt's.
StatusOr<bool> RetryJob(RedisClient& redis, const JobRecord& job, std::string_view worker, int attempt, int exit_code,
                        std::string_view error);

}  // namespace remex::farm
