#include "host_client/tooling/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace remex::embedded {
// chart.min.js of Debian's libjs-chart.js, embedded by cmake/EmbedBytes.cmake (which
// refuses a file containing "</script").
extern const unsigned char kChartJs[];
extern const size_t kChartJsSize;
}  // namespace remex::embedded

namespace remex::tooling {
namespace {

using nlohmann::json;

constexpr size_t kProfileRows = 20;       // bars of the profile chart
constexpr size_t kProfileNodes = 10;      // rows of the slowest-nodes table
constexpr size_t kEnvironmentRows = 200;  // rows of the environment table, at most

std::string_view ChartJs() {
  return {reinterpret_cast<const char*>(embedded::kChartJs), embedded::kChartJsSize};
}

// j[key] when j is an object holding it, else null.
const json& Get(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

bool NonEmptyArray(const json& j) { return j.is_array() && !j.empty(); }

// A number for a person: integers whole, others with 4 significant digits.
std::string FormatNumber(const json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return j.dump();
  double v = j.get<double>();
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, std::fabs(v) >= 1e4 && std::fabs(v) < 1e15 ? "%.0f" : "%.4g", v);
  return buffer;
}

// Any value as one line of text (not escaped).
std::string Text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number()) return FormatNumber(j);
  if (j.is_null()) return "—";
  if (j.is_boolean()) return j.get<bool>() ? "yes" : "no";
  if (j.is_array()) {
    std::string out;
    for (const json& e : j) {
      if (!out.empty()) out += ", ";
      out += Text(e);
    }
    return out;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The last level's timeline when it has latencies, else null.
const json& LoadTimeline(const json& bench) {
  static const json kNull;
  const json& levels = Get(Get(bench, "load"), "levels");
  if (!NonEmptyArray(levels)) return kNull;
  const json& timeline = Get(levels.back(), "timeline");
  return NonEmptyArray(Get(timeline, "latency_ms")) ? timeline : kNull;
}

void AddRow(std::string& html, const std::string& label, const std::string& value_html) {
  html += "<tr><th>" + HtmlEscape(label) + "</th><td>" + value_html + "</td></tr>\n";
}

// Rows "a.b.c: value" of a nested object, at most kEnvironmentRows.
void Flatten(const json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& rows) {
  if (rows.size() >= kEnvironmentRows) return;
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      Flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), rows);
    }
  } else {
    rows.emplace_back(prefix, Text(j));
  }
}

std::string Summary(const json& bench) {
  const json& b = Get(bench, "benchmark");
  std::string out;
  for (const auto& [key, label] : {std::pair{"median_ms", "median"},
                                   {"p90_ms", "p90"},
                                   {"p99_ms", "p99"},
                                   std::pair{"mean_ms", "mean"}}) {
    const json& v = Get(b, key);
    if (!v.is_number()) continue;
    if (!out.empty()) out += ", ";
    out += std::string(label) + " " + FormatNumber(v) + " ms";
  }
  const json& verdict = Get(Get(b, "stability"), "verdict");
  if (verdict.is_string()) out += (out.empty() ? "" : "; ") + verdict.get<std::string>();
  return out;
}

