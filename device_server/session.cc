// Session: its lifecycle, receiving and dispatching requests, and its handle table.
// The request handlers are in handlers_*.cc (see session.h).
#include "device_server/session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <mutex>
#include <new>
#include <utility>

#include "vm/tensor_ops.h"

namespace remex::server {

Session::Session(std::shared_ptr<DeviceServer::State> state, const rpc::ConnectionInfo& info)
    : state_(std::move(state)), id_(state_->next_session++), peer_(info.peer) {
  allocator_ = vm::Allocator::CreateWithQuota(state_->allocator, state_->session_memory_bytes,
                                              "session " + std::to_string(id_), "--session-memory-bytes");
  control_.shutdown_at = &state_->shutdown_at;
  control_.yield = &DeviceWorker::Yield;
  state_->active_sessions++;
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    state_->sessions.insert(this);
  }
  spdlog::info("session {} opened by {}", id_, peer_);
}

Session::~Session() {
  bool counted = false;
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    state_->sessions.erase(this);
    counted = std::exchange(release_counted_, false);
  }
  size_t n = objects_.size();
  ReleaseObjects();
  if (counted) SessionReleasedAfterFault(*state_);
  // The last session out returns the allocator's cache to the device: memory goes
  // back to its baseline once nobody is served.
  if (--state_->active_sessions == 0) state_->allocator->Trim();
  spdlog::info("session {} ({}) closed, {} objects freed", id_, peer_, n);
}

void Session::HandleAsync(rpc::Frame& frame, ReplyFn reply) {
  ReadRequest(frame);
  const bool open = BeginRequest();
  const Lane lane = ServingLane();
  if (!open || state_->draining.load() || lane == Lane::kIoThread) {
    rpc::OutFrame out;
    if (open) {
      out = state_->draining.load()
                ? rpc::MakeErrorReply(frame.request_id, Unavailable("the server is shutting down"))
                : Answer(frame);
    }
    EndRequest(out, frame.request_id);
    LogError(frame, out);
    reply(std::move(out));
    return;
  }
  // A request that is not served on the I/O thread has a row (ServingLane).
  const bool timed = request_.row->lane == Lane::kDeviceWorkerOrInline;
  const size_t row = RowIndex(*request_.row);
  auto work = [this, &frame, reply = std::move(reply), on_device = lane != Lane::kHostPool, timed] {
    const auto started = std::chrono::steady_clock::now();
    rpc::OutFrame out = Serve(frame, on_device);
    if (timed) last_invoke_time_ = std::chrono::steady_clock::now() - started;
    EndRequest(out, frame.request_id);
    LogError(frame, out);
    DeviceWorker::MarkWorkReturned();  // the reply below may bring the next request
    reply(std::move(out));
  };
  switch (lane) {
    case Lane::kHostPool:
      boost::asio::post(state_->host_pool, std::move(work));
      return;
    case Lane::kExclusive:
      state_->worker.Post(std::move(work), /*exclusive=*/true);
      return;
    case Lane::kDeviceWorkerOrInline:
      if (last_invoke_time_ < state_->config.inline_invoke_below) {
        // A short invoke on an idle device: run here, on the I/O thread, with the device
        // thread's compute-thread setting (OpenMP's team size is per calling thread).
        // Past its budget the run moves to the device thread, which has its own setting.
        vm::Device* device = state_->device.get();
        if (state_->worker.RunInlineIfIdle(
                [device, work] {
                  device->PrepareKernelThread();
                  work();
                },
                state_->config.inline_invoke_below)) {
          state_->requests.CountInline(row);
          return;
        }
      }
      state_->worker.Post(std::move(work));
      return;
    case Lane::kInlineWhenIdle:
      if (state_->config.inline_invoke_below.count() > 0 &&
          state_->worker.RunInlineIfIdle(work, state_->config.inline_invoke_below)) {
        state_->requests.CountInline(row);
        return;
      }
      state_->worker.Post(std::move(work));
      return;
    default:
      state_->worker.Post(std::move(work));
      return;
  }
}

void Session::ReadRequest(const rpc::Frame& frame) {
  request_.row = nullptr;
  request_.readable = OkStatus();
  try {
    request_.message = std::make_unique<capnp::FlatArrayMessageReader>(frame.message.asPtr(), rpc::WireReaderOptions());
    request_.root = request_.message->getRoot<wire::Request>();
    request_.row = FindRequest(request_.root.which());
  } catch (const kj::Exception& e) {
    request_.readable = InvalidArgument(std::string("malformed request: ") + e.getDescription().cStr());
  }
}

