#include "host_client/client/client.h"

#include <cstring>

#include "rpc/auth.h"
#include "rpc/transport.h"
#include "rpc/wire_util.h"
#include "base/content_hash.h"

namespace remex::client {

namespace wire = rpc::wire;

namespace {

// Handles with this bit set are named by the client (see NewResultHandle).
// A request under construction.
struct Request {
  rpc::OutFrame frame;
  wire::Request::Builder root;
  Request() : frame(), root(nullptr) {
    frame.message = rpc::NewMessage();
    root = frame.message->initRoot<wire::Request>();
  }
};

StatusOr<RemoteTensor> ToRemote(wire::TensorReply::Reader r) {
  REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(r.getDesc()));
  return RemoteTensor{r.getTensor(), desc.first, std::move(desc.second)};
}

FeatureState ToFeatureState(wire::FeatureState s) {
  switch (s) {
    case wire::FeatureState::ENABLED: return FeatureState::kEnabled;
    case wire::FeatureState::DISABLED: return FeatureState::kDisabled;
    default: return FeatureState::kUnknown;  // and values from a newer server
  }
}

ServerEnvironment ToEnvironment(wire::Environment::Reader e) {
  ServerEnvironment env;
  env.known = true;
  env.remex_version = e.getRemexVersion();
  env.remex_commit = e.getRemexCommit();
  for (auto arg : e.getServerArgs()) {
    if (env.server_args.size() == ServerEnvironment::kMaxServerArgs) break;
    env.server_args.emplace_back(arg);
  }
  env.os = e.getOs();
  env.cpu_model = e.getCpuModel();
  env.logical_cpus = e.getLogicalCpus();
  env.physical_cores = e.getPhysicalCores();
  env.smt = ToFeatureState(e.getSmt());
  env.governor = e.getGovernor();
  env.cpu_max_mhz = e.getCpuMaxMhz();
  env.compute_threads = e.getComputeThreads();
  env.memory_bytes = e.getMemoryBytes();
  env.load_average_1m = e.getLoadAverage1m();
  for (auto g : e.getGpus()) {
    if (env.gpus.size() == ServerEnvironment::kMaxGpus) break;
    GpuEnvironment gpu;
    gpu.name = g.getName();
    gpu.compute_capability = g.getComputeCapability();
    gpu.cuda_runtime_version = g.getCudaRuntimeVersion();
    gpu.driver_version = g.getDriverVersion();
    gpu.sm_clock_mhz = g.getSmClockMhz();
    gpu.mem_clock_mhz = g.getMemClockMhz();
    gpu.max_sm_clock_mhz = g.getMaxSmClockMhz();
    gpu.max_mem_clock_mhz = g.getMaxMemClockMhz();
    gpu.applications_sm_clock_mhz = g.getApplicationsSmClockMhz();
    gpu.power_limit_w = g.getPowerLimitW();
    gpu.persistence_mode = ToFeatureState(g.getPersistenceMode());
    gpu.ecc_mode = ToFeatureState(g.getEccMode());
    gpu.clocks_locked = ToFeatureState(g.getClocksLocked());
    env.gpus.push_back(std::move(gpu));
  }
  return env;
}

ServerInfo ToInfo(wire::HelloReply::Reader r) {
  ServerInfo info;
  info.name = r.getServerName();
  info.version = r.getServerVersion();
  info.protocol_major = r.getProtocolMajor();
  info.protocol_minor = r.getProtocolMinor();
  info.session_id = r.getSessionId();
  info.active_sessions = r.getActiveSessions();
  info.requires_token = r.hasAuthChallenge() && r.getAuthChallenge().size() != 0;
  auto key = r.getCancelKey();
  info.cancel_key.assign(reinterpret_cast<const char*>(key.begin()), key.size());
  for (auto d : r.getDevices()) {
    info.devices.push_back(
        {d.getName(), d.getDescription(), d.getMemoryBytes(), d.getBytesInUse(), d.getInt8ChannelsLast(),
         d.getFloatChannelsLast()});
  }
  if (r.hasEnvironment()) info.environment = ToEnvironment(r.getEnvironment());
  return info;
}

// Checks `frame` (a reply) and hands its root (non-error) to `read`.
template <typename F>
Status ReadReply(rpc::Frame& frame, wire::Reply::Which expected, F&& read) {
  try {
    auto reader = frame.Reader();
    auto reply = reader.getRoot<wire::Reply>();
    REMEX_RETURN_IF_ERROR(rpc::ErrorFromReply(reply));
    if (reply.which() != expected) return Internal("server answered with the wrong reply kind");
    return read(reply, frame);
  } catch (const kj::Exception& e) {
    return Internal(std::string("malformed reply from server: ") + e.getDescription().cStr());
  }
}

// Sends `req`, receives its reply and hands the reply root (non-error) to `read`.
template <typename F>
Status Call(rpc::Client& client, Request& req, wire::Reply::Which expected, F&& read) {
  REMEX_ASSIGN_OR_RETURN(rpc::Frame frame, client.Call(req.frame));
  return ReadReply(frame, expected, std::forward<F>(read));
}

RunPhases ToRunPhases(wire::RunPhases::Reader p) {
  return {p.getVmCreateNanos(), p.getFirstInvokeNanos(), p.getInstancesCreateNanos(),
          p.getInstanceFirstInvokeNanos()};
}

MemoryUse ToMemoryUse(wire::MemoryUse::Reader m) {
  return {m.getWeightsBytes(),    m.getSessionBytesBefore(), m.getInvokePeakBytes(),
          m.getRunPeakBytes(),    m.getResidentBytes(),      m.getResidentPeakBytes()};
}

StatusOr<ModuleInfo> ToModuleInfo(wire::ModuleLoadReply::Reader m) {
  ModuleInfo info;
  info.handle = m.getModule();
  info.executable_bytes = m.getExecutableBytes();
  info.constant_bytes = m.getConstantBytes();
  info.load_nanos = m.getLoadNanos();
  for (auto f : m.getFunctions()) {
    FunctionInfo fn;
    fn.name = f.getName();
    for (auto v : f.getInputs()) {
      REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(v.getDesc()));
      fn.inputs.push_back({v.getName(), desc.first, desc.second});
    }
    for (auto v : f.getOutputs()) {
      REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(v.getDesc()));
      fn.outputs.push_back({v.getName(), desc.first, desc.second});
    }
    info.functions.push_back(std::move(fn));
  }
  return info;
}

