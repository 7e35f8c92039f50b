#include "host_client/tooling/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "host_client/tooling/compare.h"
#include "host_client/tooling/text.h"

namespace remex::tooling {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string OutputNames(const client::FunctionInfo& fn) {
  std::string names;
  for (const auto& o : fn.outputs) names += (names.empty() ? "" : ", ") + o.name;
  return names;
}

}  // namespace

StatusOr<RunReport> RunModel(const ModelRequest& request, PreparedModel& p, const RunOptions& options) {
  client::Session& session = p.session();
  const auto& fn = p.main();
  for (const auto& name : options.fetch.names) {
    bool known = std::any_of(fn.outputs.begin(), fn.outputs.end(), [&](const auto& o) { return o.name == name; });
    if (!known) {
      return InvalidArgument("--fetch names '" + name + "', which is no output; use all, none or output names (" +
                             OutputNames(fn) + ")");
    }
  }
  RunReport r;
  auto t = Clock::now();
  REMEX_ASSIGN_OR_RETURN(client::InvokeResult result, session.Invoke(p.vm, fn.name));
  r.run_ms = MsSince(t);
  r.server_run_ms = result.run_nanos / 1e6;
  r.function = result.function;
  r.copies = result.copies;
  r.allocations = result.allocations;
  std::vector<uint64_t> output_handles;
  for (const auto& out : result.outputs) output_handles.push_back(out.handle);

  Status status = OkStatus();
  if (!options.output_dir.empty() && options.save_inputs) {
    const fs::path dir = fs::path(options.output_dir) / "inputs";
    status = EnsureWritableDirectory(dir.string());
    for (size_t i = 0; status.ok() && i < fn.inputs.size(); ++i) {
      status = npy::Write((dir / (FileNameFor(fn.inputs[i].name) + ".npy")).string(), p.inputs[i]);
    }
  }
  t = Clock::now();
  for (size_t k = 0; status.ok() && k < result.outputs.size(); ++k) {
    const auto& out = result.outputs[k];
    RunOutput o;
    o.name = fn.outputs[k].name;
    o.dtype = out.dtype;
    o.shape = out.shape;
    o.fetched = options.fetch.all || options.fetch.names.count(o.name);
    if (o.fetched) {
      auto array = session.Download(out.handle);
      if (!array.ok()) {
        status = array.status().WithContext("fetching '" + o.name + "'");
        break;
      }
      o.summary = ArraySummary(*array);
      if (!options.output_dir.empty()) {
        o.file = (fs::path(options.output_dir) / (FileNameFor(o.name) + ".npy")).string();
        status = npy::Write(o.file, *array);
      }
    }
    r.outputs.push_back(std::move(o));
  }
  r.fetch_ms = MsSince(t);
  // The outputs are freed whatever happened: the session keeps nothing.
  Status freed = p.Release(output_handles);
  REMEX_RETURN_IF_ERROR(status);
  REMEX_RETURN_IF_ERROR(freed);
  r.session = DescribeSession(request, p);
  return r;
}

Status CheckBenchOptions(const BenchOptions& options) {
  if (options.timing.number < 1 || options.timing.repeat < 1) {
    return InvalidArgument("--number and --repeat must be at least 1");
  }
  if (!(options.stable_threshold >= 0) || !std::isfinite(options.stable_threshold)) {
    return InvalidArgument("--stable-threshold must be finite and >= 0");
  }
  if (options.stable_window < 2) return InvalidArgument("--stable-window must be at least 2");
  return OkStatus();
}

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
    entries.push_back(e);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return entries;
}

StatusOr<BenchReport> BenchVm(client::Session& session, uint64_t vm, const std::string& function,
                              const BenchOptions& options) {
  REMEX_RETURN_IF_ERROR(CheckBenchOptions(options));
  BenchReport r;
  r.function = function;
  r.options = options;
  auto t = Clock::now();
  auto result = session.Benchmark(vm, function, options.timing);
  if (!result.ok()) return result.status().WithContext("benchmark");
  r.bench_ms = MsSince(t);
  r.number = result->number;
  r.timer = result->timer;
  r.session.environment.server_load_after_benchmark_1m = result->load_average_1m;
  for (double s : result->samples_seconds) r.samples_ms.push_back(s * 1e3);
  r.stats = bench::Summarize(r.samples_ms);
  r.has_p99 = r.samples_ms.size() >= bench::kMinSamplesForP99;
  r.stability = bench::CheckStability(r.samples_ms, options.stable_window, options.stable_threshold);
  if (options.profile) {
    auto profile = session.Profile(vm, function);
    if (!profile.ok()) return profile.status().WithContext("profile");
    r.profile = ProfileEntries(*profile);
    r.profile_total_ms = profile->total_nanos / 1e6;
  }
  return r;
}

