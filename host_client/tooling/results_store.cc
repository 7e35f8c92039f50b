#include "host_client/tooling/results_store.h"

#include <libpq-fe.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "base/content_hash.h"
#include "base/file_bytes.h"

namespace remex::tooling {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "samples are stored as little-endian float64");

// Samples a record holds at most (8 bytes each before compression).
constexpr uint64_t kMaxSamples = 50'000'000;
// The advisory lock key under which PostgreSQL clients migrate, one at a time.
constexpr long long kMigrationLockKey = 0x72656d6578;  // "remex"
constexpr char kSamplesEncoding[] = "zstd-f64le-base64";

enum class Dialect { kSqlite, kPostgres };

// SQLite's busy handler: a writer waits for the file's write lock in steps of 1 ms, up
// to 60 s. (SQLite's own busy_timeout backs off to 100 ms sleeps, which with 16 writers
// leaves some waiting a second while the lock is free.)
int RetryWhileBusy(void*, int attempts) {
  if (attempts >= 60000) return 0;
  usleep(1000);
  return 1;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string Base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

StatusOr<std::string> Unbase64(const std::string& text) {
  if (text.size() % 4 != 0)
    return DataLoss("stored samples are no base64 (length " + std::to_string(text.size()) + ")");
  std::string out(3 * (text.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return DataLoss("stored samples are no base64");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

StatusOr<std::string> EncodeSamples(const std::vector<double>& samples) {
  if (samples.size() > kMaxSamples) return InvalidArgument("a record holds at most 50000000 samples");
  const size_t raw = samples.size() * sizeof(double);
  std::string out(ZSTD_compressBound(raw), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), samples.data(), raw, 3);
  if (ZSTD_isError(n)) return Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return Base64(out);
}

StatusOr<std::vector<double>> DecodeSamples(const std::string& encoding, uint64_t count,
                                            const std::string& data) {
  if (encoding != kSamplesEncoding)
    return DataLoss("stored samples have the unknown encoding '" + encoding + "'");
  if (count > kMaxSamples) return DataLoss("stored samples claim " + std::to_string(count) + " values");
  REMEX_ASSIGN_OR_RETURN(std::string frame, Unbase64(data));
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size != count * sizeof(double))
    return DataLoss("stored samples: the zstd frame is not " + std::to_string(count) + " float64");
  std::vector<double> out(count);
  size_t n = ZSTD_decompress(out.data(), count * sizeof(double), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != count * sizeof(double))
    return DataLoss("stored samples: zstd frame is damaged");
  return out;
}

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string FirstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (std::string v = Getenv(n); !v.empty()) return v;
  }
  return "";
}

// The SQL of one schema migration, per dialect.
struct Migration {
  int version;
  std::vector<std::string> statements;  // "%ID%" stands for the dialect's id column type
};

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1,
       {"CREATE TABLE runs ("
        " id %ID%,"
        " recorded_at TEXT NOT NULL,"
        " kind TEXT NOT NULL,"
        " user_name TEXT NOT NULL,"
        " ci_job TEXT NOT NULL,"
        " git_commit TEXT NOT NULL,"
        " git_branch TEXT NOT NULL,"
        " model_name TEXT NOT NULL,"
        " model_hash TEXT NOT NULL,"
        " executable_hash TEXT NOT NULL,"
        " compile_options TEXT NOT NULL,"  // JSON
        " scenario TEXT NOT NULL,"
        " device_class TEXT NOT NULL,"
        " device TEXT NOT NULL,"
        " series_key TEXT NOT NULL,"
        " summary TEXT NOT NULL,"  // JSON
        " report TEXT NOT NULL,"   // JSON, whole
        " profile TEXT NOT NULL,"  // JSON, null when none
        " verdict TEXT NOT NULL,"
        " error TEXT NOT NULL)",
        "CREATE TABLE run_tags ("
        " run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        " tag_key TEXT NOT NULL,"
        " tag_value TEXT NOT NULL,"
        " PRIMARY KEY (run_id, tag_key))",
        "CREATE TABLE run_samples ("
        " run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,"
        " encoding TEXT NOT NULL,"
        " sample_count BIGINT NOT NULL,"
        " data TEXT NOT NULL)",
        "CREATE INDEX runs_series ON runs (series_key, recorded_at)",
        "CREATE INDEX runs_model_name ON runs (model_name)",
        "CREATE INDEX runs_model_hash ON runs (model_hash)",
        "CREATE INDEX runs_recorded_at ON runs (recorded_at)"}},
  };
  return kMigrations;
}


json ParseJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(nullptr) : j;
}

uint64_t ToU64(const std::string& s) { return s.empty() ? 0 : std::strtoull(s.c_str(), nullptr, 10); }

class SociStore final : public ResultsStore {
 public:
  SociStore(Dialect dialect, const std::string& url) : dialect_(dialect), url_(RedactResultsUrl(url)) {}

  Status Open(const soci::backend_factory& factory, const std::string& connect) {
    try {
      sql_.open(factory, connect);
      if (dialect_ == Dialect::kSqlite) {
        auto* backend = static_cast<soci::sqlite3_session_backend*>(sql_.get_backend());
        sqlite3_busy_handler(backend->conn_, RetryWhileBusy, nullptr);
        sql_ << "PRAGMA foreign_keys = ON";
        std::string mode;
        sql_ << "PRAGMA journal_mode = WAL", soci::into(mode);
      } else {
        // libpq prints notices on stderr: "relation remex_schema already exists" on
        // every open would reach the user.
        sql_ << "SET client_min_messages TO WARNING";
      }
    } catch (const std::exception& e) {
      return Unavailable("cannot open the results store " + url_ + ": " + e.what());
    }
    return Migrate();
  }

  StatusOr<int64_t> Record(const RunRecord& r) override {
    if (r.kind.empty() || r.model_name.empty() || r.recorded_at.empty()) {
      return InvalidArgument("a results record needs kind, model name and recorded_at");
    }
    REMEX_ASSIGN_OR_RETURN(std::string samples, EncodeSamples(r.samples_ms));
    const std::string series = r.SeriesKey();
    const std::string compile_options = r.compile_options.dump();
    const std::string summary = r.summary.dump();
    const std::string report = r.report.dump();
    const std::string profile = r.profile.dump();
    const long long count = static_cast<long long>(r.samples_ms.size());
    std::string encoding = kSamplesEncoding;
    long long id = 0;
    try {
      Begin();
      sql_ << "INSERT INTO runs (recorded_at, kind, user_name, ci_job, git_commit, git_branch, model_name, "
              "model_hash, executable_hash, compile_options, scenario, device_class, device, series_key, "
              "summary, report, profile, verdict, error) VALUES (:a, :b, :c, :d, :e, :f, :g, :h, :i, :j, :k, "
              ":l, :m, :n, :o, :p, :q, :r, :s) RETURNING id",
          soci::use(r.recorded_at), soci::use(r.kind), soci::use(r.user), soci::use(r.ci_job),
          soci::use(r.git_commit), soci::use(r.git_branch), soci::use(r.model_name), soci::use(r.model_hash),
          soci::use(r.executable_hash), soci::use(compile_options), soci::use(r.scenario),
          soci::use(r.device_class), soci::use(r.device), soci::use(series), soci::use(summary),
          soci::use(report), soci::use(profile), soci::use(r.verdict), soci::use(r.error), soci::into(id);
      for (const auto& [key, value] : r.tags) {
        sql_ << "INSERT INTO run_tags (run_id, tag_key, tag_value) VALUES (:a, :b, :c)", soci::use(id),
            soci::use(key), soci::use(value);
      }
      sql_ << "INSERT INTO run_samples (run_id, encoding, sample_count, data) VALUES (:a, :b, :c, :d)",
          soci::use(id), soci::use(encoding), soci::use(count), soci::use(samples);
      sql_ << "COMMIT";
    } catch (const std::exception& e) {
      Rollback();
      return Unavailable("recording into " + url_ + " failed: " + e.what());
    }
    return static_cast<int64_t>(id);
  }

