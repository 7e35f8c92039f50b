// End-to-end tests against a real remex-server process on an ephemeral loopback port:
// the request set, bad input of every kind, and session cleanup.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "rpc/frame.h"
#include "rpc/transport.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/raw_connection.h"
#include "vm/executable.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::Floats;
using remex::testing::OnnxModelBuilder;
using remex::testing::Registry;
using remex::testing::ToFloats;
using remex::testing::RunCommand;
namespace asio = boost::asio;

class ServerTest : public remex::testing::ServerSessionTest {
 protected:
  // A live session can still load and run a model: the server keeps serving.
  void ExpectServing() {
    auto s = Connect();
    ASSERT_TRUE(s);
    remex::testing::ExpectServesAddRelu(*s);
  }

  // Device bytes held by all sessions, from the metrics endpoint.
  uint64_t BytesInUse() {
    double v = server_.Metric("remex_device_memory_bytes{device=\"cpu\"}");
    EXPECT_GE(v, 0) << "no remex_device_memory_bytes on /metrics";
    return static_cast<uint64_t>(v);
  }

  // Waits until the server has closed every session.
  void WaitForSessionsToClose() {
    for (int i = 0; i < 200; ++i) {
      if (server_.Metric("remex_sessions") == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "sessions were not closed";
  }
};

TEST_F(ServerTest, HelloReportsServerAndDevice) {
  auto s = Connect();
  ASSERT_TRUE(s);
  const auto& info = s->server_info();
  EXPECT_EQ(info.name, "remex-server");
  EXPECT_EQ(info.protocol_major, rpc::kProtocolMajor);
  ASSERT_EQ(info.devices.size(), 1u);
  EXPECT_EQ(info.devices[0].name, "cpu");
  EXPECT_GT(info.devices[0].memory_bytes, 0u);
  EXPECT_TRUE(s->Ping().ok());
}

TEST_F(ServerTest, RunsModelAndKeepsOutputsOnServerUntilRead) {
  ExpectServing();
  auto s = Connect();
  auto module = s->LoadModule(Compile(AddReluModel()), "add_relu");
  ASSERT_TRUE(module.ok());
  ASSERT_EQ(module->functions.size(), 1u);
  EXPECT_EQ(module->functions[0].inputs[0].shape, (Shape{-1, 4}));
  auto vm = s->CreateVm(module->handle);
  ASSERT_TRUE(vm.ok());
  // Dynamic batch: two calls of different shapes on one executable.
  for (int64_t rows : {1, 3}) {
    std::vector<float> x(rows * 4, 2.0f);
    auto in = s->Upload(Floats({rows, 4}, x));
    ASSERT_TRUE(in.ok());
    ASSERT_TRUE(s->SetInputs(*vm, "main", {in->handle}).ok());
    uint64_t received = s->bytes_received();
    auto out = s->Invoke(*vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->outputs[0].shape, (Shape{rows, 4}));
    EXPECT_EQ(out->outputs[0].dtype, DType::kFloat32);
    // The invoke reply carries handles and shapes, never the data.
    EXPECT_LT(s->bytes_received() - received, 256u);
    auto y = s->Download(out->outputs[0].handle);
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(y->shape, (Shape{rows, 4}));
    EXPECT_FLOAT_EQ(ToFloats(*y)[0], 2.5f);
    EXPECT_FLOAT_EQ(ToFloats(*y)[3], 1.0f);
  }
}

TEST_F(ServerTest, SetOutputWritesIntoBoundBuffer) {
  auto s = Connect();
  auto module = s->LoadModule(Compile(AddReluModel()), "add_relu");
  auto vm = s->CreateVm(module->handle);
  auto bound = s->Alloc(DType::kFloat32, {2, 4});
  ASSERT_TRUE(bound.ok());
  ASSERT_TRUE(s->SetOutput(*vm, "main", 0, bound->handle).ok());
  auto in = s->Upload(Floats({2, 4}, std::vector<float>(8, 1.0f)));
  ASSERT_TRUE(s->SetInputs(*vm, "main", {in->handle}).ok());
  auto out = s->Invoke(*vm, "main");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->outputs[0].handle, bound->handle);
  auto y = s->Download(bound->handle);
  EXPECT_FLOAT_EQ(ToFloats(*y)[0], 1.5f);
  // A bound buffer of the wrong shape for this call's output is a clear error.
  auto small = s->Upload(Floats({1, 4}, std::vector<float>(4, 1.0f)));
  ASSERT_TRUE(s->SetInputs(*vm, "main", {small->handle}).ok());
  auto mismatch = s->Invoke(*vm, "main");
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("bound to output 'y'"), std::string::npos);
  // Wrong dtype at bind time.
  auto ints = s->Alloc(DType::kInt64, {2, 4});
  EXPECT_EQ(s->SetOutput(*vm, "main", 0, ints->handle).code(), StatusCode::kInvalidArgument);
}

