// A device's health over time (docs/farm.md, "Health"): every self-test of a device
// server as one run of the results store (results_store.h), and the judgement of its
// latency against the device's own earlier passing self-tests, by the method of
// regression.h.
//
// The record (a dashboard reads it; keep it stable):
//   kind, model_name, scenario  "self-test"
//   model_hash                  ContentHash of the self-test's description
//                               (server::SelfTestDescription): a new test, a new series
//   device_class                POOL/ID: the farm pool and the advertised HOST:PORT
//                               ("local/HOST:PORT" without a farm)
//   device                      the server's device, "cpu" or "cuda:0"
//   tags                        farm.pool, farm.device (ID), self-test.reason (start,
//                               reset or interval)
//   summary                     {count, median_ms, p90_ms, min_ms, max_ms} of the
//                               samples ({count: 0} when there are none)
//   samples_ms                  the timed runs' latencies, ms
//   verdict, error              "pass", or "fail" with the reason: the outputs differ
//                               from the CPU's (or the test could not run), or the
//                               latency drifted
//   report                      {schema "remex.self-test", schema_version 1,
//                               description, reason, drift: {state, reason, change_pct,
//                               threshold_pct, history_runs}}
//
// The drift rule. A self-test that passed is judged against the latest
// DriftOptions::history (10) passing self-tests of its series (same test, same device)
// with regression::Judge, one confirmation: a drift when its median lies outside the
// history's prediction interval at level 1 - alpha (0.01), its samples are larger by a
// Mann-Whitney test at alpha, and its median is at least `threshold` (25 %) above the
// geometric mean of the history's medians. With fewer than `min_history` (5) passing
// self-tests it says "insufficient history" and judges nothing; a history whose
// run-to-run spread exceeds the threshold itself is "too noisy" and judges nothing
// either. Failed self-tests, drifted ones included, never enter the history, so a
// drifted device is judged against its speed before the drift until it is back to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "host_client/tooling/results_store.h"

namespace remex::tooling {

// kind, model_name and scenario of a self-test's record.
inline constexpr std::string_view kSelfTestKind = "self-test";

// One self-test of a device server, as it ran.
struct SelfTestRun {
  std::string pool;                // the farm pool; "local" without a farm
  std::string id;                  // the device's id: the advertised HOST:PORT
  std::string device;              // the server's device: "cpu", "cuda:0"
  std::string reason;              // "start", "reset" or "interval"
  std::string description;         // the self-test's description (server::SelfTestDescription)
  std::string error;               // empty: the device's outputs matched the CPU's; else why not
  std::vector<double> samples_ms;  // the timed runs' latencies, ms (empty when it could not run)
  int64_t unix_s = 0;              // when it ran, Unix seconds (recorded_at)
};

// The record of `run`, judged on correctness only: verdict "pass", or "fail" with
// `run.error`; the who of FillRecordContextFromEnvironment.
RunRecord SelfTestRecord(const SelfTestRun& run);

struct DriftOptions {
  // The smallest slowdown of the median judged a drift, relative (0.25 = 25 %); also the
  // largest run-to-run spread of the history judged. 0: latency is not judged.
  double threshold = 0.25;
  // Fewer passing self-tests in the history: "insufficient history". At least 2.
  size_t min_history = 5;
  // The history: at most this many of the latest passing self-tests (>= min_history).
  size_t history = 10;
  // Significance level of the prediction interval and of the Mann-Whitney test, (0, 1).
  double alpha = 0.01;
};

enum class DriftState { kNotJudged, kInsufficientHistory, kTooNoisy, kNoDrift, kDrift };

// "not judged", "insufficient history", "too noisy", "no drift", "drift".
std::string_view DriftStateName(DriftState state);

struct DriftJudgement {
  DriftState state = DriftState::kNotJudged;
  std::string reason;                 // one sentence for people
  double median_ms = 0;               // the new self-test's median
  double history_median_ms = 0;       // the geometric mean of the history's medians (0: not judged)
  double change_pct = 0;              // median against history_median_ms, %
  std::vector<int64_t> history_runs;  // the store's ids of the runs judged against, oldest first
};

// Judges the latency of `record` (a self-test not recorded yet, with samples) against
// the latest passing runs of its series in `store`. kNotJudged when options.threshold
// is 0 or the record has no positive samples. INVALID_ARGUMENT for bad options;
// UNAVAILABLE (the store's) when the store cannot be read.
StatusOr<DriftJudgement> JudgeSelfTestDrift(ResultsStore& store, const RunRecord& record,
                                            const DriftOptions& options);

// What a self-test says of the device, once judged and recorded.
struct SelfTestOutcome {
  RunRecord record;      // as recorded (or as it would have been)
  DriftJudgement drift;  // kNotJudged for a failed test, no store, or a store that failed
  bool healthy = false;  // record.verdict == "pass"
  std::string health;    // "ok", or record.error: what the farm record says
  int64_t run_id = 0;    // the store's id of the record; 0 when not recorded
  // OK, or why the store could not be read or written (the health then rests on the
  // test's correctness only).
  Status store_status;
};

// Judges `run`: a failed test fails; a passing one is judged for drift against `store`
// (when not null), and a drift fails it with error "self-test: latency drift: ...".
// Then records it in `store`. Never fails: a store's error goes to store_status.
SelfTestOutcome JudgeAndRecordSelfTest(ResultsStore* store, const SelfTestRun& run,
                                       const DriftOptions& options);

}  // namespace remex::tooling
