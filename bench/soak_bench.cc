// soak_bench: load and soak of a running remex-server on this machine (loopback), with results
// checked and the server's memory followed.
//
//   remex-server --listen 127.0.0.1:9190 --metrics 127.0.0.1:9191 & server=$!
//   soak_bench --server 127.0.0.1:9190 --metrics 127.0.0.1:9191 --server-pid $server
//              [--concurrent 200] [--invokes 5] [--sessions 10000] [--killed 100] [--json]
//
// Phases, each on fresh sessions:
//   concurrent  --concurrent sessions open at once (one thread each, all connected
//               before any starts work); each loads a one-op model (Relu on float32
//               [1, 4096]), uploads its own input, and runs --invokes invokes, each output
//               downloaded and compared with Relu computed here, exactly
//   churn       --sessions sessions one after another, each uploading a 16 KiB tensor and
//               running one invoke, then hanging up without freeing anything
//   killed      --killed raw connections that say hello, start a tensorWrite of 8 MiB,
//               send 1 MiB of it and close
// After each phase it waits for the server's session count (remex_sessions on
// /metrics) to reach 0 and reports the server's device bytes in use and reserved
// (/metrics) and its resident set (/proc/PID/status VmRSS). Exit status 1 when any
// result is wrong or a phase fails.
#include <CLI/CLI.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "bench/bench_util.h"
#include "bench/relu_model.h"
#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/graph.h"
#include "host_client/client/npy.h"
#include "kernels/kernels.h"
#include "rpc/frame.h"
#include "rpc/remex.capnp.h"
#include "vm/executable.h"

namespace remex::bench {
namespace {

constexpr int64_t kElements = 4096;


struct Address {
  std::string host;
  uint16_t port = 0;
};

StatusOr<Address> ParseAddress(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("expected HOST:PORT, got '" + s + "'");
  return Address{s.substr(0, colon), static_cast<uint16_t>(std::stoi(s.substr(colon + 1)))};
}

// The value of sample `name` on the server's /metrics; -1 when unavailable.
double Metric(const Address& metrics, const std::string& name) {
  if (metrics.port == 0) return -1;
  auto conn = ConnectLoopback(metrics.port);  // loopback only, as the bench
  if (!conn.ok()) return -1;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
  if (!conn->SendAll(std::as_bytes(std::span(request.data(), request.size()))).ok()) return -1;
  std::string body;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(conn->fd(), buf, sizeof buf, 0)) > 0) body.append(buf, static_cast<size_t>(n));
  size_t at = 0;
  while ((at = body.find(name + " ", at)) != std::string::npos) {
    if (at > 0 && body[at - 1] == '\n') return std::atof(body.c_str() + at + name.size() + 1);
    at += name.size();
  }
  return -1;
}

uint64_t ResidentBytes(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
  }
  return 0;
}

npy::Array Input(uint32_t seed) {
  npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = {1, kElements};
  a.data.resize(kElements * 4);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < kElements; ++i) {
    float v = normal(rng);
    std::memcpy(a.data.data() + i * 4, &v, 4);
  }
  return a;
}

// Runs `invokes` invokes of the Relu model on `input` in `s`, checking every output.
Status UseSession(client::Session& s, const std::vector<std::byte>& exe, const npy::Array& input, int invokes) {
  REMEX_ASSIGN_OR_RETURN(auto module, s.LoadModuleCached(exe, "relu"));
  REMEX_ASSIGN_OR_RETURN(uint64_t vm, s.CreateVm(module.handle));
  REMEX_ASSIGN_OR_RETURN(auto x, s.Upload(input));
  REMEX_RETURN_IF_ERROR(s.SetInputs(vm, "main", {x.handle}));
  for (int i = 0; i < invokes; ++i) {
    REMEX_ASSIGN_OR_RETURN(auto out, s.Invoke(vm, "main"));
    REMEX_ASSIGN_OR_RETURN(auto y, s.Download(out.outputs[0].handle));
    REMEX_RETURN_IF_ERROR(s.Free({out.outputs[0].handle}));
    for (int64_t k = 0; k < kElements; ++k) {
      float xv, yv;
      std::memcpy(&xv, input.data.data() + k * 4, 4);
      std::memcpy(&yv, y.data.data() + k * 4, 4);
      if (yv != std::max(xv, 0.0f)) return DataLoss("wrong output at element " + std::to_string(k));
    }
  }
  return OkStatus();
}

