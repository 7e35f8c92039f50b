#include "device_server/device_server.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "base/fiber.h"
#include "device_server/metrics.h"
#include "device_server/module_cache.h"
#include "device_server/time_evaluator.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "rpc/auth.h"
#include "rpc/transport.h"
#include "rpc/wire_util.h"
#include "base/content_hash.h"
#include "vm/cuda_device.h"
#include "vm/device.h"
#include "vm/executable.h"
#include "vm/tensor_ops.h"
#include "vm/vm.h"

namespace remex::server {

namespace wire = rpc::wire;

namespace {

// Runs device work on one thread per device: the sessions' requests (Post, see
// Session::HandleAsync). Kernel libraries thus see one calling thread however many
// sessions are served (oneDNN's OpenMP team is per calling thread; several teams on few
// cores oversubscribe them). Buffers are still allocated and freed from I/O threads
// (in-place receives, session teardown); the Allocator is thread-safe for that.
//
// Each request runs as a fiber (base/fiber.h), and the fibers take turns: a run yields
// between kernels (Yield, called by the VM through RunControl::yield), and the worker
// then resumes the next ready request in arrival order. One session's long run thus
// delays another session's request by at most one kernel. Exclusive work (benchmarks
// and profiles, whose timings must be their own) does not yield: it runs to its end
// once started, and other requests wait meanwhile.
class DeviceWorker {
 public:
  DeviceWorker() : thread_([this] { Loop(); }) {}
  ~DeviceWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    // DeviceServer::Stop drains the queue first, so the last reference to the server's
    // state is never dropped on this thread.
    thread_.join();
  }

  // Queues `work` on the device thread and returns at once. `work` must not throw.
  // With `exclusive`, Yield() does nothing inside it.
  void Post(std::function<void()> work, bool exclusive = false) {
    auto task = std::make_unique<Task>();
    task->exclusive = exclusive;
    task->fiber = std::make_unique<Fiber>(std::move(work));
    Enqueue(std::move(task));
  }

  // From device work: lets the other ready requests run one step each (up to their
  // next yield) before this one goes on. Does nothing outside the worker's fibers and
  // inside exclusive work.
  static void Yield() {
    Task* task = t_task;
    if (task == nullptr || task->exclusive) return;
    Fiber::Suspend();
  }

  // How long the device thread has been in its current step of work (one request up
  // to its next yield: one kernel, or a whole exclusive benchmark); zero when idle.
  std::chrono::nanoseconds current_step() const {
    const int64_t started = step_started_.load();
    if (started == 0) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(std::chrono::steady_clock::now().time_since_epoch().count() - started);
  }

  // Waits until every task queued before the call has run and been destroyed. Not to
  // be called from the device thread.
  void Drain() {
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    Post([&done] { done.set_value(); });
    finished.wait();
    // The marker's fiber is destroyed right after it returns; wait for that too.
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [this] { return tasks_.empty() && running_ == nullptr; });
  }

 private:
  struct Task {
    std::unique_ptr<Fiber> fiber;
    bool exclusive = false;
  };

  void Enqueue(std::unique_ptr<Task> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  void Loop() {
    for (;;) {
      std::unique_ptr<Task> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        running_ = task.get();
      }
      t_task = task.get();
      step_started_.store(std::chrono::steady_clock::now().time_since_epoch().count());
      const bool finished = task->fiber->Resume();
      step_started_.store(0);
      t_task = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = nullptr;
        if (!finished) tasks_.push_back(std::move(task));  // behind everything that is ready
        task.reset();  // a finished task's fiber
      }
      idle_cv_.notify_all();
    }
  }

  static thread_local Task* t_task;

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<Task>> tasks_;
  Task* running_ = nullptr;
  bool stopping_ = false;
  std::atomic<int64_t> step_started_{0};  // steady-clock ticks; 0: idle
  std::thread thread_;  // last: starts after the queue exists
};

thread_local DeviceWorker::Task* DeviceWorker::t_task = nullptr;

class Session;

}  // namespace

struct DeviceServer::State {
  // Op definitions and this device's kernels. Replaced when the device is reset (the
  // CUDA kernels hold the device's stream): take it with Registry().
  std::shared_ptr<const kernels::KernelRegistry> registry;
  std::mutex registry_mu;
  std::unique_ptr<vm::Device> device;
  std::shared_ptr<vm::Allocator> allocator;
  std::atomic<uint64_t> next_handle{1};
  std::atomic<uint64_t> next_session{1};
  std::atomic<uint64_t> active_sessions{0};
  std::unique_ptr<ModuleCache> module_cache;
  std::chrono::milliseconds benchmark_time_limit{0};
  ServerConfig config;
  uint64_t session_memory_bytes = 0;  // config's, resolved against the device
  // Set by Stop(): new requests are refused, and runs stop once `shutdown_at` (steady
  // clock ticks; max: not stopping) has passed.
  std::atomic<bool> draining{false};
  std::atomic<int64_t> shutdown_at{std::numeric_limits<int64_t>::max()};
  // Host-only request work (module parsing and verification), off the device thread.
  boost::asio::thread_pool host_pool{2};
  RequestMetrics requests;

  // Device faults (see HandleDeviceFault): every open session, and the fault the
  // server is recovering from. Guarded by sessions_mu, with each Session's fault
  // fields.
  std::mutex sessions_mu;
  std::unordered_set<Session*> sessions;
  Status fault;                       // non-OK from a fault until the device is reset
  bool reset_failed = false;          // the reset failed: the device stays unusable
  uint64_t sessions_to_release = 0;   // closed sessions still holding objects
  std::atomic<bool> faulted{false};   // !fault.ok(), read without the lock
  std::atomic<uint64_t> device_faults{0};
  std::atomic<uint64_t> device_resets{0};

  DeviceWorker worker;  // last: destroyed first, running what is still queued

  std::shared_ptr<const kernels::KernelRegistry> Registry() {
    std::lock_guard<std::mutex> lock(registry_mu);
    return registry;
  }
};

namespace {

constexpr char kServerVersion[] = REMEX_VERSION;  // CMake's project version
// Handles with this bit set are named by the client; the server never issues them.
std::string HandleString(uint64_t h) {
  return std::to_string(h) + (h & rpc::kClientHandleBit ? " (client-named)" : "");
}

struct VmObject {
  // The VM refers to the registry's op definitions: it keeps the one it was made with.
  std::shared_ptr<const kernels::KernelRegistry> registry;
  std::unique_ptr<vm::VirtualMachine> vm;
  // Handles bound with setOutput, per function and output index (0 = unbound).
  std::vector<std::vector<uint64_t>> bound;
};

using Object = std::variant<std::shared_ptr<const vm::Executable>, std::shared_ptr<VmObject>,
                            vm::TensorPtr>;

const char* KindName(const Object& o) {
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

// Device faults: called on the device worker when a request there failed and the
// device reports a fault (Device::Health). Closes every session (see
// Session::CloseLocked) and, once all of them have released their objects, resets the
// device on the worker (ResetAfterFault). Does nothing while a fault is being handled.
void HandleDeviceFault(DeviceServer::State& state, const Status& fault);
// A session closed by a fault has released its objects: the last one posts the reset.
void SessionReleasedAfterFault(DeviceServer::State& state);

// One connection's session: its handle table and request handlers.
class Session final : public rpc::ConnectionHandler {
 public:
  Session(std::shared_ptr<DeviceServer::State> state, const rpc::ConnectionInfo& info)
      : state_(std::move(state)), id_(state_->next_session++), peer_(info.peer) {
    allocator_ = vm::Allocator::CreateWithQuota(state_->allocator, state_->session_memory_bytes,
                                                "session " + std::to_string(id_));
    control_.shutdown_at = &state_->shutdown_at;
    control_.yield = &DeviceWorker::Yield;
    state_->active_sessions++;
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);
      state_->sessions.insert(this);
    }
    spdlog::info("session {} opened by {}", id_, peer_);
  }

