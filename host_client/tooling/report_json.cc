#include "host_client/tooling/report_json.h"

#include "host_client/tooling/tuning.h"

namespace remex::tooling {
namespace {

using nlohmann::json;

// Unknown values are null: empty text, 0 counts, negative load averages.
json Text(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
json Count(uint64_t n) { return n == 0 ? json(nullptr) : json(n); }
json Load(double load) { return load < 0 ? json(nullptr) : json(load); }
json State(client::FeatureState s) {
  return s == client::FeatureState::kUnknown ? json(nullptr) : json(client::FeatureStateName(s));
}

json CompileOptionsJson(const compiler::CompileOptions& o) {
  json shapes = json::object();
  for (const auto& [name, shape] : o.input_shapes) shapes[name] = shape;
  json bounds = json::object();
  for (const auto& [name, b] : o.bounds) bounds[name] = {b.min, b.max >= 0 ? json(b.max) : json(nullptr)};
  json dispatch = json::array();
  for (const auto& d : o.dispatch) dispatch.push_back(d.symbol);
  json j = {{"layout", compiler::LayoutName(o.layout)},
          {"dtype", o.dtype == DType::kUndefined ? std::string("model") : std::string(DTypeName(o.dtype))},
          {"input_shapes", shapes},
          {"bounds", bounds},
          {"dispatch_symbols", dispatch},
          {"strict_dispatch", o.strict_dispatch},
          {"fold_constants", o.fold_constants},
          {"fold_batchnorm", o.fold_batchnorm},
          {"fuse_elementwise", o.fuse_elementwise},
          {"fuse_epilogues", o.fuse_epilogues},
          {"place_on_host", o.place_on_host},
          {"plan_memory", o.plan_memory},
          {"zstd_level", o.zstd_level}};
  // Only when set: the results store's series keys hash these options, and runs without
  // them keep the series they had.
  if (o.compute_threads) j["compute_threads"] = o.compute_threads;
  if (!o.bucket_choices.empty()) {
    json tuned = json::object();
    for (const auto& [name, choices] : o.bucket_choices) tuned[name] = ToJson(choices);
    j["bucket_choices"] = tuned;
  }
  return j;
}

// The environment fingerprint (docs/cli.md, "Environment"): server, device and gpus
// null from a server that sends none.
json Environment(const EnvironmentReport& e, const std::string& module_hash) {
  const client::ServerEnvironment& s = e.server;
  json j;
  if (s.known) {
    j["server"] = {{"remex_version", Text(s.remex_version)},
                   {"remex_commit", Text(s.remex_commit)},
                   {"args", s.server_args},
                   {"os", Text(s.os)}};
    j["device"] = {{"cpu_model", Text(s.cpu_model)},
                   {"logical_cpus", Count(s.logical_cpus)},
                   {"physical_cores", Count(s.physical_cores)},
                   {"smt", State(s.smt)},
                   {"governor", Text(s.governor)},
                   {"cpu_max_mhz", Count(s.cpu_max_mhz)},
                   {"compute_threads", Count(s.compute_threads)},
                   {"memory_bytes", Count(s.memory_bytes)},
                   {"load_average_1m", Load(s.load_average_1m)},
                   {"load_average_1m_after_benchmark", Load(e.server_load_after_benchmark_1m)}};
    json gpus = json::array();
    for (const auto& g : s.gpus) {
      gpus.push_back({{"name", Text(g.name)},
                      {"compute_capability", Text(g.compute_capability)},
                      {"cuda_runtime_version", Text(g.cuda_runtime_version)},
                      {"driver_version", Text(g.driver_version)},
                      {"sm_clock_mhz", Count(g.sm_clock_mhz)},
                      {"mem_clock_mhz", Count(g.mem_clock_mhz)},
                      {"max_sm_clock_mhz", Count(g.max_sm_clock_mhz)},
                      {"max_mem_clock_mhz", Count(g.max_mem_clock_mhz)},
                      {"applications_sm_clock_mhz", Count(g.applications_sm_clock_mhz)},
                      {"power_limit_w", g.power_limit_w > 0 ? json(g.power_limit_w) : json(nullptr)},
                      {"persistence_mode", State(g.persistence_mode)},
                      {"ecc_mode", State(g.ecc_mode)},
                      {"clocks_locked", State(g.clocks_locked)}});
    }
    j["gpus"] = gpus;
  } else {
    j["server"] = nullptr;
    j["device"] = nullptr;
    j["gpus"] = json::array();
  }
  j["host"] = {{"remex_version", Text(e.host.remex_version)},
               {"remex_commit", Text(e.host.remex_commit)},
               {"os", Text(e.host.os)},
               {"logical_cpus", Count(e.host.logical_cpus)},
               {"load_average_1m", Load(e.host.load_average_1m)}};
  j["executable"] = {{"hash", Text(module_hash)},
                     {"compile_options", e.compile_options ? CompileOptionsJson(*e.compile_options) : json(nullptr)}};
  return j;
}

// The fields every report of run, bench and check has.
void AddSession(const SessionReport& s, json& j) {
  j["model"] = s.model;
  j["server"] = s.server;
  j["device"] = s.device;
  j["session_id"] = s.session_id;
  j["bytes"] = {{"sent", s.bytes_sent},
                {"received", s.bytes_received},
                {"executable", s.executable_bytes},
                {"executable_uploaded", s.module_cache_hit ? 0 : s.executable_bytes}};
  j["compression"] = {{"raw_sent", s.compression.raw_sent},
                      {"wire_sent", s.compression.wire_sent},
                      {"raw_received", s.compression.raw_received},
                      {"wire_received", s.compression.wire_received}};
  j["module_cache"] = {{"hit", s.module_cache_hit}, {"hash", s.module_hash}};
  j["environment"] = Environment(s.environment, s.module_hash);
  json warnings = json::array();
  for (const auto& w : EnvironmentWarnings(s.environment)) {
    warnings.push_back({{"code", w.code}, {"message", w.message}, {"fix", w.fix}});
  }
  j["warnings"] = warnings;
}

json Copies(const client::DeviceCopies& c) {
  return {{"host_to_device", {{"count", c.host_to_device_count}, {"bytes", c.host_to_device_bytes}}},
          {"device_to_host", {{"count", c.device_to_host_count}, {"bytes", c.device_to_host_bytes}}}};
}

json Stats(const AllcloseStats& s) {
  return {{"count", s.count},
          {"mismatches", s.mismatches},
          {"max_abs_error", s.max_abs_error},
          {"max_rel_error", std::isinf(s.max_rel_error) ? json("inf") : json(s.max_rel_error)},
          {"first_mismatch", s.first_mismatch}};
}

json Value(const vm::ValueDesc& v) {
  json dims = json::array();
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] >= 0) dims.push_back(v.shape[d]);
    else dims.push_back(d < v.dims.size() && !v.dims[d].empty() ? json(v.dims[d]) : json("?"));
  }
  return {{"name", v.name}, {"dtype", DTypeName(v.dtype)}, {"shape", dims}};
}

