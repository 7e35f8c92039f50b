#include "host_client/tooling/interactive.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include "host_client/tooling/compile.h"

namespace remex::tooling {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

StatusOr<size_t> IndexOf(const std::vector<vm::ValueDesc>& values, const std::string& name, const char* what) {
  std::string names;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return i;
    names += (i ? ", " : "") + values[i].name;
  }
  return InvalidArgument("'" + name + "' is no " + what + " of the model; its " + what + "s are: " + names);
}

}  // namespace

StatusOr<size_t> SessionModel::InputIndex(const std::string& name) const { return IndexOf(inputs, name, "input"); }
StatusOr<size_t> SessionModel::OutputIndex(const std::string& name) const { return IndexOf(outputs, name, "output"); }

StatusOr<std::unique_ptr<InteractiveSession>> InteractiveSession::Open(const ServerOptions& options) {
  REMEX_ASSIGN_OR_RETURN(Connection connection, Connect(options));
  return std::unique_ptr<InteractiveSession>(new InteractiveSession(std::move(connection)));
}

StatusOr<SessionModel*> InteractiveSession::Load(const std::string& path, const compiler::CompileOptions& options,
                                                 bool changes_compilation, const ProgressFn& progress) {
  auto say = [&](const std::string& step) {
    if (progress) progress(step);
  };
  if (fs::path(path).extension() != ".rmx") say("compiling " + path);
  auto executable = LoadExecutable(path, options, changes_compilation);
  say("");
  REMEX_RETURN_IF_ERROR(executable.status());
  // The choices left open, made for the server's device (CompileForDevice).
  const auto& devices = client().server_info().devices;
  if (DeviceCompile for_device = CompileForDevice(devices.empty() ? nullptr : &devices[0], executable->traits,
                                                  options);
      !for_device.changes.empty()) {
    say("compiling " + path + " again for the " + devices[0].name + " device, " + for_device.changes);
    executable = LoadExecutable(path, for_device.options, changes_compilation);
    say("");
    REMEX_RETURN_IF_ERROR(executable.status());
  }
  auto model = std::make_unique<SessionModel>();
  model->path = path;
  model->compile_ms = executable->compile_ms;
  model->executable_bytes = executable->bytes.size();
  {
    // The signature with its symbols' names (the server reports -1 for a dynamic dim).
    REMEX_ASSIGN_OR_RETURN(vm::ExecutableDef def, vm::ParseExecutable(executable->bytes));
    if (def.functions.empty()) return InvalidArgument("'" + path + "' has no function");
    model->inputs = def.functions[0].inputs;
    model->outputs = def.functions[0].outputs;
  }
  const std::string stem = fs::path(path).stem().string();
  model->name = stem;
  for (int k = 2; Model(model->name).ok(); ++k) model->name = stem + "-" + std::to_string(k);

  const auto t = Clock::now();
  say("loading the module (" + std::to_string(executable->bytes.size()) + " bytes)");
  auto module = client().LoadModuleCached(executable->bytes, fs::path(path).filename().string(), &model->uploaded);
  say("");
  if (!module.ok()) return module.status().WithContext("loading '" + path + "'");
  model->module = std::move(module).value();
  auto vm = client().CreateVm(model->module.handle);
  if (!vm.ok() || model->module.functions.empty()) {
    (void)client().Free({model->module.handle});
    return vm.ok() ? InvalidArgument("'" + path + "' has no function") : vm.status();
  }
  model->vm = *vm;
  model->load_ms = MsSince(t);
  model->bound_outputs.assign(model->outputs.size(), 0);
  models_.push_back(std::move(model));
  return models_.back().get();
}

StatusOr<SessionModel*> InteractiveSession::Model(const std::string& name) {
  std::string names;
  for (auto& m : models_) {
    if (m->name == name) return m.get();
    names += (names.empty() ? "" : ", ") + m->name;
  }
  return NotFound("no model named '" + name + "' is loaded" + (names.empty() ? "" : " (loaded: " + names + ")"));
}

Status InteractiveSession::Unload(const std::string& name) {
  REMEX_ASSIGN_OR_RETURN(SessionModel * m, Model(name));
  Status st = client().Free({m->vm, m->module.handle});
  for (auto it = models_.begin(); it != models_.end(); ++it) {
    if (it->get() == m) {
      models_.erase(it);
      break;
    }
  }
  return st;
}

