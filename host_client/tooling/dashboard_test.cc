// The dashboard's routes and validation, its pages and data over a real SQLite store,
// its access rules, and the HTTP server over a real loopback socket
// (tests/dashboard_test.py drives a real `remex dashboard` from headless Chromium).
#include "host_client/tooling/dashboard.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <cmath>
#include <filesystem>
#include <thread>

#include "host_client/tooling/web_server.h"
#include "tests/postgres_server.h"

namespace remex::tooling {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kKey = "0123456789abcdef0123456789abcdef";

TEST(DashboardRouteTest, PagesAndTheirParameters) {
  auto overview = ParseDashboardTarget("/");
  ASSERT_TRUE(overview.ok());
  EXPECT_EQ(overview->page, DashboardRoute::Page::kOverview);
  EXPECT_FALSE(overview->api);
  auto api = ParseDashboardTarget("/api/overview");
  ASSERT_TRUE(api.ok());
  EXPECT_TRUE(api->api);
  EXPECT_EQ(ParseDashboardTarget("/farm")->page, DashboardRoute::Page::kFarm);
  EXPECT_TRUE(ParseDashboardTarget("/api/farm")->api);
  auto series = ParseDashboardTarget("/series/" + kKey + "?limit=50");
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  EXPECT_EQ(series->series_key, kKey);
  EXPECT_EQ(series->limit, 50u);
  EXPECT_EQ(ParseDashboardTarget("/series/" + kKey)->limit, kDashboardDefaultRuns);
  auto run = ParseDashboardTarget("/api/run/42");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->run, 42);
  EXPECT_TRUE(run->api);
  auto compare = ParseDashboardTarget("/compare?b=7&a=%33");  // %33 is '3'
  ASSERT_TRUE(compare.ok()) << compare.status().ToString();
  EXPECT_EQ(compare->run, 3);
  EXPECT_EQ(compare->other, 7);
  EXPECT_EQ(ParseDashboardTarget("/run/" + std::to_string(kDashboardMaxRunId))->run, kDashboardMaxRunId);
}

