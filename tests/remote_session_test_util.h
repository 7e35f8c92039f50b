// What the remote session tests share (remote_session_test.cc,
// remote_session_outputs_test.cc): a recurrent model and the fixture loading VMs.
#pragma once

#include <cstdint>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_test_util.h"
#include "tests/model_util.h"

namespace remex::testing {

// y = x + 1, x: float32 [4] (a recurrent step).
inline OnnxModelBuilder PlusOneModel() {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", onnx::TensorProto::FLOAT, {4});
  b.FloatInit("one", {4}, {1, 1, 1, 1});
  b.Node("Add", {"x", "one"}, {"y"}, "add");
  return b;
}

class RemoteSessionTest : public remex::testing::ServerSessionTest {
 protected:
  // Loads `model`, creates a VM and returns its handle.
  uint64_t LoadVm(client::Session& s, const OnnxModelBuilder& model, const compiler::CompileOptions& options = {}) {
    auto module = s.LoadModule(Compile(model, options), "m");
    EXPECT_TRUE(module.ok()) << module.status().ToString();
    if (!module.ok()) return 0;
    auto vm = s.CreateVm(module->handle);
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    return vm.ok() ? *vm : 0;
  }
};

}  // namespace remex::testing
