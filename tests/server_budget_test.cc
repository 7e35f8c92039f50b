// Budgets, deadlines and cancellation of remex-server, tested as an attacker would: each
// test starts a real server process on loopback with a small limit, breaks it with a
// real client or hand-written frames, checks the error that names the limit, and then
// checks that the server still serves everyone else.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <span>
#include <thread>

#include "base/sanitizers.h"
#include "host_client/client/client.h"
#include "host_client/compiler/onnx_test_util.h"
#include "rpc/compression.h"
#include "rpc/frame.h"
#include "rpc/test_data.h"
#include "rpc/transport.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/raw_connection.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::Floats;
using remex::testing::kForever;
using remex::testing::OnnxModelBuilder;
using remex::testing::RawConnection;
using remex::testing::ResidentBytes;
using remex::testing::ServerProcess;
using remex::testing::SpinLoopModel;
using remex::testing::SpinSession;
using remex::testing::StartSpin;
using remex::testing::ToFloats;
namespace asio = boost::asio;
using namespace std::chrono_literals;

using remex::testing::ConnectTo;
using remex::testing::Eventually;

// Runs AddRelu on a fresh session: the server still serves.
void ExpectServing(const ServerProcess& server) {
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  remex::testing::ExpectServesAddRelu(*s);
}

TEST(ServerBudgetTest, SessionMemoryQuotaBoundsOneSessionAndNotTheOthers) {
  ServerProcess server(std::vector<std::string>{"--session-memory-bytes", std::to_string(64 << 20)});
  ASSERT_NE(server.port(), 0);
  auto a = ConnectTo(server);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->Alloc(DType::kFloat32, {12 << 20}).ok());  // 48 MiB
  auto over = a->Alloc(DType::kFloat32, {12 << 20});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("memory quota of 67108864 bytes (--session-memory-bytes;"),
            std::string::npos)
      << over.status().ToString();
  // An upload past the quota is refused before its bytes are taken in, and the
  // session's own tensor is still there.
  auto upload = a->Upload(Floats({8 << 20}, std::vector<float>(8 << 20, 1.0f)));
  EXPECT_FALSE(upload.ok());
  // Another session has its own quota.
  auto b = ConnectTo(server);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->Alloc(DType::kFloat32, {12 << 20}).ok());
  ExpectServing(server);
}

TEST(ServerBudgetTest, ExecutableConstantsBeyondTheQuotaAreRefusedBeforeDecompression) {
  // 96 MiB of zero weights: the executable's zstd chunks are a few hundred kilobytes.
  OnnxModelBuilder b(13);
  // y = w[i]: a Gather by a run-time index, which no constant folding removes.
  b.Input("i", onnx::TensorProto::INT64, {1, 4}).Output("y", onnx::TensorProto::FLOAT, {1, 4});
  b.FloatInit("w", {24 << 20}, std::vector<float>(24 << 20, 0.0f));
  b.Node("Gather", {"w", "i"}, {"y"});
  const std::vector<std::byte> exe = Compile(b);
  ASSERT_FALSE(exe.empty());
  ASSERT_LT(exe.size(), 8u << 20);
  ServerProcess server(std::vector<std::string>{"--session-memory-bytes", std::to_string(64 << 20)});
  ASSERT_NE(server.port(), 0);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  auto module = s->LoadModule(exe, "zeros");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), StatusCode::kResourceExhausted) << module.status().ToString();
  EXPECT_NE(module.status().message().find("left of its memory quota of 67108864 bytes (--session-memory-bytes)"),
            std::string::npos)
      << module.status().ToString();
  // The quota decided, not a shortage of memory.
  EXPECT_EQ(module.status().message().find("out of memory"), std::string::npos) << module.status().ToString();
  ExpectServing(server);
}

TEST(ServerBudgetTest, VmConstantsBeyondTheQuotaAreRefusedNamingTheQuota) {
  // 40 MiB of weights fit a 64 MiB quota once: the module loads and one VM holds its
  // constants; a second VM's copy would pass the quota.
  OnnxModelBuilder b(13);
  b.Input("i", onnx::TensorProto::INT64, {1, 4}).Output("y", onnx::TensorProto::FLOAT, {1, 4});
  b.FloatInit("w", {10 << 20}, std::vector<float>(10 << 20, 0.0f));
  b.Node("Gather", {"w", "i"}, {"y"});
  const std::vector<std::byte> exe = Compile(b);
  ASSERT_FALSE(exe.empty());
  ServerProcess server(std::vector<std::string>{"--session-memory-bytes", std::to_string(64 << 20)});
  ASSERT_NE(server.port(), 0);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  auto module = s->LoadModule(exe, "weights");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  ASSERT_TRUE(s->CreateVm(module->handle).ok());
  auto second = s->CreateVm(module->handle);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  EXPECT_NE(second.status().message().find("over its memory quota of 67108864 bytes (--session-memory-bytes;"),
            std::string::npos)
      << second.status().ToString();
  EXPECT_EQ(second.status().message().find("out of memory"), std::string::npos) << second.status().ToString();
  ExpectServing(server);
}

