// One connection's session of remex-server: its handle table and request handlers
// (internal to device_server/).
//
// The class is defined across files, one per group of requests; Dispatch (session.cc)
// routes each request to its handler, as the request table (requests.def) says:
//   session.cc           lifecycle, receiving, dispatch, the handle table and budgets
//   handlers_session.cc  hello, ping, authenticate, cancel, progress
//   handlers_module.cc   moduleLoad, moduleHas, vmCreate, setInput, setOutput
//   handlers_tensor.cc   tensorAlloc, tensorWrite, tensorRead, tensorStats,
//                        tensorCompare, free, listHandles
//   handlers_run.cc      invoke, benchmark, profile, loadTest
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "device_server/request_progress.h"
#include "device_server/requests.h"
#include "device_server/server_state.h"
#include "rpc/remex.capnp.h"
#include "rpc/transport.h"
#include "rpc/wire_util.h"
#include "vm/executable.h"
#include "vm/vm.h"

namespace remex::server {

namespace wire = rpc::wire;

// Handles with this bit set are named by the client; the server never issues them.
inline std::string HandleString(uint64_t h) {
  return std::to_string(h) + (h & rpc::kClientHandleBit ? " (client-named)" : "");
}

struct VmObject {
  // The VM refers to the registry's op definitions: it keeps the one it was made with.
  std::shared_ptr<const kernels::KernelRegistry> registry;
  std::unique_ptr<vm::VirtualMachine> vm;
  // Handles bound with setOutput, per function and output index (0 = unbound).
  std::vector<std::vector<uint64_t>> bound;
  // Cold start, reported by benchmark and loadTest (RunPhases): vmCreate's time, and
  // the time of the VM's first call, whichever request made it (0: not yet).
  uint64_t create_nanos = 0;
  uint64_t first_invoke_nanos = 0;
};

using Object = std::variant<std::shared_ptr<const vm::Executable>, std::shared_ptr<VmObject>,
                            vm::TensorPtr>;

inline const char* KindName(const Object& o) {
  switch (o.index()) {
    case 0: return "module";
    case 1: return "vm";
    default: return "tensor";
  }
}

template <typename T>
constexpr const char* WantName() {
  if constexpr (std::is_same_v<T, vm::TensorPtr>) return "tensor";
  else if constexpr (std::is_same_v<T, std::shared_ptr<VmObject>>) return "vm";
  else return "module";
}

// One connection's session: its handle table and request handlers.
class Session final : public rpc::ConnectionHandler {
 public:
  Session(std::shared_ptr<DeviceServer::State> state, const rpc::ConnectionInfo& info);
  ~Session() override;

  // Reads the frame's request once and serves it in its lane (requests.h: Lane): on
  // the I/O thread (also a frame that is not a readable request, or of a kind without
  // a row), the host pool, or the device worker, while the I/O thread serves other
  // connections. A request of a client that has hung up by the time the worker
  // reaches it is not run; nor is any request of a session a device fault closed
  // (ABORTED, naming the fault).
  void HandleAsync(rpc::Frame& frame, ReplyFn reply) override;

  // Closes the session after a device fault; called by HandleDeviceFault with
  // state_->sessions_mu held. The run in progress, if any, stops at its next kernel
  // boundary and every later request is refused with `why` (ABORTED). The objects are
  // released now when no request of the session is being served, else when that
  // request ends (EndRequest; the session is then counted in sessions_to_release).
  void CloseLocked(const Status& why);
  // Farm mode: the lease this session authenticated with ("" before); guarded by
  // state_->sessions_mu.
  const std::string& lease() const { return lease_; }

  // The client hung up while its request was queued or running: the run stops within
  // one kernel (it could never be answered).
  void OnPeerClosed() override;

  // Serves one request on the calling thread (the synchronous form; the server calls
  // HandleAsync).
  rpc::OutFrame Handle(rpc::Frame& frame) override;

  // A request's attachments are held in memory before the request runs (decompressed,
  // when they came compressed): together they may not exceed what remains of the
  // session's memory quota, checked before any of their bytes are read.
  Status AdmitAttachment(const rpc::Frame& /*request*/, size_t /*index*/, uint64_t frame_raw_bytes) override;

  // The bytes of a tensorWrite that creates a tensor on the CPU device are received
  // straight into the new tensor's memory: no host buffer, no copy. Anything else
  // (another request, an existing tensor, a request the handler will refuse) is
  // received as usual and checked in Handle().
  std::span<std::byte> AttachmentDestination(const rpc::Frame& request, size_t index, uint64_t raw_size) override;

  // The session has said hello and, when the server requires it (a token, a farm
  // lease), proved the token: until then the transport takes in only small frames and
  // closes the connection past --auth-timeout-s.
  bool Authenticated() const override { return hello_done_ && authenticated(); }

 private:
  // Marks a request of the session as being served (see CloseLocked); false when a
  // device fault closed the session.
  bool BeginRequest();

