#include "host_client/tooling/variants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "host_client/tooling/regression.h"
#include "host_client/tooling/report_json.h"
#include "host_client/tooling/text.h"

namespace remex::tooling {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;


Status CheckPositive(std::span<const double> samples, const std::string& what) {
  if (samples.empty()) return InvalidArgument(what + " has no samples");
  for (double s : samples) {
    if (!(s > 0) || !std::isfinite(s)) {
      return InvalidArgument(what + " has a sample of " + std::to_string(s) +
                             " ms (samples must be finite and > 0)");
    }
  }
  return OkStatus();
}

json NumberOrNull(bool known, double value) { return known ? json(value) : json(nullptr); }

// One row of the table as JSON (ToJson of both reports).
json SummaryJson(const VariantSummary& v) {
  json j = {{"label", v.label},
            {"samples", v.samples_ms.size()},
            {"mean_ms", v.stats.mean},
            {"median_ms", v.stats.median},
            {"median_low_ms", NumberOrNull(v.median.bounded, v.median.lower)},
            {"median_high_ms", NumberOrNull(v.median.bounded, v.median.upper)},
            {"min_ms", v.stats.min},
            {"max_ms", v.stats.max}};
  const bool vs = v.vs_first.has_value();
  j["ratio"] = NumberOrNull(vs, vs ? v.vs_first->ratio : 0);
  j["ratio_low"] = NumberOrNull(vs, vs ? v.vs_first->ratio_low : 0);
  j["ratio_high"] = NumberOrNull(vs, vs ? v.vs_first->ratio_high : 0);
  j["p_value"] = NumberOrNull(vs, vs ? v.vs_first->p_value : 0);
  j["beyond_noise"] = vs ? json(v.vs_first->beyond_noise) : json(nullptr);
  return j;
}

json DiffRowsJson(const std::vector<ProfileDiffRow>& rows) {
  json a = json::array();
  for (const auto& r : rows) {
    a.push_back({{"name", r.name},
                 {"kind", r.kind},
                 {"a_ms", r.a_ms ? json(*r.a_ms) : json(nullptr)},
                 {"b_ms", r.b_ms ? json(*r.b_ms) : json(nullptr)},
                 {"delta_ms", r.delta_ms},
                 {"ratio", r.a_ms && r.b_ms && *r.a_ms > 0 ? json(*r.b_ms / *r.a_ms) : json(nullptr)}});
  }
  return a;
}

json ProfileDiffJson(const ProfileDiff& d) {
  json j = {{"ops", DiffRowsJson(d.ops)}};
  if (d.has_nodes) j["nodes"] = DiffRowsJson(d.nodes);
  return j;
}

// The table of medians and ratios.
std::string SummaryText(const std::vector<VariantSummary>& rows, double confidence) {
  std::vector<std::vector<std::string>> cells;
  const std::string pct = Format("%g %%", confidence * 100);
  cells.push_back({"variant", "samples", "median ms", pct + " interval", "ratio", pct + " interval", "p",
                   "beyond noise"});
  for (const auto& v : rows) {
    std::vector<std::string> row = {v.label, std::to_string(v.samples_ms.size()),
                                    Format("%.4f", v.stats.median),
                                    v.median.bounded ? Format("[%.4f, %.4f]", v.median.lower, v.median.upper)
                                                     : std::string("[not enough samples]")};
    if (!v.vs_first) {
      row.push_back("1");
    } else {
      const SampleComparison& c = *v.vs_first;
      row.push_back(Format("%.3f", c.ratio));
      row.push_back(Format("[%.3f, %.3f]", c.ratio_low, c.ratio_high));
      row.push_back(c.p_value < 1e-4 ? std::string("<0.0001") : Format("%.4f", c.p_value));
      row.push_back(!c.beyond_noise ? std::string("no")
                    : c.ratio > 1   ? std::string("yes, slower")
                                    : std::string("yes, faster"));
    }
    cells.push_back(std::move(row));
  }
  return FormatTable(cells, "  ", 2, 1);
}

std::string DiffRowsText(const std::vector<ProfileDiffRow>& rows, size_t top, const std::string& what,
                         const std::string& a, const std::string& b) {
  if (rows.empty() || top == 0) return "";
  const size_t shown = std::min(top, rows.size());
  std::string text =
      Format("largest differences per %s: %zu of %zu, ms per invoke (", what.c_str(), shown, rows.size()) +
      b + " - " + a + ")\n";
  std::vector<std::vector<std::string>> cells;
  cells.push_back({what, what == "node" ? "op" : "kind", a, b, "delta", "ratio"});
  auto ms = [](const std::optional<double>& v) { return v ? Format("%.4f", *v) : std::string("-"); };
  for (size_t i = 0; i < shown; ++i) {
    const ProfileDiffRow& r = rows[i];
    cells.push_back({r.name.empty() ? "-" : r.name, r.kind, ms(r.a_ms), ms(r.b_ms),
                     Format("%+.4f", r.delta_ms),
                     r.a_ms && r.b_ms && *r.a_ms > 0 ? Format("%.3f", *r.b_ms / *r.a_ms) : std::string("-")});
  }
  // Name and kind left, the numbers right.
  return text + FormatTable(cells, "  ", 2, 2);
}

std::string ProfileDiffText(const ProfileDiff& d, size_t top, const std::string& a, const std::string& b) {
  std::string text = DiffRowsText(d.ops, top, "op", a, b);
  if (d.has_nodes) text += DiffRowsText(d.nodes, top, "node", a, b);
  return text;
}

// The rows of one profile by key: ops by "kind\tname" (total_ms), nodes by name
// (median_ms), with their kind (or op).
struct ProfileRows {
  std::map<std::string, std::pair<std::string, double>> ops, nodes;
  bool has_nodes = false;
};

ProfileRows RowsOf(const json& profile) {
  ProfileRows out;
  if (!profile.is_object()) return out;
  auto number = [](const json& row, const char* key) {
    auto it = row.find(key);
    return it != row.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  auto text = [](const json& row, const char* key) {
    auto it = row.find(key);
    return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto rows = profile.find("rows");
  if (rows != profile.end() && rows->is_array()) {
    for (const json& row : *rows) {
      if (!row.is_object()) continue;
      const std::string kind = text(row, "kind"), name = text(row, "name");
      out.ops[kind + "\t" + name] = {kind, number(row, "total_ms")};
    }
  }
  auto nodes = profile.find("nodes");
  if (nodes != profile.end() && nodes->is_array()) {
    out.has_nodes = true;
    for (const json& node : *nodes) {
      if (!node.is_object()) continue;
      // A name repeated (unnamed nodes): their times add up.
      auto& slot = out.nodes[text(node, "name")];
      slot.first = text(node, "op");
      slot.second += number(node, "median_ms");
    }
  }
  return out;
}

std::vector<ProfileDiffRow> DiffRows(const std::map<std::string, std::pair<std::string, double>>& a,
                                     const std::map<std::string, std::pair<std::string, double>>& b,
                                     bool ops) {
  std::vector<ProfileDiffRow> rows;
  auto name_of = [&](const std::string& key) { return ops ? key.substr(key.find('\t') + 1) : key; };
  for (const auto& [key, value] : a) {
    ProfileDiffRow r{name_of(key), value.first, value.second, std::nullopt, 0};
    auto it = b.find(key);
    if (it != b.end()) r.b_ms = it->second.second;
    r.delta_ms = r.b_ms.value_or(0) - *r.a_ms;
    rows.push_back(std::move(r));
  }
  for (const auto& [key, value] : b) {
    if (a.count(key)) continue;
    rows.push_back({name_of(key), value.first, std::nullopt, value.second, value.second});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileDiffRow& x, const ProfileDiffRow& y) {
    return std::fabs(x.delta_ms) > std::fabs(y.delta_ms);
  });
  return rows;
}

// The samples of one benchmark reply, checked: the wire is not trusted.
Status CheckReply(const client::BenchmarkResult& result) {
  if (result.samples_seconds.size() != 1) {
    return DataLoss("benchmark: the server returned " + std::to_string(result.samples_seconds.size()) +
                    " samples for repeat 1");
  }
  if (result.number < 1) return DataLoss("benchmark: the server reported 0 calls per sample");
  const double s = result.samples_seconds[0];
  if (!(s >= 0) || !std::isfinite(s))
    return DataLoss("benchmark: the server returned a sample of " + std::to_string(s) + " s");
  return OkStatus();
}

}  // namespace

StatusOr<SampleComparison> CompareSamples(std::span<const double> base, std::span<const double> x,
                                          double confidence) {
  if (!(confidence > 0 && confidence < 1)) return InvalidArgument("the confidence must be in (0, 1)");
  REMEX_RETURN_IF_ERROR(CheckPositive(base, "the first"));
  REMEX_RETURN_IF_ERROR(CheckPositive(x, "the second"));
  std::vector<double> lx, ly;
  for (double s : base) lx.push_back(std::log(s));
  for (double s : x) ly.push_back(std::log(s));
  const regression::ShiftEstimate hl = regression::HodgesLehmann(lx, ly, confidence);
  const regression::MannWhitney mw = regression::MannWhitneyU(lx, ly);
  SampleComparison c;
  c.ratio = std::exp(hl.estimate);
  c.ratio_low = std::exp(hl.low);
  c.ratio_high = std::exp(hl.high);
  c.p_value = mw.p_value;
  c.beyond_noise = mw.p_value < 1 - confidence && (hl.low > 0 || hl.high < 0);
  return c;
}

StatusOr<std::vector<VariantSummary>> SummarizeVariants(const std::vector<std::string>& labels,
                                                        const std::vector<std::vector<double>>& samples_ms,
                                                        double confidence) {
  if (labels.size() != samples_ms.size() || labels.size() < 2) {
    return InvalidArgument("a comparison needs two or more rows with their samples");
  }
  std::vector<VariantSummary> rows;
  for (size_t i = 0; i < labels.size(); ++i) {
    VariantSummary v;
    v.label = labels[i];
    v.samples_ms = samples_ms[i];
    REMEX_RETURN_IF_ERROR(CheckPositive(v.samples_ms, "'" + v.label + "'"));
    v.stats = bench::Summarize(v.samples_ms);
    std::vector<double> sorted = v.samples_ms;
    std::sort(sorted.begin(), sorted.end());
    v.median = bench::EstimatePercentile(sorted, 50, confidence);
    if (i > 0) {
      auto c = CompareSamples(samples_ms[0], v.samples_ms, confidence);
      if (!c.ok()) return c.status().WithContext("'" + v.label + "' against '" + labels[0] + "'");
      v.vs_first = *c;
    }
    rows.push_back(std::move(v));
  }
  return rows;
}

ProfileDiff DiffProfiles(const json& a, const json& b) {
  const ProfileRows ra = RowsOf(a), rb = RowsOf(b);
  ProfileDiff d;
  d.ops = DiffRows(ra.ops, rb.ops, /*ops=*/true);
  d.has_nodes = ra.has_nodes && rb.has_nodes;
  if (d.has_nodes) d.nodes = DiffRows(ra.nodes, rb.nodes, /*ops=*/false);
  return d;
}

StatusOr<VariantsReport> BenchVariants(const std::vector<VariantRequest>& variants,
                                       const BenchOptions& options, const ProgressFn& progress) {
  Connection connection;
  return BenchVariantsOn(variants, options, connection, progress);
}

namespace {

StatusOr<VariantsReport> BenchVariantsOnImpl(const std::vector<VariantRequest>& variants,
                                             const BenchOptions& options, Connection& connection,
                                             const ProgressFn& progress) {
  if (variants.size() < 2 || variants.size() > kMaxVariants) {
    return InvalidArgument("--variant: " + std::to_string(variants.size()) +
                           " variants (the model as given "
                           "included); compare 2 to " +
                           std::to_string(kMaxVariants));
  }
  if (options.load) return InvalidArgument("--variant and --scenario: variants run the time evaluator only");
  if (options.trace) return InvalidArgument("--variant and --trace: trace one variant at a time");
  REMEX_RETURN_IF_ERROR(CheckBenchOptions(options));
  auto say = [&](const std::string& step) {
    if (progress) progress(step);
  };

  // Every variant on one connection (the given one, else the first's), handed from one
  // preparation to the next and kept here.
  std::vector<PreparedModel> prepared;
  for (size_t k = 0; k < variants.size(); ++k) {
    auto p = PrepareModelOn(variants[k].request, std::move(connection), progress);
    if (!p.ok()) return p.status().WithContext("variant '" + variants[k].label + "'");
    connection = std::move(p->connection);
    prepared.push_back(std::move(p).value());
  }
  client::Session& session = *connection.session;

  VariantsReport r;
  r.options = options;
  const size_t n = variants.size();
  std::vector<client::BenchmarkOptions> timing(n, options.timing);
  for (auto& t : timing) t.repeat = 1;
  std::vector<std::vector<double>> samples(n);
  r.variants.resize(n);
  const auto t0 = Clock::now();
  for (;;) {
    if (r.rounds % 10 == 0) {
      say("benchmarking " + std::to_string(n) + " variants, round " + std::to_string(r.rounds + 1));
    }
    for (size_t v = 0; v < n; ++v) {
      auto result = session.Benchmark(prepared[v].vm, prepared[v].main().name, timing[v]);
      if (!result.ok()) {
        say("");
        return result.status().WithContext("benchmark of variant '" + variants[v].label + "'");
      }
      REMEX_RETURN_IF_ERROR(CheckReply(*result).WithContext("variant '" + variants[v].label + "'"));
      VariantsReport::Variant& out = r.variants[v];
      if (samples[v].empty()) {
        // The first request warmed the VM and settled the calls per sample.
        out.number = result->number;
        timing[v].warmup = 0;
        timing[v].number = result->number;
        timing[v].min_repeat_ms = 0;
      }
      const double s = result->samples_seconds[0];
      // A sample of 0 (a clock too coarse for one call) counts as one nanosecond per call.
      samples[v].push_back(std::max(s * 1e3, 1e-6));
      out.duration_s += s * result->number;
      r.order.push_back(static_cast<uint32_t>(v));
    }
    ++r.rounds;
    r.complete = true;
    for (size_t v = 0; v < n; ++v) {
      r.complete = r.complete && samples[v].size() >= options.min_samples &&
                   r.variants[v].duration_s >= options.min_duration_s;
    }
    if (r.complete || r.rounds >= kMaxVariantRounds) break;
  }
  r.bench_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  say("");

  std::vector<std::string> labels;
  for (const auto& v : variants) labels.push_back(v.label);
  REMEX_ASSIGN_OR_RETURN(r.summary, SummarizeVariants(labels, samples, options.confidence));
  for (size_t v = 0; v < n; ++v) {
    VariantsReport::Variant& out = r.variants[v];
    out.label = variants[v].label;
    out.function = prepared[v].main().name;
    if (options.profile) {
      say("profiling variant '" + out.label + "'");
      auto profile = ProfileVm(session, prepared[v].vm, out.function, options.profile_runs, /*trace=*/false);
      say("");
      if (!profile.ok()) return profile.status().WithContext("variant '" + out.label + "'");
      out.profile = std::move(profile).value();
    }
  }
  if (options.profile) {
    const json first = ToJson(*r.variants[0].profile);
    for (size_t v = 1; v < n; ++v)
      r.variants[v].profile_diff = DiffProfiles(first, ToJson(*r.variants[v].profile));
  }
  // Freed in one request each; each session report then sees the same connection.
  for (size_t v = 0; v < n; ++v) {
    PreparedModel& p = prepared[v];
    p.connection = std::move(connection);
    Status freed = p.Release();
    r.variants[v].session = DescribeSession(variants[v].request, p);
    connection = std::move(p.connection);
    REMEX_RETURN_IF_ERROR(freed.WithContext("variant '" + variants[v].label + "'"));
  }
  return r;
}

}  // namespace

StatusOr<VariantsReport> BenchVariantsOn(const std::vector<VariantRequest>& variants, const BenchOptions& options,
                                         Connection& connection, const ProgressFn& progress) {
  auto report = BenchVariantsOnImpl(variants, options, connection, progress);
  if (!report.ok()) connection = Connection();
  return report;
}

json ToJson(const VariantsReport& r) {
  json j = {{"schema", kVariantsSchema}, {"schema_version", kVariantsSchemaVersion}};
  const SessionReport& first = r.variants.front().session;
  j["model"] = first.model;
  j["server"] = first.server;
  j["device"] = first.device;
  j["confidence"] = r.options.confidence;
  j["min_samples"] = r.options.min_samples;
  j["min_duration_s"] = r.options.min_duration_s;
  j["rounds"] = r.rounds;
  j["complete"] = r.complete;
  j["order"] = r.order;
  json variants = json::array();
  for (size_t v = 0; v < r.variants.size(); ++v) {
    const auto& in = r.variants[v];
    json e = SummaryJson(r.summary[v]);
    const json session = SessionJson(in.session);
    e["function"] = in.function;
    e["number"] = in.number;
    e["samples_ms"] = r.summary[v].samples_ms;
    e["duration_s"] = in.duration_s;
    e["module_cache"] = session.value("module_cache", json(nullptr));
    e["executable_bytes"] = in.session.executable_bytes;
    e["compile_ms"] = in.session.compile_ms;
    e["compile_options"] = in.session.environment.compile_options
                               ? session.at("environment").at("executable").at("compile_options")
                               : json(nullptr);
    if (in.profile) e["profile"] = ToJson(*in.profile);
    if (in.profile_diff) e["profile_diff"] = ProfileDiffJson(*in.profile_diff);
    variants.push_back(std::move(e));
  }
  j["variants"] = std::move(variants);
  const json session = SessionJson(first);
  j["environment"] = session.value("environment", json(nullptr));
  j["warnings"] = session.value("warnings", json::array());
  j["times_ms"] = {{"benchmark", r.bench_ms}};
  return j;
}

std::string VariantsText(const VariantsReport& r, size_t top) {
  std::string text = "bench   " + std::to_string(r.variants.size()) + " variants of " +
                     r.variants.front().session.model + ", interleaved: " + std::to_string(r.rounds) +
                     " rounds of one sample each, ms per call";
  text += r.complete ? "\n"
                     : Format(" (stopped at %u rounds before reaching the minimum samples and duration)\n",
                              kMaxVariantRounds);
  text += SummaryText(r.summary, r.options.confidence);
  text +=
      "  (ratio: the Hodges-Lehmann shift of the log samples against the first row; beyond noise:\n"
      "   Mann-Whitney p below " +
      Format("%g", 1 - r.options.confidence) + " and an interval that excludes 1)\n";
  // The first variant's profile in full, the others' by their differences from it.
  const auto& first = r.variants.front();
  if (first.profile) text += "variant " + first.label + ": " + ProfileText(*first.profile, top);
  for (size_t v = 1; v < r.variants.size(); ++v) {
    const auto& in = r.variants[v];
    if (in.profile_diff) {
      text +=
          "variant " + in.label + ": " + Format("profile %.3f ms (median invoke)\n", in.profile->total_ms);
      text += ProfileDiffText(*in.profile_diff, top, first.label, in.label);
    }
  }
  return text;
}

StatusOr<DiffReport> DiffBenchReports(const json& a, const std::string& a_name, const json& b,
                                      const std::string& b_name, double confidence) {
  if (!(confidence > 0 && confidence < 1)) return InvalidArgument("--confidence must be in (0, 1)");
  auto samples_of = [](const json& report, const std::string& name) -> StatusOr<std::vector<double>> {
    if (!report.is_object())
      return InvalidArgument("'" + name + "' is no JSON object (remex bench --json writes one)");
    auto schema = report.find("schema");
    if (schema != report.end() && *schema != kBenchSchema) {
      return InvalidArgument("'" + name + "' is a " + schema->dump() + " report, not a " + kBenchSchema +
                             " one");
    }
    auto version = report.find("schema_version");
    if (version != report.end() &&
        !(version->is_number_integer() && version->get<int64_t>() <= kBenchSchemaVersion)) {
      return InvalidArgument("'" + name + "' has schema_version " + version->dump() + "; this remex reads " +
                             kBenchSchema + " up to version " + std::to_string(kBenchSchemaVersion));
    }
    auto benchmark = report.find("benchmark");
    if (benchmark == report.end() || !benchmark->is_object() || !benchmark->contains("samples_ms") ||
        !(*benchmark)["samples_ms"].is_array() || (*benchmark)["samples_ms"].empty()) {
      return InvalidArgument("'" + name +
                             "' has no time evaluator samples (benchmark.samples_ms; a load "
                             "scenario's report has none)");
    }
    std::vector<double> out;
    for (const json& s : (*benchmark)["samples_ms"]) {
      if (!s.is_number() || !(s.get<double>() > 0) || !std::isfinite(s.get<double>())) {
        return InvalidArgument("'" + name + "' has a sample that is not a positive number: " + s.dump());
      }
      out.push_back(s.get<double>());
    }
    return out;
  };
  REMEX_ASSIGN_OR_RETURN(std::vector<double> sa, samples_of(a, a_name));
  REMEX_ASSIGN_OR_RETURN(std::vector<double> sb, samples_of(b, b_name));
  DiffReport d;
  d.a = a_name;
  d.b = b_name;
  d.confidence = confidence;
  REMEX_ASSIGN_OR_RETURN(d.summary, SummarizeVariants({a_name, b_name}, {sa, sb}, confidence));
  auto pa = a.find("profile"), pb = b.find("profile");
  if (pa != a.end() && pb != b.end() && pa->is_object() && pb->is_object())
    d.profile = DiffProfiles(*pa, *pb);
  return d;
}

json ToJson(const DiffReport& d) {
  json j = {{"schema", kDiffSchema},
            {"schema_version", kDiffSchemaVersion},
            {"a", d.a},
            {"b", d.b},
            {"confidence", d.confidence}};
  json rows = json::array();
  bool beyond = false;
  for (const auto& v : d.summary) {
    rows.push_back(SummaryJson(v));
    beyond = beyond || (v.vs_first && v.vs_first->beyond_noise);
  }
  j["beyond_noise"] = beyond;
  j["variants"] = std::move(rows);
  if (d.profile) j["profile_diff"] = ProfileDiffJson(*d.profile);
  return j;
}

std::string DiffText(const DiffReport& d, size_t top) {
  std::string text = "diff    " + d.b + " against " + d.a + ", ms per call\n";
  text += SummaryText(d.summary, d.confidence);
  text +=
      "  (ratio: the Hodges-Lehmann shift of the log samples against the first row; beyond noise:\n"
      "   Mann-Whitney p below " +
      Format("%g", 1 - d.confidence) + " and an interval that excludes 1)\n";
  if (d.profile) text += ProfileDiffText(*d.profile, top, "a", "b");
  return text;
}

}  // namespace remex::tooling
