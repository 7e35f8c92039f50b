// remex: compile ONNX models to Remex executables, and run, benchmark and check them
// on a device server. A thin front end: flags in, calls of the tooling layer
// (host_client/tooling/), its reports rendered as text (render.h) or JSON
// (tooling/report_json.h).
//
//   remex compile MODEL.onnx -o MODEL.rmx [COMPILE OPTIONS] [--stats] [--json]
//   remex run     MODEL.onnx|MODEL.rmx [COMPILE OPTIONS] [SESSION OPTIONS] [--fetch all|none|NAME[,NAME]]
//                 [--output-dir DIR] [--save-inputs]
//   remex bench   MODEL [COMPILE OPTIONS] [SESSION OPTIONS] [--number N] [--repeat N] [--min-repeat-ms MS]
//                 [--warmup N] [--cooldown-ms MS] [--l2-flush-bytes B] [--min-duration-s S]
//                 [--min-samples N] [--confidence C] [--window-ms MS] [--stable-window K]
//                 [--stable-threshold F] [--stable-percentile Q] [--max-trials N] [--fail-unstable]
//                 [--profile] [--profile-runs N] [--profile-top N] [--trace FILE.json]
//                 [--variant KEY=VALUE[,KEY=VALUE] ...] [--csv FILE] [--html FILE]
//                 [--scenario single-stream|multi-stream|server|offline] [--concurrency A[:B[:STEP]]]
//                 [--samples-per-query N] [--target-qps Q] [--latency-bound-ms L] [--find-peak]
//                 [--audit|--no-audit] [--audit-samples N] [--audit-rtol R] [--audit-atol A]
//   remex check   MODEL --reference DIR [COMPILE OPTIONS] [SESSION OPTIONS] [--rtol R] [--atol A]
//                 [--no-equal-nan]
//   remex report  BENCH.json [--html FILE] [--csv FILE]
//   remex diff    A.json B.json [--confidence C] [--top N] [--json]
//   remex compare EXPECTED ACTUAL [--rtol R] [--atol A] [--no-equal-nan] [--json]
//   remex gen-sr  -o SR.onnx [--height H] [--width W] [--dtype float32|float16] [--seed N]
//                 [--depth-to-space native|reshape]
//   remex shell   [SESSION OPTIONS but --input/--seed/--json/--verbose] [--history FILE | --no-history]
//   remex farm status [--farm redis://HOST:PORT[/DB]] [--labels SELECTOR] [--timeout S] [--json]
//   remex history [--results URL] [--model M] [--labels S] [--since T] [--limit N] [--json]
//   remex dashboard [--results URL] [--farm redis://HOST:PORT[/DB]] [--listen HOST:PORT] [--token-file F]
//                 [--tls-cert F --tls-key F [--tls-client-ca F]] [--insecure] [regression options]
//   remex completion bash|zsh   (the shell's completion script, from these definitions: completion.h)
// RECORD OPTIONS (bench, check, suite): --record [URL] (default $REMEX_RESULTS, else a SQLite
//   file under $XDG_DATA_HOME/remex/), --tag KEY=VALUE, --record-required|--record-best-effort.
// COMPILE OPTIONS (one set, for every subcommand that takes an .onnx): --shape NAME=DIMS,
//   --bound SYMBOL=MIN:MAX (or INPUT:AXIS=MIN:MAX), --dispatch SPEC, --strict,
//   --layout NCHW|NHWC, --dtype float32|float16, --no-fuse-epilogues, --no-fold-batchnorm,
//   --no-fuse-elementwise, --compute-threads N, --tuning-log FILE [--tuned-for FINGERPRINT].
// SESSION OPTIONS: --server HOST:PORT (default: an embedded server on loopback),
//   --input NAME=FILE.npy, --seed N, --compression auto|none|zstd[:LEVEL], --token-file,
//   --tls-ca/--tls-cert/--tls-key/--tls-server-name, --connect-timeout S, --timeout S,
//   --json, --verbose.
// Exit status (tooling/exit_code.h): 0 success, 1 mismatch, failed threshold or (diff) a
// difference beyond the noise, 2 usage error, 3 infrastructure error (connection, server,
// file system).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "host_client/cli/completion.h"
#include "host_client/cli/progress.h"
#include "host_client/tooling/progress.h"
#include "host_client/cli/render.h"
#include "host_client/cli/shell.h"
#include "host_client/tooling/compare.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/dashboard.h"
#include "host_client/tooling/exit_code.h"
#include "host_client/tooling/farm.h"
#include "host_client/tooling/history.h"
#include "host_client/tooling/job.h"
#include "host_client/tooling/interactive.h"
#include "host_client/tooling/interrupt.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/report_csv.h"
#include "host_client/tooling/report_html.h"
#include "host_client/tooling/report_json.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/run.h"
#include "host_client/tooling/sr_model.h"
#include "host_client/tooling/specs.h"
#include "host_client/tooling/suite.h"
#include "host_client/tooling/tuning.h"
#include "host_client/tooling/variants.h"
#include "host_client/tooling/web_server.h"
#include "rpc/auth.h"
#include "rpc/farm_lease.h"
#include "rpc/load_scenario.h"
#include "rpc/tls.h"

#ifndef REMEX_VERSION
#define REMEX_VERSION "unknown"
#endif

namespace {

using remex::Status;
using remex::StatusOr;
namespace tooling = remex::tooling;
namespace regression = remex::regression;

// A list of names (tooling/specs.h) as CLI11's IsMember takes it.
template <size_t N>
std::vector<std::string> Names(const char* const (&names)[N]) {
  return std::vector<std::string>(names, names + N);
}

// Prints the error once, and returns its exit status.
int Fail(const Status& status) {
  std::fprintf(stderr, "remex: %s\n", status.ToString().c_str());
  return tooling::ExitCodeFor(status);
}

// A usage error found by the CLI itself.
int Usage(const Status& status) {
  std::fprintf(stderr, "remex: %s\n", status.ToString().c_str());
  return tooling::kExitUsage;
}

void PrintJson(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// A report as one JSON object with the command line that made it (--json), else as the
// text `text` makes.
void PrintReport(bool json, nlohmann::json j, const std::string& command, const std::function<std::string()>& text) {
  if (json) {
    j["command"] = command;
    PrintJson(j);
  } else {
    std::fputs(text().c_str(), stdout);
  }
}

// The compile flags of compile, run, bench and check: one definition.
void AddCompileOptions(CLI::App* cmd, tooling::CompileSpecs& specs) {
  cmd->add_option("--shape", specs.shapes, "NAME=DIMS of an input, e.g. x=1x3x48x192 (repeatable)");
  cmd->add_option("--bound", specs.bounds,
                  "bounds of a symbolic input dim, named by its symbol or INPUT:AXIS: W=32:2048, x:3=32:2048 "
                  "(repeatable)");
  cmd->add_option("--dispatch", specs.dispatch,
                  "shape buckets of a symbolic input dim: SYMBOL=log:BASE[:MIN:MAX], SYMBOL=uniform:STEP[:MIN:MAX] "
                  "or SYMBOL=edges:E1,E2,...; SYMBOL may be INPUT:AXIS (repeatable: a grid)");
  cmd->add_flag("--strict", specs.strict,
                "with --dispatch: refuse shapes outside every bucket instead of running the generic function");
  cmd->add_option("--layout", specs.layout,
                  "activation layout between convolutions: NCHW, NHWC or auto (the default: NHWC for int8 "
                  "convolutions on a CPU device with int8 dot products, else NCHW; remex compile: NCHW)")
      ->check(CLI::IsMember(Names(tooling::kLayoutNames), CLI::ignore_case));
  cmd->add_option("--dtype", specs.dtype,
                  "activation and weight dtype: float32 or float16 (default: the model's own; its inputs and "
                  "outputs keep their dtype): float32 runs a float16 model in float32, as CPUs without float16 "
                  "arithmetic want")
      ->check(CLI::IsMember(Names(tooling::kCompileDTypeNames)));
  cmd->add_flag("--no-fuse-epilogues", [&specs](int64_t) { specs.fuse_epilogues = false; },
                "keep Conv and MatMul, their Add and their activation as separate kernels, and attention's "
                "MatMuls and Softmax (the CPU device fuses them otherwise)");
  cmd->add_flag("--no-fold-batchnorm", [&specs](int64_t) { specs.fold_batchnorm = false; },
                "keep inference BatchNormalization apart instead of folding it into the Conv before it");
  cmd->add_flag("--no-fuse-elementwise", [&specs](int64_t) { specs.fuse_elementwise = false; },
                "keep chains of elementwise ops as separate kernels instead of one FusedElementwise each");
  cmd->add_option("--compute-threads", specs.compute_threads,
                  "CPU compute threads the executable's kernels use at most (fewer than the server's --threads "
                  "only); 0: the server's")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--tuning-log", specs.tuning_log,
                  "compile each bucket with the choices `remex tune` logged for this model in this file")
      ->type_name("FILE");
  cmd->add_option("--tuned-for", specs.tuned_for,
                  "with --tuning-log: the device fingerprint whose choices to use, when the log holds several "
                  "(`remex tune` prints it)");
}

// The flags that name a server and how to reach it: run, bench, check and shell.
struct ConnectionArgs {
  std::string server;
  std::string compression = "auto";
  std::string token_file;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  double connect_timeout_s = 10;
  double timeout_s = 600;
  std::string farm, pool = "default", labels;
  double lease_wait_s = 0;
};

// The session flags of run, bench and check.
struct SessionArgs : ConnectionArgs {
  std::string model;
  tooling::CompileSpecs compile;
  std::vector<std::string> inputs;
  uint64_t seed = 0;
  bool json = false;
  bool verbose = false;
};

// --farm, --pool, --labels, --lease-wait (of run, bench, check and farm lease).
struct FarmLeaseFlags {
  CLI::Option* farm = nullptr;
  CLI::Option* pool = nullptr;
  CLI::Option* labels = nullptr;
  CLI::Option* wait = nullptr;
};
FarmLeaseFlags AddFarmLeaseOptions(CLI::App* cmd, std::string& farm, std::string& pool, std::string& labels,
                                   double& wait_s) {
  FarmLeaseFlags f;
  f.farm = cmd->add_option("--farm", farm, "lease a device of the farm at redis://[USER@]HOST:PORT[/DB] (a user's password in REMEX_FARM_PASSWORD; docs/farm.md)");
  f.pool = cmd->add_option("--pool", pool, "with --farm: the pool to lease from")->capture_default_str();
  f.labels = cmd->add_option("--labels", labels,
                             "with --farm: a label selector the device must match, e.g. gpu=h100,cuda>=12.4");
  f.wait = cmd->add_option("--lease-wait", wait_s,
                           "with --farm: seconds to wait in the pool's queue for a free device (default 0: one free now)")
               ->check(CLI::Range(0.0, 86400.0));
  return f;
}

// The lease options of --farm, --pool, --labels and --lease-wait: usage errors for a bad
// URL, pool or selector, or lease flags without --farm.
StatusOr<std::optional<tooling::FarmLeaseOptions>> FarmLeaseFromFlags(const std::string& farm, const std::string& pool,
                                                                      const std::string& labels, double wait_s) {
  if (farm.empty()) {
    if (pool != "default" || !labels.empty() || wait_s != 0) {
      return remex::InvalidArgument("--pool, --labels and --lease-wait need --farm");
    }
    return std::optional<tooling::FarmLeaseOptions>();
  }
  REMEX_RETURN_IF_ERROR(remex::farm::ParseRedisUrl(farm).status());
  REMEX_RETURN_IF_ERROR(remex::farm::CheckPoolName(pool).WithContext("--pool"));
  REMEX_RETURN_IF_ERROR(remex::farm::ParseLabelSelector(labels).status().WithContext("--labels"));
  tooling::FarmLeaseOptions o;
  o.url = farm;
  o.pool = pool;
  o.selector = labels;
  o.wait = std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  return std::optional<tooling::FarmLeaseOptions>(o);
}

void AddConnectionOptions(CLI::App* cmd, ConnectionArgs& args) {
  cmd->add_option("--server", args.server, "HOST:PORT of a remex-server (default: an embedded one on loopback)");
  cmd->add_option("--compression", args.compression, "tensor attachments: auto (zstd where it pays; none to a loopback address), none, or zstd[:LEVEL]")
      ->capture_default_str();
  cmd->add_option("--token-file", args.token_file,
                  "the server's token (remex-server --token-file); default: the REMEX_TOKEN environment variable")
      ->type_name("FILE");
  cmd->add_option("--tls-ca", args.tls_ca,
                  "connect to --server over TLS; PEM file of the CA the server's certificate must chain to")
      ->type_name("FILE");
  cmd->add_option("--tls-cert", args.tls_cert, "with --tls-ca: this client's PEM certificate (mutual TLS)")
      ->type_name("FILE");
  cmd->add_option("--tls-key", args.tls_key, "with --tls-cert: its PEM private key")->type_name("FILE");
  cmd->add_option("--tls-server-name", args.tls_server_name,
                  "with --tls-ca: the name the server's certificate must carry, when --server's host is not it");
  cmd->add_option("--connect-timeout", args.connect_timeout_s, "seconds to wait for the server to accept")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--timeout", args.timeout_s,
                  "seconds one request may take (an upload, a run, a whole benchmark) before the client gives up")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  AddFarmLeaseOptions(cmd, args.farm, args.pool, args.labels, args.lease_wait_s);
}

void AddSessionOptions(CLI::App* cmd, SessionArgs& args) {
  cmd->add_option("model", args.model, "MODEL.onnx or MODEL.rmx")->required()->type_name("FILE");
  AddCompileOptions(cmd, args.compile);
  AddConnectionOptions(cmd, args);
  cmd->add_option("--input", args.inputs, "NAME=FILE.npy (repeatable); other inputs are random");
  cmd->add_option("--seed", args.seed, "seed of the random inputs")->capture_default_str();
  cmd->add_flag("--json", args.json, "print one JSON object");
  cmd->add_flag("--verbose", args.verbose, "also print wire, copy and allocation detail");
}

