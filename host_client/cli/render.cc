#include "host_client/cli/render.h"

#include "host_client/tooling/text.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace remex::cli {
namespace {

using ull = unsigned long long;

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void PrintTable(const std::vector<std::vector<std::string>>& rows, const char* indent, size_t gap,
                size_t first_right, FILE* out) {
  std::fputs(tooling::FormatTable(rows, indent, gap, first_right).c_str(), out);
}

void PrintSession(const tooling::SessionReport& s, FILE* out) {
  std::fprintf(out, "model   %s\ndevice  %s on %s\n", s.model.c_str(), s.device.c_str(), s.server.c_str());
  if (s.module_cache_hit) {
    std::fprintf(out, "module  in the server's module cache (0 of %llu bytes uploaded)\n", ull(s.executable_bytes));
  } else {
    std::fprintf(out, "module  %llu bytes uploaded\n", ull(s.executable_bytes));
  }
}

void PrintWire(const tooling::SessionReport& s, FILE* out) {
  const auto& c = s.compression;
  std::fprintf(out,
               "wire    %llu bytes sent, %llu bytes received; attachments %llu -> %llu bytes sent, "
               "%llu -> %llu bytes received (raw -> wire)\n",
               ull(s.bytes_sent), ull(s.bytes_received), ull(c.raw_sent), ull(c.wire_sent), ull(c.raw_received),
               ull(c.wire_received));
}

void PrintCopies(const client::DeviceCopies& c, FILE* out) {
  std::fprintf(out, "copies  device->host %llu (%llu B), host->device %llu (%llu B) in the inference\n",
               ull(c.device_to_host_count), ull(c.device_to_host_bytes), ull(c.host_to_device_count),
               ull(c.host_to_device_bytes));
}

std::string Line(const std::string& name, DType dtype, const Shape& shape) {
  return "  " + name + ": " + std::string(DTypeName(dtype)) + " " + ShapeToString(shape);
}

}  // namespace

void PrintCompile(const tooling::CompileReport& r, const std::string& output, bool print_stats, FILE* out) {
  const auto& def = r.executable;
  const auto& fn = def.functions.at(0);
  const auto& stats = r.stats;
  for (const auto& v : fn.inputs) std::fprintf(out, "input   %s\n", tooling::DescribeValue(v).c_str());
  for (const auto& v : fn.outputs) std::fprintf(out, "output  %s\n", tooling::DescribeValue(v).c_str());
  for (const auto& s : def.symbols) {
    std::string site;
    for (size_t i = 0; i < fn.inputs.size() && site.empty(); ++i) {
      for (size_t d = 0; d < fn.inputs[i].dims.size(); ++d) {
        if (fn.inputs[i].dims[d] == s.name) {
          site = fn.inputs[i].name + ":" + std::to_string(d);
          break;
        }
      }
    }
    std::fprintf(out, "symbol  %s in [%lld, %s]%s\n", s.name.c_str(), static_cast<long long>(s.min),
                 s.max >= 0 ? std::to_string(s.max).c_str() : "inf",
                 site.empty() || site == s.name ? "" : ("  (" + site + ")").c_str());
  }
  if (stats.buckets > 0) {
    std::fprintf(out, "dispatch %d buckets over %zu symbols: %zu functions (dispatcher, %d clones%s)\n", stats.buckets,
                 r.options.dispatch.size(), def.functions.size(), stats.buckets,
                 r.options.strict_dispatch ? "; --strict" : ", generic");
  }
  if (print_stats) {
    std::fprintf(out, "kernels by op:\n");
    for (const auto& [op, n] : r.kernels_by_op) std::fprintf(out, "  %-28s %d\n", op.c_str(), n);
    std::fprintf(out,
                 "host kernels %d, shape functions at run time %d, explicit copies to host %d, bytecode %zu "
                 "instructions\n",
                 stats.host_kernels, stats.runtime_shape_functions, stats.copies_to_host, fn.code.size());
    std::fprintf(out, "transpose kernels %d: %d at the edges, %d in the body\n", stats.transposes,
                 stats.transposes_at_edges, stats.transposes - stats.transposes_at_edges);
    const auto& l = stats.layout;
    std::fprintf(out,
                 "layout %s: %d layout changes (%d at the edges, %d in the body), %d nodes NHWC, %d constants "
                 "permuted\n",
                 compiler::LayoutName(r.options.layout),
                 l.transposes_at_edges + l.transposes_in_body, l.transposes_at_edges, l.transposes_in_body,
                 l.nodes_nhwc, l.constants_permuted);
    std::fprintf(out, "folded: %d BatchNormalization nodes into their Conv's weights, %d more rewritten as Mul and Add\n",
                 stats.batchnorms_folded, stats.batchnorms_decomposed);
    std::fprintf(out, "recognised: %d decomposed HardSwish chains as HardSwish, %d SiLU / Swish as Swish, %d GELU as Gelu\n",
                 stats.hardswish_recognized, stats.swish_recognized, stats.gelu_recognized);
    std::fprintf(out,
                 "fused epilogues: %d FusedConv, %d FusedMatMul and %d FusedMatMulInteger kernels absorb %d Add, "
                 "activation, Cast and Mul nodes\n",
                 stats.fused_convs, stats.fused_matmuls, stats.fused_matmul_integers, stats.epilogue_nodes);
    std::fprintf(out, "fused attention: %d FusedAttention kernels replace %d nodes\n", stats.fused_attentions,
                 stats.attention_nodes);
    std::fprintf(out, "fused elementwise: %d FusedElementwise kernels replace %d nodes; %d FusedQLinearAdd\n",
                 stats.fused_kernels, stats.nodes_fused, stats.quantized_adds);
    std::fprintf(out, "dtype %s: %d nodes converted, %d constants converted, %d casts inserted\n",
                 r.options.dtype == DType::kUndefined ? "the model's own" : std::string(DTypeName(r.options.dtype)).c_str(),
                 stats.precision.nodes_converted,
                 stats.precision.constants_converted, stats.precision.casts_inserted);
    if (stats.buckets > 0) std::fprintf(out, "buckets %d\n", stats.buckets);
    std::fprintf(out, "%-44s %-10s %7s %7s %9s %6s %12s %10s %9s\n", "function", "role", "kernels", "instrs",
                 "code B", "shapefn", "arena B", "host B", "planned");
    uint64_t code_bytes = 0;
    for (const auto& f : stats.functions) {
      std::string planned = f.role == "bucket" ? std::to_string(f.memory.planned) + "/" +
                                                     std::to_string(f.memory.planned + f.memory.dynamic)
                                               : "-";
      std::fprintf(out, "%-44s %-10s %7d %7d %9llu %6d %12llu %10llu %9s\n", f.name.c_str(), f.role.c_str(),
                   f.kernels, f.instructions, ull(f.code_bytes), f.runtime_shape_functions,
                   ull(f.memory.arena_bytes[0]), ull(f.memory.arena_bytes[1]), planned.c_str());
      code_bytes += f.code_bytes;
    }
    std::fprintf(out,
                 "bytecode %llu bytes in %zu functions; constants %llu bytes (%llu if each function kept its own); "
                 "executable %zu bytes; compiled in %.2f s\n",
                 ull(code_bytes), stats.functions.size(), ull(stats.constant_bytes),
                 ull(stats.constant_bytes_unshared), r.bytes.size(), stats.compile_seconds);
  }
  std::fprintf(out,
               "%s: %d nodes -> %d kernels (%d folded, %d removed, %d computed once for several, %d shape "
               "functions at run time), %.1f KiB constants, %zu bytes written to %s\n",
               r.model.c_str(), stats.nodes_in, stats.kernels, stats.nodes_folded, stats.nodes_removed,
               stats.common_subexpressions, stats.runtime_shape_functions, stats.constant_bytes / 1024.0, r.bytes.size(), output.c_str());
}

