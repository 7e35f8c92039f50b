// ONNX frontend: an ONNX ModelProto (libonnx protobuf) to the graph IR.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

// The ops of the default domain that the importer reads without a registry entry of
// their own, and how: "constant" (Constant), "VM control flow" (If, Loop), "lowered to
// Loop" (Scan, onnx_scan.h), "as Resize-10" (Upsample). Empty for every other op.
std::string_view ImportedWithoutEntry(std::string_view op);

// Reads an ONNX model (opsets 7-17 of the default domain) into a Graph.
// Initializers and Constant nodes become constants; each node is bound to the registry
// entry of its op covering the model's opset (Node::version), after the older forms of
// Clip and Slice are rewritten into the newer definition (see kernels/kernels.h).
// Graph input shapes come from the model (dim_param and missing dims are -1) unless
// `input_shapes` overrides them (rank and static dims must agree with the model's).
// Errors: NOT_FOUND (file), INVALID_ARGUMENT (not an ONNX model, malformed tensors,
// shape override mismatch), UNIMPLEMENTED naming the op and node for an op Remex
// does not run or an opset none of its entries covers (the message names the opset and
// the opsets supported), or an unsupported opset / data type / external data.
StatusOr<Graph> ImportOnnxFile(const std::string& path, const kernels::KernelRegistry& registry,
                               const std::map<std::string, Shape>& input_shapes = {});
StatusOr<Graph> ImportOnnxBytes(std::span<const std::byte> bytes,
                                const kernels::KernelRegistry& registry,
                                const std::map<std::string, Shape>& input_shapes = {});

// Converts an ONNX TensorProto to a constant (raw_data or typed fields).
// Exposed for the conformance runner, which reads ONNX's .pb test tensors.
StatusOr<vm::ConstantDef> TensorFromProtoBytes(std::span<const std::byte> bytes);

// A value of ONNX's test data: a tensor (one element), a sequence (its elements in
// order), or an optional (`none`, or its value as a tensor or a sequence).
struct ValueData {
  vm::ValueKind kind = vm::ValueKind::kTensor;
  bool none = false;
  std::vector<vm::ConstantDef> elements;
};
// Reads a serialized TensorProto, SequenceProto (of tensors) or OptionalProto (of a
// tensor or a sequence of tensors; onnx/onnx-data.proto), as `kind` says.
// INVALID_ARGUMENT for bytes that do not parse or a sequence of other than tensors;
// UNIMPLEMENTED for a dtype Remex does not hold.
StatusOr<ValueData> ValueFromProtoBytes(std::span<const std::byte> bytes, vm::ValueKind kind);

}  // namespace remex::compiler