  ~Session() override {
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

  // hello, ping and (on the CPU device, whose memory the reply is sent from directly)
  // tensorRead are answered on the I/O thread; every other request runs on the device
  // worker, and the I/O thread serves other connections meanwhile. A request of a
  // client that has hung up by the time the worker reaches it is not run; nor is any
  // request of a session a device fault closed (ABORTED, naming the fault).
  void HandleAsync(rpc::Frame& frame, ReplyFn reply) override {
    const bool open = BeginRequest();
    if (!open || state_->draining.load() || AnsweredOnIoThread(frame, state_->device->kind())) {
      rpc::OutFrame out;
      if (open) {
        out = state_->draining.load()
                  ? rpc::MakeErrorReply(frame.request_id, Unavailable("the server is shutting down"))
                  : Handle(frame);
      }
      EndRequest(out, frame.request_id);
      LogError(frame, out);
      reply(std::move(out));
      return;
    }
    const wire::Request::Which kind = Kind(frame);
    // Module parsing, decompression and verification need no device.
    const bool on_device = kind != wire::Request::MODULE_LOAD && kind != wire::Request::MODULE_HAS;
    auto work = [this, &frame, reply = std::move(reply), on_device] {
      rpc::OutFrame out = Serve(frame, on_device);
      EndRequest(out, frame.request_id);
      LogError(frame, out);
      reply(std::move(out));
    };
    switch (kind) {
      case wire::Request::MODULE_LOAD:
      case wire::Request::MODULE_HAS:
        // On the host pool: the device goes on serving other sessions meanwhile.
        boost::asio::post(state_->host_pool, std::move(work));
        return;
      case wire::Request::BENCHMARK:
      case wire::Request::PROFILE:
        state_->worker.Post(std::move(work), /*exclusive=*/true);  // timings of its own
        return;
      default:
        state_->worker.Post(std::move(work));
        return;
    }
  }

  // Closes the session after a device fault; called by HandleDeviceFault with
  // state_->sessions_mu held. The run in progress, if any, stops at its next kernel
  // boundary and every later request is refused with `why` (ABORTED). The objects are
  // released now when no request of the session is being served, else when that
  // request ends (EndRequest; the session is then counted in sessions_to_release).
  void CloseLocked(const Status& why) {
    if (!closed_.ok()) return;
    closed_ = why;
    if (!control_.cancelled.load(std::memory_order_acquire)) {
      control_.reason = why.message();
      control_.cancelled.store(true, std::memory_order_release);
    }
    if (busy_) {
      release_counted_ = true;
      state_->sessions_to_release++;
    } else {
      ReleaseObjects();
    }
    spdlog::warn("session {} ({}) closed by the device fault", id_, peer_);
  }

  // The client hung up while its request was queued or running: the run stops within
  // one kernel (it could never be answered).
  void OnPeerClosed() override {
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);  // against CloseLocked
      if (!control_.cancelled.load(std::memory_order_acquire)) {
        control_.reason = "the client closed the connection";
        control_.cancelled.store(true, std::memory_order_release);
      }
    }
    spdlog::info("session {} ({}): client gone, its request is cancelled", id_, peer_);
  }

  // Serves one request. Runs on the device worker (see HandleAsync), except for the
  // requests AnsweredOnIoThread names.
  rpc::OutFrame Handle(rpc::Frame& frame) override {
    rpc::OutFrame out;
    out.message = std::make_unique<capnp::MallocMessageBuilder>();
    auto reply = out.message->initRoot<wire::Reply>();
    Status status;
    std::string kind = "malformed";
    try {
      auto reader = frame.Reader();
      auto request = reader.getRoot<wire::Request>();
      kind = rpc::RequestKindName(request);
      status = Dispatch(request, frame, reply, out);
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
    pending_write_.reset();
    if (!status.ok()) {
      out.attachments.clear();
      rpc::FillError(status, reply.initError());
    }
    last_failed_ = !status.ok();
    state_->requests.Count(kind, status.code());
    return out;
  }

  // A request's attachments are held in memory before the request runs (decompressed,
  // when they came compressed): together they may not exceed what remains of the
  // session's memory quota, checked before any of their bytes are read.
  Status AdmitAttachment(const rpc::Frame& /*request*/, size_t /*index*/, uint64_t frame_raw_bytes) override {
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

  // The bytes of a tensorWrite that creates a tensor on the CPU device are received
  // straight into the new tensor's memory: no host buffer, no copy. Anything else
  // (another request, an existing tensor, a request the handler will refuse) is
  // received as usual and checked in Handle().
  std::span<std::byte> AttachmentDestination(const rpc::Frame& request, size_t index, uint64_t raw_size) override {
    // pending_write_ is only ever set below.
    if (!hello_done_ || state_->device->kind() != kernels::DeviceKind::kCpu) return {};
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
        if (!t || (*t)->nbytes() != raw_size) return {};
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

 private:
  // Marks a request of the session as being served (see CloseLocked); false when a
  // device fault closed the session.
  bool BeginRequest() {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    if (!closed_.ok()) return false;
    busy_ = true;
    return true;
  }

  // Logs a reply that is an error, at info level, one line: the session and its peer,
  // the request's kind and id, the status code and message. Every reply of the session
  // passes here once (frames the transport refuses are logged by it: ServerOptions::log).
  void LogError(const rpc::Frame& frame, const rpc::OutFrame& out) const {
    if (out.message == nullptr) return;
    auto reply = out.message->getRoot<wire::Reply>().asReader();
    if (!reply.isError()) return;
    std::string kind = "unreadable";
    try {
      auto reader = frame.Reader();
      kind = rpc::RequestKindName(reader.getRoot<wire::Request>());
    } catch (const kj::Exception&) {
    }
    spdlog::info("session {} ({}): {} request {} failed: {}", id_, peer_, kind, frame.request_id,
                 rpc::ErrorFromReply(reply).ToString());
  }

  // Ends serving a request. When a device fault closed the session, the reply becomes
  // the fault's error, and objects left to this request are released.
  void EndRequest(rpc::OutFrame& out, uint64_t request_id) {
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

  // A tensorWrite frame failed after AttachmentDestination chose its memory: an
  // existing tensor written in place is now partly written, so its handle is dropped
  // (later requests naming it get NOT_FOUND, never its half-old, half-new bytes); a new
  // tensor never got a handle. The frame's request ends here (HandleAsync never runs).
  void OnRequestFailed(const rpc::Frame& request_so_far, const Status& why) override {
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

  // Everything the session holds on the device.
  void ReleaseObjects() {
    objects_.clear();
    pending_write_.reset();
  }

  // Runs a request on the device worker (`on_device`) or the host pool.
  rpc::OutFrame Serve(rpc::Frame& frame, bool on_device) {
    if (control_.cancelled.load(std::memory_order_acquire)) {
      return rpc::MakeErrorReply(frame.request_id, Cancelled(control_.reason).WithContext("request not run"));
    }
    if (on_device && state_->faulted.load()) {
      pending_write_.reset();
      std::lock_guard<std::mutex> lock(state_->sessions_mu);
      return rpc::MakeErrorReply(frame.request_id, state_->fault);
    }
    rpc::OutFrame out = Handle(frame);
    // A deadline belongs to one run.
    control_.deadline = std::chrono::steady_clock::time_point::max();
    if (on_device && last_failed_) {
      Status fault = state_->device->Health();
      if (!fault.ok()) HandleDeviceFault(*state_, fault);  // closes this session too
    }
    return out;
  }

  // The request's kind; HELLO for a frame that is not a readable request (Handle()
  // answers it with the error).
  static wire::Request::Which Kind(const rpc::Frame& frame) {
    try {
      auto reader = frame.Reader();
      return reader.getRoot<wire::Request>().which();
    } catch (const kj::Exception&) {
      return wire::Request::HELLO;
    }
  }

  static bool AnsweredOnIoThread(const rpc::Frame& frame, kernels::DeviceKind device) {
    try {
      auto reader = frame.Reader();
      auto which = reader.getRoot<wire::Request>().which();
      return which == wire::Request::HELLO || which == wire::Request::PING || which == wire::Request::AUTHENTICATE ||
             which == wire::Request::CANCEL ||
             (which == wire::Request::TENSOR_READ && device == kernels::DeviceKind::kCpu);
    } catch (const kj::Exception&) {
      return true;  // Handle() answers it with the error
    }
  }

  Status Dispatch(wire::Request::Reader req, rpc::Frame& frame, wire::Reply::Builder reply,
                  rpc::OutFrame& out) {
    if (req.which() != wire::Request::HELLO && !hello_done_) {
      return FailedPrecondition("the session must start with hello");
    }
    if (!authenticated() && req.which() != wire::Request::HELLO && req.which() != wire::Request::AUTHENTICATE) {
      return PermissionDenied(NotAuthenticatedMessage());
    }
    switch (req.which()) {
      case wire::Request::MODULE_LOAD:
      case wire::Request::MODULE_HAS:
      case wire::Request::VM_CREATE:
      case wire::Request::TENSOR_ALLOC:
      case wire::Request::TENSOR_WRITE:
      case wire::Request::INVOKE:
        REMEX_RETURN_IF_ERROR(CheckHandleRoom(1));
        break;
      default:
        break;
    }
    switch (req.which()) {
      case wire::Request::HELLO: return Hello(req.getHello(), reply.initHello());
      case wire::Request::PING:
        reply.initPong().setPayload(req.getPing().getPayload());
        return OkStatus();
      case wire::Request::MODULE_LOAD:
        return ModuleLoad(req.getModuleLoad(), frame, reply);
      case wire::Request::VM_CREATE: return VmCreate(req.getVmCreate(), reply);
      case wire::Request::TENSOR_ALLOC: return TensorAlloc(req.getTensorAlloc(), reply);
      case wire::Request::TENSOR_WRITE: return TensorWrite(req.getTensorWrite(), frame, reply);
      case wire::Request::TENSOR_READ: return TensorRead(req.getTensorRead(), reply, out);
      case wire::Request::SET_INPUT: return SetInput(req.getSetInput(), reply);
      case wire::Request::SET_OUTPUT: return SetOutput(req.getSetOutput(), reply);
      case wire::Request::INVOKE: return Invoke(req.getInvoke(), reply);
      case wire::Request::FREE: return Free(req.getFree(), reply);
      case wire::Request::MODULE_HAS: return ModuleHas(req.getModuleHas(), reply);
      case wire::Request::BENCHMARK: return Benchmark(req.getBenchmark(), reply);
      case wire::Request::PROFILE: return Profile(req.getProfile(), reply);
      case wire::Request::TENSOR_STATS: return TensorStats(req.getTensorStats(), reply);
      case wire::Request::TENSOR_COMPARE: return TensorCompare(req.getTensorCompare(), reply);
      case wire::Request::AUTHENTICATE: return Authenticate(req.getAuthenticate(), reply);
      case wire::Request::CANCEL: return Cancel(req.getCancel(), reply);
      default: return Unimplemented("unknown request kind " + std::to_string(req.which()));
    }
  }

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
  Status CheckHandleRoom(size_t n) const {
    const uint32_t cap = state_->config.max_handles_per_session;
    if (objects_.size() + n > cap) {
      return ResourceExhausted("session " + std::to_string(id_) + " holds " + std::to_string(objects_.size()) +
                               " handles; the limit is " + std::to_string(cap) +
                               " per session (--max-handles-per-session): free some first");
    }
    return OkStatus();
  }

  // Adds `o` under a new server-issued handle (bit 63 clear).
  uint64_t Add(Object o) {
    uint64_t h = state_->next_handle++;
    objects_.emplace(h, std::move(o));
    return h;
  }

  // Checks that `handle` may name a new object: bit 63 set, not in use.
  Status CheckClientHandle(uint64_t handle) const {
    if (!(handle & rpc::kClientHandleBit)) {
      return InvalidArgument("result handle " + std::to_string(handle) +
                             " is not client-named (client-named handles have bit 63 set)");
    }
    if (objects_.count(handle)) {
      return Status(StatusCode::kAlreadyExists, "handle " + HandleString(handle) + " already exists in this session");
    }
    return OkStatus();
  }

  Status CheckDevice(capnp::Text::Reader device) {
    if (device.size() == 0 || device == state_->device->name()) return OkStatus();
    return InvalidArgument("device '" + std::string(device.cStr()) + "' is not served here (this server has '" +
                           state_->device->name() + "')");
  }

  bool authenticated() const { return state_->config.token.empty() || authenticated_; }

  std::string NotAuthenticatedMessage() const {
    return auth_failed_ ? "authentication failed earlier in this session: reconnect"
                        : "this server requires a token: authenticate after hello (clients: --token-file FILE or "
                          "REMEX_TOKEN)";
  }

  // Checks the client's proof of the token against this session's challenge (single
  // use), and proves the server's knowledge of it in return.
  Status Authenticate(wire::Authenticate::Reader req, wire::Reply::Builder reply) {
    const std::string& token = state_->config.token;
    if (token.empty()) return FailedPrecondition("this server requires no authentication");
    if (authenticated_) return FailedPrecondition("the session is authenticated already");
    if (auth_failed_) return PermissionDenied(NotAuthenticatedMessage());
    if (challenge_.empty()) return FailedPrecondition("authenticate answers hello's challenge: say hello first");
    auto nonce = req.getClientNonce();
    auto proof = req.getProof();
    const std::string client_nonce(reinterpret_cast<const char*>(nonce.begin()), nonce.size());
    const std::string client_proof(reinterpret_cast<const char*>(proof.begin()), proof.size());
    const std::string challenge = std::exchange(challenge_, std::string());
    if (client_nonce.size() != rpc::kAuthNonceBytes ||
        !rpc::ProofsEqual(client_proof, rpc::AuthProof(token, "client", challenge, client_nonce))) {
      auth_failed_ = true;
      spdlog::warn("session {} ({}): authentication failed", id_, peer_);
      return PermissionDenied("authentication failed: the proof does not match this server's token");
    }
    authenticated_ = true;
    const std::string server_proof = rpc::AuthProof(token, "server", challenge, client_nonce);
    reply.initAuthenticate().setServerProof(
        capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(server_proof.data()), server_proof.size()));
    spdlog::info("session {} ({}): authenticated", id_, peer_);
    return OkStatus();
  }

  Status Hello(wire::Hello::Reader req, wire::HelloReply::Builder reply) {
    if (req.getProtocolMajor() != rpc::kProtocolMajor) {
      return FailedPrecondition("protocol version " + std::to_string(req.getProtocolMajor()) + "." +
                                std::to_string(req.getProtocolMinor()) + " is not supported; server speaks " +
                                std::to_string(rpc::kProtocolMajor) + "." + std::to_string(rpc::kProtocolMinor));
    }
    hello_done_ = true;
    client_name_ = req.getClientName();
    spdlog::info("session {}: hello from client '{}'", id_, client_name_);
    reply.setProtocolMajor(rpc::kProtocolMajor);
    reply.setProtocolMinor(rpc::kProtocolMinor);
    reply.setServerName("remex-server");
    reply.setServerVersion(kServerVersion);
    reply.setSessionId(id_);
    // Other sessions are none of this client's business: no count, and only this
    // session's own bytes.
    reply.setActiveSessions(0);
    auto devices = reply.initDevices(1);
    devices[0].setName(state_->device->name());
    devices[0].setDescription(state_->device->description());
    devices[0].setMemoryBytes(state_->device->memory_bytes());
    devices[0].setBytesInUse(allocator_->stats().allocated_bytes);
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);  // Cancel reads it from other sessions
      if (cancel_key_.empty()) {
        REMEX_ASSIGN_OR_RETURN(cancel_key_, rpc::RandomBytes(kCancelKeyBytes));
      }
      reply.setCancelKey(
          capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(cancel_key_.data()), cancel_key_.size()));
    }
    if (!authenticated() && !auth_failed_) {
      REMEX_ASSIGN_OR_RETURN(challenge_, rpc::RandomBytes(rpc::kAuthNonceBytes));
      reply.setAuthChallenge(
          capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(challenge_.data()), challenge_.size()));
    }
    return OkStatus();
  }

  // Cancels the request session `sessionId` has in progress (see wire::Cancel).
  Status Cancel(wire::Cancel::Reader req, wire::Reply::Builder reply) {
    const auto key = req.getCancelKey();
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);
      Session* target = nullptr;
      for (Session* s : state_->sessions) {
        if (s->id_ == req.getSessionId()) target = s;
      }
      if (target == nullptr || target->cancel_key_.empty() || key.size() != target->cancel_key_.size() ||
          CRYPTO_memcmp(key.begin(), target->cancel_key_.data(), key.size()) != 0) {
        return NotFound("no open session " + std::to_string(req.getSessionId()) + " with that cancel key");
      }
      if (target->busy_ && !target->control_.cancelled.load(std::memory_order_acquire)) {
        target->control_.reason = "cancelled by a cancel request (session " + std::to_string(id_) + ")";
        target->cancel_requested_ = true;
        target->control_.cancelled.store(true, std::memory_order_release);
        cancelled = true;
      }
    }
    if (cancelled) spdlog::info("session {}: cancelled session {}'s request", id_, req.getSessionId());
    reply.initCancel().setCancelled(cancelled);
    return OkStatus();
  }

  // Replies with a new handle to `exe`, its functions and sizes.
  void FillModuleLoadReply(std::shared_ptr<const vm::Executable> exe, uint64_t file_bytes,
                           wire::ModuleLoadReply::Builder r) {
    const auto& functions = exe->def().functions;
    r.setExecutableBytes(file_bytes);
    r.setConstantBytes(exe->constant_bytes());
    auto fns = r.initFunctions(functions.size());
    for (size_t i = 0; i < functions.size(); ++i) {
      fns[i].setName(functions[i].name);
      auto fill = [](auto list, const std::vector<vm::ValueDesc>& values) {
        for (size_t k = 0; k < values.size(); ++k) {
          list[k].setName(values[k].name);
          rpc::WriteTensorDesc(list[k].initDesc(), values[k].dtype, values[k].shape);
        }
      };
      fill(fns[i].initInputs(functions[i].inputs.size()), functions[i].inputs);
      fill(fns[i].initOutputs(functions[i].outputs.size()), functions[i].outputs);
    }
    r.setModule(Add(std::move(exe)));
  }

  static Status CheckHashForm(const std::string& hash) {
    if (!remex::IsContentHash(hash)) {
      return InvalidArgument("module hash '" + hash.substr(0, 64) +
                             "' is not a content hash (32 lower-case hex digits of XXH3-128)");
    }
    return OkStatus();
  }

  Status ModuleLoad(wire::ModuleLoad::Reader req, rpc::Frame& frame, wire::Reply::Builder reply) {
    if (frame.attachments.size() != 1) {
      return InvalidArgument("moduleLoad needs the executable as its one attachment");
    }
    const auto& bytes = frame.attachments[0];
    std::string hash = req.getHash();
    if (!hash.empty()) {
      REMEX_RETURN_IF_ERROR(CheckHashForm(hash));
      std::string actual = remex::ContentHash(bytes);
      if (actual != hash) {
        return InvalidArgument("moduleLoad: hash " + hash + " does not match the executable's content hash " +
                               actual);
      }
    }
    // Constants beyond what is left of the session's memory quota could never be
    // uploaded: refuse them before decompressing anything (a few kilobytes of zstd can
    // declare gigabytes of zeros).
    const uint64_t quota = allocator_->quota_bytes();
    const uint64_t used = allocator_->stats().allocated_bytes;
    const uint64_t left = std::min(state_->device->memory_bytes(), used < quota ? quota - used : 0);
    auto loaded = vm::Executable::Load(bytes, *state_->Registry(), left);
    if (!loaded.ok() && loaded.status().code() == StatusCode::kResourceExhausted) {
      return loaded.status().WithContext("session " + std::to_string(id_) + " has " + std::to_string(left) +
                                         " bytes left of its memory quota (--session-memory-bytes)");
    }
    REMEX_ASSIGN_OR_RETURN(auto exe, std::move(loaded));
    if (!hash.empty()) exe = state_->module_cache->Insert(hash, std::move(exe), bytes.size());
    FillModuleLoadReply(std::move(exe), bytes.size(), reply.initModuleLoad());
    spdlog::info("session {}: loaded module '{}' ({} bytes{})", id_, std::string(req.getName()), bytes.size(),
                 hash.empty() ? "" : ", hash " + hash);
    return OkStatus();
  }

  Status ModuleHas(wire::ModuleHas::Reader req, wire::Reply::Builder reply) {
    std::string hash = req.getHash();
    REMEX_RETURN_IF_ERROR(CheckHashForm(hash));
    CachedModule cached = state_->module_cache->Find(hash);
    if (!cached.exe) return NotFound("module " + hash + " is not in the server's module cache");
    FillModuleLoadReply(std::move(cached.exe), cached.file_bytes, reply.initModuleLoad());
    spdlog::info("session {}: module '{}' from the cache (hash {})", id_, std::string(req.getName()), hash);
    return OkStatus();
  }

  Status VmCreate(wire::VmCreate::Reader req, wire::Reply::Builder reply) {
    REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
    REMEX_ASSIGN_OR_RETURN(auto exe, Lookup<std::shared_ptr<const vm::Executable>>(req.getModule()));
    auto obj = std::make_shared<VmObject>();
    obj->registry = state_->Registry();
    REMEX_ASSIGN_OR_RETURN(obj->vm, vm::VirtualMachine::Create(exe, allocator_, *obj->registry));
    obj->vm->set_run_control(&control_);
    for (const auto& fn : exe->def().functions) obj->bound.emplace_back(fn.outputs.size(), 0);
    reply.setVmCreate(Add(std::move(obj)));
    return OkStatus();
  }

  Status TensorAlloc(wire::TensorAlloc::Reader req, wire::Reply::Builder reply) {
    REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
    REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
    REMEX_ASSIGN_OR_RETURN(auto t, vm::AllocateTensor(*allocator_, desc.first, desc.second));
    // The allocator reuses blocks other sessions freed: a tensor handed out unwritten
    // is cleared first, so that it never shows another session's data.
    REMEX_RETURN_IF_ERROR(state_->device->Memset(t->data(), 0, t->nbytes()));
    auto r = reply.initTensor();
    rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
    r.setTensor(Add(std::move(t)));
    return OkStatus();
  }

  Status TensorWrite(wire::TensorWrite::Reader req, rpc::Frame& frame, wire::Reply::Builder reply) {
    if (frame.attachments.size() != 1) {
      return InvalidArgument("tensorWrite needs the tensor's bytes as its one attachment");
    }
    const auto& bytes = frame.attachments[0];
    const bool in_place = frame.attachment_in_place.size() == 1 && frame.attachment_in_place[0];
    if (in_place && !pending_write_) return Internal("tensorWrite: the received tensor went missing");
    vm::TensorPtr t;
    uint64_t handle = req.getTensor();
    uint64_t named = req.getResultHandle();
    if (named != 0) {
      if (handle != 0) return InvalidArgument("tensorWrite: resultHandle names a new tensor only (tensor = 0)");
      REMEX_RETURN_IF_ERROR(CheckClientHandle(named));
    }
    if (handle == 0) {
      REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
      if (in_place) {
        t = std::move(pending_write_);  // allocated and filled by AttachmentDestination
      } else {
        REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
        REMEX_ASSIGN_OR_RETURN(t, vm::AllocateTensor(*allocator_, desc.first, desc.second));
      }
    } else {
      pending_write_.reset();  // when in place, it was this very tensor
      REMEX_ASSIGN_OR_RETURN(t, Lookup<vm::TensorPtr>(handle));
      if (req.getDesc().getDtype() != 0) {
        REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
        if (desc.first != t->dtype || desc.second != t->shape) {
          return InvalidArgument("tensorWrite: tensor " + std::to_string(handle) + " is " +
                                 std::string(DTypeName(t->dtype)) + " " + ShapeToString(t->shape) +
                                 ", the request describes " + std::string(DTypeName(desc.first)) + " " +
                                 ShapeToString(desc.second));
        }
      }
    }
    if (!in_place && bytes.size() != t->nbytes()) {
      return InvalidArgument("tensorWrite: " + std::to_string(bytes.size()) + " bytes for a " +
                             std::string(DTypeName(t->dtype)) + " tensor of shape " +
                             ShapeToString(t->shape) + " (" + std::to_string(t->nbytes()) + " bytes)");
    }
    if (!in_place) {
      // TODO(perf): a pinned staging buffer for devices other than the CPU.
      REMEX_RETURN_IF_ERROR(state_->device->CopyToDevice(t->data(), bytes.data(), bytes.size()));
    }
    auto r = reply.initTensor();
    rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
    if (handle == 0 && named != 0) {
      objects_.emplace(named, std::move(t));
      handle = named;
    } else if (handle == 0) {
      handle = Add(std::move(t));
    }
    r.setTensor(handle);
    return OkStatus();
  }

  Status TensorRead(wire::TensorRead::Reader req, wire::Reply::Builder reply, rpc::OutFrame& out) {
    REMEX_ASSIGN_OR_RETURN(auto t, Lookup<vm::TensorPtr>(req.getTensor()));
    auto r = reply.initTensor();
    r.setTensor(req.getTensor());
    rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
    const auto element_size = static_cast<uint8_t>(DTypeSize(t->dtype));
    if (state_->device->kind() == kernels::DeviceKind::kCpu) {
      // CPU device memory is host memory: the reply is sent straight from the tensor,
      // which the attachment keeps alive. Nothing else of this session runs before the
      // reply is written (requests are served one at a time).
      out.attachments.push_back({t->data(), t->nbytes(), /*compress=*/true, t, element_size});
      return OkStatus();
    }
    std::vector<std::byte> bytes(t->nbytes());
    REMEX_RETURN_IF_ERROR(state_->device->CopyToHost(bytes.data(), t->data(), bytes.size()));
    out.attachments.push_back(rpc::OwnedAttachment(std::move(bytes), /*compress=*/true, element_size));
    return OkStatus();
  }

  // The next run's deadline: `client_ms` (0: none asked) capped at --max-invoke-ms.
  void ArmRunDeadline(uint32_t client_ms) {
    std::chrono::milliseconds budget = state_->config.max_invoke_time;
    if (client_ms != 0 && std::chrono::milliseconds(client_ms) < budget) budget = std::chrono::milliseconds(client_ms);
    control_.budget = budget;
    control_.deadline = std::chrono::steady_clock::now() + budget;
  }

  StatusOr<std::pair<std::shared_ptr<VmObject>, int>> LookupFunction(uint64_t vm_handle,
                                                                     capnp::Text::Reader name) {
    REMEX_ASSIGN_OR_RETURN(auto obj, Lookup<std::shared_ptr<VmObject>>(vm_handle));
    std::string fn_name = name.size() ? std::string(name.cStr()) : "main";
    REMEX_ASSIGN_OR_RETURN(int fn, obj->vm->executable().FunctionIndex(fn_name));
    return std::make_pair(obj, fn);
  }

  Status SetInput(wire::SetInput::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
    std::vector<vm::TensorPtr> inputs;
    for (uint64_t h : req.getInputs()) {
      REMEX_ASSIGN_OR_RETURN(auto t, Lookup<vm::TensorPtr>(h));
      inputs.push_back(std::move(t));
    }
    REMEX_RETURN_IF_ERROR(target.first->vm->SetInputs(target.second, std::move(inputs)));
    reply.setSetInput();
    return OkStatus();
  }

  Status SetOutput(wire::SetOutput::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
    auto& [obj, fn] = target;
    vm::TensorPtr t;
    if (req.getTensor() != 0) {
      REMEX_ASSIGN_OR_RETURN(t, Lookup<vm::TensorPtr>(req.getTensor()));
    }
    REMEX_RETURN_IF_ERROR(obj->vm->SetOutput(fn, static_cast<int>(req.getIndex()), t));
    obj->bound[fn][req.getIndex()] = req.getTensor();
    reply.setSetOutput();
    return OkStatus();
  }

  Status Invoke(wire::Invoke::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
    auto& [obj, fn] = target;
    // Client-named result handles are checked before anything runs, so a bad list
    // leaves the session as it was.
    auto named = req.getResultHandles();
    const size_t n_outputs = obj->bound[fn].size();
    if (named.size() != 0) {
      if (named.size() != n_outputs) {
        return InvalidArgument("invoke: " + std::to_string(named.size()) + " result handles for " +
                               std::to_string(n_outputs) + " outputs");
      }
      for (size_t k = 0; k < named.size(); ++k) {
        if (named[k] == 0) continue;
        REMEX_RETURN_IF_ERROR(CheckClientHandle(named[k]).WithContext("output " + std::to_string(k)));
        for (size_t j = 0; j < k; ++j) {
          if (named[j] == named[k]) {
            return InvalidArgument("invoke: result handle " + HandleString(named[k]) + " is named twice");
          }
        }
      }
    }
    REMEX_RETURN_IF_ERROR(CheckHandleRoom(n_outputs));
    auto start = std::chrono::steady_clock::now();
    ArmRunDeadline(req.getDeadlineMs());
    REMEX_ASSIGN_OR_RETURN(std::vector<vm::TensorPtr> outputs, obj->vm->Invoke(fn));
    std::chrono::nanoseconds nanos = std::chrono::steady_clock::now() - start;
    state_->requests.ObserveInvoke(nanos);
    auto r = reply.initInvoke();
    r.setRunNanos(static_cast<uint64_t>(nanos.count()));
    const vm::CopyStats& copies = obj->vm->last_invoke_copies();
    auto c = r.initCopies();
    c.setHostToDeviceCount(copies.host_to_device_count);
    c.setHostToDeviceBytes(copies.host_to_device_bytes);
    c.setDeviceToHostCount(copies.device_to_host_count);
    c.setDeviceToHostBytes(copies.device_to_host_bytes);
    const int served = obj->vm->last_invoke_function();
    if (served >= 0) r.setFunction(obj->vm->executable().def().functions[served].name);
    r.setAllocations(obj->vm->last_invoke_allocations());
    auto refs = r.initOutputs(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      uint64_t bound = obj->bound[fn][k];
      uint64_t handle;
      auto it = bound != 0 ? objects_.find(bound) : objects_.end();
      const vm::TensorPtr* held = it != objects_.end() ? std::get_if<vm::TensorPtr>(&it->second) : nullptr;
      const bool has_name = named.size() != 0 && named[k] != 0;
      if (held && *held == outputs[k]) {
        handle = bound;  // a bound output keeps its own handle (if it still names that tensor)
        // A name given for it is a second handle to the same tensor, so requests
        // pipelined behind this one can use it.
        if (has_name) objects_.emplace(named[k], outputs[k]);
      } else if (has_name) {
        handle = named[k];
        objects_.emplace(handle, outputs[k]);
      } else {
        handle = Add(outputs[k]);
      }
      refs[k].setTensor(handle);
      rpc::WriteTensorDesc(refs[k].initDesc(), outputs[k]->dtype, outputs[k]->shape);
    }
    return OkStatus();
  }

  Status Benchmark(wire::Benchmark::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
    auto& [obj, fn] = target;
    TimeEvaluatorOptions options;
    options.number = req.getNumber();
    options.repeat = req.getRepeat();
    options.min_repeat_ms = req.getMinRepeatMs();
    options.warmup = req.getWarmup();
    options.cooldown_ms = req.getCooldownMs();
    options.l2_flush_bytes = req.getL2FlushBytes();
    REMEX_RETURN_IF_ERROR(ValidateTimeEvaluatorOptions(options, state_->benchmark_time_limit));
    // Outputs are dropped after each call (bound outputs are written). The whole
    // benchmark is one run for the run control: its time limit is the deadline.
    control_.budget = state_->benchmark_time_limit;
    control_.deadline = std::chrono::steady_clock::now() + state_->benchmark_time_limit;
    auto call = [&vm = *obj->vm, fn = fn]() -> Status { return vm.Invoke(fn).status(); };
    REMEX_ASSIGN_OR_RETURN(TimeEvaluatorResult result,
                           RunTimeEvaluator(call, *allocator_, options, state_->benchmark_time_limit));
    auto r = reply.initBenchmark();
    r.setNumber(result.number);
    r.setTimer(result.timer);
    auto samples = r.initSamplesSeconds(result.samples_seconds.size());
    for (size_t i = 0; i < result.samples_seconds.size(); ++i) samples.set(i, result.samples_seconds[i]);
    return OkStatus();
  }

  Status Profile(wire::Profile::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
    auto& [obj, fn] = target;
    vm::Profiler profiler;
    ArmRunDeadline(0);
    REMEX_RETURN_IF_ERROR(obj->vm->Invoke(fn, &profiler).status());
    REMEX_RETURN_IF_ERROR(state_->device->Synchronize());
    auto rows = profiler.Rows(obj->vm->executable().def());
    auto r = reply.initProfile();
    r.setTotalNanos(profiler.total_nanos);
    auto out = r.initRows(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      out[i].setName(rows[i].name);
      out[i].setKind(rows[i].kind);
      out[i].setCalls(rows[i].counter.calls);
      out[i].setTotalNanos(rows[i].counter.total_nanos);
      out[i].setCopies(rows[i].counter.copies);
      out[i].setCopyBytes(rows[i].counter.copy_bytes);
    }
    return OkStatus();
  }

  Status TensorStats(wire::TensorStats::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto t, Lookup<vm::TensorPtr>(req.getTensor()));
    REMEX_ASSIGN_OR_RETURN(vm::TensorStats stats, vm::ComputeStats(*state_->device, *t));
    auto r = reply.initTensorStats();
    r.setCount(stats.count);
    r.setMin(stats.min);
    r.setMax(stats.max);
    r.setMean(stats.mean);
    r.setStd(stats.std);
    r.setNanCount(stats.nan_count);
    r.setInfCount(stats.inf_count);
    return OkStatus();
  }

  Status TensorCompare(wire::TensorCompare::Reader req, wire::Reply::Builder reply) {
    REMEX_ASSIGN_OR_RETURN(auto a, Lookup<vm::TensorPtr>(req.getA()));
    REMEX_ASSIGN_OR_RETURN(auto b, Lookup<vm::TensorPtr>(req.getB()));
    REMEX_ASSIGN_OR_RETURN(vm::Comparison cmp,
                           vm::CompareTensors(*state_->device, *a, *b, req.getRtol(), req.getAtol()));
    auto r = reply.initTensorCompare();
    r.setCount(cmp.count);
    r.setMismatches(cmp.mismatches);
    r.setMaxAbsError(cmp.max_abs_error);
    r.setMaxRelError(cmp.max_rel_error);
    r.setFirstMismatch(cmp.first_mismatch);
    return OkStatus();
  }

  // All or nothing: when a handle is unknown, nothing is freed.
  Status Free(wire::Free::Reader req, wire::Reply::Builder reply) {
    std::string missing;
    for (uint64_t h : req.getHandles()) {
      if (!objects_.count(h)) missing += (missing.empty() ? "" : ", ") + HandleString(h);
    }
    if (!missing.empty()) return NotFound("handles not found in this session (none freed): " + missing);
    for (uint64_t h : req.getHandles()) objects_.erase(h);
    reply.setFree();
    return OkStatus();
  }

  std::shared_ptr<DeviceServer::State> state_;
  const uint64_t id_;
  const std::string peer_;
  bool hello_done_ = false;
  // With id_, what a Cancel request must name (made at hello); guarded by sessions_mu.
  static constexpr size_t kCancelKeyBytes = 16;
  std::string cancel_key_;
  bool cancel_requested_ = false;  // control_ was cancelled by a Cancel request; sessions_mu
  std::string client_name_;
  // Token authentication (when the server has a token): the challenge of the last
  // hello, whether the session proved the token, and whether it failed to.
  std::string challenge_;
  bool authenticated_ = false;
  bool auth_failed_ = false;
  std::unordered_map<uint64_t, Object> objects_;
  // The tensor AttachmentDestination allocated for the frame being received.
  vm::TensorPtr pending_write_;
  // This session's memory: the server's allocator under the session's quota.
  std::shared_ptr<vm::Allocator> allocator_;
  // Bounds this session's runs: its deadline, its cancellation (client gone, device
  // fault), server stop.
  vm::RunControl control_;
  bool last_failed_ = false;  // the last request Handle() served failed
  // Device faults, guarded by state_->sessions_mu: a request is being served (or
  // received in place), the reason the session was closed, and whether it is counted
  // in state_->sessions_to_release.
  bool busy_ = false;
  Status closed_;
  bool release_counted_ = false;
};

