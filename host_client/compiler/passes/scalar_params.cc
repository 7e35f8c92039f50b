#include "host_client/compiler/passes/scalar_params.h"

#include <cmath>
#include <cstring>

#include "kernels/float16.h"

namespace remex::compiler {

std::optional<double> ScalarConstant(const Graph& g, int v) {
  if (v < 0) return std::nullopt;
  const Value& value = g.values[v];
  if (!value.constant) return std::nullopt;
  const vm::ConstantDef& c = g.constants[*value.constant];
  auto n = NumElements(c.shape);
  if (!n || *n != 1 || c.data.size() != DTypeSize(c.dtype)) return std::nullopt;
  auto read = [&](auto zero) {
    decltype(zero) x;
    std::memcpy(&x, c.data.data(), sizeof(x));
    return static_cast<double>(x);
  };
  switch (c.dtype) {
    case DType::kFloat32: return read(float{});
    case DType::kFloat64: return read(double{});
    case DType::kFloat16: {
      kernels::Half h;
      std::memcpy(&h, c.data.data(), sizeof(h));
      return static_cast<double>(kernels::HalfToFloat(h));
    }
    case DType::kInt8: return read(int8_t{});
    case DType::kInt16: return read(int16_t{});
    case DType::kInt32: return read(int32_t{});
    case DType::kInt64: return read(int64_t{});
    case DType::kUint8: return read(uint8_t{});
    case DType::kUint16: return read(uint16_t{});
    case DType::kUint32: return read(uint32_t{});
    case DType::kUint64: return read(uint64_t{});
    default: return std::nullopt;
  }
}

std::optional<float> AsImmediate(std::optional<double> x) {
  if (!x) return std::nullopt;
  const float f = static_cast<float>(*x);
  if (std::isnan(*x)) return f;
  if (static_cast<double>(f) != *x) return std::nullopt;
  return f;
}

size_t DataOperandCount(const Node& n, const kernels::OpDef& def) {
  size_t count = n.inputs.size();
  if (def.max_inputs < 0) return count;
  for (const kernels::ScalarParam& p : def.traits.params) {
    if (p.attribute.empty() && p.input >= 0 && static_cast<size_t>(p.input) < count) count = p.input;
  }
  return count;
}

std::optional<std::vector<float>> ReadScalarParams(const Graph& g, const Node& n, const kernels::OpDef& def) {
  std::vector<float> values;
  std::vector<bool> named(n.inputs.size(), false);
  for (size_t i = 0; i < DataOperandCount(n, def); ++i) named[i] = true;
  for (const kernels::ScalarParam& p : def.traits.params) {
    if (!p.attribute.empty()) {
      if (!n.attrs.Has(p.attribute)) {
        if (!p.default_value) return std::nullopt;
        values.push_back(*p.default_value);
        continue;
      }
      auto f = n.attrs.Float(p.attribute);
      if (!f.ok()) return std::nullopt;
      values.push_back(*f);
      continue;
    }
    const bool present = p.input >= 0 && static_cast<size_t>(p.input) < n.inputs.size() && n.inputs[p.input] >= 0;
    if (!present) {
      if (!p.default_value) return std::nullopt;
      values.push_back(*p.default_value);
      continue;
    }
    named[p.input] = true;
    auto f = AsImmediate(ScalarConstant(g, n.inputs[p.input]));
    if (!f) return std::nullopt;
    values.push_back(*f);
  }
  for (size_t i = 0; i < named.size(); ++i) {
    if (!named[i] && n.inputs[i] >= 0) return std::nullopt;
  }
  return values;
}

}  // namespace remex::compiler
