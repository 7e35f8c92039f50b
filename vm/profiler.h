// Optional per-instruction profiling of VM invokes.
//
// A Profiler passed to VirtualMachine::Invoke records, for every instruction run, its
// opcode's call count, wall time (steady clock, nanoseconds), the device copies the VM
// made while running it, and the device memory it allocated and left live;
// InvokeKernel instructions are recorded a second time under their kernel-table entry,
// so kernels can be broken down by ONNX op. Invokes without a profiler pay nothing but
// one pointer test per instruction.
//
// Memory is that of the VM's device allocator (the session's, on a server), counted in
// the allocator's size classes (AllocatorStats::allocated_bytes): an allocation is a
// buffer the VM requested from it for a tensor, a copy or a planned arena. A tensor
// placed in a function's planned arena (AllocPlanned) is no allocation: the arena is
// allocated once, by the instruction that first places a tensor in it, and reused by
// every later invoke. Host-memory buffers (shape scalars, host copies) are not counted.
// A kernel row counts, besides what the kernel itself allocates, the buffers made for
// its outputs by the AllocTensor, AllocTensorReg and AllocOutput instructions before it
// (so kernel rows show which ops' outputs take memory; the instruction rows still
// count those under the Alloc* opcodes).
// Live bytes are the allocator's allocated_bytes right after the instruction: every
// live buffer of the allocator, including those of other VMs sharing it, constants,
// inputs and cached arenas; a buffer freed (its last reference dropped, as by
// KillRegister) leaves them at once, and a freed block the allocator reuses is counted
// again as an allocation.
//
// Times are host wall time around each instruction: on an asynchronous device they
// measure the launch, not the device work (see Rows()), unless `synchronize` is set:
// then the VM waits for the device after every instruction, so each one's time holds
// its device work (and the wait). Not thread-safe: one invoke at a time per Profiler.
//
// Per kernel-table entry (one ONNX node, or the nodes a fused kernel runs, named
// "conv_1+relu_1") the profiler also keeps the run-time input and output dtypes and
// shapes of its first profiled call, and with `trace` set one TraceEvent per
// instruction run, in run order.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "vm/bytecode.h"

namespace remex::vm {

struct ExecutableDef;

// What one run of an instruction did (see the header comment for the memory terms).
struct ProfileSample {
  uint64_t nanos = 0;
  uint64_t copies = 0;  // device copies made, both directions
  uint64_t copy_bytes = 0;
  uint64_t allocations = 0;      // device buffers allocated
  uint64_t allocated_bytes = 0;  // their size classes, bytes
  uint64_t live_bytes = 0;       // the device allocator's allocated bytes right after it
};

struct ProfileCounter {
  uint64_t calls = 0;
  uint64_t total_nanos = 0;
  uint64_t copies = 0;      // device copies made, both directions
  uint64_t copy_bytes = 0;
  uint64_t allocations = 0;      // device buffers allocated, summed
  uint64_t allocated_bytes = 0;  // their bytes (size classes), summed
  uint64_t peak_live_bytes = 0;  // the most live bytes right after any of the calls

  void Add(const ProfileSample& s) {
    ++calls;
    total_nanos += s.nanos;
    copies += s.copies;
    copy_bytes += s.copy_bytes;
    allocations += s.allocations;
    allocated_bytes += s.allocated_bytes;
    peak_live_bytes = std::max(peak_live_bytes, s.live_bytes);
  }
  // Adds another counter's calls (rows that aggregate counters).
  void Merge(const ProfileCounter& c) {
    calls += c.calls;
    total_nanos += c.total_nanos;
    copies += c.copies;
    copy_bytes += c.copy_bytes;
    allocations += c.allocations;
    allocated_bytes += c.allocated_bytes;
    peak_live_bytes = std::max(peak_live_bytes, c.peak_live_bytes);
  }
};

// The dtypes and shapes of one kernel call's operands, as they were at run time (a
// dynamic shape is the one that call saw). An absent optional input is
// DType::kUndefined with an empty shape.
struct KernelShapes {
  std::vector<std::pair<DType, Shape>> inputs, outputs;
};

// One instruction run: when it started (nanoseconds since Profiler::trace_origin) and
// how long it took, its opcode, and for InvokeKernel its kernel-table entry.
struct TraceEvent {
  uint64_t start_nanos = 0;
  uint64_t nanos = 0;
  Opcode op = Opcode::kMove;
  int32_t kernel = -1;  // kernel-table index (InvokeKernel), else -1
  int32_t function = 0;
  uint32_t pc = 0;
};

// One line of a profile report.
struct ProfileRow {
  std::string name;  // ONNX op for kernels ("Conv"), opcode name for instructions
  std::string kind;  // "kernel" or "instruction"
  ProfileCounter counter;
};

class Profiler {
 public:
  // Counters, indexed by opcode and by kernel-table index. The VM sizes `kernels` to
  // the executable's kernel table on first use.
  std::array<ProfileCounter, kOpcodeCount> instructions{};
  std::vector<ProfileCounter> kernels;
  // Wall time of the profiled invokes, whole, and their count.
  uint64_t total_nanos = 0;
  uint64_t invokes = 0;
  // The device allocator's live bytes right before and right after the last profiled
  // invoke (after: its outputs still held, its registers dropped), and the most live
  // bytes right after any profiled instruction. Buffers that live only inside one
  // instruction (a kernel's workspace) show in none of these: the allocator's
  // peak_allocated_bytes catches them.
  uint64_t live_bytes_before = 0;
  uint64_t live_bytes_after = 0;
  uint64_t peak_live_bytes = 0;

  // Wait for the device after each instruction, so that its time holds its device
  // work (set before the invoke).
  bool synchronize = false;
  // Per kernel-table entry: the operands of its first profiled call (empty lists for an
  // entry not run yet). Sized with `kernels`.
  std::vector<KernelShapes> kernel_shapes;
  // Tracing (set before the invoke): with `trace`, every instruction run is appended to
  // `events`, at most `trace_limit` of them; the ones past it are counted in
  // `trace_dropped`. Event start times count from `trace_origin` (a caller profiling
  // several invokes on one time line gives them all the same origin).
  bool trace = false;
  size_t trace_limit = 0;
  std::chrono::steady_clock::time_point trace_origin{};
  std::vector<TraceEvent> events;
  uint64_t trace_dropped = 0;

  void Reset() { *this = Profiler(); }

  // Rows with at least one call: kernel rows aggregated by ONNX op name (`def` names
  // the kernel-table entries), then instruction rows by opcode; each group sorted by
  // total time, longest first. Kernel rows break down the time of the InvokeKernel
  // instruction row; instruction rows together cover the whole invoke but the
  // dispatch loop's own overhead.
  std::vector<ProfileRow> Rows(const ExecutableDef& def) const;
};

}  // namespace remex::vm