TEST_F(ServerTest, UnknownAndFreedHandlesAreNotFound) {
  auto s = Connect();
  auto t = s->Upload(Floats({2}, {1, 2}));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(s->Free({t->handle}).ok());
  auto freed = s->Download(t->handle);
  EXPECT_EQ(freed.status().code(), StatusCode::kNotFound);
  EXPECT_NE(freed.status().message().find(std::to_string(t->handle)), std::string::npos);
  EXPECT_EQ(s->Download(987654321).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Free({t->handle}).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->CreateVm(424242).status().code(), StatusCode::kNotFound);
  // A handle of the wrong kind names both kinds.
  auto other = s->Upload(Floats({1}, {1}));
  auto wrong_kind = s->CreateVm(other->handle);
  EXPECT_EQ(wrong_kind.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_kind.status().message().find("is a tensor"), std::string::npos);
  ExpectServing();
}

TEST_F(ServerTest, HandleOfOneSessionIsNotFoundInAnother) {
  auto a = Connect();
  auto b = Connect();
  auto t = a->Upload(Floats({2}, {1, 2}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(b->Download(t->handle).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Free({t->handle}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(a->Download(t->handle).ok());
}

TEST_F(ServerTest, WrongInputShapeOrDtypeIsInvalidArgument) {
  auto s = Connect();
  auto module = s->LoadModule(Compile(AddReluModel()), "add_relu");
  auto vm = s->CreateVm(module->handle);
  auto wrong_shape = s->Upload(Floats({2, 5}, std::vector<float>(10)));
  Status st = s->SetInputs(*vm, "main", {wrong_shape->handle});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 'x'"), std::string::npos) << st.message();
  npy::Array ints;
  ints.dtype = DType::kInt64;
  ints.shape = {1, 4};
  ints.data.resize(32);
  auto wrong_dtype = s->Upload(ints);
  st = s->SetInputs(*vm, "main", {wrong_dtype->handle});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("float32"), std::string::npos) << st.message();
  EXPECT_EQ(s->SetInputs(*vm, "main", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Invoke(*vm, "nope").status().code(), StatusCode::kNotFound);
  // tensorWrite with bytes that do not match the declared shape.
  auto t = s->Alloc(DType::kFloat32, {4});
  std::vector<std::byte> three(12);
  EXPECT_EQ(s->Write(t->handle, DType::kFloat32, {4}, three).code(), StatusCode::kInvalidArgument);
  ExpectServing();
}

TEST_F(ServerTest, TensorLargerThanTheDeviceIsResourceExhausted) {
  auto s = Connect();
  uint64_t memory = s->server_info().devices.at(0).memory_bytes;
  ASSERT_GT(memory, 0u);
  // Twice the device's memory in float32 elements.
  auto t = s->Alloc(DType::kFloat32, {static_cast<int64_t>(memory / 2)});
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted) << t.status().ToString();
  EXPECT_EQ(s->Hello()->devices[0].bytes_in_use, 0u);  // this session holds nothing
  ExpectServing();
}

TEST_F(ServerTest, CorruptExecutableIsRejected) {
  auto s = Connect();
  std::vector<std::byte> exe = Compile(AddReluModel());
  std::vector<std::byte> bad_magic = exe;
  bad_magic[0] = std::byte{'Z'};
  auto r = s->LoadModule(bad_magic, "bad");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
  std::vector<std::byte> truncated(exe.begin(), exe.begin() + exe.size() - 9);
  EXPECT_EQ(s->LoadModule(truncated, "bad").status().code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> garbage(exe.size(), std::byte{0x41});
  EXPECT_FALSE(s->LoadModule(garbage, "bad").ok());
  // Flipped bytes anywhere: an error reply or a module that still verifies, never a crash.
  for (size_t i = 24; i < exe.size(); i += 13) {
    std::vector<std::byte> flipped = exe;
    flipped[i] ^= std::byte{0xa5};
    auto loaded = s->LoadModule(flipped, "flipped");
    if (loaded.ok()) {
      ASSERT_TRUE(s->Free({loaded->handle}).ok());
    }
  }
  ExpectServing();
}

TEST_F(ServerTest, ExecutableWithUnknownOpIsUnimplemented) {
  auto graph = compiler::ImportOnnxBytes(AddReluModel().Bytes(), Registry());
  // Unfused, so that kernel 0 is the node "add".
  auto def = compiler::CompileGraph(std::move(graph).value(), Registry(), remex::testing::WithoutFusion());
  ASSERT_TRUE(def.ok());
  def->kernels[0].op = "FancyNewOp";
  auto bytes = vm::SerializeExecutable(*def);
  auto s = Connect();
  auto r = s->LoadModule(*bytes, "unknown-op");
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("FancyNewOp"), std::string::npos);
  EXPECT_NE(r.status().message().find("node 'add'"), std::string::npos) << r.status().message();
}

TEST_F(ServerTest, GarbageBytesGetAnErrorAndTheServerGoesOn) {
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
  std::string junk(64, 'j');
  asio::write(sock, asio::buffer(junk));
  // The server answers with an error frame, then closes.
  std::vector<std::byte> header(rpc::kFrameHeaderSize);
  boost::system::error_code ec;
  asio::read(sock, asio::buffer(header), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto h = rpc::DecodeFrameHeader(header);
  ASSERT_TRUE(h.ok());
  std::vector<capnp::word> words(h->message_bytes / 8);
  asio::read(sock, asio::buffer(words.data(), h->message_bytes), ec);
  ASSERT_FALSE(ec);
  capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
  Status st = rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  char c;
  asio::read(sock, asio::buffer(&c, 1), ec);
  EXPECT_EQ(ec, asio::error::eof);
  ExpectServing();
}

TEST_F(ServerTest, WrongProtocolVersionIsFailedPrecondition) {
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
  rpc::FrameHeader header;
  header.major = rpc::kProtocolMajor + 1;
  header.request_id = 77;
  auto bytes = rpc::EncodeFrameHeader(header);
  asio::write(sock, asio::buffer(bytes));
  std::vector<std::byte> reply(rpc::kFrameHeaderSize);
  boost::system::error_code ec;
  asio::read(sock, asio::buffer(reply), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto h = rpc::DecodeFrameHeader(reply);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->request_id, 77u);
  std::vector<capnp::word> words(h->message_bytes / 8);
  asio::read(sock, asio::buffer(words.data(), h->message_bytes), ec);
  capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
  Status st = rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find(std::to_string(rpc::kProtocolMajor + 1)), std::string::npos) << st.message();
  ExpectServing();
}

TEST_F(ServerTest, HelloWithWrongMajorIsRefused) {
  auto c = rpc::Client::Connect("127.0.0.1", server_.port(), std::chrono::seconds(10));
  ASSERT_TRUE(c.ok());
  rpc::OutFrame frame;
  frame.message = std::make_unique<capnp::MallocMessageBuilder>();
  auto hello = frame.message->initRoot<rpc::wire::Request>().initHello();
  hello.setProtocolMajor(rpc::kProtocolMajor + 5);
  auto reply = (*c)->Call(frame);
  ASSERT_TRUE(reply.ok());
  auto reader = reply->Reader();
  Status st = rpc::ErrorFromReply(reader.getRoot<rpc::wire::Reply>());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  // Requests before a successful hello are refused.
  rpc::OutFrame ping;
  ping.message = std::make_unique<capnp::MallocMessageBuilder>();
  ping.message->initRoot<rpc::wire::Request>().initPing().setPayload(1);
  auto pong = (*c)->Call(ping);
  ASSERT_TRUE(pong.ok());
  auto pong_reader = pong->Reader();
  EXPECT_EQ(rpc::ErrorFromReply(pong_reader.getRoot<rpc::wire::Reply>()).code(), StatusCode::kFailedPrecondition);
}

// Valid request frames with random bytes flipped, each on its own connection after a
// valid hello: every one gets an answer or a closed connection, never a dead server.
TEST_F(ServerTest, MutatedFramesNeverStopTheServer) {
  std::vector<std::byte> exe = Compile(AddReluModel());
  std::vector<float> x(8, 1.5f);
  auto encode = [](std::function<void(rpc::wire::Request::Builder)> fill, const void* attachment = nullptr,
                   size_t size = 0, uint8_t element_size = 0) {
    rpc::OutFrame frame;
    frame.request_id = 9;
    frame.message = std::make_unique<capnp::MallocMessageBuilder>();
    fill(frame.message->initRoot<rpc::wire::Request>());
    if (attachment) frame.attachments.push_back({attachment, size, true, nullptr, element_size});
    rpc::EncodeOptions options;
    auto encoded = rpc::EncodeFrame(frame, options);
    EXPECT_TRUE(encoded.ok());
    return rpc::Flatten(*encoded);
  };
  std::vector<std::vector<std::byte>> frames = {
      encode([](auto r) { r.initHello().setProtocolMajor(rpc::kProtocolMajor); }),
      encode([](auto r) { r.initModuleLoad().setName("m"); }, exe.data(), exe.size()),
      encode(
          [](auto r) {
            auto w = r.initTensorWrite();
            w.initDesc().setDtype(1);
            w.getDesc().initShape(2).set(0, 2);
            w.getDesc().getShape().set(1, 4);
          },
          x.data(), x.size() * 4, 4),
      encode([](auto r) { r.initInvoke().setVm(1); }),
      encode([](auto r) { r.initFree().initHandles(2).set(0, 5); }),
  };
  const std::vector<std::byte>& hello = frames[0];
  std::mt19937 rng(1234);
  for (int i = 0; i < 150; ++i) {
    std::vector<std::byte> frame = frames[rng() % frames.size()];
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) frame[rng() % frame.size()] ^= std::byte(1 + rng() % 255);
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    boost::system::error_code ec;
    asio::write(sock, asio::buffer(hello), ec);
    asio::write(sock, asio::buffer(frame), ec);
    sock.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    std::vector<char> sink(1 << 16);
    while (!ec) sock.read_some(asio::buffer(sink), ec);  // until the server closes
    if (i % 50 == 49) ExpectServing();
  }
  ExpectServing();
}

TEST_F(ServerTest, DisconnectMidUploadLeavesNothingAllocated) {
  uint64_t baseline = BytesInUse();
  {
    // A tensorWrite frame that promises 32 MiB and delivers 1 MiB, then hangs up.
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), server_.port()});
    rpc::OutFrame hello;
    capnp::MallocMessageBuilder hello_msg;
    auto h = hello_msg.initRoot<rpc::wire::Request>().initHello();
    h.setProtocolMajor(rpc::kProtocolMajor);
    auto hello_words = capnp::messageToFlatArray(hello_msg);
    rpc::FrameHeader fh;
    fh.request_id = 1;
    fh.message_bytes = static_cast<uint32_t>(hello_words.asBytes().size());
    asio::write(sock, asio::buffer(rpc::EncodeFrameHeader(fh)));
    asio::write(sock, asio::buffer(hello_words.asBytes().begin(), hello_words.asBytes().size()));

    capnp::MallocMessageBuilder msg;
    auto w = msg.initRoot<rpc::wire::Request>().initTensorWrite();
    w.initDesc().setDtype(1);
    w.getDesc().initShape(1).set(0, 8 << 20);
    auto words = capnp::messageToFlatArray(msg);
    fh.request_id = 2;
    fh.message_bytes = static_cast<uint32_t>(words.asBytes().size());
    fh.attachment_count = 1;
    asio::write(sock, asio::buffer(rpc::EncodeFrameHeader(fh)));
    asio::write(sock, asio::buffer(words.asBytes().begin(), words.asBytes().size()));
    rpc::AttachmentHeader ah;
    ah.raw_size = ah.wire_size = 32u << 20;
    asio::write(sock, asio::buffer(rpc::EncodeAttachmentHeader(ah)));
    std::vector<char> part(1 << 20, 'x');
    asio::write(sock, asio::buffer(part));
  }
  {
    // A session that allocates and uploads, then disconnects without freeing.
    auto s = Connect();
    ASSERT_TRUE(s->Upload(Floats({1 << 20}, std::vector<float>(1 << 20, 1.0f))).ok());
    ASSERT_TRUE(s->Alloc(DType::kFloat32, {4 << 20}).ok());
    auto module = s->LoadModule(Compile(AddReluModel()), "m");
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    ASSERT_TRUE(s->CreateVm(module->handle).ok());
    EXPECT_GT(s->Hello()->devices[0].bytes_in_use, 0u);  // this session's own bytes
    EXPECT_GT(BytesInUse(), baseline);
  }
  WaitForSessionsToClose();
  EXPECT_EQ(BytesInUse(), baseline);
  ExpectServing();
}

