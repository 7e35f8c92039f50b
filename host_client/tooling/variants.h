// Variants side by side (`remex bench MODEL --variant KEY=VALUE ...`) and two saved
// bench reports compared (`remex diff A.json B.json`): one table of medians with their
// intervals, each row's ratio to the first with its interval, and whether the
// difference is beyond the noise.
//
// Variants are benchmarked interleaved on one session: every variant's executable is
// loaded at once, and the server's time evaluator takes one sample of each in turn
// (A, B, C, A, B, C, ...), so that drift of the machine (clocks, heat, a neighbour's
// load) hits all of them alike.
//
// The comparison is the regression detector's sample-level test (regression.h): the
// Hodges-Lehmann estimate of the shift of the log samples, with its distribution-free
// interval from the Mann-Whitney statistic, gives the ratio of a variant to the first
// and its interval; the two-sided Mann-Whitney U test gives the p-value. A difference
// is beyond the noise when p < 1 - confidence and the ratio's interval excludes 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/tooling/prepare.h"
#include "host_client/tooling/profile.h"
#include "host_client/tooling/run.h"

namespace remex::tooling {

inline constexpr char kVariantsSchema[] = "remex.variants";
inline constexpr int kVariantsSchemaVersion = 1;
inline constexpr char kDiffSchema[] = "remex.diff";
inline constexpr int kDiffSchemaVersion = 1;

// The most rounds (one sample of every variant each) an interleaved run takes.
inline constexpr uint32_t kMaxVariantRounds = 10000;
// The most variants one run compares, the first included.
inline constexpr size_t kMaxVariants = 16;

// Samples `x` against the first's, `base` (ms per call, each > 0).
struct SampleComparison {
  double ratio = 1;                      // exp of the Hodges-Lehmann shift of the log samples
  double ratio_low = 1, ratio_high = 1;  // its interval at the confidence
  double p_value = 1;                    // two-sided Mann-Whitney U
  bool beyond_noise = false;             // p < 1 - confidence and the interval excludes 1
};

// INVALID_ARGUMENT for an empty side, a sample that is not finite and > 0, or a
// confidence outside (0, 1).
StatusOr<SampleComparison> CompareSamples(std::span<const double> base, std::span<const double> x,
                                          double confidence);

// One row of the table.
struct VariantSummary {
  std::string label;
  std::vector<double> samples_ms;            // ms per call, in run order
  bench::SampleStats stats;                  // of samples_ms
  bench::PercentileEstimate median;          // with its interval at the confidence (or unbounded)
  std::optional<SampleComparison> vs_first;  // none for the first row
};

// The rows of `labels` and their samples (same count, at least two rows): statistics,
// and each row from the second against the first. CompareSamples' errors, naming the
// row.
StatusOr<std::vector<VariantSummary>> SummarizeVariants(const std::vector<std::string>& labels,
                                                        const std::vector<std::vector<double>>& samples_ms,
                                                        double confidence);

// Per-op and per-node differences of two profiles (the "profile" objects of bench
// reports, ToJson(ProfileReport)): op rows matched by name and kind, their total ms;
// nodes matched by name, their median ms (the total ms of older reports' rows is all
// they have). Each side missing from one profile is null there; rows sorted by the
// absolute difference, largest first.
struct ProfileDiffRow {
  std::string name;
  std::string kind;  // ops: "kernel" or "instruction"; nodes: the op
  std::optional<double> a_ms, b_ms;
  double delta_ms = 0;  // b - a, a missing side counting 0
};
struct ProfileDiff {
  std::vector<ProfileDiffRow> ops, nodes;
  bool has_nodes = false;  // both profiles have nodes
};
ProfileDiff DiffProfiles(const nlohmann::json& a, const nlohmann::json& b);

// ---- remex bench --variant -------------------------------------------------------------

struct VariantRequest {
  std::string label;     // "base" for the first, else the --variant text
  ModelRequest request;  // the same model, server and inputs; its own compile options
};

struct VariantsReport {
  BenchOptions options;
  struct Variant {
    std::string label;
    SessionReport session;  // its executable, module hash and environment
    std::string function;
    uint32_t number = 0;                      // calls per sample, settled by its first request
    double duration_s = 0;                    // its samples' time
    std::optional<ProfileReport> profile;     // with options.profile
    std::optional<ProfileDiff> profile_diff;  // against the first's, when both are profiled
  };
  std::vector<Variant> variants;
  std::vector<VariantSummary> summary;  // as variants
  std::vector<uint32_t> order;          // the variant of each sample, in the order they were taken
  uint32_t rounds = 0;
  // Every variant reached options.min_samples and options.min_duration_s (false: the
  // run stopped at kMaxVariantRounds).
  bool complete = false;
  double bench_ms = 0;
};

// Prepares every variant on one connection (the first variant's server), benchmarks
// them interleaved, round after round, until each has options.min_samples samples and
// options.min_duration_s seconds of them (at most kMaxVariantRounds rounds; a round's
// first request per variant has options.timing's warmup and settles its calls per
// sample from options.timing's number and min_repeat_ms), then profiles each with
// options.profile. Stability, max_trials and repeat do not apply. INVALID_ARGUMENT for
// fewer than two or more than kMaxVariants variants, a load scenario or a trace;
// CheckBenchOptions' errors; the preparation's and the session's errors (naming the
// variant); DATA_LOSS for a reply with other than one sample, or a bad one.
StatusOr<VariantsReport> BenchVariants(const std::vector<VariantRequest>& variants,
                                       const BenchOptions& options, const ProgressFn& progress = {});
// As BenchVariants, on `connection` when it has a session (its server; the variants'
// own server options unused), else on the first variant's server, whose connection is
// then left in `connection`. The connection is closed (empty) after an error.
StatusOr<VariantsReport> BenchVariantsOn(const std::vector<VariantRequest>& variants, const BenchOptions& options,
                                         Connection& connection, const ProgressFn& progress = {});

// {"schema": "remex.variants", "schema_version": 1, model, server, device, confidence,
// rounds, complete, order, variants: [{label, function, number, samples_ms,
// duration_s, mean_ms, median_ms, median_low_ms, median_high_ms (null when not
// bounded), min_ms, max_ms, ratio, ratio_low, ratio_high, p_value, beyond_noise (null
// for the first), module_cache, compile_options, profile, profile_diff}], times_ms}
// (docs/cli.md).
nlohmann::json ToJson(const VariantsReport& report);
// The table; when profiled, the first variant's profile (ProfileText, `top` nodes) and
// each other's largest differences from it per op and per node (`top` rows of each).
std::string VariantsText(const VariantsReport& report, size_t top = kDefaultProfileTop);

// ---- remex diff -------------------------------------------------------------------------

struct DiffReport {
  std::string a, b;  // the reports' names (their files)
  double confidence = 0.95;
  std::vector<VariantSummary> summary;  // a, then b against a
  std::optional<ProfileDiff> profile;   // when both reports have a profile
};

// Compares two remex.bench reports (schema_version up to kBenchSchemaVersion) by their
// time-evaluator samples ("benchmark"."samples_ms"), and their profiles when both have
// one. INVALID_ARGUMENT naming the report for one that is not a remex.bench report, of
// a newer version, without samples (a load scenario's report) or with a sample that is
// not a positive number, or for a confidence outside (0, 1).
StatusOr<DiffReport> DiffBenchReports(const nlohmann::json& a, const std::string& a_name,
                                      const nlohmann::json& b, const std::string& b_name, double confidence);

// {"schema": "remex.diff", "schema_version": 1, a, b, confidence, beyond_noise,
// variants: [rows as in ToJson(VariantsReport)], profile_diff: {ops, nodes} or absent}.
nlohmann::json ToJson(const DiffReport& report);
std::string DiffText(const DiffReport& report, size_t top = kDefaultProfileTop);

}  // namespace remex::tooling
