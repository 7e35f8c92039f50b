#include "host_client/client.h"

#include <cstring>

#include "rpc/transport.h"

namespace remex::client {

namespace wire = rpc::wire;

namespace {

// A request under construction.
struct Request {
  rpc::OutFrame frame;
  wire::Request::Builder root;
  Request() : frame(), root(nullptr) {
    frame.message = std::make_unique<capnp::MallocMessageBuilder>();
    root = frame.message->initRoot<wire::Request>();
  }
};

void SetDesc(wire::TensorDesc::Builder out, DType dtype, const Shape& shape) {
  out.setDtype(static_cast<int32_t>(dtype));
  auto s = out.initShape(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) s.set(i, shape[i]);
}

StatusOr<std::pair<DType, Shape>> GetDesc(wire::TensorDesc::Reader desc) {
  auto dtype = DTypeFromOnnx(desc.getDtype());
  if (!dtype) return Internal("server sent dtype " + std::to_string(desc.getDtype()));
  Shape shape;
  for (int64_t d : desc.getShape()) shape.push_back(d);
  return std::make_pair(*dtype, std::move(shape));
}

StatusOr<RemoteTensor> ToRemote(wire::TensorReply::Reader r) {
  REMEX_ASSIGN_OR_RETURN(auto desc, GetDesc(r.getDesc()));
  return RemoteTensor{r.getTensor(), desc.first, std::move(desc.second)};
}

ServerInfo ToInfo(wire::HelloReply::Reader r) {
  ServerInfo info;
  info.name = r.getServerName();
  info.version = r.getServerVersion();
  info.protocol_major = r.getProtocolMajor();
  info.protocol_minor = r.getProtocolMinor();
  info.session_id = r.getSessionId();
  info.active_sessions = r.getActiveSessions();
  for (auto d : r.getDevices()) {
    info.devices.push_back({d.getName(), d.getDescription(), d.getMemoryBytes(), d.getBytesInUse()});
  }
  return info;
}

// Sends `req`, receives its reply and hands the reply root (non-error) to `read`.
template <typename F>
Status Call(rpc::Client& client, Request& req, wire::Reply::Which expected, F&& read) {
  REMEX_ASSIGN_OR_RETURN(rpc::Frame frame, client.Call(req.frame));
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

}  // namespace

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Connect(const std::string& host, uint16_t port,
                                                    const ConnectOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  REMEX_ASSIGN_OR_RETURN(s->rpc_, rpc::Client::Connect(host, port, options.timeout));
  s->rpc_->SetCompression(options.compression.mode != CompressionMode::kNone, options.compression.level);
  REMEX_ASSIGN_OR_RETURN(s->info_, s->Hello());
  return s;
}

StatusOr<ServerInfo> Session::Hello() {
  Request req;
  auto hello = req.root.initHello();
  hello.setProtocolMajor(rpc::kProtocolMajor);
  hello.setProtocolMinor(rpc::kProtocolMinor);
  hello.setClientName(options_.client_name);
  ServerInfo info;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::HELLO, [&](wire::Reply::Reader r, rpc::Frame&) {
    info = ToInfo(r.getHello());
    return OkStatus();
  }));
  return info;
}

StatusOr<ModuleInfo> Session::LoadModule(std::span<const std::byte> executable, const std::string& name) {
  Request req;
  req.root.initModuleLoad().setName(name);
  // Constants inside an executable are zstd chunks already: send it raw.
  req.frame.attachments.push_back({executable.data(), executable.size(), false, nullptr});
  ModuleInfo info;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::MODULE_LOAD, [&](wire::Reply::Reader r, rpc::Frame&) {
    auto m = r.getModuleLoad();
    info.handle = m.getModule();
    info.executable_bytes = m.getExecutableBytes();
    info.constant_bytes = m.getConstantBytes();
    for (auto f : m.getFunctions()) {
      FunctionInfo fn;
      fn.name = f.getName();
      for (auto v : f.getInputs()) {
        REMEX_ASSIGN_OR_RETURN(auto desc, GetDesc(v.getDesc()));
        fn.inputs.push_back({v.getName(), desc.first, desc.second});
      }
      for (auto v : f.getOutputs()) {
        REMEX_ASSIGN_OR_RETURN(auto desc, GetDesc(v.getDesc()));
        fn.outputs.push_back({v.getName(), desc.first, desc.second});
      }
      info.functions.push_back(std::move(fn));
    }
    return OkStatus();
  }));
  return info;
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
  Request req;
  auto r = req.root.initTensorAlloc();
  SetDesc(r.initDesc(), dtype, shape);
  r.setDevice(device);
  RemoteTensor t;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame&) {
    REMEX_ASSIGN_OR_RETURN(t, ToRemote(reply.getTensor()));
    return OkStatus();
  }));
  return t;
}

