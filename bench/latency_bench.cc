// latency_bench: the round-trip cost of the Remex protocol against raw TCP and a local
// VM, over loopback.
//
//   latency_bench [--iterations 10000] [--rounds 5] [--elements 16] [--pin none|same|different]
//                 [--server HOST:PORT] [--busy-read-mib N] [--encode-threads N] [--json]
//
// Medians (and p99) of --iterations calls each of the following; invoke, ping, read and
// raw are interleaved, --iterations / --rounds calls of each in turn per round:
//   invoke      invoke of a one-op model (Relu on float32 [--elements]) whose output is
//               bound with setOutput, so it stays on the server and no handle piles up
//   ping        the protocol's ping
//   raw         a raw TCP ping-pong over a POSIX socket, with the ping's request and
//               reply sizes (frame bytes as counted by the session), answered by a
//               thread of this program
//   local       VirtualMachine::Invoke of the same executable in this process (no RPC)
//   read        tensorRead of the [--elements] input tensor (one round trip)
//   ping_busy   with --busy-read-mib N: the ping again, back to back, while a second
//               session reads an N MiB compressible tensor 3 times; the server's
//               reply compression runs on --encode-threads threads (0: on its I/O thread)
// --pin same puts the client thread and every server thread (the in-process server's
// I/O and device threads and the raw TCP peer) on CPU 0; --pin different puts the
// client on CPU 0 and the server threads on CPU 1. Threads inherit the mask of the
// thread that creates them, so the server is started from a thread pinned to its CPU.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <functional>
#include <optional>

#include "bench/bench_util.h"
#include "bench/relu_model.h"
#include "device_server/device_server.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"
#include "vm/executable.h"
#include "vm/vm.h"