// The kernel registry of `device`: the CPU kernels (host kernels run them, so a GPU's
// registry holds both) and, for a GPU, the CUDA kernels, whose workspaces come from
// `allocator` (so it counts them) and whose work goes on the device's stream.
StatusOr<std::shared_ptr<const kernels::KernelRegistry>> CreateRegistry(
    const vm::Device& device, const std::shared_ptr<vm::Allocator>& allocator) {
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<kernels::KernelRegistry> registry, kernels::CreateCpuRegistry());
  if (device.kind() == kernels::DeviceKind::kCuda) {
    REMEX_RETURN_IF_ERROR(kernels::RegisterCudaKernels(*registry, vm::CudaKernelContextFor(allocator)));
  }
  return std::shared_ptr<const kernels::KernelRegistry>(std::move(registry));
}

// Runs on the device worker once every session the fault closed has released its
// objects: nothing refers to the device's memory or stream any more. Drops the
// allocator's cache, resets the device, checks it is healthy and makes a new kernel
// registry on its new stream. On failure the device stays faulted: device requests
// are refused (UNAVAILABLE) and /healthz reports it, for a supervisor to restart the
// server.
void ResetAfterFault(DeviceServer::State& state) {
  if (state.draining.load()) return;  // stopping: nothing left to serve
  const std::string name = state.device->name();
  state.allocator->Trim();
  Status reset = state.device->Reset();
  if (reset.ok()) reset = state.device->Health();
  StatusOr<std::shared_ptr<const kernels::KernelRegistry>> registry = reset.ok()
      ? CreateRegistry(*state.device, state.allocator)
      : StatusOr<std::shared_ptr<const kernels::KernelRegistry>>(reset);
  if (registry.ok()) {
    std::lock_guard<std::mutex> lock(state.registry_mu);
    state.registry = *std::move(registry);
  }
  std::lock_guard<std::mutex> lock(state.sessions_mu);
  if (!registry.ok()) {
    state.reset_failed = true;
    state.fault = Unavailable(name + ": the device could not be reset after a device fault (" +
                              registry.status().message() + "); restart the server");
    spdlog::error("{}", state.fault.message());
    return;
  }
  state.fault = OkStatus();
  state.faulted.store(false);
  state.device_resets++;
  spdlog::warn("{}: device reset after the fault; serving again", name);
}