json Percentiles(const std::vector<bench::PercentileEstimate>& estimates) {
  json out = json::array();
  for (const auto& e : estimates) {
    json p = {{"q", e.q}, {"value_ms", e.value}, {"bounded", e.bounded}, {"confidence", e.confidence}};
    if (e.bounded) {
      p["lower_ms"] = e.lower;
      p["upper_ms"] = e.upper;
    } else {
      p["lower_ms"] = nullptr;
      p["upper_ms"] = nullptr;
    }
    out.push_back(p);
  }
  return out;
}

json Phases(const BenchReport& r) {
  auto ms = [](uint64_t ns) { return ns ? json(ns / 1e6) : json(nullptr); };
  json j = {{"module_load", r.module_load_ms > 0 ? json(r.module_load_ms) : json(nullptr)},
            {"vm_create", ms(r.phases.vm_create_nanos)},
            {"first_invoke", ms(r.phases.first_invoke_nanos)}};
  if (r.load) {
    j["instances_create"] = ms(r.phases.instances_create_nanos);
    j["instance_first_invoke"] = ms(r.phases.instance_first_invoke_nanos);
    if (!r.load->levels.empty() && r.load->levels.front().latency.count) {
      j["warm_median"] = r.load->levels.front().latency.median;
    }
  } else if (r.stats.count) {
    j["warm_median"] = r.stats.median;
  }
  return j;
}