  StatusOr<std::vector<SeriesInfo>> ListSeries(const HistoryFilter& f) override {
    std::vector<SeriesInfo> out;
    try {
      soci::rowset<soci::row> rows =
          (sql_.prepare
               << "SELECT series_key, MAX(model_name), MAX(model_hash), MAX(compile_options), MAX(scenario),"
                  " MAX(device_class), CAST(COUNT(*) AS TEXT), MIN(recorded_at), MAX(recorded_at)"
                  " FROM runs WHERE " +
                      kWhere + " GROUP BY series_key ORDER BY MAX(recorded_at) DESC, series_key",
           soci::use(f.model), soci::use(f.model), soci::use(f.model), soci::use(f.device_class),
           soci::use(f.device_class), soci::use(f.since), soci::use(f.since), soci::use(f.series_key),
           soci::use(f.series_key), soci::use(f.verdict), soci::use(f.verdict));
      for (const soci::row& row : rows) {
        SeriesInfo s;
        s.series_key = row.get<std::string>(0);
        s.model_name = row.get<std::string>(1);
        s.model_hash = row.get<std::string>(2);
        s.compile_options = ParseJson(row.get<std::string>(3));
        s.scenario = row.get<std::string>(4);
        s.device_class = row.get<std::string>(5);
        s.runs = ToU64(row.get<std::string>(6));
        s.first_recorded_at = row.get<std::string>(7);
        s.last_recorded_at = row.get<std::string>(8);
        out.push_back(std::move(s));
      }
    } catch (const std::exception& e) {
      return Unavailable("reading the series of " + url_ + " failed: " + e.what());
    }
    return out;
  }

  StatusOr<std::vector<StoredRun>> ListRuns(const HistoryFilter& f) override {
    std::vector<StoredRun> out;
    try {
      soci::rowset<soci::row> rows =
          (sql_.prepare
               << "SELECT CAST(r.id AS TEXT), r.recorded_at, r.kind, r.user_name, r.ci_job, r.git_commit,"
                  " r.git_branch, r.summary, r.verdict, r.error,"
                  " COALESCE(CAST(s.sample_count AS TEXT), '0')"
                  " FROM runs r LEFT JOIN run_samples s ON s.run_id = r.id WHERE " +
                      kWhere + " ORDER BY r.recorded_at DESC, r.id DESC" +
                      (f.limit > 0 ? " LIMIT " + std::to_string(f.limit) : std::string()),
           soci::use(f.model), soci::use(f.model), soci::use(f.model), soci::use(f.device_class),
           soci::use(f.device_class), soci::use(f.since), soci::use(f.since), soci::use(f.series_key),
           soci::use(f.series_key), soci::use(f.verdict), soci::use(f.verdict));
      for (const soci::row& row : rows) {
        StoredRun run;
        run.id = static_cast<int64_t>(ToU64(row.get<std::string>(0)));
        run.recorded_at = row.get<std::string>(1);
        run.kind = row.get<std::string>(2);
        run.user = row.get<std::string>(3);
        run.ci_job = row.get<std::string>(4);
        run.git_commit = row.get<std::string>(5);
        run.git_branch = row.get<std::string>(6);
        run.summary = ParseJson(row.get<std::string>(7));
        run.verdict = row.get<std::string>(8);
        run.error = row.get<std::string>(9);
        run.sample_count = ToU64(row.get<std::string>(10));
        out.push_back(std::move(run));
      }
      std::reverse(out.begin(), out.end());  // oldest first
      for (StoredRun& run : out) {
        long long id = run.id;
        soci::rowset<soci::row> tags =
            (sql_.prepare << "SELECT tag_key, tag_value FROM run_tags WHERE run_id = :id ORDER BY tag_key",
             soci::use(id));
        for (const soci::row& t : tags) run.tags[t.get<std::string>(0)] = t.get<std::string>(1);
      }
    } catch (const std::exception& e) {
      return Unavailable("reading the runs of " + url_ + " failed: " + e.what());
    }
    return out;
  }