std::string HeaderTable(const json& bench) {
  std::string html = "<table class=\"header\">\n";
  const json& load = Get(bench, "load");
  for (const auto& [key, label] : {std::pair{"model", "Model"}, {"device", "Device"}, {"server", "Server"}}) {
    if (!Get(bench, key).is_null()) AddRow(html, label, HtmlEscape(Text(Get(bench, key))));
  }
  const json& scenario = Get(load, "scenario");
  AddRow(html, "Scenario",
         scenario.is_null() ? "none: samples of one invocation at a time" : HtmlEscape(Text(scenario)));
  for (const char* key : {"target_qps", "samples_per_query", "seed"}) {
    if (!Get(load, key).is_null()) AddRow(html, key, HtmlEscape(Text(Get(load, key))));
  }
  const json& function = Get(Get(bench, "benchmark"), "function");
  if (!function.is_null()) AddRow(html, "Function", HtmlEscape(Text(function)));
  const json& command = Get(bench, "command");
  if (!command.is_null()) {
    std::string text;  // a string, or the arguments as a list
    for (const json& a : command.is_array() ? command : json::array({command}))
      text += (text.empty() ? "" : " ") + Text(a);
    AddRow(html, "Command", "<code>" + HtmlEscape(text) + "</code>");
  }
  if (!Get(bench, "date").is_null()) AddRow(html, "Date", HtmlEscape(Text(Get(bench, "date"))));
  AddRow(html, "Schema",
         HtmlEscape(Text(Get(bench, "schema")) + " version " + Text(Get(bench, "schema_version"))));
  if (std::string s = Summary(bench); !s.empty()) AddRow(html, "Result", HtmlEscape(s));
  // A run stopped before it was complete: its numbers cover only the samples (or load
  // levels) taken.
  const json& partial = Get(Get(bench, "partial"), "reason");
  if (!partial.is_null()) {
    AddRow(html, "Partial",
           HtmlEscape(Text(partial)) + ": the numbers cover only the samples or levels taken");
  }
  const json& environment = Get(bench, "environment");
  if (!environment.is_null()) {
    std::vector<std::pair<std::string, std::string>> rows;
    Flatten(environment, "", rows);
    std::string inner = "<table class=\"environment\">";
    for (const auto& [k, v] : rows)
      inner += "<tr><th>" + HtmlEscape(k) + "</th><td>" + HtmlEscape(v) + "</td></tr>";
    AddRow(html, "Environment", inner + "</table>");
  }
  const json& warnings = Get(bench, "warnings");
  if (!warnings.is_null()) {
    std::string inner = "<ul class=\"warnings\">";
    for (const json& w : warnings.is_array() ? warnings : json::array({warnings})) {
      const json& message = Get(w, "message");
      inner += "<li>" + HtmlEscape(Text(message.is_null() ? w : message)) + "</li>";
    }
    AddRow(html, "Warnings", inner + "</ul>");
  }
  return html + "</table>\n";
}

// "value [lower, upper]" of percentile `q` of a level: the interval where the level's
// percentiles bound it.
std::string PercentileText(const json& level, int q) {
  std::string text = Text(Get(Get(level, "latency_ms"), ("p" + std::to_string(q)).c_str()));
  const json& percentiles = Get(level, "percentiles");
  if (!percentiles.is_array()) return text;
  for (const json& p : percentiles) {
    if (Get(p, "q") == q && Get(p, "bounded") == true && Get(p, "lower_ms").is_number() &&
        Get(p, "upper_ms").is_number()) {
      return text + " [" + Text(Get(p, "lower_ms")) + ", " + Text(Get(p, "upper_ms")) + "]";
    }
  }
  return text;
}

std::string LevelTable(const json& levels) {
  std::string html =
      "<table class=\"levels\"><tr><th>concurrency</th><th>target QPS</th><th>queries</th><th>duration "
      "(s)</th>"
      "<th>throughput (QPS)</th><th>p50 (ms)</th><th>p90 (ms)</th><th>p99 (ms)</th><th>max "
      "(ms)</th><th>late</th>"
      "<th>dropped</th></tr>\n";
  for (const json& level : levels) {
    auto cell = [&](const std::string& text) { html += "<td>" + HtmlEscape(text) + "</td>"; };
    html += "<tr>";
    for (const char* key : {"concurrency", "target_qps", "queries", "duration_s", "throughput_qps"}) {
      cell(Text(Get(level, key)));
    }
    for (int q : {50, 90, 99}) cell(PercentileText(level, q));
    cell(Text(Get(Get(level, "latency_ms"), "max")));
    for (const char* key : {"late", "dropped"}) cell(Text(Get(level, key)));
    html += "</tr>\n";
  }
  return html +
         "</table>\n<p class=\"note\">Percentiles in ms, with their confidence interval in brackets "
         "where the sample count bounds them.</p>\n";
}

// The slowest nodes of a profile (its "nodes", slowest first), the first kProfileNodes.
std::string NodeTable(const json& nodes) {
  auto operands = [](const json& list) {
    std::string s;
    if (!list.is_array()) return s;
    for (const json& o : list) {
      std::string one = "-";
      if (o.is_object() && Get(o, "dtype").is_string() && Get(o, "shape").is_array()) {
        one = Get(o, "dtype").get<std::string>() + "[";
        bool first = true;
        for (const json& d : Get(o, "shape")) {
          one += (first ? "" : ",") + d.dump();
          first = false;
        }
        one += "]";
      }
      s += (s.empty() ? "" : ", ") + one;
    }
    return s;
  };
  std::string html =
      "<table class=\"levels\" id=\"profile-nodes\"><tr><th>#</th><th>node</th><th>op</th><th>inputs &rarr; "
      "outputs</th><th>median (ms)</th><th>min (ms)</th><th>max (ms)</th><th>share "
      "(%)</th><th>calls</th></tr>\n";
  size_t shown = 0;
  for (const json& node : nodes) {
    if (shown == kProfileNodes) break;
    if (!node.is_object()) continue;
    auto cell = [&](const std::string& text) { html += "<td>" + HtmlEscape(text) + "</td>"; };
    html += "<tr>";
    cell(std::to_string(++shown));
    cell(Text(Get(node, "name")));
    cell(Text(Get(node, "op")));
    cell(operands(Get(node, "inputs")) + " -> " + operands(Get(node, "outputs")));
    for (const char* key : {"median_ms", "min_ms", "max_ms", "share_percent", "calls"})
      cell(Text(Get(node, key)));
    html += "</tr>\n";
  }
  return html +
         "</table>\n<p class=\"note\">The slowest nodes (a fused kernel names every node it runs), by "
         "their median time per invocation over the profiled runs.</p>\n";
}