void HandleDeviceFault(DeviceServer::State& state, const Status& fault) {
  std::lock_guard<std::mutex> lock(state.sessions_mu);
  if (state.faulted.load()) return;
  state.device_faults++;
  spdlog::error("{}; closing {} session(s) and resetting the device", fault.message(), state.sessions.size());
  // What the sessions' clients are told, and (UNAVAILABLE) new sessions' device
  // requests until the reset is done.
  const Status why = Aborted(fault.message() + "; the server closed every session on " + state.device->name() +
                             " and resets the device: reconnect");
  state.fault = Unavailable(fault.message() + "; the server is resetting " + state.device->name() +
                            ": retry shortly");
  state.faulted.store(true);
  for (Session* session : state.sessions) session->CloseLocked(why);
  if (state.sessions_to_release == 0) {
    state.worker.Post([&state] { ResetAfterFault(state); }, /*exclusive=*/true);
  }
}

void SessionReleasedAfterFault(DeviceServer::State& state) {
  std::lock_guard<std::mutex> lock(state.sessions_mu);
  if (--state.sessions_to_release == 0 && state.faulted.load() && !state.reset_failed) {
    state.worker.Post([&state] { ResetAfterFault(state); }, /*exclusive=*/true);
  }
}

}  // namespace

namespace {

// The GPU ordinal of "cuda" (0) or "cuda:N"; -1 for any other name.
int ParseCudaDevice(const std::string& name) {
  if (name == "cuda") return 0;
  if (name.rfind("cuda:", 0) != 0) return -1;
  const std::string digits = name.substr(5);
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(digits);
}

}  // namespace