TEST(ServerBudgetTest, HandleCapRefusesTheNextObjectUntilOneIsFreed) {
  ServerProcess server(std::vector<std::string>{"--max-handles-per-session", "8"});
  ASSERT_NE(server.port(), 0);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  std::vector<uint64_t> handles;
  for (int i = 0; i < 8; ++i) {
    auto t = s->Alloc(DType::kFloat32, {4});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    handles.push_back(t->handle);
  }
  auto ninth = s->Alloc(DType::kFloat32, {4});
  ASSERT_FALSE(ninth.ok());
  EXPECT_EQ(ninth.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ninth.status().message().find("--max-handles-per-session"), std::string::npos);
  ASSERT_TRUE(s->Free({handles[0]}).ok());
  EXPECT_TRUE(s->Alloc(DType::kFloat32, {4}).ok());
  ExpectServing(server);
}

TEST(ServerBudgetTest, FrameAttachmentTotalIsRefusedBeforeAnyPayload) {
  ServerProcess server(std::vector<std::string>{"--max-frame-bytes", std::to_string(1 << 20)});
  ASSERT_NE(server.port(), 0);
  RawConnection c(server.port());
  // Two attachments of 768 KiB each: each under the per-attachment limit, together over
  // the frame's. The second header alone is answered; no payload is sent.
  capnp::MallocMessageBuilder msg;
  msg.initRoot<rpc::wire::Request>().initModuleLoad().setName("two");
  c.WriteMessage(msg, 2, 2);
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = 768 << 10;
  c.WriteAttachmentHeader(ah);
  std::vector<char> payload(768 << 10, 'x');
  c.WriteBytes(payload.data(), payload.size());
  c.WriteAttachmentHeader(ah);
  Status reply = c.ReadReply();
  EXPECT_EQ(reply.code(), StatusCode::kResourceExhausted) << reply.ToString();
  EXPECT_NE(reply.message().find("limit of 1048576 bytes per frame"), std::string::npos) << reply.ToString();
  EXPECT_TRUE(c.ClosedWithin(5s));
  ExpectServing(server);
}

TEST(ServerBudgetTest, ZstdBombIsRefusedBeforeDecompression) {
  // 1 GiB of zeros compresses to about 36 KB; the session's quota is 64 MiB (the ratio
  // cap, which would refuse it first, is off).
  ServerProcess server(std::vector<std::string>{"--session-memory-bytes", std::to_string(64 << 20),
                                                "--max-decompression-ratio", "0"});
  ASSERT_NE(server.port(), 0);
  const std::vector<std::byte> frame = rpc::testing::ZeroZstdFrame(size_t{1} << 30);
  const std::vector<std::byte>* bomb = &frame;
  ASSERT_LT(bomb->size(), 1u << 20);
  RawConnection c(server.port());
  capnp::MallocMessageBuilder msg;
  msg.initRoot<rpc::wire::Request>().initModuleLoad().setName("bomb");
  c.WriteMessage(msg, 2, 1);
  rpc::AttachmentHeader ah;
  ah.raw_size = uint64_t{1} << 30;
  ah.wire_size = bomb->size();
  ah.codec = rpc::Codec::kZstd;
  c.WriteAttachmentHeader(ah);
  Status reply = c.ReadReply();
  EXPECT_EQ(reply.code(), StatusCode::kResourceExhausted) << reply.ToString();
  EXPECT_NE(reply.message().find("memory quota"), std::string::npos) << reply.ToString();
  ExpectServing(server);
}

TEST(ServerBudgetTest, DecompressionRatioCapRefusesABombThatFitsTheQuota) {
  // 48 MiB of zeros, well inside the default quota, compressed to a few KB: refused at
  // its header by the default --max-decompression-ratio, while uploads of the same
  // size that compress less, and zeros from a Remex client (fill chunks), still land.
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  std::vector<std::byte> zeros(size_t{48} << 20);
  auto bomb = rpc::ZstdCompress(zeros, 1);
  ASSERT_TRUE(bomb.ok());
  ASSERT_LT(bomb->size() * rpc::kMaxCompressionRatio, zeros.size());
  RawConnection c(server.port());
  rpc::AttachmentHeader ah;
  ah.raw_size = zeros.size();
  ah.wire_size = bomb->size();
  ah.codec = rpc::Codec::kZstd;
  c.BeginTensorWrite(2, 12 << 20, ah);
  Status reply = c.ReadReply();
  EXPECT_EQ(reply.code(), StatusCode::kResourceExhausted) << reply.ToString();
  EXPECT_NE(reply.message().find("max_decompression_ratio"), std::string::npos) << reply.ToString();
  EXPECT_TRUE(c.ClosedWithin(10s));
  // Random floats compress far less than 1000:1: served.
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  auto x = s->Upload(Floats({1 << 20}, remex::testing::RandomFloats(1 << 20, 7)));
  EXPECT_TRUE(x.ok()) << x.status().ToString();
  auto z = s->Upload(Floats({12 << 20}, std::vector<float>(12 << 20, 0.0f)));
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  auto back = s->Download(z->handle);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const std::vector<float> values = ToFloats(*back);
  EXPECT_EQ(values.size(), size_t{12} << 20);
  EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; }));
  ExpectServing(server);
}