  StatusOr<RunDetail> GetRun(int64_t id) override {
    RunDetail d;
    long long run_id = id;
    try {
      soci::rowset<soci::row> rows =
          (sql_.prepare << "SELECT r.recorded_at, r.kind, r.user_name, r.ci_job, r.git_commit, r.git_branch,"
                           " r.summary, r.verdict, r.error, COALESCE(CAST(s.sample_count AS TEXT), '0'),"
                           " r.series_key, r.model_name, r.model_hash, r.compile_options, r.scenario,"
                           " r.device_class, r.executable_hash, r.device"
                           " FROM runs r LEFT JOIN run_samples s ON s.run_id = r.id WHERE r.id = :id",
           soci::use(run_id));
      bool found = false;
      for (const soci::row& row : rows) {
        found = true;
        StoredRun& run = d.run;
        run.id = id;
        run.recorded_at = row.get<std::string>(0);
        run.kind = row.get<std::string>(1);
        run.user = row.get<std::string>(2);
        run.ci_job = row.get<std::string>(3);
        run.git_commit = row.get<std::string>(4);
        run.git_branch = row.get<std::string>(5);
        run.summary = ParseJson(row.get<std::string>(6));
        run.verdict = row.get<std::string>(7);
        run.error = row.get<std::string>(8);
        run.sample_count = ToU64(row.get<std::string>(9));
        d.series.series_key = row.get<std::string>(10);
        d.series.model_name = row.get<std::string>(11);
        d.series.model_hash = row.get<std::string>(12);
        d.series.compile_options = ParseJson(row.get<std::string>(13));
        d.series.scenario = row.get<std::string>(14);
        d.series.device_class = row.get<std::string>(15);
        d.executable_hash = row.get<std::string>(16);
        d.device = row.get<std::string>(17);
      }
      if (!found) return NotFound("no run " + std::to_string(id) + " in " + url_);
      soci::rowset<soci::row> tags =
          (sql_.prepare << "SELECT tag_key, tag_value FROM run_tags WHERE run_id = :id ORDER BY tag_key",
           soci::use(run_id));
      for (const soci::row& t : tags) d.run.tags[t.get<std::string>(0)] = t.get<std::string>(1);
    } catch (const std::exception& e) {
      return Unavailable("reading run " + std::to_string(id) + " of " + url_ + " failed: " + e.what());
    }
    return d;
  }

  StatusOr<std::vector<double>> Samples(int64_t id) override {
    std::string encoding, data, count;
    soci::indicator ind = soci::i_null;
    long long run_id = id;
    try {
      sql_ << "SELECT encoding, CAST(sample_count AS TEXT), data FROM run_samples WHERE run_id = :id",
          soci::use(run_id), soci::into(encoding, ind), soci::into(count), soci::into(data);
    } catch (const std::exception& e) {
      return Unavailable("reading the samples of run " + std::to_string(id) + " failed: " + e.what());
    }
    if (!sql_.got_data() || ind == soci::i_null)
      return NotFound("no run " + std::to_string(id) + " in " + url_);
    return DecodeSamples(encoding, ToU64(count), data);
  }

  StatusOr<json> Report(int64_t id) override {
    std::string report;
    soci::indicator ind = soci::i_null;
    long long run_id = id;
    try {
      sql_ << "SELECT report FROM runs WHERE id = :id", soci::use(run_id), soci::into(report, ind);
    } catch (const std::exception& e) {
      return Unavailable("reading run " + std::to_string(id) + " failed: " + e.what());
    }
    if (!sql_.got_data() || ind == soci::i_null)
      return NotFound("no run " + std::to_string(id) + " in " + url_);
    return ParseJson(report);
  }

  StatusOr<int> SchemaVersion() override {
    try {
      return ReadVersion();
    } catch (const std::exception& e) {
      return Unavailable("reading the schema version of " + url_ + " failed: " + e.what());
    }
  }

 private:
  // The filter of ListSeries and ListRuns: 11 positional parameters (model x3, device
  // class x2, since x2, series x2, verdict x2).
  inline static const std::string kWhere =
      "(:m1 = '' OR model_name = :m2 OR model_hash = :m3) AND (:d1 = '' OR device_class = :d2)"
      " AND (:s1 = '' OR recorded_at >= :s2) AND (:k1 = '' OR series_key = :k2)"
      " AND (:v1 = '' OR verdict = :v2)";

  // A write transaction: SQLite takes the write lock now (BEGIN IMMEDIATE), so a busy
  // database makes this wait under busy_timeout instead of failing at the first write.
  void Begin() { sql_ << (dialect_ == Dialect::kSqlite ? "BEGIN IMMEDIATE" : "BEGIN"); }

  void Rollback() {
    try {
      sql_ << "ROLLBACK";
    } catch (const std::exception&) {
      // No transaction open (BEGIN failed), or the connection is gone: nothing to undo.
    }
  }

  int ReadVersion() {
    int version = 0;
    soci::indicator ind = soci::i_null;
    sql_ << "SELECT MAX(version) FROM remex_schema", soci::into(version, ind);
    return ind == soci::i_null ? 0 : version;
  }

