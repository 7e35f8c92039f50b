// The write throughput of the results store (host_client/tooling/results_store.h):
// W writers, each with its own connection as W CI clients would have, record R records
// each at once; prints records per second over the whole (first open to last commit)
// and the latency of one Record call. Every record is then read back and counted.
//
//   build/bench/results_store_bench --store sqlite --writers 16 --records 100
//   build/bench/results_store_bench --store postgresql --writers 16 --records 100
//
// --store sqlite writes a fresh file in a temporary folder; --store postgresql starts a
// temporary PostgreSQL (tests/postgres_server.h: Debian's postgresql, fsync on); any
// other value is taken as a results URL. A record holds --samples samples (in its
// report JSON too, as remex bench --record writes it).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "host_client/tooling/results_store.h"
#include "tests/postgres_server.h"

namespace {

using remex::tooling::RunRecord;

RunRecord Record(int writer, int i, size_t samples) {
  RunRecord r;
  r.recorded_at = "2026-12-02T08:00:00Z";
  r.kind = "bench";
  r.user = "bench";
  r.git_commit = "0123456789abcdef0123456789abcdef01234567";
  r.git_branch = "main";
  r.tags = {{"writer", std::to_string(writer)}, {"i", std::to_string(i)}};
  r.model_name = "model.onnx";
  r.model_hash = std::string(32, 'a');
  r.executable_hash = std::string(32, 'b');
  r.compile_options = {{"layout", "NCHW"}, {"dtype", "float32"}};
  r.scenario = "time-evaluator";
  r.device_class = "cpu:bench";
  r.device = "cpu";
  for (size_t k = 0; k < samples; ++k)
    r.samples_ms.push_back(1.0 + 0.01 * static_cast<double>((k * 7919) % 101));
  r.summary = {{"median_ms", 1.5}, {"count", samples}};
  r.report = {{"schema", "remex.bench"}, {"benchmark", {{"samples_ms", r.samples_ms}}}};
  r.profile = nullptr;
  r.verdict = "pass";
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"results store write throughput: W writers recording at once"};
  std::string store = "sqlite";
  int writers = 16, records = 100;
  size_t samples = 1000;
  app.add_option("--store", store, "sqlite, postgresql, or a results URL")->capture_default_str();
  app.add_option("--writers", writers, "writers at once, one connection each")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--records", records, "records per writer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--samples", samples, "samples per record")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  CLI11_PARSE(app, argc, argv);

  remex::testing::TempPostgres postgres;
  std::string url = store, dir;
  if (store == "sqlite") {
    char tmpl[] = "/tmp/remex_store_bench_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    dir = tmpl;
    url = "sqlite://" + dir + "/results.sqlite";
  } else if (store == "postgresql") {
    if (!postgres.Start()) {
      std::fprintf(stderr, "results_store_bench: %s\n", postgres.error().c_str());
      return 1;
    }
    url = postgres.Url();
  }
  std::atomic<int> failures{0};
  std::vector<std::vector<double>> latencies(writers);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto s = remex::tooling::OpenResultsStore(url);
      if (!s.ok()) {
        std::fprintf(stderr, "writer %d: %s\n", w, s.status().ToString().c_str());
        ++failures;
        return;
      }
      for (int i = 0; i < records; ++i) {
        RunRecord r = Record(w, i, samples);
        const auto t0 = std::chrono::steady_clock::now();
        auto id = (*s)->Record(r);
        latencies[w].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (!id.ok()) {
          std::fprintf(stderr, "writer %d: %s\n", w, id.status().ToString().c_str());
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto s = remex::tooling::OpenResultsStore(url);
  size_t stored = 0;
  if (s.ok()) {
    auto runs = (*s)->ListRuns({});
    if (runs.ok()) stored = runs->size();
  }
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q / 100 * all.size()))];
  };
  const size_t total = static_cast<size_t>(writers) * records;
  nlohmann::json out = {{"store", store == "sqlite" || store == "postgresql" ? store : "url"},
                        {"writers", writers},
                        {"records", total},
                        {"samples_per_record", samples},
                        {"seconds", seconds},
                        {"records_per_s", total / seconds},
                        {"record_latency_ms", {{"p50", pct(50)}, {"p90", pct(90)}, {"p99", pct(99)}}},
                        {"stored", stored},
                        {"failures", failures.load()}};
  std::printf("%s\n", out.dump(2).c_str());
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return failures.load() == 0 && stored == total ? 0 : 1;
}
