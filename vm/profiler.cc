#include "vm/profiler.h"

#include <algorithm>
#include <map>

#include "vm/executable.h"

namespace remex::vm {

std::vector<ProfileRow> Profiler::Rows(const ExecutableDef& def) const {
  auto by_time = [](const ProfileRow& a, const ProfileRow& b) {
    return a.counter.total_nanos != b.counter.total_nanos ? a.counter.total_nanos > b.counter.total_nanos
                                                          : a.name < b.name;
  };
  std::map<std::string, ProfileCounter> ops;
  for (size_t k = 0; k < kernels.size() && k < def.kernels.size(); ++k) {
    const ProfileCounter& c = kernels[k];
    if (c.calls == 0) continue;
    ops[def.kernels[k].op].Merge(c);
  }
  std::vector<ProfileRow> kernel_rows, instruction_rows;
  for (auto& [op, c] : ops) kernel_rows.push_back({op, "kernel", c});
  for (int i = 0; i < kOpcodeCount; ++i) {
    if (instructions[i].calls == 0) continue;
    instruction_rows.push_back({std::string(OpcodeName(static_cast<Opcode>(i))), "instruction", instructions[i]});
  }
  std::sort(kernel_rows.begin(), kernel_rows.end(), by_time);
  std::sort(instruction_rows.begin(), instruction_rows.end(), by_time);
  kernel_rows.insert(kernel_rows.end(), instruction_rows.begin(), instruction_rows.end());
  return kernel_rows;
}

}  // namespace remex::vm
