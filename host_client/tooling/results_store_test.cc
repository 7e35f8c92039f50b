// The results store against real databases: a SQLite file, and a PostgreSQL server
// started for these tests (tests/postgres_server.h). Records round-trip, migrations run
// once and reopen cleanly, a writer killed mid-write leaves no half record, and 16
// writers at once lose nothing.
#include "host_client/tooling/results_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/postgres_server.h"

namespace remex::tooling {
namespace results_store_test {

using nlohmann::json;
namespace fs = std::filesystem;

RunRecord MakeRecord(int writer, int i, size_t samples = 64) {
  RunRecord r;
  r.recorded_at = "2026-12-02T08:00:" + std::string(i % 60 < 10 ? "0" : "") + std::to_string(i % 60) + "Z";
  r.kind = "bench";
  r.user = "tester";
  r.git_commit = "abc123";
  r.git_branch = "main";
  r.tags = {{"writer", std::to_string(writer)}, {"i", std::to_string(i)}};
  r.model_name = "m" + std::to_string(writer % 2) + ".onnx";
  r.model_hash = std::string(31, '0') + std::to_string(writer % 2);
  r.executable_hash = std::string(32, 'e');
  r.compile_options = {{"layout", "NCHW"}};
  r.scenario = "time-evaluator";
  r.device_class = "cpu:test";
  r.device = "cpu";
  for (size_t k = 0; k < samples; ++k) r.samples_ms.push_back(1.0 + writer * 0.001 + i * 1e-6 + k * 1e-9);
  r.summary = {{"median_ms", r.samples_ms[samples / 2]}, {"count", samples}};
  r.report = {
      {"schema", "remex.bench"}, {"writer", writer}, {"i", i}, {"benchmark", {{"samples_ms", r.samples_ms}}}};
  r.profile = nullptr;
  r.verdict = "pass";
  return r;
}

// Each record of `store`: its samples decode whole, its tags and report are its own.
void ExpectWhole(ResultsStore& store, size_t expected_runs, size_t samples) {
  auto runs = store.ListRuns({});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(runs->size(), expected_runs);
  std::set<std::pair<std::string, std::string>> seen;
  for (const StoredRun& run : *runs) {
    ASSERT_EQ(run.tags.size(), 2u) << "run " << run.id;
    EXPECT_TRUE(seen.insert({run.tags.at("writer"), run.tags.at("i")}).second)
        << "run " << run.id << " twice";
    EXPECT_EQ(run.sample_count, samples);
    auto s = store.Samples(run.id);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->size(), samples);
    const int writer = std::stoi(run.tags.at("writer")), i = std::stoi(run.tags.at("i"));
    EXPECT_DOUBLE_EQ((*s)[1], 1.0 + writer * 0.001 + i * 1e-6 + 1e-9);
    auto report = store.Report(run.id);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ((*report)["writer"], writer);
    EXPECT_EQ((*report)["i"], i);
  }
}

// The store behaviour every backend must have.
void RoundTrip(const std::string& url) {
  auto store = OpenResultsStore(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto version = (*store)->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kResultsSchemaVersion);
  RunRecord a = MakeRecord(0, 1), b = MakeRecord(1, 2), c = MakeRecord(0, 3);
  c.recorded_at = "2026-12-03T00:00:00Z";
  c.profile = {{"total_ms", 1.5}};
  b.verdict = "fail";
  for (const RunRecord* r : {&a, &b, &c}) {
    auto id = (*store)->Record(*r);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
  }
  auto series = (*store)->ListSeries({});
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  ASSERT_EQ(series->size(), 2u);                  // models m0 and m1
  EXPECT_EQ((*series)[0].model_name, "m0.onnx");  // the latest run first
  EXPECT_EQ((*series)[0].runs, 2u);
  EXPECT_EQ((*series)[0].series_key, a.SeriesKey());
  EXPECT_EQ((*series)[0].compile_options, a.compile_options);
  EXPECT_EQ((*series)[0].last_recorded_at, "2026-12-03T00:00:00Z");

  HistoryFilter by_model;
  by_model.model = "m1.onnx";
  auto m1 = (*store)->ListRuns(by_model);
  ASSERT_TRUE(m1.ok());
  ASSERT_EQ(m1->size(), 1u);
  EXPECT_EQ((*m1)[0].git_commit, "abc123");
  EXPECT_EQ((*m1)[0].summary["count"], 64);
  by_model.model = a.model_hash;  // a hash names the model too
  EXPECT_EQ((*store)->ListRuns(by_model)->size(), 2u);

  HistoryFilter since;
  since.since = "2026-12-02T12:00:00Z";
  auto late = (*store)->ListRuns(since);
  ASSERT_TRUE(late.ok());
  ASSERT_EQ(late->size(), 1u);
  EXPECT_EQ((*late)[0].tags.at("i"), "3");
  HistoryFilter latest;
  latest.limit = 2;
  auto two = (*store)->ListRuns(latest);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);  // the latest two, oldest first
  EXPECT_EQ((*two)[0].tags.at("i"), "2");
  EXPECT_EQ((*two)[1].tags.at("i"), "3");
  HistoryFilter other_device;
  other_device.device_class = "gpu:none";
  EXPECT_TRUE((*store)->ListRuns(other_device)->empty());
  HistoryFilter failed;
  failed.verdict = "fail";
  auto b_only = (*store)->ListRuns(failed);
  ASSERT_TRUE(b_only.ok());
  ASSERT_EQ(b_only->size(), 1u);
  EXPECT_EQ((*b_only)[0].tags.at("i"), "2");
  EXPECT_EQ((*store)->ListSeries(failed)->size(), 1u);  // m1's only
  failed.verdict = "pass";
  EXPECT_EQ((*store)->ListRuns(failed)->size(), 2u);

