#include "host_client/tooling/text.h"

#include <algorithm>
#include <cstdio>

namespace remex::tooling {

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

namespace {

// The op-kind table and its note, after the memory line.
std::string ProfileRowsText(const std::vector<ProfileEntry>& profile, const ProfileMemory* memory) {
  std::string text;
  if (memory && memory->peak_live_bytes != 0) {  // 0: a server before these fields
    text += "  device memory live " + FormatBytes(memory->live_bytes_before) + " before, " +
            FormatBytes(memory->peak_live_bytes) + " at peak, " + FormatBytes(memory->live_bytes_after) + " after\n";
  }
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"name", "kind", "calls", "total ms", "mean us", "share %", "copies", "copy bytes", "allocs",
                   "alloc bytes", "peak live"});
  for (const auto& e : profile) {
    cells.push_back({e.name, e.kind, std::to_string(e.calls), Format("%.3f", e.total_ms), Format("%.1f", e.mean_us),
                     Format("%.1f", e.share_percent), std::to_string(e.copies), std::to_string(e.copy_bytes),
                     std::to_string(e.allocations), FormatBytes(e.allocated_bytes), FormatBytes(e.peak_live_bytes)});
  }
  text += FormatTable(cells, "  ", 1, 2);  // text left, numbers right
  text += "  (kernel rows break down the InvokeKernel row's time, and count the buffers allocated for\n"
          "   their outputs; shares are of the whole invoke; memory is the session's device allocator:\n"
          "   alloc bytes in its size classes, peak live right after the row's instructions; tensors in\n"
          "   a planned arena are no allocations)\n";
  return text;
}

}  // namespace

std::string ProfileText(const std::vector<ProfileEntry>& profile, double total_ms,
                        const ProfileMemory* memory) {
  return Format("profile one invoke, %.3f ms on the device\n", total_ms) + ProfileRowsText(profile, memory);
}

std::string ProfileText(const ProfileReport& p, size_t top) {
  std::string text =
      p.runs <= 1
          ? Format("profile one invoke, %.3f ms on the device", p.total_ms)
          : Format("profile %u invokes, the median one %.3f ms on the device (each between %.3f and %.3f)",
                   p.runs, p.total_ms,
                   p.run_total_ms.empty() ? p.total_ms
                                          : *std::min_element(p.run_total_ms.begin(), p.run_total_ms.end()),
                   p.run_total_ms.empty() ? p.total_ms
                                          : *std::max_element(p.run_total_ms.begin(), p.run_total_ms.end()));
  text += p.synchronized ? "; each instruction timed to the end of its device work\n" : "\n";
  text += ProfileRowsText(p.rows, &p.memory);
  if (top == 0 || p.nodes.empty()) return text;
  const size_t shown = std::min(top, p.nodes.size());
  if (p.ops > 0) {
    text += Format("convolutions and products: %.3f GOP per invoke, %.1f GOP/s over the median invoke\n",
                   p.ops / 1e9, p.gops_per_s);
  }
  text += Format("slowest nodes: %zu of %zu, by their median time per invoke", shown, p.nodes.size());
  text += p.runs > 1 ? Format(" over %u invokes", p.runs) : std::string();
  text += "; GOP/s and GB/s: each call's operations and operand bytes over its median time\n";
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"#", "node", "op", "inputs -> outputs", "median ms", "min ms", "max ms", "share %", "calls",
                   "GOP/s", "GB/s"});
  for (size_t i = 0; i < shown; ++i) {
    const ProfileNodeEntry& n = p.nodes[i];
    cells.push_back({std::to_string(i + 1), n.name.empty() ? "-" : n.name, n.op + (n.host ? " (host)" : ""),
                     OperandsText(n.inputs) + " -> " + OperandsText(n.outputs), Format("%.4f", n.median_ms),
                     Format("%.4f", n.min_ms), Format("%.4f", n.max_ms), Format("%.1f", n.share_percent),
                     std::to_string(n.calls), n.ops > 0 ? Format("%.1f", n.gops_per_s) : std::string("-"),
                     n.gbytes_per_s > 0 ? Format("%.2f", n.gbytes_per_s) : std::string("-")});
  }
  // "#" right-aligned would misplace the text columns: numbers from the fifth.
  text += FormatTable(cells, "  ", 2, 4);
  return text;
}