Lane Session::ServingLane() const {
  if (request_.row == nullptr) return Lane::kIoThread;  // answered with the error at once
  const vm::DeviceCapabilities caps = state_->device->capabilities();
  switch (request_.row->lane) {
    case Lane::kIoThreadOnHostMemory:
      return caps.host_access_in_place() ? Lane::kIoThread : Lane::kDeviceWorker;
    case Lane::kDeviceWorkerOrInline:
    case Lane::kInlineWhenIdle:
      return caps.inline_execution ? request_.row->lane : Lane::kDeviceWorker;
    default:
      return request_.row->lane;
  }
}

void Session::CloseLocked(const Status& why) {
  if (!closed_.ok()) return;
  closed_ = why;
  if (!control_.cancelled.load(std::memory_order_acquire)) {
    control_.reason = why.message();
    cancelled_at_ = std::chrono::steady_clock::now();
    control_.cancelled.store(true, std::memory_order_release);
  }
  if (busy_) {
    release_counted_ = true;
    state_->sessions_to_release++;
  } else {
    ReleaseObjects();
  }
  spdlog::warn("session {} ({}) closed: {}", id_, peer_, why.message());
}

void Session::OnPeerClosed() {
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);  // against CloseLocked
    if (!control_.cancelled.load(std::memory_order_acquire)) {
      control_.reason = "the client closed the connection";
      cancelled_at_ = std::chrono::steady_clock::now();
      control_.cancelled.store(true, std::memory_order_release);
    }
  }
  spdlog::info("session {} ({}): client gone, its request is cancelled", id_, peer_);
}

rpc::OutFrame Session::Handle(rpc::Frame& frame) {
  ReadRequest(frame);
  return Answer(frame);
}

rpc::OutFrame Session::Answer(rpc::Frame& frame) {
  rpc::OutFrame out;
  out.message = rpc::NewMessage();
  auto reply = out.message->initRoot<wire::Reply>();
  Status status = request_.readable;
  if (status.ok()) {
    try {
      status = Dispatch(frame, reply, out);
    } catch (const kj::Exception& e) {
      status = InvalidArgument(std::string("malformed request: ") + e.getDescription().cStr());
    } catch (const std::bad_alloc&) {
      status = ResourceExhausted("out of host memory while serving the request");
    } catch (const std::exception& e) {
      status = Internal(e.what());
    } catch (...) {
      // Whatever was thrown, the client gets an answer (it would otherwise wait forever).
      status = Internal("an exception of unknown type was thrown while serving the request");
    }
  }
  pending_write_.reset();
  if (!status.ok()) {
    out.attachments.clear();
    rpc::FillError(status, reply.initError());
  }
  last_failed_ = !status.ok();
  state_->requests.Count(!request_.readable.ok()   ? RequestMetrics::kMalformed
                         : request_.row != nullptr ? RowIndex(*request_.row)
                                                   : RequestMetrics::kUnknown,
                         status.code());
  return out;
}

Status Session::AdmitAttachment(const rpc::Frame& /*request*/, size_t /*index*/, uint64_t frame_raw_bytes) {
  // Nothing is taken in from a client that has not proven the token.
  if (!authenticated()) return PermissionDenied(NotAuthenticatedMessage());
  const uint64_t quota = allocator_->quota_bytes();
  const uint64_t used = allocator_->stats().allocated_bytes;
  const uint64_t left = used < quota ? quota - used : 0;
  if (frame_raw_bytes > left) {
    return ResourceExhausted("session " + std::to_string(id_) + ": a request with " +
                             std::to_string(frame_raw_bytes) + " bytes of attachments, over what is left (" +
                             std::to_string(left) + " bytes) of its memory quota of " + std::to_string(quota) +
                             " bytes (--session-memory-bytes)");
  }
  return OkStatus();
}