Status InteractiveSession::BindInputs(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                                      std::vector<uint64_t>* handles) {
  handles->assign(m.inputs.size(), 0);
  for (const auto& [name, handle] : inputs) {
    REMEX_ASSIGN_OR_RETURN(size_t i, m.InputIndex(name));
    (*handles)[i] = handle;
  }
  std::string missing;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    if ((*handles)[i] == 0) missing += (missing.empty() ? "" : ", ") + m.inputs[i].name;
  }
  if (!missing.empty()) return InvalidArgument("no tensor given for the input(s) " + missing + " of " + m.name);
  return OkStatus();
}

StatusOr<InvokeReport> InteractiveSession::Invoke(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                                                  std::chrono::milliseconds deadline) {
  std::vector<uint64_t> handles;
  REMEX_RETURN_IF_ERROR(BindInputs(m, inputs, &handles));
  const std::string& fn = m.main().name;
  InvokeReport r;
  const auto t = Clock::now();
  if (handles == m.bound_inputs) {
    REMEX_ASSIGN_OR_RETURN(r.result, client().Invoke(m.vm, fn, deadline));
  } else if (deadline.count() > 0) {
    m.bound_inputs.clear();
    REMEX_RETURN_IF_ERROR(client().SetInputs(m.vm, fn, handles));
    m.bound_inputs = handles;
    REMEX_ASSIGN_OR_RETURN(r.result, client().Invoke(m.vm, fn, deadline));
  } else {
    // setInput and invoke in one write: one round trip.
    m.bound_inputs.clear();
    client::Session::Pipeline pipeline(client());
    pipeline.SetInputs(m.vm, fn, handles).Invoke(m.vm, fn, {});
    auto done = pipeline.Run();
    if (!done.ok()) {
      // The setInput may have failed (nothing bound) or the invoke (inputs bound):
      // bind again next time either way.
      return done.status();
    }
    m.bound_inputs = handles;
    r.result = std::move(done->invokes.at(0));
  }
  r.run_ms = MsSince(t);
  return r;
}

StatusOr<CallReport> InteractiveSession::Run(SessionModel& m, std::span<const RunInput> inputs,
                                            const std::vector<bool>& fetch) {
  if (fetch.size() != m.outputs.size()) {
    return InvalidArgument("run: " + std::to_string(fetch.size()) + " fetch flags for the " +
                           std::to_string(m.outputs.size()) + " outputs of " + m.name);
  }
  client::Session& c = client();
  client::Session::Pipeline pipeline(c);  // nothing is sent before pipeline.Run()
  std::map<std::string, uint64_t> by_name;
  std::vector<uint64_t> uploads;
  for (const RunInput& in : inputs) {
    uint64_t h = in.handle;
    if (h == 0) {
      h = c.NewResultHandle();
      pipeline.Upload(in.dtype, in.shape, in.bytes, h, "uploading input '" + in.name + "'");
      uploads.push_back(h);
    }
    if (!by_name.emplace(in.name, h).second) return InvalidArgument("input '" + in.name + "' is given twice");
  }
  std::vector<uint64_t> handles;
  REMEX_RETURN_IF_ERROR(BindInputs(m, by_name, &handles));
  const std::string& fn = m.main().name;
  const bool bind = handles != m.bound_inputs;
  if (bind) pipeline.SetInputs(m.vm, fn, handles);
  // The fetched outputs get client-named handles, for the downloads written behind the
  // invoke; the others the server's own (0), as any invoke's outputs.
  std::vector<uint64_t> results(m.outputs.size(), 0);
  for (size_t i = 0; i < results.size(); ++i) {
    if (fetch[i]) results[i] = c.NewResultHandle();
  }
  pipeline.Invoke(m.vm, fn, results);
  for (size_t i = 0; i < results.size(); ++i) {
    if (fetch[i]) pipeline.Download(results[i], "fetching '" + m.outputs[i].name + "'");
  }
  if (bind) m.bound_inputs.clear();  // bound again below once the setInput is answered
  CallReport report;
  const auto t = Clock::now();
  client::Session::Pipeline::Result answered;
  auto done = pipeline.Run(&answered);
  report.invoke.run_ms = MsSince(t);
  if (!done.ok()) {
    // Which requests ran is not known: each handle the call may have made is freed on
    // its own (one never made answers NOT_FOUND, unseen), and so are the outputs of an
    // invoke that ran before a download failed (the server named those left unfetched).
    // A failed setInput leaves no inputs bound, a failed invoke the new ones: bind again
    // next time either way.
    for (uint64_t h : uploads) (void)c.FreeWithoutReply({h});
    for (uint64_t h : results) {
      if (h != 0) (void)c.FreeWithoutReply({h});
    }
    for (const client::InvokeResult& invoked : answered.invokes) {
      for (size_t i = 0; i < invoked.outputs.size() && i < results.size(); ++i) {
        // Unfetched outputs only; a bound output (set_output) is the caller's.
        if (results[i] == 0 && (i >= m.bound_outputs.size() || m.bound_outputs[i] == 0)) {
          (void)c.FreeWithoutReply({invoked.outputs[i].handle});
        }
      }
    }
    return done.status();
  }
  if (bind) m.bound_inputs = handles;
  report.invoke.result = std::move(done->invokes.at(0));
  std::vector<uint64_t> drop = uploads;
  report.fetched.resize(results.size());
  size_t next_download = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!fetch[i]) continue;
    // Fetched: its client-named handle is freed (for a bound output, which keeps its own
    // handle in the reply, that name was a second handle to it).
    report.fetched[i] = std::move(done->downloads.at(next_download++));
    drop.push_back(results[i]);
  }
  (void)c.FreeWithoutReply(drop);  // a broken connection shows at the next call
  return report;
}

