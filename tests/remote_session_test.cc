// Remote sessions for benchmarking and CI, end to end against a real remex-server
// process: the module cache, the time evaluator, profiles, device-side statistics and
// comparisons, and many sessions at once. Client-named handles, pipelining and
// invoke_with_outputs are in remote_session_outputs_test.cc.
#include <capnp/any.h>
#include <capnp/schema.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <span>
#include <thread>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "rpc/transport.h"
#include "rpc/wire_util.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/remote_session_test_util.h"
#include "vm/executable.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::Floats;
using remex::testing::OnnxModelBuilder;
using remex::testing::PlusOneModel;
using remex::testing::Registry;
using remex::testing::RemoteSessionTest;
using remex::testing::ServerProcess;
using remex::testing::ToFloats;

// A raw rpc client that has said hello, for requests the Session API does not make.
std::unique_ptr<rpc::Client> RawClient(uint16_t port) {
  auto c = rpc::Client::Connect("127.0.0.1", port, std::chrono::seconds(10));
  EXPECT_TRUE(c.ok());
  rpc::OutFrame hello;
  hello.message = std::make_unique<capnp::MallocMessageBuilder>();
  hello.message->initRoot<rpc::wire::Request>().initHello().setProtocolMajor(rpc::kProtocolMajor);
  auto reply = (*c)->Call(hello);
  EXPECT_TRUE(reply.ok());
  return std::move(c).value();
}

Status RawCall(rpc::Client& c, rpc::OutFrame& frame) {
  auto reply = c.Call(frame);
  if (!reply.ok()) return reply.status();
  auto reader = reply->Reader();
  return rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
}

// ---------------------------------------------------------------------------------------
// Module cache.

// An attacker's session allocates tensors of the size another session uploaded and
// freed, and reads them: it must see zeros, never the other session's bytes (the
// caching allocator hands the freed block out again).
TEST_F(RemoteSessionTest, AllocatedTensorsNeverShowAnotherSessionsData) {
  constexpr size_t kCount = 256 * 1024;  // 1 MiB of float32.
  npy::Array secret;
  secret.dtype = DType::kFloat32;
  secret.shape = {static_cast<int64_t>(kCount)};
  secret.data.resize(kCount * 4);
  for (size_t i = 0; i < secret.data.size(); ++i) secret.data[i] = static_cast<std::byte>(0x5a ^ (i * 7));
  auto victim = Connect();
  ASSERT_TRUE(victim);
  auto uploaded = victim->Upload(secret);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().ToString();
  ASSERT_TRUE(victim->Free({uploaded->handle}).ok());

  auto attacker = Connect();
  ASSERT_TRUE(attacker);
  for (int k = 0; k < 4; ++k) {
    auto t = attacker->Alloc(DType::kFloat32, secret.shape);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto read = attacker->Download(t->handle);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_EQ(read->data.size(), secret.data.size());
    size_t nonzero = 0;
    for (std::byte b : read->data) nonzero += b != std::byte{0};
    EXPECT_EQ(nonzero, 0u) << "allocation " << k << " shows " << nonzero << " bytes it was never given";
  }
}

TEST_F(RemoteSessionTest, ModuleCacheSkipsTheUploadAcrossSessions) {
  std::vector<std::byte> exe = Compile(AddReluModel());
  std::string hash = Session::ContentHash(exe);
  EXPECT_EQ(hash.size(), 32u);
  EXPECT_EQ(hash, Session::ContentHash(exe));
  auto a = Connect();
  bool uploaded = false;
  auto first = a->LoadModuleCached(exe, "add_relu", &uploaded);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(uploaded);
  EXPECT_EQ(first->executable_bytes, exe.size());

  // A second session finds it: a moduleHas costs bytes, not the executable.
  auto b = Connect();
  uint64_t sent = b->bytes_sent();
  auto second = b->LoadModuleCached(exe, "add_relu", &uploaded);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(uploaded);
  EXPECT_LT(b->bytes_sent() - sent, 256u);
  EXPECT_LT(b->bytes_sent() - sent, exe.size());
  EXPECT_NE(second->handle, first->handle);
  EXPECT_EQ(second->executable_bytes, exe.size());
  ASSERT_EQ(second->functions.size(), 1u);
  EXPECT_EQ(second->functions[0].inputs[0].shape, (Shape{-1, 4}));

  // The cached module runs, and survives the session that uploaded it.
  a.reset();
  auto vm = b->CreateVm(second->handle);
  ASSERT_TRUE(vm.ok());
  auto x = b->Upload(Floats({1, 4}, {1, 1, -3, 3}));
  ASSERT_TRUE(b->SetInputs(*vm, "main", {x->handle}).ok());
  auto out = b->Invoke(*vm, "main");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(ToFloats(*b->Download(out->outputs[0].handle)), (std::vector<float>{1.5f, 0.5f, 0.0f, 2.0f}));
  // A freed handle leaves the cache entry in place.
  ASSERT_TRUE(b->Free({second->handle}).ok());
  auto c = Connect();
  ASSERT_TRUE(c->LoadModuleCached(exe, "add_relu", &uploaded).ok());
  EXPECT_FALSE(uploaded);
  // Another executable is a miss.
  ASSERT_TRUE(c->LoadModuleCached(Compile(PlusOneModel()), "plus_one", &uploaded).ok());
  EXPECT_TRUE(uploaded);
}

