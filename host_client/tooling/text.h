// Plain-text forms shared by every front end (the remex CLI's reports, the shell, the
// Python client's tables): one formatting of each thing.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "host_client/client/client.h"
#include "host_client/client/npy.h"
#include "host_client/tooling/run.h"

namespace remex::tooling {

// printf into a string; `format` must be a literal (checked by the compiler's format
// warnings at each call).
template <typename... Args>
std::string Format(const char* format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  if (n <= 0) return "";
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

// Rows of cells, each column as wide as its widest cell, one line per row ending in
// '\n': `indent`, then the cells `gap` spaces apart, left-aligned before column
// `first_right` and right-aligned from it.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent, size_t gap,
                        size_t first_right);

// A size in bytes for people: "812 B", "110.6 KiB", "12.3 MiB", "1.50 GiB".
std::string FormatBytes(uint64_t bytes);

// A short summary of a fetched tensor, for people: float32 values when there are at most
// 16 with their argmax ("[0.1, 0.7, 0.2]  argmax 1"), else "min .. max .. mean ..";
// "" for other dtypes and empty tensors.
std::string ArraySummary(const npy::Array& array);

// The timing of a benchmark: its samples' statistics in ms per call and the stability
// verdict (the lines `remex bench` prints after the session's), then the profile
// table when the report has one.
std::string BenchText(const BenchReport& report);

// The profile of one invoke as a table: a row per op (kernels) and instruction kind,
// largest total first, with calls, total ms, mean us, share %, device copies, device
// allocations, their bytes and the peak live bytes; with `memory`, a line of the
// invoke's live bytes before, at peak and after.
std::string ProfileText(const std::vector<ProfileEntry>& profile, double total_ms,
                        const ProfileMemory* memory = nullptr);
// A profile of one or more invokes: its runs and the median run's total, the table
// above (of the median run), then the `top` slowest nodes (0: none) with their op,
// operands ("float32[1,3,8,8], ... -> ..."), median, least and most ms per invoke over
// the runs, share of the median invoke and calls per invoke.
std::string ProfileText(const ProfileReport& profile, size_t top = kDefaultProfileTop);

}  // namespace remex::tooling