StatusOr<std::unique_ptr<DeviceServer>> DeviceServer::Start(const ServerConfig& config) {
  auto state = std::make_shared<State>();
  const int ordinal = ParseCudaDevice(config.device);
  if (config.compute_threads != 0 && config.device != "cpu") {
    return InvalidArgument("compute threads are a setting of the cpu device; " + config.device +
                           " runs its kernels on the GPU");
  }
  if (config.compute_threads < 0 || config.compute_threads > kernels::kMaxCpuComputeThreads) {
    return InvalidArgument("compute threads must be 1 to " + std::to_string(kernels::kMaxCpuComputeThreads) +
                           " (0: OpenMP's default), got " + std::to_string(config.compute_threads));
  }
  if (config.device == "cpu") {
    state->device = vm::CreateCpuDevice(config.compute_threads);
  } else if (ordinal >= 0) {
    REMEX_ASSIGN_OR_RETURN(state->device, vm::CreateCudaDevice(ordinal));
  } else {
    return InvalidArgument("unknown device '" + config.device + "' (devices: cpu, cuda:N)");
  }
  state->allocator = vm::Allocator::Create(*state->device, config.allocator_cache_bytes);
  REMEX_ASSIGN_OR_RETURN(state->registry, CreateRegistry(*state->device, state->allocator));
  if (config.inject_device_fault_at_kernel != 0) {
    spdlog::warn("{}: test-only fault injection: kernel launch {} will fail with a device fault",
                 state->device->name(), config.inject_device_fault_at_kernel);
    state->device->InjectFaultAtKernel(config.inject_device_fault_at_kernel);
  }
  // The worker's first task, before any session exists: every kernel runs after it.
  state->worker.Post([device = state->device.get()] { device->PrepareKernelThread(); });
  state->module_cache = std::make_unique<ModuleCache>(config.module_cache_bytes);
  state->benchmark_time_limit = config.benchmark_time_limit;
  state->config = config;
  state->session_memory_bytes =
      config.session_memory_bytes != 0 ? config.session_memory_bytes : state->device->memory_bytes() / 2;

  rpc::ServerOptions options;
  options.host = config.host;
  options.port = config.port;
  options.threads = config.io_threads;
  options.max_connections = config.max_connections;
  options.max_connections_per_address = config.max_connections_per_address;
  options.idle_timeout = config.idle_timeout;
  options.read_timeout = config.read_timeout;
  options.write_timeout = config.write_timeout;
  options.encode_threads = config.encode_threads;
  options.limits.max_frame_attachment_bytes = config.max_frame_bytes;
  options.limits.max_decompression_ratio = config.max_decompression_ratio;
  options.tls = config.tls;
  options.log = [](const std::string& line) { spdlog::info("{}", line); };
  std::unique_ptr<DeviceServer> server(new DeviceServer());
  server->state_ = state;
  server->server_ = std::make_unique<rpc::Server>(
      options, [state](const rpc::ConnectionInfo& info) -> std::unique_ptr<rpc::ConnectionHandler> {
        return std::make_unique<Session>(state, info);
      });
  REMEX_RETURN_IF_ERROR(server->server_->Start());
  if (config.metrics_port >= 0) {
    DeviceServer* self = server.get();
    REMEX_ASSIGN_OR_RETURN(server->metrics_,
                           HttpEndpoint::Start(config.metrics_host, static_cast<uint16_t>(config.metrics_port),
                                               [self](std::string_view target) { return self->Serve(target); }));
  }
  return server;
}

