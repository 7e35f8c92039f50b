// Shared helpers of the server-level tests: a fixture with a remex-server of its own,
// compiling an in-memory ONNX model to .rmx bytes, the AddRelu and spin-loop test
// models and float32 arrays.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/client/npy.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "kernels/kernels.h"
#include "tests/process_util.h"
#include "vm/executable.h"

namespace remex::testing {

// A test with a remex-server process of its own (started with the fixture, on an
// ephemeral loopback port, stopped after the test) and client sessions to it.
class ServerSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(server_.port(), 0) << "remex-server did not start"; }

  // A new session to the server (or to the server on 127.0.0.1:`port`, when nonzero); a
  // failure is a test failure and yields null.
  std::unique_ptr<client::Session> Connect(uint16_t port = 0) {
    auto s = client::Session::Connect("127.0.0.1", port ? port : server_.port());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  ServerProcess server_;
};

// Compiles `model` (all passes, unless `options` turns some off) and serializes it; a
// failure is a test failure and yields no bytes.
inline std::vector<std::byte> Compile(const OnnxModelBuilder& model, const compiler::CompileOptions& options = {}) {
  auto graph = compiler::ImportOnnxBytes(model.Bytes(), Registry());
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return {};
  auto def = compiler::CompileGraph(std::move(graph).value(), Registry(), options);
  EXPECT_TRUE(def.ok()) << def.status().ToString();
  if (!def.ok()) return {};
  auto bytes = vm::SerializeExecutable(*def);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<std::byte>{};
}

// y = Relu(x + b), x: float32 [?, 4], b = [0.5, -0.5, 1, -1]; nodes "add" and "relu"
// (one FusedElementwise kernel "add+relu" unless fusion is turned off).
inline OnnxModelBuilder AddReluModel() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", onnx::TensorProto::FLOAT, {-1, 4});
  b.FloatInit("b", {4}, {0.5f, -0.5f, 1.0f, -1.0f});
  b.Node("Add", {"x", "b"}, {"s"}, "add");
  b.Node("Relu", {"s"}, {"y"}, "relu");
  return b;
}

// Compile options that keep every node a kernel of its own.
inline compiler::CompileOptions WithoutFusion() {
  compiler::CompileOptions options;
  options.fuse_elementwise = false;
  return options;
}

inline npy::Array Floats(Shape shape, const std::vector<float>& v) {
  npy::Array a;
  a.dtype = DType::kFloat32;
  a.shape = std::move(shape);
  a.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

// `n` float32 values from a linear congruential generator seeded with `seed`: data
// that zstd barely compresses (upload tests that must not be compressible).
inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>((seed = seed * 1664525u + 1013904223u) >> 8);
  return values;
}

// A new session to `server` with requests bounded by `timeout`; nullptr (and a test
// failure) when it cannot connect.
inline std::unique_ptr<client::Session> ConnectTo(const ServerProcess& server,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  client::ConnectOptions options;
  options.timeout = timeout;
  auto s = client::Session::Connect("127.0.0.1", server.port(), options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Polls `condition` every 10 ms until it holds; false when it still does not after
// `limit` (servers end sessions and free memory asynchronously).
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline std::vector<float> ToFloats(const npy::Array& a) {
  std::vector<float> v(a.data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// Loads AddReluModel on `s`, runs it on one input and checks the output: the server
// behind `s` still serves. Failures are test failures.
inline void ExpectServesAddRelu(client::Session& s) {
  auto module = s.LoadModule(Compile(AddReluModel()), "add_relu");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto vm = s.CreateVm(module->handle);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto x = s.Upload(Floats({1, 4}, {1, 1, -3, 3}));
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(s.SetInputs(*vm, "main", {x->handle}).ok());
  auto out = s.Invoke(*vm, "main");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto y = s.Download(out->outputs[0].handle);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(ToFloats(*y), (std::vector<float>{1.5f, 0.5f, 0.0f, 2.0f}));
}

// v_final = x * (trip count + 1), by an ONNX Loop (opset 13) whose body adds x to the
// carried value: Loop(m, true, x), body (i, c, v) -> (c, v + x). With a huge m it spins
// for as long as nobody stops it, holding only two floats.
inline OnnxModelBuilder SpinLoopModel() {
  OnnxModelBuilder b(13);
  b.Input("m", onnx::TensorProto::INT64, {}).Input("x", onnx::TensorProto::FLOAT, {2});
  b.Output("v_final", onnx::TensorProto::FLOAT, {2});
  auto* t = b.Node("Constant", {}, {"true"});
  auto* a = t->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->add_int32_data(1);
  onnx::GraphProto body;
  auto info = [](onnx::ValueInfoProto* v, const std::string& name, int type, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = body.add_node();
    n->set_op_type(op);
    n->set_name(out[0]);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
  };
  info(body.add_input(), "i", onnx::TensorProto::INT64, {});
  info(body.add_input(), "c", onnx::TensorProto::BOOL, {});
  info(body.add_input(), "v", onnx::TensorProto::FLOAT, {2});
  node("Identity", {"c"}, {"c_out"});
  node("Add", {"v", "x"}, {"v_out"});
  info(body.add_output(), "c_out", onnx::TensorProto::BOOL, {});
  info(body.add_output(), "v_out", onnx::TensorProto::FLOAT, {2});
  auto* loop = b.Node("Loop", {"m", "true", "x"}, {"v_final"});
  auto* g = loop->add_attribute();
  g->set_name("body");
  g->set_type(onnx::AttributeProto::GRAPH);
  *g->mutable_g() = body;
  return b;
}

// A session with the spin loop loaded and its inputs bound (StartSpin).
struct SpinSession {
  std::unique_ptr<client::Session> session;
  uint64_t vm = 0;
};

// A new session to `server` (connect and request timeout `timeout`) with the spin loop
// loaded and its inputs bound: m = `trips`, x = [1, 2]. Failures are test failures and
// leave `vm` 0.
inline SpinSession StartSpin(const ServerProcess& server, int64_t trips,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  SpinSession s;
  client::ConnectOptions options;
  options.timeout = timeout;
  auto connected = client::Session::Connect("127.0.0.1", server.port(), options);
  EXPECT_TRUE(connected.ok()) << connected.status().ToString();
  if (!connected.ok()) return s;
  s.session = std::move(connected).value();
  auto module = s.session->LoadModule(Compile(SpinLoopModel()), "spin");
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return s;
  auto vm = s.session->CreateVm(module->handle);
  EXPECT_TRUE(vm.ok()) << vm.status().ToString();
  if (!vm.ok()) return s;
  npy::Array m;
  m.dtype = DType::kInt64;
  m.shape = {};
  m.data.resize(8);
  std::memcpy(m.data.data(), &trips, 8);
  auto mt = s.session->Upload(m);
  auto x = s.session->Upload(Floats({2}, {1, 2}));
  EXPECT_TRUE(mt.ok() && x.ok());
  if (!mt.ok() || !x.ok()) return s;
  EXPECT_TRUE(s.session->SetInputs(*vm, "main", {mt->handle, x->handle}).ok());
  s.vm = *vm;
  return s;
}

// A trip count no run reaches.
inline constexpr int64_t kForever = int64_t{1} << 62;

}  // namespace remex::testing