namespace {

std::string PercentileName(double q) { return q == 50 ? "median" : Format("p%g", q); }

std::string Join(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

// A percentile with its interval: "1.234 [1.201, 1.262]", or "1.234 [not enough samples]".
std::string WithInterval(const bench::PercentileEstimate& e) {
  if (!e.bounded) return Format("%.4g [n/a: not enough samples]", e.value);
  return Format("%.4g [%.4g, %.4g]", e.value, e.lower, e.upper);
}

// "partial REASON after N samples; the numbers below cover only those" (a load
// scenario: N levels, or probes of a peak search): a partial report's first line; ""
// for a complete one.
std::string PartialText(const BenchReport& r) {
  if (r.partial.empty()) return "";
  std::string taken = std::to_string(r.samples_ms.size()) + " samples";
  if (r.load) {
    const size_t n = r.load->levels.size();
    taken = std::to_string(n) + (r.load->options.find_peak ? " probe" : " level") + (n == 1 ? "" : "s");
  }
  return "partial " + r.partial + " after " + taken + "; the numbers below cover only those\n";
}

std::string LoadText(const BenchReport& r) {
  const LoadRun& run = *r.load;
  const LoadOptions& o = run.options;
  std::string head = "bench   " + r.function + ": scenario " + LoadScenarioName(o.scenario);
  switch (o.scenario) {
    case client::LoadScenario::kServer:
      head += o.find_peak ? Format(", peak search under p99 <= %g ms", o.latency_bound_ms)
                          : Format(" at %g QPS", o.target_qps);
      head += Format(" (Poisson arrivals, seed %llu); latency from the scheduled arrival",
                     static_cast<unsigned long long>(o.seed));
      break;
    case client::LoadScenario::kMultiStream:
      head += Format(", %u samples per query; latency until a query's last sample", o.samples_per_query);
      break;
    case client::LoadScenario::kOffline: head += ", every query issued at once; latency from the start"; break;
    case client::LoadScenario::kSingleStream: head += ", closed-loop streams; latency per query"; break;
  }
  if (o.from_client) head += "; driven from this host over the wire (one session per instance)";
  std::string text = PartialText(r) + head + "\n";
  const std::string ci = Format("[%g%% CI]", o.confidence * 100);
  std::vector<std::vector<std::string>> rows = {{"CONCURRENCY", "TARGET QPS", "QPS", "QUERIES", "p50 ms " + ci,
                                                 "p90 ms " + ci, "p99 ms " + ci, "LATE", "DROPPED", "TRIALS", "STABLE"}};
  for (const LoadLevel& l : run.levels) {
    std::vector<std::string> row = {std::to_string(l.concurrency), l.target_qps > 0 ? Format("%g", l.target_qps) : "-",
                                    Format("%.1f", l.throughput_qps), std::to_string(l.completed)};
    for (double q : {50.0, 90.0, 99.0}) {
      auto it = std::find_if(l.percentiles.begin(), l.percentiles.end(), [&](const auto& e) { return e.q == q; });
      row.push_back(it == l.percentiles.end() ? "-" : WithInterval(*it));
    }
    const bool judged = o.scenario == client::LoadScenario::kSingleStream ||
                        o.scenario == client::LoadScenario::kMultiStream;
    row.insert(row.end(), {std::to_string(l.late), std::to_string(l.dropped), std::to_string(l.trials),
                           judged ? (l.stability.stable ? "yes" : "NO") : "-"});
    rows.push_back(std::move(row));
  }
  text += FormatTable(rows, "        ", 2, 1);
  for (const LoadLevel& l : run.levels) {
    const bool judged = o.scenario == client::LoadScenario::kSingleStream ||
                        o.scenario == client::LoadScenario::kMultiStream;
    if (judged && !l.stability.stable) {
      text += Format("        concurrency %u: %s\n", l.concurrency, l.stability.verdict.c_str());
    }
  }
  if (o.find_peak && run.stopped) {
    text += run.peak_qps
                ? Format("        peak    %.4g QPS or more: the search stopped after %zu probe%s\n",
                         *run.peak_qps, run.probes.size(), run.probes.size() == 1 ? "" : "s")
                : Format("        peak    none of %zu probes kept p99 <= %g ms before the search stopped\n",
                         run.probes.size(), o.latency_bound_ms);
  } else if (o.find_peak) {
    text += run.peak_qps ? Format("        peak    %.4g QPS with p99 <= %g ms and nothing dropped (%zu probes)\n",
                                  *run.peak_qps, o.latency_bound_ms, run.probes.size())
                         : Format("        peak    none: no probed rate kept p99 <= %g ms (%zu probes)\n",
                                  o.latency_bound_ms, run.probes.size());
  }
  if (o.audit_samples > 0) {
    uint32_t checked = 0, mismatches = 0;
    std::string first;
    for (const LoadLevel& l : run.levels) {
      checked += l.audit.checked;
      mismatches += l.audit.mismatches;
      if (first.empty()) first = l.audit.first_mismatch;
    }
    const std::string rule = o.audit_rtol == 0 && o.audit_atol == 0 ? "equal values"
                                                                     : Format("rtol %g, atol %g", o.audit_rtol, o.audit_atol);
    text += mismatches == 0
                ? Format("        audit   %u timed samples match the untimed reference (%s)\n", checked, rule.c_str())
                : Format("        AUDIT FAILED: %u of %u timed samples differ from the untimed reference (%s): %s\n",
                         mismatches, checked, rule.c_str(), first.c_str());
  }
  return text;
}

// Cold start against warm, and memory: the lines after the timing.
std::string PhasesText(const BenchReport& r) {
  auto ms = [](uint64_t ns) { return ns ? Format("%.2f ms", ns / 1e6) : std::string("-"); };
  std::string text = "cold    ";
  text += r.module_load_ms > 0 ? Format("module load %.2f ms", r.module_load_ms) : std::string("module from the cache");
  text += ", VM create " + ms(r.phases.vm_create_nanos) + ", first call " + ms(r.phases.first_invoke_nanos);
  if (r.load) {
    text += "; instances " + ms(r.phases.instances_create_nanos) + ", an instance's first call " +
            ms(r.phases.instance_first_invoke_nanos);
  }
  text += "\n";
  const client::MemoryUse& m = r.memory;
  if (m.weights_bytes || m.invoke_peak_bytes || m.resident_bytes) {
    text += "memory  weights " + FormatBytes(m.weights_bytes) + ", one call's peak " + FormatBytes(m.invoke_peak_bytes);
    if (r.load) text += ", the run's peak " + FormatBytes(m.run_peak_bytes);
    text += " (activations, workspaces, outputs); resident " + FormatBytes(m.resident_bytes) + " in the serving process (peak " +
            FormatBytes(m.resident_peak_bytes) + ")\n";
  }
  return text;
}

}  // namespace

std::string BenchText(const BenchReport& r) {
  if (r.load) {
    std::string text = LoadText(r) + PhasesText(r);
    if (r.profile) text += ProfileText(*r.profile, r.options.profile_top);
    return text;
  }
  const auto& s = r.stats;
  char line[512];
  std::snprintf(line, sizeof line, "bench   %s: %zu samples x %u calls (warmup %u, timer %s), ms per call\n",
                r.function.c_str(), r.samples_ms.size(), r.number, r.options.timing.warmup, r.timer.c_str());
  std::string text = PartialText(r);
  text += line;
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
    text += "; " + (x.stopped.empty() ? std::string("max trials reached") : x.stopped) + ", still lacking " +
            Join(x.unmet);
  }
  text += "\n";
  const auto& st = r.stability;
  std::snprintf(line, sizeof line, "        %s; windows of %.0f ms%s, %s latency\n", st.verdict.c_str(),
                st.window_ms, st.window_widened ? " (widened to the longest sample)" : "",
                PercentileName(st.percentile).c_str());
  text += line;
  text += PhasesText(r);
  if (r.profile) text += ProfileText(*r.profile, r.options.profile_top);
  return text;
}

}  // namespace remex::tooling