struct ChartSection {
  const char* id;
  const char* title;
  const char* note;
};

constexpr ChartSection kSections[] = {
    {"chart-histogram", "Latency histogram", "How often each latency occurred."},
    {"chart-timeline", "Sample timeline",
     "Each latency in the order it was measured: drift, warmup or noise show here."},
    {"chart-throughput-latency", "Throughput against latency",
     "One point per load level: the latency percentiles at the throughput it achieved."},
    {"chart-profile", "Per-op profile",
     "Time of the (median) profiled invocation by op and instruction kind, largest 20."},
};

// The chart runner every page with charts shares (ChartRunnerJs): builders by
// data-chart name, each drawn canvas marked data-rendered="true", #render-status kept.
constexpr char kRunnerScript[] = R"js(
var remexCharts = (function () {
  'use strict';
  var builders = {}, failures = [], rendered = 0, canvases = [];
  function update() {
    var status = document.getElementById('render-status');
    if (!status) return;
    status.dataset.rendered = String(rendered);
    status.textContent = rendered + ' of ' + canvases.length + ' charts rendered' +
        (failures.length ? '; failed: ' + failures.join('; ') : '');
  }
  var mark = {id: 'remexRendered', afterRender: function (chart) {
    if (chart.canvas.dataset.rendered !== 'true') {
      chart.canvas.dataset.rendered = 'true';
      ++rendered;
      update();
    }
  }};
  return {
    add: function (more) { Object.keys(more).forEach(function (k) { builders[k] = more[k]; }); },
    fail: function (why) { failures.push(why); update(); },
    draw: function () {
      canvases = Array.prototype.slice.call(document.querySelectorAll('canvas[data-chart]'));
      try {
        var version = document.getElementById('chartjs-version');
        if (version) version.textContent = Chart.version;
        Chart.defaults.animation = false;
        Chart.defaults.maintainAspectRatio = false;
      } catch (e) {
        failures.push('Chart.js: ' + e.message);
        update();
        return;
      }
      canvases.forEach(function (canvas) {
        try {
          var build = builders[canvas.dataset.chart];
          if (!build) throw new Error('nothing draws a ' + canvas.dataset.chart + ' chart');
          var config = build(canvas);
          config.plugins = (config.plugins || []).concat([mark]);
          new Chart(canvas, config);
        } catch (e) {
          canvas.dataset.rendered = 'false';
          failures.push(canvas.id + ': ' + e.message);
        }
      });
      update();
    }
  };
})();
)js";