TEST_F(ServerTest, ManySessionsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto s = Session::Connect("127.0.0.1", server_.port());
      if (!s.ok()) return;
      auto module = (*s)->LoadModule(Compile(AddReluModel()), "m");
      auto vm = (*s)->CreateVm(module->handle);
      auto x = (*s)->Upload(Floats({1, 4}, std::vector<float>(4, static_cast<float>(i))));
      if (!vm.ok() || !x.ok() || !(*s)->SetInputs(*vm, "main", {x->handle}).ok()) return;
      auto out = (*s)->Invoke(*vm, "main");
      if (!out.ok()) return;
      auto y = (*s)->Download(out->outputs[0].handle);
      if (y.ok() && ToFloats(*y)[0] == static_cast<float>(i) + 0.5f) ok++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
}

// The CLI against this server: --fetch none keeps outputs on the server.
TEST_F(ServerTest, CliFetchNoneMovesNoOutputBytes) {
  std::string dir = ::testing::TempDir() + "/remex_cli_fetch";
  std::filesystem::create_directories(dir);
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 16, 128, 128})
      .Output("y", onnx::TensorProto::FLOAT, {1, 16, 128, 128});
  b.Node("Relu", {"x"}, {"y"});
  ASSERT_TRUE(b.Save(dir + "/relu.onnx"));
  auto run = [&](const std::string& fetch) {
    auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + dir + "/relu.onnx --server " + server_.address() +
                        " --fetch " + fetch + " --output-dir " + dir + "/out_" + fetch + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  };
  auto none = run("none");
  auto all = run("all");
  EXPECT_FALSE(none["outputs"][0]["fetched"].get<bool>());
  EXPECT_TRUE(all["outputs"][0]["fetched"].get<bool>());
  EXPECT_EQ(none["outputs"][0]["shape"], nlohmann::json({1, 16, 128, 128}));
  EXPECT_EQ(none["outputs"][0]["dtype"], "float32");
  uint64_t output_bytes = 16 * 128 * 128 * 4;
  uint64_t received_none = none["bytes"]["received"].get<uint64_t>();
  uint64_t received_all = all["bytes"]["received"].get<uint64_t>();
  EXPECT_LT(received_none, 8192u);                    // handles and shapes only
  EXPECT_GT(received_all, received_none + output_bytes / 4);  // the data (zstd of Relu output)
  EXPECT_FALSE(std::filesystem::exists(dir + "/out_none/y.npy"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/out_all/y.npy"));
  for (const char* key : {"compile", "upload", "run", "fetch"}) {
    EXPECT_GE(none["times_ms"][key].get<double>(), 0.0) << key;
  }
}

TEST(CliTest, UnsupportedOpIsNamedWithItsNode) {
  std::string dir = ::testing::TempDir() + "/remex_cli_unsupported";
  std::filesystem::create_directories(dir);
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", onnx::TensorProto::FLOAT, {2});
  b.Node("NotAnOnnxOp", {"x"}, {"y"}, "odd_node");
  ASSERT_TRUE(b.Save(dir + "/odd.onnx"));
  auto r = RunCommand(std::string(REMEX_CLI_BIN) + " compile " + dir + "/odd.onnx -o " + dir + "/odd.rmx 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("UNIMPLEMENTED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'NotAnOnnxOp'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'odd_node'"), std::string::npos) << r.output;
}

TEST(CliTest, EmbeddedServerRunsWithoutServerFlag) {
  std::string dir = ::testing::TempDir() + "/remex_cli_embedded";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(AddReluModel().Save(dir + "/m.onnx"));
  auto r = RunCommand(std::string(REMEX_CLI_BIN) + " run " + dir + "/m.onnx --shape x=2x4 --seed 3 --json --output-dir " +
                      dir + "/out --save-inputs");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_NE(j["server"].get<std::string>().find("embedded"), std::string::npos);
  auto x = npy::Read(dir + "/out/inputs/x.npy");
  auto y = npy::Read(dir + "/out/y.npy");
  ASSERT_TRUE(x.ok() && y.ok());
  auto xv = ToFloats(*x), yv = ToFloats(*y);
  const float b[4] = {0.5f, -0.5f, 1.0f, -1.0f};
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(yv[i], std::max(0.0f, xv[i] + b[i % 4]));
}

// ---------------------------------------------------------------------------------------
// remex-server's command line and log.

// Threads of process `pid` (its /proc/PID/task entries).
int ThreadCount(pid_t pid) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// y = Conv(x, w): x float32 [1, 32, 56, 56], w [32, 32, 3, 3], pads 1: a oneDNN kernel
// large enough to be split over every compute thread.
OnnxModelBuilder ConvModel() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 32, 56, 56}).Output("y", onnx::TensorProto::FLOAT, {1, 32, 56, 56});
  std::vector<float> w(32 * 32 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.01f;
  b.FloatInit("w", {32, 32, 3, 3}, w);
  auto* conv = b.Node("Conv", {"x", "w"}, {"y"}, "conv");
  OnnxModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  return b;
}

