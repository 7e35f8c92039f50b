// The dashboard's routes, access and data (dashboard.h); the pages are dashboard_pages.cc.
#include "host_client/tooling/dashboard.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/content_hash.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/tooling/farm.h"
#include "host_client/tooling/history.h"
#include "rpc/auth.h"

namespace remex::tooling {
namespace {

using nlohmann::json;

constexpr size_t kMaxTargetBytes = 2048;
constexpr char kCookieName[] = "remex_dashboard";
constexpr double kMedianConfidence = 0.95;  // the band of the series chart
constexpr size_t kQuantilePoints = 201;     // of each run's latency distribution on the comparison
// Entries of the cache of each run's median interval (runs never change once recorded).
constexpr size_t kMedianCacheEntries = 100000;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A run id of a URL: a decimal in [1, kDashboardMaxRunId].
StatusOr<int64_t> ParseRunId(std::string_view text, const std::string& what) {
  int64_t value = 0;
  bool ok = AllDigits(text) && text.size() <= 16;
  if (ok) {
    for (char c : text) value = value * 10 + (c - '0');
    ok = value >= 1 && value <= kDashboardMaxRunId;
  }
  if (!ok) {
    return InvalidArgument(what + " must be a run id, a whole number from 1 to " +
                           std::to_string(kDashboardMaxRunId) + ", got '" + std::string(text.substr(0, 64)) +
                           (text.size() > 64 ? "...'" : "'"));
  }
  return value;
}

// %XX and '+' of a query's name or value decoded. INVALID_ARGUMENT for a bad escape.
StatusOr<std::string> DecodeQueryPart(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      if (i + 2 >= text.size()) return InvalidArgument("a bad %-escape in the query");
      const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("a bad %-escape in the query");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

// The query's parameters, each once, each one of `allowed`.
StatusOr<std::map<std::string, std::string>> ParseQuery(std::string_view query,
                                                        std::initializer_list<std::string_view> allowed) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    REMEX_ASSIGN_OR_RETURN(std::string name, DecodeQueryPart(pair.substr(0, eq)));
    REMEX_ASSIGN_OR_RETURN(
        std::string value,
        DecodeQueryPart(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)));
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string names;
      for (std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      return InvalidArgument("this page takes no query parameter '" + name.substr(0, 64) + "'" +
                             (names.empty() ? std::string() : " (it takes " + names + ")"));
    }
    if (!out.emplace(name, value).second)
      return InvalidArgument("the query parameter '" + name + "' is given twice");
  }
  return out;
}

// recorded_at (ISO 8601 UTC to the second) as Unix milliseconds; null when unparsable.
json UnixMillis(const std::string& iso) {
  const std::optional<int64_t> ms = UtcIso8601Millis(iso);
  return ms ? json(*ms) : json(nullptr);
}

// summary[key] when it is a number, else null.
json Number(const json& summary, const char* key) {
  if (!summary.is_object()) return nullptr;
  auto it = summary.find(key);
  return it != summary.end() && it->is_number() ? *it : json(nullptr);
}

json SeriesJson(const SeriesInfo& s) {
  json j = {{"series_key", s.series_key}, {"model_name", s.model_name},
            {"model_hash", s.model_hash}, {"compile_options", s.compile_options},
            {"scenario", s.scenario},     {"device_class", s.device_class}};
  if (s.runs > 0) {
    j["runs"] = s.runs;
    j["first_recorded_at"] = s.first_recorded_at;
    j["last_recorded_at"] = s.last_recorded_at;
  }
  return j;
}

json RunJson(const StoredRun& r) {
  json j = StoredRunJson(r);
  j["t_ms"] = UnixMillis(r.recorded_at);
  if (!r.summary.is_object()) j["summary"] = json::object();
  return j;
}


// The finding of one series, or an object naming why there is none.
json JudgeSeries(ResultsStore& store, const std::string& series_key, const regression::Options& options) {
  HistoryFilter f;
  f.series_key = series_key;
  auto findings = FindRegressions(store, f, options);
  if (!findings.ok()) return {{"state", "error"}, {"reason", findings.status().ToString()}};
  if (findings->empty()) return {{"state", "insufficient data"}, {"reason", "no runs"}};
  return FindingJson(findings->front().finding);
}