json Memory(const client::MemoryUse& m) {
  return {{"weights_bytes", m.weights_bytes},
          {"session_bytes_before", m.session_bytes_before},
          {"invoke_peak_bytes", m.invoke_peak_bytes},
          {"run_peak_bytes", m.run_peak_bytes},
          {"server_resident_bytes", m.resident_bytes},
          {"server_resident_peak_bytes", m.resident_peak_bytes}};
}

json Load(const LoadRun& run) {
  const LoadOptions& o = run.options;
  json levels = json::array();
  for (const LoadLevel& l : run.levels) {
    json windows = json::array();
    for (const auto& w : l.windows) {
      windows.push_back({{"start_s", w.start_s}, {"duration_s", w.duration_s}, {"samples", w.samples},
                         {"throughput_per_s", w.throughput_per_s}, {"latency_ms", w.latency}});
    }
    auto pct = [&](double q) -> json {
      for (const auto& e : l.percentiles) {
        if (e.q == q) return e.value;
      }
      return nullptr;
    };
    levels.push_back({
        {"concurrency", l.concurrency},
        {"target_qps", l.target_qps > 0 ? json(l.target_qps) : json(nullptr)},
        {"queries", l.queries},
        {"completed", l.completed},
        {"samples", l.samples},
        {"late", l.late},
        {"dropped", l.dropped},
        {"duration_s", l.duration_s},
        {"throughput_qps", l.throughput_qps},
        {"samples_per_s", l.samples_per_s},
        {"latency_ms",
         {{"p50", pct(50)}, {"p90", pct(90)}, {"p99", pct(99)}, {"mean", l.latency.mean},
          {"min", l.latency.min}, {"max", l.latency.max}}},
        {"percentiles", Percentiles(l.percentiles)},
        {"bound_met", l.bound_met},
        {"trials", l.trials},
        {"stable", l.stability.stable},
        {"stability", {{"verdict", l.stability.verdict},
                       {"window_ms", l.window_s * 1000},
                       {"threshold", l.stability.threshold},
                       {"throughput_deviation", l.stability.throughput_deviation},
                       {"latency_deviation", l.stability.latency_deviation},
                       {"windows", windows}}},
        {"audit", {{"checked", l.audit.checked}, {"mismatches", l.audit.mismatches},
                   {"first_mismatch", l.audit.first_mismatch}, {"passed", l.audit.passed()}}},
        {"memory", Memory(l.memory)},
        {"timeline", {{"issue_s", l.issue_s}, {"latency_ms", l.latency_ms}}},
    });
  }
  json j = {{"scenario", LoadScenarioName(o.scenario)},
            {"from_client", o.from_client},
            {"target_qps", o.target_qps > 0 ? json(o.target_qps) : json(nullptr)},
            {"samples_per_query", o.samples_per_query},
            {"seed", o.seed},
            {"warmup", o.warmup},
            {"min_duration_s", o.min_duration_s},
            {"min_queries", o.min_queries},
            {"latency_bound_ms", o.latency_bound_ms > 0 ? json(o.latency_bound_ms) : json(nullptr)},
            {"confidence", o.confidence},
            {"window_ms", o.window_ms},
            {"stable_percentile", o.stable_percentile},
            {"audit", {{"samples", o.audit_samples}, {"rtol", o.audit_rtol}, {"atol", o.audit_atol}}},
            {"levels", levels}};
  if (o.find_peak) {
    json probes = json::array();
    for (const auto& p : run.probes) {
      probes.push_back({{"target_qps", p.target_qps}, {"throughput_qps", p.throughput_qps}, {"p99_ms", p.p99_ms},
                        {"dropped", p.dropped}, {"valid", p.valid}});
    }
    j["peak"] = {{"qps", run.peak_qps ? json(*run.peak_qps) : json(nullptr)},
                 {"latency_bound_ms", o.latency_bound_ms},
                 {"probes", probes}};
  }
  return j;
}

}  // namespace

