// The dashboard's pages (dashboard.h): HTML from each page's data, its charts drawn by
// the embedded Chart.js through report_html.h's chart runner.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "host_client/tooling/dashboard.h"
#include "host_client/tooling/report_html.h"

namespace remex::tooling {
namespace {

using nlohmann::json;

constexpr size_t kMaxJsonBytes = 256 * 1024;  // of a report shown as JSON text
constexpr size_t kMaxProfileRows = 500;       // of a run's per-op table

std::string E(std::string_view text) { return HtmlEscape(text); }

const json& Get(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string Str(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A number for a person: integers whole, others with 4 significant digits; "—" for none.
std::string Num(const json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return j.dump();
  if (!j.is_number()) return "—";
  const double v = j.get<double>();
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, std::fabs(v) >= 1e4 && std::fabs(v) < 1e15 ? "%.0f" : "%.4g", v);
  return buffer;
}

std::string Pct(const json& j) {
  if (!j.is_number()) return "—";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%+.1f %%", j.get<double>());
  return buffer;
}

std::string Id(const json& id) { return id.is_number_integer() ? std::to_string(id.get<int64_t>()) : "0"; }

std::string RunLink(const json& id) {
  const std::string n = Id(id);
  return "<a href=\"/run/" + n + "\">" + n + "</a>";
}

std::string SeriesLink(const json& series, const std::string& text) {
  return "<a href=\"/series/" + E(Str(Get(series, "series_key"))) + "\">" + E(text) + "</a>";
}

// "regression" -> "state-regression"; "no change" -> "state-no-change".
std::string StateBadge(const std::string& state) {
  std::string cls = "state-";
  for (char c : state) cls += c == ' ' ? '-' : c;
  return "<span class=\"state " + E(cls) + "\">" + E(state) + "</span>";
}

std::string Row(const std::string& label, const std::string& value_html) {
  return "<tr><th>" + E(label) + "</th><td>" + value_html + "</td></tr>\n";
}

std::string Tags(const json& tags) {
  std::string out;
  if (!tags.is_object()) return out;
  for (auto it = tags.begin(); it != tags.end(); ++it) {
    out += (out.empty() ? "" : " ") + std::string("<code class=\"tag\">") + E(it.key()) + "=" +
           E(Str(it.value())) + "</code>";
  }
  return out;
}

std::string Scroll(const std::string& table) { return "<div class=\"scroll\">" + table + "</div>\n"; }

std::string Canvas(const std::string& id, const std::string& chart, const std::string& label, int height,
                   const std::string& extra = "") {
  return "<div class=\"chart\" style=\"height: " + std::to_string(height) + "px\"><canvas id=\"" + E(id) +
         "\" data-chart=\"" + E(chart) + "\"" + extra + " role=\"img\" aria-label=\"" + E(label) +
         "\"></canvas></div>\n";
}

std::string CompareForm(const std::string& a) {
  std::string html = "<form class=\"compare\" method=\"get\" action=\"/compare\">Compare run ";
  if (a.empty()) {
    html +=
        "<input name=\"a\" inputmode=\"numeric\" pattern=\"[0-9]+\" required aria-label=\"run a\"> with run ";
  } else {
    html += E(a) + "<input type=\"hidden\" name=\"a\" value=\"" + E(a) + "\"> with run ";
  }
  return html +
         "<input name=\"b\" inputmode=\"numeric\" pattern=\"[0-9]+\" required aria-label=\"run b\"> "
         "<button type=\"submit\">Compare</button></form>\n";
}

constexpr char kDashboardCss[] = R"css(
header { border-bottom: 1px solid #ddd; margin-bottom: 1em; }
header nav { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; align-items: baseline; padding: 0.4em 0; }
header nav a.home { font-weight: bold; color: #222; text-decoration: none; }
.where { color: #777; font-size: 0.85em; margin: 0 0 0.4em; overflow-wrap: anywhere; }
table.list th, table.list td { border-bottom: 1px solid #eee; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.state { padding: 0 0.4em; border-radius: 3px; white-space: nowrap; background: #eee; }
.state-regression, .state-quarantined, .state-fail, .state-error { background: #c0392b; color: #fff; }
.state-improvement, .state-idle, .state-pass { background: #2e7d32; color: #fff; }
.state-too-noisy, .state-draining { background: #f2c14e; }
.state-leased { background: #4e79a7; color: #fff; }
.banner { padding: 0.5em 0.8em; margin: 0.8em 0; border-left: 4px solid #999; background: #f6f6f6; }
.banner.regression, .banner.error { border-color: #c0392b; background: #fdecea; }
.banner.improvement { border-color: #2e7d32; background: #eaf5ea; }
.health-bad { color: #c0392b; font-weight: bold; }
form.compare { margin: 0.8em 0; }
form.compare input { width: 6em; }
pre { overflow-x: auto; max-width: 100%; background: #f6f6f6; padding: 0.5em; }
td code.tag { white-space: nowrap; overflow-wrap: normal; display: inline-block; }
h3 { font-size: 1.05em; margin-bottom: 0.2em; overflow-wrap: anywhere; }
)css";

// The builders of the dashboard's own charts, reading #remex-data.
constexpr char kDashboardScript[] = R"js(
(function () {
  'use strict';
  var data;
  try {
    data = JSON.parse(document.getElementById('remex-data').textContent);
  } catch (e) {
    remexCharts.fail('the page data: ' + e.message);
    return;
  }
  function num(v) { return typeof v === 'number' && isFinite(v); }
  function obj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function fmt(v) { return num(v) ? String(Number(v.toPrecision(4))) : String(v); }
  function axis(text, extra) { return Object.assign({title: {display: true, text: text}}, extra || {}); }
  function when(ms) { return new Date(ms).toISOString().slice(0, 16).replace('T', ' '); }
  function timeAxis() {
    return axis('recorded (UTC)', {type: 'linear', ticks: {maxTicksLimit: 5, callback: function (v) { return when(v); }}});
  }
  // A click on a point opens its run.
  function openRun(event, elements, chart) {
    if (!elements.length) return;
    var e = elements[0], p = chart.data.datasets[e.datasetIndex].data[e.index];
    if (p && num(p.id)) window.location.href = '/run/' + p.id;
  }
  function hover(event, elements, chart) { chart.canvas.style.cursor = elements.length ? 'pointer' : 'default'; }
  function point(r, y) { return {x: r.t_ms, y: y, id: r.id, run: r}; }
  function runLabel(c) {
    var r = obj(c.raw.run);
    return 'run ' + r.id + ' (' + r.recorded_at + '): ' + fmt(c.raw.y) + ' ms' +
        (num(r.ci_low_ms) ? ' [' + fmt(r.ci_low_ms) + ', ' + fmt(r.ci_high_ms) + ']' : '') +
        (r.verdict && r.verdict !== 'pass' ? ' ' + r.verdict : '');
  }
  remexCharts.add({
    'series': function () {
      var runs = arr(data.runs).map(obj).filter(function (r) { return num(r.median_ms) && num(r.t_ms); });
      var finding = obj(data.finding), state = String(finding.state);
      var banded = runs.filter(function (r) { return num(r.ci_low_ms) && num(r.ci_high_ms); });
      var level = Math.round(100 * (num(data.confidence) ? data.confidence : 0.95));
      var color = state === 'regression' ? '#c0392b' : state === 'improvement' ? '#2e7d32' : '#f28e2b';
      var band = 'rgba(78, 121, 167, 0.35)';
      var datasets = [
        {label: 'interval low', data: banded.map(function (r) { return point(r, r.ci_low_ms); }),
         borderColor: band, borderWidth: 1, pointRadius: 0, pointHitRadius: 0, fill: false},
        {label: level + ' % interval of the median', data: banded.map(function (r) { return point(r, r.ci_high_ms); }),
         borderColor: band, borderWidth: 1, backgroundColor: 'rgba(78, 121, 167, 0.18)', pointRadius: 0,
         pointHitRadius: 0, fill: '-1'},
        {label: 'median of a run', data: runs.map(function (r) { return point(r, r.median_ms); }),
         borderColor: '#4e79a7', backgroundColor: '#4e79a7', pointRadius: 4, pointHoverRadius: 7, fill: false},
        {label: 'baseline', data: runs.filter(function (r) { return r.role === 'baseline'; })
           .map(function (r) { return point(r, r.median_ms); }),
         showLine: false, pointStyle: 'circle', pointRadius: 6, borderColor: '#4e79a7', backgroundColor: 'rgba(0, 0, 0, 0)',
         borderWidth: 2},
        {label: state === 'regression' ? 'regression' : 'judged runs (' + state + ')',
         data: runs.filter(function (r) { return r.role === 'candidate'; }).map(function (r) { return point(r, r.median_ms); }),
         showLine: false, pointStyle: 'triangle', pointRadius: 9, pointHoverRadius: 11, borderColor: color,
         backgroundColor: color}
      ];
      return {type: 'line', data: {datasets: datasets},
              options: {scales: {x: timeAxis(), y: axis('median latency (ms)')},
                        interaction: {mode: 'nearest', intersect: true},
                        plugins: {legend: {labels: {filter: function (item) {
                                    return item.text !== 'interval low' && datasets[item.datasetIndex].data.length > 0;
                                  }}},
                                  tooltip: {filter: function (item) { return item.datasetIndex >= 2; },
                                            callbacks: {label: runLabel}}},
                        onClick: openRun, onHover: hover}};
    },
    'selftest': function (canvas) {
      var test = obj(arr(data.self_tests)[Number(canvas.dataset.index)]);
      var points = arr(test.points).map(obj).filter(function (r) { return num(r.median_ms) && num(r.t_ms); });
      var colors = points.map(function (r) { return r.verdict === 'pass' ? '#4e79a7' : '#c0392b'; });
      return {type: 'line',
              data: {datasets: [{label: 'self-test median (ms); red: failed',
                                 data: points.map(function (r) { return point(r, r.median_ms); }),
                                 borderColor: '#4e79a7', pointBackgroundColor: colors, pointBorderColor: colors,
                                 pointRadius: 4, pointHoverRadius: 7, fill: false}]},
              options: {scales: {x: timeAxis(), y: axis('latency (ms)')},
                        plugins: {tooltip: {callbacks: {label: function (c) {
                          var r = obj(c.raw.run);
                          return 'run ' + r.id + ': ' + fmt(c.raw.y) + ' ms, ' + r.verdict + (r.error ? ' (' + r.error + ')' : '');
                        }}}},
                        onClick: openRun, onHover: hover}};
    },
    'compare-distribution': function () {
      var d = obj(data.distributions), colors = {a: '#4e79a7', b: '#e15759'};
      var datasets = ['a', 'b'].map(function (side) {
        var run = obj(obj(data[side]).run);
        return {label: 'run ' + run.id + ' (' + side + ')',
                data: arr(d[side]).filter(function (p) { return Array.isArray(p) && num(p[0]) && num(p[1]); })
                  .map(function (p) { return {x: p[0], y: p[1]}; }),
                showLine: true, pointRadius: 0, borderColor: colors[side], backgroundColor: colors[side], fill: false};
      });
      return {type: 'scatter', data: {datasets: datasets},
              options: {scales: {x: axis('latency (ms)'), y: axis('percentile', {min: 0, max: 100})}}};
    },
    'compare-ops': function () {
      var ops = arr(data.ops).map(obj).filter(function (o) { return num(o.diff_ms); }).slice(0, 20);
      return {type: 'bar',
              data: {labels: ops.map(function (o) { return String(o.name) + ' (' + String(o.kind) + ')'; }),
                     datasets: [{label: 'b − a, total ms (red: b slower)', data: ops.map(function (o) { return o.diff_ms; }),
                                 backgroundColor: ops.map(function (o) { return o.diff_ms > 0 ? '#e15759' : '#59a14f'; })}]},
              options: {indexAxis: 'y', scales: {x: axis('difference of total time (ms)')},
                        plugins: {tooltip: {callbacks: {afterLabel: function (c) {
                          var o = ops[c.dataIndex];
                          return 'a ' + fmt(o.a_ms) + ' ms, b ' + fmt(o.b_ms) + ' ms' +
                              (num(o.change_pct) ? ' (' + (o.change_pct > 0 ? '+' : '') + fmt(o.change_pct) + ' %)' : '');
                        }}}}}};
    }
  });
})();
)js";

struct Layout {
  std::string title;
  std::string body;
  const json* data = nullptr;    // embedded as #remex-data
  const json* report = nullptr;  // embedded as #remex-report (the bench charts read it)
};

std::string Page(const Layout& page, const DashboardOptions& options) {
  const bool charts = page.body.find("<canvas ") != std::string::npos;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'unsafe-inline'; "
      "style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'\">\n";
  html += "<link rel=\"icon\" href=\"data:,\">\n";
  html += "<title>" + E(page.title) + " · remex dashboard</title>\n";
  html += "<style>" + std::string(ReportCss()) + kDashboardCss + "</style>\n</head>\n<body>\n";
  html +=
      "<header><nav><a class=\"home\" href=\"/\">remex dashboard</a><a href=\"/\">Series</a>"
      "<a href=\"/farm\">Farm</a></nav>\n";
  html += "<p class=\"where\">results " + E(RedactResultsUrl(options.results_url)) +
          (options.farm_url.empty() ? std::string() : " · farm " + E(options.farm_url)) + "</p></header>\n";
  html += "<main>\n<h1>" + E(page.title) + "</h1>\n" + page.body + "</main>\n";
  html +=
      "<footer><p id=\"render-status\" data-rendered=\"0\">" +
      std::string(charts ? "charts not drawn (the page's script did not run)" : "0 of 0 charts rendered") +
      "</p>\n";
  html += "<p>remex " + E(options.version) +
          " dashboard, read-only; charts by Chart.js <span id=\"chartjs-version\">" + E(ChartJsVersion()) +
          "</span> (MIT License), served with the page.</p></footer>\n";
  if (page.data) {
    html += "<script type=\"application/json\" id=\"remex-data\">" + ScriptJson(*page.data) + "</script>\n";
  }
  if (page.report) {
    html +=
        "<script type=\"application/json\" id=\"remex-report\">" + ScriptJson(*page.report) + "</script>\n";
  }
  if (charts) {
    html += "<script>\n" + std::string(ChartJsSource()) + "\n</script>\n<script>";
    html += ChartRunnerJs();
    if (page.report) html += BenchChartsJs();
    html += kDashboardScript;
    html += "remexCharts.draw();\n</script>\n";
  }
  return html + "</body>\n</html>\n";
}

std::string FindingBanner(const json& finding) {
  const std::string state = Str(Get(finding, "state"));
  std::string cls = state == "regression"    ? "regression"
                    : state == "improvement" ? "improvement"
                    : state == "error"       ? "error"
                                             : "";
  std::string html = "<div class=\"banner " + cls + "\" id=\"finding\"><p>" + StateBadge(state);
  if (state == "regression" || state == "improvement" || state == "no change") {
    const json& confidence = Get(finding, "confidence");
    html += " median " + E(Pct(Get(finding, "change_pct"))) + " [" + E(Pct(Get(finding, "ci_low_pct"))) +
            ", " + E(Pct(Get(finding, "ci_high_pct"))) + "] at " +
            E(Num(json(confidence.is_number() ? confidence.get<double>() * 100 : 0))) + " % confidence";
  }
  html += "</p><p>" + E(Str(Get(finding, "reason"))) + "</p></div>\n";
  return html;
}

}  // namespace

std::string OverviewPage(const json& data, const DashboardOptions& options) {
  std::string body;
  const json& farm = Get(data, "farm");
  if (farm.is_object()) {
    body += "<section id=\"farm-summary\"><h2>Farm</h2>\n";
    if (!Get(farm, "error").is_null()) {
      body += "<div class=\"banner error\"><p>The farm cannot be read: " + E(Str(Get(farm, "error"))) +
              "</p></div>\n";
    } else {
      std::string t =
          "<table class=\"list\"><tr><th>pool</th><th class=\"num\">devices</th><th class=\"num\">idle</th>"
          "<th class=\"num\">leased</th><th class=\"num\">draining</th><th class=\"num\">quarantined</th>"
          "<th class=\"num\">waiting</th></tr>\n";
      for (const json& p : Get(farm, "pools").is_array() ? Get(farm, "pools") : json::array()) {
        t += "<tr><td>" + E(Str(Get(p, "name"))) + "</td>";
        for (const char* k : {"devices", "idle", "leased", "draining", "quarantined", "waiting"}) {
          t += "<td class=\"num\">" + E(Num(Get(p, k))) + "</td>";
        }
        t += "</tr>\n";
      }
      body += Scroll(t + "</table>");
      body += "<p class=\"note\">" + E(Num(Get(farm, "devices"))) +
              " devices registered: <a href=\"/farm\">the farm's devices and their self-tests</a>.</p>\n";
    }
    body += "</section>\n";
  }
  body += "<section id=\"series\"><h2>Series</h2>\n";
  const json& series = Get(data, "series");
  if (!series.is_array() || series.empty()) {
    body += "<p class=\"note\">No runs are recorded in " + E(Str(Get(data, "results"))) +
            " yet: <code>remex bench MODEL --record URL</code> records one.</p>\n";
  } else {
    body +=
        "<p class=\"note\">Runs of the same model, compile options, scenario and device class, the most "
        "recently "
        "recorded first; the state judges each series' newest runs against those before them (as <code>remex "
        "regressions</code>).</p>\n";
    std::string t =
        "<table class=\"list\" id=\"series-table\"><tr><th>model</th><th>scenario</th><th>device class</th>"
        "<th class=\"num\">runs</th><th>latest run</th><th class=\"num\">median</th><th>state</th></tr>\n";
    for (const json& s : series) {
      const json& latest = Get(s, "latest");
      const json& finding = Get(s, "finding");
      t += "<tr data-series=\"" + E(Str(Get(s, "series_key"))) + "\"><td>" +
           SeriesLink(s, Str(Get(s, "model_name"))) + "</td><td>" + E(Str(Get(s, "scenario"))) + "</td><td>" +
           E(Str(Get(s, "device_class"))) + "</td><td class=\"num\">" + E(Num(Get(s, "runs"))) + "</td><td>";
      if (latest.is_object()) t += RunLink(Get(latest, "id")) + " " + E(Str(Get(latest, "recorded_at")));
      t += "</td><td class=\"num\">" +
           (latest.is_object() && Get(latest, "median_ms").is_number()
                ? E(Num(Get(latest, "median_ms"))) + " ms"
                : "—") +
           "</td><td>" + StateBadge(Str(Get(finding, "state")));
      if (Get(finding, "state") == "regression" || Get(finding, "state") == "improvement") {
        t += " " + E(Pct(Get(finding, "change_pct")));
      }
      t += "</td></tr>\n";
    }
    body += Scroll(t + "</table>");
    if (Get(data, "series_total").is_number() && Get(data, "series_limit").is_number() &&
        Get(data, "series_total").get<double>() > Get(data, "series_limit").get<double>()) {
      body += "<p class=\"note\">The latest " + E(Num(Get(data, "series_limit"))) + " of " +
              E(Num(Get(data, "series_total"))) + " series are listed (remex history lists them all).</p>\n";
    }
  }
  if (Get(data, "self_test_series").is_number() && Get(data, "self_test_series").get<double>() > 0) {
    body += "<p class=\"note\">" + E(Num(Get(data, "self_test_series"))) +
            " self-test series of farm devices: on <a href=\"/farm\">the farm page</a>.</p>\n";
  }
  body += "</section>\n" + CompareForm("");
  return Page({"Series", body, &data, nullptr}, options);
}

std::string FarmPage(const json& data, const DashboardOptions& options) {
  std::string body;
  const json& status = Get(data, "status");
  if (Get(data, "farm").is_null()) {
    body +=
        "<p class=\"note\" id=\"no-farm\">No farm given: <code>remex dashboard --farm "
        "redis://HOST:PORT</code> "
        "lists its pools and devices here. The self-tests below come from the results store.</p>\n";
  } else if (!Get(data, "error").is_null()) {
    body += "<div class=\"banner error\" id=\"farm-error\"><p>The farm " + E(Str(Get(data, "farm"))) +
            " cannot be read: " + E(Str(Get(data, "error"))) + "</p></div>\n";
  }
  if (status.is_object()) {
    std::string t =
        "<table class=\"list\" id=\"pools\"><tr><th>pool</th><th class=\"num\">devices</th>"
        "<th class=\"num\">idle</th><th class=\"num\">leased</th><th class=\"num\">draining</th>"
        "<th class=\"num\">quarantined</th><th class=\"num\">waiting</th></tr>\n";
    for (const json& p : Get(status, "pools").is_array() ? Get(status, "pools") : json::array()) {
      t += "<tr><td>" + E(Str(Get(p, "name"))) + "</td>";
      for (const char* k : {"devices", "idle", "leased", "draining", "quarantined", "waiting"}) {
        t += "<td class=\"num\">" + E(Num(Get(p, k))) + "</td>";
      }
      t += "</tr>\n";
    }
    body +=
        "<h2>Pools</h2>\n<p class=\"note\">Devices by state, and the clients waiting in each pool's lease "
        "queue.</p>\n" +
        Scroll(t + "</table>");
    const json& devices = Get(status, "devices");
    body += "<h2>Devices</h2>\n";
    if (!devices.is_array() || devices.empty()) {
      body += "<p class=\"note\">No device is registered.</p>\n";
    } else {
      std::string d =
          "<table class=\"list\" id=\"devices\"><tr><th>device</th><th>pool</th><th>state</th><th>labels</th>"
          "<th>holder</th><th class=\"num\">lease age</th><th>health</th><th class=\"num\">heartbeat</th>"
          "<th>kind</th><th>description</th><th>version</th></tr>\n";
      for (const json& dev : devices) {
        const std::string health = Str(Get(dev, "health"));
        auto seconds = [](const json& ms) {
          return ms.is_number() ? Num(json(std::round(ms.get<double>() / 100.0) / 10.0)) + " s"
                                : std::string("—");
        };
        d += "<tr data-device=\"" + E(Str(Get(dev, "id"))) + "\"><td>" + E(Str(Get(dev, "id"))) +
             "</td><td>" + E(Str(Get(dev, "pool"))) + "</td><td>" + StateBadge(Str(Get(dev, "state"))) +
             "</td><td>" + Tags(Get(dev, "labels")) + "</td><td>" + E(Str(Get(dev, "holder"))) +
             "</td><td class=\"num\">" + E(seconds(Get(dev, "lease_age_ms"))) + "</td><td" +
             (health == "ok" ? std::string() : " class=\"health-bad\"") + ">" + E(health) +
             "</td><td class=\"num\">" + E(seconds(Get(dev, "heartbeat_age_ms"))) + " ago</td><td>" +
             E(Str(Get(dev, "device"))) + "</td><td>" + E(Str(Get(dev, "description"))) + "</td><td>" +
             E(Str(Get(dev, "version"))) + "</td></tr>\n";
      }
      body += Scroll(d + "</table>");
      body +=
          "<p class=\"note\">Health is the device's self-test: <em>ok</em>, or why it failed (the device is "
          "then "
          "quarantined: leased to no one until a self-test passes).</p>\n";
    }
    const json& skipped = Get(status, "skipped");
    if (skipped.is_array() && !skipped.empty()) {
      body += "<p class=\"note\">Records that did not parse:</p><ul>";
      for (const json& s : skipped) body += "<li>" + E(Str(s)) + "</li>";
      body += "</ul>\n";
    }
  }
  body += "<section id=\"self-tests\"><h2>Self-test latency</h2>\n";
  const json& tests = Get(data, "self_tests");
  if (!tests.is_array() || tests.empty()) {
    body +=
        "<p class=\"note\" id=\"no-self-tests\">No self-test results are recorded in " +
        E(Str(Get(data, "results"))) +
        " yet: a farm server records each self-test as a run of kind <code>self-test</code> with the device "
        "class <code>POOL/HOST:PORT</code>.</p>\n";
  } else {
    body +=
        "<p class=\"note\">Each device's self-test median over time, from the results store (the latest " +
        E(Num(Get(data, "runs_limit"))) +
        " runs of each); red points failed. Click a point to open its run.</p>\n";
    for (size_t i = 0; i < tests.size(); ++i) {
      const json& t = tests[i];
      const std::string name = Str(Get(t, "pool")) + "/" + Str(Get(t, "device"));
      body += "<h3>" + SeriesLink(t, name) + " " +
              (Get(t, "state").is_null() ? std::string("<span class=\"note\">not registered now</span>")
                                         : StateBadge(Str(Get(t, "state")))) +
              "</h3>\n";
      body += Canvas("chart-selftest-" + std::to_string(i), "selftest", "self-test latency of " + name, 220,
                     " data-index=\"" + std::to_string(i) + "\"");
      const json& points = Get(t, "points");
      // The failed ones, the newest first: three listed, the rest counted.
      constexpr size_t kFailuresListed = 3;
      std::vector<const json*> failed;  // into `points`
      if (points.is_array()) {
        for (const json& p : points) {
          if (Get(p, "verdict") != "pass") failed.push_back(&p);
        }
      }
      std::string failures;
      for (size_t k = 0; k < failed.size() && k < kFailuresListed; ++k) {
        const json& p = *failed[failed.size() - 1 - k];
        failures += "<li>" + RunLink(Get(p, "id")) + " " + E(Str(Get(p, "recorded_at"))) + ": " +
                    E(Str(Get(p, "error"))) + "</li>";
      }
      if (!failed.empty()) {
        const std::string count = std::to_string(failed.size()) + " of " + std::to_string(points.size());
        body += "<p class=\"note\">Failed self-tests: " + count +
                (failed.size() > kFailuresListed ? ", the newest " + std::to_string(kFailuresListed) : std::string()) +
                ":</p><ul class=\"warnings\">" + failures + "</ul>\n";
      }
    }
    if (Get(data, "self_tests_total").is_number() &&
        Get(data, "self_tests_total").get<double>() > static_cast<double>(tests.size())) {
      body += "<p class=\"note\">" + E(Num(json(tests.size()))) + " of " +
              E(Num(Get(data, "self_tests_total"))) + " devices' self-tests are shown.</p>\n";
    }
  }
  if (status.is_object()) {
    std::string missing;
    for (const json& dev : Get(status, "devices").is_array() ? Get(status, "devices") : json::array()) {
      const std::string name = Str(Get(dev, "pool")) + "/" + Str(Get(dev, "id"));
      bool found = false;
      for (const json& t : tests.is_array() ? tests : json::array()) {
        found = found || Str(Get(t, "pool")) + "/" + Str(Get(t, "device")) == name;
      }
      if (!found) missing += (missing.empty() ? "" : ", ") + E(name);
    }
    if (!missing.empty() && tests.is_array() && !tests.empty()) {
      body +=
          "<p class=\"note\" id=\"self-tests-missing\">No self-test recorded yet for " + missing + ".</p>\n";
    }
  }
  body += "</section>\n";
  return Page({"Farm", body, &data, nullptr}, options);
}

std::string SeriesPage(const json& data, const DashboardOptions& options) {
  const json& s = Get(data, "series");
  std::string body;
  std::string t = "<table class=\"header\">\n";
  t += Row(
      "Model",
      E(Str(Get(s, "model_name"))) +
          (Str(Get(s, "model_hash")).empty() ? "" : " <code>" + E(Str(Get(s, "model_hash"))) + "</code>"));
  t += Row("Scenario", E(Str(Get(s, "scenario"))));
  t += Row("Device class", E(Str(Get(s, "device_class"))));
  if (!Get(s, "compile_options").is_null())
    t += Row("Compile options", "<code>" + E(Str(Get(s, "compile_options"))) + "</code>");
  t += Row("Runs", E(Num(Get(s, "runs"))) + ", from " + E(Str(Get(s, "first_recorded_at"))) + " to " +
                       E(Str(Get(s, "last_recorded_at"))));
  t += Row("Series", "<code>" + E(Str(Get(s, "series_key"))) + "</code>");
  body += Scroll(t + "</table>");
  body += FindingBanner(Get(data, "finding"));
  const json& runs = Get(data, "runs");
  const double total = Get(data, "runs_total").is_number() ? Get(data, "runs_total").get<double>() : 0;
  const size_t shown = runs.is_array() ? runs.size() : 0;
  if (total > static_cast<double>(shown)) {
    body += "<p class=\"note\" id=\"runs-limited\">The latest " + E(Num(json(shown))) + " of " +
            E(Num(json(total))) + " runs are shown";
    if (static_cast<size_t>(total) > shown && shown < kDashboardMaxRuns) {
      body += " (<a href=\"/series/" + E(Str(Get(s, "series_key"))) +
              "?limit=" + std::to_string(kDashboardMaxRuns) + "\">the latest " +
              std::to_string(kDashboardMaxRuns) + "</a>)";
    }
    body += ".</p>\n";
  }
  body += "<h2>Median latency over time</h2>\n";
  body +=
      "<p class=\"note\">Each point is a run's median; the band its " +
      E(Num(json(Get(data, "confidence").is_number() ? Get(data, "confidence").get<double>() * 100 : 95))) +
      " % confidence interval (distribution-free, from the run's samples). Circled: the baseline the newest "
      "runs were judged against; triangles: the judged runs. Click a point to open its run.</p>\n";
  body += Canvas("chart-series", "series", "median latency of each run over time", 360);
  std::string r =
      "<table class=\"list\" id=\"runs\"><tr><th>run</th><th>recorded at</th><th>commit</th><th>branch</th>"
      "<th class=\"num\">median ms</th><th class=\"num\">interval</th><th class=\"num\">p90 ms</th>"
      "<th class=\"num\">p99 ms</th><th>verdict</th><th>judged as</th><th>tags</th><th></th></tr>\n";
  json previous = nullptr;
  for (const json& run : runs.is_array() ? runs : json::array()) {
    const std::string role = Str(Get(run, "role"));
    r += "<tr data-run=\"" + Id(Get(run, "id")) + "\"><td>" + RunLink(Get(run, "id")) + "</td><td>" +
         E(Str(Get(run, "recorded_at"))) + "</td><td><code>" + E(Str(Get(run, "git_commit")).substr(0, 10)) +
         "</code></td><td>" + E(Str(Get(run, "git_branch"))) + "</td><td class=\"num\">" +
         E(Num(Get(run, "median_ms"))) + "</td><td class=\"num\">" +
         (Get(run, "ci_low_ms").is_number()
              ? "[" + E(Num(Get(run, "ci_low_ms"))) + ", " + E(Num(Get(run, "ci_high_ms"))) + "]"
              : std::string("—")) +
         "</td><td class=\"num\">" + E(Num(Get(run, "p90_ms"))) + "</td><td class=\"num\">" +
         E(Num(Get(run, "p99_ms"))) + "</td><td>" + StateBadge(Str(Get(run, "verdict"))) +
         (Str(Get(run, "error")).empty() ? std::string() : " " + E(Str(Get(run, "error")))) + "</td><td>" +
         (role == "candidate" && Get(Get(data, "finding"), "state") == "regression" ? StateBadge("regression")
                                                                                    : E(role)) +
         "</td><td>" + Tags(Get(run, "tags")) + "</td><td>" +
         (previous.is_null() ? std::string()
                             : "<a href=\"/compare?a=" + Id(previous) + "&amp;b=" + Id(Get(run, "id")) +
                                   "\">against the previous</a>") +
         "</td></tr>\n";
    previous = Get(run, "id");
  }
  body += "<h2>Runs</h2>\n" + Scroll(r + "</table>") + CompareForm("");
  return Page({Str(Get(s, "model_name")) + " · " + Str(Get(s, "device_class")), body, &data, nullptr},
              options);
}

std::string RunPage(const json& data, const DashboardOptions& options) {
  const json& run = Get(data, "run");
  const json& s = Get(data, "series");
  const json& report = Get(data, "report");
  const std::string id = Id(Get(run, "id"));
  std::string t = "<table class=\"header\" id=\"run\">\n";
  t += Row("Series", SeriesLink(s, Str(Get(s, "model_name")) + " · " + Str(Get(s, "scenario")) + " · " +
                                       Str(Get(s, "device_class"))));
  t += Row("Recorded at", E(Str(Get(run, "recorded_at"))));
  t += Row("Kind", E(Str(Get(run, "kind"))));
  t += Row("Verdict", StateBadge(Str(Get(run, "verdict"))) +
                          (Str(Get(run, "error")).empty() ? std::string() : " " + E(Str(Get(run, "error")))));
  for (const auto& [key, label] : {std::pair{"user", "User"},
                                   {"ci_job", "CI job"},
                                   {"git_commit", "Commit"},
                                   {"git_branch", "Branch"}}) {
    if (!Str(Get(run, key)).empty()) t += Row(label, E(Str(Get(run, key))));
  }
  if (!Tags(Get(run, "tags")).empty()) t += Row("Tags", Tags(Get(run, "tags")));
  t += Row("Device", E(Str(Get(data, "device"))));
  if (!Str(Get(s, "model_hash")).empty())
    t += Row("Model hash", "<code>" + E(Str(Get(s, "model_hash"))) + "</code>");
  if (!Str(Get(data, "executable_hash")).empty()) {
    t += Row("Executable hash", "<code>" + E(Str(Get(data, "executable_hash"))) + "</code>");
  }
  t += Row("Samples stored", E(Num(Get(run, "samples"))));
  std::string body = Scroll(t + "</table>") + CompareForm(id);
  if (Get(data, "thinned") == true) {
    body += "<p class=\"note\" id=\"thinned\">The report's longest arrays are thinned to " +
            E(Num(Get(data, "max_points"))) + " evenly spaced entries for this page.</p>\n";
  }
  const bool bench = Get(report, "schema") == "remex.bench";
  if (bench) {
    body += "<h2>Report</h2>\n" + BenchSectionsHtml(report);
    const json& rows = Get(Get(report, "profile"), "rows");
    if (rows.is_array() && !rows.empty()) {
      std::vector<const json*> sorted;
      for (const json& row : rows) sorted.push_back(&row);
      std::stable_sort(sorted.begin(), sorted.end(), [](const json* a, const json* b) {
        const json& x = Get(*a, "total_ms");
        const json& y = Get(*b, "total_ms");
        return (x.is_number() ? x.get<double>() : 0) > (y.is_number() ? y.get<double>() : 0);
      });
      std::string p =
          "<table class=\"list\" id=\"profile\"><tr><th>op</th><th>kind</th><th class=\"num\">calls</th>"
          "<th class=\"num\">total ms</th><th class=\"num\">mean us</th><th class=\"num\">share "
          "%</th></tr>\n";
      for (size_t i = 0; i < sorted.size() && i < kMaxProfileRows; ++i) {
        const json& row = *sorted[i];
        p += "<tr><td>" + E(Str(Get(row, "name"))) + "</td><td>" + E(Str(Get(row, "kind"))) + "</td>";
        for (const char* k : {"calls", "total_ms", "mean_us", "share_percent"}) {
          p += "<td class=\"num\">" + E(Num(Get(row, k))) + "</td>";
        }
        p += "</tr>\n";
      }
      body +=
          "<details><summary>Every op of the profile</summary>\n" + Scroll(p + "</table>") + "</details>\n";
    }
  } else if (!report.is_null()) {
    std::string text = report.dump(2, ' ', false, json::error_handler_t::replace);
    const bool cut = text.size() > kMaxJsonBytes;
    if (cut) text.resize(kMaxJsonBytes);
    body += "<h2>Report</h2>\n<details open><summary>The " + E(Str(Get(report, "schema"))) + " report" +
            (cut ? " (its first 256 KiB)" : "") + "</summary><pre>" + E(text) + "</pre></details>\n";
  } else {
    body +=
        "<p class=\"note\" id=\"no-report\">This run has no report (it failed before it had one, or it was "
        "recorded without one). Its summary: <code>" +
        E(Str(Get(run, "summary"))) + "</code></p>\n";
  }
  return Page({"Run " + id + " · " + Str(Get(s, "model_name")), body, &data, bench ? &report : nullptr},
              options);
}

std::string ComparePage(const json& data, const DashboardOptions& options) {
  const json& a = Get(data, "a");
  const json& b = Get(data, "b");
  const std::string ia = Id(Get(Get(a, "run"), "id")), ib = Id(Get(Get(b, "run"), "id"));
  std::string body;
  if (Get(data, "same_series") != true) {
    body +=
        "<div class=\"banner\" id=\"different-series\"><p>The runs are of different series (model, compile "
        "options, scenario or device class differ): their differences are not only the change between "
        "them.</p></div>\n";
  }
  std::string t = "<table class=\"list\" id=\"sides\"><tr><th></th><th>a</th><th>b</th></tr>\n";
  auto both = [&](const std::string& label, auto cell) {
    t += "<tr><th>" + E(label) + "</th><td>" + cell(a) + "</td><td>" + cell(b) + "</td></tr>\n";
  };
  both("run", [](const json& side) { return RunLink(Get(Get(side, "run"), "id")); });
  both("recorded at", [](const json& side) { return E(Str(Get(Get(side, "run"), "recorded_at"))); });
  both("model", [](const json& side) {
    return SeriesLink(Get(side, "series"), Str(Get(Get(side, "series"), "model_name")));
  });
  both("scenario", [](const json& side) { return E(Str(Get(Get(side, "series"), "scenario"))); });
  both("device class", [](const json& side) { return E(Str(Get(Get(side, "series"), "device_class"))); });
  both("device", [](const json& side) { return E(Str(Get(side, "device"))); });
  both("commit", [](const json& side) {
    return "<code>" + E(Str(Get(Get(side, "run"), "git_commit")).substr(0, 10)) + "</code>";
  });
  both("branch", [](const json& side) { return E(Str(Get(Get(side, "run"), "git_branch"))); });
  both("verdict", [](const json& side) { return StateBadge(Str(Get(Get(side, "run"), "verdict"))); });
  body += Scroll(t + "</table>");
  body += "<p class=\"note\"><a href=\"/compare?a=" + ib + "&amp;b=" + ia + "\">Swap a and b</a></p>\n";
  const json& summary = Get(data, "summary");
  if (summary.is_array() && !summary.empty()) {
    std::string st =
        "<table class=\"list\" id=\"summary\"><tr><th>statistic</th><th class=\"num\">a</th>"
        "<th class=\"num\">b</th><th class=\"num\">b against a</th></tr>\n";
    for (const json& row : summary) {
      st += "<tr><td>" + E(Str(Get(row, "name"))) + "</td><td class=\"num\">" + E(Num(Get(row, "a"))) +
            "</td><td class=\"num\">" + E(Num(Get(row, "b"))) + "</td><td class=\"num\">" +
            E(Pct(Get(row, "change_pct"))) + "</td></tr>\n";
    }
    body += "<h2>Summary</h2>\n" + Scroll(st + "</table>");
  }
  const json& dist = Get(data, "distributions");
  const bool has_dist = (Get(dist, "a").is_array() && !Get(dist, "a").empty()) ||
                        (Get(dist, "b").is_array() && !Get(dist, "b").empty());
  body += "<h2>Latency distributions</h2>\n";
  if (has_dist) {
    body +=
        "<p class=\"note\">The share of each run's samples at or below a latency: a curve to the right is "
        "slower.</p>\n" +
        Canvas("chart-compare-distribution", "compare-distribution", "latency distributions", 320);
  } else {
    body += "<p class=\"note\">Neither run stored samples.</p>\n";
  }
  body += "<h2>Per-op differences</h2>\n";
  const json& profiles = Get(data, "profiles");
  if (Get(profiles, "a") != true || Get(profiles, "b") != true) {
    std::string which = Get(profiles, "a") != true && Get(profiles, "b") != true ? "Neither run has"
                        : Get(profiles, "a") != true                             ? "Run " + ia + " has"
                                                                                 : "Run " + ib + " has";
    body += "<p class=\"note\" id=\"no-profile\">" + E(which) +
            " a per-op profile (<code>remex bench --profile --record</code> records one).</p>\n";
  }
  const json& ops = Get(data, "ops");
  if (ops.is_array() && !ops.empty()) {
    const size_t bars = std::min<size_t>(20, ops.size());
    body +=
        "<p class=\"note\">Each op's total time in one profiled invocation, b against a, the largest "
        "difference "
        "first.</p>\n";
    body +=
        Canvas("chart-compare-ops", "compare-ops", "per-op differences", 80 + 24 * static_cast<int>(bars));
    std::string o =
        "<table class=\"list\" id=\"ops\"><tr><th>op</th><th>kind</th><th class=\"num\">a ms</th>"
        "<th class=\"num\">b ms</th><th class=\"num\">b − a ms</th><th class=\"num\">change</th>"
        "<th class=\"num\">calls a</th><th class=\"num\">calls b</th></tr>\n";
    for (const json& row : ops) {
      o += "<tr><td>" + E(Str(Get(row, "name"))) + "</td><td>" + E(Str(Get(row, "kind"))) +
           "</td><td class=\"num\">" + E(Num(Get(row, "a_ms"))) + "</td><td class=\"num\">" +
           E(Num(Get(row, "b_ms"))) + "</td><td class=\"num\">" + E(Num(Get(row, "diff_ms"))) +
           "</td><td class=\"num\">" + E(Pct(Get(row, "change_pct"))) + "</td><td class=\"num\">" +
           E(Num(Get(row, "a_calls"))) + "</td><td class=\"num\">" + E(Num(Get(row, "b_calls"))) +
           "</td></tr>\n";
    }
    body += Scroll(o + "</table>");
    if (Get(data, "ops_total").is_number() &&
        Get(data, "ops_total").get<double>() > static_cast<double>(ops.size())) {
      body += "<p class=\"note\">The " + E(Num(json(ops.size()))) + " largest of " +
              E(Num(Get(data, "ops_total"))) + " differences are listed.</p>\n";
    }
  }
  body += CompareForm("");
  return Page({"Run " + ia + " against run " + ib, body, &data, nullptr}, options);
}

std::string LoginPage(const std::string& next, const std::string& why, const DashboardOptions& options) {
  std::string body;
  if (!why.empty()) body += "<div class=\"banner error\"><p>" + E(why) + "</p></div>\n";
  body +=
      "<p>This dashboard needs its token (the file <code>remex dashboard --token-file</code> names).</p>\n"
      "<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"next\" value=\"" +
      E(next) +
      "\"><label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" "
      "required></label> "
      "<button type=\"submit\">Log in</button></form>\n";
  return Page({"Log in", body, nullptr, nullptr}, options);
}

std::string ErrorPage(int http_status, const std::string& title, const Status& status,
                      const DashboardOptions& options) {
  std::string body = "<div class=\"banner error\" id=\"error\" data-status=\"" + std::to_string(http_status) +
                     "\"><p>" + E(status.message().empty() ? status.ToString() : status.message()) +
                     "</p></div>\n" +
                     "<p><a href=\"/\">The series</a> · <a href=\"/farm\">the farm</a></p>\n";
  return Page({title, body, nullptr, nullptr}, options);
}

}  // namespace remex::tooling
