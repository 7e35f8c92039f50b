// `remex suite`: a test suite for CI (docs/farm.md, "Test suites"), read from TOML,
// its cases run over up to N devices at once (leased from a farm, or one server, or the
// embedded CPU server), reported as a JUnit XML file, a table and JSON.
//
// SUITE.toml (paths relative to the suite file):
//   name = "ocr"                              # optional; default: the file's stem
//   [[case]]
//   name = "cls"                              # required, unique
//   model = "cls.onnx"                        # required: .onnx or .rmx
//   shapes = ["x=1x3x48x192"]                 # --shape of each input (optional)
//   inputs = ["x=inputs/x.npy"]               # --input files (optional; else seeded random)
//   seed = 0                                  # of the random inputs
//   reference = "refs/cls"                    # a folder of NAME.npy per output (check),
//                                             # or "cpu": the embedded CPU device's outputs
//                                             # on the same inputs; absent: run only
//   rtol = 1e-4                               # check tolerances (defaults 1e-4, 1e-5)
//   atol = 1e-5
//   [case.bench]                              # optional: a benchmark with thresholds
//   repeat = 20                               # samples (default 10)
//   number = 0                                # calls per sample (0: chosen from min_repeat_ms)
//   warmup = 3
//   min_repeat_ms = 0
//   median_ms_max = 5.0                       # fail when the median is above
//   baseline = "baseline.json"                # a `remex bench --json` (or this suite's
//   max_regression = 0.10                     # --json case) report: fail when the median is
//                                             # more than 10 % above the baseline's
// Unknown keys are refused (naming them), as are wrong types and missing fields.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "host_client/tooling/connection.h"

namespace remex::tooling {

struct SuiteBench {
  int64_t repeat = 10, number = 0, warmup = 1;
  double min_repeat_ms = 0;
  std::optional<double> median_ms_max;
  std::string baseline;  // resolved path; "" none
  std::optional<double> max_regression;
};

struct SuiteCase {
  std::string name;
  std::string model;  // resolved path
  std::vector<std::string> shapes, inputs;
  uint64_t seed = 0;
  std::string reference;  // resolved folder, "cpu", or "" (run only)
  double rtol = 1e-4, atol = 1e-5;
  std::optional<SuiteBench> bench;
};

struct Suite {
  std::string name;
  std::string file;
  std::vector<SuiteCase> cases;
};

// Reads SUITE.toml. INVALID_ARGUMENT naming the file, line and key for a parse error,
// an unknown key, a wrong type, a missing or repeated case name, or a bad value;
// NOT_FOUND for a missing file (the suite's or a model's).
StatusOr<Suite> LoadSuite(const std::string& path);

struct SuiteOptions {
  ServerOptions server;  // a server, a farm to lease from (one lease per running case), or embedded
  int jobs = 1;          // cases run at once (and devices leased at once)
};

struct CaseResult {
  std::string name;
  std::string outcome = "passed";  // "passed", "failed" (a mismatch or threshold), "error"
  std::string message;             // why it failed; empty when it passed
  std::string device;              // the server and its device
  double seconds = 0;              // wall time of the case, lease and compile included
  double max_abs_error = 0;        // over the outputs checked
  std::optional<double> median_ms, p99_ms, baseline_median_ms;
  std::string model;  // the case's model file
  // The case's check and bench reports (report_json.h), null when it had none or failed
  // before: what `remex suite --record` records.
  nlohmann::json check_report, bench_report;
};

struct SuiteReport {
  std::string name;
  std::vector<CaseResult> cases;  // in the suite's order
  double seconds = 0;
  int passed = 0, failed = 0, errors = 0;
  bool ok() const { return failed == 0 && errors == 0; }
};

// Runs every case, up to options.jobs at once. A case's own failure is its result,
// never the suite's error.
SuiteReport RunSuite(const Suite& suite, const SuiteOptions& options);

// JUnit XML (the schema Jenkins, GitLab and GitHub read): one <testsuite> of one
// <testcase> per case, with <failure> or <error> and the timings in <system-out>.
std::string JUnitXml(const SuiteReport& report);
nlohmann::json ToJson(const SuiteReport& report);

}  // namespace remex::tooling
