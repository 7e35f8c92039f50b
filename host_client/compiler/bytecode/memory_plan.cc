#include "host_client/compiler/bytecode/memory_plan.h"

#include <algorithm>
#include <map>

namespace remex::compiler {
namespace {

// Slot offsets and sizes are multiples of 256 bytes: the alignment cudaMalloc gives and
// that cuBLASLt's heuristic assumes of A, B, C and D by default
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), so that a tensor in a slot is as aligned
// as one in a buffer of its own.
constexpr uint64_t kAlignment = 256;

uint64_t AlignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

struct Slot {
  size_t pc = 0;     // the allocating instruction
  int64_t space = 0;
  uint64_t size = 0;
  size_t first = 0, last = 0;  // live range, instruction indices, inclusive
  bool escapes = false;        // returned by Ret: must not share memory
  uint64_t offset = 0;
};

// Calls `read(register)` for the registers `inst` reads and `write(register)` for
// those it (re)defines, from the opcode's signature.
template <typename Read, typename Write>
void ForOperands(const vm::Instruction& inst, Read read, Write write) {
  vm::VisitOperands(inst, [&](char kind, int64_t v) {
    if ((kind == 'r' || kind == 'o') && v >= 0) read(v);
    if (kind == 'd') write(v);
  });
}

}  // namespace

MemoryPlanStats PlanMemory(vm::FunctionDef& fn, const std::vector<int64_t>& bound_bytes) {
  MemoryPlanStats stats;
  for (const vm::Instruction& inst : fn.code) {
    if (vm::TransfersControl(inst.op)) {
      stats.not_planned = "control flow";
      break;
    }
  }
  std::vector<Slot> slots;
  std::vector<int> slot_of(static_cast<size_t>(fn.num_registers), -1);  // register -> slot it holds
  for (size_t pc = 0; pc < fn.code.size(); ++pc) {
    const vm::Instruction& inst = fn.code[pc];
    const bool alloc = inst.op == vm::Opcode::kAllocTensor || inst.op == vm::Opcode::kAllocTensorReg;
    if (alloc && (!stats.not_planned.empty() || pc >= bound_bytes.size() || bound_bytes[pc] < 0)) {
      stats.dynamic++;
    }
    if (!stats.not_planned.empty()) continue;
    // OptGet gives the object itself, as Move does.
    if (inst.op == vm::Opcode::kMove || inst.op == vm::Opcode::kOptGet) {
      int src = slot_of[inst.scalars[1]];
      if (src >= 0) slots[src].last = pc;
      slot_of[inst.scalars[0]] = src;
      continue;
    }
    if (inst.op == vm::Opcode::kKillRegister) {
      slot_of[inst.scalars[0]] = -1;
      continue;
    }
    // A tensor a sequence takes in lives as long as the sequence: it must not share memory.
    const bool ret = inst.op == vm::Opcode::kRet || inst.op == vm::Opcode::kSeqConstruct ||
                     inst.op == vm::Opcode::kSeqInsert || inst.op == vm::Opcode::kListAppend;
    ForOperands(
        inst,
        [&](int64_t r) {
          int s = slot_of[r];
          if (s < 0) return;
          slots[s].last = pc;
          if (ret) slots[s].escapes = true;
        },
        [&](int64_t r) { slot_of[r] = -1; });
    if (alloc && pc < bound_bytes.size() && bound_bytes[pc] >= 0) {
      Slot slot;
      slot.pc = pc;
      slot.space = inst.op == vm::Opcode::kAllocTensor ? inst.scalars[2] : inst.scalars[3];
      slot.size = AlignUp(std::max<uint64_t>(static_cast<uint64_t>(bound_bytes[pc]), 1));
      slot.first = slot.last = pc;
      slot_of[inst.scalars[0]] = static_cast<int>(slots.size());
      slots.push_back(slot);
    }
  }
  if (!stats.not_planned.empty()) return stats;

  // Greedy by size: largest first, at the lowest offset clear of every placed slot
  // whose live range overlaps.
  std::vector<size_t> order;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].escapes) order.push_back(i);
    else stats.dynamic++;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slots[a].size > slots[b].size; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    Slot& slot = slots[i];
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of overlapping live slots
    for (size_t j : placed) {
      const Slot& o = slots[j];
      if (o.space != slot.space || o.last < slot.first || slot.last < o.first) continue;
      busy.emplace_back(o.offset, o.offset + o.size);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + slot.size <= begin) break;
      offset = std::max(offset, end);
    }
    slot.offset = offset;
    placed.push_back(i);
    stats.arena_bytes[slot.space] = std::max(stats.arena_bytes[slot.space], offset + slot.size);
    stats.unshared_bytes[slot.space] += slot.size;
  }
  for (size_t i : placed) {
    const Slot& slot = slots[i];
    vm::Instruction& inst = fn.code[slot.pc];
    const auto& s = inst.scalars;
    vm::Instruction planned;
    planned.op = vm::Opcode::kAllocPlanned;
    if (inst.op == vm::Opcode::kAllocTensor) {  // d t m I
      planned.scalars = {s[0], s[1], -1, s[2], static_cast<int64_t>(slot.offset), static_cast<int64_t>(slot.size)};
      planned.lists = {inst.lists[0]};
    } else {  // d t r m
      planned.scalars = {s[0], s[1], s[2], s[3], static_cast<int64_t>(slot.offset), static_cast<int64_t>(slot.size)};
      planned.lists = {{}};
    }
    inst = std::move(planned);
    stats.planned++;
  }
  fn.arena_bytes[0] = stats.arena_bytes[0];
  fn.arena_bytes[1] = stats.arena_bytes[1];
  return stats;
}

}  // namespace remex::compiler