StatusOr<InvokeResult> ToInvokeResult(wire::InvokeReply::Reader inv) {
  InvokeResult result;
  result.run_nanos = inv.getRunNanos();
  result.function = inv.getFunction();
  result.allocations = inv.getAllocations();
  result.graph = inv.getGraph();
  auto c = inv.getCopies();
  result.copies = {c.getHostToDeviceCount(), c.getHostToDeviceBytes(), c.getDeviceToHostCount(),
                   c.getDeviceToHostBytes()};
  for (auto o : inv.getOutputs()) {
    REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(o.getDesc()));
    result.outputs.push_back({o.getTensor(), desc.first, std::move(desc.second)});
  }
  return result;
}

// The tensor of a tensorRead reply, its bytes taken from the frame.
StatusOr<npy::Array> ToArray(wire::TensorReply::Reader tensor, rpc::Frame& frame) {
  npy::Array array;
  REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(tensor.getDesc()));
  array.dtype = desc.first;
  array.shape = std::move(desc.second);
  if (frame.attachments.size() != 1) return Internal("tensorRead reply carries no data");
  array.data = std::move(frame.attachments[0]);
  auto n = NumElements(array.shape);
  if (!n || array.data.size() != static_cast<size_t>(*n) * DTypeSize(array.dtype)) {
    return Internal("tensorRead reply size does not match its shape");
  }
  return array;
}

// The attachment of a tensor's bytes: compressed per the session's options, with the
// dtype's element size for the byte shuffle.
rpc::OutAttachment TensorAttachment(const void* data, size_t size, DType dtype) {
  rpc::OutAttachment a{data, size, true, nullptr};
  a.element_size = static_cast<uint8_t>(DTypeSize(dtype));
  return a;
}

void FillTensorWrite(wire::TensorWrite::Builder r, const npy::Array& array, const std::string& device,
                     uint64_t result_handle) {
  r.setTensor(0);
  rpc::WriteTensorDesc(r.initDesc(), array.dtype, array.shape);
  r.setDevice(device);
  r.setResultHandle(result_handle);
}

void FillSetInput(wire::SetInput::Builder r, uint64_t vm, const std::string& function,
                  const std::vector<uint64_t>& inputs) {
  r.setVm(vm);
  r.setFunction(function);
  auto list = r.initInputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) list.set(i, inputs[i]);
}

}  // namespace

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Connect(const std::string& host, uint16_t port,
                                                    const ConnectOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  s->host_ = host;
  s->port_ = port;
  const auto connect_timeout = options.connect_timeout.count() > 0 ? options.connect_timeout : options.timeout;
  REMEX_ASSIGN_OR_RETURN(s->rpc_, rpc::Client::Connect(host, port, connect_timeout, options.tls));
  s->rpc_->SetTimeout(options.timeout);
  rpc::CompressionMode mode = rpc::CompressionMode::kAuto;
  switch (options.compression.mode) {
    case CompressionMode::kAuto:
      // Over loopback the bytes cost a memory copy, far less than compressing them.
      mode = s->rpc_->loopback() ? rpc::CompressionMode::kNone : rpc::CompressionMode::kAuto;
      break;
    case CompressionMode::kNone: mode = rpc::CompressionMode::kNone; break;
    case CompressionMode::kZstd: mode = rpc::CompressionMode::kZstd; break;
  }
  s->rpc_->SetCompression(mode, options.compression.level);
  std::string challenge;
  REMEX_ASSIGN_OR_RETURN(s->info_, s->Hello(&challenge));
  if (!challenge.empty()) {
    if (options.token.empty()) {
      return PermissionDenied("the server at " + host + ":" + std::to_string(port) +
                              " requires a token: pass --token-file FILE or set REMEX_TOKEN (a device of a farm takes its lease's token: "
                              "lease it with --farm or remex farm lease)");
    }
    REMEX_RETURN_IF_ERROR(s->Authenticate(challenge));
    // Before authentication the server's hello names no device, session or cancel
    // key: ask again.
    REMEX_ASSIGN_OR_RETURN(s->info_, s->Hello(nullptr));
    s->info_.requires_token = true;
  }
  return s;
}

