// The op table (kernels/ops/ops.def) in C++: one row per versioned op entry, with its
// family and the devices it has kernels on, and the checks that hold registration to
// it. RegisterOpDefs, RegisterCpuKernels and RegisterCudaKernels fail with
// FAILED_PRECONDITION, naming each missing or extra row, when what the families
// register differs from the table: an op is added by its family's files and its row.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"

namespace remex::kernels::internal {

// The devices an entry has kernels on (the last column of a row).
enum class OpDevices { kCpuOnly, kCpuCuda };

// One row of kernels/ops/ops.def.
struct OpRow {
  std::string_view family;  // kernels/ops/<family>/, whose CPU groups register the OpDef.
  std::string_view domain;  // "" for ai.onnx, else the op's ONNX domain.
  std::string_view op;      // ONNX op_type, or an internal op's name (Fused*).
  int since_version;
  int end_version;          // kOpenEndedVersion for the op's newest entry.
  OpDevices devices;
};

// Every row of kernels/ops/ops.def, in its order.
std::span<const OpRow> OpTable();

// An OpDef entry and the family whose group registered it.
struct RegisteredOp {
  std::string_view family;
  const OpDef* def;
};

// OK when `registered` and `rows` are the same entries (op, domain, since, end) with
// the same families; else FAILED_PRECONDITION listing, one per line, each entry
// without its row (the row to add, devices kCpuCuda) and each row without its entry.
Status CheckOpDefsAgainstTable(std::span<const OpRow> rows, std::span<const RegisteredOp> registered);

// OK when `registry` has a kernel on `device` for exactly the rows whose devices
// include it (kCpu: every row; kCuda: kCpuCuda rows); else FAILED_PRECONDITION listing
// each missing kernel and each kernel of an entry whose row leaves the device out.
Status CheckKernelsAgainstTable(std::span<const OpRow> rows, const KernelRegistry& registry, DeviceKind device);

// The row of an entry as ops.def spells it, e.g. REMEX_OP(nn, "", Conv, 11, kOpen, kCpuCuda).
std::string OpRowString(const OpRow& row);

}  // namespace remex::kernels::internal