json ToJson(const CompileReport& r) {
  const auto& s = r.stats;
  json j;
  j["model"] = r.model;
  j["executable_bytes"] = r.bytes.size();
  json inputs = json::array(), outputs = json::array(), symbols = json::array(), functions = json::array();
  for (const auto& v : r.executable.functions.at(0).inputs) inputs.push_back(Value(v));
  for (const auto& v : r.executable.functions.at(0).outputs) outputs.push_back(Value(v));
  for (const auto& sym : r.executable.symbols) {
    symbols.push_back({{"name", sym.name}, {"min", sym.min}, {"max", sym.max >= 0 ? json(sym.max) : json(nullptr)}});
  }
  for (const auto& f : s.functions) {
    functions.push_back({{"name", f.name},
                         {"role", f.role},
                         {"kernels", f.kernels},
                         {"instructions", f.instructions},
                         {"code_bytes", f.code_bytes},
                         {"runtime_shape_functions", f.runtime_shape_functions},
                         {"arena_bytes", {{"device", f.memory.arena_bytes[0]}, {"host", f.memory.arena_bytes[1]}}},
                         {"planned", f.memory.planned},
                         {"dynamic", f.memory.dynamic}});
  }
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["symbols"] = symbols;
  j["functions"] = functions;
  j["kernels_by_op"] = r.kernels_by_op;
  j["options"] = {{"layout", compiler::LayoutName(r.options.layout)},
                  {"dtype", r.options.dtype == DType::kUndefined ? std::string("model") : std::string(DTypeName(r.options.dtype))},
                  {"buckets", s.buckets},
                  {"strict", r.options.strict_dispatch},
                  {"fuse_epilogues", r.options.fuse_epilogues}};
  j["stats"] = {{"nodes_in", s.nodes_in},
                {"nodes_folded", s.nodes_folded},
                {"nodes_removed", s.nodes_removed},
                {"common_subexpressions", s.common_subexpressions},
                {"quantized_adds", s.quantized_adds},
                {"kernels", s.kernels},
                {"host_kernels", s.host_kernels},
                {"runtime_shape_functions", s.runtime_shape_functions},
                {"copies_to_host", s.copies_to_host},
                {"constant_bytes", s.constant_bytes},
                {"constant_bytes_unshared", s.constant_bytes_unshared},
                {"transposes", s.transposes},
                {"transposes_at_edges", s.transposes_at_edges},
                {"layout", {{"transposes_at_edges", s.layout.transposes_at_edges},
                            {"transposes_in_body", s.layout.transposes_in_body},
                            {"nodes_nhwc", s.layout.nodes_nhwc},
                            {"constants_permuted", s.layout.constants_permuted}}},
                {"batchnorms_folded", s.batchnorms_folded},
                {"batchnorms_decomposed", s.batchnorms_decomposed},
                {"hardswish_recognized", s.hardswish_recognized},
                {"swish_recognized", s.swish_recognized},
                {"gelu_recognized", s.gelu_recognized},
                {"activation_nodes_absorbed", s.activation_nodes_absorbed},
                {"fused_convs", s.fused_convs},
                {"fused_matmuls", s.fused_matmuls},
                {"fused_matmul_integers", s.fused_matmul_integers},
                {"epilogue_nodes", s.epilogue_nodes},
                {"fused_attentions", s.fused_attentions},
                {"attention_nodes", s.attention_nodes},
                {"fused_kernels", s.fused_kernels},
                {"nodes_fused", s.nodes_fused},
                {"precision", {{"nodes_converted", s.precision.nodes_converted},
                               {"constants_converted", s.precision.constants_converted},
                               {"casts_inserted", s.precision.casts_inserted}}},
                {"compile_ms", s.compile_seconds * 1e3}};
  return j;
}

json ToJson(const RunReport& r) {
  json j = {{"schema", kRunSchema}, {"schema_version", kRunSchemaVersion}};
  AddSession(r.session, j);
  json outputs = json::array();
  for (const auto& o : r.outputs) {
    json e = {{"name", o.name}, {"shape", o.shape}, {"dtype", DTypeName(o.dtype)}, {"fetched", o.fetched}};
    if (!o.file.empty()) e["file"] = o.file;
    outputs.push_back(e);
  }
  j["outputs"] = outputs;
  j["times_ms"] = {{"compile", r.session.compile_ms}, {"upload", r.session.upload_ms}, {"run", r.run_ms},
                   {"fetch", r.fetch_ms}, {"server_run", r.server_run_ms}};
  j["device_copies"] = Copies(r.copies);
  j["function"] = r.function;
  j["allocations"] = r.allocations;
  return j;
}

