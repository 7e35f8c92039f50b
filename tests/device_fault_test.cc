// Device faults survived: a real remex-server process on loopback per test, whose
// device is made to fault by the test-only --inject-device-fault N (the Nth kernel
// launch fails as one that hit an illegal address would, and the device stays faulted
// until it is reset). Each test checks that the run meeting the fault fails naming
// it, that every other session is closed with that reason, that everything the
// sessions held is released, that the device is reset once, and that a new session is
// served correctly afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "host_client/client/client.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/raw_connection.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::ConnectTo;
using remex::testing::Compile;
using remex::testing::Eventually;
using remex::testing::Floats;
using remex::testing::kForever;
using remex::testing::RawConnection;
using remex::testing::ServerProcess;
using remex::testing::SpinSession;
using remex::testing::StartSpin;
using namespace std::chrono_literals;

// The error of a request met by (or closed by) the device fault: ABORTED, naming the
// fault and what the server did.
void ExpectDeviceFaultError(const Status& status) {
  EXPECT_EQ(status.code(), StatusCode::kAborted) << status.ToString();
  EXPECT_NE(status.message().find("cpu: device fault: injected"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("closed every session on cpu and resets the device"), std::string::npos)
      << status.ToString();
}

// After the reset: one fault, one reset, nothing held, ready, and a new session serves.
void ExpectRecovered(const ServerProcess& server) {
  ASSERT_TRUE(Eventually([&] { return server.Metric("remex_device_resets_total{device=\"cpu\"}") == 1; }))
      << "the device was not reset";
  EXPECT_EQ(server.Metric("remex_device_faults_total{device=\"cpu\"}"), 1);
  EXPECT_EQ(server.Metric("remex_device_faulted{device=\"cpu\"}"), 0);
  // The closed sessions are still connected, but hold nothing.
  EXPECT_EQ(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), 0);
  EXPECT_EQ(server.Metric("remex_device_memory_reserved_bytes{device=\"cpu\"}"), 0);
  EXPECT_EQ(server.HttpGet("/readyz"), (std::pair<int, std::string>{200, "ready\n"}));
  EXPECT_EQ(server.HttpGet("/healthz").first, 200);
  auto fresh = ConnectTo(server);
  ASSERT_TRUE(fresh);
  remex::testing::ExpectServesAddRelu(*fresh);
  EXPECT_EQ(server.Metric("remex_device_resets_total{device=\"cpu\"}"), 1);
}

// A session with AddRelu loaded and an input bound; its VM handle.
struct AddReluSession {
  std::unique_ptr<Session> session;
  uint64_t vm = 0;
};

AddReluSession LoadAddRelu(const ServerProcess& server) {
  AddReluSession s;
  s.session = ConnectTo(server);
  if (!s.session) return s;
  auto module = s.session->LoadModule(Compile(AddReluModel()), "add_relu");
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return s;
  auto vm = s.session->CreateVm(module->handle);
  EXPECT_TRUE(vm.ok()) << vm.status().ToString();
  if (!vm.ok()) return s;
  auto x = s.session->Upload(Floats({1, 4}, {1, 1, -3, 3}));
  EXPECT_TRUE(x.ok());
  if (!x.ok()) return s;
  EXPECT_TRUE(s.session->SetInputs(*vm, "main", {x->handle}).ok());
  s.vm = *vm;
  return s;
}

TEST(DeviceFaultTest, TheFaultingInvokeFailsEverySessionIsClosedAndTheResetDeviceServesAgain) {
  // AddRelu is one fused kernel: a's invoke is launch 1, b's launch 2.
  ServerProcess server(std::vector<std::string>{"--inject-device-fault", "2"});
  ASSERT_NE(server.port(), 0);
  auto a = LoadAddRelu(server);
  ASSERT_NE(a.vm, 0u);
  auto first = a.session->Invoke(a.vm, "main");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto b = LoadAddRelu(server);
  ASSERT_NE(b.vm, 0u);
  EXPECT_GT(server.Metric("remex_device_memory_bytes{device=\"cpu\"}"), 0);

  auto faulted = b.session->Invoke(b.vm, "main");
  ASSERT_FALSE(faulted.ok());
  ExpectDeviceFaultError(faulted.status());
  // a was idle: closed with the same reason, its objects gone.
  ExpectDeviceFaultError(a.session->Download(first->outputs[0].handle).status());
  ExpectDeviceFaultError(a.session->Ping());
  ExpectDeviceFaultError(b.session->Invoke(b.vm, "main").status());
  ExpectRecovered(server);
  // A closed session stays closed.
  ExpectDeviceFaultError(a.session->Ping());
}