  Status Migrate() {
    try {
      Begin();
      if (dialect_ == Dialect::kPostgres) {
        sql_ << "SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")";
      }
      sql_ << "CREATE TABLE IF NOT EXISTS remex_schema (version INTEGER NOT NULL, applied_at TEXT NOT NULL)";
      const int version = ReadVersion();
      if (version > kResultsSchemaVersion) {
        Rollback();
        return FailedPrecondition("the results store " + url_ + " has schema version " +
                                  std::to_string(version) + ", newer than this remex's " +
                                  std::to_string(kResultsSchemaVersion) + ": upgrade remex");
      }
      const std::string id_type =
          dialect_ == Dialect::kSqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY";
      for (const Migration& m : Migrations()) {
        if (m.version <= version) continue;
        for (std::string statement : m.statements) {
          if (size_t at = statement.find("%ID%"); at != std::string::npos) statement.replace(at, 4, id_type);
          sql_ << statement;
        }
        std::string applied = UtcNow();
        sql_ << "INSERT INTO remex_schema (version, applied_at) VALUES (:v, :t)", soci::use(m.version),
            soci::use(applied);
      }
      sql_ << "COMMIT";
    } catch (const std::exception& e) {
      Rollback();
      return Unavailable("migrating the results store " + url_ + " failed: " + e.what());
    }
    return OkStatus();
  }

  Dialect dialect_;
  std::string url_;
  soci::session sql_;
};

// A postgresql:// URI as the keyword=value connection string SOCI passes on (SOCI
// reads its own options from that form), parsed by libpq itself. INVALID_ARGUMENT with
// libpq's message for a URI it refuses.
StatusOr<std::string> PostgresConnectString(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (!options) {
    std::string why = error ? error : "out of memory";
    if (error) PQfreemem(error);
    return InvalidArgument("'" + RedactResultsUrl(url) + "' is no PostgreSQL URI: " + why);
  }
  std::string out;
  for (PQconninfoOption* o = options; o->keyword; ++o) {
    if (!o->val || !*o->val) continue;
    std::string value;
    for (const char* c = o->val; *c; ++c) {
      if (*c == '\\' || *c == '\'') value += '\\';
      value += *c;
    }
    out += (out.empty() ? "" : " ") + std::string(o->keyword) + "='" + value + "'";
  }
  PQconninfoFree(options);
  return out;
}

}  // namespace

std::string RunRecord::SeriesKey() const {
  std::string key = (model_hash.empty() ? "name:" + model_name : "hash:" + model_hash) + "\n" +
                    compile_options.dump() + "\n" + scenario + "\n" + device_class;
  return ContentHash(std::span(reinterpret_cast<const std::byte*>(key.data()), key.size()));
}

std::string RedactResultsUrl(const std::string& url) {
  std::string out = url;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? std::string::npos : end);
    if (at != std::string::npos && at > start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    const size_t value = p + 9;
    const size_t end = out.find('&', value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

Status CheckResultsUrl(const std::string& url) {
  if (StartsWith(url, "sqlite://")) {
    if (url.size() == std::string("sqlite://").size())
      return InvalidArgument("--record: sqlite:// names no file");
    return OkStatus();
  }
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) {
    // A password in a URL shows in process listings and shell history: libpq takes it
    // from PGPASSWORD or ~/.pgpass (PGPASSFILE) instead.
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (!options) {
      std::string why = error ? error : "out of memory";
      if (error) PQfreemem(error);
      return InvalidArgument("'" + RedactResultsUrl(url) + "' is no PostgreSQL URI: " + why);
    }
    bool password = false;
    for (PQconninfoOption* o = options; o->keyword; ++o) {
      if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val) password = true;
    }
    PQconninfoFree(options);
    if (password) {
      return InvalidArgument("'" + RedactResultsUrl(url) +
                             "' carries a password, which would show in process listings: set PGPASSWORD or "
                             "write it to ~/.pgpass (libpq reads both)");
    }
    return OkStatus();
  }
  return InvalidArgument("'" + RedactResultsUrl(url) +
                         "' is no results URL: sqlite:///ABSOLUTE/PATH, sqlite://RELATIVE/PATH or "
                         "postgresql://[USER@]HOST[:PORT]/DB");
}

