// `remex dashboard`: a read-only web UI over a results store (results_store.h) and,
// optionally, a device farm (farm.h); docs/cli.md, "Dashboard". Served by WebServer
// (web_server.h); every page is HTML that reads without JavaScript, its charts drawn by
// the embedded Chart.js (report_html.h) from the page's own data, nothing loaded from
// elsewhere.
//
//   /                    the series of the store, each with its latest run and its state
//                        (history.h's FindRegressions), and the farm's pools with --farm
//   /farm                the farm's pools (devices by state, clients waiting) and devices
//                        (labels, state, holder, lease age, health and why a device is
//                        quarantined), and each device's self-test latency over time from
//                        the store's "self-test" series (device class POOL/ID)
//   /series/KEY[?limit=N]  one series: the median of each run with its confidence
//                        interval over time (a band), the runs the regression judgement
//                        used marked, each point a link to its run; the latest N runs
//                        (default 200, at most 1000)
//   /run/ID              one run: who, when, the series, and its report (environment,
//                        latency distribution, throughput-latency curve, per-op profile)
//   /compare?a=ID&b=ID   two runs side by side: their summaries, latency distributions
//                        and per-op differences, the largest first
//   /api/overview, /api/farm, /api/series/KEY, /api/run/ID, /api/compare?a=ID&b=ID
//                        each page's data as JSON (the object the page embeds)
//   /login               with a token: the form a browser logs in with (POST)
// Anything else is a 404 page; a malformed parameter a 400 page naming it; a store or
// farm that fails a 503 page with its message. Bounded: series listed, runs per series,
// per-op rows and the samples of a report a page carries (thinned evenly past
// kDashboardMaxPoints, with a note).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "host_client/tooling/regression.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/web_server.h"

namespace remex::tooling {

// Series the overview lists (the most recently recorded first); runs a series page
// shows by default and at most; per-op rows a comparison lists; samples of one array
// a page carries.
inline constexpr size_t kDashboardMaxSeries = 200;
inline constexpr size_t kDashboardDefaultRuns = 200;
inline constexpr size_t kDashboardMaxRuns = 1000;
inline constexpr size_t kDashboardMaxOpRows = 500;
inline constexpr size_t kDashboardMaxPoints = 5000;
// The largest run id a URL may name (ids are positive; 2^53 - 1, exact in JavaScript).
inline constexpr int64_t kDashboardMaxRunId = (int64_t{1} << 53) - 1;

// A request target, parsed and validated.
struct DashboardRoute {
  enum class Page { kOverview, kFarm, kSeries, kRun, kCompare, kLogin, kFavicon };
  Page page = Page::kOverview;
  bool api = false;                      // /api/...: the page's data as JSON
  std::string series_key;                // kSeries: 32 lower-case hex digits (a content hash)
  int64_t run = 0;                       // kRun: the run; kCompare: run a
  int64_t other = 0;                     // kCompare: run b
  size_t limit = kDashboardDefaultRuns;  // kSeries: the latest runs shown
};

// Parses `target` (a path with an optional query). NOT_FOUND for a path that names no
// page (or a target over 2048 bytes); INVALID_ARGUMENT, naming the parameter, for a run
// id that is not a decimal in [1, kDashboardMaxRunId], a series key that is no content
// hash, a limit outside [1, kDashboardMaxRuns], a parameter given twice, a query
// parameter the page does not take, or a required one missing.
StatusOr<DashboardRoute> ParseDashboardTarget(std::string_view target);

struct DashboardOptions {
  std::string results_url;  // named on the pages, its password hidden (RedactResultsUrl)
  std::string farm_url;     // redis://...; empty: no farm
  std::chrono::milliseconds farm_timeout{5000};
  regression::Options regression;  // how series are judged (as remex regressions)
  // Non-empty: every page needs it, as "Authorization: Bearer TOKEN" or the session
  // cookie that POST /login sets for a form that gives it (HttpOnly, SameSite=Strict,
  // Secure over TLS).
  std::string token;
  std::string version = "unknown";  // remex's version, in the footer
  // Opens the store again (OpenResultsStore of the URL). When set, a page the store
  // could not answer (an error status 500 or above: a PostgreSQL server restarted, a
  // connection dropped) is answered once more on a fresh connection before the error
  // is shown; the dashboard is read-only, so asking again is safe.
  std::function<StatusOr<std::unique_ptr<ResultsStore>>()> reopen;
};

// The dashboard's pages over one store. Handle() is thread-safe: requests are answered
// one at a time (the store is one connection).
class Dashboard {
 public:
  Dashboard(std::unique_ptr<ResultsStore> store, DashboardOptions options);

  // Answers one request (GET or HEAD; POST for /login): never throws, never fails; an
  // error is a page that says what went wrong with its HTTP status.
  WebResponse Handle(const WebRequest& request);

  // Each page's data, as the page embeds it and /api/... returns it. Errors of the store
  // (UNAVAILABLE), NOT_FOUND for a run or series that is not there.
  StatusOr<nlohmann::json> OverviewData();
  StatusOr<nlohmann::json> FarmData();
  StatusOr<nlohmann::json> SeriesData(const std::string& series_key, size_t limit);
  StatusOr<nlohmann::json> RunData(int64_t id);
  StatusOr<nlohmann::json> CompareData(int64_t a, int64_t b);

 private:
  WebResponse Answer(const WebRequest& request);
  bool Authorized(const WebRequest& request) const;

  std::mutex mutex_;
  std::unique_ptr<ResultsStore> store_;
  DashboardOptions options_;
  std::string session_cookie_;  // the cookie's value: derived from the token, never the token
  // Each run's median interval, by run id (runs never change once recorded); cleared
  // when it reaches kMedianCacheEntries.
  struct MedianInterval {
    bool bounded = false;
    double low = 0, high = 0;
  };
  std::map<int64_t, MedianInterval> median_cache_;
};

// The pages, from the data above (exposed for tests). Each is a whole HTML document
// with its data embedded as <script type="application/json" id="remex-data"> (the run
// page: its report as id="remex-report" too), every text escaped, and one canvas with
// data-chart per chart; #render-status says "N of M charts rendered" once drawn.
std::string OverviewPage(const nlohmann::json& data, const DashboardOptions& options);
std::string FarmPage(const nlohmann::json& data, const DashboardOptions& options);
std::string SeriesPage(const nlohmann::json& data, const DashboardOptions& options);
std::string RunPage(const nlohmann::json& data, const DashboardOptions& options);
std::string ComparePage(const nlohmann::json& data, const DashboardOptions& options);
// The login form (with a token): posts the token and `next` (the page to return to) to
// /login; `why` says why it is shown again ("" the first time).
std::string LoginPage(const std::string& next, const std::string& why, const DashboardOptions& options);
// An error page: `title` and the status's message.
std::string ErrorPage(int http_status, const std::string& title, const Status& status,
                      const DashboardOptions& options);

// `report` with every array of numbers longer than `max_points` thinned to `max_points`
// evenly spaced entries (arrays of equal length thinned alike, so parallel arrays stay
// aligned) and every other array cut to `max_points`; true when something was thinned.
bool ThinReport(nlohmann::json& report, size_t max_points);

}  // namespace remex::tooling