// The server of run, bench, check and shell from their flags: every failure is a usage
// error.
StatusOr<tooling::ServerOptions> MakeServerOptions(const ConnectionArgs& args) {
  tooling::ServerOptions o;
  o.address = args.server;
  if (!args.server.empty()) REMEX_RETURN_IF_ERROR(tooling::ParseServerAddress(args.server).status());
  REMEX_ASSIGN_OR_RETURN(o.farm, FarmLeaseFromFlags(args.farm, args.pool, args.labels, args.lease_wait_s));
  if (o.farm && !args.server.empty()) {
    return remex::InvalidArgument("--server and --farm: name a server or lease one from the farm, not both");
  }
  if (o.farm && !args.token_file.empty()) {
    return remex::InvalidArgument("--token-file and --farm: a leased device takes its lease's token");
  }
  REMEX_ASSIGN_OR_RETURN(o.compression, tooling::ParseCompression(args.compression));
  REMEX_ASSIGN_OR_RETURN(o.token, tooling::TokenFromFileOrEnvironment(args.token_file));
  REMEX_ASSIGN_OR_RETURN(o.tls, tooling::TlsFromFlags(args.server, args.tls_ca, args.tls_cert, args.tls_key,
                                                      args.tls_server_name));
  o.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.connect_timeout_s * 1000));
  o.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  return o;
}

// The request of run, bench and check from their flags: every failure is a usage error.
StatusOr<tooling::ModelRequest> MakeRequest(const SessionArgs& args, const std::string& default_input_dir) {
  tooling::ModelRequest r;
  r.model = args.model;
  REMEX_ASSIGN_OR_RETURN(r.compile, tooling::ParseCompileSpecs(args.compile, args.model));
  r.changes_compilation = args.compile.ChangesCompilation();
  REMEX_ASSIGN_OR_RETURN(r.input_files, tooling::ParseInputSpecs(args.inputs));
  r.seed = args.seed;
  r.default_input_dir = default_input_dir;
  REMEX_ASSIGN_OR_RETURN(r.server, MakeServerOptions(args));
  return r;
}


// Prepares the model with progress on a terminal; on failure prints and returns the
// exit status (and the error in `failure` when given).
int Prepare(const SessionArgs& args, const tooling::ModelRequest& request,
            remex::cli::TerminalProgress& progress, tooling::PreparedModel& prepared,
            Status* failure = nullptr) {
  auto p = tooling::PrepareModel(request, [&](const std::string& step) { progress.Step(step); });
  if (!p.ok()) {
    if (failure) *failure = p.status();
    return Fail(p.status());
  }
  prepared = std::move(p).value();
  return 0;
}

// --record, --tag and --record-required of bench and check (docs/cli.md, "Recording
// results"). `--record` takes the next argument as its URL only when that has the form
// SCHEME://...; otherwise main() rewrites it to this hidden flag before parsing, so that
// `remex bench --record MODEL` records MODEL's result to the default store.
constexpr char kRecordDefaultFlag[] = "--record-to-default-store";

bool LooksLikeUrl(const char* arg) { return std::strstr(arg, "://") != nullptr; }
struct RecordArgs {
  CLI::Option* record = nullptr;
  bool record_default = false;  // --record without a URL (main rewrites it to kRecordDefaultFlag)
  std::string url;
  std::vector<std::string> tags;
  bool required = true;
};

void AddRecordOptions(CLI::App* cmd, RecordArgs& args) {
  args.record = cmd->add_option("--record", args.url,
                                "write the result to the results store at URL: sqlite:///PATH or "
                                "postgresql://[USER@]HOST[:PORT]/DB (default: $REMEX_RESULTS, else "
                                "sqlite://$XDG_DATA_HOME/remex/results.sqlite)")
                    ->expected(0, 1);
  cmd->add_flag(kRecordDefaultFlag, args.record_default)->group("");  // hidden
  cmd->add_option("--tag", args.tags, "with --record: KEY=VALUE recorded with the result (repeatable)");
  cmd->add_flag("--record-required,!--record-best-effort", args.required,
                "with --record: a result that cannot be recorded fails the command with exit 3 (default), or "
                "only warns (--record-best-effort)");
}

// Where and how a result is recorded.
struct RecordPlan {
  std::string url;
  std::map<std::string, std::string> tags;
  bool required = true;
};

// The plan of --record, checked before any work: usage errors for a bad URL or tag, or
// --tag without --record.
StatusOr<std::optional<RecordPlan>> MakeRecordPlan(const RecordArgs& args) {
  if (!args.record_default && (!args.record || args.record->count() == 0)) {
    if (!args.tags.empty()) return remex::InvalidArgument("--tag needs --record");
    return std::optional<RecordPlan>();
  }
  RecordPlan plan;
  REMEX_ASSIGN_OR_RETURN(plan.url, tooling::ResolveResultsUrl(args.url));
  REMEX_RETURN_IF_ERROR(tooling::CheckResultsUrl(plan.url).WithContext("--record"));
  REMEX_ASSIGN_OR_RETURN(plan.tags, tooling::ParseTags(args.tags));
  plan.required = args.required;
  return std::optional<RecordPlan>(plan);
}

// Records a result (after it was printed) and returns the command's exit status: `rc`,
// or 3 when the record was required, could not be written and `rc` was 0. `report` is
// null for a command that failed before it had one.
// Writes `records` (made by `make`, which may fail) in one store, each in its own
// transaction, and returns the command's exit status: `rc`, or 3 when the records were
// required, one could not be made or written, and `rc` was 0.
int WriteRecords(const RecordPlan& plan, const std::vector<StatusOr<tooling::RunRecord>>& records, int rc) {
  // Every record that can be made and written is; the first error is reported.
  std::unique_ptr<tooling::ResultsStore> store;
  Status st;
  for (const auto& record : records) {
    if (record.ok() && !store) {
      auto opened = tooling::OpenResultsStore(plan.url);
      if (!opened.ok()) {
        st = opened.status();
        break;
      }
      store = std::move(opened).value();
    }
    Status one = [&]() -> Status {
      REMEX_RETURN_IF_ERROR(record.status());
      tooling::RunRecord r = *record;
      tooling::CompleteRecord(r, plan.tags);
      REMEX_ASSIGN_OR_RETURN(int64_t id, store->Record(r));
      std::fprintf(stderr, "remex: recorded as run %lld in %s\n", static_cast<long long>(id),
                   tooling::RedactResultsUrl(plan.url).c_str());
      return remex::OkStatus();
    }();
    if (st.ok() && !one.ok()) st = one;
  }
  if (st.ok()) return rc;
  if (!plan.required) {
    std::fprintf(stderr, "remex: warning: the result was not recorded (--record-best-effort): %s\n",
                 st.ToString().c_str());
    return rc;
  }
  std::fprintf(stderr, "remex: the result above was not recorded: %s\n", st.ToString().c_str());
  return rc == tooling::kExitOk ? tooling::kExitInfrastructure : rc;
}

int RecordResult(const std::optional<RecordPlan>& plan, const std::string& kind, const SessionArgs& args,
                 const nlohmann::json& report, const std::string& verdict, const std::string& error, int rc) {
  if (!plan) return rc;
  auto record = tooling::RecordFromReport(kind, args.model, report, args.labels, verdict, error);
  if (record.ok() && report.is_object() && report.contains("date")) record->recorded_at = report["date"];
  return WriteRecords(*plan, {record}, rc);
}

struct RunArgs : SessionArgs {
  std::string fetch = "all";
  std::string output_dir;
  bool save_inputs = false;
};

int Run(const RunArgs& args) {
  auto request = MakeRequest(args, "");
  if (!request.ok()) return Usage(request.status());
  tooling::RunOptions options;
  auto fetch = tooling::ParseFetch(args.fetch);
  if (!fetch.ok()) return Usage(fetch.status());
  options.fetch = *fetch;
  options.output_dir = args.output_dir;
  options.save_inputs = args.save_inputs;
  if (args.save_inputs && args.output_dir.empty()) return Usage(remex::InvalidArgument("--save-inputs needs --output-dir"));
  // The folder is made and checked before any work, unless the model cannot even be
  // opened: then Prepare says so, and no empty folder is left behind.
  if (!args.output_dir.empty() && std::ifstream(request->model).good()) {
    if (Status st = tooling::EnsureWritableDirectory(args.output_dir); !st.ok()) return Fail(st);
  }
  remex::cli::TerminalProgress progress(!args.json);
  tooling::PreparedModel prepared;
  if (int rc = Prepare(args, *request, progress, prepared); rc != 0) return rc;
  progress.Step("running " + prepared.main().name);
  auto report = tooling::RunModel(*request, prepared, options);
  progress.Step("");
  if (!report.ok()) return Fail(report.status());
  if (args.json) {
    PrintJson(tooling::ToJson(*report));
  } else {
    remex::cli::PrintRun(*report, args.verbose);
  }
  return tooling::kExitOk;
}

// The report files of bench and report (--csv, --html).
struct ReportFiles {
  std::string csv, html;

  // A usage error when both name one file; else the first file that cannot be written
  // (checked before the work, leaving no file behind).
  Status Check() const {
    if (!csv.empty() && csv == html) return remex::InvalidArgument("--csv and --html name the same file '" + csv + "'");
    if (!csv.empty()) REMEX_RETURN_IF_ERROR(tooling::EnsureWritableFile(csv, "the CSV report"));
    if (!html.empty()) REMEX_RETURN_IF_ERROR(tooling::EnsureWritableFile(html, "the HTML report"));
    return remex::OkStatus();
  }

  // Writes the files from a bench report's JSON.
  Status Write(const nlohmann::json& bench) const {
    auto write = [](const std::string& path, const std::string& text) {
      auto* p = reinterpret_cast<const std::byte*>(text.data());
      return tooling::WriteFileBytes(path, std::vector<std::byte>(p, p + text.size()));
    };
    if (!csv.empty()) REMEX_RETURN_IF_ERROR(write(csv, tooling::BenchCsv(bench)));
    if (!html.empty()) REMEX_RETURN_IF_ERROR(write(html, tooling::BenchHtml(bench)));
    return remex::OkStatus();
  }
};

void AddReportFileOptions(CLI::App* cmd, ReportFiles& files) {
  cmd->add_option("--csv", files.csv,
                  "write the samples (or, with load levels, one row per level) as CSV to this file (docs/cli.md)")
      ->type_name("FILE");
  cmd->add_option("--html", files.html,
                  "write a self-contained HTML page with the report's charts to this file (no network needed)")
      ->type_name("FILE");
}

// The command line as a POSIX shell reads it back: arguments of other characters than
// [A-Za-z0-9_./:=,+@%-] in single quotes.
std::string CommandLine(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                   "0123456789_./:=,+@%-") == std::string::npos;
    if (!plain) {
      std::string quoted = "'";
      for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = quoted + "'";
    }
    line += (i ? " " : "") + a;
  }
  return line;
}

struct BenchArgs : SessionArgs {
  tooling::BenchOptions options;
  // Load scenarios (tooling/load.h): --scenario turns them on.
  tooling::LoadSpec load;
  bool audit = false, no_audit = false;  // default: on for server and offline
  ReportFiles files;
  std::string command;  // the command line, for the report
  RecordArgs record;
  std::string trace;  // --trace FILE.json
  CLI::Option* profile_runs = nullptr;
  CLI::Option* profile_top = nullptr;
  std::vector<std::string> variants;  // --variant KEY=VALUE[,KEY=VALUE]
};

// The load scenario of `args`, when --scenario names one; INVALID_ARGUMENT for load
// flags without it.
StatusOr<std::optional<tooling::LoadOptions>> MakeLoadOptions(const BenchArgs& args) {
  if (args.audit && args.no_audit) return remex::InvalidArgument("--audit and --no-audit contradict each other");
  tooling::LoadSpec spec = args.load;
  if (args.audit || args.no_audit) spec.audit = args.audit;
  spec.seed = args.seed;
  return tooling::MakeLoadOptions(spec);
}

// remex bench MODEL --variant ...: the model as given ("base") and each variant,
// benchmarked interleaved on one session, in one table (tooling/variants.h).
int BenchVariants(const BenchArgs& args) {
  if (!args.trace.empty())
    return Usage(remex::InvalidArgument("--variant and --trace: trace one variant at a time"));
  if (!args.files.csv.empty() || !args.files.html.empty()) {
    return Usage(remex::InvalidArgument("--variant and --csv or --html: those report one benchmark"));
  }
  if (args.record.record_default || (args.record.record && args.record.record->count() != 0)) {
    return Usage(remex::InvalidArgument("--variant and --record: record one variant at a time"));
  }
  if (!args.load.scenario.empty()) {
    return Usage(remex::InvalidArgument("--variant and --scenario: variants run the time evaluator only"));
  }
  if (!args.options.profile && ((args.profile_runs && args.profile_runs->count()) ||
                                (args.profile_top && args.profile_top->count()))) {
    return Usage(remex::InvalidArgument("--profile-runs and --profile-top need --profile"));
  }
  if (Status st = tooling::CheckBenchOptions(args.options); !st.ok()) return Usage(st);
  std::vector<tooling::VariantRequest> variants;
  auto base = MakeRequest(args, "");
  if (!base.ok()) return Usage(base.status());
  variants.push_back({"base", *base});
  for (const std::string& text : args.variants) {
    auto specs = tooling::ApplyVariant(args.compile, text);
    if (!specs.ok()) return Usage(specs.status());
    SessionArgs one = args;
    one.compile = *specs;
    auto request = MakeRequest(one, "");
    if (!request.ok()) return Usage(request.status().WithContext("--variant '" + text + "'"));
    variants.push_back({text, *request});
  }
  remex::cli::TerminalProgress progress(!args.json);
  auto report =
      tooling::BenchVariants(variants, args.options, [&](const std::string& step) { progress.Step(step); });
  progress.Step("");
  if (!report.ok()) return Fail(report.status());
  PrintReport(args.json, tooling::ToJson(*report), args.command,
              [&] { return tooling::VariantsText(*report, args.options.profile_top); });
  return tooling::kExitOk;
}