StatusOr<std::unique_ptr<ResultsStore>> OpenResultsStore(const std::string& url) {
  REMEX_RETURN_IF_ERROR(CheckResultsUrl(url));
  if (StartsWith(url, "sqlite://")) {
    const std::string path = url.substr(std::string("sqlite://").size());
    if (path.find('\'') != std::string::npos || path.find('"') != std::string::npos) {
      return InvalidArgument("'" + url + "': a SQLite path with a quote is not supported");
    }
    std::error_code ec;
    if (fs::path parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
    if (ec) return Unavailable("cannot create the folder of " + url + ": " + ec.message());
    auto store = std::make_unique<SociStore>(Dialect::kSqlite, url);
    REMEX_RETURN_IF_ERROR(store->Open(*soci::factory_sqlite3(), "db=\"" + path + "\" timeout=60"));
    return std::unique_ptr<ResultsStore>(std::move(store));
  }
  REMEX_ASSIGN_OR_RETURN(std::string connect, PostgresConnectString(url));
  auto store = std::make_unique<SociStore>(Dialect::kPostgres, url);
  REMEX_RETURN_IF_ERROR(store->Open(*soci::factory_postgresql(), connect));
  return std::unique_ptr<ResultsStore>(std::move(store));
}

StatusOr<std::string> DefaultResultsUrl() {
  std::string base = Getenv("XDG_DATA_HOME");
  if (base.empty() || base[0] != '/') {
    const std::string home = Getenv("HOME");
    if (home.empty()) {
      return FailedPrecondition("--record without a URL needs XDG_DATA_HOME or HOME (or pass --record URL)");
    }
    base = home + "/.local/share";
  }
  return "sqlite://" + base + "/remex/results.sqlite";
}

void FillRecordContextFromEnvironment(RunRecord& r) {
  r.user = FirstEnv({"REMEX_USER", "USER", "LOGNAME"});
  if (r.user.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_name) r.user = pw->pw_name;
  }
  r.ci_job = Getenv("REMEX_CI_JOB");
  if (r.ci_job.empty() && !Getenv("GITHUB_RUN_ID").empty()) {
    r.ci_job =
        "github:" + Getenv("GITHUB_REPOSITORY") + "/" + Getenv("GITHUB_RUN_ID") + "/" + Getenv("GITHUB_JOB");
  }
  if (r.ci_job.empty() && !Getenv("CI_JOB_ID").empty()) r.ci_job = "gitlab:" + Getenv("CI_JOB_ID");
  if (r.ci_job.empty()) r.ci_job = Getenv("BUILD_TAG");  // Jenkins
  r.git_commit = FirstEnv({"REMEX_GIT_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA", "GIT_COMMIT"});
  r.git_branch = FirstEnv({"REMEX_GIT_BRANCH", "GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME",
                           "GIT_BRANCH", "BRANCH_NAME"});
}

StatusOr<std::map<std::string, std::string>> ParseTags(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> tags;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return InvalidArgument("--tag '" + spec + "': expected KEY=VALUE");
    std::string key = spec.substr(0, eq), value = spec.substr(eq + 1);
    if (key.empty() || key.size() > 64)
      return InvalidArgument("--tag '" + spec + "': the key must have 1-64 characters");
    for (char c : key) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) {
        return InvalidArgument("--tag '" + spec + "': the key may hold only A-Z a-z 0-9 _ . -");
      }
    }
    if (value.size() > 256)
      return InvalidArgument("--tag '" + spec + "': the value has more than 256 characters");
    if (!tags.emplace(key, value).second)
      return InvalidArgument("--tag: the key '" + key + "' is given twice");
  }
  return tags;
}

json SummaryOf(const json& report) {
  json s = json::object();
  if (!report.is_object()) return s;
  auto copy = [&](const json& from, const char* key, const char* as) {
    if (from.is_object() && from.contains(key)) s[as] = from[key];
  };
  if (report.contains("benchmark")) {
    const json& b = report["benchmark"];
    if (b.contains("samples_ms") && b["samples_ms"].is_array()) s["count"] = b["samples_ms"].size();
    for (const char* k :
         {"median_ms", "mean_ms", "p90_ms", "p99_ms", "min_ms", "max_ms", "std_ms", "stable", "number"}) {
      copy(b, k, k);
    }
  } else if (report.contains("load") && report["load"].is_object()) {
    const json& l = report["load"];
    copy(l, "scenario", "scenario");
    if (l.contains("levels") && l["levels"].is_array() && !l["levels"].empty()) {
      const json& level = l["levels"][0];
      copy(level, "concurrency", "concurrency");
      copy(level, "throughput_qps", "throughput_qps");
      copy(level, "samples_per_s", "samples_per_s");
      copy(level, "completed", "count");
      copy(level, "stable", "stable");
      if (level.contains("latency_ms") && level["latency_ms"].is_object()) {
        const json& lat = level["latency_ms"];
        copy(lat, "p50", "median_ms");
        copy(lat, "p90", "p90_ms");
        copy(lat, "p99", "p99_ms");
        copy(lat, "mean", "mean_ms");
        copy(lat, "min", "min_ms");
        copy(lat, "max", "max_ms");
      }
      s["levels"] = l["levels"].size();
    }
    if (l.contains("peak") && l["peak"].is_object()) copy(l["peak"], "qps", "peak_qps");
  } else if (report.contains("match")) {
    copy(report, "match", "match");
    copy(report, "missing_reference", "missing_reference");
    uint64_t mismatches = 0, outputs = 0;
    if (report.contains("outputs") && report["outputs"].is_array()) {
      for (const json& o : report["outputs"]) {
        ++outputs;
        if (o.value("verdict", "") == "mismatch") ++mismatches;
      }
    }
    s["outputs"] = outputs;
    s["mismatches"] = mismatches;
  }
  return s;
}