// The bench charts (BenchChartsJs): builders reading the report of #remex-report.
constexpr char kBenchScript[] = R"js(
(function () {
  'use strict';
  var report;
  try {
    report = JSON.parse(document.getElementById('remex-report').textContent);
  } catch (e) {
    remexCharts.fail('the report: ' + e.message);
    return;
  }
  function num(v) { return typeof v === 'number' && isFinite(v); }
  function obj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function fmt(v) { return num(v) ? String(Number(v.toPrecision(4))) : String(v); }
  var load = obj(report.load), levels = arr(load.levels).map(obj);
  // The samples: the last load level's timeline, else benchmark.samples_ms.
  function samples() {
    var timeline = levels.length ? obj(levels[levels.length - 1].timeline) : {};
    var latency = arr(timeline.latency_ms);
    if (latency.length) {
      var issue = arr(timeline.issue_s), points = [];
      latency.forEach(function (y, i) { if (num(y) && num(issue[i])) points.push({x: issue[i], y: y}); });
      var level = levels[levels.length - 1];
      return {latency: latency.filter(num), points: points, x: 'issue time (s)', line: false,
              what: 'queries of the last level (concurrency ' + fmt(level.concurrency) + ')'};
    }
    var ms = arr(obj(report.benchmark).samples_ms), pts = [];
    ms.forEach(function (y, i) { if (num(y)) pts.push({x: i, y: y}); });
    return {latency: ms.filter(num), points: pts, x: 'sample', what: 'samples (mean ms per call)',
            line: pts.length <= 2000};
  }
  function axis(text, extra) { return Object.assign({title: {display: true, text: text}}, extra || {}); }
  remexCharts.add({
    'chart-histogram': function () {
      var s = samples(), v = s.latency, lo = Infinity, hi = -Infinity;
      v.forEach(function (x) { lo = Math.min(lo, x); hi = Math.max(hi, x); });
      var bins = Math.max(1, Math.min(60, Math.ceil(Math.sqrt(v.length))));
      if (!(hi > lo)) bins = 1;
      var width = bins > 1 ? (hi - lo) / bins : 1, counts = new Array(bins).fill(0), labels = [];
      v.forEach(function (x) { counts[Math.min(bins - 1, Math.floor((x - lo) / width))]++; });
      for (var i = 0; i < bins; ++i) {
        labels.push(bins > 1 ? fmt(lo + i * width) + '–' + fmt(lo + (i + 1) * width) : fmt(lo));
      }
      return {type: 'bar',
              data: {labels: labels, datasets: [{label: s.what, data: counts, backgroundColor: '#4e79a7',
                                                 barPercentage: 1, categoryPercentage: 1}]},
              options: {scales: {x: axis('latency (ms)'), y: axis('count', {beginAtZero: true})}}};
    },
    'chart-timeline': function () {
      var s = samples();
      return {type: 'scatter',
              data: {datasets: [{label: s.what, data: s.points, showLine: s.line,
                                 borderColor: '#4e79a7', backgroundColor: '#4e79a7',
                                 pointRadius: s.points.length > 2000 ? 1 : 2}]},
              options: {scales: {x: axis(s.x), y: axis('latency (ms)')}}};
    },
    'chart-throughput-latency': function () {
      var colors = {p50: '#4e79a7', p90: '#f28e2b', p99: '#e15759'};
      var datasets = ['p50', 'p90', 'p99'].map(function (p) {
        var points = [];
        levels.forEach(function (l) {
          var y = obj(l.latency_ms)[p];
          if (num(l.throughput_qps) && num(y)) points.push({x: l.throughput_qps, y: y, level: l});
        });
        return {label: p + ' latency', data: points, showLine: true, borderColor: colors[p],
                backgroundColor: colors[p]};
      });
      return {type: 'scatter', data: {datasets: datasets},
              options: {scales: {x: axis('throughput (queries/s)'), y: axis('latency (ms)', {beginAtZero: true})},
                        plugins: {tooltip: {callbacks: {label: function (c) {
                          var l = c.raw.level;
                          return c.dataset.label + ' ' + fmt(c.raw.y) + ' ms at ' + fmt(c.raw.x) + ' QPS (concurrency ' +
                              fmt(l.concurrency) + (num(l.target_qps) ? ', target ' + fmt(l.target_qps) + ' QPS' : '') + ')';
                        }}}}}};
    },
    'chart-profile': function () {
      var rows = arr(obj(report.profile).rows).map(obj).filter(function (r) { return num(r.total_ms); });
      rows.sort(function (a, b) { return b.total_ms - a.total_ms; });
      rows = rows.slice(0, 20);
      return {type: 'bar',
              data: {labels: rows.map(function (r) { return String(r.name) + ' (' + String(r.kind) + ')'; }),
                     datasets: [{label: 'total time (ms)', data: rows.map(function (r) { return r.total_ms; }),
                                 backgroundColor: '#59a14f'}]},
              options: {indexAxis: 'y', scales: {x: axis('total time (ms)', {beginAtZero: true})},
                        plugins: {tooltip: {callbacks: {afterLabel: function (c) {
                          var r = rows[c.dataIndex];
                          return fmt(r.calls) + ' calls, ' + fmt(r.mean_us) + ' us each, ' + fmt(r.share_percent) + ' %';
                        }}}}}};
    }
  });
})();
)js";

