// Static memory planning: tensors whose size is bounded at compile time get a fixed
// slot in one arena per memory space, so a call allocates nothing for them.
//
// Input: a function's code and, per instruction, an upper bound in bytes for the
// tensor an AllocTensor / AllocTensorReg makes there (-1: unbounded, stays a run-time
// allocation). A shape bucket's clone knows every bound: its symbols are bounded by
// the bucket's edges, and the compiler bounds every derived dim (compiler.h).
//
// Each planned tensor lives from its allocation to the last instruction that reads it
// or a register it was moved into. Slots are assigned greedily by size, largest first,
// at the lowest offset that overlaps no slot live at the same time (the "greedy by
// size" offset assignment of TFLite's and ONNX Runtime's planners), aligned to 256
// bytes. Planned allocations become AllocPlanned; the VM checks at run time that each
// tensor fits its slot.
//
// Only straight-line functions are planned: with If, Loop, Goto or TailCall, a tensor
// could be live across a back edge, and the function keeps its run-time allocations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vm/executable.h"

namespace remex::compiler {

struct MemoryPlanStats {
  int planned = 0;            // allocations turned into arena slots
  int dynamic = 0;            // allocations left to run time (unbounded size)
  uint64_t arena_bytes[2] = {0, 0};    // device, host
  uint64_t unshared_bytes[2] = {0, 0};  // what the slots would take without reuse
  std::string not_planned;    // why nothing was planned, when that is the case
};

// Rewrites `fn` in place. `bound_bytes` has one entry per instruction of `fn.code`.
MemoryPlanStats PlanMemory(vm::FunctionDef& fn, const std::vector<int64_t>& bound_bytes);

}  // namespace remex::compiler