namespace remex::bench {
namespace {


// The raw peer: reads `request` bytes, writes `reply` bytes, until the client closes.
void RawEcho(Socket listener, size_t request, size_t reply) {
  auto conn = Accept(listener);
  if (!conn.ok()) return;
  std::vector<std::byte> in(request), out(reply, std::byte{0x5a});
  while (conn->RecvAll(in).ok() && conn->SendAll(out).ok()) {
  }
}

struct Series {
  std::string name;
  std::string what;
  SampleStats us;
};

// Times `call` `n` times (after n / 10 untimed calls), appending microseconds per call
// to `us`.
Status Time(int n, const std::function<Status()>& call, std::vector<double>& us) {
  for (int i = 0; i < n / 10; ++i) REMEX_RETURN_IF_ERROR(call());
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    Status st = call();
    us.push_back(SecondsSince(t) * 1e6);
    REMEX_RETURN_IF_ERROR(st);
  }
  return OkStatus();
}

int Fail(const std::string& what, const Status& st) {
  std::fprintf(stderr, "latency_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"latency_bench: Remex invoke/ping/tensorRead against raw TCP ping-pong and a local VM"};
  int iterations = 10000;
  int rounds = 5;
  int64_t elements = 16;
  std::string pin = "none";
  std::string server;
  bool json = false;
  int server_threads = 1;
  app.add_option("--iterations", iterations, "calls per measurement")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds the calls are split over; each round times every series once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--elements", elements, "float32 elements of the Relu tensor")->capture_default_str();
  app.add_option("--pin", pin, "none, same (client and server threads on CPU 0) or different (client 0, server 1)")
      ->check(CLI::IsMember({"none", "same", "different"}))
      ->capture_default_str();
  app.add_option("--server", server, "HOST:PORT of a separate remex-server (then only the client is pinned)");
  app.add_option("--server-threads", server_threads, "request threads of the in-process server")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  int busy_read_mib = 0;
  int encode_threads = server::ServerConfig().encode_threads;
  app.add_option("--busy-read-mib", busy_read_mib,
                 "also time ping while another session reads a compressible tensor of this many MiB in a loop")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--encode-threads", encode_threads, "reply encode threads of the in-process server (0: I/O thread)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  std::vector<std::string> only;
  app.add_option("--series", only, "time only these of invoke, ping, read, raw (to profile one)")
      ->delimiter(',')
      ->check(CLI::IsMember({"invoke", "ping", "read", "raw"}));
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  const int client_cpu = 0;
  const int server_cpu = pin == "different" ? 1 : 0;
  // Server threads are created from a thread pinned to the server's CPU.
  if (pin != "none") {
    if (Status st = PinThisThread(server_cpu); !st.ok()) return Fail("pinning", st);
  }
  std::string server_cpus = ThisThreadCpus();

  auto registry = kernels::CreateCpuRegistry();
  if (!registry.ok()) return Fail("registry", registry.status());
  auto executable = ReluExecutable(**registry, elements);
  if (!executable.ok()) return Fail("compiling Relu", executable.status());

  std::unique_ptr<server::DeviceServer> embedded;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (server.empty()) {
    server::ServerConfig config;
    config.port = 0;
    config.io_threads = server_threads;
    config.encode_threads = encode_threads;
    auto started = server::DeviceServer::Start(config);
    if (!started.ok()) return Fail("starting the server", started.status());
    embedded = std::move(started).value();
    port = embedded->port();
  } else {
    auto colon = server.rfind(':');
    host = server.substr(0, colon);
    port = static_cast<uint16_t>(std::atoi(server.c_str() + colon + 1));
    server_cpus = "(separate process, not pinned here)";
  }
  uint16_t raw_port = 0;
  auto listener = Listen(&raw_port);
  if (!listener.ok()) return Fail("listen", listener.status());

  if (pin != "none") {
    if (Status st = PinThisThread(client_cpu); !st.ok()) return Fail("pinning", st);
  }
  std::string client_cpus = ThisThreadCpus();

  auto session_or = client::Session::Connect(host, port);
  if (!session_or.ok()) return Fail("connect", session_or.status());
  auto& session = *session_or;
  auto module = session->LoadModule(*executable, "relu");
  if (!module.ok()) return Fail("moduleLoad", module.status());
  auto vm = session->CreateVm(module->handle);
  if (!vm.ok()) return Fail("vmCreate", vm.status());
  npy::Array x;
  x.dtype = DType::kFloat32;
  x.shape = {1, elements};
  x.data.resize(static_cast<size_t>(elements) * 4);
  for (int64_t i = 0; i < elements; ++i) {
    float v = static_cast<float>(i % 7) - 3.0f;
    std::memcpy(x.data.data() + i * 4, &v, 4);
  }
  auto xr = session->Upload(x);
  if (!xr.ok()) return Fail("tensorWrite", xr.status());
  auto yr = session->Alloc(DType::kFloat32, x.shape);
  if (!yr.ok()) return Fail("tensorAlloc", yr.status());
  if (Status st = session->SetInputs(*vm, "main", {xr->handle}); !st.ok()) return Fail("setInput", st);
  if (Status st = session->SetOutput(*vm, "main", 0, yr->handle); !st.ok()) return Fail("setOutput", st);

  // Frame sizes of one ping, for the raw ping-pong.
  uint64_t sent0 = session->bytes_sent(), received0 = session->bytes_received();
  if (Status st = session->Ping(); !st.ok()) return Fail("ping", st);
  size_t ping_request = session->bytes_sent() - sent0, ping_reply = session->bytes_received() - received0;

  // Raw TCP ping-pong with the ping's sizes. The peer thread is created from the
  // client thread, so it is pinned to the server's CPU explicitly.
  std::thread echo([&, l = std::move(listener).value()]() mutable {
    if (pin != "none") (void)PinThisThread(server_cpu);
    RawEcho(std::move(l), ping_request, ping_reply);
  });
  auto sock = ConnectLoopback(raw_port);
  if (!sock.ok()) {
    echo.detach();
    return Fail("raw connect", sock.status());
  }
  std::vector<std::byte> raw_out(ping_request, std::byte{0x33}), raw_in(ping_reply);

  // The series are interleaved: each round times every one of them in turn, so that a
  // change in the machine's speed (another process, a VM neighbour) falls on all of
  // them alike rather than on whichever ran at that moment.
  struct Timed {
    std::string name, what;
    std::function<Status()> call;
    std::vector<double> us;
  };
  std::vector<Timed> timed;
  timed.push_back({"invoke", "invoke of Relu, output bound on the server", [&]() -> Status {
                     auto r = session->Invoke(*vm, "main");
                     return r.ok() ? OkStatus() : r.status();
                   }, {}});
  timed.push_back({"ping", "protocol ping", [&] { return session->Ping(); }, {}});
  timed.push_back({"read", "tensorRead of the input", [&]() -> Status {
                     auto r = session->Download(xr->handle);
                     return r.ok() ? OkStatus() : r.status();
                   }, {}});
  timed.push_back({"raw",
                   "raw TCP ping-pong, " + std::to_string(ping_request) + " B out, " +
                       std::to_string(ping_reply) + " B back",
                   [&]() -> Status {
                     REMEX_RETURN_IF_ERROR(sock->SendAll(raw_out));
                     return sock->RecvAll(raw_in);
                   }, {}});
  if (!only.empty()) {
    std::erase_if(timed, [&](const Timed& t) { return std::find(only.begin(), only.end(), t.name) == only.end(); });
  }
  const int per_round = std::max(1, iterations / rounds);
  for (int round = 0; round < rounds; ++round) {
    for (Timed& t : timed) {
      if (Status st = Time(per_round, t.call, t.us); !st.ok()) {
        echo.detach();
        return Fail(t.name, st);
      }
    }
  }
  sock->Close();  // the peer's recv ends; its thread returns
  echo.join();
  std::vector<Series> series;
  for (const Timed& t : timed) series.push_back({t.name, t.what, Summarize(t.us)});
  auto add = [&](const std::string& name, const std::string& what, const std::function<Status()>& call) {
    std::vector<double> us;
    if (Status st = Time(iterations, call, us); !st.ok()) return Fail(name, st);
    series.push_back({name, what, Summarize(us)});
    return 0;
  };

  if (busy_read_mib > 0) {
    auto reader = client::Session::Connect(host, port);
    if (!reader.ok()) return Fail("connect (busy reader)", reader.status());
    npy::Array big;
    big.dtype = DType::kFloat32;
    const int64_t n = int64_t{busy_read_mib} << 18;  // float32 elements in N MiB
    big.shape = {n};
    big.data.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      float v = static_cast<float>(i % 4096) * 0.25f;  // compressible, not trivially
      std::memcpy(big.data.data() + i * 4, &v, 4);
    }
    auto br = (*reader)->Upload(big);
    if (!br.ok()) return Fail("tensorWrite (busy reader)", br.status());
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0};
    std::thread busy([&] {
      while (!stop.load()) {
        if (!(*reader)->Download(br->handle).ok()) return;
        ++reads;
      }
    });
    while (reads.load() == 0 && busy.joinable() && !stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Pings until three more reads have completed (at most 60 s), so that the samples
    // cover whole reads: their encoding as well as their transfer.
    const int first = reads.load();
    std::vector<double> us;
    Status ping_status;
    const auto window_end = Clock::now() + std::chrono::seconds(60);
    while (reads.load() < first + 3 && Clock::now() < window_end) {
      auto t = Clock::now();
      ping_status = session->Ping();
      us.push_back(SecondsSince(t) * 1e6);
      if (!ping_status.ok()) break;
    }
    stop = true;
    busy.join();
    if (!ping_status.ok()) return Fail("ping_busy", ping_status);
    std::optional<SampleStats> s = Summarize(us);
    series.push_back({"ping_busy",
                      "ping while another session reads " + std::to_string(busy_read_mib) + " MiB in a loop (" +
                          std::to_string(reads.load()) + " reads; encode threads " + std::to_string(encode_threads) +
                          ")",
                      *s});
  }

  // The same executable on a local VM: no RPC.
  auto device = vm::CreateCpuDevice();
  auto allocator = vm::Allocator::Create(*device);
  auto exe = vm::Executable::Load(*executable, **registry);
  if (!exe.ok()) return Fail("local executable", exe.status());
  auto local = vm::VirtualMachine::Create(*exe, allocator, **registry);
  if (!local.ok()) return Fail("local VM", local.status());
  auto lx = vm::AllocateTensor(*allocator, DType::kFloat32, x.shape);
  auto ly = vm::AllocateTensor(*allocator, DType::kFloat32, x.shape);
  if (!lx.ok() || !ly.ok()) return Fail("local tensors", lx.ok() ? ly.status() : lx.status());
  std::memcpy((*lx)->data(), x.data.data(), x.data.size());
  if (Status st = (*local)->SetInputs(0, {*lx}); !st.ok()) return Fail("local setInput", st);
  if (Status st = (*local)->SetOutput(0, 0, *ly); !st.ok()) return Fail("local setOutput", st);
  if (add("local", "VirtualMachine::Invoke in this process", [&]() -> Status {
        auto r = (*local)->Invoke(0);
        return r.ok() ? OkStatus() : r.status();
      })) return 1;

  (void)session->Free({xr->handle, yr->handle, *vm, module->handle});
  session.reset();
  embedded.reset();

  auto median = [&](const std::string& name) {
    for (const auto& s : series) if (s.name == name) return s.us.median;
    return 0.0;
  };
  nlohmann::json report = {{"iterations", iterations},
                           {"elements", elements},
                           {"pin", pin},
                           {"client_cpus", client_cpus},
                           {"server_cpus", server_cpus},
                           {"ping_request_bytes", ping_request},
                           {"ping_reply_bytes", ping_reply},
                           {"ping_minus_raw_us", median("ping") - median("raw")},
                           {"invoke_minus_raw_us", median("invoke") - median("raw")}};
  for (const auto& s : series) {
    report["median_us"][s.name] = s.us.median;
    report["p99_us"][s.name] = s.us.p99;
    report["max_us"][s.name] = s.us.max;
  }
  if (json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("latency_bench: %d calls each, Relu on float32 [1, %lld], pin %s (client CPU %s, server CPU %s)\n",
              iterations, static_cast<long long>(elements), pin.c_str(), client_cpus.c_str(), server_cpus.c_str());
  std::printf("  %-9s %10s %10s %10s  %s\n", "", "median us", "p99 us", "max us", "");
  for (const auto& s : series) {
    std::printf("  %-9s %10.1f %10.1f %10.1f  %s\n", s.name.c_str(), s.us.median, s.us.p99, s.us.max, s.what.c_str());
  }
  if (median("raw") > 0 && median("ping") > 0 && median("invoke") > 0) {
    std::printf("  ping - raw: %.1f us; invoke - raw: %.1f us\n", median("ping") - median("raw"),
                median("invoke") - median("raw"));
  }
  return 0;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
