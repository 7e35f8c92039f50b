// Attributes, KernelRegistry, InferShapes and the top-level registration.

#include <exception>
#include <new>
#include <set>
#include <string>
#include <utility>

#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/op_table.h"

namespace remex::kernels {
namespace {

template <typename T>
constexpr std::string_view AttrTypeName() {
  if constexpr (std::is_same_v<T, int64_t>) return "int";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, std::string>) return "string";
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) return "ints";
  if constexpr (std::is_same_v<T, std::vector<float>>) return "floats";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "strings";
  return "?";
}

std::string_view HeldTypeName(const AttrValue& v) {
  return std::visit([](const auto& x) { return AttrTypeName<std::decay_t<decltype(x)>>(); }, v);
}

template <typename T>
StatusOr<T> Get(const std::map<std::string, AttrValue, std::less<>>& values, std::string_view name,
                const T* default_value) {
  auto it = values.find(name);
  if (it == values.end()) {
    if (default_value) return *default_value;
    return NotFound("attribute '" + std::string(name) + "' is required");
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return InvalidArgument("attribute '" + std::string(name) + "' must be " +
                         std::string(AttrTypeName<T>()) + ", got " +
                         std::string(HeldTypeName(it->second)));
}

}  // namespace

std::string_view DeviceKindName(DeviceKind device) {
  switch (device) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
  }
  return "unknown";
}

StatusOr<int64_t> Attributes::Int(std::string_view name) const {
  return Get<int64_t>(values_, name, nullptr);
}
StatusOr<int64_t> Attributes::Int(std::string_view name, int64_t default_value) const {
  return Get<int64_t>(values_, name, &default_value);
}
StatusOr<float> Attributes::Float(std::string_view name) const {
  return Get<float>(values_, name, nullptr);
}
StatusOr<float> Attributes::Float(std::string_view name, float default_value) const {
  return Get<float>(values_, name, &default_value);
}
StatusOr<std::string> Attributes::String(std::string_view name) const {
  return Get<std::string>(values_, name, nullptr);
}
StatusOr<std::string> Attributes::String(std::string_view name, std::string default_value) const {
  return Get<std::string>(values_, name, &default_value);
}
StatusOr<std::vector<int64_t>> Attributes::Ints(std::string_view name) const {
  return Get<std::vector<int64_t>>(values_, name, nullptr);
}
StatusOr<std::vector<int64_t>> Attributes::Ints(std::string_view name,
                                                std::vector<int64_t> default_value) const {
  return Get<std::vector<int64_t>>(values_, name, &default_value);
}
StatusOr<std::vector<float>> Attributes::Floats(std::string_view name) const {
  return Get<std::vector<float>>(values_, name, nullptr);
}
StatusOr<std::vector<float>> Attributes::Floats(std::string_view name,
                                                std::vector<float> default_value) const {
  return Get<std::vector<float>>(values_, name, &default_value);
}
StatusOr<std::vector<std::string>> Attributes::Strings(std::string_view name) const {
  return Get<std::vector<std::string>>(values_, name, nullptr);
}
StatusOr<std::vector<std::string>> Attributes::Strings(std::string_view name,
                                                       std::vector<std::string> default_value) const {
  return Get<std::vector<std::string>>(values_, name, &default_value);
}

namespace {

std::string RangeString(const OpDef& def) {
  if (def.end_version == kOpenEndedVersion) return std::to_string(def.since_version) + "+";
  if (def.end_version == def.since_version) return std::to_string(def.since_version);
  return std::to_string(def.since_version) + "-" + std::to_string(def.end_version);
}

}  // namespace

Status KernelRegistry::AddOp(OpDef def) {
  if (def.name.empty()) return InvalidArgument("op definition without a name");
  if (!def.infer) return InvalidArgument("op " + def.name + " has no shape function");
  if (def.since_version < 1 || def.end_version < def.since_version) {
    return InvalidArgument("op " + def.name + " has an empty version range [" +
                           std::to_string(def.since_version) + ", " + std::to_string(def.end_version) + "]");
  }
  std::map<int, OpDef>& entries = ops_[def.name];
  for (const auto& [since, other] : entries) {
    if (def.since_version <= other.end_version && other.since_version <= def.end_version) {
      return {StatusCode::kAlreadyExists, "op " + def.name + " version " + RangeString(def) +
                                              " overlaps its registered version " + RangeString(other)};
    }
  }
  const int since = def.since_version;
  entries.emplace(since, std::move(def));
  return OkStatus();
}