StatusOr<BenchReport> BenchModel(const ModelRequest& request, PreparedModel& p, const BenchOptions& options) {
  REMEX_ASSIGN_OR_RETURN(BenchReport r, BenchVm(p.session(), p.vm, p.main().name, options));
  REMEX_RETURN_IF_ERROR(p.Release());
  const double server_load = r.session.environment.server_load_after_benchmark_1m;
  r.session = DescribeSession(request, p);
  r.session.environment.server_load_after_benchmark_1m = server_load;
  return r;
}

Status CheckCheckOptions(const CheckOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(options.reference, ec)) {
    return InvalidArgument("--reference '" + options.reference + "' is not a folder" +
                           (fs::exists(options.reference, ec) ? "" : " (it does not exist)"));
  }
  return compare::CheckTolerances(options.rtol, options.atol);
}

StatusOr<CheckReport> CheckModel(const ModelRequest& request, PreparedModel& p, const CheckOptions& options) {
  REMEX_RETURN_IF_ERROR(CheckCheckOptions(options));
  client::Session& session = p.session();
  const auto& fn = p.main();
  CheckReport r;
  r.options = options;
  auto t = Clock::now();
  REMEX_ASSIGN_OR_RETURN(client::InvokeResult result, session.Invoke(p.vm, fn.name));
  r.run_ms = MsSince(t);
  r.server_run_ms = result.run_nanos / 1e6;
  r.copies = result.copies;

  // Each output is compared with its reference on the device: only the numbers return.
  t = Clock::now();
  std::vector<uint64_t> to_free;
  for (const auto& out : result.outputs) to_free.push_back(out.handle);
  Status status = OkStatus();
  r.match = true;
  for (size_t k = 0; k < result.outputs.size() && status.ok(); ++k) {
    const auto& out = result.outputs[k];
    CheckOutput o;
    o.name = fn.outputs[k].name;
    o.dtype = out.dtype;
    o.shape = out.shape;
    o.reference = (fs::path(options.reference) / (FileNameFor(o.name) + ".npy")).string();
    std::error_code ec;
    if (!fs::exists(o.reference, ec)) {
      o.verdict = "missing";
      o.reason = "no reference file " + o.reference;
      r.missing_reference = true;
      r.match = false;
      r.outputs.push_back(std::move(o));
      continue;
    }
    auto ref = npy::Read(o.reference);
    if (!ref.ok()) {
      status = ref.status().WithContext("the reference of '" + o.name + "'");
      break;
    }
    if (ref->dtype != out.dtype || ref->shape != out.shape) {
      o.verdict = "mismatch";
      o.reason = ref->dtype != out.dtype ? "the reference's dtype is " + std::string(DTypeName(ref->dtype))
                                         : "the reference's shape is " + ShapeToString(ref->shape);
      r.match = false;
      r.outputs.push_back(std::move(o));
      continue;
    }
    auto uploaded = session.Upload(*ref);
    if (!uploaded.ok()) {
      status = uploaded.status().WithContext("uploading the reference of '" + o.name + "'");
      break;
    }
    to_free.push_back(uploaded->handle);
    auto cmp = session.Compare(out.handle, uploaded->handle, options.rtol, options.atol, options.equal_nan);
    if (!cmp.ok()) {
      status = cmp.status().WithContext("comparing '" + o.name + "'");
      break;
    }
    o.stats.count = cmp->count;
    o.stats.mismatches = cmp->mismatches;
    o.stats.max_abs_error = cmp->max_abs_error;
    o.stats.max_rel_error = cmp->max_rel_error;
    o.stats.first_mismatch = cmp->first_mismatch;
    o.verdict = cmp->mismatches == 0 ? "match" : "mismatch";
    if (cmp->mismatches) o.reason = std::to_string(cmp->mismatches) + " of " + std::to_string(cmp->count) + " values differ";
    r.match &= cmp->mismatches == 0;
    r.outputs.push_back(std::move(o));
  }
  r.compare_ms = MsSince(t);
  Status freed = p.Release(to_free);
  REMEX_RETURN_IF_ERROR(status);
  REMEX_RETURN_IF_ERROR(freed);
  r.session = DescribeSession(request, p);
  return r;
}

}  // namespace remex::tooling
