// Profiles as reports: the server's profile of several invokes (client::ProfileResult)
// as rows per op and instruction kind, rows per node with the median over the runs, and
// the trace-event JSON of every instruction run (`remex bench --profile --trace`, the
// shell's `profile`, Python's Model.profile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "host_client/client/client.h"

namespace remex::tooling {

// The invokes a profile runs by default (--profile-runs).
inline constexpr uint32_t kDefaultProfileRuns = 5;
// The nodes a text report lists by default, slowest first (--profile-top).
inline constexpr size_t kDefaultProfileTop = 10;

struct ProfileEntry {
  std::string name, kind;  // op or instruction; "kernel" or "instruction"
  uint64_t calls = 0;
  double total_ms = 0, mean_us = 0, share_percent = 0;
  uint64_t copies = 0, copy_bytes = 0;
  // Device memory (the session allocator's size classes; 0 from older servers): the
  // buffers these rows allocated, their bytes, and the most live bytes right after
  // any of their instructions (client::ProfileRow).
  uint64_t allocations = 0, allocated_bytes = 0, peak_live_bytes = 0;
};

// The profiled invoke's device memory: the session allocator's live bytes right before
// and after it (its outputs still held) and its high-water mark during it, bytes (0
// from older servers; client::ProfileResult).
struct ProfileMemory {
  uint64_t live_bytes_before = 0, live_bytes_after = 0, peak_live_bytes = 0;
};

// One node of the model as the profile saw it: an ONNX node, or the nodes one fused
// kernel runs ("conv_1+relu_1"), with the operands of its first call as they were at
// run time (dynamic shapes resolved).
struct ProfileNodeEntry {
  std::string name, op;
  bool host = false;   // a host kernel (small integer shape computations)
  uint64_t calls = 0;  // calls per invoke (of the median run)
  // Its time per invoke, ms: the median, least and most over the runs (numpy's median:
  // the mean of the two middle values of an even count).
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double share_percent = 0;    // median_ms of the median run's whole invoke
  std::vector<double> run_ms;  // its time in each run, in run order
  std::vector<client::OperandDesc> inputs, outputs;
  // Its arithmetic per call, from the operands' shapes (kernels/op_cost.h): operations
  // (0 for an op whose cost is memory traffic) and operand bytes; and the rates its
  // median call achieved, operations and bytes over median_ms / calls: GOP/s (1e9
  // operations per second) and GB/s (1e9 bytes per second).
  double ops = 0, bytes = 0;
  double gops_per_s = 0, gbytes_per_s = 0;
};

// A profile of one or more invokes of one function.
struct ProfileReport {
  // Per op (kernel rows) and instruction kind, largest total first, and the whole
  // invoke's time and memory: those of the median run (by total time).
  std::vector<ProfileEntry> rows;
  double total_ms = 0;
  ProfileMemory memory;
  uint32_t runs = 1;
  std::vector<double> run_total_ms;     // per run, in run order (empty from older servers)
  bool synchronized = false;            // each instruction's time holds its device work
  std::vector<ProfileNodeEntry> nodes;  // largest median first (empty from older servers)
  // The nodes' operations per invoke (ops x calls, summed) and what the median invoke
  // achieved over its whole time, GOP/s (0 without counted nodes).
  double ops = 0, gops_per_s = 0;
  // The trace-event JSON of every instruction run (TraceJson) when asked; else null.
  nlohmann::json trace;
  uint64_t trace_dropped = 0;  // events past the reply's limit, not in `trace`
};

// A server's profile as report rows: times in ms and us, shares of the whole invoke,
// largest total first.
std::vector<ProfileEntry> ProfileEntries(const client::ProfileResult& profile);
ProfileMemory ProfileMemoryOf(const client::ProfileResult& profile);
// The whole report: rows, nodes with their medians (trace left null).
ProfileReport ProfileReportOf(const client::ProfileResult& profile);

// The trace of `profile` (profiled with ProfileOptions::trace) in the trace-event JSON
// format that trace viewers open: {"traceEvents": [...], "displayTimeUnit": "ns"},
// one complete event ("ph": "X", "ts" and "dur" in microseconds) per instruction run
// (a kernel named by its node, with cat "kernel", op and operand shapes in "args";
// other instructions by their opcode, cat "instruction"), and one per run enclosing
// its instructions (cat "invoke"); every run on one time line, pid 1, tid 1, with
// process and thread names as metadata events.
nlohmann::json TraceJson(const client::ProfileResult& profile, const std::string& process_name);

// `runs` invokes of `function` of a VM whose inputs are bound, profiled, as a report;
// with `trace`, its trace too (TraceJson, the process named after `device`). The
// session's errors, with "profile" as context.
StatusOr<ProfileReport> ProfileVm(client::Session& session, uint64_t vm, const std::string& function,
                                  uint32_t runs, bool trace, const std::string& device = "");

// An operand as text: "float32[1,3,8,8]", "int64[]" for a scalar, "-" when absent.
std::string OperandText(const client::OperandDesc& operand);
// Operands joined by ", ".
std::string OperandsText(const std::vector<client::OperandDesc>& operands);

}  // namespace remex::tooling
