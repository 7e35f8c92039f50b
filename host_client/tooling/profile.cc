#include "host_client/tooling/profile.h"

#include <algorithm>
#include <map>
#include <utility>

#include "host_client/tooling/bench_stats.h"
#include "kernels/op_cost.h"

namespace remex::tooling {

using nlohmann::json;

std::vector<ProfileEntry> ProfileEntries(const client::ProfileResult& profile) {
  uint64_t total = profile.total_nanos;
  if (total == 0) {
    for (const auto& row : profile.rows) total += row.total_nanos;
  }
  std::vector<ProfileEntry> entries;
  for (const auto& row : profile.rows) {
    ProfileEntry e;
    e.name = row.name;
    e.kind = row.kind;
    e.calls = row.calls;
    e.total_ms = row.total_nanos / 1e6;
    e.mean_us = row.calls ? row.total_nanos / 1e3 / static_cast<double>(row.calls) : 0.0;
    e.share_percent = total ? 100.0 * static_cast<double>(row.total_nanos) / static_cast<double>(total) : 0.0;
    e.copies = row.copies;
    e.copy_bytes = row.copy_bytes;
    e.allocations = row.allocations;
    e.allocated_bytes = row.allocated_bytes;
    e.peak_live_bytes = row.peak_live_bytes;
    entries.push_back(e);
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return entries;
}

ProfileMemory ProfileMemoryOf(const client::ProfileResult& profile) {
  return {profile.live_bytes_before, profile.live_bytes_after, profile.peak_live_bytes};
}

ProfileReport ProfileReportOf(const client::ProfileResult& profile) {
  ProfileReport r;
  r.rows = ProfileEntries(profile);
  r.total_ms = profile.total_nanos / 1e6;
  r.memory = ProfileMemoryOf(profile);
  r.runs = profile.runs;
  for (uint64_t t : profile.run_total_nanos) r.run_total_ms.push_back(t / 1e6);
  r.synchronized = profile.synchronized;
  r.trace_dropped = profile.trace_dropped;
  for (const auto& n : profile.nodes) {
    ProfileNodeEntry e;
    e.name = n.name;
    e.op = n.op;
    e.host = n.host;
    e.calls = n.calls;
    for (uint64_t t : n.run_nanos) e.run_ms.push_back(t / 1e6);
    std::vector<double> ms = e.run_ms;
    std::sort(ms.begin(), ms.end());
    if (!ms.empty()) {
      e.median_ms = bench::Percentile(ms, 50);
      e.min_ms = ms.front();
      e.max_ms = ms.back();
    }
    e.share_percent = r.total_ms > 0 ? 100.0 * e.median_ms / r.total_ms : 0.0;
    e.inputs = n.inputs;
    e.outputs = n.outputs;
    auto shapes = [](const std::vector<client::OperandDesc>& list) {
      std::vector<kernels::OperandShape> out;
      for (const auto& o : list) out.push_back({o.present, o.dtype, o.shape});
      return out;
    };
    const std::vector<kernels::OperandShape> in = shapes(n.inputs), out = shapes(n.outputs);
    e.ops = kernels::KernelOps(e.op, in, out);
    e.bytes = kernels::OperandBytes(in, out);
    if (e.median_ms > 0 && e.calls > 0) {
      const double call_seconds = e.median_ms / 1e3 / static_cast<double>(e.calls);
      e.gops_per_s = e.ops / call_seconds / 1e9;
      e.gbytes_per_s = e.bytes / call_seconds / 1e9;
    }
    r.ops += e.ops * static_cast<double>(e.calls);
    r.nodes.push_back(std::move(e));
  }
  if (r.total_ms > 0) r.gops_per_s = r.ops / (r.total_ms / 1e3) / 1e9;
  std::stable_sort(r.nodes.begin(), r.nodes.end(), [](const auto& a, const auto& b) {
    return a.median_ms != b.median_ms ? a.median_ms > b.median_ms : a.name < b.name;
  });
  return r;
}

std::string OperandText(const client::OperandDesc& operand) {
  if (!operand.present) return "-";
  std::string s = std::string(DTypeName(operand.dtype)) + "[";
  for (size_t i = 0; i < operand.shape.size(); ++i) s += (i ? "," : "") + std::to_string(operand.shape[i]);
  return s + "]";
}

std::string OperandsText(const std::vector<client::OperandDesc>& operands) {
  std::string s;
  for (const auto& o : operands) s += (s.empty() ? "" : ", ") + OperandText(o);
  return s;
}

json TraceJson(const client::ProfileResult& profile, const std::string& process_name) {
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 1},
                    {"args", {{"name", process_name.empty() ? std::string("remex-server") : process_name}}}});
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "VM"}}}});
  auto us = [](uint64_t nanos) { return static_cast<double>(nanos) / 1e3; };
  auto operands = [](const std::vector<client::OperandDesc>& list) {
    json a = json::array();
    for (const auto& o : list) a.push_back(OperandText(o));
    return a;
  };
  // Each run's slice spans its instructions, from the first one's start to the last
  // one's end; its args give the run's whole time (the VM's own work around them too).
  std::map<uint16_t, std::pair<uint64_t, uint64_t>> run_span;
  for (const auto& e : profile.trace) {
    const uint64_t end = e.start_nanos + e.nanos;
    auto [it, added] = run_span.emplace(e.run, std::make_pair(e.start_nanos, end));
    if (!added) it->second = {std::min(it->second.first, e.start_nanos), std::max(it->second.second, end)};
  }
  for (const auto& [run, span] : run_span) {
    json args = {{"run", run + 1}, {"median", run == profile.median_run}};
    if (run < profile.run_total_nanos.size()) args["total_ms"] = profile.run_total_nanos[run] / 1e6;
    events.push_back({{"name", "invoke " + std::to_string(run + 1)},
                      {"cat", "invoke"},
                      {"ph", "X"},
                      {"ts", us(span.first)},
                      {"dur", us(span.second - span.first)},
                      {"pid", 1},
                      {"tid", 1},
                      {"args", std::move(args)}});
  }
  for (const auto& e : profile.trace) {
    // Indices were checked when the reply was read (client::Session::Profile).
    const std::string& opcode = profile.opcode_names[e.opcode];
    json args = {{"opcode", opcode},
                 {"function", profile.function_names[e.function]},
                 {"pc", e.pc},
                 {"run", e.run + 1}};
    std::string name = opcode, cat = "instruction";
    if (e.node >= 0) {
      const client::ProfileNode& node = profile.nodes[e.node];
      name = node.name.empty() ? node.op : node.name;
      cat = "kernel";
      args["op"] = node.op;
      args["inputs"] = operands(node.inputs);
      args["outputs"] = operands(node.outputs);
      if (node.host) args["host"] = true;
    }
    events.push_back({{"name", name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"ts", us(e.start_nanos)},
                      {"dur", us(e.nanos)},
                      {"pid", 1},
                      {"tid", 1},
                      {"args", std::move(args)}});
  }
  json j = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  j["otherData"] = {{"runs", profile.runs},
                    {"median_run", profile.median_run + 1},
                    {"synchronized", profile.synchronized},
                    {"dropped_events", profile.trace_dropped}};
  return j;
}

StatusOr<ProfileReport> ProfileVm(client::Session& session, uint64_t vm, const std::string& function,
                                  uint32_t runs, bool trace, const std::string& device) {
  client::ProfileOptions options;
  options.runs = runs;
  options.trace = trace;
  auto profile = session.Profile(vm, function, options);
  if (!profile.ok()) return profile.status().WithContext("profile");
  ProfileReport r = ProfileReportOf(*profile);
  if (trace) r.trace = TraceJson(*profile, device.empty() ? "remex-server" : "remex-server: " + device);
  return r;
}

}  // namespace remex::tooling
