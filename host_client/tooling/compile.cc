#include "host_client/tooling/compile.h"

#include <chrono>
#include <cstring>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"

namespace remex::tooling {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StatusOr<const kernels::KernelRegistry*> CompilerRegistry() {
  static const auto registry = kernels::CreateCpuRegistry();
  if (!registry.ok()) return registry.status();
  return registry->get();
}

StatusOr<CompileReport> CompileModel(const std::string& onnx_path, const compiler::CompileOptions& options) {
  REMEX_ASSIGN_OR_RETURN(const kernels::KernelRegistry* registry, CompilerRegistry());
  CompileReport report;
  report.model = onnx_path;
  REMEX_ASSIGN_OR_RETURN(compiler::Graph graph,
                         compiler::ImportOnnxFile(onnx_path, *registry, options.input_shapes));
  ModelTraits& traits = report.traits;
  for (const compiler::Value& v : graph.values) traits.has_float16 = traits.has_float16 || v.dtype == DType::kFloat16;
  std::vector<bool> softmax_output(graph.values.size(), false);
  for (const compiler::Node& n : graph.nodes) {
    traits.has_int8_convolutions = traits.has_int8_convolutions || n.op == "QLinearConv" || n.op == "ConvInteger";
    traits.has_float_convolutions = traits.has_float_convolutions || n.op == "Conv";
    if (n.op == "Softmax") {
      for (int o : n.outputs) softmax_output[o] = true;
    }
    if (n.op == "MatMul" && !n.inputs.empty() && n.inputs[0] >= 0 && softmax_output[n.inputs[0]]) {
      traits.has_attention = true;
    }
  }
  report.options = options;
  if (report.options.layout == compiler::Layout::kAuto) report.options.layout = compiler::Layout::kNchw;
  REMEX_RETURN_IF_ERROR(compiler::ResolveSymbolNames(graph, report.options));
  REMEX_ASSIGN_OR_RETURN(report.executable,
                         compiler::CompileGraph(std::move(graph), *registry, report.options, &report.stats));
  REMEX_ASSIGN_OR_RETURN(report.bytes, vm::SerializeExecutable(report.executable));
  for (const auto& k : report.executable.kernels) report.kernels_by_op[k.op + (k.host ? " (host)" : "")]++;
  return report;
}

StatusOr<LoadedExecutable> LoadExecutable(const std::string& model, const compiler::CompileOptions& options,
                                          bool changes_compilation) {
  LoadedExecutable out;
  if (EndsWith(model, ".rmx")) {
    if (changes_compilation) {
      return InvalidArgument("'" + model + "' is compiled already: --bound, --dispatch, --strict, --layout, --dtype "
                             "and --no-fuse-epilogues apply to .onnx models");
    }
    REMEX_ASSIGN_OR_RETURN(out.bytes, ReadFileBytes(model));
    return out;
  }
  const auto start = std::chrono::steady_clock::now();
  REMEX_ASSIGN_OR_RETURN(CompileReport report, CompileModel(model, options));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out.bytes = std::move(report.bytes);
  out.traits = report.traits;
  return out;
}

DeviceCompile CompileForDevice(const client::DeviceInfo* device, const ModelTraits& model,
                               const compiler::CompileOptions& given) {
  DeviceCompile out{given, ""};
  auto add = [&](const std::string& change) { out.changes += (out.changes.empty() ? "" : ", ") + change; };
  const bool cpu = device != nullptr && device->name == "cpu";
  if (given.dtype == DType::kUndefined && model.has_float16 && cpu) {
    out.options.dtype = DType::kFloat32;
    add("in float32 (--dtype float16 keeps float16)");
  }
  if (given.layout == compiler::Layout::kAuto) {
    out.options.layout = compiler::Layout::kNchw;  // as the options given compile
    if (model.has_int8_convolutions && device != nullptr && device->int8_channels_last) {
      out.options.layout = compiler::Layout::kNhwc;
      add("with NHWC activations for its int8 convolutions (--layout NCHW keeps NCHW)");
    } else if (model.has_float_convolutions && device != nullptr && device->float_channels_last) {
      out.options.layout = compiler::Layout::kNhwc;
      add("with NHWC activations for its convolutions (--layout NCHW keeps NCHW)");
    }
  }
  // Attention fused for the CPU device; the CUDA device's FusedAttention kernel is not yet
  // measured on a GPU against the unfused graph (kernels/cuda/README.md).
  if (cpu && model.has_attention && given.fuse_epilogues && !given.fuse_attention) {
    out.options.fuse_attention = true;
    add("with its attention fused (--no-fuse-epilogues keeps it apart)");
  }
  // The CPU device's pooling kernels take NHWC; the CUDA device's do not. A layout
  // resolved to NHWC above compiles again anyway; one given as NHWC compiles again for
  // its float pooling to follow its convolutions (a DenseNet's pools, transposed to NCHW
  // and back around each otherwise).
  out.options.nhwc_pooling = cpu;
  if (cpu && !given.nhwc_pooling && given.layout == compiler::Layout::kNhwc && model.has_float_convolutions) {
    add("with its float pooling NHWC as well");
  }
  return out;
}

std::string DescribeValue(const vm::ValueDesc& v) {
  return v.name + ": " + std::string(DTypeName(v.dtype)) + " " + ShapeToString(v.shape, v.dims);
}

}  // namespace remex::tooling