constexpr char kStyle[] = R"css(
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; overflow-wrap: anywhere; } h2 { font-size: 1.2em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { text-align: left; padding: 0.2em 0.8em 0.2em 0; vertical-align: top; }
td code { overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
table.levels td, table.levels th { text-align: right; border-bottom: 1px solid #ddd; }
table.environment th, table.environment td { font-size: 0.9em; font-weight: normal; padding: 0 0.8em 0 0; }
ul.warnings { margin: 0; padding-left: 1.2em; color: #a33; }
.note { color: #555; margin: 0.2em 0; }
.chart { position: relative; width: 100%; }
footer { margin-top: 2em; color: #777; font-size: 0.9em; }
@media (max-width: 600px) {
  body { margin: 0.5em auto; padding: 0 0.5em; }
  th, td { padding-right: 0.5em; }
}
)css";

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ChartJsVersion() {
  std::string_view js = ChartJs().substr(0, 256);
  size_t at = js.find("Chart.js v");
  if (at == std::string_view::npos) return "unknown";
  js.remove_prefix(at + 10);
  size_t end = js.find_first_not_of("0123456789.");
  return std::string(js.substr(0, end));
}

std::vector<std::string> BenchChartIds(const json& bench) {
  std::vector<std::string> ids;
  if (!LoadTimeline(bench).is_null() || NonEmptyArray(Get(Get(bench, "benchmark"), "samples_ms"))) {
    ids.push_back("chart-histogram");
    ids.push_back("chart-timeline");
  }
  if (NonEmptyArray(Get(Get(bench, "load"), "levels"))) ids.push_back("chart-throughput-latency");
  if (NonEmptyArray(Get(Get(bench, "profile"), "rows"))) ids.push_back("chart-profile");
  return ids;
}

std::string BenchSectionsHtml(const json& bench) {
  std::string html = "<div class=\"scroll\">\n" + HeaderTable(bench) + "</div>\n";
  std::vector<std::string> ids = BenchChartIds(bench);
  const json& rows = Get(Get(bench, "profile"), "rows");
  size_t profile_rows = std::min(kProfileRows, rows.is_array() ? rows.size() : 0);
  for (const ChartSection& section : kSections) {
    if (std::find(ids.begin(), ids.end(), section.id) == ids.end()) continue;
    int height =
        std::string_view(section.id) == "chart-profile" ? 80 + 24 * static_cast<int>(profile_rows) : 340;
    html += std::string("<section>\n<h2>") + section.title + "</h2>\n<p class=\"note\">" + section.note +
            "</p>\n";
    html += "<div class=\"chart\" style=\"height: " + std::to_string(height) + "px\"><canvas id=\"" +
            section.id + "\" data-chart=\"" + section.id + "\" role=\"img\" aria-label=\"" + section.title +
            "\"></canvas></div>\n";
    if (std::string_view(section.id) == "chart-throughput-latency") {
      html += "<div class=\"scroll\">" + LevelTable(Get(Get(bench, "load"), "levels")) + "</div>\n";
    }
    if (std::string_view(section.id) == "chart-profile" &&
        NonEmptyArray(Get(Get(bench, "profile"), "nodes"))) {
      html += "<div class=\"scroll\">" + NodeTable(Get(Get(bench, "profile"), "nodes")) + "</div>\n";
    }
    html += "</section>\n";
  }
  if (ids.empty())
    html += "<p class=\"note\">The report has no samples, load levels or profile to chart.</p>\n";
  return html;
}

std::string_view ReportCss() { return kStyle; }
std::string_view ChartJsSource() { return ChartJs(); }
std::string_view ChartRunnerJs() { return kRunnerScript; }
std::string_view BenchChartsJs() { return kBenchScript; }

std::string ScriptJson(const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string BenchHtml(const json& bench) {
  std::string model = Get(bench, "model").is_string() ? Get(bench, "model").get<std::string>() : "";
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing from the network: no scripts, styles, images or connections from elsewhere.
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'unsafe-inline'; "
      "style-src 'unsafe-inline'; img-src data:\">\n";
  html += "<title>" + HtmlEscape("Remex benchmark" + (model.empty() ? "" : ": " + model)) + "</title>\n";
  html += std::string("<style>") + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>" + HtmlEscape("Remex benchmark" + (model.empty() ? "" : ": " + model)) + "</h1>\n";
  html += BenchSectionsHtml(bench);
  html +=
      "<footer><p id=\"render-status\" data-rendered=\"0\">charts not drawn (the page's script did not "
      "run)</p>\n";
  html += "<p>Written by remex; charts by Chart.js <span id=\"chartjs-version\">" +
          HtmlEscape(ChartJsVersion()) + "</span> (MIT License), embedded in this page.</p></footer>\n";
  html += "<script type=\"application/json\" id=\"remex-report\">" + ScriptJson(bench) + "</script>\n";
  html += "<script>\n";
  html += ChartJs();
  html += "\n</script>\n<script>";
  html += kRunnerScript;
  html += kBenchScript;
  html += "remexCharts.draw();\n</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace remex::tooling