TEST(DashboardRouteTest, BadParametersAreRefusedByName) {
  auto invalid = [](const std::string& target, const std::string& says) {
    auto r = ParseDashboardTarget(target);
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << target << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << target << ": " << r.status().ToString();
  };
  for (const char* id : {"0", "-1", "abc", "1e3", "12345678901234567", "9007199254740992", " 1", "1 "}) {
    invalid(std::string("/run/") + id, "run id");
  }
  invalid("/run/", "run id");
  invalid("/series/" + kKey.substr(1), "series key");
  invalid("/series/" + kKey + "0", "series key");
  invalid("/series/0123456789ABCDEF0123456789abcdef", "series key");
  invalid("/series/../../etc/passwd", "series key");
  invalid("/series/" + kKey + "?limit=0", "limit");
  invalid("/series/" + kKey + "?limit=1001", "limit");
  invalid("/series/" + kKey + "?limit=x", "limit");
  invalid("/compare?a=1", "two runs");
  invalid("/compare?a=1&b=x", "b must be a run id");
  invalid("/compare?a=1&b=2&a=3", "twice");
  invalid("/compare?a=1&b=2&c=3", "'c'");
  invalid("/compare?a=%zz&b=2", "%-escape");
  invalid("/compare?a=1&b=2%", "%-escape");
  invalid("/?x=1", "no query parameter 'x'");
  invalid("/run/1?verbose", "no query parameter 'verbose'");
  for (const char* path :
       {"/nothing", "/run", "/series", "/api/", "/api/nothing", "/farm/", "/api/login", "//farm", "/Farm"}) {
    auto r = ParseDashboardTarget(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << path;
  }
  EXPECT_EQ(ParseDashboardTarget("/" + std::string(3000, 'a')).status().code(), StatusCode::kNotFound);
}

TEST(DashboardThinTest, LongArraysAreThinnedAlike) {
  json report = {{"benchmark", {{"samples_ms", json::array()}, {"sample_end_s", json::array()}}},
                 {"short", {1, 2, 3}},
                 {"rows", json::array()}};
  for (int i = 0; i < 100; ++i) {
    report["benchmark"]["samples_ms"].push_back(i * 1.5);
    report["benchmark"]["sample_end_s"].push_back(i);
    report["rows"].push_back({{"i", i}});
  }
  EXPECT_TRUE(ThinReport(report, 10));
  const json& ms = report["benchmark"]["samples_ms"];
  const json& end = report["benchmark"]["sample_end_s"];
  ASSERT_EQ(ms.size(), 10u);
  ASSERT_EQ(end.size(), 10u);
  EXPECT_EQ(end.front(), 0);
  EXPECT_EQ(end.back(), 99);
  for (size_t i = 0; i < 10; ++i) EXPECT_DOUBLE_EQ(ms[i].get<double>(), end[i].get<double>() * 1.5);
  EXPECT_EQ(report["rows"].size(), 10u);
  EXPECT_EQ(report["short"], json({1, 2, 3}));
  EXPECT_FALSE(ThinReport(report, 10));
}

// A store with a series whose two newest runs are 50 % slower, a profiled pair, a
// self-test series and a model whose name tries to be markup.
class DashboardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remex-dashboard-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    url_ = "sqlite://" + (dir_ / "results.sqlite").string();
    auto store = OpenResultsStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 7; ++i) {
      const double scale = i < 5 ? 1.0 + 0.002 * (i % 3) : 1.5;
      RunRecord r = Bench("<b>model</b>.onnx", i, scale);
      if (i == 5) r.profile = r.report["profile"] = Profile({{"Conv", 2.0}, {"Relu", 0.5}, {"Add", 0.2}});
      if (i == 6) r.profile = r.report["profile"] = Profile({{"Conv", 3.5}, {"Relu", 0.4}, {"MatMul", 0.3}});
      auto id = (*store)->Record(r);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids_.push_back(*id);
      key_ = r.SeriesKey();
    }
    for (int i = 0; i < 3; ++i) {
      RunRecord t;
      t.recorded_at = "2026-12-02T09:0" + std::to_string(i) + ":00Z";
      t.kind = t.model_name = t.scenario = "self-test";
      t.device_class = "gpu/127.0.0.1:9190";
      t.tags = {{"farm.pool", "gpu"}, {"farm.device", "127.0.0.1:9190"}, {"self-test.reason", "periodic"}};
      t.summary = {
          {"count", 5}, {"median_ms", 0.5 + i}, {"p90_ms", 1.0 + i}, {"min_ms", 0.4}, {"max_ms", 2.0 + i}};
      t.verdict = i == 2 ? "fail" : "pass";
      t.error = i == 2 ? "outputs differ from the reference" : "";
      ASSERT_TRUE((*store)->Record(t).ok());
    }
    options_.results_url = url_;
    options_.version = "test";
    dashboard_ = std::make_unique<Dashboard>(std::move(store).value(), options_);
  }
  void TearDown() override {
    dashboard_.reset();
    fs::remove_all(dir_);
  }

  static json Profile(const std::vector<std::pair<std::string, double>>& ops) {
    json rows = json::array();
    for (const auto& [name, ms] : ops) {
      rows.push_back(
          {{"name", name}, {"kind", "kernel"}, {"calls", 1}, {"total_ms", ms}, {"mean_us", ms * 1000}});
    }
    return {{"rows", rows}};
  }

  static RunRecord Bench(const std::string& model, int i, double scale) {
    RunRecord r;
    r.recorded_at = "2026-12-02T08:0" + std::to_string(i) + ":00Z";
    r.kind = "bench";
    r.model_name = model;
    r.model_hash = std::string(32, 'a');
    r.scenario = "time-evaluator";
    r.device_class = "cpu:test";
    r.device = "cpu";
    r.git_commit = "c0ffee" + std::to_string(i);
    for (int k = 0; k < 40; ++k) r.samples_ms.push_back(scale * (1.0 + 0.001 * ((k * 7) % 40)));
    std::vector<double> sorted = r.samples_ms;
    std::sort(sorted.begin(), sorted.end());
    r.summary = {{"count", 40}, {"median_ms", (sorted[19] + sorted[20]) / 2}, {"p90_ms", sorted[35]}};
    r.report = {{"schema", "remex.bench"},
                {"schema_version", 2},
                {"model", model},
                {"benchmark", {{"samples_ms", r.samples_ms}, {"median_ms", r.summary["median_ms"]}}}};
    r.verdict = "pass";
    return r;
  }

  WebResponse Get(const std::string& target, const std::string& method = "GET") {
    WebRequest request;
    request.method = method;
    request.target = target;
    return dashboard_->Handle(request);
  }

  // The JSON a page embeds as #remex-data.
  static json Embedded(const std::string& html, const std::string& id = "remex-data") {
    const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
    const size_t begin = html.find(open);
    if (begin == std::string::npos) return nullptr;
    const size_t end = html.find("</script>", begin);
    return json::parse(html.substr(begin + open.size(), end - begin - open.size()));
  }

  fs::path dir_;
  std::string url_, key_;
  std::vector<int64_t> ids_;
  DashboardOptions options_;
  std::unique_ptr<Dashboard> dashboard_;
};