  auto detail = (*store)->GetRun((*late)[0].id);
  ASSERT_TRUE(detail.ok()) << detail.status().ToString();
  EXPECT_EQ(detail->run.id, (*late)[0].id);
  EXPECT_EQ(detail->run.recorded_at, "2026-12-03T00:00:00Z");
  EXPECT_EQ(detail->run.tags.at("i"), "3");
  EXPECT_EQ(detail->run.sample_count, 64u);
  EXPECT_EQ(detail->run.summary["count"], 64);
  EXPECT_EQ(detail->series.series_key, c.SeriesKey());
  EXPECT_EQ(detail->series.model_name, "m0.onnx");
  EXPECT_EQ(detail->series.compile_options, c.compile_options);
  EXPECT_EQ(detail->series.device_class, "cpu:test");
  EXPECT_EQ(detail->executable_hash, std::string(32, 'e'));
  EXPECT_EQ(detail->device, "cpu");
  EXPECT_EQ((*store)->GetRun(987654).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*store)->Samples(987654).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*(*store)->Report((*late)[0].id))["i"], 3);

  RunRecord bad = a;
  bad.kind.clear();
  EXPECT_EQ((*store)->Record(bad).status().code(), StatusCode::kInvalidArgument);

  // Reopening applies no migration again and keeps the runs.
  store->reset();
  auto again = OpenResultsStore(url);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*(*again)->SchemaVersion(), kResultsSchemaVersion);
  EXPECT_EQ((*again)->ListRuns({})->size(), 3u);
}