StatusOr<RemoteTensor> Session::Upload(const npy::Array& array, const std::string& device) {
  Request req;
  auto r = req.root.initTensorWrite();
  r.setTensor(0);
  SetDesc(r.initDesc(), array.dtype, array.shape);
  r.setDevice(device);
  req.frame.attachments.push_back({array.data.data(), array.data.size(), true, nullptr});
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
  SetDesc(r.initDesc(), dtype, shape);
  req.frame.attachments.push_back({bytes.data(), bytes.size(), true, nullptr});
  return Call(*rpc_, req, wire::Reply::TENSOR, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

StatusOr<npy::Array> Session::Download(uint64_t tensor) {
  Request req;
  req.root.initTensorRead().setTensor(tensor);
  npy::Array array;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::TENSOR, [&](wire::Reply::Reader reply, rpc::Frame& frame) {
    REMEX_ASSIGN_OR_RETURN(auto desc, GetDesc(reply.getTensor().getDesc()));
    array.dtype = desc.first;
    array.shape = std::move(desc.second);
    if (frame.attachments.size() != 1) return Internal("tensorRead reply carries no data");
    array.data = std::move(frame.attachments[0]);
    auto n = NumElements(array.shape);
    if (!n || array.data.size() != static_cast<size_t>(*n) * DTypeSize(array.dtype)) {
      return Internal("tensorRead reply size does not match its shape");
    }
    return OkStatus();
  }));
  return array;
}

Status Session::SetInputs(uint64_t vm, const std::string& function, const std::vector<uint64_t>& inputs) {
  Request req;
  auto r = req.root.initSetInput();
  r.setVm(vm);
  r.setFunction(function);
  auto list = r.initInputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) list.set(i, inputs[i]);
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

StatusOr<InvokeResult> Session::Invoke(uint64_t vm, const std::string& function) {
  Request req;
  auto r = req.root.initInvoke();
  r.setVm(vm);
  r.setFunction(function);
  InvokeResult result;
  REMEX_RETURN_IF_ERROR(Call(*rpc_, req, wire::Reply::INVOKE, [&](wire::Reply::Reader reply, rpc::Frame&) {
    auto inv = reply.getInvoke();
    result.run_nanos = inv.getRunNanos();
    for (auto o : inv.getOutputs()) {
      REMEX_ASSIGN_OR_RETURN(auto desc, GetDesc(o.getDesc()));
      result.outputs.push_back({o.getTensor(), desc.first, std::move(desc.second)});
    }
    return OkStatus();
  }));
  return result;
}

Status Session::Free(const std::vector<uint64_t>& handles) {
  Request req;
  auto list = req.root.initFree().initHandles(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) list.set(i, handles[i]);
  return Call(*rpc_, req, wire::Reply::FREE, [](wire::Reply::Reader, rpc::Frame&) { return OkStatus(); });
}

Status Session::Ping() {
  Request req;
  const uint64_t payload = 0x52454d4558ull;
  req.root.initPing().setPayload(payload);
  return Call(*rpc_, req, wire::Reply::PONG, [&](wire::Reply::Reader reply, rpc::Frame&) {
    return reply.getPong().getPayload() == payload ? OkStatus() : Internal("ping payload mismatch");
  });
}

uint64_t Session::bytes_sent() const { return rpc_->bytes_sent(); }
uint64_t Session::bytes_received() const { return rpc_->bytes_received(); }

}  // namespace remex::client