TEST_F(DashboardStoreTest, SeriesMarksTheRegressionAndBandsEachMedian) {
  auto data = dashboard_->SeriesData(key_, kDashboardDefaultRuns);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ((*data)["finding"]["state"], "regression") << (*data)["finding"].dump();
  const json& runs = (*data)["runs"];
  ASSERT_EQ(runs.size(), 7u);
  EXPECT_EQ(runs[6]["role"], "candidate");
  EXPECT_EQ(runs[5]["role"], "candidate");
  EXPECT_EQ(runs[4]["role"], "baseline");
  for (const json& r : runs) {
    ASSERT_TRUE(r["ci_low_ms"].is_number()) << r.dump();
    EXPECT_LE(r["ci_low_ms"].get<double>(), r["median_ms"].get<double>());
    EXPECT_GE(r["ci_high_ms"].get<double>(), r["median_ms"].get<double>());
    EXPECT_TRUE(r["t_ms"].is_number());
  }
  EXPECT_EQ(runs[0]["t_ms"], int64_t{1796198400000});  // 2026-12-02T08:00:00Z
  auto two = dashboard_->SeriesData(key_, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)["runs"].size(), 2u);
  EXPECT_EQ((*two)["runs_total"], 7);

  WebResponse page = Get("/series/" + key_);
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("data-chart=\"series\""), std::string::npos);
  EXPECT_NE(page.body.find("state-regression"), std::string::npos);
  EXPECT_NE(page.body.find("href=\"/run/" + std::to_string(ids_[6]) + "\""), std::string::npos);
  EXPECT_EQ(Embedded(page.body)["finding"]["state"], "regression");
  // The model's name is text, never markup.
  EXPECT_EQ(page.body.find("<b>model</b>"), std::string::npos);
  EXPECT_NE(page.body.find("&lt;b&gt;model&lt;/b&gt;.onnx"), std::string::npos);
}

TEST_F(DashboardStoreTest, OverviewListsSeriesAndCountsSelfTestsApart) {
  auto data = dashboard_->OverviewData();
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_EQ((*data)["series"].size(), 1u);
  EXPECT_EQ((*data)["series"][0]["series_key"], key_);
  EXPECT_EQ((*data)["series"][0]["latest"]["id"], ids_[6]);
  EXPECT_EQ((*data)["series"][0]["finding"]["state"], "regression");
  EXPECT_EQ((*data)["self_test_series"], 1);
  EXPECT_TRUE((*data)["farm"].is_null());
  WebResponse page = Get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("0 of 0 charts rendered"), std::string::npos);
  EXPECT_EQ(page.body.find("<canvas"), std::string::npos);
  WebResponse api = Get("/api/overview");
  EXPECT_EQ(api.content_type, "application/json");
  EXPECT_EQ(json::parse(api.body)["series"][0]["series_key"], key_);
}

TEST_F(DashboardStoreTest, FarmPageDrawsSelfTestsFromTheStoreWithoutAFarm) {
  auto data = dashboard_->FarmData();
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_EQ((*data)["self_tests"].size(), 1u);
  const json& t = (*data)["self_tests"][0];
  EXPECT_EQ(t["pool"], "gpu");
  EXPECT_EQ(t["device"], "127.0.0.1:9190");
  ASSERT_EQ(t["points"].size(), 3u);
  EXPECT_EQ(t["points"][1]["median_ms"], 1.5);
  EXPECT_EQ(t["points"][2]["verdict"], "fail");
  EXPECT_EQ(t["points"][2]["reason"], "periodic");
  WebResponse page = Get("/farm");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("id=\"no-farm\""), std::string::npos);
  EXPECT_NE(page.body.find("data-chart=\"selftest\""), std::string::npos);
  EXPECT_NE(page.body.find("outputs differ from the reference"), std::string::npos);
}

