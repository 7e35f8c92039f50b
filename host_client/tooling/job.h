// `remex job` and `remex worker` (docs/farm.md, "Jobs"): jobs that outlive their client,
// on rpc/farm_job.h's queue in Redis.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "rpc/farm_job.h"

namespace remex::tooling {

// The job of running `command` on `target` (a model, .onnx or .rmx, or SUITE.toml) with
// `args`: the target travels with it, and for a suite every file its cases name (models,
// inputs, reference folders, baselines), by their paths relative to the suite's folder.
// `command` "" is "suite" for a .toml, "bench" otherwise. INVALID_ARGUMENT for a suite
// naming a file outside its folder (it could not travel), NOT_FOUND for a missing file.
StatusOr<farm::JobSpec> MakeJobSpec(const std::string& target, std::string command, std::vector<std::string> args);

// A job as `remex job status --json` prints it and Python's remex.job_status returns it:
// id, pool, command, target, args, labels, priority, retries, state, submitter,
// submitted_ms (Unix ms), attempts, worker, queue_ms and run_ms (-1: not applicable),
// error, and exit_code and result (the command's JSON report) once it has them.
nlohmann::json JobToJson(const farm::JobRecord& job, int64_t now_ms);

// Waits for job `id` to end, blocking on its log, at most `timeout` (0: no limit): the
// ended job; DEADLINE_EXCEEDED naming its state when the time runs out; NOT_FOUND when
// there is no such job.
StatusOr<farm::JobRecord> WaitForJob(farm::RedisClient& redis, const std::string& id, std::chrono::milliseconds timeout);

// The log of job `id` from its start, as (stream, line) pairs: stream "farm" (what the
// farm did), "err" (the command's standard error); `ended` tells whether the job has ended.
StatusOr<std::vector<std::pair<std::string, std::string>>> JobLog(farm::RedisClient& redis, const std::string& id,
                                                                   bool* ended = nullptr);

struct WorkerOptions {
  std::string farm;            // the farm's URL, as given (passed on to the commands)
  std::string pool = "default";
  std::string name;            // the worker's name in the jobs' records (default: USER@HOST pid N)
  std::string remex;           // the remex binary the commands run with
  std::chrono::milliseconds heartbeat{5000};  // its jobs are requeued 3 heartbeats after its last
  std::chrono::seconds stop_grace{10};        // SIGTERM to SIGKILL of a cancelled command
  bool once = false;           // end after one job
};

// Runs the jobs of `options.pool` one at a time until `stop` is set (or after one job
// with `once`): claims a job, writes its files to a folder of its own, runs
// `remex COMMAND TARGET ARGS --farm URL --pool P [--labels S] --lease-wait 86400 --json`
// there (the command leases its own device), streams its standard error into the job's
// log line by line, beats while it runs (stopping it when the job is cancelled or no
// longer this worker's), and records the exit status, the JSON it printed on standard
// output and, when it failed, its last error line (a command that exits 3, an
// infrastructure error, goes back to the queue while retries remain: farm::RetryJob).
// When `stop` is set the running command is stopped too and nothing is recorded: the job
// goes back to the queue once the worker's heartbeat has lapsed. UNAVAILABLE only when Redis cannot be reached at
// the start; later outages are waited out.
Status RunWorker(const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace remex::tooling
