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
};
StatusOr<LoadedExecutable> LoadExecutable(const std::string& model, const compiler::CompileOptions& options,
                                          bool changes_compilation);

// "x: float32 [N, 3, 48, W]".
std::string DescribeValue(const vm::ValueDesc& v);

}  // namespace remex::tooling