TEST_F(DashboardStoreTest, FarmThatCannotBeReachedIsSaidOnThePage) {
  options_.farm_url = "redis://127.0.0.1:1";
  options_.farm_timeout = std::chrono::milliseconds(500);
  auto store = OpenResultsStore(url_);
  ASSERT_TRUE(store.ok());
  Dashboard dashboard(std::move(store).value(), options_);
  WebRequest request{"GET", "/farm", "", "", "", "", false};
  WebResponse page = dashboard.Handle(request);
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("id=\"farm-error\""), std::string::npos);
  EXPECT_NE(page.body.find("data-chart=\"selftest\""), std::string::npos);  // the store's part still shows
}

TEST_F(DashboardStoreTest, CompareListsPerOpDifferencesLargestFirst) {
  auto data = dashboard_->CompareData(ids_[5], ids_[6]);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  const json& ops = (*data)["ops"];
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0]["name"], "Conv");
  EXPECT_DOUBLE_EQ(ops[0]["diff_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(ops[0]["change_pct"].get<double>(), 75);
  EXPECT_EQ(ops[1]["name"], "MatMul");  // only in b: +0.3
  EXPECT_TRUE(ops[1]["a_ms"].is_null());
  EXPECT_TRUE(ops[1]["change_pct"].is_null());
  EXPECT_EQ(ops[2]["name"], "Add");  // only in a: -0.2
  EXPECT_EQ(ops[3]["name"], "Relu");
  EXPECT_TRUE((*data)["same_series"].get<bool>());
  EXPECT_EQ((*data)["distributions"]["a"].size(), 201u);
  EXPECT_EQ((*data)["summary"][0]["name"], "median_ms");
  EXPECT_NEAR((*data)["summary"][0]["change_pct"].get<double>(), 0, 1e-9);  // both slow runs
  auto slower = dashboard_->CompareData(ids_[0], ids_[6]);
  ASSERT_TRUE(slower.ok());
  EXPECT_NEAR((*slower)["summary"][0]["change_pct"].get<double>(), 50, 1e-9);
  WebResponse page = Get("/compare?a=" + std::to_string(ids_[5]) + "&b=" + std::to_string(ids_[6]));
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("data-chart=\"compare-ops\""), std::string::npos);
  EXPECT_NE(page.body.find("data-chart=\"compare-distribution\""), std::string::npos);
  // A run without a profile says so.
  WebResponse plain = Get("/compare?a=" + std::to_string(ids_[0]) + "&b=" + std::to_string(ids_[6]));
  EXPECT_NE(plain.body.find("id=\"no-profile\""), std::string::npos);
}

TEST_F(DashboardStoreTest, RunPageCarriesTheBenchChartsAndItsReport) {
  WebResponse page = Get("/run/" + std::to_string(ids_[6]));
  EXPECT_EQ(page.status, 200);
  for (const char* chart : {"chart-histogram", "chart-timeline", "chart-profile"}) {
    EXPECT_NE(page.body.find(std::string("data-chart=\"") + chart + "\""), std::string::npos) << chart;
  }
  EXPECT_EQ(Embedded(page.body, "remex-report")["profile"]["rows"].size(), 3u);
  EXPECT_EQ(Embedded(page.body)["run"]["id"], ids_[6]);
  EXPECT_NE(page.body.find("id=\"profile\""), std::string::npos);
  // A self-test run has no report: said, not failed.
  auto runs = dashboard_->FarmData();
  const json id = (*runs)["self_tests"][0]["points"][0]["id"];
  WebResponse self_test = Get("/run/" + id.dump());
  EXPECT_EQ(self_test.status, 200);
  EXPECT_NE(self_test.body.find("id=\"no-report\""), std::string::npos);
}

TEST_F(DashboardStoreTest, ErrorsArePagesWithTheirStatus) {
  EXPECT_EQ(Get("/run/987654").status, 404);
  EXPECT_EQ(Get("/series/ffffffffffffffffffffffffffffffff").status, 404);
  WebResponse bad = Get("/run/abc");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("run id"), std::string::npos);
  EXPECT_EQ(Get("/no/such/page").status, 404);
  WebResponse api = Get("/api/run/987654");
  EXPECT_EQ(api.status, 404);
  EXPECT_EQ(json::parse(api.body)["error"]["code"], "NOT_FOUND");
  EXPECT_EQ(Get("/", "POST").status, 405);
  EXPECT_EQ(Get("/", "DELETE").status, 405);
  EXPECT_EQ(Get("/", "HEAD").status, 200);
  EXPECT_EQ(Get("/favicon.ico").status, 204);
  WebResponse any = Get("/");
  bool csp = false;
  for (const auto& [name, value] : any.headers)
    csp = csp || (name == "Content-Security-Policy" && value.find("default-src 'none'") != std::string::npos);
  EXPECT_TRUE(csp);
}