Status Session::Authenticate(const std::string& challenge) {
  REMEX_ASSIGN_OR_RETURN(std::string nonce, rpc::RandomBytes(rpc::kAuthNonceBytes));
  Request req;
  auto a = req.root.initAuthenticate();
  a.setClientNonce(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(nonce.data()), nonce.size()));
  // A lease's secret (a farm device): signed; the device proves nothing back (it holds no
  // secret of the lease), so TLS is what tells the client it reached its device.
  const bool lease = rpc::IsLeaseSecret(options_.token);
  if (lease) {
    if (info_.protocol_minor < rpc::kMinorLeaseSignature) {
      return FailedPrecondition("the server at " + host_ + ":" + std::to_string(port_) + " speaks protocol " +
                                std::to_string(info_.protocol_major) + "." + std::to_string(info_.protocol_minor) +
                                ", and a lease's token needs 1." + std::to_string(rpc::kMinorLeaseSignature) +
                                " or later: upgrade the farm's servers");
    }
    REMEX_ASSIGN_OR_RETURN(std::string signature, rpc::LeaseSignature(options_.token, challenge, nonce));
    a.setSignature(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(signature.data()), signature.size()));
    return Call(*rpc_, req, wire::Reply::AUTHENTICATE, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
  }
  const std::string proof = rpc::AuthProof(options_.token, "client", challenge, nonce);
  a.setProof(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(proof.data()), proof.size()));
  std::string server_proof;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::AUTHENTICATE, [&](wire::Reply::Reader r, rpc::Frame&) {
    auto p = r.getAuthenticate().getServerProof();
    server_proof.assign(reinterpret_cast<const char*>(p.begin()), p.size());
    return OkStatus();
  }));
  if (!rpc::ProofsEqual(server_proof, rpc::AuthProof(options_.token, "server", challenge, nonce))) {
    return PermissionDenied("the server could not prove it knows the token");
  }
  return OkStatus();
}

StatusOr<ServerInfo> Session::Hello(std::string* challenge) {
  Request req;
  auto hello = req.root.initHello();
  hello.setProtocolMajor(rpc::kProtocolMajor);
  hello.setProtocolMinor(rpc::kProtocolMinor);
  hello.setClientName(options_.client_name);
  ServerInfo info;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::HELLO, [&](wire::Reply::Reader r, rpc::Frame&) {
    info = ToInfo(r.getHello());
    if (challenge) {
      auto c = r.getHello().getAuthChallenge();
      challenge->assign(reinterpret_cast<const char*>(c.begin()), c.size());
    }
    return OkStatus();
  }));
  return info;
}

StatusOr<ModuleInfo> Session::LoadModule(std::span<const std::byte> executable, const std::string& name) {
  return LoadModuleWithHash(executable, name, "");
}

StatusOr<ModuleInfo> Session::LoadModuleWithHash(std::span<const std::byte> executable, const std::string& name,
                                                 const std::string& hash) {
  Request req;
  auto r = req.root.initModuleLoad();
  r.setName(name);
  r.setHash(hash);
  // Constants inside an executable are zstd chunks already: send it raw.
  req.frame.attachments.push_back({executable.data(), executable.size(), false, nullptr});
  ModuleInfo info;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::MODULE_LOAD, [&](wire::Reply::Reader r, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(info, ToModuleInfo(r.getModuleLoad()));
    return OkStatus();
  }));
  return info;
}

std::string Session::ContentHash(std::span<const std::byte> executable) { return remex::ContentHash(executable); }

StatusOr<ModuleInfo> Session::LoadModuleCached(std::span<const std::byte> executable, const std::string& name,
                                               bool* uploaded) {
  std::string hash = ContentHash(executable);
  Request req;
  auto r = req.root.initModuleHas();
  r.setHash(hash);
  r.setName(name);
  ModuleInfo info;
  Status st = Call(*rpc_, req, wire::Reply::MODULE_LOAD, [&](wire::Reply::Reader reply, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(info, ToModuleInfo(reply.getModuleLoad()));
    return OkStatus();
  });
  if (st.ok()) {
    if (uploaded) *uploaded = false;
    return info;
  }
  if (st.code() != StatusCode::kNotFound) return st;
  if (uploaded) *uploaded = true;
  return LoadModuleWithHash(executable, name, hash);
}

StatusOr<uint64_t> Session::CreateVm(uint64_t module, const std::string& device) {
  Request req;
  auto r = req.root.initVmCreate();
  r.setModule(module);
  r.setDevice(device);
  uint64_t vm = 0;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::VM_CREATE, [&](wire::Reply::Reader reply, rpc::Frame&) {
    vm = reply.getVmCreate();
    return OkStatus();
  }));
  return vm;
}

StatusOr<RemoteTensor> Session::Alloc(DType dtype, const Shape& shape, const std::string& device) {
  return Alloc(dtype, shape, TensorFill{}, device);
}