struct DiffArgs {
  std::string a, b;
  double confidence = 0.95;
  size_t top = tooling::kDefaultProfileTop;
  bool json = false;
};

// remex diff A.json B.json: two saved bench reports side by side (tooling/variants.h).
// Exit 0 when B is within A's noise, 1 when it differs beyond it.
int DiffCommand(const DiffArgs& args) {
  auto read = [](const std::string& path) -> StatusOr<nlohmann::json> {
    REMEX_ASSIGN_OR_RETURN(auto bytes, tooling::ReadFileBytes(path));
    auto* p = reinterpret_cast<const char*>(bytes.data());
    nlohmann::json j = nlohmann::json::parse(p, p + bytes.size(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      return remex::InvalidArgument("'" + path + "' is no JSON (remex bench --json writes it)");
    return j;
  };
  auto a = read(args.a);
  if (!a.ok()) return Fail(a.status());
  auto b = read(args.b);
  if (!b.ok()) return Fail(b.status());
  auto diff = tooling::DiffBenchReports(*a, args.a, *b, args.b, args.confidence);
  if (!diff.ok()) return Fail(diff.status());
  const nlohmann::json j = tooling::ToJson(*diff);
  if (args.json) {
    PrintJson(j);
  } else {
    std::fputs(tooling::DiffText(*diff, args.top).c_str(), stdout);
  }
  return j["beyond_noise"].get<bool>() ? tooling::kExitMismatch : tooling::kExitOk;
}

// Writes the trace of `report`'s profile to `path` (--trace).
Status WriteTrace(const std::string& path, const tooling::BenchReport& report) {
  if (!report.profile || report.profile->trace.is_null()) return remex::Internal("the profile has no trace");
  nlohmann::json trace = report.profile->trace;
  // The process is the server's device.
  if (!report.session.device.empty())
    trace["traceEvents"][0]["args"]["name"] = "remex-server: " + report.session.device;
  const std::string text = trace.dump();
  auto* p = reinterpret_cast<const std::byte*>(text.data());
  return tooling::WriteFileBytes(path, std::vector<std::byte>(p, p + text.size()));
}

// remex bench's SIGINT and SIGTERM: the benchmark is cancelled on the server and the
// samples taken so far are reported, marked partial; the handler resets itself
// (SA_RESETHAND), so a second signal ends the process at once.
tooling::Interrupter* g_bench_interrupter = nullptr;
extern "C" void OnBenchSignal(int sig) {
  if (tooling::Interrupter* irq = g_bench_interrupter) irq->Notify(sig);
}

// Installs OnBenchSignal for SIGINT and SIGTERM while it lives, for `irq`; a signal
// ignored on entry (SIGINT of a background job) stays ignored.
class BenchSignals {
 public:
  explicit BenchSignals(tooling::Interrupter& irq) {
    g_bench_interrupter = &irq;
    struct sigaction action = {};
    action.sa_handler = OnBenchSignal;
    action.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    for (auto [sig, previous] : {std::pair{SIGINT, &previous_int_}, std::pair{SIGTERM, &previous_term_}}) {
      sigaction(sig, nullptr, previous);
      if (previous->sa_handler != SIG_IGN) sigaction(sig, &action, nullptr);
    }
  }
  ~BenchSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
    g_bench_interrupter = nullptr;
  }
  BenchSignals(const BenchSignals&) = delete;
  BenchSignals& operator=(const BenchSignals&) = delete;

 private:
  struct sigaction previous_int_ = {}, previous_term_ = {};
};

int Bench(const BenchArgs& args_in) {
  BenchArgs args = args_in;
  if (!args.variants.empty()) return BenchVariants(args);
  auto request = MakeRequest(args, "");
  if (!request.ok()) return Usage(request.status());
  if (!args.trace.empty()) {
    args.options.profile = true;
    args.options.trace = true;
  }
  if (!args.options.profile && ((args.profile_runs && args.profile_runs->count()) ||
                                (args.profile_top && args.profile_top->count()))) {
    return Usage(remex::InvalidArgument("--profile-runs and --profile-top need --profile (or --trace)"));
  }
  if (Status st = tooling::CheckBenchOptions(args.options); !st.ok()) return Usage(st);
  if (!args.trace.empty()) {
    if (Status st = tooling::EnsureWritableFile(args.trace, "the trace"); !st.ok()) return Fail(st);
  }
  auto load = MakeLoadOptions(args);
  if (!load.ok()) return Usage(load.status());
  args.options.load = *load;
  auto record = MakeRecordPlan(args.record);
  if (!record.ok()) return Usage(record.status());
  if (Status st = args.files.Check(); !st.ok()) return Fail(st);  // before any work
  std::string date = tooling::UtcNow();
  remex::cli::TerminalProgress progress(!args.json);
  tooling::PreparedModel prepared;
  Status failure;
  if (int rc = Prepare(args, *request, progress, prepared, &failure); rc != 0) {
    return RecordResult(*record, "bench", args, nullptr, "error", failure.ToString(), rc);
  }
  progress.Step("benchmarking " + prepared.main().name);
  // SIGINT and SIGTERM from here on cancel the benchmark on the server.
  auto irq = tooling::Interrupter::Start([&progress](const std::string& message) {
    progress.Step("");
    std::fprintf(stderr, "remex: %s\n", message.c_str());
  });
  if (!irq.ok()) return Fail(irq.status());
  StatusOr<tooling::BenchReport> report = remex::Internal("not run");
  {
    BenchSignals signals(**irq);
    // --from-client sends its queries from this host: it stops sending (BenchVm reads
    // `interrupt`), and the session watched has nothing running to cancel.
    const bool from_client = args.options.load && args.options.load->from_client;
    (*irq)->Watch(from_client ? nullptr : &prepared.session());
    args.options.interrupt = &(*irq)->signal();
    // Samples done and the time left, on the progress line (a terminal only).
    std::unique_ptr<tooling::ProgressPoller> poller;
    if (progress.enabled()) {
      poller = std::make_unique<tooling::ProgressPoller>(
          prepared.session(), [&progress](const std::string& detail) { progress.Detail(detail); });
    }
    report = tooling::BenchModel(*request, prepared, args.options);
    poller.reset();
    (*irq)->Watch(nullptr);
  }
  progress.Step("");
  // Interrupted: the exit status of a shell's command killed by the signal, after the
  // partial report is printed.
  const int interrupted = (*irq)->signal().load();
  if (!report.ok()) {
    int rc = Fail(report.status());
    if (interrupted != 0 && report.status().code() == remex::StatusCode::kCancelled) rc = 128 + interrupted;
    return RecordResult(*record, "bench", args, nullptr, "error", report.status().ToString(), rc);
  }
  nlohmann::json j = tooling::ToJson(*report);
  j["command"] = args.command;
  j["date"] = date;
  if (args.json) {
    PrintJson(j);
  } else {
    remex::cli::PrintBench(*report, args.verbose);
  }
  int rc = tooling::kExitOk;
  if (Status st = args.files.Write(j); !st.ok()) rc = Fail(st);
  if (!report->partial.empty()) {
    // Kept as an error: a partial run is no measurement to judge or compare.
    std::fprintf(stderr, "remex: the benchmark is partial: %s\n", report->partial.c_str());
    if (rc == tooling::kExitOk) rc = interrupted != 0 ? 128 + interrupted : tooling::kExitInfrastructure;
    return RecordResult(*record, "bench", args, j, "error", "partial: " + report->partial, rc);
  }
  if (!args.trace.empty() && rc == tooling::kExitOk) {
    if (Status st = WriteTrace(args.trace, *report); !st.ok()) rc = Fail(st);
  }
  // An audit that failed fails the benchmark; --fail-unstable judges the run (every
  // single-stream or multi-stream level).
  const std::string failed = tooling::BenchFailure(*report);
  if (rc == tooling::kExitOk && !failed.empty()) rc = tooling::kExitMismatch;
  return RecordResult(*record, "bench", args, j, failed.empty() ? "pass" : "fail", failed, rc);
}

struct ReportArgs {
  std::string input;
  ReportFiles files;
};

// remex report: the CSV and HTML of a saved bench report (remex bench --json, or the
// Python client's Model.benchmark).
int ReportCommand(const ReportArgs& args) {
  if (args.files.csv.empty() && args.files.html.empty()) {
    return Usage(remex::InvalidArgument("report: name a file to write with --html or --csv"));
  }
  if (Status st = args.files.Check(); !st.ok()) return Fail(st);
  auto bytes = tooling::ReadFileBytes(args.input);
  if (!bytes.ok()) return Fail(bytes.status());
  auto* p = reinterpret_cast<const char*>(bytes->data());
  nlohmann::json j = nlohmann::json::parse(p, p + bytes->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Usage(remex::InvalidArgument("'" + args.input + "' is no JSON object (remex bench --json writes one)"));
  }
  if (j.contains("schema") && j["schema"] != tooling::kBenchSchema) {
    return Usage(remex::InvalidArgument("'" + args.input + "' is a " + j["schema"].dump() + " report, not a " +
                                        tooling::kBenchSchema + " one"));
  }
  if (j.contains("schema_version") &&
      !(j["schema_version"].is_number_integer() && j["schema_version"].get<int64_t>() <= tooling::kBenchSchemaVersion)) {
    return Usage(remex::InvalidArgument("'" + args.input + "' has schema_version " + j["schema_version"].dump() +
                                        "; this remex reads " + tooling::kBenchSchema + " up to version " +
                                        std::to_string(tooling::kBenchSchemaVersion)));
  }
  if (Status st = args.files.Write(j); !st.ok()) return Fail(st);
  return tooling::kExitOk;
}

struct CheckArgs : SessionArgs {
  tooling::CheckOptions options;
  RecordArgs record;
};

int Check(const CheckArgs& args) {
  if (Status st = tooling::CheckCheckOptions(args.options); !st.ok()) return Usage(st);
  auto request = MakeRequest(args, args.options.reference + "/inputs");
  if (!request.ok()) return Usage(request.status());
  auto record = MakeRecordPlan(args.record);
  if (!record.ok()) return Usage(record.status());
  const std::string date = tooling::UtcNow();
  remex::cli::TerminalProgress progress(!args.json);
  tooling::PreparedModel prepared;
  Status failure;
  if (int rc = Prepare(args, *request, progress, prepared, &failure); rc != 0) {
    return RecordResult(*record, "check", args, nullptr, "error", failure.ToString(), rc);
  }
  progress.Step("checking " + prepared.main().name);
  auto report = tooling::CheckModel(*request, prepared, args.options);
  progress.Step("");
  if (!report.ok()) {
    const int rc = Fail(report.status());
    return RecordResult(*record, "check", args, nullptr, "error", report.status().ToString(), rc);
  }
  nlohmann::json j = tooling::ToJson(*report);
  if (args.json) {
    PrintJson(j);
  } else {
    remex::cli::PrintCheck(*report, args.verbose);
  }
  j["date"] = date;
  if (report->match) return RecordResult(*record, "check", args, j, "pass", "", tooling::kExitOk);
  for (const auto& o : report->outputs) {
    if (o.verdict == "mismatch") {
      return RecordResult(*record, "check", args, j, "fail", "output " + o.name + ": " + o.reason,
                          tooling::kExitMismatch);
    }
  }
  std::fprintf(stderr, "remex: no reference for some outputs in '%s'\n", args.options.reference.c_str());
  return RecordResult(*record, "check", args, j, "error", "no reference for some outputs",
                      tooling::kExitInfrastructure);
}

struct CompileArgs {
  std::string model, output;
  tooling::CompileSpecs compile;
  bool stats = false;
  bool json = false;
};

int Compile(const CompileArgs& args) {
  auto options = tooling::ParseCompileSpecs(args.compile, args.model);
  if (!options.ok()) return Usage(options.status());
  auto report = tooling::CompileModel(args.model, *options);
  if (!report.ok()) return Fail(report.status());
  if (Status st = tooling::WriteFileBytes(args.output, report->bytes); !st.ok()) return Fail(st);
  if (args.json) {
    auto j = tooling::ToJson(*report);
    j["output"] = args.output;
    PrintJson(j);
  } else {
    remex::cli::PrintCompile(*report, args.output, args.stats);
  }
  return tooling::kExitOk;
}

struct TuneArgs : ConnectionArgs {
  std::string model;
  tooling::CompileSpecs compile;
  uint64_t seed = 0;
  std::vector<std::string> space;  // --space KEY=V1,V2
  tooling::TuneOptions options;
  std::string command;
  bool json = false;
};

std::atomic<int> g_tune_signal{0};
extern "C" void OnTuneSignal(int sig) { g_tune_signal.store(sig); }

// remex tune MODEL.onnx: each bucket compiled with the choices that measured fastest on
// the device (tooling/tuning.h, docs/tuning.md).
int TuneCommand(const TuneArgs& args) {
  tooling::TuneOptions o = args.options;
  o.request.model = args.model;
  if (!args.compile.tuning_log.empty()) {
    return Usage(remex::InvalidArgument("remex tune reads and writes its own log: --log, not --tuning-log"));
  }
  auto compile = tooling::ParseCompileSpecs(args.compile);
  if (!compile.ok()) return Usage(compile.status());
  o.request.compile = *compile;
  o.request.seed = args.seed;
  auto server = MakeServerOptions(args);
  if (!server.ok()) return Usage(server.status());
  o.request.server = *server;
  auto space = tooling::ParseTuningSpace(args.space);
  if (!space.ok()) return Usage(space.status());
  o.space = *space;
  if (Status st = tooling::CheckBenchOptions(o.bench); !st.ok()) return Usage(st);
  // A first SIGINT or SIGTERM ends the tune after the round in progress (the log keeps
  // every round before it); a second one ends the process.
  struct sigaction sa = {};
  sa.sa_handler = OnTuneSignal;
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  o.bench.interrupt = &g_tune_signal;
  remex::cli::TerminalProgress progress(!args.json);
  auto report = tooling::Tune(o, [&](const std::string& step) { progress.Step(step); });
  progress.Step("");
  if (!report.ok()) return Fail(report.status());
  PrintReport(args.json, tooling::ToJson(*report), args.command, [&] { return tooling::TuneText(*report); });
  if (g_tune_signal.load() != 0) return 128 + g_tune_signal.load();
  return tooling::kExitOk;
}

struct GenSrArgs {
  std::string output, dtype = "float32", depth_to_space = "native";
  int64_t height = 720, width = 1280;
  uint64_t seed = 1;
};

int GenSr(const GenSrArgs& args) {
  remex::sr::SrModelOptions options;
  options.height = args.height;
  options.width = args.width;
  options.seed = args.seed;
  if (args.depth_to_space == "reshape") {
    options.depth_to_space_as_reshape = true;
  } else if (args.depth_to_space != "native") {
    return Usage(remex::InvalidArgument("--depth-to-space must be native or reshape, got '" + args.depth_to_space + "'"));
  }
  auto dtype = tooling::ParseFloatDType(args.dtype);
  if (!dtype.ok()) return Usage(dtype.status());
  options.dtype = *dtype;
  if (Status st = remex::sr::WriteSrModel(options, args.output); !st.ok()) return Fail(st);
  std::printf("super-resolution x4 model %s [1, 3, %lld, %lld] -> [1, 3, %lld, %lld] written to %s\n",
              args.dtype.c_str(), static_cast<long long>(args.height), static_cast<long long>(args.width),
              static_cast<long long>(4 * args.height), static_cast<long long>(4 * args.width), args.output.c_str());
  std::printf("convolutions: %.3f GFLOP per inference (2 per multiply-add), depth_to_space %s\n",
              remex::sr::SrModelFlops(options) / 1e9, args.depth_to_space.c_str());
  return tooling::kExitOk;
}

struct CompareArgs {
  std::string expected, actual;
  double rtol = 1e-4, atol = 1e-5;
  bool equal_nan = true;
  bool json = false;
};

int Compare(const CompareArgs& args) {
  if (Status st = remex::compare::CheckTolerances(args.rtol, args.atol); !st.ok()) return Usage(st);
  auto result = remex::compare::ComparePaths(args.expected, args.actual, args.rtol, args.atol, args.equal_nan);
  if (!result.ok()) return Fail(result.status());
  if (args.json) {
    PrintJson(tooling::ToJson(*result, args.rtol, args.atol, args.equal_nan));
  } else {
    remex::cli::PrintCompare(*result);
  }
  return result->match() ? tooling::kExitOk : tooling::kExitMismatch;
}

std::string ShortHash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : h; }

