// Tuning over the wire (`remex tune`): every shape bucket of a model compiled with the
// compile choices that measured fastest on the device it will run on, and a log that
// later compiles reuse (`remex compile --tuning-log`). docs/tuning.md is the user's
// guide; this header is the contract.
//
// The search space is the compiler's own choices (compiler::TunedChoices): activation
// layout, dtype (float16 only where the device computes in it), BatchNormalization
// folding, epilogue fusion and elementwise fusion, each written as `remex bench
// --variant` writes it (layout=NHWC, fuse-epilogues=false, ...). Per bucket, the search
// is a coordinate descent from the command's own options (the start):
//   1. every choice one axis away from the incumbent and not yet measured is compiled
//      on this host, for this bucket alone (the clone the whole executable will hold);
//   2. each is run once on the device and checked against the reference (the start
//      in float32, run on the CPU device: the target when it is one, else an embedded
//      CPU server) with the tolerance of its dtype; a candidate that fails to compile,
//      fails on the device, times out or mismatches is recorded as such and never
//      chosen;
//   3. the incumbent and the candidates that passed are benchmarked interleaved
//      (variants.h, BenchVariants: valid-run rules, Hodges-Lehmann ratio with its
//      interval); a candidate wins only when its ratio to the incumbent is below 1 and
//      beyond the noise (the interval excludes 1 and p < 1 - confidence), each of a
//      round's k comparisons at confidence 1 - (1 - C) / k (Bonferroni); the lowest
//      ratio wins;
//   4. a round without a winner ends the bucket, complete; the budget spent or a signal
//      ends it not complete (the next run goes on from the log). A complete bucket whose
//      choice differs from the start is then benchmarked side by side against it, and
//      if that shows it slower beyond the noise, the start is kept instead.
// The inputs of a bucket are seeded random data of its representative shape: each
// dispatched symbol at its bucket's upper edge, every other symbol at its lower bound
// (at least 1).
//
// Buckets are spread over the devices: one worker per connection (a --server, or each
// device leased from a farm that matches the labels), taking buckets from one queue;
// every device must have the first's fingerprint (a worker on another releases it). A
// worker keeps its lease (or embedded server) for the whole tune: a session an error
// closed is reopened to the same device. A candidate that fails in the interleaved
// benchmark is benchmarked alone against the incumbent, and rejected if it fails so.
//
// The log is JSON Lines, appended after each round, so that an interrupted tune
// resumes where it stopped: records of a bucket with the same (fingerprint, model
// hash, bucket, shapes, start) are replayed; a bucket with a complete "best" record is
// not measured again.
//
// Per-node choices (a device other than the CPU, --space's per-node axes): once a
// bucket's descent ends, one candidate per value of each per-node axis sets that value
// on every node whose op takes the attribute; each is checked, then the incumbent and
// each candidate are profiled (options.bench.profile_runs invokes, each node's median).
// Per node, the value whose median is lowest and at least 2 % under the incumbent's is
// taken; the executable of those per-node values wins only when, benchmarked
// interleaved against the incumbent, it is faster beyond the noise.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "host_client/client/client.h"
#include "host_client/compiler/options.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/run.h"

