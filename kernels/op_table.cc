// The op table (kernels/ops/ops.def) and the checks of registration against it.
#include "kernels/op_table.h"

#include <map>
#include <set>
#include <tuple>

namespace remex::kernels::internal {
namespace {

constexpr int kOpen = kOpenEndedVersion;
// Unused while every row has a CUDA kernel; kept for the next op that has none.
[[maybe_unused]] constexpr OpDevices kCpuOnly = OpDevices::kCpuOnly;
constexpr OpDevices kCpuCuda = OpDevices::kCpuCuda;

constexpr OpRow kRows[] = {
#define REMEX_OP(family, domain, op, since, end, devices) {#family, domain, #op, since, end, devices},
#include "kernels/ops/ops.def"
};

using EntryKey = std::tuple<std::string_view, int>;  // (op, since_version)

std::string VersionString(int version) {
  return version == kOpenEndedVersion ? "kOpen" : std::to_string(version);
}

}  // namespace

std::span<const OpRow> OpTable() { return kRows; }

std::string OpRowString(const OpRow& row) {
  return "REMEX_OP(" + std::string(row.family) + ", \"" + std::string(row.domain) + "\", " +
         std::string(row.op) + ", " + std::to_string(row.since_version) + ", " + VersionString(row.end_version) +
         ", " + (row.devices == OpDevices::kCpuCuda ? "kCpuCuda" : "kCpuOnly") + ")";
}

Status CheckOpDefsAgainstTable(std::span<const OpRow> rows, std::span<const RegisteredOp> registered) {
  std::map<EntryKey, const OpRow*> by_entry;
  std::string problems;
  for (const OpRow& row : rows) {
    if (!by_entry.emplace(EntryKey{row.op, row.since_version}, &row).second) {
      problems += "\n  row listed twice: " + OpRowString(row);
    }
  }
  std::set<EntryKey> seen;
  for (const RegisteredOp& r : registered) {
    const OpDef& def = *r.def;
    const OpRow actual{r.family, def.domain, def.name, def.since_version, def.end_version, OpDevices::kCpuCuda};
    auto it = by_entry.find(EntryKey{def.name, def.since_version});
    if (it == by_entry.end()) {
      problems += "\n  entry without a row, add: " + OpRowString(actual);
      continue;
    }
    seen.insert(it->first);
    const OpRow& row = *it->second;
    if (row.family != r.family || row.domain != def.domain || row.end_version != def.end_version) {
      OpRow expected = actual;
      expected.devices = row.devices;
      problems += "\n  row " + OpRowString(row) + " differs from what is registered: " + OpRowString(expected);
    }
  }
  for (const auto& [key, row] : by_entry) {
    if (!seen.count(key)) problems += "\n  row without a registered OpDef: " + OpRowString(*row);
  }
  if (problems.empty()) return OkStatus();
  return FailedPrecondition("the registered ops differ from the op table (kernels/ops/ops.def):" + problems);
}

Status CheckKernelsAgainstTable(std::span<const OpRow> rows, const KernelRegistry& registry, DeviceKind device) {
  std::set<EntryKey> in_table;
  std::string problems;
  for (const OpRow& row : rows) {
    in_table.insert(EntryKey{row.op, row.since_version});
    const bool wanted = device == DeviceKind::kCpu || row.devices == OpDevices::kCpuCuda;
    const bool present = registry.FindKernel(row.op, row.since_version, device) != nullptr;
    if (wanted && !present) {
      problems += "\n  no " + std::string(DeviceKindName(device)) + " kernel for " + OpRowString(row);
    } else if (!wanted && present) {
      problems += "\n  a " + std::string(DeviceKindName(device)) + " kernel for " + OpRowString(row) +
                  ", whose row leaves the device out";
    }
  }
  // Kernels of entries the table does not list at all.
  for (const std::string& op : registry.OpNames()) {
    for (const OpDef* def : registry.OpVersions(op)) {
      if (!registry.FindKernel(op, def->since_version, device)) continue;
      if (!in_table.count(EntryKey{op, def->since_version})) {
        problems += "\n  a " + std::string(DeviceKindName(device)) + " kernel for " + op + "-" +
                    std::to_string(def->since_version) + ", which has no row";
      }
    }
  }
  if (problems.empty()) return OkStatus();
  return FailedPrecondition("the registered " + std::string(DeviceKindName(device)) +
                            " kernels differ from the op table (kernels/ops/ops.def):" + problems);
}

}  // namespace remex::kernels::internal