// The results store of --results (default: $REMEX_RESULTS, else --record's default
// file), opened; a usage error for a bad URL, NOT_FOUND for a SQLite file that is not
// there (reading never creates one).
StatusOr<std::unique_ptr<tooling::ResultsStore>> OpenStoreToRead(const std::string& results, std::string* url) {
  *url = results;
  if (url->empty()) {
    REMEX_ASSIGN_OR_RETURN(*url, tooling::DefaultResultsUrl());
  }
  REMEX_RETURN_IF_ERROR(tooling::CheckResultsUrl(*url).WithContext("--results"));
  if (url->rfind("sqlite://", 0) == 0 && !std::filesystem::exists(url->substr(9))) {
    return remex::NotFound("no results store at " + *url + " (remex bench ... --record writes one)");
  }
  return tooling::OpenResultsStore(*url);
}

// One series' finding as `remex regressions` and `remex suite --regressions` print it:
// the state, the change with its interval, the series, the runs compared, the reason.
void PrintFinding(const tooling::SeriesFinding& sf, FILE* out = stdout) {
  const regression::Finding& f = sf.finding;
  auto join = [](const std::vector<std::string>& ids) {
    std::string s;
    for (const std::string& id : ids) s += (s.empty() ? "" : ",") + id;
    return s.empty() ? std::string("-") : s;
  };
  const bool judged = f.verdict != regression::Verdict::kInsufficientData;
  std::fprintf(out, "%-17s", std::string(regression::VerdictName(f.verdict)).c_str());
  if (judged) {
    std::fprintf(out, " %+6.1f %% [%+.1f, %+.1f] %.0f %%", f.change_pct, f.ci_low_pct, f.ci_high_pct, f.confidence * 100);
  }
  std::fprintf(out, "  %s  %s  %s  (series %s)\n", sf.series.model_name.c_str(), sf.series.scenario.c_str(),
              sf.series.device_class.c_str(), ShortHash(sf.series.series_key).c_str());
  if (judged) {
    std::fprintf(out, "  runs %s against %s", join(f.candidate_runs).c_str(), join(f.baseline_runs).c_str());
    if (!f.excluded_runs.empty()) std::fprintf(out, " (set aside: %s)", join(f.excluded_runs).c_str());
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "  %s\n", f.reason.c_str());
}

// The flags of the regression method (regression::Options), shared by `remex
// regressions` and `remex suite --regressions`.
void AddRegressionOptions(CLI::App* cmd, regression::Options& o) {
  cmd->add_option("--baseline-runs", o.baseline_runs, "runs before the newest ones that form the baseline")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--min-baseline-runs", o.min_baseline_runs, "fewer baseline runs: insufficient data")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--confirmations", o.confirmations, "the newest runs that must all show a change")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--alpha", o.alpha, "significance level of each test; the interval's level is 1 - alpha")
      ->capture_default_str();
  cmd->add_option("--min-effect", o.min_effect, "the smallest relative change reported (0.02: 2 %)")
      ->capture_default_str();
  cmd->add_option("--max-baseline-cv", o.max_baseline_cv,
                  "the largest run-to-run spread of the baseline judged (0.05: 5 %); above it: too noisy")
      ->capture_default_str();
}

struct SuiteArgs {
  RecordArgs record;
  std::string regressions;  // --regressions: "", "fail" or "warn"
  regression::Options regression_options;
  std::string suite, server, token_file, junit;
  std::string farm, pool = "default", labels;
  double lease_wait_s = 0;
  int jobs = 1;
  double timeout_s = 600;
  bool json = false;
};

// `remex suite --regressions fail|warn`: the series of the suite's records (bench cases)
// judged against their history, printed (stderr under --json); a regression turns an
// exit status of 0 into 1 with `fail`, and is a warning with `warn`. A store that cannot
// be read is reported, and fails the command as a record that cannot be written does.
int JudgeSuiteSeries(const RecordPlan& plan, const std::vector<StatusOr<tooling::RunRecord>>& records,
                     const SuiteArgs& args, int rc) {
  FILE* out = args.json ? stderr : stdout;
  std::set<std::string> keys;
  for (const auto& r : records) {
    if (r.ok() && r->summary.is_object() && r->summary.contains("median_ms")) keys.insert(r->SeriesKey());
  }
  auto store = tooling::OpenResultsStore(plan.url);
  std::vector<tooling::SeriesFinding> findings;
  Status st = store.status();
  for (const std::string& key : keys) {
    if (!st.ok()) break;
    tooling::HistoryFilter filter;
    filter.series_key = key;
    auto one = tooling::FindRegressions(**store, filter, args.regression_options);
    if (!one.ok()) {
      st = one.status();
      break;
    }
    for (auto& f : *one) findings.push_back(std::move(f));
  }
  if (!st.ok()) {
    std::fprintf(stderr, "remex: the suite's series were not judged: %s\n", st.ToString().c_str());
    return rc == tooling::kExitOk && plan.required ? tooling::kExitInfrastructure : rc;
  }
  std::fprintf(out, "\nregressions (%zu series of the suite)\n", findings.size());
  for (const auto& f : findings) PrintFinding(f, out);
  const size_t regressions = tooling::CountRegressions(findings);
  if (regressions == 0) return rc;
  if (args.regressions == "warn") {
    std::fprintf(stderr, "remex: warning: %zu regression%s in the suite's series (--regressions warn)\n", regressions,
                 regressions == 1 ? "" : "s");
    return rc;
  }
  std::fprintf(stderr, "remex: %zu regression%s in the suite's series (--regressions fail)\n", regressions,
               regressions == 1 ? "" : "s");
  return rc == tooling::kExitOk ? tooling::kExitMismatch : rc;
}

// `remex suite SUITE.toml`: 0 when every case passed, 1 when one failed (a mismatch or
// a threshold), 3 when none failed but one could not run.
int SuiteCommand(const SuiteArgs& args) {
  if (args.jobs < 1 || args.jobs > 256) return Usage(remex::InvalidArgument("--jobs must be in [1, 256]"));
  auto suite = tooling::LoadSuite(args.suite);
  if (!suite.ok()) return Usage(suite.status());
  auto record = MakeRecordPlan(args.record);
  if (!record.ok()) return Usage(record.status());
  if (!args.regressions.empty() && !*record) {
    return Usage(remex::InvalidArgument("--regressions judges the suite's recorded series: it needs --record"));
  }
  if (Status st = regression::CheckOptions(args.regression_options); !st.ok()) return Usage(st);
  const std::string date = tooling::UtcNow();
  tooling::SuiteOptions options;
  options.jobs = args.jobs;
  options.server.address = args.server;
  if (!args.server.empty()) {
    if (Status st = tooling::ParseServerAddress(args.server).status(); !st.ok()) return Usage(st);
  }
  auto farm = FarmLeaseFromFlags(args.farm, args.pool, args.labels, args.lease_wait_s);
  if (!farm.ok()) return Usage(farm.status());
  options.server.farm = *farm;
  if (options.server.farm && !args.server.empty()) {
    return Usage(remex::InvalidArgument("--server and --farm: name a server or lease from the farm, not both"));
  }
  if (!options.server.farm) {
    auto token = tooling::TokenFromFileOrEnvironment(args.token_file);
    if (!token.ok()) return Usage(token.status());
    options.server.token = *token;
  }
  options.server.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  if (!args.junit.empty()) {  // writable before any work
    std::ofstream probe(args.junit, std::ios::app);
    if (!probe) return Fail(remex::NotFound("cannot write the JUnit report '" + args.junit + "'"));
  }
  const tooling::SuiteReport report = tooling::RunSuite(*suite, options);
  if (!args.junit.empty()) {
    std::ofstream out(args.junit, std::ios::trunc);
    out << tooling::JUnitXml(report);
    if (!out) return Fail(remex::Internal("writing the JUnit report '" + args.junit + "' failed"));
  }
  if (args.json) {
    PrintJson(tooling::ToJson(report));
  } else {
    remex::cli::PrintSuite(report);
  }
  const int rc = report.failed > 0   ? tooling::kExitMismatch
                 : report.errors > 0 ? tooling::kExitInfrastructure
                                     : tooling::kExitOk;
  if (!*record) return rc;
  // One record per case: its bench report when it had one, else its check report.
  std::vector<StatusOr<tooling::RunRecord>> records;
  for (const tooling::CaseResult& c : report.cases) {
    const nlohmann::json& r = !c.bench_report.is_null() ? c.bench_report : c.check_report;
    const std::string verdict = c.outcome == "passed" ? "pass" : c.outcome == "failed" ? "fail" : "error";
    auto one = tooling::RecordFromReport("suite", c.model, r, args.labels, verdict, c.message);
    if (one.ok()) {
      one->scenario =
          "suite " + report.name + "/" + c.name + (!c.bench_report.is_null() ? " bench" : " check");
      one->recorded_at = date;
    }
    records.push_back(std::move(one));
  }
  const int recorded_rc = WriteRecords(**record, records, rc);
  if (args.regressions.empty()) return recorded_rc;
  return JudgeSuiteSeries(**record, records, args, recorded_rc);
}

struct ShellArgs : ConnectionArgs {
  std::string history;  // default $HOME/.remex_history
  bool no_history = false;
};

// `remex shell`: one session for many commands (shell.h). A connection failure exits
// as run does; then, on a terminal, 0; from a script, the status of its first failing
// command.
int ShellCommand(const ShellArgs& args) {
  auto server = MakeServerOptions(args);
  if (!server.ok()) return Usage(server.status());
  remex::cli::ShellOptions options;
  if (!args.no_history) {
    options.history_file = args.history;
    const char* home = std::getenv("HOME");
    if (options.history_file.empty() && home && *home) options.history_file = std::string(home) + "/.remex_history";
  }
  std::unique_ptr<tooling::InteractiveSession> session;
  {
    remex::cli::TerminalProgress progress(isatty(STDIN_FILENO));
    progress.Step(server->address.empty() && !server->farm ? "starting the embedded server" : "connecting");
    auto opened = tooling::InteractiveSession::Open(*server);
    progress.Step("");
    if (!opened.ok()) return Fail(opened.status());
    session = std::move(opened).value();
  }
  remex::cli::Shell shell(std::move(session), stdout);
  return remex::cli::RunShell(shell, options);
}

struct FarmLeaseArgs {
  std::string farm, pool = "default", labels;
  double lease_wait_s = 0;
  double ttl_s = 30;
  double stop_grace_s = 10;
  std::vector<std::string> command;
};

// `farm lease`'s exit status when the lease was lost while CMD ran (CMD was stopped).
constexpr int kExitLeaseLost = 75;

// The signal farm lease received last (SIGINT, SIGTERM, SIGHUP, SIGQUIT), passed on to
// CMD's process group by the waiting loop.
volatile sig_atomic_t g_forward_signal = 0;
void RecordSignal(int sig) { g_forward_signal = sig; }

