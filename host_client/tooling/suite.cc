// `remex suite` (host_client/tooling/suite.h).
#include "host_client/tooling/suite.h"

#include <toml++/toml.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "host_client/tooling/prepare.h"
#include "host_client/tooling/report_json.h"
#include "host_client/tooling/run.h"
#include "host_client/tooling/specs.h"

namespace remex::tooling {
namespace {

namespace fs = std::filesystem;

std::string Where(const std::string& file, const toml::node& node) {
  const auto& src = node.source();
  return file + ":" + std::to_string(src.begin.line);
}

// Refuses keys of `table` outside `known`, naming the first.
Status OnlyKeys(const std::string& file, const toml::table& table, const std::set<std::string>& known,
                const std::string& what) {
  for (const auto& [key, node] : table) {
    if (!known.count(std::string(key.str()))) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument(Where(file, node) + ": unknown key '" + std::string(key.str()) + "' in " + what +
                             " (known: " + list + ")");
    }
  }
  return OkStatus();
}

template <typename T>
StatusOr<std::optional<T>> Get(const std::string& file, const toml::table& table, const char* key, const char* type) {
  const toml::node* node = table.get(key);
  if (!node) return std::optional<T>();
  if (auto v = node->value<T>()) return std::optional<T>(*v);
  return InvalidArgument(Where(file, *node) + ": '" + key + "' must be " + type);
}

StatusOr<std::vector<std::string>> Strings(const std::string& file, const toml::table& table, const char* key) {
  std::vector<std::string> out;
  const toml::node* node = table.get(key);
  if (!node) return out;
  const toml::array* array = node->as_array();
  if (!array) return InvalidArgument(Where(file, *node) + ": '" + std::string(key) + "' must be an array of strings");
  for (const toml::node& item : *array) {
    auto s = item.value<std::string>();
    if (!s) return InvalidArgument(Where(file, item) + ": '" + std::string(key) + "' must hold strings");
    out.push_back(*s);
  }
  return out;
}

std::string Resolve(const fs::path& base, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (base / path).lexically_normal().string();
}

StatusOr<SuiteCase> ReadCase(const std::string& file, const fs::path& base, const toml::table& t) {
  REMEX_RETURN_IF_ERROR(OnlyKeys(file, t,
                                 {"name", "model", "shapes", "inputs", "seed", "reference", "rtol", "atol", "bench"},
                                 "a [[case]]"));
  SuiteCase c;
  REMEX_ASSIGN_OR_RETURN(auto name, Get<std::string>(file, t, "name", "a string"));
  REMEX_ASSIGN_OR_RETURN(auto model, Get<std::string>(file, t, "model", "a string"));
  if (!name || name->empty()) return InvalidArgument(Where(file, t) + ": a [[case]] needs a 'name'");
  if (!model) return InvalidArgument(Where(file, t) + ": case '" + *name + "' needs a 'model'");
  c.name = *name;
  c.model = Resolve(base, *model);
  if (!fs::exists(c.model)) return NotFound(Where(file, t) + ": case '" + c.name + "': no model '" + c.model + "'");
  REMEX_ASSIGN_OR_RETURN(c.shapes, Strings(file, t, "shapes"));
  REMEX_ASSIGN_OR_RETURN(std::vector<std::string> inputs, Strings(file, t, "inputs"));
  for (const std::string& in : inputs) {
    const size_t eq = in.find('=');
    c.inputs.push_back(eq == std::string::npos ? in : in.substr(0, eq + 1) + Resolve(base, in.substr(eq + 1)));
  }
  REMEX_RETURN_IF_ERROR(ParseInputSpecs(c.inputs).status().WithContext(Where(file, t) + ": case '" + c.name + "'"));
  REMEX_ASSIGN_OR_RETURN(auto seed, Get<int64_t>(file, t, "seed", "an integer"));
  if (seed) c.seed = static_cast<uint64_t>(*seed);
  REMEX_ASSIGN_OR_RETURN(auto reference, Get<std::string>(file, t, "reference", "a string"));
  if (reference) c.reference = *reference == "cpu" ? "cpu" : Resolve(base, *reference);
  REMEX_ASSIGN_OR_RETURN(auto rtol, Get<double>(file, t, "rtol", "a number"));
  REMEX_ASSIGN_OR_RETURN(auto atol, Get<double>(file, t, "atol", "a number"));
  if (rtol) c.rtol = *rtol;
  if (atol) c.atol = *atol;
  if (!(c.rtol >= 0) || !(c.atol >= 0) || !std::isfinite(c.rtol) || !std::isfinite(c.atol)) {
    return InvalidArgument(Where(file, t) + ": case '" + c.name + "': rtol and atol must be finite and >= 0");
  }
  if (const toml::node* b = t.get("bench")) {
    const toml::table* bt = b->as_table();
    if (!bt) return InvalidArgument(Where(file, *b) + ": 'bench' must be a table ([case.bench])");
    REMEX_RETURN_IF_ERROR(OnlyKeys(file, *bt,
                                   {"repeat", "number", "warmup", "min_repeat_ms", "median_ms_max", "baseline",
                                    "max_regression"},
                                   "[case.bench]"));
    SuiteBench sb;
    REMEX_ASSIGN_OR_RETURN(auto repeat, Get<int64_t>(file, *bt, "repeat", "an integer"));
    REMEX_ASSIGN_OR_RETURN(auto number, Get<int64_t>(file, *bt, "number", "an integer"));
    REMEX_ASSIGN_OR_RETURN(auto warmup, Get<int64_t>(file, *bt, "warmup", "an integer"));
    REMEX_ASSIGN_OR_RETURN(auto min_repeat_ms, Get<double>(file, *bt, "min_repeat_ms", "a number"));
    REMEX_ASSIGN_OR_RETURN(sb.median_ms_max, Get<double>(file, *bt, "median_ms_max", "a number"));
    REMEX_ASSIGN_OR_RETURN(auto baseline, Get<std::string>(file, *bt, "baseline", "a string"));
    REMEX_ASSIGN_OR_RETURN(sb.max_regression, Get<double>(file, *bt, "max_regression", "a number"));
    if (repeat) sb.repeat = *repeat;
    if (number) sb.number = *number;
    if (warmup) sb.warmup = *warmup;
    if (min_repeat_ms) sb.min_repeat_ms = *min_repeat_ms;
    if (baseline) sb.baseline = Resolve(base, *baseline);
    if (sb.repeat < 1 || sb.repeat > 100000 || sb.number < 0 || sb.number > 1000000 || sb.warmup < 0 ||
        sb.warmup > 100000 || !(sb.min_repeat_ms >= 0 && sb.min_repeat_ms <= 60000)) {
      return InvalidArgument(Where(file, *b) + ": case '" + c.name + "': repeat 1-100000, number 0-1000000, warmup "
                             ">= 0, min_repeat_ms 0-60000");
    }
    if (sb.max_regression.has_value() != !sb.baseline.empty()) {
      return InvalidArgument(Where(file, *b) + ": case '" + c.name + "': baseline and max_regression go together");
    }
    c.bench = sb;
  }
  return c;
}

// The median of a baseline: `remex bench --json` ({"stats": {"median_ms": ...}}) or a
// suite's --json (the case of that name).
StatusOr<double> BaselineMedian(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  if (!in) return NotFound("no baseline file '" + path + "'");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("baseline '" + path + "' is not JSON");
  if (j.contains("cases") && j["cases"].is_array()) {
    for (const auto& c : j["cases"]) {
      if (c.value("name", "") == name && c.contains("median_ms") && c["median_ms"].is_number()) {
        return c["median_ms"].get<double>();
      }
    }
    return NotFound("baseline '" + path + "' has no case '" + name + "' with a median");
  }
  if (j.contains("stats") && j["stats"].contains("median_ms") && j["stats"]["median_ms"].is_number()) {
    return j["stats"]["median_ms"].get<double>();
  }
  return InvalidArgument("baseline '" + path + "' holds no median (a remex bench --json or remex suite --json report)");
}

CaseResult RunCase(const SuiteCase& c, const SuiteOptions& options, const fs::path& scratch) {
  CaseResult r;
  r.name = c.name;
  r.model = c.model;
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](std::string outcome, std::string message) {
    r.outcome = std::move(outcome);
    r.message = std::move(message);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  auto error = [&](const Status& st) { return finish("error", st.ToString()); };
  ModelRequest request;
  request.model = c.model;
  CompileSpecs specs;
  specs.shapes = c.shapes;
  auto compile = ParseCompileSpecs(specs);
  if (!compile.ok()) return error(compile.status());
  request.compile = *compile;
  auto inputs = ParseInputSpecs(c.inputs);
  if (!inputs.ok()) return error(inputs.status());
  request.input_files = *inputs;
  request.seed = c.seed;
  request.server = options.server;
  std::string reference = c.reference;
  if (reference == "cpu") {
    // The CPU device's outputs (and the inputs it ran on) as the reference.
    ModelRequest cpu = request;
    cpu.server = ServerOptions{};
    cpu.server.compression = options.server.compression;
    auto prepared = PrepareModel(cpu);
    if (!prepared.ok()) return error(prepared.status().WithContext("the CPU reference"));
    RunOptions run;
    run.output_dir = (scratch / "cpu").string();
    run.save_inputs = true;
    auto ran = RunModel(cpu, *prepared, run);
    if (!ran.ok()) return error(ran.status().WithContext("the CPU reference"));
    reference = run.output_dir;
  }
  if (!reference.empty()) request.default_input_dir = reference + "/inputs";
  auto prepared = PrepareModel(request);
  if (!prepared.ok()) return error(prepared.status());
  r.device = prepared->connection.server + ", " + prepared->connection.device;
  std::vector<std::string> failures;
  if (!reference.empty()) {
    CheckOptions check{reference, c.rtol, c.atol, true};
    if (Status st = CheckCheckOptions(check); !st.ok()) return error(st);
    auto report = CheckModel(request, *prepared, check);
    if (!report.ok()) return error(report.status());
    r.check_report = ToJson(*report);
    for (const CheckOutput& o : report->outputs) {
      r.max_abs_error = std::max(r.max_abs_error, o.stats.max_abs_error);
      if (o.verdict != "match") failures.push_back("output '" + o.name + "': " + o.verdict + ": " + o.reason);
    }
  } else if (!c.bench) {
    RunOptions run;
    run.fetch.all = false;
    auto ran = RunModel(request, *prepared, run);
    if (!ran.ok()) return error(ran.status());
  }
  if (c.bench) {
    if (!reference.empty()) {
      // The check released its module and inputs: load them again on the same session
      // (the same device, under the same lease).
      prepared = PrepareModelOn(request, std::move(prepared->connection));
      if (!prepared.ok()) return error(prepared.status());
    }
    BenchOptions bench;
    bench.timing.repeat = static_cast<uint32_t>(c.bench->repeat);
    bench.timing.number = static_cast<uint32_t>(c.bench->number);
    bench.timing.warmup = static_cast<uint32_t>(c.bench->warmup);
    bench.timing.min_repeat_ms = static_cast<uint32_t>(c.bench->min_repeat_ms);
    if (bench.timing.number == 0) {
      bench.timing.number = 1;
      if (bench.timing.min_repeat_ms == 0) bench.timing.min_repeat_ms = 1;
    }
    // The case's samples as given: a suite case sets its own repeat and is not extended.
    // TODO(bench): suite keys for min_duration_s / min_samples / stability.
    bench.min_duration_s = 0;
    bench.min_samples = 0;
    bench.max_trials = 1;
    if (Status st = CheckBenchOptions(bench); !st.ok()) return error(st);
    auto report = BenchModel(request, *prepared, bench);
    if (!report.ok()) return error(report.status());
    r.bench_report = ToJson(*report);
    r.median_ms = report->stats.median;
    if (const auto* p99 = report->Percentile(99); p99 && p99->bounded) r.p99_ms = p99->value;
    if (c.bench->median_ms_max && *r.median_ms > *c.bench->median_ms_max) {
      failures.push_back("median " + std::to_string(*r.median_ms) + " ms is above the limit of " +
                         std::to_string(*c.bench->median_ms_max) + " ms");
    }
    if (!c.bench->baseline.empty()) {
      auto base = BaselineMedian(c.bench->baseline, c.name);
      if (!base.ok()) return error(base.status());
      r.baseline_median_ms = *base;
      const double limit = *base * (1 + *c.bench->max_regression);
      if (*r.median_ms > limit) {
        failures.push_back("median " + std::to_string(*r.median_ms) + " ms regressed more than " +
                           std::to_string(*c.bench->max_regression * 100) + " % over the baseline's " +
                           std::to_string(*base) + " ms");
      }
    }
  }
  // (Run, check and bench each released the module, VM and inputs they used.)
  std::string message;
  for (const std::string& f : failures) message += (message.empty() ? "" : "; ") + f;
  return finish(failures.empty() ? "passed" : "failed", message);
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 admits no control characters but tab, newline and carriage return.
        if (c < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += "?";
        } else {
          out += ch;
        }
    }
  }
  return out;
}

}  // namespace

