// lease_bench: what one Redis carries for the device farm's leases (rpc/farm_lease.h).
//
// Registers --devices device records in a pool of their own (no servers: a lease is
// Redis state alone), then measures
//   1. uncontended: one client acquiring and releasing a free device --rounds times
//      (acquire and release latency, median and 99th percentile);
//   2. contended: --clients clients, each in a loop of acquire (waiting in the pool's
//      queue), hold --hold-ms, release, for --seconds: leases granted per second and the
//      acquire latency, which includes the wait in the queue.
// The records and the pool's keys are removed at the end. docs/benchmarks.md has the
// figures and the command.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "rpc/farm.h"
#include "rpc/farm_lease.h"

namespace remex::bench {
namespace {

struct Stats {
  double median_ms = 0, p99_ms = 0;
  size_t n = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median_ms = v[v.size() / 2] * 1e3;
  s.p99_ms = v[std::min(v.size() - 1, v.size() * 99 / 100)] * 1e3;
  return s;
}

int Main(int argc, char** argv) {
  CLI::App app{"lease_bench: lease latency and throughput against one Redis"};
  std::string url_text;
  int devices = 3, clients = 20, rounds = 500, hold_ms = 0;
  double seconds = 5;
  bool json = false;
  app.add_option("--farm", url_text, "redis://HOST:PORT[/DB] of a Redis to use (its pool 'lease-bench')")->required();
  app.add_option("--devices", devices, "device records in the pool")->capture_default_str();
  app.add_option("--clients", clients, "clients of the contended phase")->capture_default_str();
  app.add_option("--rounds", rounds, "acquire/release pairs of the uncontended phase")->capture_default_str();
  app.add_option("--seconds", seconds, "length of the contended phase")->capture_default_str();
  app.add_option("--hold-ms", hold_ms, "how long each contended lease is held")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  auto url = farm::ParseRedisUrl(url_text);
  if (!url.ok()) {
    std::fprintf(stderr, "lease_bench: %s\n", url.status().ToString().c_str());
    return 2;
  }
  auto admin = farm::RedisClient::Connect(*url, std::chrono::seconds(5));
  if (!admin.ok()) {
    std::fprintf(stderr, "lease_bench: %s\n", admin.status().ToString().c_str());
    return 3;
  }
  const std::string pool = "lease-bench";
  for (int i = 0; i < devices; ++i) {
    farm::DeviceRecord d;
    d.id = "bench-" + std::to_string(i) + ":1";
    d.pool = pool;
    d.kind = d.device = "cpu";
    d.health = "ok";
    d.registered_ms = d.heartbeat_ms = farm::UnixMillis();
    if (Status st = (*admin)->WriteDevice(d, std::chrono::minutes(10)); !st.ok()) {
      std::fprintf(stderr, "lease_bench: %s\n", st.ToString().c_str());
      return 3;
    }
  }
  farm::LeaseRequest request;
  request.pool = pool;
  request.holder = "lease_bench";
  // 1. Uncontended.
  std::vector<double> acquire, release;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    auto lease = farm::AcquireLease(**admin, request);
    acquire.push_back(SecondsSince(t0));
    if (!lease.ok()) {
      std::fprintf(stderr, "lease_bench: %s\n", lease.status().ToString().c_str());
      return 3;
    }
    auto t1 = Clock::now();
    (void)farm::ReleaseLease(**admin, *lease);
    release.push_back(SecondsSince(t1));
  }
  // 2. Contended.
  std::mutex mu;
  std::vector<double> waits;
  std::atomic<uint64_t> granted{0}, failed{0};
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto client = farm::RedisClient::Connect(*url, std::chrono::seconds(5));
      if (!client.ok()) {
        ++failed;
        return;
      }
      farm::LeaseRequest r = request;
      r.wait = std::chrono::seconds(60);
      std::vector<double> mine;
      while (Clock::now() < end) {
        auto t0 = Clock::now();
        auto lease = farm::AcquireLease(**client, r);
        if (!lease.ok()) {
          ++failed;
          continue;
        }
        mine.push_back(SecondsSince(t0));
        if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        (void)farm::ReleaseLease(**client, *lease);
        ++granted;
      }
      std::lock_guard<std::mutex> lock(mu);
      waits.insert(waits.end(), mine.begin(), mine.end());
    });
  }
  const auto started = Clock::now();
  for (auto& t : threads) t.join();
  const double elapsed = SecondsSince(started);
  for (int i = 0; i < devices; ++i) (void)(*admin)->RemoveDevice(pool, "bench-" + std::to_string(i) + ":1");
  for (const std::string& key : {farm::QueueKey(pool), farm::WaitersKey(pool), farm::AliveKey(pool),
                                 farm::TicketKey(pool), farm::ServedKey(pool), farm::PoolDevicesKey(pool)}) {
    (void)(*admin)->Execute({"DEL", key});
  }
  const Stats a = Summarize(acquire), r = Summarize(release), w = Summarize(waits);
  const double rate = static_cast<double>(granted.load()) / elapsed;
  if (json) {
    nlohmann::json j = {{"devices", devices},
                        {"clients", clients},
                        {"hold_ms", hold_ms},
                        {"uncontended", {{"acquire_median_ms", a.median_ms}, {"acquire_p99_ms", a.p99_ms},
                                         {"release_median_ms", r.median_ms}, {"release_p99_ms", r.p99_ms},
                                         {"rounds", a.n}}},
                        {"contended", {{"leases_per_second", rate}, {"acquire_median_ms", w.median_ms},
                                       {"acquire_p99_ms", w.p99_ms}, {"leases", granted.load()},
                                       {"failed", failed.load()}, {"seconds", elapsed}}}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("uncontended (%zu rounds): acquire median %.3f ms p99 %.3f ms; release median %.3f ms p99 %.3f ms\n",
                a.n, a.median_ms, a.p99_ms, r.median_ms, r.p99_ms);
    std::printf("contended (%d clients, %d devices, hold %d ms, %.1f s): %.0f leases/s; acquire median %.3f ms "
                "p99 %.3f ms; %llu failed\n",
                clients, devices, hold_ms, elapsed, rate, w.median_ms, w.p99_ms,
                static_cast<unsigned long long>(failed.load()));
  }
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