  // Logs a reply that is an error, at info level, one line: the session and its peer,
  // the request's kind and id, the status code and message. Every reply of the session
  // passes here once (frames the transport refuses are logged by it: ServerOptions::log).
  void LogError(const rpc::Frame& frame, const rpc::OutFrame& out) const;

  // Ends serving a request. When a device fault closed the session, the reply becomes
  // the fault's error, and objects left to this request are released.
  void EndRequest(rpc::OutFrame& out, uint64_t request_id);

  // A tensorWrite frame failed after AttachmentDestination chose its memory: an
  // existing tensor written in place is now partly written, so its handle is dropped
  // (later requests naming it get NOT_FOUND, never its half-old, half-new bytes); a new
  // tensor never got a handle. The frame's request ends here (HandleAsync never runs).
  void OnRequestFailed(const rpc::Frame& request_so_far, const Status& why) override;

  // Everything the session holds on the device.
  void ReleaseObjects();

  // Reads `frame`'s request into request_: the one parse of its message.
  void ReadRequest(const rpc::Frame& frame);
  // The lane request_ is served in on this server's device: its row's, with
  // kIoThreadOnHostMemory, kDeviceWorkerOrInline and kInlineWhenIdle resolved by the device's
  // capabilities (host_access_in_place, inline_execution);
  // kIoThread when it has no row.
  Lane ServingLane() const;
  // Answers request_ (read from `frame`): Dispatch, turning what it throws into an
  // error reply, and counts it in the metrics.
  rpc::OutFrame Answer(rpc::Frame& frame);
  // Answers request_ on the device worker (`on_device`) or the host pool.
  rpc::OutFrame Serve(rpc::Frame& frame, bool on_device);

  // ---- Requests: the handler of each, grouped as the request table (requests.def).
  // Checks that the session said hello and is authenticated, that a request creating
  // handles has room for one, then calls request_'s handler.
  Status Dispatch(rpc::Frame& frame, wire::Reply::Builder reply, rpc::OutFrame& out);

  // Session requests (handlers_session.cc).
  Status Hello(wire::Hello::Reader req, wire::Reply::Builder reply);
  Status Ping(wire::Ping::Reader req, wire::Reply::Builder reply);
  // Checks the client's proof of the token against this session's challenge (single
  // use), and proves the server's knowledge of it in return.
  Status Authenticate(wire::Authenticate::Reader req, wire::Reply::Builder reply);

  // Cancels the request session `sessionId` has in progress (see wire::Cancel).
  Status Cancel(wire::Cancel::Reader req, wire::Reply::Builder reply);
  Status Progress(wire::Progress::Reader req, wire::Reply::Builder reply);
  // The open session with this id and cancel key (hello's), or nullptr. Call with
  // state_->sessions_mu held.
  Session* FindByCancelKeyLocked(uint64_t session_id, capnp::Data::Reader key) const;
  bool authenticated() const {
    return (state_->config.token.empty() && !state_->config.lease_key) || authenticated_;
  }

  std::string NotAuthenticatedMessage() const;

  // Module and VM requests (handlers_module.cc).
  // Replies with a new handle to `exe`, its functions and sizes.
  void FillModuleLoadReply(std::shared_ptr<const vm::Executable> exe, uint64_t file_bytes,
                           wire::ModuleLoadReply::Builder r);
  static Status CheckHashForm(const std::string& hash);
  Status ModuleLoad(wire::ModuleLoad::Reader req, rpc::Frame& frame, wire::Reply::Builder reply);
  Status ModuleHas(wire::ModuleHas::Reader req, wire::Reply::Builder reply);
  Status VmCreate(wire::VmCreate::Reader req, wire::Reply::Builder reply);
  StatusOr<std::pair<std::shared_ptr<VmObject>, int>> LookupFunction(uint64_t vm_handle,
                                                                     capnp::Text::Reader name);
  Status SetInput(wire::SetInput::Reader req, wire::Reply::Builder reply);
  Status SetOutput(wire::SetOutput::Reader req, wire::Reply::Builder reply);

  // Tensor requests (handlers_tensor.cc).
  Status TensorAlloc(wire::TensorAlloc::Reader req, wire::Reply::Builder reply);
  Status TensorWrite(wire::TensorWrite::Reader req, rpc::Frame& frame, wire::Reply::Builder reply);
  Status TensorRead(wire::TensorRead::Reader req, wire::Reply::Builder reply, rpc::OutFrame& out);
  Status TensorStats(wire::TensorStats::Reader req, wire::Reply::Builder reply);
  Status TensorCompare(wire::TensorCompare::Reader req, wire::Reply::Builder reply);

  // All or nothing: when a handle is unknown, nothing is freed.
  Status Free(wire::Free::Reader req, wire::Reply::Builder reply);
  // Every handle of the session with its kind and size, in ascending order.
  Status ListHandles(wire::ListHandles::Reader req, wire::Reply::Builder reply);