StatusOr<RemoteTensor> Session::Alloc(DType dtype, const Shape& shape, const TensorFill& fill,
                                      const std::string& device) {
  if (fill.kind != TensorFill::Kind::kZeros && info_.protocol_minor < rpc::kMinorTensorFill) {
    return Unimplemented("the server speaks protocol " + std::to_string(info_.protocol_major) + "." +
                         std::to_string(info_.protocol_minor) + ": tensors filled on the server need 1." +
                         std::to_string(rpc::kMinorTensorFill) + " (update remex-server)");
  }
  Request req;
  auto r = req.root.initTensorAlloc();
  rpc::WriteTensorDesc(r.initDesc(), dtype, shape);
  r.setDevice(device);
  auto f = r.initFill();
  switch (fill.kind) {
    case TensorFill::Kind::kZeros:
      f.setKind(wire::TensorFill::Kind::ZEROS);
      break;
    case TensorFill::Kind::kUniform:
      f.setKind(wire::TensorFill::Kind::UNIFORM);
      break;
    case TensorFill::Kind::kNormal:
      f.setKind(wire::TensorFill::Kind::NORMAL);
      break;
  }
  f.setBounded(fill.bounded);
  f.setLow(fill.low);
  f.setHigh(fill.high);
  f.setMean(fill.mean);
  f.setScale(fill.scale);
  f.setSeed(fill.seed);
  RemoteTensor t;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(t, ToRemote(reply.getTensor()));
    return OkStatus();
  }));
  return t;
}

StatusOr<RemoteTensor> Session::Upload(const npy::Array& array, const std::string& device) {
  return Upload(array.dtype, array.shape, array.data, device);
}

StatusOr<RemoteTensor> Session::Upload(DType dtype, const Shape& shape, std::span<const std::byte> bytes,
                                       const std::string& device) {
  Request req;
  auto w = req.root.initTensorWrite();
  w.setTensor(0);
  rpc::WriteTensorDesc(w.initDesc(), dtype, shape);
  w.setDevice(device);
  w.setResultHandle(0);
  req.frame.attachments.push_back(TensorAttachment(bytes.data(), bytes.size(), dtype));
  RemoteTensor t;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(t, ToRemote(reply.getTensor()));
    return OkStatus();
  }));
  return t;
}

Status Session::Write(uint64_t tensor, DType dtype, const Shape& shape, std::span<const std::byte> bytes) {
  Request req;
  auto r = req.root.initTensorWrite();
  r.setTensor(tensor);
  rpc::WriteTensorDesc(r.initDesc(), dtype, shape);
  req.frame.attachments.push_back(TensorAttachment(bytes.data(), bytes.size(), dtype));
  return Call(*rpc_, req, wire::Reply::TENSOR, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

StatusOr<npy::Array> Session::Download(uint64_t tensor) {
  Request req;
  req.root.initTensorRead().setTensor(tensor);
  npy::Array array;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame& frame) {
    REMEX_ASSIGN_OR_RETURN(array, ToArray(reply.getTensor(), frame));
    return OkStatus();
  }));
  return array;
}

StatusOr<RemoteTensor> Session::DownloadInto(uint64_t tensor, std::span<std::byte> destination) {
  Request req;
  req.root.initTensorRead().setTensor(tensor);
  REMEX_RETURN_IF_ERROR(rpc_->Send(req.frame));
  REMEX_ASSIGN_OR_RETURN(rpc::Frame frame,
                         rpc_->Receive([&](const rpc::Frame&, size_t index, uint64_t raw_size) {
                           return index == 0 && raw_size == destination.size() ? destination
                                                                               : std::span<std::byte>();
                         }));
  if (frame.request_id != req.frame.request_id) {
    rpc_->Close();
    return Internal("reply out of step with its request; connection closed");
  }
  RemoteTensor result;
  REMEX_RETURN_IF_ERROR(ReadReply(frame, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame& f) {
    REMEX_ASSIGN_OR_RETURN(result, ToRemote(reply.getTensor()));
    if (f.attachment_in_place.size() != 1 || !f.attachment_in_place[0]) {
      return InvalidArgument("tensor " + std::to_string(tensor) + " is " +
                             std::to_string(f.attachments.empty() ? 0 : f.attachments[0].size()) +
                             " bytes, the destination " + std::to_string(destination.size()));
    }
    return OkStatus();
  }));
  return result;
}

Status Session::SetInputs(uint64_t vm, const std::string& function, const std::vector<uint64_t>& inputs) {
  Request req;
  FillSetInput(req.root.initSetInput(), vm, function, inputs);
  return Call(*rpc_, req, wire::Reply::SET_INPUT, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

Status Session::SetOutput(uint64_t vm, const std::string& function, uint32_t index, uint64_t tensor) {
  Request req;
  auto r = req.root.initSetOutput();
  r.setVm(vm);
  r.setFunction(function);
  r.setIndex(index);
  r.setTensor(tensor);
  return Call(*rpc_, req, wire::Reply::SET_OUTPUT, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

StatusOr<InvokeResult> Session::Invoke(uint64_t vm, const std::string& function,
                                       std::chrono::milliseconds deadline) {
  Request req;
  auto r = req.root.initInvoke();
  r.setVm(vm);
  r.setFunction(function);
  if (deadline.count() > 0) {
    r.setDeadlineMs(static_cast<uint32_t>(std::min<int64_t>(deadline.count(), UINT32_MAX)));
  }
  InvokeResult result;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::INVOKE, [&](wire::Reply::Reader reply, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(result, ToInvokeResult(reply.getInvoke()));
    return OkStatus();
  }));
  return result;
}

StatusOr<BenchmarkResult> Session::Benchmark(uint64_t vm, const std::string& function,
                                             const BenchmarkOptions& options) {
  Request req;
  auto r = req.root.initBenchmark();
  r.setVm(vm);
  r.setFunction(function);
  r.setNumber(options.number);
  r.setRepeat(options.repeat);
  r.setMinRepeatMs(options.min_repeat_ms);
  r.setWarmup(options.warmup);
  r.setCooldownMs(options.cooldown_ms);
  r.setL2FlushBytes(options.l2_flush_bytes);
  r.setPartialOnCancel(options.partial_on_cancel);
  BenchmarkResult result;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::BENCHMARK, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto b = reply.getBenchmark();
    result.number = b.getNumber();
    result.timer = b.getTimer();
    result.load_average_1m = b.getLoadAverage1m();
    result.cancelled = options.partial_on_cancel && b.getCancelled();
    for (double v : b.getSamplesSeconds()) result.samples_seconds.push_back(v);
    result.phases = ToRunPhases(b.getPhases());
    result.memory = ToMemoryUse(b.getMemory());
    return OkStatus();
  }));
  return result;
}

