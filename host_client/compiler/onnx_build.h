// Building ONNX nodes in the frontend's lowerings (Scan in onnx_scan.cc; SequenceMap,
// SplitToSequence and ConcatFromSequence in onnx_import.cc): the NodeProtos they emit
// are then imported like the model's own.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace remex::compiler {

// Appends a node to `out`; returns it for attributes.
inline onnx::NodeProto& AddNode(std::vector<onnx::NodeProto>& out, const std::string& op, const std::string& name,
                                const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  onnx::NodeProto& n = out.emplace_back();
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& o : outputs) n.add_output(o);
  return n;
}

inline void SetInt(onnx::NodeProto& n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void SetInts(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A Constant node writing `name`, holding int64 `values` of shape [values.size()] or,
// with `scalar`, the one value as a scalar. Returns `name`.
inline std::string AddInt64Constant(std::vector<onnx::NodeProto>& out, const std::string& name,
                                    const std::vector<int64_t>& values, bool scalar) {
  onnx::NodeProto& n = AddNode(out, "Constant", name, {}, {name});
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

// A graph input or output of a scalar tensor of `dtype`.
inline onnx::ValueInfoProto ScalarInfo(const std::string& name, onnx::TensorProto::DataType dtype) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype);
  tt->mutable_shape();
  return v;
}

}  // namespace remex::compiler
