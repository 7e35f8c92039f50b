// The results store: every `remex bench|check ... --record [URL]` result as one row of
// a database, for history and regression detection (host_client/tooling/README.md,
// "Results store"; docs/cli.md, "Recording results").
//
// Two stores behind one schema, through SOCI (Debian's libsoci-dev):
//   sqlite:///ABS/PATH     a file, for one person or one CI machine (WAL, busy timeout)
//   sqlite://REL/PATH      a path relative to the working folder
//   postgresql://...       a libpq connection URI, for a farm where many CI clients
//   postgres://...         write at once (parsed by libpq; no password in it)
// The schema is versioned (table remex_schema); the migrations this build knows are
// applied on open, in one transaction (PostgreSQL: under an advisory lock; SQLite:
// BEGIN IMMEDIATE), so many clients opening a fresh database at once apply them once.
// A record is written in one transaction: a writer killed mid-write leaves no part of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace remex::tooling {

// The schema version this build writes and migrates to.
inline constexpr int kResultsSchemaVersion = 1;

// One result, as `--record` writes it. Text fields empty when unknown.
struct RunRecord {
  std::string recorded_at;  // ISO 8601 UTC to the second, 2026-12-02T05:30:00Z
  std::string kind;         // "bench", "check", "suite" or "self-test" (self_test_history.h)
  // Who: the user, the CI job, the git commit and branch (RecordContextFromEnvironment).
  std::string user, ci_job, git_commit, git_branch;
  std::map<std::string, std::string> tags;  // --tag KEY=VALUE
  // The model: its file's name and the content hash (base/content_hash.h) of the file
  // (.onnx or .rmx) and of the executable that ran.
  std::string model_name, model_hash, executable_hash;
  nlohmann::json compile_options;  // the report's environment.executable.compile_options (null for .rmx)
  std::string scenario;            // "time-evaluator", or a load scenario with its settings
  std::string device_class;        // farm labels, else "cpu:MODEL" / "gpu:NAME"
  std::string device;              // the server's device, e.g. "cpu" or "cuda:0"
  nlohmann::json summary;          // the figures a history lists (SummaryOf)
  nlohmann::json report;           // the command's own JSON report, whole
  std::vector<double> samples_ms;  // the raw samples, stored zstd-compressed
  nlohmann::json profile;          // the per-op profile, null when none was taken
  std::string verdict;             // "pass", "fail" (mismatch, failed threshold) or "error"
  std::string error;               // the failure's message, for fail and error

  // The series this run belongs to: the lower-case hex content hash of (model hash, or
  // the model's name without one; compile options; scenario; device class).
  std::string SeriesKey() const;
};

// A run as a history lists it (no report, no samples).
struct StoredRun {
  int64_t id = 0;
  std::string recorded_at, kind, user, ci_job, git_commit, git_branch;
  std::map<std::string, std::string> tags;
  nlohmann::json summary;
  std::string verdict, error;
  uint64_t sample_count = 0;
};

// A series: runs with the same model, compile options, scenario and device class.
struct SeriesInfo {
  std::string series_key;
  std::string model_name, model_hash;
  nlohmann::json compile_options;
  std::string scenario, device_class;
  uint64_t runs = 0;
  std::string first_recorded_at, last_recorded_at;
};

// One run with its series (`ResultsStore::GetRun`): what a page about one run names.
struct RunDetail {
  StoredRun run;
  SeriesInfo series;  // its runs, first_ and last_recorded_at left empty
  std::string executable_hash, device;
};

struct HistoryFilter {
  std::string model;         // a model name or content hash; empty: all
  std::string device_class;  // exact; empty: all
  std::string since;         // ISO 8601 UTC lower bound of recorded_at (inclusive); empty: all
  std::string series_key;    // one series; empty: all
  std::string verdict;       // runs of this verdict only ("pass", "fail", "error"); empty: all
  size_t limit = 0;          // ListRuns: the latest `limit` runs only; 0: all
};

class ResultsStore {
 public:
  virtual ~ResultsStore() = default;
  // Writes `record` in one transaction; returns its id. INVALID_ARGUMENT for a record
  // without kind, model name or recorded_at; UNAVAILABLE when the database fails (its
  // own message).
  virtual StatusOr<int64_t> Record(const RunRecord& record) = 0;
  // The series with runs matching `filter`, the most recently recorded first.
  virtual StatusOr<std::vector<SeriesInfo>> ListSeries(const HistoryFilter& filter) = 0;
  // The runs of `filter` (series_key, model, device class, since, verdict; the latest
  // `limit`), oldest first.
  virtual StatusOr<std::vector<StoredRun>> ListRuns(const HistoryFilter& filter) = 0;
  // Run `id` with its series, tags and sample count (no report, no samples). NOT_FOUND
  // for no such run.
  virtual StatusOr<RunDetail> GetRun(int64_t id) = 0;
  // The raw samples of run `id`, ms, in run order. NOT_FOUND for no such run.
  virtual StatusOr<std::vector<double>> Samples(int64_t id) = 0;
  // The report of run `id`, whole. NOT_FOUND for no such run.
  virtual StatusOr<nlohmann::json> Report(int64_t id) = 0;
  // The schema version of the open database (kResultsSchemaVersion once open).
  virtual StatusOr<int> SchemaVersion() = 0;
};

// Checks the form of a results URL (sqlite://PATH, postgresql:// or postgres://):
// INVALID_ARGUMENT naming the forms otherwise, or for a PostgreSQL URI that libpq
// refuses or that carries a password (PGPASSWORD or ~/.pgpass hold it instead).
Status CheckResultsUrl(const std::string& url);