Status KernelRegistry::AddKernel(std::string_view op, int since_version, DeviceKind device, KernelMake make) {
  const std::string name(op);
  if (!make) return InvalidArgument("kernel for " + name + " has no factory");
  const OpDef* def = FindOp(op, since_version);
  if (!def || def->since_version != since_version) {
    return FailedPrecondition(
        "kernel " + name + "-" + std::to_string(since_version) + " on " +
        std::string(DeviceKindName(device)) +
        ": the op has no OpDef entry starting at that version; register the OpDefs first");
  }
  // `def` points into ops_, whose entries are never removed or moved.
  KernelFactory factory = [def, make = std::move(make)](const Attributes& attrs) {
    return make(*def, attrs);
  };
  auto [it, inserted] = kernels_.emplace(std::make_tuple(name, since_version, device), std::move(factory));
  if (!inserted) {
    return {StatusCode::kAlreadyExists, "kernel " + name + "-" + std::to_string(since_version) + " on " +
                                            std::string(DeviceKindName(device)) + " is already registered"};
  }
  return OkStatus();
}

const OpDef* KernelRegistry::FindOp(std::string_view op, int version) const {
  auto it = ops_.find(op);
  if (it == ops_.end()) return nullptr;
  // The last entry starting at or before `version`, if it reaches that far.
  auto entry = it->second.upper_bound(version);
  if (entry == it->second.begin()) return nullptr;
  --entry;
  return version <= entry->second.end_version ? &entry->second : nullptr;
}

std::vector<const OpDef*> KernelRegistry::OpVersions(std::string_view op) const {
  std::vector<const OpDef*> defs;
  auto it = ops_.find(op);
  if (it == ops_.end()) return defs;
  for (const auto& [since, def] : it->second) defs.push_back(&def);
  return defs;
}

std::string KernelRegistry::SupportedVersions(std::string_view op) const {
  std::string out;
  for (const OpDef* def : OpVersions(op)) out += (out.empty() ? "" : ", ") + RangeString(*def);
  return out;
}

const KernelFactory* KernelRegistry::FindKernel(std::string_view op, int version, DeviceKind device) const {
  const OpDef* def = FindOp(op, version);
  if (!def) return nullptr;
  auto it = kernels_.find(std::make_tuple(def->name, def->since_version, device));
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::OpNames() const {
  std::vector<std::string> names;
  names.reserve(ops_.size());
  for (const auto& [name, entries] : ops_) {
    if (!entries.empty()) names.push_back(name);
  }
  return names;
}

StatusOr<std::vector<TensorInfo>> InferShapes(const OpDef& def, const Attributes& attrs,
                                              std::span<const ShapeFnArg> inputs) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    std::string expected = std::to_string(def.min_inputs);
    if (def.max_inputs != def.min_inputs) {
      expected += def.max_inputs < 0 ? " or more" : " to " + std::to_string(def.max_inputs);
    }
    return InvalidArgument(def.name + ": expects " + expected + " inputs, got " +
                           std::to_string(n));
  }
  for (int64_t i = 0; i < n; ++i) {
    const ShapeFnArg& arg = inputs[i];
    if (!arg.present) {
      if (i < def.min_inputs) {
        return InvalidArgument(def.name + ": input " + std::to_string(i) +
                               " is required but absent");
      }
      continue;
    }
    if (DTypeSize(arg.dtype) == 0) {
      return InvalidArgument(def.name + ": input " + std::to_string(i) + " has invalid dtype " +
                             std::to_string(static_cast<int>(arg.dtype)));
    }
    if (!NumElements(arg.shape)) {
      return InvalidArgument(def.name + ": input " + std::to_string(i) + " has invalid shape " +
                             ShapeToString(arg.shape));
    }
    if (def.DepOf(i) == ShapeDep::kData && arg.data == nullptr && *NumElements(arg.shape) > 0) {
      return InvalidArgument(def.name + ": input " + std::to_string(i) +
                             " is needed by value but its data was not given");
    }
  }
  StatusOr<std::vector<TensorInfo>> result = InvalidArgument("");
  try {
    result = def.infer(attrs, inputs);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(def.name + ": out of memory in the shape function");
  } catch (const std::exception& e) {
    return Internal(def.name + ": shape function: " + e.what());
  }
  if (!result.ok()) {
    const Status& s = result.status();
    // Make sure the op is named whatever the shape function said.
    if (s.message().rfind(def.name, 0) == 0) return s;
    return s.WithContext(def.name);
  }
  const int64_t outs = static_cast<int64_t>(result->size());
  if (outs < def.min_outputs || (def.max_outputs >= 0 && outs > def.max_outputs)) {
    return Internal(def.name + ": shape function returned " + std::to_string(outs) + " outputs");
  }
  return result;
}