// `remex farm lease ... -- CMD`: holds a lease while CMD runs, with REMEX_SERVER (the
// device's HOST:PORT), REMEX_TOKEN (the lease's secret), REMEX_LEASE_POOL and
// REMEX_LEASE_DEVICE in its environment; exits with CMD's status (128 + N for a signal).
// CMD runs in a process group of its own (given the terminal when farm lease has it);
// the stop signals farm lease receives are passed on to that group. When the lease is
// lost while CMD runs, CMD's group gets SIGTERM, then SIGKILL after --stop-grace
// seconds, and farm lease exits kExitLeaseLost saying why.
int FarmLeaseCommand(const FarmLeaseArgs& args) {
  auto options = FarmLeaseFromFlags(args.farm, args.pool, args.labels, args.lease_wait_s);
  if (!options.ok()) return Usage(options.status());
  if (!*options) return Usage(remex::InvalidArgument("farm lease: pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
  if (args.command.empty()) return Usage(remex::InvalidArgument("farm lease: give the command to run after --"));
  if (!(args.ttl_s >= 1 && args.ttl_s <= 86400)) return Usage(remex::InvalidArgument("--ttl must be in [1, 86400] seconds"));
  if (!(args.stop_grace_s >= 0 && args.stop_grace_s <= 3600)) {
    return Usage(remex::InvalidArgument("--stop-grace must be in [0, 3600] seconds"));
  }
  remex::farm::LeaseRequest request;
  request.pool = (*options)->pool;
  request.selector = (*options)->selector;
  request.wait = (*options)->wait;
  request.ttl = std::chrono::milliseconds(static_cast<int64_t>(args.ttl_s * 1000));
  auto holder = remex::farm::LeaseHolder::Acquire(*remex::farm::ParseRedisUrl(args.farm), request, std::chrono::seconds(5));
  if (!holder.ok()) return Fail(holder.status().WithContext("leasing from " + args.farm));
  const remex::farm::Lease& lease = (*holder)->lease();
  std::fprintf(stderr, "remex: leased %s (pool %s) for: %s\n", lease.device_id.c_str(), lease.pool.c_str(),
               args.command[0].c_str());
  // The terminal goes to CMD's group while it runs when farm lease is in the foreground.
  const bool terminal = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  // Everything CMD's process needs is made here, before fork: this process has threads
  // (the lease's renewal), so the child may only make async-signal-safe calls until it
  // execs (an allocation there can wait forever on a lock a vanished thread held).
  std::vector<std::string> env_strings = {"REMEX_SERVER=" + lease.device_id, "REMEX_TOKEN=" + lease.token,
                                          "REMEX_LEASE_POOL=" + lease.pool, "REMEX_LEASE_DEVICE=" + lease.device_id};
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name != "REMEX_SERVER" && name != "REMEX_TOKEN" && name != "REMEX_LEASE_POOL" && name != "REMEX_LEASE_DEVICE") {
      env_strings.emplace_back(entry);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = args.command;
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  // CMD as execvp finds it: a name with a slash as given, else the first executable
  // PATH entry holding it (the name as given when none does: execve then fails).
  std::string program = args.command[0];
  if (program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (!dirs.empty()) {
      const size_t colon = dirs.find(':');
      const std::string_view dir = dirs.substr(0, colon);
      const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + args.command[0];
      if (access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
      dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    }
  }
  const std::string cannot_run = "remex: farm lease: cannot run " + args.command[0] + ": ";
  const pid_t child = fork();
  if (child < 0) return Fail(remex::Internal(std::string("fork: ") + std::strerror(errno)));
  if (child == 0) {
    setpgid(0, 0);
    if (terminal) {
      signal(SIGTTOU, SIG_IGN);
      tcsetpgrp(STDIN_FILENO, getpgrp());
      signal(SIGTTOU, SIG_DFL);
    }
    execve(program.c_str(), argv.data(), envp.data());
    const char* why = strerrordesc_np(errno);  // a static string: no allocation
    (void)!write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
    if (why) (void)!write(STDERR_FILENO, why, std::strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(child, child);  // also here: no signal may reach the group before it exists
  struct sigaction forward {};
  forward.sa_handler = RecordSignal;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &forward, nullptr);
  int status = 0;
  bool lost = false;
  std::chrono::steady_clock::time_point kill_at{};
  for (;;) {
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) return Fail(remex::Internal(std::string("waitpid: ") + std::strerror(errno)));
    if (const int sig = g_forward_signal; sig != 0) {
      g_forward_signal = 0;
      kill(-child, sig);
    }
    if (!lost) {
      if (remex::Status st = (*holder)->lost(); !st.ok()) {
        lost = true;
        std::fprintf(stderr,
                     "remex: farm lease: %s; stopping %s (SIGTERM to its process group, SIGKILL after %g s)\n",
                     st.ToString().c_str(), args.command[0].c_str(), args.stop_grace_s);
        kill(-child, SIGTERM);
        kill_at = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(args.stop_grace_s * 1000));
      }
    } else if (kill_at != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= kill_at) {
      std::fprintf(stderr, "remex: farm lease: %s still runs after %g s: SIGKILL\n", args.command[0].c_str(),
                   args.stop_grace_s);
      kill(-child, SIGKILL);
      kill_at = {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (terminal) {
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    signal(SIGTTOU, SIG_DFL);
  }
  if (!lost) {
    if (remex::Status st = (*holder)->lost(); !st.ok()) std::fprintf(stderr, "remex: %s\n", st.ToString().c_str());
  }
  holder->reset();  // released before this process exits
  if (lost) {
    std::fprintf(stderr, "remex: farm lease: %s stopped: the lease was lost (exit %d)\n", args.command[0].c_str(),
                 kExitLeaseLost);
    return kExitLeaseLost;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return tooling::kExitInfrastructure;
}

struct FarmDrainArgs {
  std::string farm, device;
  bool undrain = false;
};

int FarmDrainCommand(const FarmDrainArgs& args) {
  if (args.farm.empty()) return Usage(remex::InvalidArgument("farm drain: pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
  auto url = remex::farm::ParseRedisUrl(args.farm);
  if (!url.ok()) return Usage(url.status());
  auto client = remex::farm::RedisClient::Connect(*url, std::chrono::seconds(5));
  if (!client.ok()) return Fail(client.status());
  Status st = remex::farm::SetDrained(**client, args.device, !args.undrain);
  if (!st.ok()) return Fail(st);
  std::printf("%s %s\n", args.device.c_str(), args.undrain ? "undrained: leased again" : "drained: leased no more");
  return tooling::kExitOk;
}

struct FarmInstallArgs {
  std::string farm, key_file;
};

// Loads the lease functions, with the farm key embedded, into the farm's Redis.
int FarmInstallCommand(const FarmInstallArgs& args) {
  if (args.farm.empty()) {
    return Usage(remex::InvalidArgument("farm install-functions: pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
  }
  auto url = remex::farm::ParseRedisUrl(args.farm);
  if (!url.ok()) return Usage(url.status());
  auto key = remex::farm::ReadFarmKeyFile(args.key_file);
  if (!key.ok()) return Usage(key.status().WithContext("--farm-key-file"));
  auto client = remex::farm::RedisClient::Connect(*url, std::chrono::seconds(5));
  if (!client.ok()) return Fail(client.status());
  Status st = remex::farm::InstallLeaseFunctions(**client, *key);
  if (!st.ok()) return Fail(st);
  std::printf("lease functions '%s' loaded into %s: leases are now signed with the farm key\n",
              remex::farm::kLeaseLibrary, url->ToString().c_str());
  return tooling::kExitOk;
}

struct FarmStatusArgs {
  std::string farm;
  std::string labels;
  double timeout_s = 5;
  bool json = false;
};

int FarmStatusCommand(const FarmStatusArgs& args) {
  if (args.farm.empty()) {
    return Usage(remex::InvalidArgument("farm status: pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
  }
  if (!(args.timeout_s > 0 && args.timeout_s <= 3600)) {
    return Usage(remex::InvalidArgument("--timeout must be in (0, 3600] seconds"));
  }
  auto report = tooling::FarmStatus(args.farm, std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000)),
                                    args.labels);
  if (!report.ok()) return Fail(report.status());
  if (args.json) {
    PrintJson(tooling::ToJson(*report));
  } else {
    remex::cli::PrintFarmStatus(*report);
  }
  return tooling::kExitOk;
}

// --- remex job and remex worker (docs/farm.md, "Jobs") ---

struct JobArgs {
  std::string farm, pool = "default", labels, command, target, id, state;
  std::vector<std::string> extra;
  int priority = 0, retries = 2;
  double timeout_s = 0;
  size_t limit = 50;
  bool json = false, follow = false;
};

// A connection to --farm, or the exit status of the error printed.
std::unique_ptr<remex::farm::RedisClient> JobConnect(const std::string& farm, const char* what, int& exit_code) {
  exit_code = tooling::kExitOk;
  if (farm.empty()) {
    exit_code = Usage(remex::InvalidArgument(std::string(what) + ": pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
    return nullptr;
  }
  auto url = remex::farm::ParseRedisUrl(farm);
  if (!url.ok()) {
    exit_code = Usage(url.status());
    return nullptr;
  }
  auto client = remex::farm::RedisClient::Connect(*url, std::chrono::seconds(5));
  if (!client.ok()) {
    exit_code = Fail(client.status());
    return nullptr;
  }
  return std::move(client).value();
}

void PrintJob(const remex::farm::JobRecord& j, int64_t now_ms) {
  auto seconds = [](int64_t ms) {
    if (ms < 0) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
    return std::string(buf);
  };
  std::printf("%s  %s  %s %s", j.id.c_str(), std::string(remex::farm::JobStateName(j.state)).c_str(), j.command.c_str(),
              j.target.c_str());
  for (const std::string& a : j.args) std::printf(" %s", a.c_str());
  std::printf("\n  queued %s, ran %s, attempts %d%s%s\n", seconds(j.queue_ms(now_ms)).c_str(), seconds(j.run_ms(now_ms)).c_str(),
              j.attempts, j.worker.empty() ? "" : (", worker " + j.worker).c_str(),
              j.exit_code >= 0 ? (", exit " + std::to_string(j.exit_code)).c_str() : "");
  if (!j.error.empty()) std::printf("  %s\n", j.error.c_str());
}

int JobSubmitCommand(const JobArgs& args) {
  int exit_code = 0;
  auto spec = tooling::MakeJobSpec(args.target, args.command, args.extra);
  if (!spec.ok()) return spec.status().code() == remex::StatusCode::kNotFound ? Fail(spec.status()) : Usage(spec.status());
  spec->pool = args.pool;
  spec->labels = args.labels;
  spec->priority = args.priority;
  spec->retries = args.retries;
  auto redis = JobConnect(args.farm, "job submit", exit_code);
  if (!redis) return exit_code;
  auto id = remex::farm::SubmitJob(*redis, *spec);
  if (!id.ok()) return id.status().code() == remex::StatusCode::kInvalidArgument ? Usage(id.status()) : Fail(id.status());
  if (args.json) {
    PrintJson({{"id", *id}});
  } else {
    std::printf("%s\n", id->c_str());
  }
  return tooling::kExitOk;
}

// `job status` (0 once it printed the job) and `job wait` (0 when the job succeeded, 1 when
// it failed or was cancelled); 3 when Redis fails or wait's --timeout ran out.
int JobStatusCommand(const JobArgs& args, bool wait) {
  int exit_code = 0;
  auto redis = JobConnect(args.farm, wait ? "job wait" : "job status", exit_code);
  if (!redis) return exit_code;
  if (auto parsed = remex::farm::ParseJobId(args.id); !parsed.ok()) return Usage(parsed.status());
  auto job = wait ? tooling::WaitForJob(*redis, args.id, std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000)))
                  : remex::farm::ReadJob(*redis, args.id);
  if (!job.ok()) return Fail(job.status());
  const int64_t now = remex::farm::UnixMillis();
  if (args.json) {
    PrintJson(tooling::JobToJson(*job, now));
  } else {
    PrintJob(*job, now);
  }
  if (!wait) return tooling::kExitOk;
  return job->state == remex::farm::JobState::kSucceeded ? tooling::kExitOk : tooling::kExitMismatch;
}

int JobLogsCommand(const JobArgs& args) {
  int exit_code = 0;
  auto redis = JobConnect(args.farm, "job logs", exit_code);
  if (!redis) return exit_code;
  if (auto job = remex::farm::ReadJob(*redis, args.id); !job.ok()) return Fail(job.status());
  std::string after = "0";
  for (;;) {
    auto entries = remex::farm::ReadJobLog(*redis, args.id, after, 1000,
                                           args.follow ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(0));
    if (!entries.ok()) return Fail(entries.status());
    for (const auto& e : *entries) {
      after = e.id;
      if (auto end = e.fields.find("end"); end != e.fields.end()) {
        std::fprintf(stderr, "remex: job %s %s\n", args.id.c_str(), end->second.c_str());
        return tooling::kExitOk;
      }
      auto stream = e.fields.find("stream");
      auto line = e.fields.find("line");
      if (line == e.fields.end()) continue;
      const bool farm_line = stream != e.fields.end() && stream->second == "farm";
      std::fprintf(stream != e.fields.end() && stream->second == "out" ? stdout : stderr, "%s%s\n",
                   farm_line ? "remex: " : "", line->second.c_str());
    }
    if (!args.follow && entries->empty()) return tooling::kExitOk;
  }
}

int JobCancelCommand(const JobArgs& args) {
  int exit_code = 0;
  auto redis = JobConnect(args.farm, "job cancel", exit_code);
  if (!redis) return exit_code;
  Status st = remex::farm::CancelJob(*redis, args.id);
  if (!st.ok()) return st.code() == remex::StatusCode::kFailedPrecondition ? Usage(st) : Fail(st);
  std::printf("%s: cancelled (a running job stops at its worker's next heartbeat)\n", args.id.c_str());
  return tooling::kExitOk;
}

int JobListCommand(const JobArgs& args) {
  int exit_code = 0;
  auto redis = JobConnect(args.farm, "job list", exit_code);
  if (!redis) return exit_code;
  std::optional<remex::farm::JobState> state;
  if (!args.state.empty()) {
    auto s = remex::farm::ParseJobState(args.state);
    if (!s.ok()) return Usage(s.status().WithContext("--state"));
    state = *s;
  }
  auto jobs = remex::farm::ListJobs(*redis, args.pool, args.limit);
  if (!jobs.ok()) return jobs.status().code() == remex::StatusCode::kInvalidArgument ? Usage(jobs.status()) : Fail(jobs.status());
  const int64_t now = remex::farm::UnixMillis();
  nlohmann::json list = nlohmann::json::array();
  for (const auto& j : *jobs) {
    if (state && j.state != *state) continue;
    if (args.json) {
      list.push_back(tooling::JobToJson(j, now));
    } else {
      PrintJob(j, now);
    }
  }
  if (args.json) PrintJson({{"pool", args.pool}, {"jobs", list}});
  return tooling::kExitOk;
}

struct WorkerArgs {
  std::string farm, pool = "default", name;
  double heartbeat_s = 5;
  bool once = false;
};

std::atomic<bool> g_worker_stop{false};
void StopWorker(int) { g_worker_stop = true; }

int WorkerCommand(const WorkerArgs& args) {
  if (args.farm.empty()) return Usage(remex::InvalidArgument("worker: pass --farm redis://HOST:PORT[/DB] or set REMEX_FARM"));
  if (!(args.heartbeat_s >= 0.2 && args.heartbeat_s <= 600)) {
    return Usage(remex::InvalidArgument("--heartbeat must be in [0.2, 600] seconds"));
  }
  tooling::WorkerOptions options;
  options.farm = args.farm;
  options.pool = args.pool;
  options.name = args.name;
  options.once = args.once;
  options.heartbeat = std::chrono::milliseconds(static_cast<int64_t>(args.heartbeat_s * 1000));
  std::error_code ec;
  options.remex = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Fail(remex::Internal("cannot find the remex binary: " + ec.message()));
  signal(SIGTERM, StopWorker);
  signal(SIGINT, StopWorker);
  spdlog::set_level(spdlog::level::info);  // a worker says what it runs (on stderr)
  Status st = tooling::RunWorker(options, g_worker_stop);
  if (!st.ok()) return st.code() == remex::StatusCode::kInvalidArgument ? Usage(st) : Fail(st);
  return tooling::kExitOk;
}

// The filter (--model, --labels, --since) and the store (--results) of `remex history`
// and `remex regressions`: kExitOk, or the exit status of the error it printed.
template <typename Args>
int OpenHistory(const Args& args, tooling::HistoryFilter& filter, std::string& url,
                std::unique_ptr<tooling::ResultsStore>& store) {
  filter.model = args.model;
  filter.device_class = args.labels;
  if (!args.since.empty()) {
    auto since = tooling::ParseSince(args.since, static_cast<int64_t>(std::time(nullptr)));
    if (!since.ok()) return Usage(since.status());
    filter.since = *since;
  }
  auto opened = OpenStoreToRead(args.results, &url);
  if (!opened.ok()) {
    return opened.status().code() == remex::StatusCode::kInvalidArgument ? Usage(opened.status())
                                                                          : Fail(opened.status());
  }
  store = std::move(opened).value();
  return tooling::kExitOk;
}

struct HistoryArgs {
  std::string results, model, labels, since;
  size_t limit = 20;
  bool json = false;
};

// `remex history`: the series of a results store and their latest runs.
int HistoryCommand(const HistoryArgs& args) {
  tooling::HistoryFilter filter;
  std::string url;
  std::unique_ptr<tooling::ResultsStore> store;
  if (int rc = OpenHistory(args, filter, url, store); rc != tooling::kExitOk) return rc;
  auto series = store->ListSeries(filter);
  if (!series.ok()) return Fail(series.status());
  std::vector<std::vector<tooling::StoredRun>> runs;
  for (const auto& s : *series) {
    tooling::HistoryFilter one = filter;
    one.series_key = s.series_key;
    one.limit = args.limit;
    auto r = store->ListRuns(one);
    if (!r.ok()) return Fail(r.status());
    runs.push_back(std::move(r).value());
  }
  if (args.json) {
    PrintJson(tooling::HistoryJson(*series, runs));
    return tooling::kExitOk;
  }
  if (series->empty()) std::printf("no runs recorded in %s match\n", tooling::RedactResultsUrl(url).c_str());
  auto ms = [](const nlohmann::json& s, const char* key) -> std::string {
    if (!s.is_object() || !s.contains(key) || !s[key].is_number()) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", s[key].get<double>());
    return b;
  };
  for (size_t i = 0; i < series->size(); ++i) {
    const auto& s = (*series)[i];
    std::printf("%s  %s  %s  %s  (%llu run%s, series %s)\n", s.model_name.c_str(),
                ShortHash(s.model_hash).c_str(), s.scenario.c_str(), s.device_class.c_str(),
                static_cast<unsigned long long>(s.runs), s.runs == 1 ? "" : "s",
                ShortHash(s.series_key).c_str());
    if (!s.compile_options.is_null()) std::printf("  compile options %s\n", s.compile_options.dump().c_str());
    std::printf("  %6s  %-20s  %-10s  %-12s  %9s  %9s  %9s  %s\n", "run", "recorded at", "commit", "branch",
                "median ms", "p90 ms", "p99 ms", "verdict");
    for (const auto& r : runs[i]) {
      std::string tags;
      for (const auto& [k, v] : r.tags) tags += " " + k + "=" + v;
      std::printf("  %6lld  %-20s  %-10s  %-12s  %9s  %9s  %9s  %s%s\n", static_cast<long long>(r.id),
                  r.recorded_at.c_str(), r.git_commit.substr(0, 10).c_str(), r.git_branch.c_str(),
                  ms(r.summary, "median_ms").c_str(), ms(r.summary, "p90_ms").c_str(),
                  ms(r.summary, "p99_ms").c_str(), r.verdict.c_str(), tags.c_str());
    }
  }
  return tooling::kExitOk;
}

struct RegressionsArgs {
  std::string results, model, labels, since;
  regression::Options options;
  bool json = false;
};

// `remex regressions`: every series' newest runs judged against its history; exit 1
// when one is a regression.
int RegressionsCommand(const RegressionsArgs& args) {
  if (Status st = regression::CheckOptions(args.options); !st.ok()) return Usage(st);
  tooling::HistoryFilter filter;
  std::string url;
  std::unique_ptr<tooling::ResultsStore> store;
  if (int rc = OpenHistory(args, filter, url, store); rc != tooling::kExitOk) return rc;
  auto findings = tooling::FindRegressions(*store, filter, args.options);
  if (!findings.ok()) return Fail(findings.status());
  const size_t regressions = tooling::CountRegressions(*findings);
  if (args.json) {
    PrintJson(tooling::RegressionsJson(*findings, args.options));
  } else {
    if (findings->empty()) std::printf("no runs recorded in %s match\n", tooling::RedactResultsUrl(url).c_str());
    for (const auto& sf : *findings) {
      PrintFinding(sf);
    }
    std::printf("%zu series judged, %zu regression%s\n", findings->size(), regressions, regressions == 1 ? "" : "s");
  }
  return regressions > 0 ? tooling::kExitMismatch : tooling::kExitOk;
}

struct DashboardArgs {
  std::string results, farm, listen = "127.0.0.1:8080", token_file, tls_cert, tls_key, tls_client_ca;
  double farm_timeout_s = 5;
  bool insecure = false;
  regression::Options options;
};

// `remex dashboard`: serves the read-only web UI (tooling/dashboard.h) until SIGINT or
// SIGTERM. Refuses, as remex-server does, a non-loopback address without a token or
// mutual TLS unless --insecure says so.
int DashboardCommand(const DashboardArgs& args) {
  if (Status st = regression::CheckOptions(args.options); !st.ok()) return Usage(st);
  auto listen = tooling::ParseListenAddress(args.listen, "--listen");
  if (!listen.ok()) return Usage(listen.status());
  const auto& [host, port] = *listen;
  tooling::WebServerOptions web;
  web.host = host;
  web.port = port;
  web.server_name = "remex-dashboard";
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    return Usage(remex::InvalidArgument("--tls-cert and --tls-key go together"));
  }
  if (!args.tls_client_ca.empty() && args.tls_cert.empty()) {
    return Usage(remex::InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key"));
  }
  if (!args.tls_cert.empty())
    web.tls = remex::rpc::TlsServerConfig{args.tls_cert, args.tls_key, args.tls_client_ca};
  tooling::DashboardOptions options;
  options.regression = args.options;
  options.version = REMEX_VERSION;
  if (!args.token_file.empty()) {
    auto token = remex::rpc::ReadTokenFile(args.token_file);
    if (!token.ok()) return Usage(token.status().WithContext("--token-file"));
    options.token = *token;
  }
  if (options.token.empty() && args.tls_client_ca.empty() && !args.insecure &&
      !tooling::IsLoopbackHost(host)) {
    return Usage(remex::InvalidArgument(
        "refusing to serve " + host +
        " without authentication: pass --token-file FILE (browsers then log in with the same token) or "
        "mutual TLS "
        "(--tls-client-ca), give --listen a loopback address, or pass --insecure on a network you trust"));
  }
  if (!args.farm.empty()) {
    auto url = remex::farm::ParseRedisUrl(args.farm);
    if (!url.ok()) return Usage(url.status().WithContext("--farm"));
    options.farm_url = args.farm;
  }
  if (!(args.farm_timeout_s > 0 && args.farm_timeout_s <= 60)) {
    return Usage(remex::InvalidArgument("--farm-timeout must be in (0, 60] seconds"));
  }
  options.farm_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.farm_timeout_s * 1000));
  std::string url;
  auto store = OpenStoreToRead(args.results, &url);
  if (!store.ok()) {
    return store.status().code() == remex::StatusCode::kInvalidArgument ? Usage(store.status())
                                                                        : Fail(store.status());
  }
  options.results_url = url;
  options.reopen = [url] {
    std::string same;
    return OpenStoreToRead(url, &same);  // never creates a SQLite file that went away
  };
  tooling::Dashboard dashboard(std::move(store).value(), options);
  auto server = tooling::WebServer::Listen(
      web, [&dashboard](const tooling::WebRequest& request) { return dashboard.Handle(request); });
  if (!server.ok()) {
    return server.status().code() == remex::StatusCode::kInvalidArgument ? Usage(server.status())
                                                                         : Fail(server.status());
  }
  const bool v6 = host.find(':') != std::string::npos;
  std::printf("remex dashboard: serving %s://%s%s%s:%u/\n", web.tls ? "https" : "http", v6 ? "[" : "",
              host.c_str(), v6 ? "]" : "", static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);
  const int signal = (*server)->Run();
  std::fprintf(stderr, "remex dashboard: stopped%s\n",
               signal == SIGINT    ? " (SIGINT)"
               : signal == SIGTERM ? " (SIGTERM)"
                                   : "");
  return tooling::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"remex: compile ONNX models, and run, benchmark and check them on a Remex device server"};
  app.set_version_flag("--version", std::string("remex ") + REMEX_VERSION);
  app.require_subcommand(1);

  CompileArgs compile;
  auto* compile_cmd = app.add_subcommand("compile", "compile an ONNX model to a Remex executable (.rmx)");
  compile_cmd->add_option("model", compile.model, "MODEL.onnx")->required()->type_name("FILE");
  compile_cmd->add_option("-o,--output", compile.output, "MODEL.rmx")->required()->type_name("FILE");
  AddCompileOptions(compile_cmd, compile.compile);
  compile_cmd->add_flag("--stats", compile.stats, "print kernels by op, placement, layout, buckets and functions");
  compile_cmd->add_flag("--json", compile.json, "print one JSON object (the signature, symbols and statistics)");

  TuneArgs tune;
  auto* tune_cmd = app.add_subcommand(
      "tune", "compile each shape bucket with the choices that measure fastest on the device (docs/tuning.md)");
  tune_cmd->add_option("model", tune.model, "MODEL.onnx")->required()->type_name("FILE");
  AddCompileOptions(tune_cmd, tune.compile);
  AddConnectionOptions(tune_cmd, tune);
  tune_cmd->add_option("-o,--output", tune.options.output_path, "write the tuned executable (.rmx) here")
      ->type_name("FILE");
  tune_cmd->add_option("--log", tune.options.log_path,
                       "the tuning log (JSON Lines): read first, so that a tune resumes, and appended after "
                       "every round")
      ->required()
      ->type_name("FILE");
  tune_cmd->add_option("--space", tune.space,
                       "KEY=V1,V2 of the search space, replacing the default's axes (layout, dtype, "
                       "fold-batchnorm, fuse-epilogues, fuse-elementwise; repeatable)");
  tune_cmd->add_option("--budget-s", tune.options.budget_s,
                       "seconds of measurement at most; 0: until no choice improves on the incumbent")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0 * 86400));
  tune_cmd->add_option("--devices", tune.options.max_devices,
                       "with --farm: devices leased at most (default: one per bucket, up to every match)")
      ->check(CLI::Range(0, 4096));
  tune_cmd->add_option("--seed", tune.seed, "seed of the random inputs")->capture_default_str();
  tune_cmd->add_option("--rtol", tune.options.rtol, "accuracy check of float32 candidates: relative tolerance")
      ->capture_default_str();
  tune_cmd->add_option("--atol", tune.options.atol, "accuracy check of float32 candidates: absolute tolerance")
      ->capture_default_str();
  tune_cmd->add_option("--float16-rtol", tune.options.float16_rtol,
                       "accuracy check of float16 candidates: relative tolerance")
      ->capture_default_str();
  tune_cmd->add_option("--float16-atol", tune.options.float16_atol,
                       "accuracy check of float16 candidates: absolute tolerance")
      ->capture_default_str();
  tune_cmd->add_option("--min-duration-s", tune.options.bench.min_duration_s,
                       "seconds of samples each choice has at least, per round")
      ->capture_default_str();
  tune_cmd->add_option("--min-samples", tune.options.bench.min_samples, "samples each choice has at least, per round")
      ->capture_default_str();
  tune_cmd->add_option("--confidence", tune.options.bench.confidence,
                       "confidence of the ratio's interval a winner must exclude 1 with, in (0, 1)")
      ->capture_default_str();
  tune_cmd->add_option("--profile-runs", tune.options.bench.profile_runs,
                       "per-node choices: invokes profiled per candidate; each node's median decides")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  tune_cmd->add_option("--warmup", tune.options.bench.timing.warmup, "untimed calls before each choice's samples")
      ->capture_default_str();
  tune_cmd->add_option("--min-repeat-ms", tune.options.bench.timing.min_repeat_ms,
                       "grow the calls per sample until one sample takes at least this long")
      ->capture_default_str();
  tune_cmd->add_flag("--json", tune.json, "print one JSON object");
  tune.command = CommandLine(argc, argv);

  GenSrArgs gen_sr;
  auto* gen_sr_cmd = app.add_subcommand("gen-sr", "write a synthetic EDSR-style x4 super-resolution ONNX model");
  gen_sr_cmd->add_option("-o,--output", gen_sr.output, "SR.onnx")->required()->type_name("FILE");
  gen_sr_cmd->add_option("--height", gen_sr.height, "input height")->capture_default_str();
  gen_sr_cmd->add_option("--width", gen_sr.width, "input width")->capture_default_str();
  gen_sr_cmd->add_option("--dtype", gen_sr.dtype, "float32 or float16")
      ->capture_default_str()
      ->check(CLI::IsMember(Names(tooling::kCompileDTypeNames)));
  gen_sr_cmd->add_option("--seed", gen_sr.seed, "weight generator seed")->capture_default_str();
  gen_sr_cmd->add_option("--depth-to-space", gen_sr.depth_to_space,
                         "native (DepthToSpace nodes) or reshape (their Reshape-Transpose-Reshape definition)")
      ->capture_default_str()
      ->check(CLI::IsMember({"native", "reshape"}));

  RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "run a model on a device server and fetch its outputs");
  AddSessionOptions(run_cmd, run);
  run_cmd->add_option("--fetch", run.fetch, "outputs to fetch: all, none or NAME[,NAME]")->capture_default_str();
  run_cmd->add_option("--output-dir", run.output_dir, "write each fetched output as DIR/NAME.npy")->type_name("DIR");
  run_cmd->add_flag("--save-inputs", run.save_inputs, "with --output-dir: also write the inputs as DIR/inputs/NAME.npy");

  BenchArgs bench;
  auto& timing = bench.options.timing;
  auto* bench_cmd = app.add_subcommand("bench", "time a model on a device server (no output data is fetched)");
  AddSessionOptions(bench_cmd, bench);
  bench_cmd->add_option("--number", timing.number, "calls per sample")->capture_default_str();
  bench_cmd->add_option("--repeat", timing.repeat, "samples of the first request (more follow while the run extends)")
      ->capture_default_str();
  bench_cmd->add_option("--min-repeat-ms", timing.min_repeat_ms, "grow --number until one sample takes at least this long")
      ->capture_default_str();
  bench_cmd->add_option("--warmup", timing.warmup, "untimed calls first")->capture_default_str();
  bench_cmd->add_option("--cooldown-ms", timing.cooldown_ms, "sleep between samples")->capture_default_str();
  bench_cmd->add_option("--l2-flush-bytes", timing.l2_flush_bytes, "write this many bytes on the device before each sample")
      ->capture_default_str();
  auto& bo = bench.options;
  bench_cmd->add_option("--min-duration-s", bo.min_duration_s,
                        "extend the run until its samples cover this many seconds (MLPerf LoadGen's minimum duration)")
      ->capture_default_str();
  bench_cmd->add_option("--min-samples", bo.min_samples, "extend the run until it has this many samples")
      ->capture_default_str();
  bench_cmd->add_option("--confidence", bo.confidence,
                        "confidence of each percentile's distribution-free interval, in (0, 1)")
      ->capture_default_str();
  bench_cmd->add_option("--window-ms", bo.window_ms,
                        "measurement window of the stability rule (widened to the longest sample)")
      ->capture_default_str();
  bench_cmd->add_option("--stable-window", bo.stable_window, "windows the stability rule judges (the last K)")
      ->capture_default_str();
  bench_cmd->add_option("--stable-threshold", bo.stable_threshold,
                        "stable when each of the last K windows' throughput and latency lies within +-F of their "
                        "mean (0.1 = 10 %)")
      ->capture_default_str();
  bench_cmd->add_option("--stable-percentile", bo.stable_percentile,
                        "the latency percentile the stability rule judges per window, 0-100")
      ->capture_default_str();
  bench_cmd->add_option("--max-trials", bo.max_trials,
                        "benchmark requests a run may take at most, the first included, while it extends")
      ->capture_default_str();
  bench_cmd->add_flag("--fail-unstable", bo.fail_unstable, "exit 1 when the run is still not stable");
  bench_cmd->add_flag(
      "--profile", bench.options.profile,
      "also profile invokes: per op and instruction kind, and per node (the slowest first, their "
      "median over --profile-runs)");
  bench.profile_runs = bench_cmd
                           ->add_option("--profile-runs", bo.profile_runs,
                                        "with --profile: invokes profiled, 1-100; nodes report their median")
                           ->capture_default_str();
  bench.profile_top =
      bench_cmd
          ->add_option("--profile-top", bo.profile_top,
                       "with --profile: the slowest nodes the text report lists (the JSON has all)")
          ->capture_default_str();
  bench_cmd->add_option(
      "--trace", bench.trace,
      "with or without --profile: write the profiled invokes' trace (trace-event JSON, one slice "
      "per kernel and VM instruction) to this file")
      ->type_name("FILE");
  bench_cmd->add_option(
      "--variant", bench.variants,
      "KEY=VALUE[,KEY=VALUE] of compile options (layout, dtype, fuse-epilogues, fold-batchnorm, "
      "fuse-elementwise, compute-threads, strict, shape, bound, dispatch, tuning-log, tuned-for): benchmark the model as given and each variant, "
      "interleaved, in one table (repeatable)");
  // Load scenarios (docs/cli.md, "Load scenarios").
  auto& load = bench.load;
  // The values, for --help and completion (completion.h reads the {a,b} description);
  // the check itself is the tooling's (ParseLoadScenario), so that the CLI, the shell and
  // Python refuse a scenario with one message.
  std::string scenarios;
  for (remex::LoadScenario s : remex::kLoadScenarios) {
    scenarios += std::string(scenarios.empty() ? "" : ",") + remex::LoadScenarioName(s);
  }
  bench_cmd->add_option("--scenario", load.scenario,
                        "a load scenario generated on the server instead of the time evaluator: single-stream, "
                        "multi-stream, server or offline (MLPerf LoadGen's)")
      ->check(CLI::Validator([](std::string&) { return std::string(); }, "{" + scenarios + "}"));
  bench_cmd->add_option("--concurrency", load.concurrency,
                        "instances of the model running at once: N, or a sweep A:B[:STEP] (one row per level); "
                        "default 1, multi-stream: one per sample");
  bench_cmd->add_option("--samples-per-query", load.samples_per_query,
                        "multi-stream: samples in a query (default 8)");
  bench_cmd->add_option("--target-qps", load.target_qps, "server: Poisson arrival rate, queries per second");
  bench_cmd->add_option("--latency-bound-ms", load.latency_bound_ms,
                        "server: the p99 latency bound a rate must keep (with --find-peak)");
  bench_cmd->add_flag("--find-peak", load.find_peak,
                      "server: search the highest QPS whose p99 stays under --latency-bound-ms");
  bench_cmd->add_flag("--from-client", load.from_client,
                      "drive the scenario from this host over the wire (one session per instance) instead of on "
                      "the server: what the network and the protocol add");
  bench_cmd->add_flag("--audit", bench.audit,
                      "compare the outputs of seeded timed samples with an untimed reference call on the device "
                      "(default: on for server and offline)");
  bench_cmd->add_flag("--no-audit", bench.no_audit, "no audit (server and offline)");
  bench_cmd->add_option("--audit-samples", load.audit_samples, "timed samples the audit checks")
      ->capture_default_str();
  bench_cmd->add_option("--audit-rtol", load.audit_rtol, "audit tolerance, relative (0 with --audit-atol 0: equal values)")
      ->capture_default_str();
  bench_cmd->add_option("--audit-atol", load.audit_atol, "audit tolerance, absolute")->capture_default_str();
  AddReportFileOptions(bench_cmd, bench.files);
  AddRecordOptions(bench_cmd, bench.record);
  bench.command = CommandLine(argc, argv);

  DiffArgs diff;
  auto* diff_cmd = app.add_subcommand(
      "diff",
      "compare two saved bench reports (remex bench --json): medians, their ratio and whether it is beyond "
      "the noise; per op and node when both are profiled");
  diff_cmd->add_option("a", diff.a, "A.json, the baseline")->required()->type_name("FILE");
  diff_cmd->add_option("b", diff.b, "B.json, compared with A")->required()->type_name("FILE");
  diff_cmd
      ->add_option("--confidence", diff.confidence,
                   "of the intervals; a difference is beyond the noise when "
                   "the test's p < 1 - C and the ratio's interval excludes 1")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 0.9999));
  diff_cmd->add_option("--top", diff.top, "the largest op and node differences listed (the JSON has all)")
      ->capture_default_str();
  diff_cmd->add_flag("--json", diff.json, "print one JSON object (remex.diff)");

  ReportArgs report;
  auto* report_cmd = app.add_subcommand(
      "report", "write the CSV or the self-contained HTML page (charts) of a saved bench report (remex bench --json)");
  report_cmd->add_option("report", report.input, "BENCH.json")->required()->type_name("FILE");
  AddReportFileOptions(report_cmd, report.files);

  CheckArgs check;
  auto* check_cmd = app.add_subcommand("check", "run a model and compare its outputs with references on the device");
  AddSessionOptions(check_cmd, check);
  check_cmd->add_option("--reference", check.options.reference,
                        "folder of NAME.npy references (inputs from DIR/inputs/NAME.npy when present)")
      ->required()
      ->type_name("DIR");
  check_cmd->add_option("--rtol", check.options.rtol, "relative tolerance, >= 0")->capture_default_str();
  check_cmd->add_option("--atol", check.options.atol, "absolute tolerance, >= 0")->capture_default_str();
  check_cmd->add_flag("--equal-nan,!--no-equal-nan", check.options.equal_nan,
                      "NaN in an output where the reference has NaN is a match (default: on)");
  AddRecordOptions(check_cmd, check.record);

  CompareArgs compare;
  auto* compare_cmd = app.add_subcommand("compare", "compare .npy files (or folders of them) like numpy.allclose");
  compare_cmd->add_option("expected", compare.expected, "EXPECTED.npy or folder")->required()->type_name("FILE");
  compare_cmd->add_option("actual", compare.actual, "ACTUAL.npy or folder")->required()->type_name("FILE");
  compare_cmd->add_option("--rtol", compare.rtol, "relative tolerance, >= 0")->capture_default_str();
  compare_cmd->add_option("--atol", compare.atol, "absolute tolerance, >= 0")->capture_default_str();
  compare_cmd->add_flag("--equal-nan,!--no-equal-nan", compare.equal_nan,
                        "NaN in ACTUAL where EXPECTED has NaN is a match (default: on)");
  compare_cmd->add_flag("--json", compare.json, "print one JSON object");

  ShellArgs shell;
  auto* shell_cmd = app.add_subcommand(
      "shell", "an interactive shell on one session: load models, upload tensors, run, fetch, compare and bench "
               "them while they stay on the server (commands from stdin when it is no terminal)");
  AddConnectionOptions(shell_cmd, shell);
  shell_cmd->add_option("--history", shell.history, "the command history file (default: $HOME/.remex_history)")
      ->type_name("FILE");
  shell_cmd->add_flag("--no-history", shell.no_history, "read and write no history file");

  SuiteArgs suite;
  auto* suite_cmd = app.add_subcommand(
      "suite", "run a test suite (SUITE.toml) over one server, the embedded one, or devices leased from a farm, with a "
               "JUnit report (docs/farm.md)");
  suite_cmd->add_option("suite", suite.suite, "SUITE.toml")->required()->type_name("FILE");
  suite_cmd->add_option("--server", suite.server, "HOST:PORT of a remex-server (default: an embedded one on loopback)");
  suite_cmd->add_option("--token-file", suite.token_file, "the server's token (default: $REMEX_TOKEN)")
      ->type_name("FILE");
  AddFarmLeaseOptions(suite_cmd, suite.farm, suite.pool, suite.labels, suite.lease_wait_s);
  suite_cmd->add_option("--jobs", suite.jobs, "cases run at once (with --farm: devices leased at once)")
      ->capture_default_str();
  suite_cmd->add_option("--junit", suite.junit, "write a JUnit XML report to this file")->type_name("FILE");
  suite_cmd->add_option("--timeout", suite.timeout_s, "seconds one request may take")->capture_default_str();
  suite_cmd->add_flag("--json", suite.json, "print one JSON object");
  AddRecordOptions(suite_cmd, suite.record);
  suite_cmd
      ->add_option("--regressions", suite.regressions,
                   "with --record: judge the suite's series against their history (remex regressions); fail: a "
                   "regression exits 1, warn: it only warns")
      ->check(CLI::IsMember({"fail", "warn"}));
  AddRegressionOptions(suite_cmd, suite.regression_options);

  FarmStatusArgs farm_status;
  auto* farm_cmd = app.add_subcommand("farm", "the device farm in Redis (docs/farm.md)");
  farm_cmd->require_subcommand(1);
  auto* farm_status_cmd = farm_cmd->add_subcommand("status", "list the registered devices and pools");
  farm_status_cmd->add_option("--farm", farm_status.farm, "redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM; a user's password in REMEX_FARM_PASSWORD)")
      ->envname("REMEX_FARM");
  farm_status_cmd->add_option("--labels", farm_status.labels,
                              "only devices matching this selector, e.g. gpu=h100,cuda>=12.4,!maintenance (docs/farm.md)");
  farm_status_cmd->add_option("--timeout", farm_status.timeout_s, "seconds to wait for Redis")->capture_default_str();
  farm_status_cmd->add_flag("--json", farm_status.json, "print one JSON object");
  FarmLeaseArgs farm_lease;
  auto* farm_lease_cmd = farm_cmd->add_subcommand(
      "lease", "hold a lease of a device while a command runs (REMEX_SERVER and REMEX_TOKEN in its environment)");
  AddFarmLeaseOptions(farm_lease_cmd, farm_lease.farm, farm_lease.pool, farm_lease.labels, farm_lease.lease_wait_s)
      .farm->envname("REMEX_FARM");
  farm_lease_cmd->add_option("--ttl", farm_lease.ttl_s, "seconds the lease outlives its last renewal (renewed every third)")
      ->capture_default_str();
  farm_lease_cmd
      ->add_option("--stop-grace", farm_lease.stop_grace_s,
                   "when the lease is lost: seconds between SIGTERM and SIGKILL to the command's process group "
                   "(farm lease then exits 75)")
      ->capture_default_str();
  farm_lease_cmd->add_option("command", farm_lease.command, "the command to run, after --")
      ->required()
      ->type_name("COMMAND");
  FarmInstallArgs farm_install;
  auto* farm_install_cmd = farm_cmd->add_subcommand(
      "install-functions", "load the lease functions, signing lease records with the farm key, into the farm's Redis");
  farm_install_cmd->add_option("--farm", farm_install.farm, "redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM; a user's password in REMEX_FARM_PASSWORD)")
      ->envname("REMEX_FARM");
  farm_install_cmd->add_option("--farm-key-file", farm_install.key_file,
                               "the farm key: a file of at least 32 bytes, mode 600, which every farm server gets too")
      ->required()
      ->type_name("FILE");
  std::vector<FarmDrainArgs> drains(2);
  drains[1].undrain = true;
  std::vector<CLI::App*> drain_cmds;
  for (FarmDrainArgs& d : drains) {
    auto* c = farm_cmd->add_subcommand(d.undrain ? "undrain" : "drain",
                                       d.undrain ? "lease a drained device again"
                                                 : "lease a device no more (a lease in progress runs on)");
    c->add_option("--farm", d.farm, "redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM; a user's password in REMEX_FARM_PASSWORD)")->envname("REMEX_FARM");
    c->add_option("device", d.device, "the device's id, HOST:PORT as farm status lists it")->required();
    drain_cmds.push_back(c);
  }

  JobArgs job;
  auto* job_cmd = app.add_subcommand("job", "jobs in a farm's queue that outlive their client (docs/farm.md, Jobs)");
  job_cmd->require_subcommand(1);
  auto add_farm = [&](CLI::App* c) {
    c->add_option("--farm", job.farm, "redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM; a user's password in REMEX_FARM_PASSWORD)")
        ->envname("REMEX_FARM");
  };
  auto* job_submit_cmd = job_cmd->add_subcommand(
      "submit", "queue a job (SUITE.toml or a model; its files travel with it) and print its id at once");
  add_farm(job_submit_cmd);
  job_submit_cmd->add_option("target", job.target, "SUITE.toml, or a model (.onnx, .rmx)")->required();
  job_submit_cmd->add_option("--command", job.command, "for a model: bench (default), check or run")
      ->check(CLI::IsMember({"bench", "check", "run", "suite"}));
  job_submit_cmd->add_option("--pool", job.pool, "the pool whose workers run it, and whose device it leases")->capture_default_str();
  job_submit_cmd->add_option("--labels", job.labels, "the selector its device must match (docs/farm.md)");
  job_submit_cmd->add_option("--priority", job.priority, "-1000..1000: higher runs first")->capture_default_str();
  job_submit_cmd->add_option("--retries", job.retries, "further attempts when a worker is lost mid-job")->capture_default_str();
  job_submit_cmd->add_flag("--json", job.json, "print one JSON object");
  job_submit_cmd->add_option("args", job.extra, "the command's further arguments, after --")->type_name("ARGS");
  auto* job_status_cmd = job_cmd->add_subcommand("status", "show a job: its state, queue and run times, result");
  auto* job_wait_cmd = job_cmd->add_subcommand("wait", "wait for a job to end; exit 0 when it succeeded, 1 when not");
  for (CLI::App* c : {job_status_cmd, job_wait_cmd}) {
    add_farm(c);
    c->add_option("id", job.id, "the job's id, POOL/N")->required();
    c->add_flag("--json", job.json, "print one JSON object (with the command's JSON result)");
  }
  job_wait_cmd->add_option("--timeout", job.timeout_s, "seconds to wait (0: no limit); then exit 3")->capture_default_str();
  auto* job_logs_cmd = job_cmd->add_subcommand("logs", "print a job's log (its command's output)");
  add_farm(job_logs_cmd);
  job_logs_cmd->add_option("id", job.id, "the job's id, POOL/N")->required();
  job_logs_cmd->add_flag("--follow,-f", job.follow, "keep printing until the job ends");
  auto* job_cancel_cmd = job_cmd->add_subcommand("cancel", "cancel a job (a running one is stopped by its worker)");
  add_farm(job_cancel_cmd);
  job_cancel_cmd->add_option("id", job.id, "the job's id, POOL/N")->required();
  auto* job_list_cmd = job_cmd->add_subcommand("list", "list a pool's jobs, newest first");
  add_farm(job_list_cmd);
  job_list_cmd->add_option("--pool", job.pool, "the pool")->capture_default_str();
  job_list_cmd->add_option("--state", job.state, "only jobs in this state (queued, running, succeeded, failed, cancelled)");
  job_list_cmd->add_option("--limit", job.limit, "at most this many")->capture_default_str()->check(CLI::Range(1, 10000));
  job_list_cmd->add_flag("--json", job.json, "print one JSON object");
  WorkerArgs worker;
  auto* worker_cmd = app.add_subcommand("worker", "run the jobs of a farm's pool, one at a time, until stopped (SIGTERM)");
  worker_cmd->add_option("--farm", worker.farm, "redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM)")->envname("REMEX_FARM");
  worker_cmd->add_option("--pool", worker.pool, "the pool whose jobs it runs")->capture_default_str();
  worker_cmd->add_option("--name", worker.name, "its name in the jobs' records (default: USER@HOST pid N)");
  worker_cmd->add_option("--heartbeat", worker.heartbeat_s,
                         "seconds between its heartbeats; its job is requeued 3 heartbeats after its last")
      ->capture_default_str();
  worker_cmd->add_flag("--once", worker.once, "end after one job");

  HistoryArgs history;
  auto* history_cmd = app.add_subcommand(
      "history", "list the series of a results store (remex bench|check|suite --record) and their latest runs");
  history_cmd
      ->add_option("--results", history.results,
                   "the results store: sqlite:///PATH or postgresql://... (default: $REMEX_RESULTS, else "
                   "sqlite://$XDG_DATA_HOME/remex/results.sqlite)")
      ->envname("REMEX_RESULTS");
  history_cmd->add_option("--model", history.model, "only this model: its file name or content hash");
  history_cmd->add_option(
      "--labels", history.labels,
      "only this device class: the farm --labels a run was leased with, or cpu:MODEL / gpu:NAME");
  history_cmd->add_option(
      "--since", history.since,
      "only runs since a date (2026-12-01), a UTC time (2026-12-01T10:00:00Z) or an age (12h, 7d)");
  history_cmd->add_option("--limit", history.limit, "the latest runs listed per series (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  history_cmd->add_flag("--json", history.json, "print one JSON object (remex.history)");

  RegressionsArgs regressions;
  auto* regressions_cmd = app.add_subcommand(
      "regressions",
      "judge each series' newest runs of a results store against its history: regression, improvement, no "
      "change, insufficient data or too noisy (exit 1 on a regression)");
  regressions_cmd
      ->add_option("--results", regressions.results,
                   "the results store: sqlite:///PATH or postgresql://... (default: $REMEX_RESULTS, else "
                   "sqlite://$XDG_DATA_HOME/remex/results.sqlite)")
      ->envname("REMEX_RESULTS");
  regressions_cmd->add_option("--model", regressions.model, "only this model: its file name or content hash");
  regressions_cmd->add_option("--labels", regressions.labels,
                              "only this device class: the farm --labels a run was leased with, or cpu:MODEL / "
                              "gpu:NAME");
  regressions_cmd->add_option("--since", regressions.since,
                              "only runs since a date (2026-12-01), a UTC time (2026-12-01T10:00:00Z) or an age "
                              "(12h, 7d)");
  AddRegressionOptions(regressions_cmd, regressions.options);
  regressions_cmd->add_flag("--json", regressions.json, "print one JSON object (remex.regressions)");

  DashboardArgs dashboard;
  auto* dashboard_cmd = app.add_subcommand("dashboard",
                                           "serve a read-only web UI of a results store (series, runs, "
                                           "comparisons) and of a farm (devices, queues, "
                                           "self-tests) until SIGINT or SIGTERM");
  dashboard_cmd
      ->add_option("--results", dashboard.results,
                   "the results store: sqlite:///PATH or postgresql://... (default: $REMEX_RESULTS, else "
                   "sqlite://$XDG_DATA_HOME/remex/results.sqlite)")
      ->envname("REMEX_RESULTS");
  dashboard_cmd
      ->add_option(
          "--farm", dashboard.farm,
          "also show the farm at redis://[USER@]HOST:PORT[/DB] (default: $REMEX_FARM; a user's password in "
          "REMEX_FARM_PASSWORD)")
      ->envname("REMEX_FARM");
  dashboard_cmd
      ->add_option("--farm-timeout", dashboard.farm_timeout_s, "seconds a page waits for the farm's Redis")
      ->capture_default_str();
  dashboard_cmd
      ->add_option(
          "--listen", dashboard.listen,
          "HOST:PORT to serve on ([V6]:PORT; port 0: any free one, printed); a non-loopback address needs "
          "--token-file or --tls-client-ca, or --insecure")
      ->capture_default_str();
  dashboard_cmd->add_option(
      "--token-file", dashboard.token_file,
      "require this token (at least 16 bytes): browsers log in with it once (a session cookie), "
      "API clients send \"Authorization: Bearer TOKEN\"")
      ->type_name("FILE");
  dashboard_cmd->add_option("--tls-cert", dashboard.tls_cert,
                            "serve HTTPS (TLS 1.2 or later) with this PEM certificate chain")
      ->type_name("FILE");
  dashboard_cmd->add_option("--tls-key", dashboard.tls_key, "the PEM private key of --tls-cert")->type_name("FILE");
  dashboard_cmd->add_option("--tls-client-ca", dashboard.tls_client_ca,
                            "mutual TLS: require a client certificate signed by a CA of this PEM file")
      ->type_name("FILE");
  dashboard_cmd->add_flag(
      "--insecure", dashboard.insecure,
      "serve a non-loopback address without --token-file or --tls-client-ca: anyone who reaches "
      "the port reads the store and the farm");
  AddRegressionOptions(dashboard_cmd, dashboard.options);

  std::string completion_shell;
  auto* completion_cmd = app.add_subcommand(
      "completion", "print the bash or zsh completion script of remex (docs/cli.md, \"Shell completion\")");
  completion_cmd->add_option("shell", completion_shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));

  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--record") == 0 && (i + 1 == argc || !LooksLikeUrl(argv[i + 1]))) {
      argv[i] = const_cast<char*>(kRecordDefaultFlag);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, the version or the error
    return code == 0 ? tooling::kExitOk : tooling::kExitUsage;
  }
  // Diagnostics go to stderr (stdout is for results: a --json report must stay JSON); the
  // embedded server logs warnings and errors only.
  spdlog::set_default_logger(spdlog::get("remex") ? spdlog::get("remex") : spdlog::stderr_color_mt("remex"));
  spdlog::set_level(spdlog::level::warn);
  if (*completion_cmd) {
    const std::string script = completion_shell == "bash" ? remex::cli::BashCompletionScript(app, "remex")
                                                          : remex::cli::ZshCompletionScript(app, "remex");
    std::fputs(script.c_str(), stdout);
    return tooling::kExitOk;
  }
  if (*compile_cmd) return Compile(compile);
  if (*tune_cmd) return TuneCommand(tune);
  if (*gen_sr_cmd) return GenSr(gen_sr);
  if (*run_cmd) return Run(run);
  if (*bench_cmd) return Bench(bench);
  if (*report_cmd) return ReportCommand(report);
  if (*diff_cmd) return DiffCommand(diff);
  if (*check_cmd) return Check(check);
  if (*compare_cmd) return Compare(compare);
  if (*shell_cmd) return ShellCommand(shell);
  if (*farm_status_cmd) return FarmStatusCommand(farm_status);
  if (*suite_cmd) return SuiteCommand(suite);
  if (*history_cmd) return HistoryCommand(history);
  if (*regressions_cmd) return RegressionsCommand(regressions);
  if (*dashboard_cmd) return DashboardCommand(dashboard);
  if (*farm_lease_cmd) return FarmLeaseCommand(farm_lease);
  if (*farm_install_cmd) return FarmInstallCommand(farm_install);
  if (*job_submit_cmd) return JobSubmitCommand(job);
  if (*job_status_cmd) return JobStatusCommand(job, false);
  if (*job_wait_cmd) return JobStatusCommand(job, true);
  if (*job_logs_cmd) return JobLogsCommand(job);
  if (*job_cancel_cmd) return JobCancelCommand(job);
  if (*job_list_cmd) return JobListCommand(job);
  if (*worker_cmd) return WorkerCommand(worker);
  for (size_t i = 0; i < drain_cmds.size(); ++i) {
    if (*drain_cmds[i]) return FarmDrainCommand(drains[i]);
  }
  return tooling::kExitUsage;
}