TEST(DeviceFaultTest, RunsInProgressOnOtherSessionsStopWithTheFault) {
  // Two sessions spin, their kernels interleaved by the device worker, until the
  // 20000th launch faults: whichever meets it fails with the fault, and the other
  // (stopped at its next kernel boundary, or refused if its run had not begun) is
  // closed with the same reason.
  ServerProcess server(std::vector<std::string>{"--inject-device-fault", "20000", "--max-invoke-ms", "120000"});
  ASSERT_NE(server.port(), 0);
  SpinSession spins[2] = {StartSpin(server, kForever), StartSpin(server, kForever)};
  ASSERT_NE(spins[0].vm, 0u);
  ASSERT_NE(spins[1].vm, 0u);
  std::future<Status> runs[2];
  for (int i = 0; i < 2; ++i) {
    runs[i] = std::async(std::launch::async, [&spins, i] { return spins[i].session->Invoke(spins[i].vm, "main").status(); });
  }
  for (auto& run : runs) ExpectDeviceFaultError(run.get());
  for (auto& spin : spins) ExpectDeviceFaultError(spin.session->Ping());
  ExpectRecovered(server);
}

TEST(DeviceFaultTest, ReadinessSaysNotReadyUntilTheLastClosedSessionHasReleasedItsMemory) {
  // A session receiving an upload straight into a new tensor (the CPU device) holds it
  // until the frame ends: the reset waits for that, and the server says so meanwhile.
  ServerProcess server(std::vector<std::string>{"--inject-device-fault", "1"});
  ASSERT_NE(server.port(), 0);
  RawConnection upload(server.port());
  rpc::AttachmentHeader ah;
  ah.raw_size = ah.wire_size = 8 << 20;
  upload.BeginTensorWrite(2, 2 << 20, ah);
  std::vector<char> part(1 << 20, 'x');
  upload.WriteBytes(part.data(), part.size());
  ASSERT_TRUE(Eventually([&] { return server.Metric("remex_device_memory_bytes{device=\"cpu\"}") >= (8 << 20); }))
      << "the upload's tensor was not allocated";

  auto b = LoadAddRelu(server);
  ASSERT_NE(b.vm, 0u);
  auto faulted = b.session->Invoke(b.vm, "main");
  ASSERT_FALSE(faulted.ok());
  ExpectDeviceFaultError(faulted.status());
  // The reset waits for the upload: not ready, and new sessions' device requests are
  // refused until it is done (host work, such as loading a module, goes on).
  auto [status, body] = server.HttpGet("/readyz");
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("device fault"), std::string::npos) << body;
  EXPECT_EQ(server.HttpGet("/healthz").first, 200);
  EXPECT_EQ(server.Metric("remex_device_faulted{device=\"cpu\"}"), 1);
  EXPECT_EQ(server.Metric("remex_device_resets_total{device=\"cpu\"}"), 0);
  auto c = ConnectTo(server);
  ASSERT_TRUE(c);
  auto refused = c->Alloc(DType::kFloat32, {4});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("resetting cpu: retry shortly"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(c->LoadModule(Compile(AddReluModel()), "add_relu").ok());

  // The upload ends: its request is answered with the fault, and the reset follows.
  std::vector<char> rest((7 << 20), 'x');
  upload.WriteBytes(rest.data(), rest.size());
  ExpectDeviceFaultError(upload.ReadReply());
  ExpectRecovered(server);
  // The session that connected during the reset is served now.
  EXPECT_TRUE(c->Alloc(DType::kFloat32, {4}).ok());
}

TEST(DeviceFaultTest, WithoutAFaultNothingIsClosedOrReset) {
  ServerProcess server(std::vector<std::string>{"--inject-device-fault", "1000000"});
  ASSERT_NE(server.port(), 0);
  auto a = LoadAddRelu(server);
  ASSERT_NE(a.vm, 0u);
  // Errors that are not device faults leave the session and the device alone.
  EXPECT_EQ(a.session->Free({12345}).code(), StatusCode::kNotFound);
  auto out = a.session->Invoke(a.vm, "main");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(a.session->Download(out->outputs[0].handle).ok());
  EXPECT_EQ(server.Metric("remex_device_faults_total{device=\"cpu\"}"), 0);
  EXPECT_EQ(server.Metric("remex_device_resets_total{device=\"cpu\"}"), 0);
}

}  // namespace
}  // namespace remex