// `url` with a password hidden (postgresql://user:***@host/db; a password=...
// parameter likewise), for messages and logs.
std::string RedactResultsUrl(const std::string& url);

// Opens (creating a SQLite file and its folder when needed) the store at `url` and
// applies the migrations it lacks. INVALID_ARGUMENT for a bad URL; UNAVAILABLE when the
// database cannot be reached or opened; FAILED_PRECONDITION for a database whose schema
// is newer than this build's.
StatusOr<std::unique_ptr<ResultsStore>> OpenResultsStore(const std::string& url);

// The URL `--record` alone writes to: sqlite:///$XDG_DATA_HOME/remex/results.sqlite
// ($HOME/.local/share when XDG_DATA_HOME is unset or relative). FAILED_PRECONDITION
// when neither is set.
StatusOr<std::string> DefaultResultsUrl();

// The store meant by `given`: itself when not empty, else $REMEX_RESULTS when set, else
// DefaultResultsUrl() (its FAILED_PRECONDITION). The URL's form is not checked here.
StatusOr<std::string> ResolveResultsUrl(const std::string& given);

// Who ran it, from the environment: user (REMEX_USER, USER, LOGNAME, the passwd entry),
// CI job (REMEX_CI_JOB; GITHUB_RUN_ID/GITHUB_JOB; CI_JOB_ID; BUILD_TAG), git commit
// (REMEX_GIT_COMMIT, GITHUB_SHA, CI_COMMIT_SHA, GIT_COMMIT) and branch
// (REMEX_GIT_BRANCH, GITHUB_HEAD_REF, GITHUB_REF_NAME, CI_COMMIT_REF_NAME, GIT_BRANCH,
// BRANCH_NAME): the first set of each.
void FillRecordContextFromEnvironment(RunRecord& record);

// Parses --tag KEY=VALUE flags: KEY of [A-Za-z0-9_.-], 1-64 characters; VALUE up to
// 256 characters. INVALID_ARGUMENT naming --tag otherwise, or for a key given twice.
StatusOr<std::map<std::string, std::string>> ParseTags(const std::vector<std::string>& specs);

// `unix_s` (seconds since the epoch) as ISO 8601 UTC to the second, the form of
// RunRecord::recorded_at: 2026-12-02T05:30:00Z.
std::string UtcIso8601(int64_t unix_s);
// Now, as UtcIso8601 writes it.
std::string UtcNow();
// A time as UtcIso8601 writes it (recorded_at) in Unix milliseconds; nullopt when `iso`
// does not start with YYYY-MM-DDTHH:MM:SS.
std::optional<int64_t> UtcIso8601Millis(const std::string& iso);

// Completes `record` for writing, as every `--record` does: recorded_at (now) when it is
// empty, who ran it (FillRecordContextFromEnvironment) and `tags` (ParseTags's).
void CompleteRecord(RunRecord& record, const std::map<std::string, std::string>& tags);

// The record of a bench or check report (report_json.h's schema) of `model_path`: the
// model's name and hash, executable hash, compile options, device, device class
// (`labels` when not empty), scenario, summary, samples and profile. `verdict` and
// `error` as RunRecord has them. Reads the model file for its hash (NOT_FOUND, ...).
StatusOr<RunRecord> RecordFromReport(const std::string& kind, const std::string& model_path,
                                     const nlohmann::json& report, const std::string& labels,
                                     const std::string& verdict, const std::string& error);

// Records one bench or check report of `model_path` in the store at `url` (opened as
// OpenResultsStore does, a SQLite file created when missing): RecordFromReport (recorded_at
// from the report's "date" when it has one), then CompleteRecord with `tags`. Returns the
// run's id. The shell's `bench --record` and the Python client's BenchmarkResult.record
// write through it; errors are those of each step (INVALID_ARGUMENT for a bad URL,
// NOT_FOUND for a model file that is gone, UNAVAILABLE for the database).
StatusOr<int64_t> RecordReport(const std::string& url, const std::string& kind, const std::string& model_path,
                               const nlohmann::json& report, const std::string& labels,
                               const std::map<std::string, std::string>& tags, const std::string& verdict,
                               const std::string& error);

// The figures a history lists of a bench or check report: bench (time evaluator):
// count, median_ms, mean_ms, p90_ms, p99_ms, min_ms, max_ms, stable; bench (load):
// those of the first level with throughput_qps; check: match, outputs, mismatches.
nlohmann::json SummaryOf(const nlohmann::json& report);

// A run as a history lists it: {id, recorded_at, kind, user, ci_job, git_commit,
// git_branch, tags, summary, verdict, error, samples (the count)}.
nlohmann::json StoredRunJson(const StoredRun& run);

// JSON of the history (remex history --json): {"schema": "remex.history",
// "schema_version": 1, "series": [{series_key, model_name, model_hash, compile_options,
// scenario, device_class, run_count, first_recorded_at, last_recorded_at, "runs": [{id,
// recorded_at, kind, user, ci_job, git_commit, git_branch, tags, summary, verdict,
// error, samples}, ...]}, ...]}; `runs[i]` are the runs listed of `series[i]`.
nlohmann::json HistoryJson(const std::vector<SeriesInfo>& series,
                           const std::vector<std::vector<StoredRun>>& runs);

// A --since value as an ISO 8601 UTC bound: a date (2026-12-01), a date and time
// (2026-12-01T10:00:00Z), or an age back from `now_unix_s` (30m, 12h, 7d).
// INVALID_ARGUMENT naming --since otherwise.
StatusOr<std::string> ParseSince(const std::string& since, int64_t now_unix_s);

}  // namespace remex::tooling
