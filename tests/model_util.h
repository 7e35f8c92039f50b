// Shared helpers of the server-level tests: a fixture with a remex-server of its own,
// compiling an in-memory ONNX model to .rmx bytes, the AddRelu test model and float32
// arrays.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "host_client/client.h"
#include "host_client/compiler.h"
#include "host_client/npy.h"
#include "host_client/onnx_frontend.h"
#include "host_client/onnx_test_util.h"
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

}  // namespace remex::testing