Status InteractiveSession::SetOutput(SessionModel& m, const std::string& output, uint64_t tensor) {
  REMEX_ASSIGN_OR_RETURN(size_t i, m.OutputIndex(output));
  REMEX_RETURN_IF_ERROR(client().SetOutput(m.vm, m.main().name, static_cast<uint32_t>(i), tensor));
  m.bound_outputs[i] = tensor;
  return OkStatus();
}

Status InteractiveSession::SetInputs(SessionModel& m, const std::map<std::string, uint64_t>& inputs) {
  if (inputs.empty() && !m.inputs.empty() && m.bound_inputs.size() == m.inputs.size()) return OkStatus();
  std::vector<uint64_t> handles;
  REMEX_RETURN_IF_ERROR(BindInputs(m, inputs, &handles));
  if (handles != m.bound_inputs) {
    m.bound_inputs.clear();
    REMEX_RETURN_IF_ERROR(client().SetInputs(m.vm, m.main().name, handles));
    m.bound_inputs = handles;
  }
  return OkStatus();
}

StatusOr<InteractiveSession::ProfileReport> InteractiveSession::Profile(
    SessionModel& m, const std::map<std::string, uint64_t>& inputs, uint32_t runs) {
  REMEX_RETURN_IF_ERROR(SetInputs(m, inputs));
  client::BenchmarkOptions warm;  // one call on the server, nothing fetched
  warm.number = 1;
  warm.repeat = 1;
  warm.warmup = 0;
  auto warmed = client().Benchmark(m.vm, m.main().name, warm);
  if (!warmed.ok()) return warmed.status().WithContext("profile");
  return ProfileVm(client(), m.vm, m.main().name, runs, /*trace=*/false);
}

StatusOr<BenchReport> InteractiveSession::Bench(SessionModel& m, const std::map<std::string, uint64_t>& inputs,
                                                const BenchOptions& options) {
  REMEX_RETURN_IF_ERROR(CheckBenchOptions(options));
  REMEX_RETURN_IF_ERROR(SetInputs(m, inputs));
  REMEX_ASSIGN_OR_RETURN(BenchReport r, BenchVm(client(), m.vm, m.main().name, options));
  r.session.model = m.path;
  r.session.server = connection_.server;
  r.session.device = connection_.device;
  r.session.bytes_sent = client().bytes_sent();
  r.session.bytes_received = client().bytes_received();
  r.session.executable_bytes = m.executable_bytes;
  r.session.module_cache_hit = !m.uploaded;
  r.session.compression = client().compression_stats();
  r.session.compile_ms = m.compile_ms;
  r.session.upload_ms = m.load_ms;
  const double server_load = r.session.environment.server_load_after_benchmark_1m;
  r.session.environment = DescribeEnvironment(client(), std::nullopt);  // the options are not kept
  r.session.environment.server_load_after_benchmark_1m = server_load;
  return r;
}

}  // namespace remex::tooling
