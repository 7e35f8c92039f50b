#include "base/dtype.h"

namespace remex {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kFloat32, "float32", 4}, {DType::kUint8, "uint8", 1},
    {DType::kInt8, "int8", 1},       {DType::kUint16, "uint16", 2},
    {DType::kInt16, "int16", 2},     {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},     {DType::kBool, "bool", 1},
    {DType::kFloat16, "float16", 2}, {DType::kFloat64, "float64", 8},
    {DType::kUint32, "uint32", 4},   {DType::kUint64, "uint64", 8},
    {DType::kBFloat16, "bfloat16", 2},
};

const DTypeInfo* Find(DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

size_t DTypeSize(DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info ? info->size : 0;
}

std::string_view DTypeName(DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info ? info->name : "undefined";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromOnnx(int32_t onnx_type) {
  const DTypeInfo* info = Find(static_cast<DType>(onnx_type));
  if (!info) return std::nullopt;
  return info->dtype;
}

std::optional<int64_t> NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

void CanonicalizeBoolBytes(void* data, size_t nbytes) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
}

std::string ShapeToString(const Shape& shape, const std::vector<std::string>& dim_names) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (shape[i] >= 0) s += std::to_string(shape[i]);
    else s += i < dim_names.size() && !dim_names[i].empty() ? dim_names[i] : std::string("?");
  }
  s += "]";
  return s;
}

}  // namespace remex