StatusOr<LoadTestResult> Session::LoadTest(uint64_t vm, const std::string& function, const LoadTestOptions& o) {
  if (info_.protocol_minor < rpc::kMinorLoadTest) {
    return Unimplemented("the server speaks protocol " + std::to_string(info_.protocol_major) + "." +
                         std::to_string(info_.protocol_minor) + ": load scenarios need 1." +
                         std::to_string(rpc::kMinorLoadTest) + " (update remex-server)");
  }
  Request req;
  auto r = req.root.initLoadTest();
  r.setVm(vm);
  r.setFunction(function);
  switch (o.scenario) {
    case LoadScenario::kSingleStream: r.setScenario(wire::LoadScenario::SINGLE_STREAM); break;
    case LoadScenario::kMultiStream: r.setScenario(wire::LoadScenario::MULTI_STREAM); break;
    case LoadScenario::kServer: r.setScenario(wire::LoadScenario::SERVER); break;
    case LoadScenario::kOffline: r.setScenario(wire::LoadScenario::OFFLINE); break;
  }
  r.setConcurrency(o.concurrency);
  r.setSamplesPerQuery(o.samples_per_query);
  r.setTargetQps(o.target_qps);
  r.setMinQueries(o.min_queries);
  r.setMinDurationMs(o.min_duration_ms);
  r.setWarmup(o.warmup);
  r.setSeed(o.seed);
  r.setAuditSamples(o.audit_samples);
  r.setAuditRtol(o.audit_rtol);
  r.setAuditAtol(o.audit_atol);
  LoadTestResult result;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::LOAD_TEST, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto l = reply.getLoadTest();
    auto issue = l.getIssueNanos();
    auto latency = l.getLatencyNanos();
    if (issue.size() != latency.size()) {
      return DataLoss("loadTest reply: " + std::to_string(issue.size()) + " issue times for " +
                      std::to_string(latency.size()) + " latencies");
    }
    result.issue_nanos.reserve(issue.size());
    result.latency_nanos.reserve(latency.size());
    for (uint64_t v : issue) result.issue_nanos.push_back(v);
    for (uint64_t v : latency) result.latency_nanos.push_back(v);
    result.completed = l.getCompleted();
    result.late = l.getLate();
    result.dropped = l.getDropped();
    result.samples = l.getSamples();
    result.duration_nanos = l.getDurationNanos();
    result.timer = l.getTimer();
    result.phases = ToRunPhases(l.getPhases());
    result.memory = ToMemoryUse(l.getMemory());
    result.audit_checked = l.getAuditChecked();
    result.audit_mismatches = l.getAuditMismatches();
    result.audit_first_mismatch = l.getAuditFirstMismatch();
    result.load_average_1m = l.getLoadAverage1m();
    return OkStatus();
  }));
  return result;
}