TEST_F(RemoteSessionTest, ModuleHashIsChecked) {
  std::vector<std::byte> exe = Compile(AddReluModel());
  auto c = RawClient(server_.port());
  auto load = [&](const std::string& hash) {
    rpc::OutFrame f;
    f.message = std::make_unique<capnp::MallocMessageBuilder>();
    auto r = f.message->initRoot<rpc::wire::Request>().initModuleLoad();
    r.setName("m");
    r.setHash(hash);
    f.attachments.push_back({exe.data(), exe.size(), false, nullptr});
    return RawCall(*c, f);
  };
  auto has = [&](const std::string& hash) {
    rpc::OutFrame f;
    f.message = std::make_unique<capnp::MallocMessageBuilder>();
    f.message->initRoot<rpc::wire::Request>().initModuleHas().setHash(hash);
    return RawCall(*c, f);
  };
  std::string good = Session::ContentHash(exe);
  std::string wrong = std::string(32, 'a');
  Status mismatch = load(wrong);
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find(good), std::string::npos) << mismatch.message();
  EXPECT_EQ(has(wrong).code(), StatusCode::kNotFound);
  EXPECT_EQ(has("not-a-hash").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(has(std::string(32, 'A')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(has(good).code(), StatusCode::kNotFound);  // the mismatched load cached nothing
  EXPECT_TRUE(load(good).ok());
  EXPECT_TRUE(has(good).ok());
}

// The protocol carries tensors: a module whose function takes or gives an ONNX sequence
// is refused at load, naming the value, and the session goes on.
TEST_F(RemoteSessionTest, ModulesWithSequencesAtTheirBoundaryAreRefusedByName) {
  OnnxModelBuilder b(15);
  b.Input("a", onnx::TensorProto::FLOAT, {2}).SequenceOutput("s", onnx::TensorProto::FLOAT);
  b.Node("SequenceConstruct", {"a", "a"}, {"s"});
  auto s = remex::testing::ConnectTo(server_);
  ASSERT_TRUE(s);
  auto refused = s->LoadModule(Compile(b), "seq");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("function 'main' gives output 's', an ONNX sequence: the remote protocol "
                                            "carries tensors only"),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(s->LoadModule(Compile(AddReluModel()), "add_relu").ok());
}

// A request of a kind this server has no row for (a newer protocol's) is answered
// UNIMPLEMENTED naming the kind, after the hello-first check, and the session goes on.
TEST_F(RemoteSessionTest, ARequestOfAnUnknownKindIsUnimplemented) {
  auto unknown_kind = [] {
    rpc::OutFrame f;
    f.message = std::make_unique<capnp::MallocMessageBuilder>();
    capnp::AnyStruct::Builder root = f.message->initRoot<rpc::wire::Request>();
    // The union's discriminant, a UInt16 at discriminantOffset (in 16-bit units) of the
    // data section, set past the schema's members.
    const uint32_t at =
        capnp::Schema::from<rpc::wire::Request>().getProto().getStruct().getDiscriminantOffset();
    auto data = root.getDataSection();
    EXPECT_GE(data.size(), at * 2 + 2);
    data[at * 2] = kj::byte{0xe9};
    data[at * 2 + 1] = kj::byte{0x03};  // 1001, little-endian
    return f;
  };
  auto before_hello = rpc::Client::Connect("127.0.0.1", server_.port(), std::chrono::seconds(10));
  ASSERT_TRUE(before_hello.ok());
  rpc::OutFrame first = unknown_kind();
  EXPECT_EQ(RawCall(**before_hello, first).code(), StatusCode::kFailedPrecondition);

  auto c = RawClient(server_.port());
  rpc::OutFrame request = unknown_kind();
  Status refused = RawCall(*c, request);
  EXPECT_EQ(refused.code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.message().find("unknown request kind 1001"), std::string::npos) << refused.ToString();
  rpc::OutFrame ping;
  ping.message = std::make_unique<capnp::MallocMessageBuilder>();
  ping.message->initRoot<rpc::wire::Request>().initPing().setPayload(7);
  EXPECT_TRUE(RawCall(*c, ping).ok());
}

TEST(ModuleCacheBoundTest, EvictedModulesStayAliveWhileHeld) {
  std::vector<std::byte> a = Compile(AddReluModel());
  std::vector<std::byte> b = Compile(PlusOneModel());
  // Room for one of the two (each costs its file size plus its constants).
  uint64_t bound = std::max(a.size(), b.size()) + 64;
  ServerProcess server(std::vector<std::string>{"--module-cache-bytes", std::to_string(bound)});
  ASSERT_NE(server.port(), 0);
  auto s = Session::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(s.ok());
  bool uploaded = false;
  auto ma = (*s)->LoadModuleCached(a, "a", &uploaded);
  ASSERT_TRUE(ma.ok() && uploaded);
  ASSERT_TRUE((*s)->LoadModuleCached(b, "b", &uploaded).ok());
  EXPECT_TRUE(uploaded);
  // a was evicted by b: uploaded again.
  ASSERT_TRUE((*s)->LoadModuleCached(a, "a", &uploaded).ok());
  EXPECT_TRUE(uploaded);
  // The first handle to a still works after its eviction.
  auto vm = (*s)->CreateVm(ma->handle);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto x = (*s)->Upload(Floats({1, 4}, {0, 0, 0, 0}));
  ASSERT_TRUE((*s)->SetInputs(*vm, "main", {x->handle}).ok());
  ASSERT_TRUE((*s)->Invoke(*vm, "main").ok());
  // With the cache off nothing is ever found.
  ServerProcess off(std::vector<std::string>{"--module-cache-bytes", "0"});
  auto t = Session::Connect("127.0.0.1", off.port());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->LoadModuleCached(a, "a", &uploaded).ok());
  ASSERT_TRUE((*t)->LoadModuleCached(a, "a", &uploaded).ok());
  EXPECT_TRUE(uploaded);
}


// ---------------------------------------------------------------------------------------
// Time evaluator and profile.

TEST_F(RemoteSessionTest, BenchmarkTakesSamplesOnTheServer) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  client::BenchmarkOptions o;
  o.repeat = 5;
  o.number = 3;
  o.warmup = 2;
  // Inputs must be bound first.
  EXPECT_EQ(s->Benchmark(vm, "main", o).status().code(), StatusCode::kFailedPrecondition);
  auto x = s->Upload(Floats({64, 4}, std::vector<float>(256, 1.0f)));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  uint64_t received = s->bytes_received();
  auto r = s->Benchmark(vm, "main", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->number, 3u);
  EXPECT_EQ(r->timer, "steady_clock");
  ASSERT_EQ(r->samples_seconds.size(), 5u);
  for (double v : r->samples_seconds) {
    EXPECT_GT(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
  EXPECT_LT(s->bytes_received() - received, 512u);  // numbers only, no outputs

  // number grows until a sample lasts min_repeat_ms; a flush buffer is written.
  o = {};
  o.repeat = 2;
  o.min_repeat_ms = 20;
  o.l2_flush_bytes = 1 << 20;
  r = s->Benchmark(vm, "main", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->number, 1u);
  for (double v : r->samples_seconds) EXPECT_GE(v * r->number, 0.020 * 0.99);

  // A bound output is written by the benchmark's calls.
  auto bound = s->Alloc(DType::kFloat32, {64, 4});
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, bound->handle).ok());
  ASSERT_TRUE(s->Benchmark(vm, "main", {}).ok());
  EXPECT_FLOAT_EQ(ToFloats(*s->Download(bound->handle))[0], 1.5f);

  // Bad arguments.
  using Edit = void (*)(client::BenchmarkOptions&);
  for (Edit bad : std::initializer_list<Edit>{[](client::BenchmarkOptions& b) { b.repeat = 0; },
                   [](client::BenchmarkOptions& b) { b.number = 0; },
                   [](client::BenchmarkOptions& b) { b.repeat = 200000; },
                   [](client::BenchmarkOptions& b) { b.l2_flush_bytes = uint64_t{1} << 40; },
                   [](client::BenchmarkOptions& b) {
                     b.repeat = 100000;
                     b.cooldown_ms = 60000;
                   }}) {
    client::BenchmarkOptions b;
    bad(b);
    EXPECT_EQ(s->Benchmark(vm, "main", b).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(s->Benchmark(vm, "nope", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Benchmark(987654, "main", {}).status().code(), StatusCode::kNotFound);
}

// Another connection reads how far a benchmark is (progress, protocol 1.6): samples
// done of those asked for, and an estimate of the time left; nothing once it ended; and
// only with the session's cancel key.
TEST_F(RemoteSessionTest, ProgressOfABenchmarkIsReadFromAnotherConnection) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  auto x = s->Upload(Floats({64, 4}, std::vector<float>(256, 1.0f)));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto side = Connect();
  auto idle = side->ProgressOf(s->server_info());
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_FALSE(idle->running);
  EXPECT_EQ(idle->kind, "");

  client::BenchmarkOptions o;
  o.repeat = 40;
  o.min_repeat_ms = 50;  // 40 samples of at least 50 ms: 2 s or more
  StatusOr<client::BenchmarkResult> bench = Internal("not run");
  std::thread run([&] { bench = s->Benchmark(vm, "main", o); });
  client::RequestProgress seen;
  for (int i = 0; i < 400 && !(seen.running && seen.done > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto p = side->ProgressOf(s->server_info());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    if (p->running) seen = *p;
  }
  run.join();
  ASSERT_TRUE(bench.ok()) << bench.status().ToString();
  EXPECT_TRUE(seen.running);
  EXPECT_EQ(seen.kind, "benchmark");
  EXPECT_EQ(seen.total, 40u);
  EXPECT_GE(seen.done, 1u);
  EXPECT_LT(seen.done, 40u);
  EXPECT_GT(seen.elapsed_s, 0.0);
  EXPECT_GT(seen.remaining_s, 0.0);
  auto after = side->ProgressOf(s->server_info());
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->running);

  client::ServerInfo forged = s->server_info();
  forged.cancel_key[0] = static_cast<char>(forged.cancel_key[0] ^ 1);
  EXPECT_EQ(side->ProgressOf(forged).status().code(), StatusCode::kNotFound);
}

TEST_F(RemoteSessionTest, LongDeviceWorkDoesNotStallOtherSessions) {
  auto busy = Connect();
  uint64_t vm = LoadVm(*busy, AddReluModel());
  auto x = busy->Upload(Floats({1, 4}, {1, 2, 3, 4}));
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(busy->SetInputs(vm, "main", {x->handle}).ok());
  std::atomic<bool> benchmark_done{false};
  std::thread worker([&] {
    client::BenchmarkOptions o;
    o.repeat = 4;
    o.cooldown_ms = 300;  // about a second on the device worker
    EXPECT_TRUE(busy->Benchmark(vm, "main", o).ok());
    benchmark_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Another session is answered meanwhile: the I/O thread is not held by device work.
  auto other = Connect();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(other->Ping().ok());
  EXPECT_FALSE(benchmark_done.load());
  worker.join();
  EXPECT_TRUE(benchmark_done.load());
}

TEST_F(RemoteSessionTest, ProfileBreaksDownKernelsAndInstructions) {
  auto s = Connect();
  // Unfused: Add and Relu are two kernels.
  uint64_t vm = LoadVm(*s, AddReluModel(), remex::testing::WithoutFusion());
  auto x = s->Upload(Floats({8, 4}, std::vector<float>(32, 1.0f)));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto p = s->Profile(vm, "main");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GT(p->total_nanos, 0u);
  std::map<std::string, client::ProfileRow> kernels, instructions;
  for (const auto& row : p->rows) (row.kind == "kernel" ? kernels : instructions)[row.name] = row;
  ASSERT_TRUE(kernels.count("Add") && kernels.count("Relu"));
  EXPECT_EQ(kernels["Add"].calls, 1u);
  EXPECT_EQ(kernels["Relu"].calls, 1u);
  ASSERT_TRUE(instructions.count("InvokeKernel"));
  EXPECT_EQ(instructions["InvokeKernel"].calls, 2u);
  EXPECT_EQ(instructions["Ret"].calls, 1u);
  uint64_t sum = 0;
  for (auto& [name, row] : instructions) sum += row.total_nanos;
  EXPECT_LE(sum, p->total_nanos);
  EXPECT_LE(kernels["Add"].total_nanos + kernels["Relu"].total_nanos, instructions["InvokeKernel"].total_nanos);
  // The dynamic batch needs shape functions, which read shapes only: no copies.
  EXPECT_EQ(instructions["InvokeShapeFunc"].copies, 0u);
}

// Several runs: the rows are the median run's, every node has each run's time and the
// operands of its call (the batch of 8 is dynamic: from the call), and the trace has one
// event per instruction of every run, its indices in range.
TEST_F(RemoteSessionTest, ProfileOfSeveralRunsGivesNodesAndTrace) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel(), remex::testing::WithoutFusion());
  auto x = s->Upload(Floats({8, 4}, std::vector<float>(32, 1.0f)));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  client::ProfileOptions options;
  options.runs = 3;
  options.trace = true;
  auto p = s->Profile(vm, "main", options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->runs, 3u);
  EXPECT_TRUE(p->synchronized);
  ASSERT_EQ(p->run_total_nanos.size(), 3u);
  ASSERT_LT(p->median_run, 3u);
  EXPECT_EQ(p->total_nanos, p->run_total_nanos[p->median_run]);
  std::vector<uint64_t> sorted = p->run_total_nanos;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(p->total_nanos, sorted[1]);
  std::map<std::string, client::ProfileNode> nodes;
  for (const auto& n : p->nodes) nodes[n.op] = n;
  ASSERT_TRUE(nodes.count("Add") && nodes.count("Relu")) << p->nodes.size();
  for (const auto& [op, n] : nodes) {
    EXPECT_FALSE(n.name.empty()) << op;
    EXPECT_EQ(n.calls, 1u) << op;
    ASSERT_EQ(n.run_nanos.size(), 3u) << op;
    ASSERT_FALSE(n.inputs.empty()) << op;
    EXPECT_TRUE(n.inputs[0].present);
    EXPECT_EQ(n.inputs[0].shape, (Shape{8, 4})) << op;
    ASSERT_EQ(n.outputs.size(), 1u);
    EXPECT_EQ(n.outputs[0].dtype, DType::kFloat32);
    EXPECT_EQ(n.outputs[0].shape, (Shape{8, 4})) << op;
  }
  uint64_t instructions = 0;
  for (const auto& row : p->rows) {
    if (row.kind == "instruction") instructions += row.calls;
  }
  EXPECT_EQ(p->trace.size(), 3 * instructions);
  EXPECT_EQ(p->trace_dropped, 0u);
  size_t kernels = 0;
  for (const auto& e : p->trace) {
    if (e.node >= 0) {
      ++kernels;
      EXPECT_EQ(p->opcode_names[e.opcode], "InvokeKernel");
    }
    EXPECT_EQ(p->function_names[e.function], "main");
  }
  EXPECT_EQ(kernels, 3 * p->nodes.size());

  // One run by default; without the trace, none is sent.
  auto one = s->Profile(vm, "main");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->runs, 1u);
  EXPECT_TRUE(one->trace.empty());
  EXPECT_EQ(one->nodes.size(), p->nodes.size());
  // Out of range: refused before anything is sent.
  options.runs = 0;
  EXPECT_EQ(s->Profile(vm, "main", options).status().code(), StatusCode::kInvalidArgument);
  options.runs = rpc::kMaxProfileRuns + 1;
  EXPECT_EQ(s->Profile(vm, "main", options).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// Device-side checks.

TEST_F(RemoteSessionTest, StatsAndCompareRunOnTheDevice) {
  auto s = Connect();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto t = s->Upload(Floats({2, 3}, {1, 2, 3, 4, nan, INFINITY}));
  ASSERT_TRUE(t.ok());
  uint64_t sent = s->bytes_sent(), received = s->bytes_received();
  auto st = s->Stats(t->handle);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->count, 6u);
  EXPECT_EQ(st->nan_count, 1u);
  EXPECT_EQ(st->inf_count, 1u);
  EXPECT_DOUBLE_EQ(st->min, 1);
  EXPECT_DOUBLE_EQ(st->max, 4);
  EXPECT_DOUBLE_EQ(st->mean, 2.5);
  EXPECT_NEAR(st->std, std::sqrt(1.25), 1e-12);
  EXPECT_LT(s->bytes_sent() - sent + s->bytes_received() - received, 512u);

  // The model's output against an uploaded reference, without downloading either.
  uint64_t vm = LoadVm(*s, AddReluModel());
  auto x = s->Upload(Floats({1, 4}, {1, 1, -3, 3}));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok());
  auto expected = s->Upload(Floats({1, 4}, {1.5f, 0.5f, 0.0f, 2.0f}));
  auto cmp = s->Compare(out->outputs[0].handle, expected->handle, 1e-6, 1e-7);
  ASSERT_TRUE(cmp.ok()) << cmp.status().ToString();
  EXPECT_EQ(cmp->count, 4u);
  EXPECT_EQ(cmp->mismatches, 0u);
  EXPECT_EQ(cmp->first_mismatch, -1);
  auto off = s->Upload(Floats({1, 4}, {1.5f, 0.5f, 0.25f, 2.0f}));
  cmp = s->Compare(out->outputs[0].handle, off->handle, 1e-3, 1e-3);
  ASSERT_TRUE(cmp.ok());
  EXPECT_EQ(cmp->mismatches, 1u);
  EXPECT_EQ(cmp->first_mismatch, 2);
  EXPECT_FLOAT_EQ(static_cast<float>(cmp->max_abs_error), 0.25f);
  EXPECT_FLOAT_EQ(static_cast<float>(cmp->max_rel_error), 1.0f);
  // equal_nan crosses the wire: NaN against NaN matches only with it.
  auto with_nan = s->Upload(Floats({1, 4}, {1.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 2.0f}));
  cmp = s->Compare(with_nan->handle, with_nan->handle, 0, 0);
  ASSERT_TRUE(cmp.ok());
  EXPECT_EQ(cmp->mismatches, 1u);
  EXPECT_EQ(cmp->first_mismatch, 1);
  cmp = s->Compare(with_nan->handle, with_nan->handle, 0, 0, /*equal_nan=*/true);
  ASSERT_TRUE(cmp.ok());
  EXPECT_EQ(cmp->mismatches, 0u);

  // Shapes and dtypes must match; tolerances must be sane; handles must exist.
  auto other_shape = s->Upload(Floats({4}, {1.5f, 0.5f, 0.0f, 2.0f}));
  Status bad = s->Compare(out->outputs[0].handle, other_shape->handle, 0, 0).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("[1, 4]"), std::string::npos) << bad.message();
  npy::Array ints;
  ints.dtype = DType::kInt64;
  ints.shape = {1, 4};
  ints.data.resize(32);
  auto i64 = s->Upload(ints);
  EXPECT_EQ(s->Compare(out->outputs[0].handle, i64->handle, 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Compare(out->outputs[0].handle, expected->handle, -1, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Compare(out->outputs[0].handle, 424242, 0, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Stats(424242).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Stats(vm).status().code(), StatusCode::kInvalidArgument);  // a vm, not a tensor
  auto i64_stats = s->Stats(i64->handle);
  ASSERT_TRUE(i64_stats.ok());
  EXPECT_DOUBLE_EQ(i64_stats->max, 0);
}

// bool bytes from the wire may hold any value (a NumPy array viewed as bool): the
// server stores nonzero as 1, so kernels never read an invalid bool. Small and large
// uploads (the large one is received in place into CPU device memory) and a write
// into an existing tensor all go through it.
TEST_F(RemoteSessionTest, UploadedBoolBytesAreStoredAsZeroOrOne) {
  auto s = Connect();
  ASSERT_NE(s, nullptr);
  for (size_t n : {size_t{4}, size_t{1} << 20}) {
    npy::Array b;
    b.dtype = DType::kBool;
    b.shape = {static_cast<int64_t>(n)};
    b.data.resize(n);
    for (size_t i = 0; i < n; ++i) b.data[i] = static_cast<std::byte>(i % 4 == 0 ? 0 : ((i * 37) & 0xff) | 2);
    auto t = s->Upload(b);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto back = s->Download(t->handle);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->data.size(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += back->data[i] != std::byte{i % 4 == 0 ? uint8_t{0} : uint8_t{1}};
    EXPECT_EQ(wrong, 0u) << n << " elements";
    std::vector<std::byte> again(n, std::byte{0x80});
    ASSERT_TRUE(s->Write(t->handle, DType::kBool, b.shape, again).ok());
    back = s->Download(t->handle);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->data, std::vector<std::byte>(n, std::byte{1}));
  }
}

// ---------------------------------------------------------------------------------------
// Sessions.

TEST_F(RemoteSessionTest, ManySessionsAtOnceShareTheModuleCache) {
  std::vector<std::byte> exe = Compile(AddReluModel());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::atomic<int> uploads{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto s = Session::Connect("127.0.0.1", server_.port());
      if (!s.ok()) return;
      bool uploaded = false;
      auto module = (*s)->LoadModuleCached(exe, "m", &uploaded);
      if (!module.ok()) return;
      if (uploaded) uploads++;
      auto vm = (*s)->CreateVm(module->handle);
      if (!vm.ok()) return;
      uint64_t x = (*s)->NewResultHandle(), y = (*s)->NewResultHandle();
      Session::Pipeline p(**s);
      p.Upload(Floats({1, 4}, std::vector<float>(4, static_cast<float>(i))), x)
          .SetInputs(*vm, "main", {x})
          .Invoke(*vm, "main", {y})
          .Download(y);
      auto r = p.Run();
      if (!r.ok()) return;
      auto stats = (*s)->Stats(y);
      if (!stats.ok()) return;
      if (ToFloats(r->downloads[0])[0] == static_cast<float>(i) + 0.5f &&
          stats->max == std::max(0.0, i + 1.0) && (*s)->Benchmark(*vm, "main", {}).ok()) {
        ok++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_GE(uploads.load(), 1);
}

TEST_F(RemoteSessionTest, HandlesOfOneSessionAreNotFoundInAnother) {
  auto a = Connect();
  auto b = Connect();
  uint64_t vm = LoadVm(*a, AddReluModel());
  auto t = a->Upload(Floats({1, 4}, {1, 2, 3, 4}));
  ASSERT_TRUE(a->SetInputs(vm, "main", {t->handle}).ok());
  EXPECT_EQ(b->Stats(t->handle).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Compare(t->handle, t->handle, 0, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Benchmark(vm, "main", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Profile(vm, "main").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->SetOutput(vm, "main", 0, 0).code(), StatusCode::kNotFound);
  auto bt = b->Upload(Floats({1, 4}, {1, 2, 3, 4}));
  EXPECT_EQ(a->SetInputs(vm, "main", {bt->handle}).code(), StatusCode::kNotFound);
  EXPECT_EQ(a->SetOutput(vm, "main", 0, bt->handle).code(), StatusCode::kNotFound);
  EXPECT_TRUE(a->Compare(t->handle, t->handle, 0, 0).ok());
}

TEST_F(RemoteSessionTest, ListHandlesShowsWhatTheSessionHoldsWithSizes) {
  auto a = Connect();
  auto b = Connect();
  auto empty = a->ListHandles();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
  uint64_t vm = LoadVm(*a, AddReluModel());
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  auto t = a->Upload(DType::kFloat32, {2, 3}, std::as_bytes(std::span<const float>(values)));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(b->Upload(Floats({1, 4}, {1, 2, 3, 4})).ok());

  auto listed = a->ListHandles();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 3u);  // module, vm, tensor; nothing of session b
  EXPECT_EQ((*listed)[0].kind, "module");
  EXPECT_EQ((*listed)[1].kind, "vm");
  EXPECT_EQ((*listed)[1].handle, vm);
  const client::HandleInfo& tensor = (*listed)[2];
  EXPECT_EQ(tensor.kind, "tensor");
  EXPECT_EQ(tensor.handle, t->handle);
  EXPECT_EQ(tensor.dtype, DType::kFloat32);
  EXPECT_EQ(tensor.shape, (Shape{2, 3}));
  EXPECT_EQ(tensor.bytes, 24u);
  EXPECT_EQ(tensor.device, "cpu");
  auto back = a->Download(t->handle);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->data.data(), values.data(), 24), 0);

  // A size that does not match dtype x shape is refused, and nothing is left behind.
  EXPECT_EQ(a->Upload(DType::kFloat32, {4, 3}, std::as_bytes(std::span<const float>(values))).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(a->Free({t->handle}).ok());
  listed = a->ListHandles();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
}

}  // namespace
}  // namespace remex