// Sends a tensorWrite of `raw` bytes (float32) coded as the one zstd frame `bomb`.
void SendBomb(RawConnection& c, uint64_t raw, const std::vector<std::byte>& bomb) {
  rpc::AttachmentHeader ah;
  ah.raw_size = raw;
  ah.wire_size = bomb.size();
  ah.codec = rpc::Codec::kZstd;
  c.BeginTensorWrite(2, static_cast<int64_t>(raw / 4), ah);
  c.WriteBytes(bomb.data(), bomb.size());
}

// A request's attachment is decompressed off the I/O thread: while one session's
// 512 MiB of zstd decompresses, another's pings (on the same, only, I/O thread) are
// answered.
TEST(ServerBudgetTest, DecompressionDoesNotHoldTheIoThread) {
  ServerProcess server(std::vector<std::string>{"--max-decompression-ratio", "0", "--io-threads", "1"});
  ASSERT_NE(server.port(), 0);
  const uint64_t raw = uint64_t{512} << 20;
  const std::vector<std::byte> bomb = rpc::testing::ZeroZstdFrame(raw);
  auto victim = ConnectTo(server);
  ASSERT_TRUE(victim);
  RawConnection c(server.port());
  std::atomic<bool> done{false};
  std::atomic<int> pings{0};
  std::thread pinger([&] {
    while (!done) {
      if (victim->Ping().ok()) ++pings;
      std::this_thread::sleep_for(1ms);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  SendBomb(c, raw, bomb);
  const int before = pings.load();
  Status reply = c.ReadReply();
  const auto took = std::chrono::steady_clock::now() - start;
  const int during = pings.load() - before;
  done = true;
  pinger.join();
  EXPECT_TRUE(reply.ok()) << reply.ToString();
  std::printf("512 MiB decompressed in %.0f ms; another session's pings answered meanwhile: %d\n",
              std::chrono::duration<double, std::milli>(took).count(), during);
  if (took < 100ms) GTEST_SKIP() << "decompressed too fast to tell";
  EXPECT_GE(during, 10) << "pings were held while the attachment decompressed";
}

// SIGTERM stops a decompression in progress: the server exits well before the whole
// attachment would have been decoded.
TEST(ServerBudgetTest, SigtermInterruptsADecompression) {
  const uint64_t raw = uint64_t{1} << 30;
  const std::vector<std::byte> bomb = rpc::testing::ZeroZstdFrame(raw);
  // The faster of two decompressions: the first also pays for memory the machine backs
  // on first touch (a VM's), which the server below may find backed already.
  std::chrono::steady_clock::duration whole = std::chrono::hours(1);
  {
    ServerProcess server(std::vector<std::string>{"--max-decompression-ratio", "0"});
    ASSERT_NE(server.port(), 0);
    for (int round = 0; round < 2; ++round) {
      RawConnection c(server.port());
      const auto start = std::chrono::steady_clock::now();
      SendBomb(c, raw, bomb);
      Status reply = c.ReadReply();
      whole = std::min(whole, std::chrono::steady_clock::now() - start);
      ASSERT_TRUE(reply.ok()) << reply.ToString();
    }
  }
  if (whole < 100ms) GTEST_SKIP() << "1 GiB decompressed in under 100 ms: too fast to interrupt";
  const std::string log = ::testing::TempDir() + "/sigterm_decompression_" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  auto server = ServerProcess::Logging(log, {"--max-decompression-ratio", "0"});
  ASSERT_NE(server->port(), 0);
  RawConnection c(server->port());
  SendBomb(c, raw, bomb);
  std::this_thread::sleep_for(whole / 5);
  const auto sent = std::chrono::steady_clock::now();
  kill(server->pid(), SIGTERM);
  ASSERT_TRUE(Eventually([&] { return !server->alive(); }, 30s));
  const auto stopped = std::chrono::steady_clock::now() - sent;
  std::printf("the whole decompression takes %.0f ms; SIGTERM 20 %% into it stopped the server in %.0f ms\n",
              std::chrono::duration<double, std::milli>(whole).count(),
              std::chrono::duration<double, std::milli>(stopped).count());
  // The server's log says the decompression stopped part-way rather than ran to its end
  // (how long the stop took depends on this machine's load: printed, not asserted).
  const std::string text = remex::testing::ReadText(log);
  EXPECT_NE(text.find("decompression stopped: the connection is closing"), std::string::npos) << text;
  std::remove(log.c_str());
}

TEST(ServerBudgetTest, StalledUploadIsClosedAtTheReadTimeoutAndFreed) {
  ServerProcess server(std::vector<std::string>{"--read-timeout-s", "1"});
  ASSERT_NE(server.port(), 0);
  RawConnection c(server.port());
  // A tensorWrite of 8 MiB that delivers 1 MiB and stalls.
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = 8 << 20;
  c.BeginTensorWrite(2, 2 << 20, ah);
  std::vector<char> part(1 << 20, 'x');
  c.WriteBytes(part.data(), part.size());
  EXPECT_TRUE(c.ClosedWithin(10s)) << "a stalled upload held its connection past the read timeout";
  ExpectServing(server);
}

// Incomplete uploads are bounded server-wide (--max-receiving-bytes), whichever
// sessions they come from.
TEST(ServerBudgetTest, IncompleteUploadsAreBoundedServerWide) {
  ServerProcess server(std::vector<std::string>{"--max-receiving-bytes", std::to_string(100 << 20)});
  ASSERT_NE(server.port(), 0);
  ExpectServing(server);
  const uint64_t idle = ResidentBytes(server.pid());
  // Two sessions each start a 48 MiB upload, send 1 MiB of it and stall.
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(std::make_unique<RawConnection>(server.port()));
    rpc::AttachmentHeader ah;
    ah.raw_size = ah.wire_size = 48 << 20;
    stalled.back()->BeginTensorWrite(2, 12 << 20, ah);
    std::vector<char> part(1 << 20, 'x');
    stalled.back()->WriteBytes(part.data(), part.size());
  }
  // A third, from yet another session, would pass the 100 MiB: refused at its header.
  RawConnection third(server.port());
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = 8 << 20;
  third.BeginTensorWrite(2, 2 << 20, ah);
  Status refused = third.ReadReply();
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("max_receiving_bytes"), std::string::npos) << refused.ToString();
  const uint64_t held = ResidentBytes(server.pid());
  std::printf("resident: %llu MiB idle, %llu MiB with two 48 MiB uploads stalled after 1 MiB\n",
              static_cast<unsigned long long>(idle >> 20), static_cast<unsigned long long>(held >> 20));
  // One stalled upload gone: room again.
  stalled.pop_back();
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = ConnectTo(server);
        return s && s->Upload(Floats({2 << 20}, std::vector<float>(2 << 20, 1.0f))).ok();
      },
      10s));
}