TEST_F(DashboardStoreTest, ATokenGuardsEveryPage) {
  options_.token = "0123456789abcdef-secret";
  auto store = OpenResultsStore(url_);
  ASSERT_TRUE(store.ok());
  Dashboard dashboard(std::move(store).value(), options_);
  WebRequest request{"GET", "/series/" + key_, "", "", "", "", false};
  WebResponse denied = dashboard.Handle(request);
  EXPECT_EQ(denied.status, 401);
  EXPECT_NE(denied.body.find("action=\"/login\""), std::string::npos);
  EXPECT_EQ(denied.body.find(key_.substr(0, 8) + "</code>"), std::string::npos);
  request.target = "/api/overview";
  EXPECT_EQ(dashboard.Handle(request).status, 401);
  request.authorization = "Bearer 0123456789abcdef-secret";
  EXPECT_EQ(dashboard.Handle(request).status, 200);
  request.authorization = "Bearer 0123456789abcdef-wrong!";
  EXPECT_EQ(dashboard.Handle(request).status, 401);
  // The form: a wrong token stays out, the right one gets a cookie that opens the pages.
  WebRequest login{"POST", "/login", "", "", "application/x-www-form-urlencoded", "token=nope&next=%2Ffarm",
                   false};
  EXPECT_EQ(dashboard.Handle(login).status, 401);
  login.body = "token=0123456789abcdef-secret&next=%2Ffarm";
  WebResponse in = dashboard.Handle(login);
  EXPECT_EQ(in.status, 303);
  std::string cookie, location;
  for (const auto& [name, value] : in.headers) {
    if (name == "Set-Cookie") cookie = value;
    if (name == "Location") location = value;
  }
  EXPECT_EQ(location, "/farm");
  ASSERT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_EQ(cookie.find("secret"), std::string::npos);  // the cookie is not the token
  request.authorization.clear();
  request.cookie = "other=1; " + cookie.substr(0, cookie.find(';'));
  request.target = "/farm";
  EXPECT_EQ(dashboard.Handle(request).status, 200);
  request.cookie = "remex_dashboard=00";
  EXPECT_EQ(dashboard.Handle(request).status, 401);
  // Only a path of this site is a place to return to.
  login.body = "token=0123456789abcdef-secret&next=%2F%2Fevil.example";
  for (const auto& [name, value] : dashboard.Handle(login).headers) {
    if (name == "Location") {
      EXPECT_EQ(value, "/");
    }
  }
}

TEST(WebServerTest, ListenAddressesAndLoopback) {
  auto v4 = ParseListenAddress("127.0.0.1:0", "--listen");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->first, "127.0.0.1");
  EXPECT_EQ(v4->second, 0);
  auto v6 = ParseListenAddress("[::1]:8080", "--listen");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first, "::1");
  EXPECT_EQ(v6->second, 8080);
  for (const char* bad : {"127.0.0.1", ":80", "host:", "h:65536", "::1:80", "[::1]80", "h:-1"}) {
    EXPECT_EQ(ParseListenAddress(bad, "--listen").status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.1.2.3"));
  EXPECT_FALSE(IsLoopbackHost("example.org"));
}

// One request over a real socket: the response's whole bytes.
std::string Exchange(uint16_t port, const std::string& request) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  boost::asio::write(socket, boost::asio::buffer(request));
  std::string out;
  boost::system::error_code ec;
  char buffer[4096];
  for (;;) {
    const size_t n = socket.read_some(boost::asio::buffer(buffer), ec);
    out.append(buffer, n);
    if (ec) break;
  }
  return out;
}