std::span<std::byte> Session::AttachmentDestination(const rpc::Frame& request, size_t index, uint64_t raw_size) {
  // pending_write_ is only ever set below.
  if (!hello_done_ || !state_->device->capabilities().host_access_in_place()) return {};
  // From here the frame's request counts as served (its HandleAsync ends it): a
  // device fault leaves the objects, and the tensor received into, to EndRequest.
  if (!BeginRequest()) return {};
  pending_write_.reset();
  if (index != 0 || raw_size == 0) return {};
  try {
    auto reader = request.Reader();
    auto req = reader.getRoot<wire::Request>();
    if (req.which() != wire::Request::TENSOR_WRITE) return {};
    auto w = req.getTensorWrite();
    if (w.getTensor() != 0) {
      // An existing tensor is written in place only when TensorWrite would accept the
      // request: exactly its size, a matching description if one is given, one
      // attachment and no resultHandle. Anything else goes through a host buffer and
      // is refused there, leaving the tensor as it was.
      if (request.attachments.size() != 1 || w.getResultHandle() != 0) return {};
      auto it = objects_.find(w.getTensor());
      if (it == objects_.end()) return {};
      auto* t = std::get_if<vm::TensorPtr>(&it->second);
      if (!t || (*t)->view() || (*t)->nbytes() != raw_size) return {};
      if (w.getDesc().getDtype() != 0) {
        auto desc = rpc::ReadTensorDesc(w.getDesc());
        if (!desc.ok() || desc->first != (*t)->dtype || desc->second != (*t)->shape) return {};
      }
      pending_write_ = *t;
      return {static_cast<std::byte*>(pending_write_->data()), raw_size};
    }
    if (!CheckDevice(w.getDevice()).ok()) return {};
    auto desc = rpc::ReadTensorDesc(w.getDesc());
    if (!desc.ok()) return {};
    auto n = NumElements(desc->second);
    size_t element = DTypeSize(desc->first);
    if (!n || element == 0 || static_cast<uint64_t>(*n) > raw_size / element ||
        static_cast<uint64_t>(*n) * element != raw_size) {
      return {};
    }
    auto t = vm::AllocateTensor(*allocator_, desc->first, desc->second);
    if (!t.ok()) return {};
    pending_write_ = std::move(t).value();
    return {static_cast<std::byte*>(pending_write_->data()), raw_size};
  } catch (const kj::Exception&) {
    return {};
  }
}

bool Session::BeginRequest() {
  std::lock_guard<std::mutex> lock(state_->sessions_mu);
  if (!closed_.ok()) return false;
  busy_ = true;
  progress_.Stop();  // the last request's progress is not this one's
  return true;
}

void Session::LogError(const rpc::Frame& frame, const rpc::OutFrame& out) const {
  if (out.message == nullptr) return;
  auto reply = out.message->getRoot<wire::Reply>().asReader();
  if (!reply.isError()) return;
  const std::string_view kind = !request_.readable.ok()   ? "unreadable"
                                : request_.row != nullptr ? request_.row->name
                                                          : "unknown";
  spdlog::info("session {} ({}): {} request {} failed: {}", id_, peer_, kind, frame.request_id,
               rpc::ErrorFromReply(reply).ToString());
}

void Session::EndRequest(rpc::OutFrame& out, uint64_t request_id) {
  Status closed;
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    busy_ = false;
    closed = closed_;
    release = std::exchange(release_counted_, false);
    // A cancel request cancels one request: the session serves the next one.
    if (std::exchange(cancel_requested_, false) && closed_.ok()) {
      control_.cancelled.store(false, std::memory_order_release);
    }
  }
  if (closed.ok()) return;
  out = rpc::MakeErrorReply(request_id, closed);
  if (release) {
    ReleaseObjects();
    SessionReleasedAfterFault(*state_);
  }
}

void Session::OnRequestFailed(const rpc::Frame& request_so_far, const Status& why) {
  if (pending_write_) {
    for (auto it = objects_.begin(); it != objects_.end(); ++it) {
      auto* t = std::get_if<vm::TensorPtr>(&it->second);
      if (t && *t == pending_write_) {
        spdlog::warn("session {}: tensor {} dropped: an upload into it failed part way ({})", id_, it->first,
                     why.message());
        objects_.erase(it);
        break;
      }
    }
    pending_write_.reset();
  }
  rpc::OutFrame unused;
  EndRequest(unused, request_so_far.request_id);
}

void Session::ReleaseObjects() {
  objects_.clear();
  pending_write_.reset();
}