StatusOr<Suite> LoadSuite(const std::string& path) {
  if (!fs::exists(path)) return NotFound("no suite file '" + path + "'");
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  REMEX_RETURN_IF_ERROR(OnlyKeys(path, root, {"name", "case"}, "the suite"));
  Suite suite;
  suite.file = path;
  REMEX_ASSIGN_OR_RETURN(auto name, Get<std::string>(path, root, "name", "a string"));
  suite.name = name ? *name : fs::path(path).stem().string();
  const toml::array* cases = root["case"].as_array();
  if (!cases || cases->empty()) return InvalidArgument(path + ": no [[case]]");
  const fs::path base = fs::path(path).parent_path();
  std::set<std::string> names;
  for (const toml::node& node : *cases) {
    const toml::table* t = node.as_table();
    if (!t) return InvalidArgument(Where(path, node) + ": 'case' must be an array of tables ([[case]])");
    REMEX_ASSIGN_OR_RETURN(SuiteCase c, ReadCase(path, base, *t));
    if (!names.insert(c.name).second) return InvalidArgument(Where(path, node) + ": case '" + c.name + "' named twice");
    suite.cases.push_back(std::move(c));
  }
  return suite;
}

SuiteReport RunSuite(const Suite& suite, const SuiteOptions& options) {
  SuiteReport report;
  report.name = suite.name;
  report.cases.resize(suite.cases.size());
  const auto start = std::chrono::steady_clock::now();
  const fs::path scratch = fs::temp_directory_path() / ("remex-suite-" + std::to_string(::getpid()));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < suite.cases.size(); i = next++) {
      report.cases[i] = RunCase(suite.cases[i], options, scratch / std::to_string(i));
    }
  };
  std::vector<std::thread> threads;
  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(suite.cases.size())));
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const CaseResult& c : report.cases) {
    (c.outcome == "passed" ? report.passed : c.outcome == "failed" ? report.failed : report.errors)++;
  }
  return report;
}