// The distribution of `samples` as (value, percentile) pairs at `points` evenly spaced
// percentiles (numpy's linear interpolation).
json QuantileCurve(std::vector<double> samples, size_t points) {
  json out = json::array();
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double v) { return !std::isfinite(v); }),
                samples.end());
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  for (size_t i = 0; i < points; ++i) {
    const double q = 100.0 * static_cast<double>(i) / static_cast<double>(points - 1);
    out.push_back({bench::Percentile(samples, q), q});
  }
  return out;
}

// The rows of a report's profile by "name\tkind".
std::map<std::string, const json*> ProfileRows(const json& report) {
  std::map<std::string, const json*> out;
  if (!report.is_object()) return out;
  auto profile = report.find("profile");
  if (profile == report.end() || !profile->is_object()) return out;
  auto rows = profile->find("rows");
  if (rows == profile->end() || !rows->is_array()) return out;
  for (const json& row : *rows) {
    if (!row.is_object()) continue;
    const std::string name = row.value("name", json("")).is_string() ? row.value("name", "") : "";
    const std::string kind =
        row.contains("kind") && row["kind"].is_string() ? row["kind"].get<std::string>() : "";
    out.emplace(name + "\t" + kind, &row);
  }
  return out;
}

double RowMs(const json* row) {
  if (!row) return 0;
  const json& v = Number(*row, "total_ms");
  return v.is_number() ? v.get<double>() : 0;
}

// Thins one array in place; `stride` per length, so that parallel arrays stay aligned.
bool ThinArray(json& a, size_t max_points) {
  if (a.size() <= max_points) return false;
  const bool numbers =
      std::all_of(a.begin(), a.end(), [](const json& v) { return v.is_number() || v.is_null(); });
  json out = json::array();
  if (numbers) {
    const size_t n = a.size();
    for (size_t i = 0; i < max_points; ++i) out.push_back(a[i * (n - 1) / (max_points - 1)]);
  } else {
    for (size_t i = 0; i < max_points; ++i) out.push_back(std::move(a[i]));
  }
  a = std::move(out);
  return true;
}

std::string HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kNotFound:
      return "404";
    case StatusCode::kInvalidArgument:
      return "400";
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kFailedPrecondition:
      return "503";
    default:
      return "500";
  }
}

// A `next` target of the login form: a path of this site, else "/".
std::string SafeNext(const std::string& next) {
  if (next.empty() || next.size() > kMaxTargetBytes || next[0] != '/' ||
      (next.size() > 1 && (next[1] == '/' || next[1] == '\\'))) {
    return "/";
  }
  for (char c : next) {
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) return "/";
  }
  return next;
}

std::string CookieValue(const std::string& header, const std::string& name) {
  std::string_view rest = header;
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    std::string_view part = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    const size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) return std::string(part.substr(eq + 1));
  }
  return "";
}

}  // namespace