HttpResponse DeviceServer::Serve(std::string_view target) const {
  if (target == "/metrics") return {200, RenderMetrics(), "text/plain; version=0.0.4; charset=utf-8"};
  if (target == "/healthz") {
    {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);
      if (state_->reset_failed) return {503, "unhealthy: " + state_->fault.message() + "\n"};
    }
    // Stuck: one step (a kernel, or an exclusive benchmark or profile) longer than any
    // run may last, plus a margin.
    const auto limit = std::max(state_->config.max_invoke_time, state_->benchmark_time_limit) + std::chrono::seconds(30);
    const auto step = state_->worker.current_step();
    if (step > limit) {
      return {503, "stuck: the device thread has been in one step for " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(step).count()) +
                       " s (limit " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
                       " s)\n"};
    }
    return {200, "ok\n"};
  }
  if (target == "/readyz") {
    if (state_->draining.load()) return {503, "stopping\n"};
    if (state_->faulted.load()) {
      std::lock_guard<std::mutex> lock(state_->sessions_mu);
      return {503, "device fault: " + state_->fault.message() + "\n"};
    }
    auto probe = std::make_shared<std::promise<void>>();
    auto answered = probe->get_future();
    state_->worker.Post([probe] { probe->set_value(); });
    if (answered.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      return {503, "busy: the device worker did not answer within 1 s\n"};
    }
    return {200, "ready\n"};
  }
  return {404, "not found: /metrics, /healthz, /readyz\n"};
}

