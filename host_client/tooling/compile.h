// Compiling and loading executables, as the front ends do it: one path for
// `remex compile` and for the .onnx models that run, bench and check compile first.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/file_bytes.h"
#include "base/status.h"
#include "host_client/compiler/options.h"
#include "kernels/kernels.h"
#include "vm/executable.h"

namespace remex::tooling {

// The registry the compiler uses: every op's shape function and CPU kernel (constant
// folding). Built once per process.
StatusOr<const kernels::KernelRegistry*> CompilerRegistry();

// Whole files as bytes (base/file_bytes.h), as the front ends have always named them.
using remex::ReadFileBytes;
using remex::WriteFileBytes;

// What `remex compile` reports.
struct CompileReport {
  std::string model;                    // the .onnx path
  vm::ExecutableDef executable;         // as compiled (functions, symbols, kernels)
  std::vector<std::byte> bytes;         // serialized (.rmx)
  compiler::CompileStats stats;
  compiler::CompileOptions options;     // with symbol names resolved
  std::map<std::string, int> kernels_by_op;  // "Conv", "Shape (host)" -> count
  bool has_float16 = false;             // the imported model has float16 tensors
};

// Imports and compiles an ONNX model with `options`, and serializes it. Errors of the
// compiler (INVALID_ARGUMENT, UNIMPLEMENTED naming the node or option), NOT_FOUND when
// the file cannot be read.
StatusOr<CompileReport> CompileModel(const std::string& onnx_path, const compiler::CompileOptions& options);

// The executable a run, bench or check uses: an .rmx file read as it is, or an .onnx
// compiled with `options` (exactly as CompileModel). `changes_compilation`: the user
// set compile options beyond --shape; those contradict an .rmx (INVALID_ARGUMENT).
struct LoadedExecutable {
  std::vector<std::byte> bytes;
  double compile_ms = 0;  // 0 for an .rmx
  bool has_float16 = false;  // an .onnx with float16 tensors (false for an .rmx)
};
StatusOr<LoadedExecutable> LoadExecutable(const std::string& model, const compiler::CompileOptions& options,
                                          bool changes_compilation);

// The --dtype a model is compiled with for the device it runs on (`device`: the
// server's DeviceInfo name, "cpu", "cuda:0") when the user gave none (`given`
// kUndefined): float32 for a model with float16 tensors on the CPU device, which has no
// float16 arithmetic (each float16 kernel would widen its inputs and round its output
// on every call, and the float32 rewrites would not apply; ONNX Runtime's CPU provider
// computes such nodes in float32 too: compiler/passes/precision.h, ConvertToFloat32);
// otherwise `given` (kUndefined: the model's own).
DType CompileDTypeFor(const std::string& device, bool has_float16, DType given);

// "x: float32 [N, 3, 48, W]".
std::string DescribeValue(const vm::ValueDesc& v);

}  // namespace remex::tooling