StatusOr<DashboardRoute> ParseDashboardTarget(std::string_view target) {
  if (target.size() > kMaxTargetBytes) return NotFound("no page has so long an address");
  const size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (const size_t hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  DashboardRoute route;
  if (path.rfind("/api/", 0) == 0) {
    route.api = true;
    path.remove_prefix(4);  // "/api/x" -> "/x"
    if (path == "/overview")
      path = "/";
    else if (path == "/" || path == "/login" || path == "/favicon.ico")
      return NotFound("no such page");
  }
  auto no_query = [&]() -> Status { return ParseQuery(query, {}).status(); };
  if (path == "/") {
    route.page = DashboardRoute::Page::kOverview;
    REMEX_RETURN_IF_ERROR(no_query());
  } else if (path == "/farm") {
    route.page = DashboardRoute::Page::kFarm;
    REMEX_RETURN_IF_ERROR(no_query());
  } else if (path == "/login") {
    route.page = DashboardRoute::Page::kLogin;
    REMEX_RETURN_IF_ERROR(ParseQuery(query, {"next"}).status());
  } else if (path == "/favicon.ico") {
    route.page = DashboardRoute::Page::kFavicon;
  } else if (path.rfind("/series/", 0) == 0) {
    route.page = DashboardRoute::Page::kSeries;
    std::string_view key = path.substr(8);
    if (!IsContentHash(key)) {
      return InvalidArgument("a series key is 32 lower-case hex digits (remex history lists them), got '" +
                             std::string(key.substr(0, 64)) + (key.size() > 64 ? "...'" : "'"));
    }
    route.series_key = std::string(key);
    REMEX_ASSIGN_OR_RETURN(auto params, ParseQuery(query, {"limit"}));
    if (auto it = params.find("limit"); it != params.end()) {
      const std::string& v = it->second;
      size_t limit = 0;
      bool ok = AllDigits(v) && v.size() <= 5;
      if (ok) limit = std::stoul(v);
      if (!ok || limit < 1 || limit > kDashboardMaxRuns) {
        return InvalidArgument("limit must be a whole number from 1 to " + std::to_string(kDashboardMaxRuns) +
                               ", got '" + v.substr(0, 64) + "'");
      }
      route.limit = limit;
    }
  } else if (path.rfind("/run/", 0) == 0) {
    route.page = DashboardRoute::Page::kRun;
    REMEX_ASSIGN_OR_RETURN(route.run, ParseRunId(path.substr(5), "the run in /run/ID"));
    REMEX_RETURN_IF_ERROR(no_query());
  } else if (path == "/compare") {
    route.page = DashboardRoute::Page::kCompare;
    REMEX_ASSIGN_OR_RETURN(auto params, ParseQuery(query, {"a", "b"}));
    if (!params.count("a") || !params.count("b")) {
      return InvalidArgument("compare needs two runs: /compare?a=ID&b=ID");
    }
    REMEX_ASSIGN_OR_RETURN(route.run, ParseRunId(params["a"], "a"));
    REMEX_ASSIGN_OR_RETURN(route.other, ParseRunId(params["b"], "b"));
  } else {
    return NotFound("no such page");
  }
  return route;
}

bool ThinReport(json& report, size_t max_points) {
  if (max_points < 2) max_points = 2;
  bool thinned = false;
  if (report.is_array()) {
    thinned = ThinArray(report, max_points);
    for (json& e : report) thinned = ThinReport(e, max_points) || thinned;
  } else if (report.is_object()) {
    for (auto& [key, value] : report.items()) thinned = ThinReport(value, max_points) || thinned;
  }
  return thinned;
}

Dashboard::Dashboard(std::unique_ptr<ResultsStore> store, DashboardOptions options)
    : store_(std::move(store)), options_(std::move(options)) {
  if (!options_.token.empty()) {
    session_cookie_ = rpc::ToHex(rpc::AuthProof(options_.token, "dashboard", "session cookie", ""));
  }
}

bool Dashboard::Authorized(const WebRequest& request) const {
  if (options_.token.empty()) return true;
  if (rpc::BearerTokenMatches(request.authorization, options_.token)) return true;
  const std::string cookie = CookieValue(request.cookie, kCookieName);
  return !cookie.empty() && rpc::ProofsEqual(cookie, session_cookie_);
}

StatusOr<json> Dashboard::OverviewData() {
  REMEX_ASSIGN_OR_RETURN(std::vector<SeriesInfo> all, store_->ListSeries({}));
  json series = json::array();
  size_t total = 0, self_tests = 0;
  for (const SeriesInfo& s : all) {
    if (s.scenario == "self-test") {
      ++self_tests;
      continue;
    }
    if (++total > kDashboardMaxSeries) continue;
    json j = SeriesJson(s);
    HistoryFilter latest;
    latest.series_key = s.series_key;
    latest.limit = 1;
    REMEX_ASSIGN_OR_RETURN(std::vector<StoredRun> runs, store_->ListRuns(latest));
    if (!runs.empty()) {
      const StoredRun& r = runs.back();
      j["latest"] = {{"id", r.id},
                     {"recorded_at", r.recorded_at},
                     {"verdict", r.verdict},
                     {"median_ms", Number(r.summary, "median_ms")},
                     {"throughput_qps", Number(r.summary, "throughput_qps")}};
    }
    j["finding"] = JudgeSeries(*store_, s.series_key, options_.regression);
    series.push_back(std::move(j));
  }
  json farm = nullptr;
  if (!options_.farm_url.empty()) {
    auto status = FarmStatus(options_.farm_url, options_.farm_timeout);
    if (status.ok()) {
      json full = ToJson(*status);
      farm = {{"url", full["farm"]},
              {"pools", full["pools"]},
              {"devices", status->devices.size()},
              {"error", nullptr}};
    } else {
      farm = {{"url", options_.farm_url}, {"error", status.status().ToString()}};
    }
  }
  return json{{"schema", "remex.dashboard.overview"},
              {"schema_version", 1},
              {"results", RedactResultsUrl(options_.results_url)},
              {"series", series},
              {"series_total", total},
              {"series_limit", kDashboardMaxSeries},
              {"self_test_series", self_tests},
              {"farm", farm}};
}

StatusOr<json> Dashboard::FarmData() {
  json status = nullptr, error = nullptr;
  std::map<std::string, std::string> registered;  // "POOL/ID" -> state
  if (!options_.farm_url.empty()) {
    auto report = FarmStatus(options_.farm_url, options_.farm_timeout);
    if (report.ok()) {
      status = ToJson(*report);
      for (const farm::DeviceRecord& d : report->devices) {
        registered[d.pool + "/" + d.id] = std::string(farm::DeviceStateName(d.state));
      }
    } else {
      error = report.status().ToString();
    }
  }
  REMEX_ASSIGN_OR_RETURN(std::vector<SeriesInfo> all, store_->ListSeries({}));
  std::vector<const SeriesInfo*> tests;
  for (const SeriesInfo& s : all) {
    if (s.scenario == "self-test" && s.device_class.find('/') != std::string::npos) tests.push_back(&s);
  }
  std::sort(tests.begin(), tests.end(),
            [](const SeriesInfo* a, const SeriesInfo* b) { return a->device_class < b->device_class; });
  const size_t total = tests.size();
  if (tests.size() > kDashboardMaxSeries) tests.resize(kDashboardMaxSeries);
  json self_tests = json::array();
  for (const SeriesInfo* s : tests) {
    HistoryFilter f;
    f.series_key = s->series_key;
    f.limit = kDashboardDefaultRuns;
    REMEX_ASSIGN_OR_RETURN(std::vector<StoredRun> runs, store_->ListRuns(f));
    json points = json::array();
    for (const StoredRun& r : runs) {
      points.push_back({{"id", r.id},
                        {"recorded_at", r.recorded_at},
                        {"t_ms", UnixMillis(r.recorded_at)},
                        {"median_ms", Number(r.summary, "median_ms")},
                        {"p90_ms", Number(r.summary, "p90_ms")},
                        {"verdict", r.verdict},
                        {"error", r.error},
                        {"reason", r.tags.count("self-test.reason") ? json(r.tags.at("self-test.reason"))
                                                                    : json(nullptr)}});
    }
    const size_t slash = s->device_class.find('/');
    auto state = registered.find(s->device_class);
    self_tests.push_back({{"pool", s->device_class.substr(0, slash)},
                          {"device", s->device_class.substr(slash + 1)},
                          {"series_key", s->series_key},
                          {"state", state == registered.end() ? json(nullptr) : json(state->second)},
                          {"runs_total", s->runs},
                          {"points", points}});
  }
  return json{{"schema", "remex.dashboard.farm"},
              {"schema_version", 1},
              {"results", RedactResultsUrl(options_.results_url)},
              {"farm", options_.farm_url.empty() ? json(nullptr) : json(options_.farm_url)},
              {"error", error},
              {"status", status},
              {"self_tests", self_tests},
              {"self_tests_total", total},
              {"runs_limit", kDashboardDefaultRuns}};
}

StatusOr<json> Dashboard::SeriesData(const std::string& series_key, size_t limit) {
  HistoryFilter f;
  f.series_key = series_key;
  REMEX_ASSIGN_OR_RETURN(std::vector<SeriesInfo> found, store_->ListSeries(f));
  if (found.empty())
    return NotFound("no series " + series_key + " in " + RedactResultsUrl(options_.results_url));
  const SeriesInfo& s = found.front();
  f.limit = std::clamp<size_t>(limit, 1, kDashboardMaxRuns);
  REMEX_ASSIGN_OR_RETURN(std::vector<StoredRun> runs, store_->ListRuns(f));
  json finding = JudgeSeries(*store_, series_key, options_.regression);
  std::map<int64_t, std::string> roles;
  for (const char* role : {"baseline", "excluded", "candidate"}) {
    const json& ids = finding.value(std::string(role) + "_runs", json::array());
    for (const json& id : ids) {
      if (id.is_number_integer()) roles[id.get<int64_t>()] = role;
    }
  }
  auto& cache = median_cache_;
  json list = json::array();
  for (const StoredRun& r : runs) {
    json j = RunJson(r);
    j["median_ms"] = Number(r.summary, "median_ms");
    j["p90_ms"] = Number(r.summary, "p90_ms");
    j["p99_ms"] = Number(r.summary, "p99_ms");
    j["throughput_qps"] = Number(r.summary, "throughput_qps");
    j["ci_low_ms"] = nullptr;
    j["ci_high_ms"] = nullptr;
    if (r.sample_count > 0) {
      auto cached = cache.find(r.id);
      if (cached == cache.end()) {
        REMEX_ASSIGN_OR_RETURN(std::vector<double> samples, store_->Samples(r.id));
        samples.erase(
            std::remove_if(samples.begin(), samples.end(), [](double v) { return !std::isfinite(v); }),
            samples.end());
        std::sort(samples.begin(), samples.end());
        MedianInterval m;
        if (!samples.empty()) {
          bench::PercentileEstimate e = bench::EstimatePercentile(samples, 50, kMedianConfidence);
          m = {e.bounded, e.lower, e.upper};
        }
        if (cache.size() >= kMedianCacheEntries) cache.clear();
        cached = cache.emplace(r.id, m).first;
      }
      if (cached->second.bounded) {
        j["ci_low_ms"] = cached->second.low;
        j["ci_high_ms"] = cached->second.high;
      }
    }
    auto role = roles.find(r.id);
    j["role"] = role == roles.end() ? json(nullptr) : json(role->second);
    list.push_back(std::move(j));
  }
  return json{{"schema", "remex.dashboard.series"},
              {"schema_version", 1},
              {"results", RedactResultsUrl(options_.results_url)},
              {"series", SeriesJson(s)},
              {"finding", finding},
              {"runs", list},
              {"runs_total", s.runs},
              {"limit", f.limit},
              {"confidence", kMedianConfidence}};
}

StatusOr<json> Dashboard::RunData(int64_t id) {
  REMEX_ASSIGN_OR_RETURN(RunDetail d, store_->GetRun(id));
  REMEX_ASSIGN_OR_RETURN(json report, store_->Report(id));
  const bool thinned = ThinReport(report, kDashboardMaxPoints);
  return json{{"schema", "remex.dashboard.run"},
              {"schema_version", 1},
              {"results", RedactResultsUrl(options_.results_url)},
              {"run", RunJson(d.run)},
              {"series", SeriesJson(d.series)},
              {"executable_hash", d.executable_hash},
              {"device", d.device},
              {"report", report},
              {"thinned", thinned},
              {"max_points", kDashboardMaxPoints}};
}

StatusOr<json> Dashboard::CompareData(int64_t a, int64_t b) {
  REMEX_ASSIGN_OR_RETURN(RunDetail da, store_->GetRun(a));
  REMEX_ASSIGN_OR_RETURN(RunDetail db, store_->GetRun(b));
  REMEX_ASSIGN_OR_RETURN(json ra, store_->Report(a));
  REMEX_ASSIGN_OR_RETURN(json rb, store_->Report(b));
  std::vector<double> sa, sb;
  if (da.run.sample_count > 0) {
    REMEX_ASSIGN_OR_RETURN(sa, store_->Samples(a));
  }
  if (db.run.sample_count > 0) {
    REMEX_ASSIGN_OR_RETURN(sb, store_->Samples(b));
  }
  json summary = json::array();
  for (const char* key : {"median_ms", "mean_ms", "p90_ms", "p99_ms", "min_ms", "max_ms", "throughput_qps"}) {
    const json va = Number(da.run.summary, key), vb = Number(db.run.summary, key);
    if (va.is_null() && vb.is_null()) continue;
    json change = nullptr;
    if (va.is_number() && vb.is_number() && va.get<double>() != 0) {
      change = (vb.get<double>() / va.get<double>() - 1) * 100;
    }
    summary.push_back({{"name", key}, {"a", va}, {"b", vb}, {"change_pct", change}});
  }
  const auto rows_a = ProfileRows(ra), rows_b = ProfileRows(rb);
  std::set<std::string> keys;
  for (const auto& [k, row] : rows_a) keys.insert(k);
  for (const auto& [k, row] : rows_b) keys.insert(k);
  struct Op {
    std::string name, kind;
    const json *a, *b;
    double diff;
  };
  std::vector<Op> ops;
  for (const std::string& k : keys) {
    const size_t tab = k.find('\t');
    auto ia = rows_a.find(k);
    auto ib = rows_b.find(k);
    const json* a_row = ia == rows_a.end() ? nullptr : ia->second;
    const json* b_row = ib == rows_b.end() ? nullptr : ib->second;
    ops.push_back({k.substr(0, tab), k.substr(tab + 1), a_row, b_row, RowMs(b_row) - RowMs(a_row)});
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& x, const Op& y) { return std::fabs(x.diff) > std::fabs(y.diff); });
  json op_rows = json::array();
  for (size_t i = 0; i < ops.size() && i < kDashboardMaxOpRows; ++i) {
    const Op& o = ops[i];
    auto field = [](const json* row, const char* key) { return row ? Number(*row, key) : json(nullptr); };
    const double ma = RowMs(o.a);
    op_rows.push_back(
        {{"name", o.name},
         {"kind", o.kind},
         {"a_ms", field(o.a, "total_ms")},
         {"b_ms", field(o.b, "total_ms")},
         {"diff_ms", o.diff},
         {"change_pct", o.a && o.b && ma != 0 ? json((RowMs(o.b) / ma - 1) * 100) : json(nullptr)},
         {"a_calls", field(o.a, "calls")},
         {"b_calls", field(o.b, "calls")}});
  }
  auto side = [&](const RunDetail& d) {
    return json{{"run", RunJson(d.run)},
                {"series", SeriesJson(d.series)},
                {"device", d.device},
                {"executable_hash", d.executable_hash}};
  };
  return json{{"schema", "remex.dashboard.compare"},
              {"schema_version", 1},
              {"results", RedactResultsUrl(options_.results_url)},
              {"a", side(da)},
              {"b", side(db)},
              {"same_series", da.series.series_key == db.series.series_key},
              {"summary", summary},
              {"distributions",
               {{"a", QuantileCurve(std::move(sa), kQuantilePoints)},
                {"b", QuantileCurve(std::move(sb), kQuantilePoints)}}},
              {"profiles", {{"a", !rows_a.empty()}, {"b", !rows_b.empty()}}},
              {"ops", op_rows},
              {"ops_total", ops.size()},
              {"ops_limit", kDashboardMaxOpRows}};
}