TEST(ServerBudgetTest, AClientThatStopsReadingAReplyIsClosedAtTheWriteTimeout) {
  ServerProcess server(std::vector<std::string>{"--write-timeout-s", "1"});
  ASSERT_NE(server.port(), 0);
  RawConnection c(server.port());
  capnp::MallocMessageBuilder alloc;
  auto a = alloc.initRoot<rpc::wire::Request>().initTensorAlloc();
  a.initDesc().setDtype(1);
  a.getDesc().initShape(1).set(0, 64 << 20);  // 256 MiB of float32
  c.WriteMessage(alloc, 2, 0);
  uint64_t tensor = c.ReadTensorHandle();
  ASSERT_NE(tensor, 0u);
  // Read it back uncompressed (far more than the socket buffers hold), and read nothing.
  capnp::MallocMessageBuilder read;
  read.initRoot<rpc::wire::Request>().initTensorRead().setTensor(tensor);
  c.WriteMessage(read, 3, 0, rpc::kFlagUncompressedReply);
  EXPECT_TRUE(Eventually([&] { return server.Metric("remex_sessions") == 0; }, 20s))
      << "a client that stopped reading held its session";
  EXPECT_EQ(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), 0);
  ExpectServing(server);
}

TEST(ServerBudgetTest, IdleConnectionIsClosedAtTheIdleTimeout) {
  ServerProcess server(std::vector<std::string>{"--idle-timeout-s", "1"});
  ASSERT_NE(server.port(), 0);
  RawConnection c(server.port());
  EXPECT_TRUE(c.ClosedWithin(10s)) << "an idle connection outlived the idle timeout";
  ExpectServing(server);
}

TEST(ServerBudgetTest, ConnectionsPerAddressAreCapped) {
  ServerProcess server(std::vector<std::string>{"--max-connections-per-address", "3"});
  ASSERT_NE(server.port(), 0);
  std::vector<std::unique_ptr<Session>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(ConnectTo(server));
    ASSERT_TRUE(held.back());
  }
  auto fourth = Session::Connect("127.0.0.1", server.port());
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), StatusCode::kResourceExhausted) << fourth.status().ToString();
  EXPECT_NE(fourth.status().message().find("max_connections_per_address"), std::string::npos);
  // The held sessions still work, and a freed slot is served again.
  EXPECT_TRUE(held[0]->Ping().ok());
  held.pop_back();
  for (int i = 0; i < 100; ++i) {
    auto again = Session::Connect("127.0.0.1", server.port());
    if (again.ok()) return;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "a closed connection's slot was not given back";
}

TEST(ServerBudgetTest, InvokeDeadlineStopsARunawayLoopAndTheSessionGoesOn) {
  ServerProcess server(std::vector<std::string>{"--max-invoke-ms", "2000"});
  ASSERT_NE(server.port(), 0);
  // The spin loop itself is correct: a few trips give x * (trips + 1).
  auto s = StartSpin(server, 3);
  ASSERT_NE(s.vm, 0u);
  auto small = s.session->Invoke(s.vm, "main");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto y = s.session->Download(small->outputs[0].handle);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(ToFloats(*y), (std::vector<float>{4, 8}));

  auto spin = StartSpin(server, kForever);
  ASSERT_NE(spin.vm, 0u);
  // The client's deadline.
  auto start = std::chrono::steady_clock::now();
  auto out = spin.session->Invoke(spin.vm, "main", 300ms);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded) << out.status().ToString();
  EXPECT_NE(out.status().message().find("deadline of 300 ms"), std::string::npos) << out.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // No deadline asked: the server's cap (2000 ms) applies.
  out = spin.session->Invoke(spin.vm, "main");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("deadline of 2000 ms"), std::string::npos) << out.status().ToString();
  // The session and the server go on.
  EXPECT_TRUE(spin.session->Ping().ok());
  ExpectServing(server);
}

