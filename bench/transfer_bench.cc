// transfer_bench: bulk tensor transfer through the Remex protocol against a raw TCP
// send of the same bytes, over loopback, in one run of one program.
//
//   transfer_bench [--mib 256] [--repeat 5] [--server HOST:PORT] [--json]
//
// Remex: a float32 tensor of --mib MiB written into an existing server tensor by
// tensorWrite (host -> server) and read back by tensorRead (server -> host), with
// compression none. Raw TCP: the same number of bytes sent over a plain POSIX socket
// to a thread of this program that reads them into a preallocated buffer and answers
// with one byte (host -> server), and sent by that thread into a preallocated buffer
// (server -> host). Without --server the Remex server runs in this process (its own
// threads, real loopback TCP). Also a tensorAlloc of the same size, which the server
// clears before handing it out. Reports the median and best of --repeat runs in GB/s
// (1e9 bytes per second) and the Remex / raw ratio.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>

#include "base/huge_pages.h"
#include "bench/bench_util.h"
#include "device_server/device_server.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/client/client.h"

namespace remex::bench {
namespace {

struct Figures {
  std::vector<double> seconds;
  double Gbps(uint64_t bytes, double s) const { return static_cast<double>(bytes) / s / 1e9; }
};

// A reused destination buffer, as the server's CPU tensors are: 2 MiB aligned, huge
// pages advised (base/huge_pages.h), touched once before the first round. The raw
// peer's and the client's buffers are all of this kind, so neither side's kernel copies
// gain from fewer TLB misses than the other's.
struct HugeBuffer {
  explicit HugeBuffer(size_t n)
      : size(n), data(static_cast<std::byte*>(std::aligned_alloc(kHugePageBytes,
                                                                 (n + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes))) {
    AdviseHugePages(data.get(), n);
    std::memset(data.get(), 0, n);
  }
  std::span<std::byte> span() const { return {data.get(), size}; }
  size_t size;
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data;
};

// The raw TCP peer: per command {direction u8, size u64}, direction 0 reads `size`
// bytes and answers one byte, direction 1 writes `size` bytes.
void RawPeer(Socket listener, const HugeBuffer* buffer) {
  auto conn = Accept(listener);
  if (!conn.ok()) return;
  std::array<std::byte, 9> cmd;
  while (conn->RecvAll(cmd).ok()) {
    uint64_t size = 0;
    std::memcpy(&size, cmd.data() + 1, 8);
    std::span<std::byte> data(buffer->data.get(), std::min<uint64_t>(size, buffer->size));
    if (cmd[0] == std::byte{0}) {
      if (!conn->RecvAll(data).ok()) return;
      std::byte ack{1};
      if (!conn->SendAll({&ack, 1}).ok()) return;
    } else {
      if (!conn->SendAll(data).ok()) return;
    }
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"transfer_bench: Remex tensorWrite/tensorRead against raw TCP over loopback"};
  uint64_t mib = 256;
  int repeat = 5;
  std::string server;
  bool json = false;
  app.add_option("--mib", mib, "tensor size in MiB")->capture_default_str();
  app.add_option("--repeat", repeat, "runs of each transfer")->capture_default_str();
  app.add_option("--server", server, "HOST:PORT of a separate remex-server (default: one in this process)");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const uint64_t bytes = mib << 20;

  // The payload: random float32 values (compression is off anyway).
  npy::Array tensor;
  tensor.dtype = DType::kFloat32;
  tensor.shape = {static_cast<int64_t>(bytes / 4)};
  tensor.data.resize(bytes);
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    float* p = reinterpret_cast<float*>(tensor.data.data());
    for (uint64_t i = 0; i < bytes / 4; ++i) p[i] = dist(rng);
  }