WebResponse Dashboard::Handle(const WebRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  WebResponse response;
  auto answer = [&] {
    try {
      response = Answer(request);
    } catch (const std::exception& e) {
      response = {
          500,
          "text/html; charset=utf-8",
          ErrorPage(500, "Internal error", Internal(std::string("the page failed: ") + e.what()), options_),
          {}};
    }
  };
  answer();
  // The store's connection may have gone (a restarted database): once more on a new one.
  if (response.status >= 500 && options_.reopen) {
    auto fresh = options_.reopen();
    if (fresh.ok()) {
      store_ = std::move(fresh).value();
      answer();
    }
  }
  // Nothing from elsewhere, no framing, no sniffing, nothing kept.
  response.headers.emplace_back("Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("Cache-Control", "no-store");
  return response;
}

WebResponse Dashboard::Answer(const WebRequest& request) {
  auto route = ParseDashboardTarget(request.target);
  const bool api = request.target.rfind("/api/", 0) == 0;
  auto error = [&](const Status& status, const std::string& title) {
    const int http = std::stoi(HttpStatusFor(status.code()));
    if (api) {
      return WebResponse{
          http,
          "application/json",
          json{{"error",
                {{"code", std::string(StatusCodeName(status.code()))}, {"message", status.message()}}}}
                  .dump(-1, ' ', false, json::error_handler_t::replace) +
              "\n",
          {}};
    }
    return WebResponse{http, "text/html; charset=utf-8", ErrorPage(http, title, status, options_), {}};
  };
  const bool login = route.ok() && route->page == DashboardRoute::Page::kLogin;
  if (request.method == "POST") {
    if (!login) {
      WebResponse r = error(InvalidArgument("only the login form is posted; this dashboard is read-only"),
                            "Method not allowed");
      r.status = 405;
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
  } else if (request.method != "GET" && request.method != "HEAD") {
    WebResponse r =
        error(InvalidArgument("this dashboard is read-only: GET and HEAD only"), "Method not allowed");
    r.status = 405;
    r.headers.emplace_back("Allow", login ? "GET, HEAD, POST" : "GET, HEAD");
    return r;
  }
  if (route.ok() && route->page == DashboardRoute::Page::kFavicon) return {204, "image/x-icon", "", {}};
  if (login) {
    if (options_.token.empty()) return {303, "text/plain; charset=utf-8", "", {{"Location", "/"}}};
    std::map<std::string, std::string> form;
    std::string next = "/";
    if (request.method == "POST") {
      auto parsed = ParseQuery(request.body, {"token", "next"});
      if (parsed.ok()) form = *parsed;
      next = SafeNext(form["next"]);
      if (parsed.ok() && rpc::ProofsEqual(form["token"], options_.token)) {
        std::string cookie =
            std::string(kCookieName) + "=" + session_cookie_ + "; Path=/; HttpOnly; SameSite=Strict";
        if (request.tls) cookie += "; Secure";
        return {303, "text/plain; charset=utf-8", "", {{"Location", next}, {"Set-Cookie", cookie}}};
      }
      return {401,
              "text/html; charset=utf-8",
              LoginPage(next, "That is not the dashboard's token.", options_),
              {}};
    }
    if (const size_t question = request.target.find('?'); question != std::string::npos) {
      auto params = ParseQuery(std::string_view(request.target).substr(question + 1), {"next"});
      if (params.ok()) next = SafeNext((*params)["next"]);
    }
    return {200, "text/html; charset=utf-8", LoginPage(next, "", options_), {}};
  }
  if (!Authorized(request)) {
    if (api) {
      WebResponse r = error(
          PermissionDenied("this dashboard needs its token: send \"Authorization: Bearer TOKEN\""), "Log in");
      r.status = 401;
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"remex dashboard\"");
      return r;
    }
    return {401, "text/html; charset=utf-8", LoginPage(SafeNext(request.target), "", options_), {}};
  }
  if (!route.ok()) {
    return error(route.status(),
                 route.status().code() == StatusCode::kNotFound ? "Not found" : "Bad request");
  }
  StatusOr<json> data = Internal("no page");
  std::string (*page)(const json&, const DashboardOptions&) = nullptr;
  switch (route->page) {
    case DashboardRoute::Page::kOverview:
      data = OverviewData();
      page = OverviewPage;
      break;
    case DashboardRoute::Page::kFarm:
      data = FarmData();
      page = FarmPage;
      break;
    case DashboardRoute::Page::kSeries:
      data = SeriesData(route->series_key, route->limit);
      page = SeriesPage;
      break;
    case DashboardRoute::Page::kRun:
      data = RunData(route->run);
      page = RunPage;
      break;
    case DashboardRoute::Page::kCompare:
      data = CompareData(route->run, route->other);
      page = ComparePage;
      break;
    default:
      return error(NotFound("no such page"), "Not found");
  }
  if (!data.ok()) {
    return error(data.status(),
                 data.status().code() == StatusCode::kNotFound ? "Not found" : "The results store failed");
  }
  if (route->api) {
    return {200, "application/json", data->dump(-1, ' ', false, json::error_handler_t::replace) + "\n", {}};
  }
  return {200, "text/html; charset=utf-8", page(*data, options_), {}};
}

}  // namespace remex::tooling