TEST(WebServerTest, AnswersKeepsBoundsAndStops) {
  WebServerOptions options;
  options.port = 0;
  options.stop_on_signals = false;
  options.max_body_bytes = 64;
  auto server = WebServer::Listen(options, [](const WebRequest& r) {
    if (r.target == "/throw") throw std::runtime_error("boom");
    return WebResponse{200, "text/plain", r.method + " " + r.target + " " + r.body, {{"X-Test", "yes"}}};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);
  int stopped_by = -1;
  std::thread runner([&] { stopped_by = (*server)->Run(); });
  std::string ok = Exchange(port, "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_NE(ok.find("X-Test: yes"), std::string::npos);
  EXPECT_NE(ok.find("GET /a?b=1 "), std::string::npos);
  std::string head = Exchange(port, "HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(head.find("Content-Length: 8"), std::string::npos) << head;  // "HEAD /a "
  EXPECT_EQ(head.find("HEAD /a "), std::string::npos);
  std::string post =
      Exchange(port, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_NE(post.find("POST /p hello"), std::string::npos);
  std::string big =
      Exchange(port, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  std::string thrown = Exchange(port, "GET /throw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(thrown.rfind("HTTP/1.1 500", 0), 0u) << thrown;
  EXPECT_NE(thrown.find("boom"), std::string::npos);
  std::string garbage = Exchange(port, "\x16\x03\x01 not http\r\n\r\n");
  EXPECT_EQ(garbage, "");  // closed
  // Two requests on one connection.
  std::string two = Exchange(
      port, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(two.find("GET /1 "), std::string::npos);
  EXPECT_NE(two.find("GET /2 "), std::string::npos);
  (*server)->Stop();
  runner.join();
  EXPECT_EQ(stopped_by, 0);
}

TEST(WebServerTest, UnusableAddressesAndTlsFilesAreRefused) {
  WebServerOptions options;
  options.host = "not-an-address";
  EXPECT_EQ(WebServer::Listen(options, nullptr).status().code(), StatusCode::kInvalidArgument);
  options.host = "127.0.0.1";
  options.port = 0;
  options.tls = rpc::TlsServerConfig{"/no/such/cert.pem", "/no/such/key.pem", ""};
  auto tls = WebServer::Listen(options, nullptr);
  EXPECT_EQ(tls.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tls.status().message().find("/no/such/cert.pem"), std::string::npos);
}

// A PostgreSQL server that restarts breaks the dashboard's connection: with `reopen`
// the next page is answered on a fresh one; without it the page says the store failed.
TEST(DashboardReconnectTest, APageAfterTheDatabaseRestartedIsAnsweredOnANewConnection) {
  if (remex::testing::TempPostgres::BinDir().empty()) GTEST_SKIP() << "PostgreSQL is not installed";
  remex::testing::TempPostgres pg;
  ASSERT_TRUE(pg.Start()) << pg.error();
  const std::string url = pg.Url();
  auto first = OpenResultsStore(url);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  RunRecord r;
  r.recorded_at = "2026-12-02T08:00:00Z";
  r.kind = "bench";
  r.model_name = "m.onnx";
  r.model_hash = std::string(32, 'a');
  r.scenario = "time-evaluator";
  r.device_class = "cpu:test";
  r.samples_ms = {1.0, 1.1, 1.2};
  r.summary = {{"count", 3}, {"median_ms", 1.1}};
  r.report = {{"schema", "remex.bench"}, {"schema_version", 2}, {"model", "m.onnx"}};
  r.verdict = "pass";
  ASSERT_TRUE((*first)->Record(r).ok());
  auto second = OpenResultsStore(url);
  ASSERT_TRUE(second.ok()) << second.status().ToString();

  DashboardOptions with;
  int reopened = 0;
  with.reopen = [&]() -> StatusOr<std::unique_ptr<ResultsStore>> {
    ++reopened;
    return OpenResultsStore(url);
  };
  Dashboard reconnecting(std::move(first).value(), with);
  Dashboard stuck(std::move(second).value(), DashboardOptions{});
  WebRequest overview;
  overview.method = "GET";
  overview.target = "/api/overview";
  ASSERT_EQ(reconnecting.Handle(overview).status, 200);
  ASSERT_EQ(stuck.Handle(overview).status, 200);
  EXPECT_EQ(reopened, 0);

  ASSERT_TRUE(pg.Restart()) << pg.error();
  const WebResponse after = reconnecting.Handle(overview);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(reopened, 1);
  EXPECT_EQ(json::parse(after.body)["series"].size(), 1u) << after.body;
  // The one without `reopen` shows the store's error: what the test would see without it.
  EXPECT_GE(stuck.Handle(overview).status, 500);
}

}  // namespace
}  // namespace remex::tooling