TEST(ServerBudgetTest, ARunawaySessionDoesNotHoldTheDeviceFromAnotherThatBenchmarks) {
  // Only the server's cap stops the spinning run, 15 s after it starts: the other
  // session's requests must be served between the spinner's kernels meanwhile.
  ServerProcess server(std::vector<std::string>{"--max-invoke-ms", "15000"});
  ASSERT_NE(server.port(), 0);
  auto spin = StartSpin(server, kForever, 120s);
  ASSERT_NE(spin.vm, 0u);
  // The spinning session is used by this thread only, and waited for below.
  auto spinning = std::async(std::launch::async, [&] { return spin.session->Invoke(spin.vm, "main").status(); });
  std::this_thread::sleep_for(200ms);  // the spin is on the device
  ExpectServing(server);  // load, upload, invoke, download
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  auto module = s->LoadModule(Compile(AddReluModel()), "add_relu");
  ASSERT_TRUE(module.ok());
  auto vm = s->CreateVm(module->handle);
  ASSERT_TRUE(vm.ok());
  auto x = s->Upload(Floats({1, 4}, {1, 1, -3, 3}));
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(s->SetInputs(*vm, "main", {x->handle}).ok());
  client::BenchmarkOptions options;
  options.warmup = 2;
  options.repeat = 5;
  auto bench = s->Benchmark(*vm, "main", options);
  ASSERT_TRUE(bench.ok()) << bench.status().ToString();
  EXPECT_EQ(bench->samples_seconds.size(), 5u);
  // All of it while the spinner still runs: it was never held behind the spin.
  EXPECT_EQ(spinning.wait_for(0s), std::future_status::timeout) << "the spinning run ended early";
  Status spun = spinning.get();
  EXPECT_EQ(spun.code(), StatusCode::kDeadlineExceeded) << spun.ToString();
}

// main(x: float32 [3]) -> (): `Goto 0` for ever, launching no kernel. The verifier
// accepts it (a verified executable may loop); only its bounds stop it.
std::vector<std::byte> GotoZeroExecutable() {
  vm::ExecutableDef def;
  def.producer = "server_budget_test";
  vm::FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {3}, {}}};
  fn.num_registers = 1;
  fn.code = {{vm::Opcode::kGoto, {0}, {}}, {vm::Opcode::kRet, {}, {{}}}};
  def.functions.push_back(std::move(fn));
  auto bytes = vm::SerializeExecutable(def);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<std::byte>{};
}

// What a victim session does while another spins: allocates, uploads, loads
// `add_relu` (AddReluModel compiled), runs it and downloads the result (checked). The
// first error, if any.
Status ServeVictim(client::Session& s, std::span<const std::byte> add_relu) {
  REMEX_RETURN_IF_ERROR(s.Alloc(DType::kFloat32, {1024}).status());
  REMEX_ASSIGN_OR_RETURN(client::RemoteTensor x, s.Upload(Floats({1, 4}, {1, 1, -3, 3})));
  REMEX_ASSIGN_OR_RETURN(client::ModuleInfo module, s.LoadModule(add_relu, "add_relu"));
  REMEX_ASSIGN_OR_RETURN(uint64_t vm, s.CreateVm(module.handle));
  REMEX_RETURN_IF_ERROR(s.SetInputs(vm, "main", {x.handle}));
  REMEX_ASSIGN_OR_RETURN(client::InvokeResult out, s.Invoke(vm, "main"));
  REMEX_ASSIGN_OR_RETURN(npy::Array y, s.Download(out.outputs[0].handle));
  if (ToFloats(y) != std::vector<float>{1.5f, 0.5f, 0.0f, 2.0f}) return Internal("AddRelu gave a wrong result");
  return OkStatus();
}

