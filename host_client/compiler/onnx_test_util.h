// Test helpers of the compiler tests: the CPU kernel registry, and small ONNX models
// built in memory with the ONNX protobuf API.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/kernels.h"

namespace remex::testing {

// The CPU kernel registry (kernels::CreateCpuRegistry), created on first use and kept for
// the life of the test process.
inline const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

// n floats drawn uniformly from [lo, hi) by a generator seeded with `seed`: the same
// values on every run, for a test's weights and inputs.
inline std::vector<float> UniformFloats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // dims: -1 becomes a dim_param named "d<i>".
  // Adds an opset import of `domain` ("" is the default domain).
  OnnxModelBuilder& ImportDomain(const std::string& domain, int version) {
    auto* imp = model_.add_opset_import();
    imp->set_domain(domain);
    imp->set_version(version);
    return *this;
  }
  // Removes the default domain's opset import (a model of other domains only).
  OnnxModelBuilder& DropDefaultDomain() {
    auto* imports = model_.mutable_opset_import();
    for (int i = imports->size() - 1; i >= 0; --i) {
      if (imports->Get(i).domain().empty()) imports->DeleteSubrange(i, 1);
    }
    return *this;
  }
  OnnxModelBuilder& Input(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    SetInfo(model_.mutable_graph()->add_input(), name, elem_type, dims);
    return *this;
  }
  OnnxModelBuilder& Output(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    SetInfo(model_.mutable_graph()->add_output(), name, elem_type, dims);
    return *this;
  }
  // A graph input or output that is an ONNX sequence of `elem_type` tensors.
  OnnxModelBuilder& SequenceInput(const std::string& name, int elem_type) {
    SetSequenceInfo(model_.mutable_graph()->add_input(), name, elem_type);
    return *this;
  }
  OnnxModelBuilder& SequenceOutput(const std::string& name, int elem_type) {
    SetSequenceInfo(model_.mutable_graph()->add_output(), name, elem_type);
    return *this;
  }
  OnnxModelBuilder& FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<float>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return *this;
  }
  // FLOAT16 raw data: `values` rounded to nearest even (kernels/float16.h).
  OnnxModelBuilder& Float16Init(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = kernels::FloatToHalf(values[i]).bits;
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT16);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * 2));
    return *this;
  }
  // Any element type from its raw little-endian bytes (UINT8, INT8, INT32 ...).
  OnnxModelBuilder& RawInit(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                            const void* data, size_t bytes) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
    return *this;
  }
  OnnxModelBuilder& Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  std::vector<std::byte> Bytes() const {
    std::string s = model_.SerializeAsString();
    std::vector<std::byte> out(s.size());
    std::memcpy(out.data(), s.data(), s.size());
    return out;
  }
  bool Save(const std::string& path) const {
    std::string s = model_.SerializeAsString();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
    return std::fclose(f) == 0 && ok;
  }

 private:
  static void SetSequenceInfo(onnx::ValueInfoProto* v, const std::string& name, int elem_type) {
    v->set_name(name);
    v->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem_type);
  }
  static void SetInfo(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
                      const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->add_dim();
      if (dims[i] < 0) d->set_dim_param("d" + std::to_string(i));
      else d->set_dim_value(dims[i]);
    }
  }
  onnx::ModelProto model_;
};

}  // namespace remex::testing