namespace {

std::string ScenarioOf(const std::string& kind, const json& report) {
  if (kind != "bench") return kind;
  if (!report.is_object() || !report.contains("load") || !report["load"].is_object()) return "time-evaluator";
  const json& l = report["load"];
  std::string s = l.value("scenario", "load");
  if (l.value("from_client", false)) s += " from-client";
  if (l.contains("samples_per_query") && l["samples_per_query"].is_number()) {
    s += " samples_per_query=" + l["samples_per_query"].dump();
  }
  if (l.contains("target_qps") && !l["target_qps"].is_null()) s += " target_qps=" + l["target_qps"].dump();
  if (l.contains("latency_bound_ms") && !l["latency_bound_ms"].is_null()) {
    s += " latency_bound_ms=" + l["latency_bound_ms"].dump();
  }
  if (l.contains("peak")) s += " find-peak";
  if (l.contains("levels") && l["levels"].is_array()) {
    std::string levels;
    for (const json& level : l["levels"]) {
      levels += (levels.empty() ? "" : ",") + level.value("concurrency", json(nullptr)).dump();
    }
    s += " concurrency=" + levels;
  }
  return s;
}

std::string DeviceClassOf(const json& report) {
  if (!report.is_object()) return "";
  const std::string device = report.value("device", "");
  const json env = report.value("environment", json::object());
  if (device.rfind("cuda", 0) == 0 && env.contains("gpus") && env["gpus"].is_array() &&
      !env["gpus"].empty()) {
    const json& g = env["gpus"][0];
    if (g.contains("name") && g["name"].is_string()) return "gpu:" + g["name"].get<std::string>();
    return "gpu:unknown";
  }
  if (env.contains("device") && env["device"].is_object() && env["device"].contains("cpu_model") &&
      env["device"]["cpu_model"].is_string()) {
    return "cpu:" + env["device"]["cpu_model"].get<std::string>();
  }
  return device.empty() ? "" : device + ":unknown";
}

}  // namespace

StatusOr<std::string> ResolveResultsUrl(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("REMEX_RESULTS");
  if (env && *env) return std::string(env);
  return DefaultResultsUrl();
}