// A session runs the `Goto 0` executable (no deadline near: only a cancel stops it)
// while another is served: the victim must not wait for the spinner's end.
void ExpectAGotoLoopDoesNotHoldTheDevice(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"--max-invoke-ms", "600000"};
  args.insert(args.end(), flags.begin(), flags.end());
  ServerProcess server(args);
  ASSERT_NE(server.port(), 0);
  auto spinner = ConnectTo(server, 60s);
  ASSERT_TRUE(spinner);
  auto module = spinner->LoadModule(GotoZeroExecutable(), "goto0");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto vm = spinner->CreateVm(module->handle);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto x = spinner->Upload(Floats({3}, {1, 2, 3}));
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(spinner->SetInputs(*vm, "main", {x->handle}).ok());
  auto spinning = std::async(std::launch::async, [&] { return spinner->Invoke(*vm, "main").status(); });
  std::this_thread::sleep_for(300ms);  // the loop is on the device (or the I/O thread)

  // Victims (a fresh session each, connect included) whose requests give up after
  // 20 s: a server that never yields answers none of them.
  const std::vector<std::byte> add_relu = Compile(AddReluModel());
  auto serve_victim = [&](std::chrono::nanoseconds& took) {
    const auto start = std::chrono::steady_clock::now();
    auto victim = ConnectTo(server, 20s);
    Status st = victim ? ServeVictim(*victim, add_relu) : Unavailable("the victim could not connect");
    took = std::chrono::steady_clock::now() - start;
    return st;
  };
  constexpr int kRounds = 5;
  std::vector<std::chrono::nanoseconds> during(kRounds);
  Status served = OkStatus();
  for (int i = 0; i < kRounds && served.ok(); ++i) served = serve_victim(during[i]);
  const bool still_spinning = spinning.wait_for(0s) == std::future_status::timeout;
  const int ready = server.HttpGet("/readyz").first;

  // Only the cancel stops the loop; cancel until it finds the run in progress.
  bool cancelled = false;
  for (int i = 0; i < 100 && !cancelled; ++i) {
    auto c = spinner->Cancel();
    cancelled = c.ok() && *c;
    if (!cancelled) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(spinning.wait_for(60s), std::future_status::ready) << "the cancelled loop went on";
  const Status spun = spinning.get();

  EXPECT_TRUE(served.ok()) << "the victim was not served while a Goto 0 loop spun: " << served.ToString();
  EXPECT_TRUE(still_spinning) << "the loop ended before the victim was served";
  EXPECT_EQ(ready, 200) << "/readyz: the device worker did not answer within 1 s";
  // Generous: a server that yields serves each round in milliseconds, one that does
  // not only at the spinner's end (never, here).
  EXPECT_LT(*std::max_element(during.begin(), during.end()), 5s);
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(spun.code(), StatusCode::kCancelled) << spun.ToString();
  EXPECT_NE(spun.message().find("cancel request"), std::string::npos) << spun.ToString();

  // The same requests alone, for comparison (docs/security.md, Tested).
  std::vector<std::chrono::nanoseconds> alone(kRounds);
  for (int i = 0; i < kRounds; ++i) EXPECT_TRUE(serve_victim(alone[i]).ok());
  auto ms = [](std::vector<std::chrono::nanoseconds> v) {
    std::sort(v.begin(), v.end());
    char text[64];
    std::snprintf(text, sizeof text, "%.1f ms median, %.1f ms max",
                  std::chrono::duration<double, std::milli>(v[v.size() / 2]).count(),
                  std::chrono::duration<double, std::milli>(v.back()).count());
    return std::string(text);
  };
  std::printf("victim (connect, alloc, upload, load, createVm, setInputs, invoke, download), %d rounds: %s "
              "during a Goto 0 loop, %s alone\n",
              kRounds, ms(during).c_str(), ms(alone).c_str());
  // The spinning session goes on.
  EXPECT_TRUE(spinner->Ping().ok());
}

TEST(ServerBudgetTest, AGotoLoopWithoutKernelsStartedInlineYieldsToOtherSessions) {
  // The spinner's first invoke starts on the I/O thread (the device is idle): past the
  // inline budget it must move to the device thread, and there take turns.
  ExpectAGotoLoopDoesNotHoldTheDevice({});
}

TEST(ServerBudgetTest, AGotoLoopWithoutKernelsOnTheDeviceThreadYieldsToOtherSessions) {
  ExpectAGotoLoopDoesNotHoldTheDevice({"--inline-invoke-below-us", "0"});
}

TEST(ServerBudgetTest, ClientThatHangsUpMidRunFreesTheDeviceForOthers) {
  // The server's cap is far away: only the disconnect can stop the run.
  ServerProcess server(std::vector<std::string>{"--max-invoke-ms", "600000"});
  ASSERT_NE(server.port(), 0);
  auto spin = StartSpin(server, kForever, 3s);
  ASSERT_NE(spin.vm, 0u);
  // The invoke times out on the client (3 s), which closes its connection.
  auto out = spin.session->Invoke(spin.vm, "main");
  ASSERT_FALSE(out.ok());
  spin.session.reset();
  // Another session's request runs (it would wait for ever behind the spinning run).
  auto start = std::chrono::steady_clock::now();
  ExpectServing(server);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST(ServerBudgetTest, ACancelRequestStopsARunawayLoopAndTheSessionGoesOn) {
  // Neither the server's cap nor a client deadline is near: only the cancel stops it.
  ServerProcess server(std::vector<std::string>{"--max-invoke-ms", "600000"});
  ASSERT_NE(server.port(), 0);
  auto spin = StartSpin(server, kForever, 120s);
  ASSERT_NE(spin.vm, 0u);
  // Nothing in progress yet: nothing to cancel, and the session is untouched.
  auto idle = spin.session->Cancel();
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_FALSE(*idle);
  auto run = std::async(std::launch::async, [&] { return spin.session->Invoke(spin.vm, "main").status(); });
  // Cancel until it finds the run in progress (the invoke may not have reached the
  // server yet).
  bool cancelled = false;
  for (int i = 0; i < 200 && !cancelled; ++i) {
    auto c = spin.session->Cancel();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cancelled = *c;
    if (!cancelled) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(cancelled);
  ASSERT_EQ(run.wait_for(60s), std::future_status::ready) << "the cancelled run went on";
  Status st = run.get();
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("cancel request"), std::string::npos) << st.ToString();
  // The session serves its next request.
  EXPECT_TRUE(spin.session->Ping().ok());
  remex::testing::ExpectServesAddRelu(*spin.session);
}

TEST(ServerBudgetTest, ACancelNeedsTheSessionsKey) {
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  auto victim = ConnectTo(server);
  ASSERT_TRUE(victim);
  RawConnection c(server.port());
  capnp::MallocMessageBuilder msg;
  auto cancel = msg.initRoot<rpc::wire::Request>().initCancel();
  cancel.setSessionId(victim->server_info().session_id);
  std::string guess(16, 'x');
  cancel.setCancelKey(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(guess.data()), guess.size()));
  c.WriteMessage(msg, 2, 0);
  Status reply = c.ReadReply();
  EXPECT_EQ(reply.code(), StatusCode::kNotFound) << reply.ToString();
  EXPECT_TRUE(victim->Ping().ok());
  remex::testing::ExpectServesAddRelu(*victim);
}