namespace {

// The most nodes and operands per node a profile reply may carry: far more than any
// model's kernel table and kernel arity, a bound on what the wire can make us allocate.
constexpr size_t kMaxProfileNodes = size_t{1} << 20;
constexpr size_t kMaxOperands = 4096;
constexpr size_t kMaxRank = 64;

StatusOr<std::vector<OperandDesc>> ReadOperands(capnp::List<wire::TensorDesc>::Reader list) {
  if (list.size() > kMaxOperands) return DataLoss("a node with " + std::to_string(list.size()) + " operands");
  std::vector<OperandDesc> out;
  out.reserve(list.size());
  for (auto desc : list) {
    OperandDesc d;
    if (desc.getDtype() != 0) {
      if (desc.getShape().size() > kMaxRank)
        return DataLoss("an operand of rank " + std::to_string(desc.getShape().size()));
      auto read = rpc::ReadTensorDesc(desc);
      if (!read.ok()) return DataLoss(read.status().message());
      d.present = true;
      d.dtype = read->first;
      d.shape = std::move(read->second);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

StatusOr<ProfileResult> Session::Profile(uint64_t vm, const std::string& function,
                                         const ProfileOptions& options) {
  if (options.runs < 1 || options.runs > rpc::kMaxProfileRuns) {
    return InvalidArgument("profile: runs must be in [1, " + std::to_string(rpc::kMaxProfileRuns) +
                           "], got " + std::to_string(options.runs));
  }
  Request req;
  auto r = req.root.initProfile();
  r.setVm(vm);
  r.setFunction(function);
  r.setRuns(options.runs);
  r.setTrace(options.trace);
  ProfileResult result;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::PROFILE, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto p = reply.getProfile();
    result.total_nanos = p.getTotalNanos();
    result.live_bytes_before = p.getLiveBytesBefore();
    result.live_bytes_after = p.getLiveBytesAfter();
    result.peak_live_bytes = p.getPeakLiveBytes();
    for (auto row : p.getRows()) {
      result.rows.push_back({row.getName(), row.getKind(), row.getCalls(), row.getTotalNanos(), row.getCopies(),
                             row.getCopyBytes(), row.getAllocations(), row.getAllocatedBytes(),
                             row.getPeakLiveBytes()});
    }
    // Since 1.5: runs 0 is a server before it (one run, nothing more).
    if (p.getRuns() == 0) return OkStatus();
    result.runs = p.getRuns();
    if (result.runs > options.runs) {
      return DataLoss("profile reply: " + std::to_string(result.runs) + " runs for " +
                      std::to_string(options.runs) + " asked");
    }
    if (p.getRunTotalNanos().size() != result.runs) {
      return DataLoss("profile reply: " + std::to_string(p.getRunTotalNanos().size()) + " run totals for " +
                      std::to_string(result.runs) + " runs");
    }
    for (uint64_t t : p.getRunTotalNanos()) result.run_total_nanos.push_back(t);
    result.median_run = p.getMedianRun();
    if (result.median_run >= result.runs) return DataLoss("profile reply: median run out of range");
    result.synchronized = p.getSynchronized();
    auto nodes = p.getNodes();
    if (nodes.size() > kMaxProfileNodes)
      return DataLoss("profile reply: " + std::to_string(nodes.size()) + " nodes");
    result.nodes.reserve(nodes.size());
    for (auto n : nodes) {
      ProfileNode node;
      node.name = n.getName();
      node.op = n.getOp();
      node.host = n.getHost();
      node.calls = n.getCalls();
      if (n.getRunNanos().size() != result.runs) {
        return DataLoss("profile reply: node '" + node.name + "' has " +
                        std::to_string(n.getRunNanos().size()) + " run times for " +
                        std::to_string(result.runs) + " runs");
      }
      for (uint64_t t : n.getRunNanos()) node.run_nanos.push_back(t);
      REMEX_ASSIGN_OR_RETURN(node.inputs, ReadOperands(n.getInputs()));
      REMEX_ASSIGN_OR_RETURN(node.outputs, ReadOperands(n.getOutputs()));
      result.nodes.push_back(std::move(node));
    }
    if (!options.trace) return OkStatus();
    auto opcodes = p.getOpcodeNames();
    auto functions = p.getFunctionNames();
    auto trace = p.getTrace();
    if (opcodes.size() > 256 || functions.size() > 65536 || trace.size() > rpc::kMaxProfileTraceEvents) {
      return DataLoss("profile reply: " + std::to_string(trace.size()) + " trace events, " +
                      std::to_string(opcodes.size()) + " opcodes, " + std::to_string(functions.size()) +
                      " functions");
    }
    for (auto name : opcodes) result.opcode_names.emplace_back(name);
    for (auto name : functions) result.function_names.emplace_back(name);
    result.trace.reserve(trace.size());
    for (auto e : trace) {
      ProfileTraceEvent ev{e.getStartNanos(), e.getNanos(), e.getOpcode(),  e.getRun(),
                           e.getNode(),       e.getPc(),    e.getFunction()};
      if (ev.opcode >= result.opcode_names.size() || ev.run >= result.runs || ev.node < -1 ||
          (ev.node >= 0 && static_cast<size_t>(ev.node) >= result.nodes.size()) ||
          ev.function >= result.function_names.size()) {
        return DataLoss(
            "profile reply: a trace event names an opcode, run, node or function that is not there");
      }
      result.trace.push_back(ev);
    }
    result.trace_dropped = p.getTraceDropped();
    return OkStatus();
  }));
  return result;
}

StatusOr<TensorStats> Session::Stats(uint64_t tensor) {
  Request req;
  req.root.initTensorStats().setTensor(tensor);
  TensorStats stats;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR_STATS, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto s = reply.getTensorStats();
    stats.count = s.getCount();
    stats.min = s.getMin();
    stats.max = s.getMax();
    stats.mean = s.getMean();
    stats.std = s.getStd();
    stats.nan_count = s.getNanCount();
    stats.inf_count = s.getInfCount();
    return OkStatus();
  }));
  return stats;
}

StatusOr<TensorComparison> Session::Compare(uint64_t a, uint64_t b, double rtol, double atol, bool equal_nan) {
  Request req;
  auto r = req.root.initTensorCompare();
  r.setA(a);
  r.setB(b);
  r.setRtol(rtol);
  r.setAtol(atol);
  r.setEqualNan(equal_nan);
  TensorComparison cmp;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR_COMPARE, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto c = reply.getTensorCompare();
    cmp.count = c.getCount();
    cmp.mismatches = c.getMismatches();
    cmp.max_abs_error = c.getMaxAbsError();
    cmp.max_rel_error = c.getMaxRelError();
    cmp.first_mismatch = c.getFirstMismatch();
    return OkStatus();
  }));
  return cmp;
}

