// The bench report writers: CSV rows and columns, and the HTML page's structure and
// escaping (tests/bench_report_test.py draws the pages in a browser).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "host_client/tooling/prepare.h"
#include "host_client/tooling/profile.h"
#include "host_client/tooling/text.h"
#include "host_client/tooling/report_csv.h"
#include "host_client/tooling/report_html.h"
#include "host_client/tooling/report_json.h"

namespace remex::tooling {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json PlainBench(const std::string& model = "model.onnx") {
  return {{"schema", kBenchSchema},
          {"schema_version", kBenchSchemaVersion},
          {"model", model},
          {"server", "127.0.0.1:5000"},
          {"device", "cpu"},
          {"benchmark", {{"function", "main"}, {"samples_ms", {1.5, 2.25, 1.75}}, {"median_ms", 1.75}}}};
}

json Level(int concurrency, json target_qps, double throughput, bool bounded) {
  return {{"concurrency", concurrency},
          {"target_qps", target_qps},
          {"queries", 100 * concurrency},
          {"duration_s", 2.0},
          {"throughput_qps", throughput},
          {"latency_ms",
           {{"p50", 1.0 * concurrency},
            {"p90", 2.0 * concurrency},
            {"p99", nullptr},
            {"mean", 1.25},
            {"max", 9.5}}},
          {"percentiles",
           {{{"q", 50},
             {"value_ms", 1.0 * concurrency},
             {"bounded", bounded},
             {"lower_ms", 0.5},
             {"upper_ms", 1.5}},
            {{"q", 99}, {"value_ms", nullptr}, {"bounded", false}}}},
          {"late", 3},
          {"dropped", 0},
          {"timeline", {{"issue_s", {0.0, 0.01, 0.02}}, {"latency_ms", {1.0, 1.5, 1.25}}}}};
}

json LoadBench() {
  json j = PlainBench();
  j.erase("benchmark");
  j["load"] = {{"scenario", "server"},
               {"target_qps", 50},
               {"samples_per_query", 1},
               {"seed", 7},
               {"levels", {Level(1, 50, 49.5, true), Level(2, nullptr, 90.25, false)}}};
  return j;
}

// The text of the page's report element.
std::string EmbeddedReport(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"remex-report\">";
  size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  begin += open.size();
  return html.substr(begin, html.find("</script>", begin) - begin);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The profile's per-node arithmetic (kernels/op_cost.h): each counted op's operations
// from its operands' shapes, its operand bytes, the rates over its median time per
// call, and the invoke's whole; ops that move memory count bytes only.
TEST(ProfileArithmetic, NodesGetTheirOperationsBytesAndRates) {
  client::ProfileResult p;
  p.total_nanos = 10'000'000;  // 10 ms
  p.run_total_nanos = {p.total_nanos};
  auto f32 = [](Shape s) { return client::OperandDesc{true, DType::kFloat32, std::move(s)}; };
  auto node = [&](std::string op, uint64_t calls, uint64_t nanos, std::vector<client::OperandDesc> in,
                  std::vector<client::OperandDesc> out) {
    client::ProfileNode n;
    n.name = op + "_0";
    n.op = std::move(op);
    n.calls = calls;
    n.run_nanos = {nanos};
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    p.nodes.push_back(std::move(n));
  };
  // Y [1, 8, 6, 6] from W [8, 4, 3, 3]: 288 outputs of 36 multiply-adds each.
  node("Conv", 1, 2'000'000, {f32({1, 4, 8, 8}), f32({8, 4, 3, 3}), f32({8})}, {f32({1, 8, 6, 6})});
  // X [1, 4, 5, 5] scattered through W [4, 3, 3, 3]: 100 inputs x 27.
  node("ConvTranspose", 1, 1'000'000, {f32({1, 4, 5, 5}), f32({4, 3, 3, 3}), client::OperandDesc{}},
       {f32({1, 3, 7, 7})});
  // [2, 3, 5] x [5, 7], called twice per invoke.
  node("MatMul", 2, 1'000'000, {f32({2, 3, 5}), f32({5, 7})}, {f32({2, 3, 7})});
  node("Gemm", 1, 1'000'000, {f32({3, 40}), f32({40, 24})}, {f32({3, 24})});
  node("Add", 1, 1'000'000, {f32({1000}), f32({1000})}, {f32({1000})});
  const ProfileReport r = ProfileReportOf(p);
  auto find = [&](const std::string& op) -> const ProfileNodeEntry& {
    for (const auto& n : r.nodes) {
      if (n.op == op) return n;
    }
    ADD_FAILURE() << op;
    return r.nodes.front();
  };
  EXPECT_DOUBLE_EQ(find("Conv").ops, 2.0 * 288 * 36);
  EXPECT_DOUBLE_EQ(find("Conv").bytes, (256 + 288 + 8 + 288) * 4.0);
  EXPECT_DOUBLE_EQ(find("Conv").gops_per_s, 2.0 * 288 * 36 / 2e-3 / 1e9);
  EXPECT_DOUBLE_EQ(find("Conv").gbytes_per_s, (256 + 288 + 8 + 288) * 4.0 / 2e-3 / 1e9);
  EXPECT_DOUBLE_EQ(find("ConvTranspose").ops, 2.0 * 100 * 27);
  EXPECT_DOUBLE_EQ(find("MatMul").ops, 2.0 * 42 * 5);
  EXPECT_DOUBLE_EQ(find("MatMul").gops_per_s, 2.0 * 42 * 5 / 0.5e-3 / 1e9);  // two calls in 1 ms
  EXPECT_DOUBLE_EQ(find("Gemm").ops, 2.0 * 3 * 24 * 40);
  EXPECT_EQ(find("Add").ops, 0.0);
  EXPECT_DOUBLE_EQ(find("Add").gbytes_per_s, 12000.0 / 1e-3 / 1e9);
  const double ops = 2.0 * 288 * 36 + 2.0 * 100 * 27 + 2 * (2.0 * 42 * 5) + 2.0 * 3 * 24 * 40;
  EXPECT_DOUBLE_EQ(r.ops, ops);
  EXPECT_DOUBLE_EQ(r.gops_per_s, ops / 10e-3 / 1e9);

  const std::string text = ProfileText(r);
  EXPECT_NE(text.find("GOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("GOP per invoke"), std::string::npos) << text;
  const json j = ToJson(r);
  ASSERT_TRUE(j.contains("nodes"));
  EXPECT_DOUBLE_EQ(j["ops"].get<double>(), ops);
  EXPECT_DOUBLE_EQ(j["nodes"][0]["ops"].get<double>(), r.nodes[0].ops);
  EXPECT_TRUE(j["nodes"][0].contains("gbytes_per_s"));
}

TEST(BenchCsv, PlainBenchHasOneRowPerSample) {
  EXPECT_EQ(BenchCsv(PlainBench()), "sample,latency_ms\r\n0,1.5\r\n1,2.25\r\n2,1.75\r\n");
}

TEST(BenchCsv, LoadHasOneRowPerLevelWithBoundsOnlyWhereBounded) {
  std::string csv = BenchCsv(LoadBench());
  EXPECT_EQ(
      csv,
      "concurrency,target_qps,queries,duration_s,throughput_qps,p50_ms,p50_lower_ms,p50_upper_ms,p90_ms,"
      "p90_lower_ms,p90_upper_ms,p99_ms,p99_lower_ms,p99_upper_ms,mean_ms,max_ms,late,dropped\r\n"
      "1,50,100,2.0,49.5,1.0,0.5,1.5,2.0,,,,,,1.25,9.5,3,0\r\n"
      "2,,200,2.0,90.25,2.0,,,4.0,,,,,,1.25,9.5,3,0\r\n");
}

TEST(BenchCsv, FieldsOfTheWrongTypeAreEmpty) {
  json j = PlainBench();
  j["benchmark"]["samples_ms"] = {1.0, "x", nullptr};
  EXPECT_EQ(BenchCsv(j), "sample,latency_ms\r\n0,1.0\r\n1,\r\n2,\r\n");
  j["benchmark"]["samples_ms"] = "not a list";
  EXPECT_EQ(BenchCsv(j), "sample,latency_ms\r\n");
  EXPECT_EQ(BenchCsv(json("not an object")), "sample,latency_ms\r\n");
  json load = LoadBench();
  load["load"]["levels"] = {42, {{"concurrency", "four"}}};
  EXPECT_EQ(Count(BenchCsv(load), "\r\n"), 2u);  // the header, and the object level with empty fields
}

TEST(BenchChartIds, FollowTheReportsData) {
  using Ids = std::vector<std::string>;
  EXPECT_EQ(BenchChartIds(PlainBench()), (Ids{"chart-histogram", "chart-timeline"}));
  json profiled = PlainBench();
  profiled["profile"] = {{"rows", {{{"name", "Conv"}, {"kind", "kernel"}, {"total_ms", 1.0}}}},
                         {"total_ms", 1.0}};
  EXPECT_EQ(BenchChartIds(profiled), (Ids{"chart-histogram", "chart-timeline", "chart-profile"}));
  EXPECT_EQ(BenchChartIds(LoadBench()),
            (Ids{"chart-histogram", "chart-timeline", "chart-throughput-latency"}));
  json no_timeline = LoadBench();
  no_timeline["load"]["levels"][1].erase("timeline");
  EXPECT_EQ(BenchChartIds(no_timeline), (Ids{"chart-throughput-latency"}));
  EXPECT_EQ(BenchChartIds(json::object()), Ids{});
}

TEST(BenchHtml, HasACanvasPerChartAndTheReportWhole) {
  json j = LoadBench();
  j["profile"] = {{"rows", {{{"name", "Conv"}, {"kind", "kernel"}, {"total_ms", 1.0}}}}, {"total_ms", 1.0}};
  std::string html = BenchHtml(j);
  for (const std::string& id : BenchChartIds(j)) {
    EXPECT_EQ(Count(html, "<canvas id=\"" + id + "\""), 1u) << id;
  }
  EXPECT_EQ(json::parse(EmbeddedReport(html)), j);
  EXPECT_NE(html.find("<td>server</td>"), std::string::npos);  // the scenario
  EXPECT_NE(html.find("id=\"render-status\""), std::string::npos);
}

// A profile with nodes gets a table of the slowest ten, in the report's order, their
// names escaped.
TEST(BenchHtml, ProfileNodesGetATableOfTheSlowest) {
  json j = PlainBench();
  json nodes = json::array();
  for (int i = 0; i < 12; ++i) {
    nodes.push_back({{"name", "conv_" + std::to_string(i) + "+<relu>"},
                     {"op", "FusedConv"},
                     {"calls", 1},
                     {"median_ms", 12.0 - i},
                     {"min_ms", 11.0 - i},
                     {"max_ms", 13.0 - i},
                     {"share_percent", 5.0},
                     {"inputs", {{{"dtype", "float32"}, {"shape", {1, 8, 64, 64}}}, nullptr}},
                     {"outputs", {{{"dtype", "float32"}, {"shape", {1, 32, 64, 64}}}}}});
  }
  j["profile"] = {{"rows", {{{"name", "FusedConv"}, {"kind", "kernel"}, {"total_ms", 1.0}}}},
                  {"total_ms", 1.0},
                  {"nodes", nodes}};
  const std::string html = BenchHtml(j);
  ASSERT_EQ(Count(html, "id=\"profile-nodes\""), 1u);
  EXPECT_NE(html.find("<td>conv_0+&lt;relu&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>conv_9+&lt;relu&gt;</td>"), std::string::npos);
  EXPECT_EQ(html.find("<td>conv_10+&lt;relu&gt;</td>"), std::string::npos);  // ten at most
  EXPECT_LT(html.find("conv_0+"), html.find("conv_1+"));
  EXPECT_NE(html.find("<td>float32[1,8,64,64], - -&gt; float32[1,32,64,64]</td>"), std::string::npos);
  // Without nodes (a report of an older remex): no table.
  j["profile"].erase("nodes");
  EXPECT_EQ(BenchHtml(j).find("profile-nodes"), std::string::npos);
}

TEST(BenchHtml, TextOfTheReportCannotEndTheScriptOrInjectMarkup) {
  const std::string evil = "</script><script>alert(1)</script><!-- <b>&amp;";
  json j = PlainBench(evil);
  j["environment"] = {{"cpu", {{"model", "<img src=x onerror=alert(2)>"}}}};
  j["warnings"] = {{{"message", "governor is 'powersave' <fix>"}}};
  j["command"] = {"remex", "bench", evil};
  std::string html = BenchHtml(j);
  // Only the three script elements end: the report's, Chart.js's and the page's.
  EXPECT_EQ(Count(html, "</script>"), 3u);
  EXPECT_EQ(Count(html, "<script"), 3u);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<!--"), std::string::npos);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);  // the title and header
  EXPECT_NE(html.find("cpu.model"), std::string::npos);
  EXPECT_NE(html.find("governor is &#39;powersave&#39; &lt;fix&gt;"), std::string::npos);
  // The embedded JSON still reads back as the report.
  EXPECT_EQ(json::parse(EmbeddedReport(html)), j);
}

TEST(BenchHtml, InvalidUtf8IsReplacedNotThrown) {
  std::string html = BenchHtml(PlainBench("bad\xff\xfe name"));
  json back = json::parse(EmbeddedReport(html));
  EXPECT_EQ(back["model"], "bad\xEF\xBF\xBD\xEF\xBF\xBD name");  // U+FFFD twice
}

TEST(BenchHtml, LoadsNothingFromTheNetwork) {
  std::string html = BenchHtml(LoadBench());
  EXPECT_FALSE(std::regex_search(
      html, std::regex(R"((src|href|action)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_TRUE(std::regex_match(ChartJsVersion(), std::regex(R"(\d+\.\d+\.\d+)"))) << ChartJsVersion();
  EXPECT_NE(html.find(ChartJsVersion()), std::string::npos);
}

TEST(HtmlEscape, EscapesMarkupAndQuotes) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
}

TEST(EnsureWritableFile, LeavesNoFileAndNamesTheProblem) {
  fs::path dir = fs::temp_directory_path() / ("remex_report_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "report.html").string();
  EXPECT_TRUE(EnsureWritableFile(path, "the HTML report").ok());
  EXPECT_FALSE(fs::exists(path));
  Status missing = EnsureWritableFile((dir / "no" / "such" / "report.html").string(), "the HTML report");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("the HTML report"), std::string::npos) << missing.ToString();
  Status folder = EnsureWritableFile(dir.string(), "the CSV report");
  EXPECT_FALSE(folder.ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace remex::tooling
