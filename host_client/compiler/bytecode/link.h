// Linking: functions of separately compiled executables appended into one executable,
// their kernel and constant operands remapped (a pass over bytecode). Used by
// shape-bucket dispatch (dispatch.h) to put the clones of one graph behind a dispatcher.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "vm/executable.h"

namespace remex::compiler {

// Appends functions of separately compiled executables into `out`, remapping their
// kernel and constant indices; constants equal in dtype, shape and bytes are stored
// once, and only constants a function loads are kept.
class Linker {
 public:
  explicit Linker(vm::ExecutableDef& out) : out_(out) {}

  // Appends every function of `part` (the first as `name`, the others as
  // "name/THEIR_NAME") with its kernels and the constants they load; every operand
  // that indexes a table (signature letters k, c, f in vm/opcodes.def) is remapped.
  // Returns the first function's index in out.functions. INVALID_ARGUMENT when the
  // part has no function or an operand is outside the part's tables; `out` is then
  // unchanged but for constants already interned.
  StatusOr<size_t> Add(vm::ExecutableDef part, std::string name);

  // The constant bytes the linked functions would take without sharing.
  uint64_t unshared_bytes() const { return unshared_bytes_; }

 private:
  int64_t Intern(vm::ConstantDef c);

  vm::ExecutableDef& out_;
  std::map<uint64_t, std::vector<int64_t>> index_;  // content hash -> constants
  uint64_t unshared_bytes_ = 0;
};

}  // namespace remex::compiler