  // Remex.
  std::unique_ptr<server::DeviceServer> embedded;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (server.empty()) {
    server::ServerConfig config;
    config.port = 0;
    auto started = server::DeviceServer::Start(config);
    if (!started.ok()) {
      std::fprintf(stderr, "transfer_bench: %s\n", started.status().ToString().c_str());
      return 1;
    }
    embedded = std::move(started).value();
    port = embedded->port();
  } else {
    auto colon = server.rfind(':');
    host = server.substr(0, colon);
    port = static_cast<uint16_t>(std::atoi(server.c_str() + colon + 1));
  }
  client::ConnectOptions options;
  options.compression.mode = client::CompressionMode::kNone;
  options.timeout = std::chrono::milliseconds(600000);
  auto session = client::Session::Connect(host, port, options);
  if (!session.ok()) {
    std::fprintf(stderr, "transfer_bench: %s\n", session.status().ToString().c_str());
    return 1;
  }
  auto remote = (*session)->Upload(tensor);  // allocates the server tensor
  if (!remote.ok()) {
    std::fprintf(stderr, "transfer_bench: %s\n", remote.status().ToString().c_str());
    return 1;
  }
  // Raw TCP: a peer thread of this program, connected before the first round.
  uint16_t raw_port = 0;
  auto listener = Listen(&raw_port);
  if (!listener.ok()) {
    std::fprintf(stderr, "transfer_bench: %s\n", listener.status().ToString().c_str());
    return 1;
  }
  HugeBuffer peer_buffer(bytes);
  std::thread peer(RawPeer, std::move(listener).value(), &peer_buffer);
  auto sock = ConnectLoopback(raw_port);
  if (!sock.ok()) {
    std::fprintf(stderr, "transfer_bench: %s\n", sock.status().ToString().c_str());
    peer.detach();
    return 1;
  }
  auto fail = [&](const char* what, const Status& st) {
    std::fprintf(stderr, "transfer_bench: %s: %s\n", what, st.ToString().c_str());
    peer.detach();
    return 1;
  };

  // Each round takes both directions on both paths, raw and Remex side by side, so a
  // drift of the machine's speed during the run touches both alike. The destination
  // buffers are touched before the first round, as a reused buffer would be.
  std::vector<double> write_s, read_s, read_into_s, alloc_s, raw_send_s, raw_recv_s;
  HugeBuffer destination(bytes);  // reused, as the raw receive's buffer is
  HugeBuffer in(bytes);
  for (int i = 0; i < repeat; ++i) {
    std::array<std::byte, 9> cmd{};
    std::memcpy(cmd.data() + 1, &bytes, 8);
    cmd[0] = std::byte{0};
    auto t = Clock::now();
    std::byte ack;
    Status st = sock->SendAll(cmd);
    if (st.ok()) st = sock->SendAll(tensor.data);
    if (st.ok()) st = sock->RecvAll({&ack, 1});
    raw_send_s.push_back(SecondsSince(t));
    if (!st.ok()) return fail("raw TCP send", st);

    t = Clock::now();
    st = (*session)->Write(remote->handle, tensor.dtype, tensor.shape, tensor.data);
    write_s.push_back(SecondsSince(t));
    if (!st.ok()) return fail("tensorWrite", st);

    cmd[0] = std::byte{1};
    t = Clock::now();
    st = sock->SendAll(cmd);
    if (st.ok()) st = sock->RecvAll(in.span());
    raw_recv_s.push_back(SecondsSince(t));
    if (!st.ok()) return fail("raw TCP receive", st);

    t = Clock::now();
    auto into = (*session)->DownloadInto(remote->handle, destination.span());
    read_into_s.push_back(SecondsSince(t));
    if (!into.ok()) return fail("tensorRead into a buffer", into.status());
    if (i == 0 && !std::equal(tensor.data.begin(), tensor.data.end(), destination.data.get())) {
      std::fprintf(stderr, "transfer_bench: tensorRead into a buffer returned other bytes\n");
      peer.detach();
      return 1;
    }
  }
  sock->Close();
  peer.join();
  // A fresh buffer per read (its first touch is part of the cost), in rounds of its own:
  // returning 256 MiB to the system between reads would slow the rounds above too.
  for (int i = 0; i < repeat; ++i) {
    auto t = Clock::now();
    auto back = (*session)->Download(remote->handle);
    read_s.push_back(SecondsSince(t));
    if (!back.ok() || back->data.size() != bytes) return fail("tensorRead", back.status());
    if (i == 0 && back->data != tensor.data) {
      std::fprintf(stderr, "transfer_bench: tensorRead returned other bytes\n");
      return 1;
    }
  }
  // tensorAlloc of the same size, freed again each time: the server clears what it
  // hands out (the cost of never showing another session's data).
  for (int i = 0; i < repeat; ++i) {
    auto t = Clock::now();
    auto fresh = (*session)->Alloc(tensor.dtype, tensor.shape);
    alloc_s.push_back(SecondsSince(t));
    if (!fresh.ok()) return fail("tensorAlloc", fresh.status());
    (void)(*session)->Free({fresh->handle});
  }
  auto cstats = (*session)->compression_stats();
  (void)(*session)->Free({remote->handle});
  session->reset();
  embedded.reset();