uint64_t Session::NewResultHandle() { return rpc::kClientHandleBit | next_result_handle_++; }

// ---------------------------------------------------------------------------------------
// Pipeline.

struct Session::Pipeline::Impl {
  enum class Kind { kUpload, kSetInputs, kInvoke, kDownload };
  struct Entry {
    Kind kind;
    std::string what;  // for error context
  };
  std::vector<Entry> entries;
  std::vector<rpc::OutFrame> frames;
};

namespace {

std::shared_ptr<Session::Pipeline::Impl>& Lazy(std::shared_ptr<Session::Pipeline::Impl>& impl) {
  if (!impl) impl = std::make_shared<Session::Pipeline::Impl>();
  return impl;
}

}  // namespace

Session::Pipeline& Session::Pipeline::Upload(const npy::Array& array, uint64_t result_handle) {
  Request req;
  FillTensorWrite(req.root.initTensorWrite(), array, "", result_handle);
  // The frame owns a copy of the array: it is written only at Run().
  // TODO(perf): borrow the caller's bytes where their lifetime allows.
  auto copy = std::make_shared<npy::Array>(array);
  rpc::OutAttachment a = TensorAttachment(copy->data.data(), copy->data.size(), copy->dtype);
  a.keepalive = copy;
  req.frame.attachments.push_back(std::move(a));
  Lazy(impl_)->entries.push_back({Impl::Kind::kUpload, "tensorWrite"});
  impl_->frames.push_back(std::move(req.frame));
  return *this;
}

Session::Pipeline& Session::Pipeline::Upload(DType dtype, const Shape& shape, std::span<const std::byte> bytes,
                                             uint64_t result_handle, std::string what) {
  Request req;
  auto w = req.root.initTensorWrite();
  w.setTensor(0);
  rpc::WriteTensorDesc(w.initDesc(), dtype, shape);
  w.setResultHandle(result_handle);
  req.frame.attachments.push_back(TensorAttachment(bytes.data(), bytes.size(), dtype));
  Lazy(impl_)->entries.push_back({Impl::Kind::kUpload, std::move(what)});
  impl_->frames.push_back(std::move(req.frame));
  return *this;
}

Session::Pipeline& Session::Pipeline::SetInputs(uint64_t vm, const std::string& function,
                                                const std::vector<uint64_t>& inputs) {
  Request req;
  FillSetInput(req.root.initSetInput(), vm, function, inputs);
  Lazy(impl_)->entries.push_back({Impl::Kind::kSetInputs, "setInput"});
  impl_->frames.push_back(std::move(req.frame));
  return *this;
}

Session::Pipeline& Session::Pipeline::Invoke(uint64_t vm, const std::string& function,
                                             const std::vector<uint64_t>& result_handles) {
  Request req;
  auto r = req.root.initInvoke();
  r.setVm(vm);
  r.setFunction(function);
  auto list = r.initResultHandles(result_handles.size());
  for (size_t i = 0; i < result_handles.size(); ++i) list.set(i, result_handles[i]);
  Lazy(impl_)->entries.push_back({Impl::Kind::kInvoke, "invoke"});
  impl_->frames.push_back(std::move(req.frame));
  return *this;
}

Session::Pipeline& Session::Pipeline::Download(uint64_t tensor, std::string what) {
  Request req;
  req.root.initTensorRead().setTensor(tensor);
  Lazy(impl_)->entries.push_back({Impl::Kind::kDownload, std::move(what)});
  impl_->frames.push_back(std::move(req.frame));
  return *this;
}