namespace remex::tooling {

inline constexpr char kTuningLogSchema[] = "remex.tuning";
inline constexpr int kTuningLogSchemaVersion = 1;
inline constexpr char kTuneSchema[] = "remex.tune";
inline constexpr int kTuneSchemaVersion = 1;

// The axes of the search space, as --variant and --space name them.
inline constexpr const char* kTuningKeys[] = {"layout",           "dtype",          "fold-batchnorm",
                                              "fuse-epilogues",   "fuse-elementwise", "compute-threads"};
// The per-node axes: the tunable attributes of the kernels (kernels::OpTraits::tunable)
// as --space names them, each value an integer in the attribute's range; the CUDA
// device's cudnn-algo (cudnn_algo, 0-7), cudnn-math (cudnn_math, 0-3) and
// cublaslt-algo (cublaslt_algo, 0-7), the CPU device's onednn-algo (onednn_algo, 0-1).
inline constexpr const char* kNodeTuningKeys[] = {"cudnn-algo", "cudnn-math", "cublaslt-algo", "onednn-algo"};

// {"layout": "NCHW"|"NHWC", "dtype": "model"|"float32"|"float16", "fold_batchnorm",
// "fuse_epilogues", "fuse_elementwise"}, "compute_threads" when not 0, and
// "node_attrs": {NODE: {ATTRIBUTE: VALUE}} when any node has one.
nlohmann::json ToJson(const compiler::TunedChoices& choices);
// The inverse; INVALID_ARGUMENT naming the field that is missing or wrong.
StatusOr<compiler::TunedChoices> TunedChoicesFromJson(const nlohmann::json& j);
// Sets axis `key` (kTuningKeys) of `choices` to `value` as --variant takes it (NCHW,
// NHWC; model, float32, float16; true, false; compute-threads an integer, 0 the
// device's own). INVALID_ARGUMENT for an unknown key or
// a bad value.
Status SetTunedChoice(compiler::TunedChoices& choices, const std::string& key, const std::string& value);
// `choices` as --variant text, the axes that differ from `start` ("layout=NHWC,
// fuse-epilogues=false"), or "start" when none does; per-node attributes that differ
// add "+N per-node" (N nodes).
std::string TunedChoicesText(const compiler::TunedChoices& choices, const compiler::TunedChoices& start);

// One axis of the search space and the values it takes.
struct TuningAxis {
  std::string key;  // kTuningKeys
  std::vector<std::string> values;
};
// --space KEY=V1,V2 (repeatable). INVALID_ARGUMENT naming --space for an unknown key, a
// key given twice, fewer than one value, a value SetTunedChoice refuses, or a per-node
// value that is no integer in its attribute's range.
StatusOr<std::vector<TuningAxis>> ParseTuningSpace(const std::vector<std::string>& specs);
// The space when --space is not given: layout, fold-batchnorm, fuse-epilogues and
// fuse-elementwise; on the CPU device also compute-threads (0, the device's, or 1); on
// another device dtype (the model's, float16) and the per-node axes with every value
// of their ranges.
std::vector<TuningAxis> DefaultTuningSpace(const std::string& device);

// The device a tuning result holds for: "cpu: MODEL, N compute threads", or "gpu: NAME,
// compute capability X.Y" (the session's first device; "unknown" parts where the
// server did not say).
std::string TuningFingerprint(const client::ServerInfo& info);

// ---- the log -----------------------------------------------------------------------

// The records of a log file, in file order. A missing file is an empty log; a line that
// is not a JSON object of schema remex.tuning (a line torn by a kill), or whose fields a
// reader uses have the wrong types, is skipped and counted. NOT_FOUND/PERMISSION_DENIED
// for a file that cannot be opened, DATA_LOSS for a read error; INVALID_ARGUMENT for a
// record of a newer schema_version.
struct TuningLog {
  std::vector<nlohmann::json> records;
  size_t skipped_lines = 0;
};
StatusOr<TuningLog> ReadTuningLog(const std::string& path);

// The choices a log's complete-or-not "best" records give the buckets of `model_hash`
// on `fingerprint` (the latest record per bucket whose choice parses), keyed by function name as
// CompileOptions::bucket_choices is. `fingerprint` empty: the log's only one for the
// model (*used says which). NOT_FOUND when the log has none for the model (on that
// fingerprint); INVALID_ARGUMENT naming them when it has several and none was given.
StatusOr<std::map<std::string, compiler::TunedChoices>> TunedChoicesFromLog(const TuningLog& log,
                                                                            const std::string& model_hash,
                                                                            const std::string& fingerprint,
                                                                            std::string* used = nullptr);

// `options.bucket_choices` from the log at `log_path` (TunedChoicesFromLog) for the
// model file at `model_path` (its content hash): what `--tuning-log` compiles with; a
// tune's own output takes its report's choices, which are the log's latest. The log's
// errors (ReadTuningLog, TunedChoicesFromLog), naming it; the model file's read errors.
Status ApplyTuningLogFile(const std::string& log_path, const std::string& model_path, const std::string& fingerprint,
                          compiler::CompileOptions& options, std::string* used = nullptr);

// ---- remex tune --------------------------------------------------------------------

struct TuneOptions {
  // The model (.onnx), the start options (compile; with its dispatch and bounds) and
  // the server (a --server, the embedded one, or a farm lease per worker).
  ModelRequest request;
  std::vector<TuningAxis> space;  // empty: DefaultTuningSpace of the first device
  // How each round is benchmarked (BenchVariants: min_samples, min_duration_s,
  // confidence, timing); its `interrupt` stops the tune after the round in progress.
  BenchOptions bench;
  double budget_s = 0;  // wall seconds for the measurements; 0: no limit
  std::string log_path;     // required: read first, appended after every round
  std::string output_path;  // the tuned executable; empty: none written
  // Tolerances of the accuracy check (numpy.allclose's), for candidates in float32 and
  // in float16.
  double rtol = 1e-3, atol = 1e-4;
  double float16_rtol = 1e-2, float16_atol = 1e-2;
  // With request.server.farm: the most devices leased at once; 0: one per bucket, up
  // to every device of the pool that matches the selector.
  int max_devices = 0;
};

struct TuneBucket {
  std::string bucket;                     // its function name, "main[W=33..64]" or "main"
  std::map<std::string, Shape> shapes;    // the representative input shapes
  compiler::TunedChoices start, choice;   // where the search began, what it chose
  // The choice against the start, measured side by side (confirmed): ratio < 1 faster.
  // Absent when the choice is the start.
  std::optional<double> ratio, ratio_low, ratio_high;
  bool beyond_noise = false;
  int rounds = 0;     // rounds measured, replayed ones included
  int measured = 0;   // candidates benchmarked in them (incumbents not counted)
  int rejected = 0;   // candidates that failed to compile or run, or mismatched
  int node_choices = 0;  // nodes with a per-node choice in `choice`
  bool from_log = false;   // complete in the log already: nothing measured
  bool complete = false;   // the search ended (no winner), not the budget or a signal
  std::string server;      // the worker's server that measured it
};

struct TuneReport {
  std::string model, model_hash, fingerprint;
  std::vector<std::string> servers;  // every server a worker measured on
  std::vector<TuningAxis> space;
  std::vector<TuneBucket> buckets;   // in the dispatcher's order
  int measured = 0, rejected = 0;    // over all buckets, this run only
  std::string output, output_hash;   // the tuned executable written (content hash), if any
  std::string log;
  size_t log_skipped_lines = 0;
  // "" when every bucket completed; "budget", or "interrupted by signal N".
  std::string stopped;
  double seconds = 0;
};

// Tunes (see the top of this file). INVALID_ARGUMENT for a model that is not an .onnx,
// no log path, bench options CheckBenchOptions refuses, a bad space or start options the
// compiler refuses; the log's errors; the connection's errors when no worker gets a
// device; a worker's device of another fingerprint is released, not an error. The
// tuned executable is written only when the tune was not interrupted.
StatusOr<TuneReport> Tune(const TuneOptions& options, const ProgressFn& progress = {});

// {"schema": "remex.tune", "schema_version": 1, model, model_hash, fingerprint, servers,
// space: {KEY: [values]}, buckets: [{bucket, shapes, start, choice, label, ratio,
// ratio_low, ratio_high, beyond_noise, rounds, measured, rejected, node_choices,
// from_log, complete, server}], measured, rejected, output, output_hash, log, stopped,
// seconds}
// (docs/tuning.md).
nlohmann::json ToJson(const TuneReport& report);
std::string TuneText(const TuneReport& report);

}  // namespace remex::tooling
