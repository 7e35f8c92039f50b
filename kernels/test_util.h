// Test helpers: host tensors, a runner that infers shapes, allocates outputs and runs a
// CPU kernel the way the VM does, and float test data.
#pragma once

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"

namespace remex::kernels::testing {

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  if constexpr (std::is_same_v<T, Half>) return DType::kFloat16;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::kBFloat16;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kUint8;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::kUint16;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  return DType::kUndefined;
}

// A dense tensor in host memory. An absent optional input has dtype kUndefined.
struct HostTensor {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<uint8_t> bytes;

  static HostTensor Absent() { return HostTensor{}; }

  static HostTensor Zeros(DType dtype, Shape shape) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.bytes.assign(static_cast<size_t>(NumElements(t.shape).value_or(0)) * DTypeSize(dtype), 0);
    return t;
  }

  template <typename T>
  static HostTensor Of(Shape shape, const std::vector<T>& values) {
    HostTensor t = Zeros(DTypeOf<T>(), std::move(shape));
    if (values.size() * sizeof(T) != t.bytes.size()) std::abort();
    for (size_t i = 0; i < values.size(); ++i) {
      T v = values[i];
      std::memcpy(t.bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
    return t;
  }

  template <typename T>
  std::vector<T> Values() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(static_cast<void*>(v.data()), bytes.data(), v.size() * sizeof(T));
    return v;
  }

  TensorRef Ref() {
    TensorRef r;
    r.dtype = dtype;
    r.shape = shape;
    r.data = dtype == DType::kUndefined || bytes.empty() ? nullptr : bytes.data();
    return r;
  }
};

// Shape-function arguments for `inputs` of op `def`, with data (pointing into
// `inputs`) exactly where the op's ShapeDep asks for it.
inline std::vector<ShapeFnArg> ShapeArgs(const OpDef& def, const std::vector<HostTensor>& inputs) {
  std::vector<ShapeFnArg> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    args[i].present = inputs[i].dtype != DType::kUndefined;
    args[i].dtype = inputs[i].dtype;
    args[i].shape = inputs[i].shape;
    if (args[i].present && def.DepOf(i) == ShapeDep::kData) args[i].data = inputs[i].bytes.data();
  }
  return args;
}

// An op named as ONNX names its definitions: "Resize-10" is the registry entry of
// Resize covering opset 10; a plain "Resize" is the op's newest entry.
struct VersionedOp {
  std::string name;
  int version = kNewestVersion;
};
inline VersionedOp ParseVersionedOp(std::string_view op) {
  const size_t dash = op.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == op.size()) return {std::string(op), kNewestVersion};
  int version = 0;
  for (char c : op.substr(dash + 1)) {
    if (c < '0' || c > '9') return {std::string(op), kNewestVersion};
    version = version * 10 + (c - '0');
  }
  return {std::string(op.substr(0, dash)), version};
}
// FindOp / FindKernel of an op named "Op" or "Op-<version>".
inline const OpDef* FindVersionedOp(const KernelRegistry& registry, std::string_view op) {
  const VersionedOp v = ParseVersionedOp(op);
  return registry.FindOp(v.name, v.version);
}
inline const KernelFactory* FindVersionedKernel(const KernelRegistry& registry, std::string_view op,
                                                DeviceKind device) {
  const VersionedOp v = ParseVersionedOp(op);
  return registry.FindKernel(v.name, v.version, device);
}

// Runs ops (named "Op" or "Op-<version>", see ParseVersionedOp) with their CPU kernels.
class OpRunner {
 public:
  OpRunner() {
    Status s = RegisterOpDefs(registry_);
    if (s.ok()) s = RegisterCpuKernels(registry_);
    if (!s.ok()) std::abort();
  }

  const KernelRegistry& registry() const { return registry_; }

  StatusOr<std::vector<TensorInfo>> Infer(std::string_view op, const Attributes& attrs,
                                          std::vector<HostTensor> inputs) const {
    const OpDef* def = FindVersionedOp(registry_, op);
    if (!def) return NotFound("no op");
    return InferShapes(*def, attrs, ShapeArgs(*def, inputs));
  }

  // Infers output shapes, allocates `num_outputs` outputs (all the shape function
  // describes when nullopt), runs the CPU kernel.
  StatusOr<std::vector<HostTensor>> Run(std::string_view op, const Attributes& attrs,
                                        std::vector<HostTensor> inputs,
                                        std::optional<size_t> num_outputs = std::nullopt) {
    REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, Infer(op, attrs, inputs));
    const KernelFactory* factory = FindVersionedKernel(registry_, op, DeviceKind::kCpu);
    if (!factory) return NotFound("no kernel");
    REMEX_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, (*factory)(attrs));
    return RunKernel(*kernel, infos, inputs, num_outputs);
  }

  static StatusOr<std::vector<HostTensor>> RunKernel(OpKernel& kernel,
                                                     const std::vector<TensorInfo>& infos,
                                                     std::vector<HostTensor>& inputs,
                                                     std::optional<size_t> num_outputs) {
    const size_t n = num_outputs.value_or(infos.size());
    std::vector<HostTensor> outputs;
    for (size_t i = 0; i < n; ++i) {
      outputs.push_back(i < infos.size() ? HostTensor::Zeros(infos[i].dtype, infos[i].shape)
                                         : HostTensor::Zeros(DType::kFloat32, {1}));
    }
    std::vector<TensorRef> in_refs, out_refs;
    for (HostTensor& t : inputs) in_refs.push_back(t.Ref());
    for (HostTensor& t : outputs) out_refs.push_back(t.Ref());
    REMEX_RETURN_IF_ERROR(kernel.Compute(in_refs, out_refs));
    return outputs;
  }

 private:
  KernelRegistry registry_;
};

inline Attributes Attrs(std::initializer_list<std::pair<std::string, AttrValue>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.Set(k, v);
  return a;
}

// n float32 values start, start + 1, ..., start + n - 1 (test data).
inline std::vector<float> Iota(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace remex::kernels::testing