// 16 writers, each with its own connection, opening a fresh database at once: every
// record arrives, whole.
void ConcurrentWriters(const std::string& url, int writers, int per_writer) {
  std::atomic<int> failures{0};
  std::vector<std::string> errors(writers);
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto store = OpenResultsStore(url);
      if (!store.ok()) {
        errors[w] = store.status().ToString();
        ++failures;
        return;
      }
      for (int i = 0; i < per_writer; ++i) {
        auto id = (*store)->Record(MakeRecord(w, i));
        if (!id.ok()) {
          errors[w] = id.status().ToString();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  ASSERT_EQ(failures.load(), 0);
  auto store = OpenResultsStore(url);
  ASSERT_TRUE(store.ok());
  ExpectWhole(**store, static_cast<size_t>(writers * per_writer), 64);
}

// A child process records in a loop and is killed with SIGKILL mid-way: every run it
// left has its tags and its samples (the record's three tables were written in one
// transaction), and the store still takes records.
void KilledWriter(const std::string& url) {
  {
    auto store = OpenResultsStore(url);  // migrated before the child starts
    ASSERT_TRUE(store.ok()) << store.status().ToString();
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = OpenResultsStore(url);
    if (!store.ok()) _exit(2);
    for (int i = 0;; ++i) {
      // Large records, so that a kill lands inside a write.
      if (!(*store)->Record(MakeRecord(7, i, 200000)).ok()) _exit(3);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited on its own: " << WEXITSTATUS(status);
  auto store = OpenResultsStore(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns({});
  ASSERT_TRUE(runs.ok());
  EXPECT_GT(runs->size(), 0u) << "the writer recorded nothing in 1.5 s";
  ExpectWhole(**store, runs->size(), 200000);
  ASSERT_TRUE((*store)->Record(MakeRecord(8, 0)).ok());
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/remex_results_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // The database (tens of MB after the killed writer) goes when the test passes.
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(dir_, ec);
  }
  std::string Url() const { return "sqlite://" + dir_ + "/sub/results.sqlite"; }
  std::string dir_;
};

TEST_F(SqliteStoreTest, RecordsListsAndReopens) { RoundTrip(Url()); }
TEST_F(SqliteStoreTest, SixteenConcurrentWritersLoseNothing) { ConcurrentWriters(Url(), 16, 25); }
TEST_F(SqliteStoreTest, KilledWriterLeavesNoHalfRecord) { KilledWriter(Url()); }

TEST_F(SqliteStoreTest, NewerSchemaIsRefused) {
  ASSERT_TRUE(OpenResultsStore(Url()).ok());
  std::string cmd = "sqlite3 '" + dir_ + "/sub/results.sqlite' \"INSERT INTO remex_schema VALUES (99, 'x')\"";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "the sqlite3 shell is not installed";
  auto store = OpenResultsStore(Url());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 99"), std::string::npos)
      << store.status().ToString();
}

TEST_F(SqliteStoreTest, UnreachableDatabaseIsUnavailable) {
  auto store = OpenResultsStore("sqlite:///proc/no/such/results.sqlite");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
}

TEST(ResultsUrlTest, FormsAndRefusals) {
  EXPECT_TRUE(CheckResultsUrl("sqlite:///tmp/r.sqlite").ok());
  EXPECT_TRUE(CheckResultsUrl("sqlite://r.sqlite").ok());
  EXPECT_TRUE(CheckResultsUrl("postgresql://u@h:5432/db").ok());
  EXPECT_TRUE(CheckResultsUrl("postgres://h/db").ok());
  EXPECT_EQ(CheckResultsUrl("model.onnx").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckResultsUrl("sqlite://").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenResultsStore("mysql://h/db").status().code(), StatusCode::kInvalidArgument);
}

TEST(ResultsUrlTest, PasswordsAreRedacted) {
  EXPECT_EQ(RedactResultsUrl("postgresql://ci:s3cret@db:5432/results"),
            "postgresql://ci:***@db:5432/results");
  EXPECT_EQ(RedactResultsUrl("postgresql://db/results?user=ci&password=s3cret&sslmode=require"),
            "postgresql://db/results?user=ci&password=***&sslmode=require");
  EXPECT_EQ(RedactResultsUrl("postgresql://ci@db/results"), "postgresql://ci@db/results");
  EXPECT_EQ(RedactResultsUrl("sqlite:///tmp/a@b:c/r.sqlite"), "sqlite:///tmp/a@b:c/r.sqlite");
  // A password in the URL is refused, without repeating it.
  for (const char* url :
       {"postgresql://ci:s3cret@127.0.0.1:1/none", "postgresql://127.0.0.1/none?password=s3cret"}) {
    auto store = OpenResultsStore(url);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store.status().message().find("s3cret"), std::string::npos) << store.status().ToString();
    EXPECT_NE(store.status().message().find("PGPASSWORD"), std::string::npos) << store.status().ToString();
  }
}

TEST(ResultsUrlTest, DefaultIsUnderXdgDataHome) {
  setenv("XDG_DATA_HOME", "/x/data", 1);
  EXPECT_EQ(*DefaultResultsUrl(), "sqlite:///x/data/remex/results.sqlite");
  setenv("XDG_DATA_HOME", "relative", 1);  // the spec: a relative path is ignored
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*DefaultResultsUrl(), "sqlite:///home/u/.local/share/remex/results.sqlite");
  unsetenv("XDG_DATA_HOME");
}

TEST(RecordContextTest, TagsAndEnvironment) {
  auto tags = ParseTags({"pr=123", "runner=gpu-1"});
  ASSERT_TRUE(tags.ok());
  EXPECT_EQ(tags->at("pr"), "123");
  EXPECT_EQ(ParseTags({"novalue"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTags({"a=1", "a=2"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTags({"bad key=1"}).status().code(), StatusCode::kInvalidArgument);
  setenv("GITHUB_SHA", "deadbeef", 1);
  setenv("GITHUB_REF_NAME", "feature", 1);
  setenv("REMEX_USER", "ci-bot", 1);
  RunRecord r;
  FillRecordContextFromEnvironment(r);
  EXPECT_EQ(r.git_commit, "deadbeef");
  EXPECT_EQ(r.git_branch, "feature");
  EXPECT_EQ(r.user, "ci-bot");
  setenv("REMEX_GIT_COMMIT", "override", 1);
  FillRecordContextFromEnvironment(r);
  EXPECT_EQ(r.git_commit, "override");
  for (const char* n : {"GITHUB_SHA", "GITHUB_REF_NAME", "REMEX_USER", "REMEX_GIT_COMMIT"}) unsetenv(n);
}

TEST(RecordContextTest, SinceForms) {
  const int64_t now = 1796198400 - 8 * 3600;  // 2026-12-02T00:00:00Z
  EXPECT_EQ(*ParseSince("2026-11-30", now), "2026-11-30T00:00:00Z");
  EXPECT_EQ(*ParseSince("2026-11-30T10:00:00Z", now), "2026-11-30T10:00:00Z");
  EXPECT_EQ(*ParseSince("1d", now), "2026-12-01T00:00:00Z");
  EXPECT_EQ(*ParseSince("90m", now), "2026-12-01T22:30:00Z");
  EXPECT_EQ(ParseSince("yesterday", now).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSince("", now).status().code(), StatusCode::kInvalidArgument);
}

TEST(RecordContextTest, SeriesKeySeparatesWhatItShould) {
  RunRecord a = MakeRecord(0, 1), b = MakeRecord(0, 2);
  EXPECT_EQ(a.SeriesKey(), b.SeriesKey());  // tags, samples and time do not split a series
  b.compile_options = {{"layout", "NHWC"}};
  EXPECT_NE(a.SeriesKey(), b.SeriesKey());
  b = a;
  b.device_class = "gpu:H100";
  EXPECT_NE(a.SeriesKey(), b.SeriesKey());
  b = a;
  b.scenario = "server";
  EXPECT_NE(a.SeriesKey(), b.SeriesKey());
}

TEST(RecordContextTest, SummaryOfBenchAndCheck) {
  json bench = {{"benchmark", {{"samples_ms", {1.0, 2.0, 3.0}}, {"median_ms", 2.0}, {"p99_ms", nullptr}}}};
  json s = SummaryOf(bench);
  EXPECT_EQ(s["count"], 3);
  EXPECT_EQ(s["median_ms"], 2.0);
  EXPECT_TRUE(s["p99_ms"].is_null());
  json check = {{"match", false}, {"outputs", {{{"verdict", "match"}}, {{"verdict", "mismatch"}}}}};
  s = SummaryOf(check);
  EXPECT_EQ(s["mismatches"], 1);
  EXPECT_EQ(s["outputs"], 2);
}

// PostgreSQL: one server for the suite.
class PostgresStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new remex::testing::TempPostgres();
    if (!server_->Start()) {
      error_ = server_->error();
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (remex::testing::TempPostgres::BinDir().empty()) {
      GTEST_SKIP()
          << "PostgreSQL's server binaries are not installed (Debian: postgresql; scripts/setup-deps.sh "
             "--tests installs it)";
    }
    ASSERT_NE(server_, nullptr) << "PostgreSQL did not start: " << error_;
    // A database of its own for each test.
    db_ = "t" + std::to_string(++counter_);
    ASSERT_EQ(std::system(
                  ("psql -q '" + server_->Url() + "' -c 'CREATE DATABASE " + db_ + "' > /dev/null").c_str()),
              0);
  }
  std::string Url() const { return server_->Url(db_); }

  static inline remex::testing::TempPostgres* server_ = nullptr;
  static inline std::string error_;
  static inline int counter_ = 0;
  std::string db_;
};

TEST_F(PostgresStoreTest, RecordsListsAndReopens) { RoundTrip(Url()); }
TEST_F(PostgresStoreTest, SixteenConcurrentWritersLoseNothing) { ConcurrentWriters(Url(), 16, 25); }
TEST_F(PostgresStoreTest, KilledWriterLeavesNoHalfRecord) { KilledWriter(Url()); }

TEST_F(PostgresStoreTest, UnreachableServerIsUnavailable) {
  auto store = OpenResultsStore("postgresql://remex@127.0.0.1:1/postgres?connect_timeout=2");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
}

}  // namespace results_store_test
}  // namespace remex::tooling
