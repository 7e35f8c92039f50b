// `remex job` and `remex worker` (docs/farm.md, "Jobs"): jobs that outlive their client,
// on rpc/farm_job.h's queue in Redis.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "rpc/farm_job.h"

namespace remex::tooling {

// The job of running `command` on `target` (a model, .onnx or .rmx, or SUITE.toml) with
// `args`: the target travels with it, and for a suite every file its cases name (models,
// inputs, reference folders, baselines), by their paths relative to the suite's folder.
// `command` "" is "suite" for a .toml, "bench" otherwise. INVALID_ARGUMENT for a suite
// naming a file outside its folder (it could not travel), NOT_FOUND for a missing file.
StatusOr<farm::JobSpec> MakeJobSpec(const std::string& target, std::string command, std::vector<std::string> args);

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
// output and, when it failed, its last error line. When `stop` is set the running
// command is stopped too and nothing is recorded: the job goes back to the queue once
// the worker's heartbeat has lapsed. UNAVAILABLE only when Redis cannot be reached at
// the start; later outages are waited out.
Status RunWorker(const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace remex::tooling