std::string JUnitXml(const SuiteReport& report) {
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"" << XmlEscape(report.name) << "\" tests=\"" << report.cases.size() << "\" failures=\""
    << report.failed << "\" errors=\"" << report.errors << "\" time=\"" << report.seconds << "\">\n";
  x << "  <testsuite name=\"" << XmlEscape(report.name) << "\" tests=\"" << report.cases.size() << "\" failures=\""
    << report.failed << "\" errors=\"" << report.errors << "\" skipped=\"0\" time=\"" << report.seconds << "\">\n";
  for (const CaseResult& c : report.cases) {
    x << "    <testcase classname=\"" << XmlEscape(report.name) << "\" name=\"" << XmlEscape(c.name) << "\" time=\""
      << c.seconds << "\">\n";
    if (c.outcome == "failed") {
      x << "      <failure message=\"" << XmlEscape(c.message) << "\" type=\"mismatch\">" << XmlEscape(c.message)
        << "</failure>\n";
    } else if (c.outcome == "error") {
      x << "      <error message=\"" << XmlEscape(c.message) << "\" type=\"error\">" << XmlEscape(c.message)
        << "</error>\n";
    }
    std::ostringstream out;
    out << "device: " << c.device << "\nmax abs error: " << c.max_abs_error;
    if (c.median_ms) out << "\nmedian: " << *c.median_ms << " ms";
    if (c.p99_ms) out << "\np99: " << *c.p99_ms << " ms";
    if (c.baseline_median_ms) out << "\nbaseline median: " << *c.baseline_median_ms << " ms";
    x << "      <system-out>" << XmlEscape(out.str()) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

nlohmann::json ToJson(const SuiteReport& report) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& c : report.cases) {
    nlohmann::json j = {{"name", c.name},       {"outcome", c.outcome},       {"message", c.message},
                        {"device", c.device},   {"seconds", c.seconds},       {"max_abs_error", c.max_abs_error}};
    j["median_ms"] = c.median_ms ? nlohmann::json(*c.median_ms) : nlohmann::json(nullptr);
    j["p99_ms"] = c.p99_ms ? nlohmann::json(*c.p99_ms) : nlohmann::json(nullptr);
    j["baseline_median_ms"] = c.baseline_median_ms ? nlohmann::json(*c.baseline_median_ms) : nlohmann::json(nullptr);
    cases.push_back(std::move(j));
  }
  return {{"suite", report.name}, {"passed", report.passed}, {"failed", report.failed}, {"errors", report.errors},
          {"seconds", report.seconds}, {"cases", cases}};
}

}  // namespace remex::tooling