json ToJson(const std::vector<ProfileEntry>& profile, double total_ms, const ProfileMemory& memory) {
  json rows = json::array();
  for (const auto& e : profile) {
    rows.push_back({{"name", e.name}, {"kind", e.kind}, {"calls", e.calls}, {"total_ms", e.total_ms},
                    {"mean_us", e.mean_us}, {"share_percent", e.share_percent}, {"copies", e.copies},
                    {"copy_bytes", e.copy_bytes}, {"allocations", e.allocations},
                    {"allocated_bytes", e.allocated_bytes}, {"peak_live_bytes", e.peak_live_bytes}});
  }
  return {{"rows", rows},
          {"total_ms", total_ms},
          {"live_bytes_before", memory.live_bytes_before},
          {"live_bytes_after", memory.live_bytes_after},
          {"peak_live_bytes", memory.peak_live_bytes}};
}

json SessionJson(const SessionReport& session) {
  json j = json::object();
  AddSession(session, j);
  return j;
}

json ToJson(const ProfileReport& p) {
  json j = ToJson(p.rows, p.total_ms, p.memory);
  j["runs"] = p.runs;
  j["run_total_ms"] = p.run_total_ms;
  j["synchronized"] = p.synchronized;
  auto operands = [](const std::vector<client::OperandDesc>& list) {
    json a = json::array();
    for (const auto& o : list) {
      a.push_back(o.present ? json{{"dtype", DTypeName(o.dtype)}, {"shape", o.shape}} : json(nullptr));
    }
    return a;
  };
  json nodes = json::array();
  for (const auto& n : p.nodes) {
    nodes.push_back({{"name", n.name},
                     {"op", n.op},
                     {"host", n.host},
                     {"calls", n.calls},
                     {"median_ms", n.median_ms},
                     {"min_ms", n.min_ms},
                     {"max_ms", n.max_ms},
                     {"share_percent", n.share_percent},
                     {"run_ms", n.run_ms},
                     {"inputs", operands(n.inputs)},
                     {"outputs", operands(n.outputs)},
                     {"ops", n.ops},
                     {"bytes", n.bytes},
                     {"gops_per_s", n.gops_per_s},
                     {"gbytes_per_s", n.gbytes_per_s}});
  }
  j["nodes"] = std::move(nodes);
  j["ops"] = p.ops;
  j["gops_per_s"] = p.gops_per_s;
  if (p.trace_dropped) j["trace_dropped_events"] = p.trace_dropped;
  return j;
}

