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

namespace {

std::string PercentileName(double q) { return q == 50 ? "median" : Format("p%g", q); }

std::string Join(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

}  // namespace

std::string BenchText(const BenchReport& r) {
  const auto& s = r.stats;
  char line[512];
  std::snprintf(line, sizeof line, "bench   %s: %zu samples x %u calls (warmup %u, timer %s), ms per call\n",
                r.function.c_str(), r.samples_ms.size(), r.number, r.options.timing.warmup, r.timer.c_str());
  std::string text = line;
  std::snprintf(line, sizeof line, "        mean %.4f  min %.4f  max %.4f  std %.4f\n", s.mean, s.min, s.max,
                s.std);
  text += line;
  const double percent = 100 * r.options.confidence;
  for (const auto& p : r.percentiles) {
    const std::string name = PercentileName(p.q);
    if (p.bounded) {
      std::snprintf(line, sizeof line, "        %-6s %.4f  %g %% interval [%.4f, %.4f]\n", name.c_str(),
                    p.value, percent, p.lower, p.upper);
    } else {
      std::snprintf(
          line, sizeof line, "        %-6s not enough samples for a %g %% interval (%zu needed, %zu taken)\n",
          name.c_str(), percent, bench::MinSamplesToBound(p.q, r.options.confidence), r.samples_ms.size());
    }
    text += line;
  }
  const auto& x = r.extended;
  std::snprintf(line, sizeof line, "        run %.3f s of samples in %u request%s", x.duration_s, x.requests,
                x.requests == 1 ? "" : "s");
  text += line;
  if (!x.reasons.empty()) text += ", extended for " + Join(x.reasons);
  if (!x.unmet.empty()) {
    text += "; max trials reached, still lacking " + Join(x.unmet);
  }
  text += "\n";
  const auto& st = r.stability;
  std::snprintf(line, sizeof line, "        %s; windows of %.0f ms%s, %s latency\n", st.verdict.c_str(),
                st.window_ms, st.window_widened ? " (widened to the longest sample)" : "",
                PercentileName(st.percentile).c_str());
  text += line;
  if (r.profile_total_ms) text += ProfileText(r.profile, *r.profile_total_ms);
  return text;
}

}  // namespace remex::tooling