std::string DeviceServer::RenderMetrics() const {
  std::string out;
  auto gauge = [&](const char* name, const char* help, const std::string& labels, double value, bool counter = false) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + (counter ? " counter\n" : " gauge\n");
    char v[64];
    std::snprintf(v, sizeof v, "%.17g", value);
    out += std::string(name) + labels + " " + v + "\n";
  };
  const std::string device = "{device=\"" + state_->device->name() + "\"}";
  const auto a = state_->allocator->stats();
  gauge("remex_sessions", "Sessions open.", "", static_cast<double>(state_->active_sessions.load()));
  gauge("remex_device_memory_bytes", "Device memory held by live tensors of all sessions.", device,
        static_cast<double>(a.allocated_bytes));
  gauge("remex_device_memory_peak_bytes", "Peak of remex_device_memory_bytes since the start.", device,
        static_cast<double>(a.peak_allocated_bytes));
  gauge("remex_device_memory_reserved_bytes", "Device memory taken from the device: live plus cached blocks.",
        device, static_cast<double>(a.reserved_bytes));
  gauge("remex_device_memory_capacity_bytes", "The device's memory.", device,
        static_cast<double>(state_->device->memory_bytes()));
  const rpc::ConnectionStats& t = server_->totals();
  gauge("remex_received_bytes_total", "Bytes read from clients.", "", static_cast<double>(t.bytes_read.load()), true);
  gauge("remex_sent_bytes_total", "Bytes written to clients.", "", static_cast<double>(t.bytes_written.load()), true);
  const auto m = state_->module_cache->stats();
  gauge("remex_module_cache_hits_total", "moduleHas requests the cache answered.", "",
        static_cast<double>(m.hits), true);
  gauge("remex_module_cache_misses_total", "moduleHas requests the cache could not answer.", "",
        static_cast<double>(m.misses), true);
  gauge("remex_module_cache_entries", "Executables in the module cache.", "", static_cast<double>(m.entries));
  gauge("remex_module_cache_bytes", "Bytes the module cache holds.", "", static_cast<double>(m.bytes));
  gauge("remex_draining", "1 while the server is stopping.", "", state_->draining.load() ? 1 : 0);
  gauge("remex_device_faults_total", "Device faults met (a poisoned CUDA context, or an injected fault).", device,
        static_cast<double>(state_->device_faults.load()), true);
  gauge("remex_device_resets_total", "Device resets done after a fault.", device,
        static_cast<double>(state_->device_resets.load()), true);
  gauge("remex_device_faulted", "1 from a device fault until the device is reset.", device,
        state_->faulted.load() ? 1 : 0);
  state_->requests.Render(out);
  return out;
}

