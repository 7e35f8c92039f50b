// A bench report (the JSON of report_json.h, schema remex.bench) as a self-contained
// HTML page with charts: `remex bench --html REPORT.html`. The input is the JSON, so that
// every front end with a report (the CLI, the Python client) writes the same page.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace remex::tooling {

// The canvas ids of the charts BenchHtml draws for `bench`, in page order:
//   "chart-histogram", "chart-timeline": the latency samples, when there are any: the
//     timeline of the last level of "load.levels" (x: issue time in s, y: latency in ms),
//     else "benchmark.samples_ms" (x: sample index, y: mean ms per call);
//   "chart-throughput-latency": "load.levels", one point per level (x: throughput_qps,
//     y: p50, p90 and p99 of latency_ms), when there is a level;
//   "chart-profile": the 20 rows of "profile.rows" with the largest total_ms, when there
//     is a row (and below it a table of the 10 slowest "profile.nodes", when there are).
// Fields of the wrong type count as absent.
std::vector<std::string> BenchChartIds(const nlohmann::json& bench);

// The page: a header table (model, device, server, scenario, function, command, date,
// schema, summary, and "environment" and "warnings" when present), the charts of
// BenchChartIds (Chart.js, inlined: the page loads nothing from the network or beside
// it), and a table of the load levels. The report goes into the page whole, as JSON in a
// <script type="application/json" id="remex-report"> element with '<', '>' and '&'
// escaped, so no text of the report (a model name, ...) can end the element; every
// text in the HTML is escaped. After Chart.js draws a chart, the page's script sets
// data-rendered="true" on its canvas, and #render-status says "N of M charts rendered"
// (with data-rendered="N"), or why one failed. Never fails: invalid UTF-8 is replaced.
std::string BenchHtml(const nlohmann::json& bench);

// `text` with &, <, >, " and ' as character references, for HTML text and attributes.
std::string HtmlEscape(std::string_view text);

// The parts of BenchHtml that other pages with a bench report reuse (remex dashboard's
// run page, dashboard.h):
// The page's body between its <h1> and its footer: the header table, the chart sections
// (a canvas with data-chart set to its id, for each id of BenchChartIds) and the table of
// the load levels.
std::string BenchSectionsHtml(const nlohmann::json& bench);
// The page's style sheet (CSS), narrow screens (phones) included.
std::string_view ReportCss();
// Chart.js (chart.min.js of Debian's libjs-chart.js), for a <script> element: it holds no
// "</script" (the build refuses one that does).
std::string_view ChartJsSource();
// The chart runner (JavaScript for a <script> after Chart.js): defines remexCharts, with
// add({NAME: function (canvas) -> a Chart.js config}) to register builders, fail(why),
// and draw(), which draws every canvas[data-chart] with its builder, sets
// data-rendered="true" on each drawn canvas ("false" when its builder failed), sets
// #chartjs-version and keeps #render-status ("N of M charts rendered", data-rendered="N",
// with the failures named).
std::string_view ChartRunnerJs();
// The builders of the bench charts (BenchChartIds' names), reading the report from the
// page's <script type="application/json" id="remex-report">; after ChartRunnerJs, before
// remexCharts.draw().
std::string_view BenchChartsJs();
// `j` as JSON text that cannot end a <script> element: '<', '>' and '&' (which JSON has
// only inside strings) as \u escapes; invalid UTF-8 replaced.
std::string ScriptJson(const nlohmann::json& j);

// The version of the embedded Chart.js ("3.9.1"), from its banner; "unknown" without one.
std::string ChartJsVersion();

}  // namespace remex::tooling