// The log file's lines that contain every one of `parts`.
std::vector<std::string> LogLines(const std::string& path, const std::vector<std::string>& parts) {
  std::ifstream in(path);
  std::vector<std::string> found;
  std::string line;
  while (std::getline(in, line)) {
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) found.push_back(line);
  }
  return found;
}

TEST(ServerCliTest, ThreadsSetsTheComputeThreadsOfTheCpuDevice) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE("--threads " + std::to_string(threads));
    remex::testing::ServerProcess server(std::vector<std::string>{"--threads", std::to_string(threads)});
    ASSERT_NE(server.port(), 0) << "remex-server did not start";
    const std::string named = ", " + std::to_string(threads) + " compute threads";
    EXPECT_NE(server.banner().find(named), std::string::npos) << server.banner();
    auto s = client::Session::Connect("127.0.0.1", server.port());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ((*s)->server_info().devices.size(), 1u);
    EXPECT_NE((*s)->server_info().devices[0].description.find(named), std::string::npos)
        << (*s)->server_info().devices[0].description;

    // The setting reaches the thread that runs the kernels: the first oneDNN kernel
    // starts an OpenMP team of `threads` (the device thread and threads - 1 more), and
    // no other thread appears.
    const int before = ThreadCount(server.pid());
    auto module = (*s)->LoadModule(Compile(ConvModel()), "conv");
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    auto vm = (*s)->CreateVm(module->handle);
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    std::vector<float> x(32 * 56 * 56, 0.5f);
    auto input = (*s)->Upload(Floats({1, 32, 56, 56}, x));
    ASSERT_TRUE(input.ok());
    ASSERT_TRUE((*s)->SetInputs(*vm, "main", {input->handle}).ok());
    auto out = (*s)->Invoke(*vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(ThreadCount(server.pid()) - before, threads - 1);
    auto y = (*s)->Download(out->outputs[0].handle);
    ASSERT_TRUE(y.ok());
    // An interior point sees all 3x3x32 weights: 0.5 * sum(w over one output channel).
    const std::vector<float> yv = ToFloats(*y);
    float expected = 0;
    for (int i = 0; i < 32 * 9; ++i) expected += 0.5f * static_cast<float>(i % 7) * 0.01f;
    EXPECT_NEAR(yv[56 + 1], expected, 1e-3f);
  }
}