TEST(ServerBudgetTest, SigtermDuringARunawayLoopStopsWithinTheDrainTimeout) {
  ServerProcess server(std::vector<std::string>{"--max-invoke-ms", "600000", "--drain-timeout-s", "1"});
  ASSERT_NE(server.port(), 0);
  auto spin = StartSpin(server, kForever);
  ASSERT_NE(spin.vm, 0u);
  auto running = std::async(std::launch::async, [&] { return spin.session->Invoke(spin.vm, "main").status(); });
  std::this_thread::sleep_for(300ms);  // the run is on the device
  EXPECT_TRUE(server.SignalAndWait(SIGTERM, 15s)) << "remex-server did not stop after SIGTERM";
  Status st = running.get();
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace remex

namespace remex {
namespace {

TEST(ServerMetricsTest, HelloDisclosesNothingOfOtherSessions) {
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  auto a = ConnectTo(server);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->Alloc(DType::kFloat32, {4 << 20}).ok());  // 16 MiB held by session a
  auto b = ConnectTo(server);
  ASSERT_TRUE(b);
  auto info = b->Hello();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->active_sessions, 0u);
  EXPECT_EQ(info->devices.at(0).bytes_in_use, 0u);
  // Its own bytes it does see.
  ASSERT_TRUE(b->Alloc(DType::kFloat32, {1024}).ok());
  EXPECT_EQ(b->Hello()->devices.at(0).bytes_in_use, 4096u);
  // The operator sees everything on the metrics endpoint.
  EXPECT_EQ(server.Metric("remex_sessions"), 2);
  EXPECT_GE(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), (16 << 20) + 4096);
}

TEST(ServerMetricsTest, MetricsCountRequestsByKindAndCodeAndTimeInvokes) {
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  ExpectServing(server);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->Free({12345}).ok());  // NOT_FOUND
  auto [status, body] = server.HttpGet("/metrics");
  ASSERT_EQ(status, 200);
  EXPECT_NE(body.find("# TYPE remex_requests_total counter"), std::string::npos) << body;
  EXPECT_EQ(server.Metric("remex_requests_total{kind=\"invoke\",code=\"OK\"}"), 1) << body;
  EXPECT_EQ(server.Metric("remex_requests_total{kind=\"free\",code=\"NOT_FOUND\"}"), 1) << body;
  EXPECT_EQ(server.Metric("remex_invoke_seconds_count"), 1) << body;
  EXPECT_EQ(server.Metric("remex_invoke_seconds_bucket{le=\"+Inf\"}"), 1) << body;
  EXPECT_GT(server.Metric("remex_received_bytes_total"), 0);
  EXPECT_EQ(server.HttpGet("/nothing").first, 404);
  EXPECT_EQ(server.HttpGet("/healthz"), (std::pair<int, std::string>{200, "ok\n"}));
  EXPECT_EQ(server.HttpGet("/readyz"), (std::pair<int, std::string>{200, "ready\n"}));
}

// A decoder step's requests, as the Python client sends them: the previous outputs
// freed, then setInput, invoke and tensorRead in one write.
void RunStepsOfAddRelu(Session& s, int steps) {
  auto module = s.LoadModule(Compile(AddReluModel()), "add_relu");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto vm = s.CreateVm(module->handle);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto x = s.Upload(Floats({1, 4}, {1, 1, -3, 3}));
  ASSERT_TRUE(x.ok());
  for (int i = 0; i < steps; ++i) {
    Session::Pipeline p(s);
    const uint64_t y = s.NewResultHandle();
    p.SetInputs(*vm, "main", {x->handle}).Invoke(*vm, "main", {y}).Download(y);
    auto r = p.Run();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(ToFloats(r->downloads[0]), (std::vector<float>{1.5f, 0.5f, 0.0f, 2.0f}));
    ASSERT_TRUE(s.FreeWithoutReply({y}).ok());
  }
  ASSERT_TRUE(s.Ping().ok());  // the last free goes with it
}

