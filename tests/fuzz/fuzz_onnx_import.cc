// Fuzz target: the ONNX importer (host_client/compiler/onnx_import.h) and the compiler behind it.
//
// The input is an ONNX model (a serialized ModelProto). ImportOnnxBytes parses it;
// a graph it accepts is compiled without constant folding (folding evaluates the
// model's own constants, whose declared sizes a hostile file chooses) and the result
// is checked by the executable verifier. The compiler's promise: whatever it emits
// verifies, so "compiled but the verifier refuses it" is a finding (the target traps),
// as is any crash or sanitizer report. Import and compile errors are expected.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>

#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace {

const remex::kernels::KernelRegistry& Registry() {
  static const remex::kernels::KernelRegistry* registry = [] {
    auto r = remex::kernels::CreateCpuRegistry();
    if (!r.ok()) __builtin_trap();
    return r->release();
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& registry = Registry();
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto graph = remex::compiler::ImportOnnxBytes(bytes, registry);
  if (!graph.ok()) return 0;
  remex::compiler::CompileOptions options;
  options.fold_constants = false;
  auto def = remex::compiler::CompileGraph(*std::move(graph), registry, options);
  if (!def.ok()) return 0;
  auto executable = remex::vm::Executable::FromDef(*std::move(def), registry);
  if (!executable.ok()) {
    std::fprintf(stderr, "the compiler emitted an executable the verifier refuses: %s\n",
                 executable.status().ToString().c_str());
    __builtin_trap();
  }
  return 0;
}