struct Phase {
  explicit Phase(std::string n) : name(std::move(n)) {}
  std::string name;
  double seconds = 0;
  uint64_t ok = 0, failed = 0;
  std::string first_error;
  double bytes_in_use = -1, reserved = -1;
  uint64_t resident = 0;
};

void WaitForNoSessions(const Address& metrics) {
  for (int i = 0; i < 3000 && metrics.port != 0; ++i) {
    if (Metric(metrics, "remex_sessions") == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Finish(Phase& p, const Address& metrics, int pid) {
  WaitForNoSessions(metrics);
  p.bytes_in_use = Metric(metrics, "remex_device_memory_bytes{device=\"cpu\"}");
  p.reserved = Metric(metrics, "remex_device_memory_reserved_bytes{device=\"cpu\"}");
  p.resident = ResidentBytes(pid);
}

// A raw client that starts an 8 MiB tensorWrite, sends 1 MiB of it and closes.
Status KilledUpload(const Address& server) {
  REMEX_ASSIGN_OR_RETURN(Socket s, ConnectLoopback(server.port));
  auto send_message = [&](capnp::MessageBuilder& msg, uint64_t id, uint32_t attachments) -> Status {
    auto words = capnp::messageToFlatArray(msg);
    rpc::FrameHeader fh;
    fh.request_id = id;
    fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
    fh.attachment_count = attachments;
    auto header = rpc::EncodeFrameHeader(fh);
    REMEX_RETURN_IF_ERROR(s.SendAll(header));
    return s.SendAll(std::as_bytes(std::span(words.asBytes().begin(), words.asBytes().size())));
  };
  capnp::MallocMessageBuilder hello;
  hello.initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
  REMEX_RETURN_IF_ERROR(send_message(hello, 1, 0));
  capnp::MallocMessageBuilder write;
  auto w = write.initRoot<rpc::wire::Request>().initTensorWrite();
  w.initDesc().setDtype(1);
  w.getDesc().initShape(1).set(0, 2 << 20);
  REMEX_RETURN_IF_ERROR(send_message(write, 2, 1));
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = 8 << 20;
  REMEX_RETURN_IF_ERROR(s.SendAll(rpc::EncodeAttachmentHeader(ah)));
  std::vector<std::byte> part(1 << 20, std::byte{1});
  return s.SendAll(part);  // then the socket closes
}

int Run(int argc, char** argv) {
  CLI::App app{"soak_bench: load and soak of a running remex-server"};
  std::string server_text, metrics_text;
  int pid = 0, concurrent = 200, invokes = 5, sessions = 10000, killed = 100;
  bool json = false;
  app.add_option("--server", server_text, "HOST:PORT of the remex-server")->required();
  app.add_option("--metrics", metrics_text, "HOST:PORT of its metrics endpoint (sessions and memory)");
  app.add_option("--server-pid", pid, "its process id (resident memory)");
  app.add_option("--concurrent", concurrent, "sessions open at once")->capture_default_str();
  app.add_option("--invokes", invokes, "invokes per concurrent session")->capture_default_str();
  app.add_option("--sessions", sessions, "sessions opened, used and dropped one after another")->capture_default_str();
  app.add_option("--killed", killed, "clients killed mid-upload")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  auto server = ParseAddress(server_text);
  if (!server.ok()) return std::fprintf(stderr, "soak_bench: %s\n", server.status().ToString().c_str()), 2;
  Address metrics;
  if (!metrics_text.empty()) {
    auto m = ParseAddress(metrics_text);
    if (!m.ok()) return std::fprintf(stderr, "soak_bench: %s\n", m.status().ToString().c_str()), 2;
    metrics = *m;
  }
  auto registry = kernels::CreateCpuRegistry();
  if (!registry.ok()) return 1;
  auto exe = ReluExecutable(**registry, kElements);
  if (!exe.ok()) return std::fprintf(stderr, "soak_bench: %s\n", exe.status().ToString().c_str()), 1;

  Phase baseline("baseline");
  Finish(baseline, metrics, pid);
  std::vector<Phase> phases;

  {  // concurrent
    Phase p("concurrent");
    std::atomic<uint64_t> ok{0}, failed{0};
    std::mutex mu;
    double peak_sessions = -1;
    std::barrier all_connected(concurrent, [&]() noexcept { peak_sessions = Metric(metrics, "remex_sessions"); });
    auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < concurrent; ++t) {
      threads.emplace_back([&, t] {
        client::ConnectOptions options;
        options.timeout = std::chrono::seconds(120);
        auto s = client::Session::Connect(server->host, server->port, options);
        all_connected.arrive_and_wait();
        Status st = s.ok() ? UseSession(**s, *exe, Input(static_cast<uint32_t>(t)), invokes) : s.status();
        if (st.ok()) {
          ++ok;
        } else {
          ++failed;
          std::lock_guard<std::mutex> lock(mu);
          if (p.first_error.empty()) p.first_error = st.ToString();
        }
      });
    }
    for (auto& th : threads) th.join();
    p.seconds = SecondsSince(start);
    p.ok = ok;
    p.failed = failed;
    if (peak_sessions >= 0) p.name += " (" + std::to_string(static_cast<int>(peak_sessions)) + " open at once)";
    Finish(p, metrics, pid);
    phases.push_back(p);
  }
  {  // churn
    Phase p("churn");
    auto start = Clock::now();
    for (int i = 0; i < sessions; ++i) {
      auto s = client::Session::Connect(server->host, server->port);
      Status st = s.ok() ? UseSession(**s, *exe, Input(static_cast<uint32_t>(i)), 1) : s.status();
      if (st.ok()) {
        ++p.ok;
      } else {
        ++p.failed;
        if (p.first_error.empty()) p.first_error = st.ToString();
      }
    }
    p.seconds = SecondsSince(start);
    Finish(p, metrics, pid);
    phases.push_back(p);
  }
  {  // killed mid-upload
    Phase p("killed mid-upload");
    auto start = Clock::now();
    for (int i = 0; i < killed; ++i) {
      Status st = KilledUpload(*server);
      if (st.ok()) {
        ++p.ok;
      } else {
        ++p.failed;
        if (p.first_error.empty()) p.first_error = st.ToString();
      }
    }
    p.seconds = SecondsSince(start);
    Finish(p, metrics, pid);
    // And the server still serves.
    auto s = client::Session::Connect(server->host, server->port);
    Status st = s.ok() ? UseSession(**s, *exe, Input(1), 1) : s.status();
    if (!st.ok()) {
      ++p.failed;
      p.first_error = "serving after the killed clients: " + st.ToString();
    }
    phases.push_back(p);
  }

  bool all_ok = true;
  nlohmann::json out;
  out["baseline"] = {{"bytes_in_use", baseline.bytes_in_use}, {"reserved", baseline.reserved},
                     {"resident", baseline.resident}};
  for (const Phase& p : phases) {
    all_ok = all_ok && p.failed == 0;
    out["phases"].push_back({{"phase", p.name}, {"seconds", p.seconds}, {"ok", p.ok}, {"failed", p.failed},
                             {"first_error", p.first_error}, {"bytes_in_use_after", p.bytes_in_use},
                             {"reserved_after", p.reserved}, {"resident_after", p.resident}});
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("baseline: device bytes in use %.0f, reserved %.0f, resident %.1f MiB\n", baseline.bytes_in_use,
                baseline.reserved, baseline.resident / 1048576.0);
    for (const Phase& p : phases) {
      std::printf("%-34s %6llu ok %4llu failed %8.1f s   after: in use %.0f, reserved %.0f, resident %.1f MiB%s%s\n",
                  p.name.c_str(), static_cast<unsigned long long>(p.ok), static_cast<unsigned long long>(p.failed),
                  p.seconds, p.bytes_in_use, p.reserved, p.resident / 1048576.0,
                  p.first_error.empty() ? "" : "  first error: ", p.first_error.c_str());
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Run(argc, argv); }
