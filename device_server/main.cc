// remex-server [--listen HOST:PORT] [--device cpu|cuda:N] [--threads N] [--io-threads N]
//              [--module-cache-bytes N]
//              [--benchmark-time-limit-s S] [--metrics HOST:PORT [--metrics-token-file FILE]]
//              [--token-file FILE | --insecure]
//              [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
//              [budgets and deadlines: see --help] [--inject-device-fault N (tests only)]
//              [--farm redis://HOST:PORT[/DB] [--pool NAME] [--labels k=v,...] [--advertise HOST:PORT]]
//              [--results URL] [--self-test-interval DURATION] [--self-test-drift PCT]
//
// Serves the Remex protocol on HOST:PORT (default 127.0.0.1:9190; port 0 picks a free
// one). Prints "remex-server listening on HOST:PORT (device D)" on stdout once it accepts
// connections (followed by ", metrics on HOST:PORT" with --metrics; for the CPU device D
// names its compute threads), and stops cleanly on SIGINT or SIGTERM. A usage error (an
// unknown flag, a value out of range) exits with status 2 and names the flag on stderr;
// --version prints "remex-server VERSION". Refuses (status 2) to serve a non-loopback
// address without authentication (--token-file, or mutual TLS with --tls-client-ca)
// unless --insecure says so, and likewise /metrics on a non-loopback --metrics address
// without a token (--metrics-token-file, else --token-file's), which /metrics then
// requires as "Authorization: Bearer TOKEN" (/healthz and /readyz stay open). Exits with status 1 and the reason on stderr when the
// device cannot be created (for cuda:N: no GPU, no driver,
// or a build without CUDA). After a device fault it closes every session, resets the
// device and goes on serving (docs/security.md, "Device faults"). Logs go to stderr, at
// info level unless --quiet: sessions opened and closed, and once per event a request
// answered with an error or a frame the transport refused, naming the client's address
// and port, the request's kind and id, the status code and message. With --farm it
// registers its device in the Redis farm once it listens (rpc/farm.h, docs/farm.md),
// exiting with status 1 when Redis cannot be reached, and leaves the farm before it
// stops. With --farm or --results (default $REMEX_RESULTS) it runs the device self-test
// at start, after every device reset and every --self-test-interval (health_monitor.h):
// each is recorded in the results store and its latency judged against the device's
// history there; a failed or drifted self-test quarantines the device in the farm, and
// a store that cannot be reached is a warning, never a reason to stop (docs/farm.md,
// "Health").
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/asio/ip/address.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>

#include "device_server/device_server.h"
#include "device_server/health_monitor.h"
#include "device_server/self_test.h"
#include "host_client/tooling/results_store.h"
#include "kernels/kernels.h"
#include "rpc/auth.h"
#include "rpc/farm.h"
#include "rpc/farm_lease.h"

namespace {

bool ParseHostPort(const std::string& s, std::string& host, uint16_t& port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    int p = std::stoi(s.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host.empty();
}

// Whether `host` names this machine only: localhost, 127.0.0.0/8 or ::1.
bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"remex-server: runs Remex executables on this machine's device for remote clients"};
  std::string listen = "127.0.0.1:9190";
  std::string device = "cpu";
  int io_threads = 1;
  int compute_threads = 0;
  bool quiet = false;
  uint64_t module_cache_bytes = uint64_t{1} << 30;
  uint32_t benchmark_limit_s = 600;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--device", device, "device to serve: cpu, or cuda:N (GPU N; needs a CUDA build)")->capture_default_str();
  app.set_version_flag("--version", std::string("remex-server ") + REMEX_VERSION);
  app.add_option("--threads", compute_threads,
                 "compute threads of the cpu device: the OpenMP team its oneDNN kernels (Conv, MatMul, ...) run "
                 "with; the other kernels run on the device thread alone (default: OMP_NUM_THREADS when set, else "
                 "one per CPU the server may run on; not with --device cuda:N)")
      ->check(CLI::Range(1, remex::kernels::kMaxCpuComputeThreads));
  app.add_option("--io-threads", io_threads, "I/O threads (device work runs on its own thread)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--module-cache-bytes", module_cache_bytes,
                 "bound of the module cache shared by all sessions (.rmx bytes + constants; 0: no cache)")
      ->capture_default_str();
  app.add_option("--benchmark-time-limit-s", benchmark_limit_s, "longest one benchmark request may run")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_flag("--quiet", quiet, "log warnings and errors only");