uint16_t DeviceServer::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

DeviceServer::~DeviceServer() { Stop(); }

void DeviceServer::Stop() {
  if (!server_) return;
  if (!state_->draining.exchange(true)) {
    // Drain: no new connections or requests; what runs may finish until the deadline,
    // after which every run stops within one kernel (UNAVAILABLE).
    server_->StopAccepting();
    auto at = std::chrono::steady_clock::now() + state_->config.drain_timeout;
    state_->shutdown_at.store(at.time_since_epoch().count());
    state_->worker.Drain();
    state_->host_pool.join();
  }
  metrics_.reset();
  server_->Stop();
  // Requests still on the device worker finish and hand their replies to the stopped
  // I/O context before it can be destroyed.
  state_->worker.Drain();
}

uint16_t DeviceServer::port() const { return server_->port(); }

std::string DeviceServer::device_description() const {
  return state_->device->name() + " (" + state_->device->description() + ")";
}

ServerStats DeviceServer::stats() const {
  ServerStats s;
  s.active_sessions = state_->active_sessions.load();
  auto a = state_->allocator->stats();
  s.device_bytes_in_use = a.allocated_bytes;
  s.live_buffers = a.live_buffers;
  auto m = state_->module_cache->stats();
  s.module_cache_entries = m.entries;
  s.module_cache_bytes = m.bytes;
  s.module_cache_hits = m.hits;
  s.module_cache_misses = m.misses;
  s.device_faults = state_->device_faults.load();
  s.device_resets = state_->device_resets.load();
  return s;
}

}  // namespace remex::server