StatusOr<Session::Pipeline::Result> Session::Pipeline::Run(Result* answered) {
  Result result;
  if (answered != nullptr) *answered = Result{};
  if (!impl_ || impl_->frames.empty()) return result;
  // Taken out first: the pipeline is empty again whatever happens below.
  std::vector<rpc::OutFrame> frames = std::move(impl_->frames);
  std::vector<Impl::Entry> entries = std::move(impl_->entries);
  impl_->frames.clear();
  impl_->entries.clear();
  rpc::Client& client = *session_.rpc_;
  // One gather write for every request; replies the server sends meanwhile are kept
  // by the transport for the Receive calls below.
  REMEX_RETURN_IF_ERROR(client.SendMany(frames).WithContext("pipeline of " + std::to_string(frames.size()) +
                                                            " requests"));
  Status first_error;
  for (size_t i = 0; i < frames.size(); ++i) {
    // The request's kind: what failed, without the pipeline's inner positions.
    auto context = [&] { return entries[i].what; };
    auto frame = client.Receive();
    if (!frame.ok()) return frame.status().WithContext(context());
    if (frame->request_id != frames[i].request_id) {
      client.Close();
      return Internal("pipeline reply " + std::to_string(frame->request_id) + " does not answer request " +
                      std::to_string(frames[i].request_id));
    }
    Status st;
    switch (entries[i].kind) {
      case Impl::Kind::kUpload:
        st = ReadReply(*frame, wire::Reply::TENSOR, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
        break;
      case Impl::Kind::kSetInputs:
        st = ReadReply(*frame, wire::Reply::SET_INPUT, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
        break;
      case Impl::Kind::kInvoke:
        st = ReadReply(*frame, wire::Reply::INVOKE, [&](wire::Reply::Reader reply, rpc::Frame&) {
          REMEX_ASSIGN_OR_RETURN(auto inv, ToInvokeResult(reply.getInvoke()));
          result.invokes.push_back(std::move(inv));
          return OkStatus();
        });
        break;
      case Impl::Kind::kDownload:
        st = ReadReply(*frame, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame& f) {
          REMEX_ASSIGN_OR_RETURN(auto array, ToArray(reply.getTensor(), f));
          result.downloads.push_back(std::move(array));
          return OkStatus();
        });
        break;
    }
    // Every reply is read, so the connection stays in step; the first error wins.
    if (!st.ok() && first_error.ok()) first_error = st.WithContext(context());
  }
  if (!first_error.ok()) {
    if (answered != nullptr) *answered = std::move(result);
    return first_error;
  }
  return result;
}

Status Session::Free(const std::vector<uint64_t>& handles) {
  Request req;
  auto list = req.root.initFree().initHandles(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) list.set(i, handles[i]);
  return Call(*rpc_, req, wire::Reply::FREE, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

Status Session::FreeWithoutReply(const std::vector<uint64_t>& handles) {
  if (handles.empty()) return OkStatus();
  Request req;
  auto list = req.root.initFree().initHandles(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) list.set(i, handles[i]);
  return rpc_->SendUnanswered(req.frame);
}

StatusOr<std::vector<HandleInfo>> Session::ListHandles() {
  if (info_.protocol_minor < rpc::kMinorListHandles) {
    return Unimplemented("the server speaks protocol " + std::to_string(info_.protocol_major) + "." +
                         std::to_string(info_.protocol_minor) + "; listing handles needs 1." +
                         std::to_string(rpc::kMinorListHandles));
  }
  Request req;
  req.root.initListHandles();
  std::vector<HandleInfo> handles;
  REMEX_RETURN_IF_ERROR(
      Call(*rpc_, req, wire::Reply::LIST_HANDLES, [&](wire::Reply::Reader reply, rpc::Frame&) {
        for (auto e : reply.getListHandles().getHandles()) {
          HandleInfo h;
          h.handle = e.getHandle();
          h.kind = e.getKind();
          h.bytes = e.getBytes();
          h.device = e.getDevice();
          h.held_known = info_.protocol_minor >= rpc::kMinorHeldBytes;
          h.held_bytes = e.getHeldBytes();
          if (h.kind == "tensor") {
            REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(e.getDesc()));
            h.dtype = desc.first;
            h.shape = std::move(desc.second);
          }
          handles.push_back(std::move(h));
        }
        return OkStatus();
      }));
  return handles;
}

Status Session::Ping() {
  Request req;
  const uint64_t payload = 0x52454d4558ull;
  req.root.initPing().setPayload(payload);
  return Call(*rpc_, req, wire::Reply::PONG, [&](wire::Reply::Reader reply, rpc::Frame&) {
    return reply.getPong().getPayload() == payload ? OkStatus() : Internal("ping payload mismatch");
  });
}

StatusOr<bool> Session::Cancel() const {
  if (info_.cancel_key.empty()) return Unimplemented("the server gave this session no cancel key");
  ConnectOptions options = options_;
  options.client_name = options_.client_name + " (cancel)";
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<Session> other, Session::Connect(host_, port_, options));
  Request req;
  auto cancel = req.root.initCancel();
  cancel.setSessionId(info_.session_id);
  cancel.setCancelKey(
      capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(info_.cancel_key.data()), info_.cancel_key.size()));
  bool cancelled = false;
  REMEX_RETURN_IF_ERROR(Call(*other->rpc_, req, wire::Reply::CANCEL, [&](wire::Reply::Reader reply, rpc::Frame&) {
    cancelled = reply.getCancel().getCancelled();
    return OkStatus();
  }));
  return cancelled;
}

StatusOr<RequestProgress> Session::ProgressOf(const ServerInfo& of) {
  if (info_.protocol_minor < rpc::kMinorProgress) {
    return Unimplemented("the server speaks protocol " + std::to_string(info_.protocol_major) + "." +
                         std::to_string(info_.protocol_minor) + ": progress needs 1." +
                         std::to_string(rpc::kMinorProgress));
  }
  if (of.cancel_key.empty()) return Unimplemented("the server gave that session no cancel key");
  Request req;
  auto p = req.root.initProgress();
  p.setSessionId(of.session_id);
  p.setCancelKey(
      capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(of.cancel_key.data()), of.cancel_key.size()));
  RequestProgress out;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::PROGRESS, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto r = reply.getProgress();
    out.running = r.getRunning();
    out.kind = r.getKind();
    out.done = r.getDone();
    out.total = r.getTotal();
    out.elapsed_s = static_cast<double>(r.getElapsedNanos()) / 1e9;
    out.remaining_s = static_cast<double>(r.getRemainingNanos()) / 1e9;
    return OkStatus();
  }));
  return out;
}

uint64_t Session::bytes_sent() const { return rpc_->bytes_sent(); }
uint64_t Session::bytes_received() const { return rpc_->bytes_received(); }
uint64_t Session::round_trips() const { return rpc_->round_trips(); }

CompressionStats Session::compression_stats() const {
  rpc::AttachmentStats a = rpc_->attachment_stats();
  return {a.raw_sent, a.wire_sent, a.raw_received, a.wire_received};
}

}  // namespace remex::client