  // Budgets and deadlines: each refusal names the limit (RESOURCE_EXHAUSTED /
  // DEADLINE_EXCEEDED). Defaults are ServerConfig's.
  remex::server::ServerConfig defaults;
  uint64_t session_memory_bytes = defaults.session_memory_bytes;
  uint32_t max_handles = defaults.max_handles_per_session;
  uint32_t max_connections = defaults.max_connections;
  uint32_t max_connections_per_address = defaults.max_connections_per_address;
  uint64_t max_frame_bytes = defaults.max_frame_bytes;
  uint64_t max_receiving_bytes = defaults.max_receiving_bytes;
  uint32_t max_decompression_ratio = defaults.max_decompression_ratio;
  uint32_t auth_timeout_s = static_cast<uint32_t>(defaults.auth_timeout.count() / 1000);
  uint32_t max_unauthenticated = defaults.max_unauthenticated_connections;
  uint32_t max_unauthenticated_per_address = defaults.max_unauthenticated_per_address;
  uint32_t idle_timeout_s = static_cast<uint32_t>(defaults.idle_timeout.count() / 1000);
  uint32_t read_timeout_s = static_cast<uint32_t>(defaults.read_timeout.count() / 1000);
  uint32_t write_timeout_s = static_cast<uint32_t>(defaults.write_timeout.count() / 1000);
  int encode_threads = defaults.encode_threads;
  uint32_t max_invoke_ms = static_cast<uint32_t>(defaults.max_invoke_time.count());
  uint32_t inline_invoke_below_us = static_cast<uint32_t>(defaults.inline_invoke_below.count());
  uint32_t drain_timeout_s = static_cast<uint32_t>(defaults.drain_timeout.count() / 1000);
  bool cuda_graphs = defaults.device_graphs;
  app.add_option("--session-memory-bytes", session_memory_bytes,
                 "device memory one session may hold at once: tensors, VM constants and arenas, and the "
                 "attachments of a request being received (0: half the device's memory)")
      ->capture_default_str();
  app.add_option("--max-handles-per-session", max_handles, "objects (modules, VMs, tensors) one session may hold")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("--max-connections", max_connections, "connections served at once (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-connections-per-address", max_connections_per_address,
                 "connections served at once from one client address (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-frame-bytes", max_frame_bytes, "raw bytes of all the attachments of one request")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{64} << 30));
  app.add_option("--max-receiving-bytes", max_receiving_bytes,
                 "raw bytes of the attachments of all requests being received at once, server-wide (0: half the "
                 "host's physical memory)")
      ->capture_default_str();
  app.add_option("--max-decompression-ratio", max_decompression_ratio,
                 "largest raw / wire size of what a request attachment decompresses (a zstd attachment, or each "
                 "zstd chunk), checked before it is decompressed (0: no cap; Remex clients stay within the "
                 "default)")
      ->capture_default_str();
  app.add_option("--auth-timeout-s", auth_timeout_s,
                 "close a connection that has not said hello (and, with a token or a farm, authenticated) this "
                 "long after it connected (0: never)")
      ->capture_default_str();
  app.add_option("--max-unauthenticated-connections", max_unauthenticated,
                 "connections that have not authenticated yet held at once; past it the oldest is closed (0: no "
                 "limit)")
      ->capture_default_str();
  app.add_option("--max-unauthenticated-per-address", max_unauthenticated_per_address,
                 "connections that have not authenticated yet held at once from one client address; past it new "
                 "ones are refused (0: no limit)")
      ->capture_default_str();
  app.add_option("--idle-timeout-s", idle_timeout_s, "close a connection idle this long between requests (0: never)")
      ->capture_default_str();
  app.add_option("--read-timeout-s", read_timeout_s,
                 "close a connection whose request, once started, makes no progress this long (0: never)")
      ->capture_default_str();
  app.add_option("--write-timeout-s", write_timeout_s,
                 "close a connection whose client takes no byte of a reply this long (0: never)")
      ->capture_default_str();
  app.add_option("--encode-threads", encode_threads,
                 "threads that compress large replies (1 MiB or more), off the I/O threads (0: on them)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--max-invoke-ms", max_invoke_ms,
                 "longest one invoke or profile may run; caps a client's deadline (checked between kernels and "
                 "at every loop iteration)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 86400u * 1000u));
  app.add_flag("--cuda-graphs", cuda_graphs,
               "cuda devices: record a function's kernels into a CUDA Graph at its second call with the same "
               "input shapes, and launch the graph at every later one (inputs and outputs are copied on the "
               "device; calls that move data between host and device run as before); the graphs' memory counts "
               "against the session");
  app.add_option("--inline-invoke-below-us", inline_invoke_below_us,
                 "cpu device: run an invoke on the I/O thread, without a hand-off to the device thread, when "
                 "that thread is idle and the session's previous invoke took less than this; past it the run moves "
                 "to the device thread; setInput, setOutput, free, tensorWrite and tensorAlloc run there alike "
                 "(0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1000u * 1000u));
  app.add_option("--drain-timeout-s", drain_timeout_s,
                 "on SIGTERM/SIGINT, how long running requests may take to finish before they are cancelled")
      ->capture_default_str()
      ->check(CLI::Range(0u, 3600u));
  std::string token_file;
  bool insecure = false;
  app.add_option("--token-file", token_file,
                 "require every session to prove this shared secret (at least 16 bytes; clients pass the same "
                 "--token-file or set REMEX_TOKEN); the token never crosses the wire");
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without --token-file: anyone who reaches the port can use the device "
               "(and, with a non-loopback --metrics and no token, read /metrics)");
  std::string tls_cert, tls_key, tls_client_ca;
  app.add_option("--tls-cert", tls_cert,
                 "serve TLS (1.2 or later) with this PEM certificate chain; clients connect with --tls-ca");
  app.add_option("--tls-key", tls_key, "the PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "mutual TLS: require a client certificate signed by a CA of this PEM file (clients pass --tls-cert "
                 "and --tls-key)");
  uint64_t allocator_cache_bytes = defaults.allocator_cache_bytes;
  app.add_option("--allocator-cache-bytes", allocator_cache_bytes,
                 "freed device memory kept for reuse, the longest-freed blocks returned past it (all of it when the "
                 "last session closes); 0: a quarter of the device's memory, at least 256 MiB")
      ->capture_default_str();
  std::string metrics;
  app.add_option("--metrics", metrics,
                 "serve /metrics (Prometheus text), /healthz and /readyz over HTTP on HOST:PORT (port 0: any free "
                 "one; default: no endpoint); /metrics needs \"Authorization: Bearer TOKEN\" when the server has "
                 "a metrics token, and a non-loopback address needs one (or --insecure)");
  std::string metrics_token_file;
  app.add_option("--metrics-token-file", metrics_token_file,
                 "the token /metrics requires (at least 16 bytes; scrapers send \"Authorization: Bearer TOKEN\"); "
                 "default: --token-file's, which also lets its holders use the device");
  std::string farm_url, farm_pool = "default", farm_labels, farm_advertise;
  app.add_option("--farm", farm_url,
                 "register this device in the Redis farm at redis://[USER@]HOST:PORT[/DB] (a user's password in "
                 "REMEX_FARM_PASSWORD; docs/farm.md): refreshed every "
                 "second, gone within 5 s of the server dying, removed when it stops");
  app.add_option("--pool", farm_pool, "with --farm: the pool the device joins (letters, digits, _.-)")
      ->capture_default_str();
  app.add_option("--labels", farm_labels, "with --farm: labels of the device, k=v,k=v (e.g. gpu=h100,rack=b7)");
  app.add_option("--advertise", farm_advertise,
                 "with --farm: HOST:PORT clients reach this server at (default: the --listen address with the port "
                 "bound; required when listening on every interface)");
  std::string farm_key_file;
  app.add_option("--farm-key-file", farm_key_file,
                 "with --farm: the farm key (a file of at least 32 bytes, mode 600, the one the operator loaded the "
                 "lease functions with: remex farm install-functions): only lease records those functions wrote "
                 "(their MAC verifies) are honoured; default: lease records are not verified (docs/farm.md)");
  uint64_t inject_device_fault = 0;
  app.add_option("--inject-device-fault", inject_device_fault,
                 "TEST ONLY: the Nth kernel launched on the device fails, once, with a device fault (as a "
                 "poisoned CUDA context would), so that the recovery (the invoke fails, every session is closed, "
                 "the device is reset) can be exercised without a faulty GPU; never in production (0: off)")
      ->capture_default_str();
  bool inject_self_test_failure = false;
  app.add_flag("--inject-self-test-failure", inject_self_test_failure,
               "TEST ONLY: the device self-test sees a wrong result, as on a device that computes wrongly, so "
               "that quarantine can be exercised without one; never in production");
  std::string results_url;
  app.add_option("--results", results_url,
                     "record every self-test (its verdict and latency) in the results store at sqlite:///PATH or "
                     "postgresql://... and judge its latency against the device's history there (docs/farm.md, "
                     "\"Health\"); default: $REMEX_RESULTS, else no store")
          ->envname("REMEX_RESULTS");
  std::string self_test_interval = "1h";
  auto* interval_option =
      app.add_option("--self-test-interval", self_test_interval,
                     "with --farm or --results: run the device self-test this often too, besides at start and after "
                     "every device reset: 30s, 10m, 1h, 1d (1s to 7d; 0: not periodically)")
          ->capture_default_str();
  double self_test_drift = 25;
  auto* drift_option =
      app.add_option("--self-test-drift", self_test_drift,
                     "with --results: a self-test whose median latency is this many percent above that of the "
                     "device's last 10 passing self-tests (and outside their spread) fails, and the device is "
                     "quarantined; judged once the device has 5 passing self-tests in the store (0: latency not "
                     "judged)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1000.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error 2, after CLI11's message naming the flag.
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  }
  if (compute_threads != 0 && device != "cpu") {
    std::fprintf(stderr, "remex-server: --threads sets the compute threads of the cpu device; --device %s runs its "
                 "kernels on the GPU\n", device.c_str());
    return 2;
  }
  // Logs go to stderr; stdout carries the "listening on" line only.
  spdlog::set_default_logger(spdlog::stderr_color_mt("remex-server"));
  if (quiet) spdlog::set_level(spdlog::level::warn);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");

  remex::server::ServerConfig config;
  if (!ParseHostPort(listen, config.host, config.port)) {
    std::fprintf(stderr, "remex-server: --listen must be HOST:PORT, got '%s'\n", listen.c_str());
    return 2;
  }
  config.device = device;
  config.server_args.assign(argv, argv + argc);
  config.io_threads = io_threads;
  config.compute_threads = compute_threads;
  config.module_cache_bytes = module_cache_bytes;
  config.benchmark_time_limit = std::chrono::seconds(benchmark_limit_s);
  config.session_memory_bytes = session_memory_bytes;
  config.max_handles_per_session = max_handles;
  config.max_connections = max_connections;
  config.max_connections_per_address = max_connections_per_address;
  config.max_frame_bytes = max_frame_bytes;
  config.max_receiving_bytes = max_receiving_bytes;
  config.max_decompression_ratio = max_decompression_ratio;
  config.auth_timeout = std::chrono::seconds(auth_timeout_s);
  config.max_unauthenticated_connections = max_unauthenticated;
  config.max_unauthenticated_per_address = max_unauthenticated_per_address;
  config.idle_timeout = std::chrono::seconds(idle_timeout_s);
  config.read_timeout = std::chrono::seconds(read_timeout_s);
  config.write_timeout = std::chrono::seconds(write_timeout_s);
  config.encode_threads = encode_threads;
  config.max_invoke_time = std::chrono::milliseconds(max_invoke_ms);
  config.inline_invoke_below = std::chrono::microseconds(inline_invoke_below_us);
  config.drain_timeout = std::chrono::seconds(drain_timeout_s);
  config.device_graphs = cuda_graphs;
  config.allocator_cache_bytes = allocator_cache_bytes;
  config.inject_device_fault_at_kernel = inject_device_fault;
  config.inject_self_test_failure = inject_self_test_failure;
  // A token file's contents into `out`; false (after saying why) when it cannot be used.
  auto read_token = [](const std::string& path, const char* flag, std::string& out) {
    auto token = remex::rpc::ReadTokenFile(path);
    if (!token.ok()) {
      std::fprintf(stderr, "remex-server: %s%s\n", flag, token.status().message().c_str());
      return false;
    }
    out = std::move(token).value();
    return true;
  };
  if (!token_file.empty() && !read_token(token_file, "", config.token)) return 2;
  if (tls_cert.empty() != tls_key.empty()) {
    std::fprintf(stderr, "remex-server: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    std::fprintf(stderr, "remex-server: --tls-client-ca needs --tls-cert and --tls-key\n");
    return 2;
  }
  if (!tls_cert.empty()) config.tls = remex::rpc::TlsServerConfig{tls_cert, tls_key, tls_client_ca};
  // Health over time: the results store and the self-test's schedule.
  if (!results_url.empty()) {
    if (const remex::Status st = remex::tooling::CheckResultsUrl(results_url); !st.ok()) {
      // CLI11 counts a value from the environment as given: the command line says which.
      bool from_flag = false;
      for (int i = 1; i < argc; ++i) from_flag |= std::string_view(argv[i]).starts_with("--results");
      std::fprintf(stderr, "remex-server: --results%s: %s\n", from_flag ? "" : " ($REMEX_RESULTS)",
                   st.message().c_str());
      return 2;
    }
  }
  // A PostgreSQL store that does not answer holds the health monitor 10 s per try at
  // most (libpq's connect_timeout), unless the environment sets another bound.
  if (!results_url.empty()) setenv("PGCONNECT_TIMEOUT", "10", /*overwrite=*/0);
  auto interval = remex::server::ParseSelfTestInterval(self_test_interval);
  if (!interval.ok()) {
    std::fprintf(stderr, "remex-server: %s\n", interval.status().message().c_str());
    return 2;
  }
  if (farm_url.empty() && results_url.empty() && interval_option->count() > 0) {
    std::fprintf(stderr, "remex-server: --self-test-interval needs --farm or --results\n");
    return 2;
  }
  if (results_url.empty() && drift_option->count() > 0) {
    std::fprintf(stderr, "remex-server: --self-test-drift needs --results (the device's history)\n");
    return 2;
  }
  if (!farm_url.empty() && !token_file.empty()) {
    std::fprintf(stderr, "remex-server: --farm and --token-file: in a farm, the token of the device's current lease "
                 "is the credential (docs/farm.md)\n");
    return 2;
  }
  if (config.token.empty() && farm_url.empty() && tls_client_ca.empty() && !insecure && !IsLoopback(config.host)) {
    std::fprintf(stderr,
                 "remex-server: refusing to serve %s without authentication: pass --token-file FILE (clients then "
                 "need the same token) or mutual TLS (--tls-client-ca), or --insecure on a network you trust\n",
                 config.host.c_str());
    return 2;
  }
  if (!metrics.empty()) {
    uint16_t metrics_port = 0;
    if (!ParseHostPort(metrics, config.metrics_host, metrics_port)) {
      std::fprintf(stderr, "remex-server: --metrics must be HOST:PORT, got '%s'\n", metrics.c_str());
      return 2;
    }
    config.metrics_port = metrics_port;
    if (!metrics_token_file.empty()) {
      if (!read_token(metrics_token_file, "--metrics-token-file: ", config.metrics_token)) return 2;
    } else {
      config.metrics_token = config.token;
    }
    if (config.metrics_token.empty() && !insecure && !IsLoopback(config.metrics_host)) {
      std::fprintf(stderr,
                   "remex-server: refusing to serve /metrics on %s without a token: pass --metrics-token-file FILE "
                   "(or --token-file; scrapers then send \"Authorization: Bearer TOKEN\"), give --metrics a loopback "
                   "address, or pass --insecure on a network you trust\n",
                   config.metrics_host.c_str());
      return 2;
    }
  } else if (!metrics_token_file.empty()) {
    std::fprintf(stderr, "remex-server: --metrics-token-file needs --metrics HOST:PORT\n");
    return 2;
  }

  // The farm: its URL, pool and labels are checked before the server starts.
  std::optional<remex::farm::RedisUrl> farm;
  remex::farm::DeviceRecord record;
  struct LeaseReader {
    std::mutex mu;
    remex::farm::RedisUrl url;
    std::string pool, id;  // set once registered
    std::unique_ptr<remex::farm::RedisClient> client;
    std::shared_ptr<remex::farm::LeaseVerifier> verifier;  // with --farm-key-file
  };
  auto lease_reader = std::make_shared<LeaseReader>();
  if (farm_url.empty()) {
    if (farm_pool != "default" || !farm_labels.empty() || !farm_advertise.empty() || !farm_key_file.empty()) {
      std::fprintf(stderr, "remex-server: --pool, --labels, --advertise and --farm-key-file need --farm\n");
      return 2;
    }
  } else {
    auto url = remex::farm::ParseRedisUrl(farm_url);
    auto labels = remex::farm::ParseLabels(farm_labels);
    std::string advertise_host;
    uint16_t advertise_port = 0;
    const remex::Status pool = remex::farm::CheckPoolName(farm_pool);
    if (!url.ok() || !labels.ok()) {
      std::fprintf(stderr, "remex-server: %s\n", (url.ok() ? labels.status() : url.status()).message().c_str());
      return 2;
    }
    if (!pool.ok()) {
      std::fprintf(stderr, "remex-server: --pool: %s\n", pool.message().c_str());
      return 2;
    }
    if (!farm_advertise.empty() && (!ParseHostPort(farm_advertise, advertise_host, advertise_port) || advertise_port == 0)) {
      std::fprintf(stderr, "remex-server: --advertise must be HOST:PORT, got '%s'\n", farm_advertise.c_str());
      return 2;
    }
    if (farm_advertise.empty() && (config.host == "0.0.0.0" || config.host == "::")) {
      std::fprintf(stderr, "remex-server: listening on every interface (%s): --farm needs --advertise HOST:PORT, the "
                   "address clients reach this server at\n", config.host.c_str());
      return 2;
    }
    if (!farm_key_file.empty()) {
      auto farm_key = remex::farm::ReadFarmKeyFile(farm_key_file);
      if (!farm_key.ok()) {
        std::fprintf(stderr, "remex-server: --farm-key-file: %s\n", farm_key.status().message().c_str());
        return 2;
      }
      lease_reader->verifier = std::make_shared<remex::farm::LeaseVerifier>(std::move(farm_key).value());
    }
    farm = *url;
    // Sessions sign with the key of the device's current lease, whose public key is read
    // from the farm at each session's start (a connection of its own, made on first use,
    // which reconnects by itself when Redis closed it).
    config.lease_key = [reader = lease_reader]() -> remex::StatusOr<std::string> {
      std::lock_guard<std::mutex> lock(reader->mu);
      if (reader->id.empty()) return remex::Unavailable("the device is not registered in the farm yet");
      if (!reader->client) {
        auto c = remex::farm::RedisClient::Connect(reader->url, std::chrono::seconds(2));
        if (!c.ok()) return c.status();
        reader->client = std::move(c).value();
      }
      auto key = remex::farm::CurrentLeaseKey(*reader->client, reader->pool, reader->id, reader->verifier.get());
      if (key.status().code() == remex::StatusCode::kUnavailable) reader->client.reset();  // a new one next time
      return key;
    };
    lease_reader->url = *url;
    record.id = farm_advertise;
    record.pool = farm_pool;
    record.labels = *labels;
    record.version = REMEX_VERSION;
  }

  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The device's health: "ok", or why it is quarantined; the farm registration's once
  // there is one. Set from the health monitor's thread as each self-test is judged.
  struct HealthSink {
    std::mutex mu;
    remex::farm::Registration* registration = nullptr;
    std::string health = "ok";
    bool healthy = true;
    bool in_farm = false;
    void Set(const std::string& why, bool ok) {
      std::lock_guard<std::mutex> lock(mu);
      if (why == health && ok == healthy) return;
      if (ok && !healthy) spdlog::info("the device is healthy again{}", in_farm ? ": back in its pool" : "");
      if (!ok) spdlog::error("the device is unhealthy{}: {}", in_farm ? ", quarantined" : "", why);
      health = why;
      healthy = ok;
      if (registration) registration->SetHealth(why, ok);
    }
  };
  auto health_sink = std::make_shared<HealthSink>();
  health_sink->in_farm = !farm_url.empty();
  // Self-tests at start, after every reset (on_self_test) and every interval, judged
  // and recorded off the device worker (health_monitor.h). Outlives the server.
  std::unique_ptr<remex::server::HealthMonitor> monitor;
  if (!farm_url.empty() || !results_url.empty()) {
    remex::server::HealthMonitor::Options options;
    options.results_url = results_url;
    options.interval = *interval;
    options.drift.threshold = self_test_drift / 100;
    options.description = remex::server::SelfTestDescription();
    options.on_outcome = [health_sink](const remex::tooling::SelfTestOutcome& outcome) {
      health_sink->Set(outcome.health, outcome.healthy);
    };
    monitor = std::make_unique<remex::server::HealthMonitor>(std::move(options));
    config.on_self_test = [m = monitor.get()](const remex::server::SelfTestResult& result) {
      m->Submit(result, "reset");
    };
  }
  auto server = remex::server::DeviceServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "remex-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::string metrics_line;
  if ((*server)->metrics_port() != 0) {
    metrics_line = ", metrics on " + config.metrics_host + ":" + std::to_string((*server)->metrics_port());
  }
  // The device's id: the advertised address, else the one it listens at.
  std::string device_id = record.id;
  if (device_id.empty()) {
    const bool v6 = config.host.find(':') != std::string::npos;
    device_id = (v6 ? "[" + config.host + "]" : config.host) + ":" + std::to_string((*server)->port());
  }
  if (monitor) {
    // The self-test at start: a device that fails it joins the pool quarantined. Its
    // latency's judgement against the store is waited for, within bounds: a store slow
    // to answer does not hold the server back (the judgement follows when it comes).
    remex::server::SelfTestResult start = (*server)->SelfTest();
    health_sink->Set(start.status.ok() ? "ok" : start.status.message(), start.status.ok());
    const uint64_t seq = monitor->Submit(std::move(start), "start");
    monitor->Start(farm ? record.pool : "local", device_id, (*server)->device_summary().name,
                   [s = server->get()](std::function<void(std::optional<remex::server::SelfTestResult>)> done) {
                     s->PostSelfTest(std::move(done));
                   });
    if (!monitor->WaitJudged(seq, std::chrono::seconds(10))) {
      spdlog::warn("the start self-test's latency is still being judged (the results store is slow): the device "
                   "registers with the test's correctness, and its health follows the judgement");
    }
  }
  std::unique_ptr<remex::farm::Registration> registration;
  if (farm) {
    record.id = device_id;
    const auto device_summary = (*server)->device_summary();
    record.kind = device_summary.kind;
    record.device = device_summary.name;
    record.description = device_summary.description;
    record.memory_bytes = device_summary.memory_bytes;
    {
      std::lock_guard<std::mutex> lock(lease_reader->mu);
      lease_reader->pool = record.pool;
      lease_reader->id = record.id;
    }
    remex::farm::Registration::Options options;
    options.on_lease = [s = server->get()](const std::string& token) { s->KeepLease(token); };
    options.verifier = lease_reader->verifier;
    // The health known now goes into the first record; later changes through SetHealth
    // (the sink's lock is held meanwhile, so none is lost in between).
    std::unique_lock<std::mutex> health_lock(health_sink->mu);
    record.state = health_sink->healthy ? remex::farm::DeviceState::kIdle : remex::farm::DeviceState::kQuarantined;
    record.health = health_sink->health;
    auto r = remex::farm::Registration::Start(*farm, record, options);
    if (!r.ok()) {
      health_lock.unlock();
      std::fprintf(stderr, "remex-server: --farm: %s\n", r.status().ToString().c_str());
      monitor->Stop();
      (*server)->Stop();
      return 1;
    }
    registration = std::move(r).value();
    health_sink->registration = registration.get();
    health_lock.unlock();
    spdlog::info("farm: registered {} in pool '{}' of {}", record.id, record.pool, farm->ToString());
  }
  std::printf("remex-server listening on %s:%u (device %s)%s\n", config.host.c_str(),
              static_cast<unsigned>((*server)->port()), (*server)->device_description().c_str(),
              metrics_line.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  // No more self-tests; then out of the pool, so that no client is sent to a server that
  // is going away.
  if (monitor) monitor->Stop();
  {
    std::lock_guard<std::mutex> lock(health_sink->mu);
    health_sink->registration = nullptr;
  }
  if (registration) registration->Stop();
  (*server)->Stop();
  return 0;
}