TEST(ServerMetricsTest, BookkeepingRunsOnTheIoThreadAndPipelinedRepliesShareAWrite) {
  // An inline budget of 1 s: the second invoke starts inline however slowly the first ran
  // (a sanitized build on a loaded machine can take past the default 2 ms).
  ServerProcess server(std::vector<std::string>{"--inline-invoke-below-us", "1000000"});
  ASSERT_NE(server.port(), 0);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  RunStepsOfAddRelu(*s, 2);
  // The device thread idle, the session's bookkeeping and its short invokes (all but
  // the first, which had no previous time) started on the I/O thread.
  EXPECT_EQ(server.Metric("remex_requests_inline_total{kind=\"setInput\"}"), 2);
  EXPECT_EQ(server.Metric("remex_requests_inline_total{kind=\"invoke\"}"), 1);
  EXPECT_EQ(server.Metric("remex_requests_inline_total{kind=\"tensorWrite\"}"), 1);
  EXPECT_EQ(server.Metric("remex_requests_inline_total{kind=\"free\"}"), 2);
  // A step (free, setInput, invoke, tensorRead, each read whole before the one before
  // it is answered) is one write of four replies.
  const double writes = server.Metric("remex_reply_writes_total");
  const double requests = server.Metric("remex_requests_total{kind=\"tensorRead\",code=\"OK\"}");
  RunStepsOfAddRelu(*s, 5);
  EXPECT_EQ(server.Metric("remex_requests_total{kind=\"tensorRead\",code=\"OK\"}") - requests, 5);
  // Besides the steps: loadModule, createVm, the upload and the closing ping.
  EXPECT_EQ(server.Metric("remex_reply_writes_total") - writes, 5 + 4);
}

TEST(ServerMetricsTest, NothingRunsOnTheIoThreadWithoutAnInlineBudget) {
  ServerProcess server(std::vector<std::string>{"--inline-invoke-below-us", "0"});
  ASSERT_NE(server.port(), 0);
  auto s = ConnectTo(server);
  ASSERT_TRUE(s);
  RunStepsOfAddRelu(*s, 3);
  auto [status, body] = server.HttpGet("/metrics");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(body.find("remex_requests_inline_total{"), std::string::npos) << body;
  EXPECT_EQ(server.Metric("remex_requests_total{kind=\"free\",code=\"OK\"}"), 3);
}

TEST(ServerMetricsTest, ReadinessSaysBusyWhileABenchmarkHoldsTheDevice) {
  // A ping is answered on the I/O thread whatever the device does; /readyz asks the
  // device worker itself.
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  auto spin = StartSpin(server, 200000);  // a few ms per call
  ASSERT_NE(spin.vm, 0u);
  client::BenchmarkOptions options;
  options.warmup = 0;
  options.repeat = 3;
  options.min_repeat_ms = 1500;  // about 4.5 s on the device, exclusively
  auto bench = std::async(std::launch::async,
                          [&] { return spin.session->Benchmark(spin.vm, "main", options).status(); });
  std::this_thread::sleep_for(500ms);
  auto pinger = ConnectTo(server);
  ASSERT_TRUE(pinger);
  EXPECT_TRUE(pinger->Ping().ok());
  auto [status, body] = server.HttpGet("/readyz");
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("busy"), std::string::npos) << body;
  EXPECT_EQ(server.HttpGet("/healthz").first, 200);  // busy, not stuck
  EXPECT_TRUE(bench.get().ok());
  EXPECT_EQ(server.HttpGet("/readyz").first, 200);
}

}  // namespace
}  // namespace remex

namespace remex {
namespace {

bool WaitForNoSessions(const ServerProcess& server) {
  return Eventually([&] { return server.Metric("remex_sessions") == 0; }, 5s);
}

TEST(ServerSoakTest, SessionsThatComeAndGoLeaveMemoryAtItsBaseline) {
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  ExpectServing(server);  // warm: code paths, thread stacks, the first allocations
  ASSERT_TRUE(WaitForNoSessions(server));
  const uint64_t baseline = ResidentBytes(server.pid());
  ASSERT_GT(baseline, 0u);
  // 200 sessions, each uploading a different 1 MiB tensor and running a model, then
  // hanging up without freeing anything.
  for (int i = 0; i < 200; ++i) {
    auto s = ConnectTo(server);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Upload(Floats({1 << 18}, std::vector<float>(1 << 18, static_cast<float>(i)))).ok());
    if (i % 50 == 0) ExpectServing(server);
  }
  ASSERT_TRUE(WaitForNoSessions(server));
  EXPECT_EQ(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), 0);
  EXPECT_EQ(server.Metric("remex_device_memory_reserved_bytes{device=\"cpu\"}"), 0)
      << "freed blocks stayed cached after the last session left";
  const uint64_t after = ResidentBytes(server.pid());
#if REMEX_ASAN
  // The server of a sanitizer build keeps freed memory in ASan's quarantine (256 MiB)
  // instead of giving it back, so its resident set says nothing about the allocator's
  // trim; the device-memory figures above still hold, and ASan checks the leaks.
  std::printf("resident %llu MiB against a baseline of %llu MiB: not compared under AddressSanitizer\n",
              static_cast<unsigned long long>(after >> 20), static_cast<unsigned long long>(baseline >> 20));
#else
  EXPECT_LT(after, baseline + (32u << 20)) << "resident " << (after >> 20) << " MiB against a baseline of "
                                           << (baseline >> 20) << " MiB";
#endif
  ExpectServing(server);
}

}  // namespace
}  // namespace remex
