// lease_bench: what one Redis carries for the device farm's leases (rpc/farm_lease.h), in
// simulation: device records without servers (a lease is Redis state alone) and client
// threads in this process, each with a connection of its own.
//
// Registers --devices device records in the pool 'lease-bench', then measures
//   1. uncontended: one client acquiring and releasing a free device --rounds times
//      (acquire and release latency, median and 99th percentile);
//   2. contended: --clients clients, each in a loop of acquire (waiting in the pool's
//      queue), hold --hold-ms, release, for --seconds: leases granted per second, the
//      acquire latency (which includes the wait in the queue), and whether the leases
//      went out in the order the clients came (tickets in the order of serials);
//   3. a queue (--waiters N > 0): every device held, N clients wait; over --idle-seconds
//      Redis's commands per second, CPU and memory with the queue idle; then the held
//      leases are released and each waiter, once served, releases its lease at once, so
//      the devices pass down the queue: the hand-over rate, and the order again.
// Redis's own figures (INFO: commands processed, CPU seconds, memory) are read before and
// after each phase. Every key of the pool is removed at the end. docs/benchmarks.md has
// the figures and the commands.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "rpc/farm.h"
#include "rpc/farm_lease.h"

namespace remex::bench {
namespace {

struct Stats {
  double median_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  size_t n = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](size_t pct) { return v[std::min(v.size() - 1, v.size() * pct / 100)] * 1e3; };
  s.median_ms = s.p50_ms = at(50);
  s.p90_ms = at(90);
  s.p99_ms = at(99);
  s.max_ms = v.back() * 1e3;
  return s;
}

nlohmann::json ToJson(const Stats& s) {
  return {{"n", s.n}, {"median_ms", s.median_ms}, {"p90_ms", s.p90_ms}, {"p99_ms", s.p99_ms}, {"max_ms", s.max_ms}};
}

// What Redis says of itself (INFO): commands processed, CPU seconds (user + system), memory.
struct RedisSample {
  double commands = 0, cpu_s = 0, memory_bytes = 0;
  Clock::time_point at;
};

RedisSample SampleRedis(farm::RedisClient& redis) {
  RedisSample s;
  s.at = Clock::now();
  auto info = redis.Query({"INFO", "all"});
  if (!info.ok()) return s;
  auto field = [&](const char* name) {
    const std::string key = std::string("\n") + name + ":";
    const size_t at = info->str.find(key);
    return at == std::string::npos ? 0.0 : std::atof(info->str.c_str() + at + key.size());
  };
  s.commands = field("total_commands_processed");
  s.cpu_s = field("used_cpu_user") + field("used_cpu_sys");
  s.memory_bytes = field("used_memory");
  return s;
}

// Redis's load between two samples: commands per second, CPU (one core = 100 %), memory.
nlohmann::json RedisLoad(const RedisSample& a, const RedisSample& b) {
  const double s = std::chrono::duration<double>(b.at - a.at).count();
  return {{"commands_per_second", (b.commands - a.commands) / s},
          {"cpu_percent", 100.0 * (b.cpu_s - a.cpu_s) / s},
          {"used_memory_mib", b.memory_bytes / (1 << 20)}};
}

std::string LoadText(const nlohmann::json& j) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "Redis %.0f commands/s, %.1f %% CPU, %.1f MiB",
                j["commands_per_second"].get<double>(), j["cpu_percent"].get<double>(),
                j["used_memory_mib"].get<double>());
  return buf;
}

// Leases granted out of the order their clients came: pairs (ticket, serial) sorted by
// serial whose ticket is lower than an earlier one's.
size_t OrderViolations(std::vector<std::pair<int64_t, int64_t>> served) {
  std::sort(served.begin(), served.end(), [](auto& a, auto& b) { return a.second < b.second; });
  size_t bad = 0;
  int64_t last = 0;
  for (const auto& [ticket, serial] : served) {
    if (ticket < last) ++bad;
    last = std::max(last, ticket);
  }
  return bad;
}