InputMemory InputMemoryOf(const OpDef& def, size_t input, bool host_kernel) {
  if (def.reads_shapes_only) return InputMemory::kAny;
  if (host_kernel || def.DepOf(input) == ShapeDep::kData) return InputMemory::kHost;
  return InputMemory::kDevice;
}

std::vector<DType> OutputDTypes(const OpDef& def, const Attributes& attrs, std::span<const DType> inputs,
                                size_t num_outputs) {
  std::vector<DType> out;
  if (def.output_dtypes) out = def.output_dtypes(attrs, inputs);
  const DType first = inputs.empty() ? DType::kUndefined : inputs[0];
  out.resize(num_outputs, first);
  return out;
}

namespace internal {

StatusOr<int> OnlyEntrySince(const KernelRegistry& registry, std::string_view op,
                             std::string_view registrar) {
  const std::vector<const OpDef*> entries = registry.OpVersions(op);
  if (entries.empty()) {
    return FailedPrecondition(std::string(registrar) + ": op " + std::string(op) +
                              " has no OpDef; call RegisterOpDefs first");
  }
  if (entries.size() > 1) {
    return FailedPrecondition(std::string(registrar) + ": op " + std::string(op) +
                              " has entries for opsets " + registry.SupportedVersions(op) +
                              "; register a kernel per entry");
  }
  return entries[0]->since_version;
}

}  // namespace internal

namespace {

// The entries of `registry` not in `known`, which are then added to it.
std::vector<const OpDef*> NewEntries(const KernelRegistry& registry, std::set<const OpDef*>& known) {
  std::vector<const OpDef*> added;
  for (const std::string& op : registry.OpNames()) {
    for (const OpDef* def : registry.OpVersions(op)) {
      if (known.insert(def).second) added.push_back(def);
    }
  }
  return added;
}

}  // namespace

Status RegisterOpDefs(KernelRegistry& registry) {
  // Each entry is attributed to the family whose group registered it, and the whole
  // is checked against the op table.
  std::set<const OpDef*> known;
  NewEntries(registry, known);
  std::vector<internal::RegisteredOp> registered;
#define REMEX_CPU_GROUP(family, name)                                                        \
  REMEX_RETURN_IF_ERROR(internal::Add##name##OpDefs(registry));                              \
  for (const OpDef* def : NewEntries(registry, known)) registered.push_back({#family, def});
#include "kernels/ops/families.def"
  return internal::CheckOpDefsAgainstTable(internal::OpTable(), registered);
}

Status RegisterCpuKernels(KernelRegistry& registry) {
#define REMEX_CPU_GROUP(family, name) REMEX_RETURN_IF_ERROR(internal::Add##name##CpuKernels(registry));
#include "kernels/ops/families.def"
  return internal::CheckKernelsAgainstTable(internal::OpTable(), registry, DeviceKind::kCpu);
}

StatusOr<std::unique_ptr<KernelRegistry>> CreateCpuRegistry() {
  auto registry = std::make_unique<KernelRegistry>();
  REMEX_RETURN_IF_ERROR(RegisterOpDefs(*registry));
  REMEX_RETURN_IF_ERROR(RegisterCpuKernels(*registry));
  return registry;
}

}  // namespace remex::kernels