rpc::OutFrame Session::Serve(rpc::Frame& frame, bool on_device) {
  if (control_.cancelled.load(std::memory_order_acquire)) {
    return rpc::MakeErrorReply(frame.request_id, Cancelled(control_.reason).WithContext("request not run"));
  }
  if (on_device && state_->faulted.load()) {
    pending_write_.reset();
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    return rpc::MakeErrorReply(frame.request_id, state_->fault);
  }
  rpc::OutFrame out = Answer(frame);
  // A deadline belongs to one run.
  control_.deadline = std::chrono::steady_clock::time_point::max();
  if (on_device && last_failed_) {
    Status fault = state_->device->Health();
    if (!fault.ok()) HandleDeviceFault(*state_, fault);  // closes this session too
  }
  return out;
}

namespace {

// Calls handler `h` with the request's body and what else its signature asks for:
// the reply, and before it the request's frame (its attachments), or after it the
// reply's frame (to attach to).
template <typename Body>
Status Call(Session& s, Status (Session::*h)(Body, wire::Reply::Builder), Body body, rpc::Frame& /*frame*/,
            wire::Reply::Builder reply, rpc::OutFrame& /*out*/) {
  return (s.*h)(body, reply);
}
template <typename Body>
Status Call(Session& s, Status (Session::*h)(Body, rpc::Frame&, wire::Reply::Builder), Body body,
            rpc::Frame& frame, wire::Reply::Builder reply, rpc::OutFrame& /*out*/) {
  return (s.*h)(body, frame, reply);
}
template <typename Body>
Status Call(Session& s, Status (Session::*h)(Body, wire::Reply::Builder, rpc::OutFrame&), Body body,
            rpc::Frame& /*frame*/, wire::Reply::Builder reply, rpc::OutFrame& out) {
  return (s.*h)(body, reply, out);
}

}  // namespace

// The one place a request kind meets its handler: a case per row of requests.def.
Status Session::Dispatch(rpc::Frame& frame, wire::Reply::Builder reply, rpc::OutFrame& out) {
  const wire::Request::Reader req = request_.root;
  const wire::Request::Which kind = req.which();
  if (kind != wire::Request::HELLO && !hello_done_) {
    return FailedPrecondition("the session must start with hello");
  }
  if (!authenticated() && kind != wire::Request::HELLO && kind != wire::Request::AUTHENTICATE) {
    return PermissionDenied(NotAuthenticatedMessage());
  }
  if (request_.row == nullptr) return Unimplemented("unknown request kind " + std::to_string(kind));
  // Requests that create objects need room for at least one more handle (invoke then
  // checks for all its outputs).
  if (request_.row->creates_handles) REMEX_RETURN_IF_ERROR(CheckHandleRoom(1));
  switch (kind) {
#define REMEX_REQUEST(Name, NAME, name, lane, creates_handles) \
  case wire::Request::NAME:                                    \
    return Call(*this, &Session::Name, req.get##Name(), frame, reply, out);
#include "device_server/requests.def"
#undef REMEX_REQUEST
  }
  return Internal("request kind " + std::to_string(kind) + " has a row but no case");  // not reached
}

Status Session::CheckHandleRoom(size_t n) const {
  const uint32_t cap = state_->config.max_handles_per_session;
  if (objects_.size() + n > cap) {
    return ResourceExhausted("session " + std::to_string(id_) + " holds " + std::to_string(objects_.size()) +
                             " handles; the limit is " + std::to_string(cap) +
                             " per session (--max-handles-per-session): free some first");
  }
  return OkStatus();
}

uint64_t Session::Add(Object o) {
  uint64_t h = state_->next_handle++;
  objects_.emplace(h, std::move(o));
  return h;
}

Status Session::CheckClientHandle(uint64_t handle) const {
  if (!(handle & rpc::kClientHandleBit)) {
    return InvalidArgument("result handle " + std::to_string(handle) +
                           " is not client-named (client-named handles have bit 63 set)");
  }
  if (objects_.count(handle)) {
    return Status(StatusCode::kAlreadyExists, "handle " + HandleString(handle) + " already exists in this session");
  }
  return OkStatus();
}

Status Session::CheckDevice(capnp::Text::Reader device) {
  if (device.size() == 0 || device == state_->device->name()) return OkStatus();
  return InvalidArgument("device '" + std::string(device.cStr()) + "' is not served here (this server has '" +
                         state_->device->name() + "')");
}

}  // namespace remex::server
