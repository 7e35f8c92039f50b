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

namespace remex::client {
struct DeviceInfo;
}  // namespace remex::client

namespace remex::tooling {

// The registry the compiler uses: every op's shape function and CPU kernel (constant
// folding). Built once per process.
StatusOr<const kernels::KernelRegistry*> CompilerRegistry();

// Whole files as bytes (base/file_bytes.h), as the front ends have always named them.
using remex::ReadFileBytes;
using remex::WriteFileBytes;

// What an imported model holds that the device-dependent choices depend on
// (CompileForDevice).
struct ModelTraits {
  bool has_float16 = false;             // float16 tensors
  bool has_int8_convolutions = false;   // QLinearConv or ConvInteger nodes
  bool has_float_convolutions = false;  // Conv nodes (float32 or float16: Conv takes no other dtype)
  bool has_attention = false;           // a Softmax whose output a MatMul reads (attention's shape)
};

// What `remex compile` reports.
struct CompileReport {
  std::string model;                    // the .onnx path
  vm::ExecutableDef executable;         // as compiled (functions, symbols, kernels)
  std::vector<std::byte> bytes;         // serialized (.rmx)
  compiler::CompileStats stats;
  compiler::CompileOptions options;     // with symbol names resolved
  std::map<std::string, int> kernels_by_op;  // "Conv", "Shape (host)" -> count
  ModelTraits traits;                   // of the imported model
};

// Imports and compiles an ONNX model with `options`, and serializes it; a layout left
// to the device (Layout::kAuto) compiles NCHW, as `remex compile`, which knows no
// device, writes it (report.options then says kNchw). Errors of the
// compiler (INVALID_ARGUMENT, UNIMPLEMENTED naming the node or option), NOT_FOUND when
// the file cannot be read.
StatusOr<CompileReport> CompileModel(const std::string& onnx_path, const compiler::CompileOptions& options);

// The executable a run, bench or check uses: an .rmx file read as it is, or an .onnx
// compiled with `options` (exactly as CompileModel). `changes_compilation`: the user
// set compile options beyond --shape; those contradict an .rmx (INVALID_ARGUMENT).
struct LoadedExecutable {
  std::vector<std::byte> bytes;
  double compile_ms = 0;  // 0 for an .rmx
  ModelTraits traits;  // an .onnx's (all false for an .rmx)
};
StatusOr<LoadedExecutable> LoadExecutable(const std::string& model, const compiler::CompileOptions& options,
                                          bool changes_compilation);

// A model's compile for the device it runs on (`device`: the server's DeviceInfo;
// nullptr when the server names none): the choices the user left open, made for it.
// - --dtype not given (kUndefined): float32 for a model with float16 tensors on the CPU
//   device, which has no float16 arithmetic (each float16 kernel would widen its inputs
//   and round its output on every call, and the float32 rewrites would not apply; ONNX
//   Runtime's CPU provider computes such nodes in float32 too:
//   compiler/passes/precision.h, ConvertToFloat32); otherwise the model's own.
// - --layout not given (Layout::kAuto): NHWC for a model with QLinearConv or ConvInteger
//   nodes on a device whose int8 convolutions run channels-last
//   (DeviceInfo::int8_channels_last: the CPU device on a CPU with int8 dot products,
//   VNNI; kernels/ops/quantization/int8_dnnl.h), or with float Conv nodes on a device
//   whose float convolutions do (DeviceInfo::float_channels_last: the CPU device on a
//   CPU with AVX2 or AVX-512), which spares each convolution the reorders of its input and
//   output; otherwise NCHW.
// - nhwc_pooling: on for the CPU device, whose pooling kernels take NHWC (the layout
//   pass then keeps float pooling channels-last too).
// - fuse_attention: on for a model with attention on the CPU device, the one with a
//   FusedAttention kernel (compiler/passes/attention_fusion.h), unless
//   --no-fuse-epilogues.
// The caller compiles again when `changes` is not empty.
struct DeviceCompile {
  compiler::CompileOptions options;  // the options given, those choices made
  // What differs from the executable the options given compile to, for the progress
  // line ("in float32 (--dtype float16 keeps float16)"); empty: nothing does.
  std::string changes;
};
DeviceCompile CompileForDevice(const client::DeviceInfo* device, const ModelTraits& model,
                               const compiler::CompileOptions& given);

// "x: float32 [N, 3, 48, W]".
std::string DescribeValue(const vm::ValueDesc& v);

}  // namespace remex::tooling