  auto gbps = [&](const std::vector<double>& s, bool best) {
    auto st = Summarize(s);
    return static_cast<double>(bytes) / (best ? st.min : st.median) / 1e9;
  };
  nlohmann::json report = {
      {"bytes", bytes},
      {"repeat", repeat},
      {"server", server.empty() ? "in-process" : server},
      {"remex_write_gbps", gbps(write_s, false)},
      {"remex_read_gbps", gbps(read_s, false)},
      {"remex_read_into_gbps", gbps(read_into_s, false)},
      {"remex_alloc_cleared_gbps", gbps(alloc_s, false)},
      {"raw_send_gbps", gbps(raw_send_s, false)},
      {"raw_recv_gbps", gbps(raw_recv_s, false)},
      {"remex_write_best_gbps", gbps(write_s, true)},
      {"remex_read_best_gbps", gbps(read_s, true)},
      {"raw_send_best_gbps", gbps(raw_send_s, true)},
      {"raw_recv_best_gbps", gbps(raw_recv_s, true)},
      {"write_ratio", gbps(write_s, false) / gbps(raw_send_s, false)},
      {"read_ratio", gbps(read_into_s, false) / gbps(raw_recv_s, false)},
      {"read_fresh_buffer_ratio", gbps(read_s, false) / gbps(raw_recv_s, false)},
      {"attachments", {{"raw_sent", cstats.raw_sent}, {"wire_sent", cstats.wire_sent},
                       {"raw_received", cstats.raw_received}, {"wire_received", cstats.wire_received}}}};
  if (json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("transfer_bench: %llu MiB float32, %d runs each, loopback, compression none, server %s\n",
              static_cast<unsigned long long>(mib), repeat, report["server"].get<std::string>().c_str());
  std::printf("  %-34s %10s %10s\n", "", "median", "best");
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "Remex tensorWrite (host -> server)", gbps(write_s, false),
              gbps(write_s, true));
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "raw TCP send (host -> peer)", gbps(raw_send_s, false),
              gbps(raw_send_s, true));
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "Remex tensorRead, fresh buffer", gbps(read_s, false),
              gbps(read_s, true));
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "Remex tensorRead into a buffer", gbps(read_into_s, false),
              gbps(read_into_s, true));
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "raw TCP receive (peer -> host)", gbps(raw_recv_s, false),
              gbps(raw_recv_s, true));
  std::printf("  %-34s %7.2f GB/s %7.2f GB/s\n", "Remex tensorAlloc, cleared", gbps(alloc_s, false),
              gbps(alloc_s, true));
  std::printf("  ratio Remex / raw (medians): write %.2f, read into a buffer %.2f (fresh buffer %.2f)\n",
              report["write_ratio"].get<double>(), report["read_ratio"].get<double>(),
              report["read_fresh_buffer_ratio"].get<double>());
  return 0;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