json ToJson(const BenchReport& r) {
  json j = {{"schema", kBenchSchema}, {"schema_version", kBenchSchemaVersion}};
  AddSession(r.session, j);
  const auto& s = r.stats;
  const auto& o = r.options.timing;
  json percentiles = json::array();
  for (const auto& p : r.percentiles) {
    json e = {{"q", p.q}, {"value_ms", p.value}, {"bounded", p.bounded}};
    if (p.bounded) {
      e.update({{"lower_ms", p.lower}, {"upper_ms", p.upper}, {"lower_rank", p.lower_rank},
                {"upper_rank", p.upper_rank}, {"coverage", p.coverage}});
    } else {
      e["min_samples"] = bench::MinSamplesToBound(p.q, p.confidence);
    }
    percentiles.push_back(e);
  }
  json windows = json::array();
  for (const auto& w : r.stability.windows) {
    windows.push_back({{"start_s", w.start_s}, {"duration_s", w.duration_s}, {"samples", w.samples},
                       {"throughput_per_s", w.throughput_per_s}, {"latency_ms", w.latency}});
  }
  json end_s = json::array();
  for (const auto& t : r.timeline) end_s.push_back(t.end_s);
  const bench::PercentileEstimate* p99 = r.Percentile(99);
  // A load scenario has its own results ("load"); the time evaluator's are "benchmark".
  if (!r.load) j["benchmark"] = {
      {"function", r.function},
      {"number", r.number},
      {"repeat", r.samples_ms.size()},
      {"warmup", o.warmup},
      {"min_repeat_ms", o.min_repeat_ms},
      {"cooldown_ms", o.cooldown_ms},
      {"l2_flush_bytes", o.l2_flush_bytes},
      {"timer", r.timer},
      {"samples_ms", r.samples_ms},
      {"sample_end_s", end_s},
      {"mean_ms", s.mean},
      {"median_ms", s.median},
      {"p90_ms", s.p90},
      // Null when the samples cannot bound it at the confidence (299 at 95 %).
      {"p99_ms", p99 && p99->bounded ? json(p99->value) : json(nullptr)},
      {"min_ms", s.min},
      {"max_ms", s.max},
      {"std_ms", s.std},
      {"std_kind", "population"},
      {"confidence", r.options.confidence},
      {"percentiles", percentiles},
      {"min_duration_s", r.options.min_duration_s},
      {"min_samples", r.options.min_samples},
      {"max_trials", r.options.max_trials},
      {"extended", {{"reasons", r.extended.reasons},
                    {"unmet", r.extended.unmet},
                    {"stopped", r.extended.stopped},
                    {"requests", r.extended.requests},
                    {"duration_s", r.extended.duration_s}}},
      {"stable", r.stability.stable},
      {"stability", {{"stable", r.stability.stable},
                     {"verdict", r.stability.verdict},
                     {"window_ms", r.stability.window_ms},
                     {"window_widened", r.stability.window_widened},
                     {"windows_judged", r.options.stable_window},
                     {"threshold", r.stability.threshold},
                     {"percentile", r.stability.percentile},
                     {"throughput_deviation", r.stability.throughput_deviation},
                     {"latency_deviation", r.stability.latency_deviation},
                     {"windows", windows}}}};
  // A run stopped before it was complete (interrupted, cancelled on the server): its
  // numbers are those of the samples taken.
  if (!r.partial.empty()) j["partial"] = {{"reason", r.partial}};
  if (r.profile) j["profile"] = ToJson(*r.profile);
  j["phases_ms"] = Phases(r);
  j["memory"] = Memory(r.memory);
  if (r.load) j["load"] = Load(*r.load);
  j["times_ms"] = {{"compile", r.session.compile_ms}, {"upload", r.session.upload_ms}, {"benchmark", r.bench_ms}};
  return j;
}

json ToJson(const CheckReport& r) {
  json j = {{"schema", kCheckSchema}, {"schema_version", kCheckSchemaVersion}};
  AddSession(r.session, j);
  j["match"] = r.match;
  j["missing_reference"] = r.missing_reference;
  j["rtol"] = r.options.rtol;
  j["atol"] = r.options.atol;
  j["equal_nan"] = r.options.equal_nan;
  json outputs = json::array();
  for (const auto& o : r.outputs) {
    json e = {{"name", o.name}, {"shape", o.shape}, {"dtype", DTypeName(o.dtype)}, {"reference", o.reference},
              {"verdict", o.verdict}, {"match", o.verdict == "match"}};
    if (!o.reason.empty()) e["reason"] = o.reason;
    if (o.stats.count) e.update(Stats(o.stats));
    outputs.push_back(e);
  }
  j["outputs"] = outputs;
  j["times_ms"] = {{"compile", r.session.compile_ms}, {"upload", r.session.upload_ms}, {"run", r.run_ms},
                   {"compare", r.compare_ms}, {"server_run", r.server_run_ms}};
  j["device_copies"] = Copies(r.copies);
  return j;
}

json ToJson(const compare::PathComparison& r, double rtol, double atol, bool equal_nan) {
  json files = json::array();
  for (const auto& f : r.files) {
    json e = {{"name", f.name}, {"expected", f.expected}, {"actual", f.actual}, {"match", f.match()},
              {"missing", f.missing}};
    if (!f.missing) e.update(Stats(f.stats));
    files.push_back(e);
  }
  return {{"match", r.match()}, {"rtol", rtol}, {"atol", atol}, {"equal_nan", equal_nan}, {"files", files}};
}

}  // namespace remex::tooling