  // Run requests (handlers_run.cc).
  // The next run's deadline: `client_ms` (0: none asked) capped at --max-invoke-ms.
  void ArmRunDeadline(uint32_t client_ms);
  Status Invoke(wire::Invoke::Reader req, wire::Reply::Builder reply);
  Status Benchmark(wire::Benchmark::Reader req, wire::Reply::Builder reply);
  Status Profile(wire::Profile::Reader req, wire::Reply::Builder reply);
  // Load scenarios on instances of the VM's module (load_test.h); runs its generator
  // on a thread of its own while the device thread waits (exclusive, as benchmark).
  Status LoadTest(wire::LoadTest::Reader req, wire::Reply::Builder reply);
  // The session's memory around a run (MemoryUse): `before` is the allocator's live
  // bytes before it, the peaks are read from the allocator's high-water mark.
  void FillMemoryUse(const VmObject& obj, uint64_t before, uint64_t invoke_peak, uint64_t run_peak,
                     wire::MemoryUse::Builder m) const;

  // ---- The handle table (session.cc).
  template <typename T>
  StatusOr<T> Lookup(uint64_t handle) {
    auto it = objects_.find(handle);
    if (it == objects_.end()) {
      return NotFound("handle " + HandleString(handle) + " does not exist in this session");
    }
    if (auto* v = std::get_if<T>(&it->second)) return *v;
    return InvalidArgument("handle " + HandleString(handle) + " is a " + KindName(it->second) +
                           ", not a " + WantName<T>());
  }

  // RESOURCE_EXHAUSTED unless `n` more handles fit under the session's cap.
  Status CheckHandleRoom(size_t n) const;

  // Adds `o` under a new server-issued handle (bit 63 clear).
  uint64_t Add(Object o);

  // Checks that `handle` may name a new object: bit 63 set, not in use.
  Status CheckClientHandle(uint64_t handle) const;
  Status CheckDevice(capnp::Text::Reader device);

  std::shared_ptr<DeviceServer::State> state_;
  const uint64_t id_;
  const std::string peer_;
  bool hello_done_ = false;
  // With id_, what a Cancel request must name (made at hello); guarded by sessions_mu.
  static constexpr size_t kCancelKeyBytes = 16;
  std::string cancel_key_;
  bool cancel_requested_ = false;  // control_ was cancelled by a Cancel request; sessions_mu
  // When control_.cancelled was last set (written before it, read after it).
  std::chrono::steady_clock::time_point cancelled_at_;
  // Milliseconds since cancelled_at_: how long a cancelled run took to stop.
  double MillisSinceCancel() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cancelled_at_)
        .count();
  }
  std::string client_name_;
  // Token authentication (when the server has a token): the challenge of the last
  // hello, whether the session proved the token, and whether it failed to.
  std::string challenge_;
  bool authenticated_ = false;
  bool auth_failed_ = false;
  // Farm mode: the public key of the device's lease when this session said hello ("":
  // none), which Authenticate checks the signature against, and the one it
  // authenticated with; why the lease record was refused ("": it was not).
  std::string hello_lease_;
  std::string hello_lease_refused_;
  std::string lease_;
  std::unordered_map<uint64_t, Object> objects_;
  // The request being served, read once from its frame (ReadRequest, HandleAsync):
  // the connection reads its next frame only after the reply, so there is one at a
  // time. `message` reads the frame's bytes, valid until the reply. (Held by pointer:
  // a capnp reader's destructor may throw, which would make ~Session's throw too.)
  struct CurrentRequest {
    std::unique_ptr<capnp::FlatArrayMessageReader> message;
    wire::Request::Reader root;
    const RequestRow* row = nullptr;  // nullptr: a kind without a row, or unreadable
    Status readable;                  // INVALID_ARGUMENT: the frame is not a readable request
  } request_;
  // The tensor AttachmentDestination allocated for the frame being received.
  vm::TensorPtr pending_write_;
  // This session's memory: the server's allocator under the session's quota.
  std::shared_ptr<vm::Allocator> allocator_;
  // Bounds this session's runs: its deadline, its cancellation (client gone, device
  // fault), server stop.
  vm::RunControl control_;
  // How far its benchmark, loadTest or profile is, for another connection's progress
  // request.
  RequestProgress progress_;
  bool last_failed_ = false;  // the last request Answer() served failed
  // How long this session's last invoke (Lane::kDeviceWorkerOrInline) took, wherever
  // it ran; max until one has run. Written by the request's work, read when the next request arrives (after
  // the reply, which orders the two). See ServerConfig::inline_invoke_below.
  std::chrono::steady_clock::duration last_invoke_time_ = std::chrono::steady_clock::duration::max();
  // Device faults, guarded by state_->sessions_mu: a request is being served (or
  // received in place), the reason the session was closed, and whether it is counted
  // in state_->sessions_to_release.
  bool busy_ = false;
  Status closed_;
  bool release_counted_ = false;
};

}  // namespace remex::server