void PrintRun(const tooling::RunReport& r, bool verbose, FILE* out) {
  PrintSession(r.session, out);
  std::fprintf(out, "outputs\n");
  for (const auto& o : r.outputs) {
    std::string line = Line(o.name, o.dtype, o.shape);
    if (o.fetched) {
      if (!o.summary.empty()) line += "  " + o.summary;
      if (!o.file.empty()) line += "  -> " + o.file;
    } else {
      line += "  (not fetched)";
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
  if (r.function.find('[') != std::string::npos || verbose) {
    std::fprintf(out, "served  by function %s\n", r.function.c_str());
  }
  if (verbose) {
    PrintWire(r.session, out);
    PrintCopies(r.copies, out);
    std::fprintf(out, "allocs  %llu buffer allocations in the inference\n", ull(r.allocations));
    if (r.graph) std::fprintf(out, "graph   the call launched a device graph (CUDA Graph)\n");
  }
  std::fprintf(out, "time    compile %.1f ms, upload %.1f ms, run %.2f ms (server %.2f ms), fetch %.2f ms\n",
               r.session.compile_ms, r.session.upload_ms, r.run_ms, r.server_run_ms, r.fetch_ms);
}

void PrintBench(const tooling::BenchReport& r, bool verbose, FILE* out) {
  PrintSession(r.session, out);
  std::fputs(tooling::BenchText(r).c_str(), out);
  for (const auto& w : tooling::EnvironmentWarnings(r.session.environment)) {
    std::fprintf(out, "warning %s\n        fix: %s\n", w.message.c_str(), w.fix.c_str());
  }
  if (verbose) PrintWire(r.session, out);
}

void PrintCheck(const tooling::CheckReport& r, bool verbose, FILE* out) {
  PrintSession(r.session, out);
  std::fprintf(out, "check   against %s (rtol %g, atol %g%s)\n", r.options.reference.c_str(), r.options.rtol,
               r.options.atol, r.options.equal_nan ? ", NaN equal" : "");
  for (const auto& o : r.outputs) {
    std::string line = Line(o.name, o.dtype, o.shape) + "  ";
    if (o.verdict == "missing") {
      line += "NO REFERENCE  (" + o.reason + ")";
    } else if (o.stats.count == 0 && o.verdict == "mismatch") {
      line += "MISMATCH  (" + o.reason + ")";
    } else {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s  (%llu of %llu elements mismatch, max abs error %.3g, max rel error %.3g",
                    o.verdict == "match" ? "ok" : "MISMATCH", ull(o.stats.mismatches), ull(o.stats.count),
                    o.stats.max_abs_error, o.stats.max_rel_error);
      line += buf;
      if (o.verdict != "match") line += ", first at flat index " + std::to_string(o.stats.first_mismatch);
      line += ")";
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
  if (verbose) {
    PrintWire(r.session, out);
    PrintCopies(r.copies, out);
  }
  const bool mismatch = std::any_of(r.outputs.begin(), r.outputs.end(), [](const auto& o) { return o.verdict == "mismatch"; });
  std::fprintf(out, "%s\n", r.match ? "match" : mismatch ? "MISMATCH" : "NO REFERENCE for some outputs");
}

void PrintCompare(const compare::PathComparison& r, FILE* out) {
  for (const auto& f : r.files) {
    if (f.missing) {
      std::fprintf(out, "%s: MISMATCH (missing: %s)\n", f.name.c_str(), f.actual.c_str());
      continue;
    }
    std::fprintf(out, "%s: %s (%llu of %llu elements mismatch, max abs error %.3g, max rel error %.3g)\n",
                 f.name.c_str(), f.match() ? "ok" : "MISMATCH", ull(f.stats.mismatches), ull(f.stats.count),
                 f.stats.max_abs_error, f.stats.max_rel_error);
  }
  std::fprintf(out, "%s\n", r.match() ? "match" : "MISMATCH");
}

void PrintFarmStatus(const tooling::FarmStatusReport& report, FILE* out) {
  std::fprintf(out, "farm %s: %zu device%s in %zu pool%s%s\n", report.url.c_str(), report.devices.size(),
               report.devices.size() == 1 ? "" : "s", report.pools.size(), report.pools.size() == 1 ? "" : "s",
               report.selector.empty() ? "" : (" matching " + report.selector).c_str());
  if (!report.devices.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"POOL", "DEVICE", "STATE", "HOLDER", "LEASED FOR", "KIND", "MEMORY", "HEARTBEAT", "UP", "LABELS", "DESCRIPTION"}};
    for (const farm::DeviceRecord& d : report.devices) {
      std::string state(farm::DeviceStateName(d.state));
      if (d.state == farm::DeviceState::kQuarantined) state += " (" + d.health + ")";
      rows.push_back({d.pool, d.id, state, d.leased ? d.holder : "-",
                      d.leased ? Format("%.1f s", (report.now_ms - d.lease_since_ms) / 1000.0) : "-", d.kind,
                      Format("%.1f GiB", static_cast<double>(d.memory_bytes) / (1ull << 30)),
                      Format("%.1f s ago", (report.now_ms - d.heartbeat_ms) / 1000.0),
                      Format("%.1f s", (report.now_ms - d.registered_ms) / 1000.0),
                      d.labels.empty() ? "-" : farm::FormatLabels(d.labels), d.description});
    }
    std::fprintf(out, "\n");
    PrintTable(rows, "", 2, rows[0].size(), out);
    std::vector<std::vector<std::string>> pools = {
        {"POOL", "DEVICES", "IDLE", "LEASED", "DRAINING", "QUARANTINED", "WAITING"}};
    for (const tooling::FarmPoolSummary& p : report.pools) {
      pools.push_back({p.name, std::to_string(p.devices), std::to_string(p.idle), std::to_string(p.leased),
                       std::to_string(p.draining), std::to_string(p.quarantined), std::to_string(p.waiting)});
    }
    std::fprintf(out, "\n");
    PrintTable(pools, "", 2, 1, out);
  }
  for (const std::string& s : report.skipped) std::fprintf(out, "skipped record %s\n", s.c_str());
}

void PrintSuite(const tooling::SuiteReport& report, FILE* out) {
  std::vector<std::vector<std::string>> rows = {{"CASE", "OUTCOME", "TIME", "MAX ERROR", "MEDIAN", "DEVICE", "WHY"}};
  for (const tooling::CaseResult& c : report.cases) {
    rows.push_back({c.name, c.outcome, Format("%.2f s", c.seconds), Format("%.3g", c.max_abs_error),
                    c.median_ms ? Format("%.3f ms", *c.median_ms) : "-", c.device.empty() ? "-" : c.device,
                    c.message.empty() ? "-" : c.message});
  }
  std::fprintf(out, "suite %s: %zu case%s\n\n", report.name.c_str(), report.cases.size(),
               report.cases.size() == 1 ? "" : "s");
  PrintTable(rows, "", 2, rows[0].size(), out);
  std::fprintf(out, "\n%d passed, %d failed, %d errors in %.2f s\n", report.passed, report.failed, report.errors,
               report.seconds);
}

}  // namespace remex::cli