int Main(int argc, char** argv) {
  CLI::App app{"lease_bench: lease latency, throughput and queue cost against one Redis"};
  std::string url_text;
  int devices = 3, clients = 20, rounds = 500, hold_ms = 0, waiters = 0,
      heartbeat_ms = static_cast<int>(farm::LeaseRequest{}.heartbeat.count());
  double seconds = 5, idle_seconds = 5;
  bool json = false;
  app.add_option("--farm", url_text, "redis://HOST:PORT[/DB] of a Redis to use (its pool 'lease-bench')")->required();
  app.add_option("--devices", devices, "device records in the pool")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--clients", clients, "clients of the contended phase (0: none)")->capture_default_str()->check(CLI::Range(0, 20000));
  app.add_option("--rounds", rounds, "acquire/release pairs of the uncontended phase")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", seconds, "length of the contended phase")->capture_default_str();
  app.add_option("--hold-ms", hold_ms, "how long each contended lease is held")->capture_default_str();
  app.add_option("--waiters", waiters, "clients of the queue phase (0: none)")->capture_default_str()->check(CLI::Range(0, 50000));
  app.add_option("--idle-seconds", idle_seconds, "how long the queue phase's waiters wait before the devices are released")
      ->capture_default_str();
  app.add_option("--heartbeat-ms", heartbeat_ms, "the waiters' heartbeat (LeaseRequest::heartbeat)")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  auto url = farm::ParseRedisUrl(url_text);
  if (!url.ok()) {
    std::fprintf(stderr, "lease_bench: %s\n", url.status().ToString().c_str());
    return 2;
  }
  // A connection per client thread.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  auto admin = farm::RedisClient::Connect(*url, std::chrono::seconds(5));
  if (!admin.ok()) {
    std::fprintf(stderr, "lease_bench: %s\n", admin.status().ToString().c_str());
    return 3;
  }
  const std::string pool = "lease-bench";
  const std::string prefix = farm::PoolKeyPrefix(pool);
  auto clean = [&] {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      auto r = (*admin)->Query({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
      if (!r.ok() || r->array.size() != 2) break;
      cursor = r->array[0].str;
      for (const auto& k : r->array[1].array) keys.push_back(k.str);
    } while (cursor != "0");
    for (const std::string& k : keys) (void)(*admin)->Execute({"DEL", k});
  };
  clean();
  for (int i = 0; i < devices; ++i) {
    farm::DeviceRecord d;
    d.id = "bench-" + std::to_string(i) + ":1";
    d.pool = pool;
    d.kind = d.device = "cpu";
    d.labels = {{"rack", std::to_string(i % 10)}};
    d.health = "ok";
    d.registered_ms = d.heartbeat_ms = farm::UnixMillis();
    if (Status st = (*admin)->WriteDevice(d, std::chrono::minutes(30)); !st.ok()) {
      std::fprintf(stderr, "lease_bench: %s\n", st.ToString().c_str());
      return 3;
    }
  }
  farm::LeaseRequest request;
  request.pool = pool;
  request.holder = "lease_bench";
  request.heartbeat = std::chrono::milliseconds(heartbeat_ms);
  std::atomic<uint64_t> failed{0};
  auto fail = [&](const Status& st) {
    if (failed++ < 5) std::fprintf(stderr, "lease_bench: %s\n", st.ToString().c_str());
  };
  nlohmann::json out = {{"devices", devices}, {"redis", url->ToString()}};

  // 1. Uncontended.
  std::vector<double> acquire, release;
  RedisSample r0 = SampleRedis(**admin);
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    auto lease = farm::AcquireLease(**admin, request);
    acquire.push_back(SecondsSince(t0));
    if (!lease.ok()) {
      fail(lease.status());
      return 3;
    }
    auto t1 = Clock::now();
    (void)farm::ReleaseLease(**admin, *lease);
    release.push_back(SecondsSince(t1));
  }
  const Stats a = Summarize(acquire), rel = Summarize(release);
  out["uncontended"] = {{"rounds", rounds}, {"acquire", ToJson(a)}, {"release", ToJson(rel)},
                        {"redis", RedisLoad(r0, SampleRedis(**admin))}};
  if (!json) {
    std::printf("%d devices. uncontended (%d rounds): acquire median %.3f ms p99 %.3f ms; release median %.3f ms "
                "p99 %.3f ms\n", devices, rounds, a.median_ms, a.p99_ms, rel.median_ms, rel.p99_ms);
  }

  // 2. Contended.
  if (clients > 0) {
    std::mutex mu;
    std::vector<double> waits;
    std::vector<std::pair<int64_t, int64_t>> served;
    std::atomic<uint64_t> granted{0};
    const auto started = Clock::now();  // the clients connect within the phase
    const auto end = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    std::vector<std::thread> threads;
    RedisSample s0 = SampleRedis(**admin);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        auto client = farm::RedisClient::Connect(*url, std::chrono::seconds(5));
        if (!client.ok()) {
          fail(client.status());
          return;
        }
        farm::LeaseRequest r = request;
        r.wait = std::chrono::seconds(120);
        std::vector<double> mine;
        std::vector<std::pair<int64_t, int64_t>> order;
        while (Clock::now() < end) {
          auto t0 = Clock::now();
          auto lease = farm::AcquireLease(**client, r);
          if (!lease.ok()) {
            fail(lease.status());
            continue;
          }
          mine.push_back(SecondsSince(t0));
          order.emplace_back(lease->ticket, lease->serial);
          if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
          (void)farm::ReleaseLease(**client, *lease);
          ++granted;
        }
        std::lock_guard<std::mutex> lock(mu);
        waits.insert(waits.end(), mine.begin(), mine.end());
        served.insert(served.end(), order.begin(), order.end());
      });
    }
    for (auto& t : threads) t.join();
    const double elapsed = SecondsSince(started);
    const RedisSample s1 = SampleRedis(**admin);
    const Stats w = Summarize(waits);
    const double rate = static_cast<double>(granted.load()) / elapsed;
    const size_t out_of_order = OrderViolations(served);
    out["contended"] = {{"clients", clients}, {"hold_ms", hold_ms}, {"seconds", elapsed},
                        {"leases", granted.load()}, {"leases_per_second", rate}, {"acquire", ToJson(w)},
                        {"out_of_order", out_of_order}, {"redis", RedisLoad(s0, s1)}};
    if (!json) {
      std::printf("contended (%d clients, hold %d ms, %.1f s): %.0f leases/s; acquire median %.3f ms p99 %.3f ms; "
                  "%zu out of order; %s\n", clients, hold_ms, elapsed, rate, w.median_ms, w.p99_ms, out_of_order,
                  LoadText(out["contended"]["redis"]).c_str());
    }
  }

  // 3. A queue: every device held, --waiters clients waiting, then served down the queue.
  if (waiters > 0) {
    std::vector<farm::Lease> held;
    farm::LeaseRequest hold = request;
    hold.ttl = std::chrono::hours(1);
    for (int i = 0; i < devices; ++i) {
      auto lease = farm::AcquireLease(**admin, hold);
      if (!lease.ok()) {
        fail(lease.status());
        return 3;
      }
      held.push_back(*lease);
    }
    std::mutex mu;
    std::vector<double> waits;
    std::vector<std::pair<int64_t, int64_t>> served;
    std::vector<Clock::time_point> served_at;
    std::atomic<int> connected{0};
    std::vector<std::thread> threads;
    const auto t_start = Clock::now();
    for (int c = 0; c < waiters; ++c) {
      threads.emplace_back([&] {
        auto client = farm::RedisClient::Connect(*url, std::chrono::seconds(30));
        if (!client.ok()) {
          fail(client.status());
          return;
        }
        ++connected;
        farm::LeaseRequest r = request;
        r.wait = std::chrono::seconds(600);
        auto t0 = Clock::now();
        auto lease = farm::AcquireLease(**client, r);
        const auto at = Clock::now();
        if (!lease.ok()) {
          fail(lease.status());
          return;
        }
        (void)farm::ReleaseLease(**client, *lease);
        std::lock_guard<std::mutex> lock(mu);
        waits.push_back(std::chrono::duration<double>(at - t0).count());
        served.emplace_back(lease->ticket, lease->serial);
        served_at.push_back(at);
      });
    }
    // All queued: the queue's length is the waiters'.
    int64_t queued = 0;
    for (int k = 0; k < 12000 && queued < waiters && failed.load() == 0; ++k) {
      auto n = (*admin)->Query({"ZCARD", farm::QueueKey(pool)});
      queued = n.ok() ? n->integer : 0;
      if (queued < waiters) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const double join_s = SecondsSince(t_start);
    // The idle queue: nothing frees a device.
    const RedisSample i0 = SampleRedis(**admin);
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
    const RedisSample i1 = SampleRedis(**admin);
    // The hand-over: the held devices released; each waiter served releases at once.
    const auto released = Clock::now();
    for (const farm::Lease& l : held) (void)farm::ReleaseLease(**admin, l);
    for (auto& t : threads) t.join();
    const RedisSample i2 = SampleRedis(**admin);
    Clock::time_point last = released;
    for (const auto& t : served_at) last = std::max(last, t);
    const double handover_s = std::chrono::duration<double>(last - released).count();
    const double rate = served.size() / std::max(handover_s, 1e-9);
    const size_t out_of_order = OrderViolations(served);
    const Stats w = Summarize(waits);
    out["queue"] = {{"waiters", waiters}, {"queued", queued}, {"heartbeat_ms", heartbeat_ms},
                    {"join_seconds", join_s}, {"idle_seconds", idle_seconds}, {"idle_redis", RedisLoad(i0, i1)},
                    {"served", served.size()}, {"handover_seconds", handover_s}, {"leases_per_second", rate},
                    {"out_of_order", out_of_order}, {"handover_redis", RedisLoad(i1, i2)},
                    {"acquire", ToJson(w)}};
    if (!json) {
      std::printf("queue (%d waiters, %lld queued in %.1f s, heartbeat %d ms): idle: %s; hand-over of %zu leases in "
                  "%.2f s: %.0f leases/s, %zu out of order; %s\n", waiters, static_cast<long long>(queued), join_s,
                  heartbeat_ms, LoadText(out["queue"]["idle_redis"]).c_str(), served.size(), handover_s, rate,
                  out_of_order, LoadText(out["queue"]["handover_redis"]).c_str());
    }
  }
  clean();
  out["failed"] = failed.load();
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
