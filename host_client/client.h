// The Remex client library: a session with a remote device server, driven by handles.
//
//   auto session = Session::Connect("gpu-box", 9190);
//   auto module  = session->LoadModule(executable_bytes, "model");
//   auto vm      = session->CreateVm(module->handle);
//   auto x       = session->Upload(input);             // tensorWrite
//   session->SetInputs(*vm, "main", {x->handle});
//   auto outputs = session->Invoke(*vm, "main");        // shapes and dtypes only
//   auto y       = session->Download(outputs->at(0).handle);  // tensorRead
//
// Every call is one request and one reply on the session's connection. Errors from
// the server arrive as the Status it sent (code and message); transport errors are
// UNAVAILABLE or DEADLINE_EXCEEDED. Not thread-safe: one caller at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "host_client/npy.h"

namespace remex::rpc {
class Client;
}

namespace remex::client {

struct DeviceInfo {
  std::string name;
  std::string description;
  uint64_t memory_bytes = 0;
  uint64_t bytes_in_use = 0;
};

struct ServerInfo {
  std::string name;
  std::string version;
  uint16_t protocol_major = 0;
  uint16_t protocol_minor = 0;
  uint64_t session_id = 0;
  uint32_t active_sessions = 0;
  std::vector<DeviceInfo> devices;
};

// A tensor on the server: its handle, dtype and shape.
struct RemoteTensor {
  uint64_t handle = 0;
  DType dtype = DType::kUndefined;
  Shape shape;
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;  // -1: dynamic
};

struct FunctionInfo {
  std::string name;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
};

struct ModuleInfo {
  uint64_t handle = 0;
  std::vector<FunctionInfo> functions;
  uint64_t executable_bytes = 0;
  uint64_t constant_bytes = 0;
};

struct InvokeResult {
  std::vector<RemoteTensor> outputs;
  uint64_t run_nanos = 0;  // VM time measured on the server
};

struct ConnectOptions {
  std::chrono::milliseconds timeout{30000};  // connect and per-request deadline
  std::string client_name = "remex";
  bool compression = true;  // zstd for tensor attachments
};

class Session {
 public:
  // Connects and says hello (protocol version check). UNAVAILABLE when the server
  // cannot be reached, FAILED_PRECONDITION on a protocol version mismatch.
  static StatusOr<std::unique_ptr<Session>> Connect(const std::string& host, uint16_t port,
                                                    const ConnectOptions& options = {});
  ~Session();

  const ServerInfo& server_info() const { return info_; }
  // Says hello again and returns fresh server information (bytes in use, sessions).
  StatusOr<ServerInfo> Hello();

  // Uploads an executable (.rmx bytes); the server parses and verifies it.
  StatusOr<ModuleInfo> LoadModule(std::span<const std::byte> executable, const std::string& name);
  StatusOr<uint64_t> CreateVm(uint64_t module, const std::string& device = "");
  StatusOr<RemoteTensor> Alloc(DType dtype, const Shape& shape, const std::string& device = "");
  // tensorWrite of a new tensor (one round trip).
  StatusOr<RemoteTensor> Upload(const npy::Array& array, const std::string& device = "");
  // tensorWrite into an existing tensor; `bytes` must be its exact size.
  Status Write(uint64_t tensor, DType dtype, const Shape& shape, std::span<const std::byte> bytes);
  StatusOr<npy::Array> Download(uint64_t tensor);
  Status SetInputs(uint64_t vm, const std::string& function, const std::vector<uint64_t>& inputs);
  // Binds output `index` to `tensor`; tensor 0 unbinds.
  Status SetOutput(uint64_t vm, const std::string& function, uint32_t index, uint64_t tensor);
  StatusOr<InvokeResult> Invoke(uint64_t vm, const std::string& function);
  Status Free(const std::vector<uint64_t>& handles);
  // Round trip with an echoed payload.
  Status Ping();

  // Bytes on the wire in each direction, frame headers included.
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;

 private:
  Session() = default;
  std::unique_ptr<rpc::Client> rpc_;
  ServerInfo info_;
  ConnectOptions options_;
};

}  // namespace remex::client