std::string UtcIso8601(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string UtcNow() { return UtcIso8601(static_cast<int64_t>(std::time(nullptr))); }

std::optional<int64_t> UtcIso8601Millis(const std::string& iso) {
  std::tm tm{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

void CompleteRecord(RunRecord& record, const std::map<std::string, std::string>& tags) {
  if (record.recorded_at.empty()) record.recorded_at = UtcNow();
  FillRecordContextFromEnvironment(record);
  record.tags = tags;
}

StatusOr<int64_t> RecordReport(const std::string& url, const std::string& kind, const std::string& model_path,
                               const json& report, const std::string& labels,
                               const std::map<std::string, std::string>& tags, const std::string& verdict,
                               const std::string& error) {
  REMEX_RETURN_IF_ERROR(CheckResultsUrl(url));
  REMEX_ASSIGN_OR_RETURN(RunRecord record, RecordFromReport(kind, model_path, report, labels, verdict, error));
  if (report.is_object() && report.contains("date") && report["date"].is_string()) record.recorded_at = report["date"];
  CompleteRecord(record, tags);
  REMEX_ASSIGN_OR_RETURN(auto store, OpenResultsStore(url));
  return store->Record(record);
}

StatusOr<RunRecord> RecordFromReport(const std::string& kind, const std::string& model_path,
                                     const json& report, const std::string& labels,
                                     const std::string& verdict, const std::string& error) {
  RunRecord r;
  r.kind = kind;
  r.model_name = fs::path(model_path).filename().string();
  REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, ReadFileBytes(model_path));
  r.model_hash = ContentHash(bytes);
  r.verdict = verdict;
  r.error = error;
  r.report = report;
  r.profile = nullptr;
  r.compile_options = nullptr;
  if (report.is_object()) {
    if (report.contains("module_cache") && report["module_cache"].is_object()) {
      r.executable_hash = report["module_cache"].value("hash", "");
    }
    const json env = report.value("environment", json::object());
    if (env.is_object() && env.contains("executable") && env["executable"].is_object()) {
      r.compile_options = env["executable"].value("compile_options", json(nullptr));
    }
    r.device = report.value("device", "");
    r.summary = SummaryOf(report);
    if (report.contains("profile")) r.profile = report["profile"];
    if (report.contains("benchmark") && report["benchmark"].contains("samples_ms")) {
      r.samples_ms = report["benchmark"]["samples_ms"].get<std::vector<double>>();
    } else if (report.contains("load") && report["load"].contains("levels") &&
               report["load"]["levels"].is_array() && !report["load"]["levels"].empty()) {
      const json& level = report["load"]["levels"][0];
      if (level.contains("timeline") && level["timeline"].contains("latency_ms")) {
        r.samples_ms = level["timeline"]["latency_ms"].get<std::vector<double>>();
      }
    }
  } else {
    r.summary = json::object();
  }
  r.scenario = ScenarioOf(kind, report);
  r.device_class = labels.empty() ? DeviceClassOf(report) : labels;
  return r;
}

json StoredRunJson(const StoredRun& r) {
  return {{"id", r.id},
          {"recorded_at", r.recorded_at},
          {"kind", r.kind},
          {"user", r.user},
          {"ci_job", r.ci_job},
          {"git_commit", r.git_commit},
          {"git_branch", r.git_branch},
          {"tags", r.tags},
          {"summary", r.summary},
          {"verdict", r.verdict},
          {"error", r.error},
          {"samples", r.sample_count}};
}

json HistoryJson(const std::vector<SeriesInfo>& series, const std::vector<std::vector<StoredRun>>& runs) {
  json out = {{"schema", "remex.history"}, {"schema_version", 1}, {"series", json::array()}};
  for (size_t i = 0; i < series.size(); ++i) {
    const SeriesInfo& s = series[i];
    json rs = json::array();
    if (i < runs.size()) {
      for (const StoredRun& r : runs[i]) {
        rs.push_back(StoredRunJson(r));
      }
    }
    out["series"].push_back({{"series_key", s.series_key},
                             {"model_name", s.model_name},
                             {"model_hash", s.model_hash},
                             {"compile_options", s.compile_options},
                             {"scenario", s.scenario},
                             {"device_class", s.device_class},
                             {"run_count", s.runs},
                             {"first_recorded_at", s.first_recorded_at},
                             {"last_recorded_at", s.last_recorded_at},
                             {"runs", rs}});
  }
  return out;
}

StatusOr<std::string> ParseSince(const std::string& since, int64_t now_unix_s) {
  auto bad = [&] {
    return InvalidArgument("--since '" + since +
                           "': expected a date (2026-12-01), a UTC time (2026-12-01T10:00:00Z) "
                           "or an age (30m, 12h, 7d)");
  };
  if (since.empty()) return bad();
  const char unit = since.back();
  if (unit == 'm' || unit == 'h' || unit == 'd') {
    const std::string digits = since.substr(0, since.size() - 1);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
      return bad();
    const int64_t n = std::stoll(digits);
    const int64_t seconds = n * (unit == 'm' ? 60 : unit == 'h' ? 3600 : 86400);
    return UtcIso8601(now_unix_s - seconds);
  }
  std::tm tm{};
  const char* end = strptime(since.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end && *end == '\0') return since;
  tm = {};
  end = strptime(since.c_str(), "%Y-%m-%d", &tm);
  if (end && *end == '\0' && since.size() == 10) return since + "T00:00:00Z";
  return bad();
}

}  // namespace remex::tooling
