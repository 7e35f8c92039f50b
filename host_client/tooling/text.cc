#include "host_client/tooling/text.h"

#include <algorithm>
#include <cstdio>

namespace remex::tooling {
namespace {

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string FormatTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent, size_t gap,
                        size_t first_right) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      if (i > 0) line += std::string(gap, ' ');
      if (i >= first_right) line += pad;
      line += row[i];
      if (i < first_right && i + 1 < row.size()) line += pad;
    }
    text += line + "\n";
  }
  return text;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const double b = static_cast<double>(bytes);
  if (bytes < (uint64_t{1} << 20)) return Format("%.1f KiB", b / 1024);
  if (bytes < (uint64_t{1} << 30)) return Format("%.1f MiB", b / (1 << 20));
  return Format("%.2f GiB", b / (1 << 30));
}

std::string ArraySummary(const npy::Array& a) {
  const size_t n = static_cast<size_t>(NumElements(a.shape).value_or(0));
  if (a.dtype != DType::kFloat32 || n == 0 || a.data.size() < n * sizeof(float)) return "";
  const float* p = reinterpret_cast<const float*>(a.data.data());
  if (n <= 16) {
    std::string s = "[";
    size_t best = 0;
    for (size_t i = 0; i < n; ++i) {
      s += (i ? ", " : "") + Format("%.6g", p[i]);
      if (p[i] > p[best]) best = i;
    }
    return s + "]  argmax " + std::to_string(best);
  }
  double mn = p[0], mx = p[0], sum = 0;
  for (size_t i = 0; i < n; ++i) {
    mn = std::min<double>(mn, p[i]);
    mx = std::max<double>(mx, p[i]);
    sum += p[i];
  }
  return "min " + Format("%.6g", mn) + " max " + Format("%.6g", mx) + " mean " + Format("%.6g", sum / n);
}

std::string ProfileText(const std::vector<ProfileEntry>& profile, double total_ms) {
  std::string text = Format("profile one invoke, %.3f ms on the device\n", total_ms);
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"name", "kind", "calls", "total ms", "mean us", "share %", "copies", "copy bytes"});
  for (const auto& e : profile) {
    cells.push_back({e.name, e.kind, std::to_string(e.calls), Format("%.3f", e.total_ms), Format("%.1f", e.mean_us),
                     Format("%.1f", e.share_percent), std::to_string(e.copies), std::to_string(e.copy_bytes)});
  }
  text += FormatTable(cells, "  ", 1, 2);  // text left, numbers right
  text += "  (kernel rows break down the InvokeKernel row; shares are of the whole invoke)\n";
  return text;
}

std::string BenchText(const BenchReport& r) {
  const auto& s = r.stats;
  char line[512];
  std::snprintf(line, sizeof line, "bench   %s: %zu samples x %u calls (warmup %u, timer %s), ms per call\n",
                r.function.c_str(), r.samples_ms.size(), r.number, r.options.timing.warmup, r.timer.c_str());
  std::string text = line;
  const std::string p99 = r.has_p99 ? Format("p99 %.4f  ", s.p99) : "";
  std::snprintf(line, sizeof line, "        mean %.4f  median %.4f  p90 %.4f  %smin %.4f  max %.4f  std %.4f\n",
                s.mean, s.median, s.p90, p99.c_str(), s.min, s.max, s.std);
  text += line;
  if (!r.has_p99) {
    std::snprintf(line, sizeof line, "        (p99 from %zu samples on: --repeat %zu)\n", bench::kMinSamplesForP99,
                  bench::kMinSamplesForP99);
    text += line;
  }
  text += "        " + r.stability.verdict + "\n";
  if (r.profile_total_ms) text += ProfileText(r.profile, *r.profile_total_ms);
  return text;
}

}  // namespace remex::tooling