TEST(ServerCliTest, ThreadsOutOfRangeIsAUsageError) {
  const std::string server = REMEX_SERVER_BIN;
  for (const char* value : {"0", "1025", "-2", "many"}) {
    auto r = RunCommand(server + " --listen 127.0.0.1:0 --threads " + value + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << value << ": " << r.output;
    EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
    if (std::string(value) != "many") {
      EXPECT_NE(r.output.find("1024"), std::string::npos) << r.output;
    }
  }
  // The CPU device's setting: a GPU device refuses it before looking for a GPU.
  auto r = RunCommand(server + " --listen 127.0.0.1:0 --device cuda:0 --threads 2 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--threads sets the compute threads of the cpu device"), std::string::npos) << r.output;
  // Any other usage error exits 2 as well.
  r = RunCommand(server + " --no-such-flag 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--no-such-flag"), std::string::npos) << r.output;
}

TEST(ServerCliTest, VersionIsTheProjectVersion) {
  auto r = RunCommand(std::string(REMEX_SERVER_BIN) + " --version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, std::string("remex-server ") + REMEX_VERSION + "\n");
  remex::testing::ServerProcess server;
  auto s = client::Session::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->server_info().version, REMEX_VERSION);
}

TEST(ServerLogTest, RefusedRequestsAndProtocolErrorsAreLoggedOnce) {
  const std::string log = ::testing::TempDir() + "/remex_server_refusals.log";
  std::filesystem::remove(log);
  auto server = remex::testing::ServerProcess::Logging(log);
  ASSERT_NE(server->port(), 0) << "remex-server did not start";

  // A request the session refuses: tensorRead of a handle it never issued.
  remex::testing::RawConnection raw(server->port());
  capnp::MallocMessageBuilder msg;
  msg.initRoot<rpc::wire::Request>().initTensorRead().setTensor(4242);
  raw.WriteMessage(msg, 7, 0);
  Status refused = raw.ReadReply();
  ASSERT_EQ(refused.code(), StatusCode::kNotFound) << refused.ToString();

  // A protocol error: a frame with bad magic, answered and then closed by the transport.
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), server->port()});
  const std::string junk_peer =
      sock.local_endpoint().address().to_string() + ":" + std::to_string(sock.local_endpoint().port());
  asio::write(sock, asio::buffer(std::string(64, 'j')));
  std::vector<char> sink(4096);
  boost::system::error_code ec;
  while (!ec) sock.read_some(asio::buffer(sink), ec);  // the error reply, then EOF
  EXPECT_EQ(ec, asio::error::eof);

  // Each reply is sent after its line is written.
  auto request_lines = LogLines(log, {"[info]", raw.local_address(), "tensorRead request 7", "NOT_FOUND", "handle 4242"});
  EXPECT_EQ(request_lines.size(), 1u) << "log:\n" << std::ifstream(log).rdbuf();
  auto protocol_lines = LogLines(log, {"[info]", junk_peer, "frame header refused", "INVALID_ARGUMENT",
                                       "closing the connection"});
  EXPECT_EQ(protocol_lines.size(), 1u) << "log:\n" << std::ifstream(log).rdbuf();
  // No other line names either event. (The handle is matched with its word: a bare "4242"
  // can also be part of a peer's port or a session id.)
  EXPECT_EQ(LogLines(log, {"handle 4242"}).size(), 1u) << "log:\n" << std::ifstream(log).rdbuf();
  EXPECT_EQ(LogLines(log, {junk_peer, "INVALID_ARGUMENT"}).size(), 1u);
}

}  // namespace
}  // namespace remex
