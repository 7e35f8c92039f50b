// `remex job` and `remex worker` (host_client/tooling/job.h).

#include "host_client/tooling/job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "host_client/tooling/exit_code.h"
#include "host_client/tooling/suite.h"
#include "rpc/farm_lease.h"

namespace remex::tooling {
namespace fs = std::filesystem;

namespace {

StatusOr<std::string> ReadWhole(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return NotFound("no file " + path.string());
  const auto size = fs::file_size(path, ec);
  if (ec || size > farm::kMaxJobFileBytes) {
    return InvalidArgument(path.string() + ": more than " + std::to_string(farm::kMaxJobFileBytes >> 20) +
                           " MiB travel with a job");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `path` relative to `base`, refused when outside it.
StatusOr<std::string> Inside(const fs::path& base, const fs::path& path, const std::string& what) {
  const fs::path rel = fs::weakly_canonical(path).lexically_relative(fs::weakly_canonical(base));
  if (rel.empty() || *rel.begin() == "..") {
    return InvalidArgument(what + " " + path.string() + " is outside the suite's folder " + base.string() +
                           ": only files under it travel with a job");
  }
  return rel.generic_string();
}

}  // namespace

StatusOr<farm::JobSpec> MakeJobSpec(const std::string& target, std::string command, std::vector<std::string> args) {
  farm::JobSpec spec;
  const fs::path path(target);
  const bool suite = path.extension() == ".toml";
  spec.command = command.empty() ? (suite ? "suite" : "bench") : std::move(command);
  spec.args = std::move(args);
  if (suite != (spec.command == "suite")) {
    return InvalidArgument("a job of SUITE.toml runs `suite`; a model's job runs bench, check or run (got " + spec.command +
                           " for " + target + ")");
  }
  if (!suite) {
    REMEX_ASSIGN_OR_RETURN(std::string bytes, ReadWhole(path));
    spec.target = path.filename().string();
    spec.files[spec.target] = std::move(bytes);
    return spec;
  }
  REMEX_ASSIGN_OR_RETURN(Suite s, LoadSuite(target));
  const fs::path base = fs::absolute(path).parent_path();
  std::set<fs::path> files = {fs::absolute(path)};
  for (const SuiteCase& c : s.cases) {
    files.insert(c.model);
    for (const std::string& input : c.inputs) files.insert(input.substr(input.find('=') + 1));
    if (!c.reference.empty() && c.reference != "cpu") {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(c.reference, ec)) {
        if (e.is_regular_file()) files.insert(e.path());
      }
      if (ec) return NotFound("reference folder " + c.reference + ": " + ec.message());
    }
    if (c.bench && !c.bench->baseline.empty()) files.insert(c.bench->baseline);
  }
  if (files.size() > farm::kMaxJobFiles) return InvalidArgument("a job carries at most 1024 files");
  size_t bytes = 0;
  for (const fs::path& f : files) {
    REMEX_ASSIGN_OR_RETURN(std::string rel, Inside(base, f, "file"));
    REMEX_ASSIGN_OR_RETURN(std::string content, ReadWhole(f));
    bytes += content.size();
    if (bytes > farm::kMaxJobFileBytes) {
      return InvalidArgument("the suite's files are more than " + std::to_string(farm::kMaxJobFileBytes >> 20) +
                             " MiB: too much to travel with a job");
    }
    spec.files[rel] = std::move(content);
  }
  REMEX_ASSIGN_OR_RETURN(spec.target, Inside(base, fs::absolute(path), "the suite"));
  return spec;
}

nlohmann::json JobToJson(const farm::JobRecord& j, int64_t now_ms) {
  nlohmann::json out = {{"id", j.id}, {"pool", j.pool}, {"command", j.command}, {"target", j.target},
                        {"args", j.args}, {"labels", j.labels}, {"priority", j.priority}, {"retries", j.retries},
                        {"state", std::string(farm::JobStateName(j.state))}, {"submitter", j.submitter},
                        {"submitted_ms", j.submitted_ms}, {"attempts", j.attempts}, {"worker", j.worker},
                        {"queue_ms", j.queue_ms(now_ms)}, {"run_ms", j.run_ms(now_ms)}, {"error", j.error}};
  if (j.exit_code >= 0) out["exit_code"] = j.exit_code;
  if (!j.result.empty()) {
    nlohmann::json result = nlohmann::json::parse(j.result, nullptr, /*allow_exceptions=*/false);
    out["result"] = result.is_discarded() ? nlohmann::json(j.result) : result;
  }
  return out;
}

StatusOr<farm::JobRecord> WaitForJob(farm::RedisClient& redis, const std::string& id, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string after = "$";
  for (;;) {
    REMEX_ASSIGN_OR_RETURN(farm::JobRecord job, farm::ReadJob(redis, id));
    if (farm::JobEnded(job.state)) return job;
    if (timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("job " + id + " is still " + std::string(farm::JobStateName(job.state)) + " after " +
                              std::to_string(timeout.count() / 1000.0).substr(0, 6) + " s");
    }
    // Blocks on the job's log until something is written (its end included), then looks again.
    auto entries = farm::ReadJobLog(redis, id, after, 100, std::chrono::seconds(2));
    if (entries.ok() && !entries->empty()) after = entries->back().id;
  }
}

StatusOr<std::vector<std::pair<std::string, std::string>>> JobLog(farm::RedisClient& redis, const std::string& id,
                                                                   bool* ended) {
  REMEX_RETURN_IF_ERROR(farm::ReadJob(redis, id).status());
  std::vector<std::pair<std::string, std::string>> lines;
  if (ended) *ended = false;
  std::string after = "0";
  for (;;) {
    REMEX_ASSIGN_OR_RETURN(auto entries, farm::ReadJobLog(redis, id, after, 1000, std::chrono::milliseconds(0)));
    if (entries.empty()) return lines;
    for (const auto& e : entries) {
      after = e.id;
      if (e.fields.count("end")) {
        if (ended) *ended = true;
        continue;
      }
      auto stream = e.fields.find("stream");
      auto line = e.fields.find("line");
      if (line != e.fields.end()) lines.emplace_back(stream == e.fields.end() ? "" : stream->second, line->second);
    }
  }
}

namespace {

// One claimed job, run to its end (or until it is no longer this worker's).
void RunJob(farm::RedisClient& redis, const WorkerOptions& options, const std::string& worker,
            farm::ClaimedJob& claimed, const std::atomic<bool>& stop) {
  const farm::JobRecord& job = claimed.job;
  auto log = [&](std::string_view stream, std::string_view line) {
    if (Status st = farm::AppendJobLog(redis, job, stream, line); !st.ok()) {
      spdlog::warn("worker: job {}: log: {}", job.id, st.ToString());
    }
  };
  auto finish = [&](farm::JobState state, int exit_code, const std::string& result, const std::string& error) {
    // Redis may be away for a while (a restart, a failover): the end is recorded once it is back.
    for (int i = 0; i < 120; ++i) {
      Status st = farm::FinishJob(redis, job, worker, claimed.attempt, state, exit_code, result, error);
      if (st.ok() || st.code() != StatusCode::kUnavailable) {
        if (!st.ok()) spdlog::warn("worker: job {}: {}", job.id, st.ToString());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  };
  // The job's folder: its files at their relative paths (each checked to stay inside).
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path() / ("remex-job-" + std::to_string(getpid()) + "-" +
                                                    job.id.substr(job.id.rfind('/') + 1) + "-" +
                                                    std::to_string(claimed.attempt));
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{dir};
  for (const auto& [rel, content] : claimed.files) {
    const fs::path p = (dir / rel).lexically_normal();
    const fs::path r = p.lexically_relative(dir);
    if (rel.empty() || r.empty() || *r.begin() == ".." || fs::path(rel).is_absolute()) {
      finish(farm::JobState::kFailed, -1, "", "the job carries a file outside its folder: " + rel.substr(0, 200));
      return;
    }
    fs::create_directories(p.parent_path(), ec);
    std::ofstream(p, std::ios::binary) << content;
  }
  std::vector<std::string> argv = {options.remex, job.command, (dir / job.target).string()};
  argv.insert(argv.end(), job.args.begin(), job.args.end());
  argv.insert(argv.end(), {"--farm", options.farm, "--pool", job.pool, "--lease-wait", "86400"});
  if (!job.labels.empty()) argv.insert(argv.end(), {"--labels", job.labels});
  if (std::find(job.args.begin(), job.args.end(), "--json") == job.args.end()) argv.push_back("--json");
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    finish(farm::JobState::kFailed, -1, "", std::string("pipe: ") + std::strerror(errno));
    return;
  }
  const std::string dir_text = dir.string();
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed worker takes its command with it
    if (getppid() != parent) _exit(127);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (chdir(dir_text.c_str()) != 0) _exit(127);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (child < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    finish(farm::JobState::kFailed, -1, "", std::string("fork: ") + std::strerror(errno));
    return;
  }
  spdlog::info("worker: job {} (attempt {}): {} {}", job.id, claimed.attempt, job.command, job.target);
  std::string result, partial[2], last_error;
  size_t result_bytes = 0;
  bool open[2] = {true, true};
  const int fds[2] = {out_pipe[0], err_pipe[0]};
  auto last_beat = std::chrono::steady_clock::now();
  bool cancelled = false, lost = false;
  std::chrono::steady_clock::time_point kill_at{};
  int status = 0;
  bool exited = false;
  auto take_lines = [&](int i, bool flush) {
    std::string& buf = partial[i];
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string line = buf.substr(start, nl - start);
      if (i == 1) {  // stderr is the log; stdout is the result
        log("err", line);
        if (!line.empty()) last_error = line;
      }
    }
    buf.erase(0, start);
    if (flush && !buf.empty()) {
      if (i == 1) {
        log("err", buf);
        last_error = buf;
      }
      buf.clear();
    }
  };
  while (!exited) {
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (open[i]) {
        p[n] = {fds[i], POLLIN, 0};
        which[n++] = i;
      }
    }
    if (n > 0) {
      if (poll(p, n, 200) > 0) {
        for (nfds_t k = 0; k < n; ++k) {
          if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          char buf[65536];
          const ssize_t got = read(p[k].fd, buf, sizeof buf);
          const int i = which[k];
          if (got <= 0) {
            open[i] = false;
            take_lines(i, true);
            continue;
          }
          if (i == 0) {
            result_bytes += static_cast<size_t>(got);
            if (result_bytes <= farm::kMaxJobResultBytes) result.append(buf, static_cast<size_t>(got));
          } else {
            partial[i].append(buf, static_cast<size_t>(got));
            take_lines(i, false);
          }
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!open[0] && !open[1]) {
      if (waitpid(child, &status, 0) == child) exited = true;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (stop.load() && !cancelled && !lost) {
      // The worker is stopping: its command too; the job goes back to the queue once this
      // worker's heartbeat has lapsed (an attempt counted).
      spdlog::info("worker: stopping: job {} goes back to the queue after 3 heartbeats", job.id);
      lost = true;
      kill(-child, SIGTERM);
      kill_at = now + options.stop_grace;
    }
    if (kill_at != std::chrono::steady_clock::time_point{} && now >= kill_at) {
      kill(-child, SIGKILL);
      kill_at = {};
    }
    if (now - last_beat >= options.heartbeat) {
      last_beat = now;
      auto beat = farm::BeatJob(redis, job, worker, claimed.attempt, options.heartbeat * 3);
      const bool stop_now = beat.ok() && *beat != farm::Heartbeat::kContinue && !cancelled && !lost;
      if (stop_now) {
        cancelled = *beat == farm::Heartbeat::kCancel;
        lost = *beat == farm::Heartbeat::kLost;
        spdlog::info("worker: job {}: {}: stopping its command", job.id, cancelled ? "cancelled" : "no longer this worker's");
        kill(-child, SIGTERM);
        kill_at = now + options.stop_grace;
      } else if (!beat.ok()) {
        spdlog::warn("worker: job {}: heartbeat: {}", job.id, beat.status().ToString());
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  if (lost) return;  // another attempt owns the job now (or the worker stops): nothing is recorded
  if (result_bytes > farm::kMaxJobResultBytes) {
    result = "{\"error\": \"the command printed " + std::to_string(result_bytes) + " bytes; a job keeps at most " +
             std::to_string(farm::kMaxJobResultBytes) + "\"}";
  }
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (cancelled) {
    finish(farm::JobState::kCancelled, exit_code, result, "cancelled while it ran");
  } else if (exit_code == 0) {
    finish(farm::JobState::kSucceeded, 0, result, "");
  } else if (exit_code == kExitInfrastructure) {
    // The farm failed it (Redis, a connection, a device), not the model: another attempt.
    const std::string why = "the command exited 3 (an infrastructure error)" + (last_error.empty() ? "" : ": " + last_error);
    for (int i = 0; i < 120; ++i) {
      auto retried = farm::RetryJob(redis, job, worker, claimed.attempt, exit_code, why);
      if (retried.ok() || retried.status().code() != StatusCode::kUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  } else {
    finish(farm::JobState::kFailed, exit_code, result,
           "the command exited " + std::to_string(exit_code) + (last_error.empty() ? "" : ": " + last_error));
  }
  spdlog::info("worker: job {} ended (exit {})", job.id, exit_code);
}

}  // namespace

Status RunWorker(const WorkerOptions& options, const std::atomic<bool>& stop) {
  REMEX_RETURN_IF_ERROR(farm::CheckPoolName(options.pool));
  REMEX_ASSIGN_OR_RETURN(farm::RedisUrl url, farm::ParseRedisUrl(options.farm));
  const std::string worker = options.name.empty() ? farm::DefaultHolder() : options.name;
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<farm::RedisClient> redis, farm::RedisClient::Connect(url, std::chrono::seconds(5)));
  spdlog::info("worker {}: running the jobs of pool {} in {}", worker, options.pool, url.ToString());
  bool failing = false;
  while (!stop.load()) {
    auto claimed = farm::ClaimJob(*redis, options.pool, worker, options.heartbeat * 3);
    if (!claimed.ok()) {
      if (!failing) spdlog::warn("worker {}: {}", worker, claimed.status().ToString());
      failing = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    failing = false;
    if (!*claimed) {
      // Nothing queued: wait for a submission (or a heartbeat's time, to requeue the jobs
      // of workers that died).
      (void)farm::WaitForJobs(*redis, options.pool, options.heartbeat);
      continue;
    }
    RunJob(*redis, options, worker, **claimed, stop);
    if (options.once) break;
  }
  return OkStatus();
}

}  // namespace remex::tooling
