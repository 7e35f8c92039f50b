// Optional per-instruction profiling of VM invokes.
//
// A Profiler passed to VirtualMachine::Invoke records, for every instruction run, its
// opcode's call count, wall time (steady clock, nanoseconds) and the device copies the
// VM made while running it; InvokeKernel instructions are recorded a second time under
// their kernel-table entry, so kernels can be broken down by ONNX op. Invokes without a
// profiler pay nothing but one pointer test per instruction.
//
// Times are host wall time around each instruction: on an asynchronous device they
// measure the launch, not the device work (see Rows()). Not thread-safe: one invoke at
// a time per Profiler.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vm/bytecode.h"

namespace remex::vm {

struct ExecutableDef;

struct ProfileCounter {
  uint64_t calls = 0;
  uint64_t total_nanos = 0;
  uint64_t copies = 0;      // device copies made, both directions
  uint64_t copy_bytes = 0;

  void Add(uint64_t nanos, uint64_t n_copies, uint64_t n_bytes) {
    ++calls;
    total_nanos += nanos;
    copies += n_copies;
    copy_bytes += n_bytes;
  }
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

  void Reset() { *this = Profiler(); }

  // Rows with at least one call: kernel rows aggregated by ONNX op name (`def` names
  // the kernel-table entries), then instruction rows by opcode; each group sorted by
  // total time, longest first. Kernel rows break down the time of the InvokeKernel
  // instruction row; instruction rows together cover the whole invoke but the
  // dispatch loop's own overhead.
  std::vector<ProfileRow> Rows(const ExecutableDef& def) const;
};

}  // namespace remex::vm
