// remex._native: the compiled half of the Python client (python/remex). Sessions,
// models and tensor handles over the tooling layer's InteractiveSession
// (host_client/tooling/interactive.h), the code `remex shell` and the CLI run on.
//
// Threads: every call of a session takes the session's lock with the GIL released, so
// other Python threads run while a request is on the wire, and two threads never
// interleave requests on one connection. A Tensor that goes away is freed on the server
// by the session's next call: the tensors dropped since the last call in one free request
// written with that call's, its reply not waited for (client::Session::FreeWithoutReply).
// A Model that goes away is unloaded at once when the session is idle, else by the next
// call.
//
// Ctrl-C: while a call made from the main thread runs, SIGINT also reaches a handler of
// ours (before Python's own, which it calls), whose thread (tooling::Interrupter)
// cancels the session's request on the server. The call returns promptly (a benchmark
// with the samples taken so far), and Python's handler raises KeyboardInterrupt as the
// call returns.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/version.h"
#include "host_client/tooling/compile.h"
#include "host_client/tooling/connection.h"
#include "host_client/tooling/interactive.h"
#include "host_client/tooling/interrupt.h"
#include "host_client/tooling/job.h"
#include "host_client/tooling/report_json.h"
#include "host_client/tooling/results_store.h"
#include "host_client/tooling/specs.h"
#include "host_client/tooling/text.h"
#include "host_client/tooling/tuning.h"
#include "rpc/farm_lease.h"
#include "rpc/tls.h"

namespace py = pybind11;

namespace remex::python {
namespace {

// A Status on its way to Python: translated to the exception class the package
// registered for its code (remex.NotFound, ...).
struct StatusError {
  Status status;
};

void Check(const Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T Unwrap(StatusOr<T> value) {
  if (!value.ok()) throw StatusError{value.status()};
  return std::move(value).value();
}

py::dtype NumpyDType(DType dtype) {
  if (dtype == DType::kBFloat16 || DTypeSize(dtype) == 0) {
    throw StatusError{InvalidArgument("a " + std::string(DTypeName(dtype)) + " tensor has no NumPy dtype")};
  }
  return py::dtype(std::string(DTypeName(dtype)));
}

DType RemexDType(const py::dtype& dtype) {
  const std::string name = py::str(dtype.attr("name"));
  auto d = DTypeFromName(name);
  if (!d || *d == DType::kBFloat16 || !dtype.attr("isnative").cast<bool>()) {
    throw StatusError{InvalidArgument("NumPy dtype " + py::str(static_cast<const py::handle&>(dtype)).cast<std::string>() +
                                      " has no Remex dtype (float16/32/64, int8-64, uint8-64, bool, native byte order)")};
  }
  return *d;
}

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return t;
}

// ---- Ctrl-C during a call ---------------------------------------------------------

// The process's interrupter (made at the first call from the main thread, never freed:
// its thread may be blocked in a read at exit), the main thread's id, and Python's
// SIGINT action while ours is installed.
tooling::Interrupter* g_interrupter = nullptr;
unsigned long g_main_thread = 0;
struct sigaction g_python_sigint = {};

// Ours: wakes the interrupter's thread, then runs Python's handler (which marks the
// signal for the interpreter: KeyboardInterrupt once the call returns).
extern "C" void OnSigint(int sig, siginfo_t* info, void* context) {
  if (tooling::Interrupter* irq = g_interrupter) irq->Notify(sig);
  const struct sigaction& python = g_python_sigint;
  if (python.sa_flags & SA_SIGINFO) {
    if (python.sa_sigaction != nullptr) python.sa_sigaction(sig, info, context);
  } else if (python.sa_handler != SIG_DFL && python.sa_handler != SIG_IGN && python.sa_handler != nullptr) {
    python.sa_handler(sig);
  }
}

// Whether the last call on this thread was interrupted (set by InterruptScope).
thread_local bool t_interrupted = false;

// While it lives, SIGINT cancels `session`'s request in progress: on the main thread
// only (where Python runs signal handlers), and only while Python handles SIGINT
// itself (not with SIG_DFL or SIG_IGN). Made with the session's lock held and the GIL
// released; when it ends, t_interrupted says whether SIGINT came meanwhile.
class InterruptScope {
 public:
  InterruptScope(bool main_thread, client::Session& session) {
    if (!main_thread) return;
    if (g_interrupter == nullptr) {
      auto irq = tooling::Interrupter::Start();
      if (!irq.ok()) return;  // Ctrl-C then waits for the call, as without this
      g_interrupter = irq->release();
    }
    if (sigaction(SIGINT, nullptr, &g_python_sigint) != 0) return;
    const bool handled = (g_python_sigint.sa_flags & SA_SIGINFO)
                             ? g_python_sigint.sa_sigaction != nullptr
                             : g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN;
    if (!handled) return;
    struct sigaction ours = {};
    ours.sa_sigaction = OnSigint;
    ours.sa_mask = g_python_sigint.sa_mask;
    ours.sa_flags = (g_python_sigint.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    g_interrupter->Reset();
    g_interrupter->Watch(&session);
    if (sigaction(SIGINT, &ours, nullptr) != 0) {
      g_interrupter->Watch(nullptr);
      return;
    }
    armed_ = true;
  }
  ~InterruptScope() {
    if (!armed_) return;
    sigaction(SIGINT, &g_python_sigint, nullptr);
    g_interrupter->Watch(nullptr);  // no cancel in flight after this
    t_interrupted = g_interrupter->signal().load() != 0;
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  // The signal of an interruption during the call (0: none), for
  // BenchOptions::interrupt; null when not armed.
  const std::atomic<int>* signal() const { return armed_ ? &g_interrupter->signal() : nullptr; }

 private:
  bool armed_ = false;
};

bool OnMainThread() { return g_main_thread != 0 && PyThread_get_thread_ident() == g_main_thread; }

// After a call that was interrupted, with the GIL held: runs Python's signal handlers
// now. True when they raised (KeyboardInterrupt, left set as the error to raise).
bool RaisedBySignalHandler() { return t_interrupted && PyErr_CheckSignals() != 0; }

// One session's connection and state, shared by its Session, Model and Tensor objects.
class Core {
 public:
  explicit Core(std::unique_ptr<tooling::InteractiveSession> session) : session_(std::move(session)) {}

  // Runs `f(session)` with the GIL released and the session locked, after freeing what
  // was dropped while the session was busy. FAILED_PRECONDITION once closed. From the
  // main thread, Ctrl-C meanwhile cancels the request on the server (InterruptScope):
  // `f` may take the scope's signal() for a loop of requests. The call then fails with
  // KeyboardInterrupt (Python's handler raises it) instead of its CANCELLED error; one
  // that returns is followed by KeyboardInterrupt as it returns.
  template <typename F>
  auto Call(F&& f) {
    const bool main_thread = OnMainThread();
    t_interrupted = false;
    try {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      if (!session_) throw StatusError{FailedPrecondition("the session is closed")};
      FlushLocked();
      InterruptScope scope(main_thread, session_->client());  // ends before the catch below
      if constexpr (std::is_invocable_v<F, tooling::InteractiveSession&, const std::atomic<int>*>) {
        return f(*session_, scope.signal());
      } else {
        return f(*session_);
      }
    } catch (const StatusError&) {
      if (RaisedBySignalHandler()) throw py::error_already_set();
      throw;
    }
  }

  // Handles whose Python objects went away: freed by one free request written with the
  // next call's requests (a decode loop drops its step's cache tensors one by one: one
  // request for them all, not one each). That is when a free sent at once would reach
  // the server too: the client holds an unanswered request until its next write
  // (rpc::Client::SendUnanswered). At kMaxPendingFrees handles they are handed on at
  // once when the session is idle, so that one request stays small.
  void Release(std::vector<uint64_t> handles) {
    size_t waiting = 0;
    {
      std::lock_guard<std::mutex> p(pending_mu_);
      pending_.insert(pending_.end(), handles.begin(), handles.end());
      waiting = pending_.size();
    }
    if (waiting >= kMaxPendingFrees) WhenIdle([] {}, [] {});  // FlushLocked, when idle
  }

  // A model's VM and module, when its Python object goes away (as Release).
  void ReleaseModel(tooling::SessionModel* model) {
    WhenIdle([&] { (void)session_->Unload(model->name); }, [&] { pending_models_.push_back(model); });
  }

  // Closes the connection: the server frees every handle of the session.
  // Closes the connection: the server frees every handle of the session, so nothing
  // pending is freed any more.
  void Close() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    session_.reset();
    DropPending();
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !session_;
  }

 private:
  // Runs `now()` with the session locked (after what was left pending, and with the GIL
  // released) when the session is idle, else `later()` under the pending lock, to be
  // done by the next call. Never blocks on a busy session: the caller may hold the GIL,
  // which the call in progress needs back. Nothing to do once closed (the server freed
  // everything the session held).
  template <typename Now, typename Later>
  void WhenIdle(Now now, Later later) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      std::lock_guard<std::mutex> p(pending_mu_);
      later();
      return;
    }
    if (!session_) return DropPending();  // closed: the server freed everything
    std::optional<py::gil_scoped_release> release;
    if (PyGILState_Check()) release.emplace();
    FlushLocked();
    now();
    lock.unlock();  // before the GIL is taken back
  }

  // What was left to free or unload, forgotten once the session is closed (Release keeps
  // adding to it: at most kMaxPendingFrees before WhenIdle drops it again).
  void DropPending() {
    std::lock_guard<std::mutex> p(pending_mu_);
    pending_.clear();
    pending_models_.clear();
  }

  void FlushLocked() {
    std::vector<uint64_t> handles;
    std::vector<tooling::SessionModel*> models;
    {
      std::lock_guard<std::mutex> p(pending_mu_);
      handles.swap(pending_);
      models.swap(pending_models_);
    }
    if (!handles.empty()) (void)session_->client().FreeWithoutReply(handles);
    for (auto* m : models) (void)session_->Unload(m->name);
  }

  std::mutex mu_;
  std::unique_ptr<tooling::InteractiveSession> session_;
  std::mutex pending_mu_;
  static constexpr size_t kMaxPendingFrees = 1024;
  std::vector<uint64_t> pending_;  // handles to free with the next request
  std::vector<tooling::SessionModel*> pending_models_;
};

// A tensor on the server, owned by its Python object.
class Tensor {
 public:
  Tensor(std::shared_ptr<Core> core, const client::RemoteTensor& t)
      : core_(std::move(core)), handle_(t.handle), dtype_(t.dtype), shape_(t.shape) {}
  ~Tensor() {
    if (handle_ != 0) core_->Release({handle_});
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  uint64_t handle() const { return Live(); }
  const std::shared_ptr<Core>& core() const { return core_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  uint64_t nbytes() const { return static_cast<uint64_t>(NumElements(shape_).value_or(0)) * DTypeSize(dtype_); }

  py::array Numpy(std::optional<py::array> out) {
    const uint64_t h = Live();
    if (out) {
      py::array& a = *out;
      if (!(a.flags() & py::array::c_style) || !a.writeable()) {
        throw StatusError{InvalidArgument("out= must be a writable C-contiguous array")};
      }
      if (RemexDType(a.dtype()) != dtype_ || static_cast<uint64_t>(a.nbytes()) != nbytes()) {
        throw StatusError{InvalidArgument("out= is " + py::str(static_cast<py::handle>(a.dtype())).cast<std::string>() + " of " +
                                          std::to_string(a.nbytes()) + " bytes; the tensor is " +
                                          std::string(DTypeName(dtype_)) + " " + ShapeToString(shape_))};
      }
      auto dst = std::span<std::byte>(static_cast<std::byte*>(a.mutable_data()), static_cast<size_t>(a.nbytes()));
      core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().DownloadInto(h, dst)); });
      return a;
    }
    npy::Array data = core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().Download(h)); });
    return ToNumpy(std::move(data));
  }

  // The downloaded bytes as a NumPy array that owns them (no copy).
  static py::array ToNumpy(npy::Array data) {
    py::dtype dt = NumpyDType(data.dtype);
    auto* bytes = new std::vector<std::byte>(std::move(data.data));
    py::capsule owner(bytes, [](void* p) { delete static_cast<std::vector<std::byte>*>(p); });
    std::vector<py::ssize_t> shape(data.shape.begin(), data.shape.end());
    return py::array(dt, shape, {}, bytes->data(), owner);
  }

  py::dict Stats() {
    const uint64_t h = Live();
    auto s = core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().Stats(h)); });
    py::dict d;
    d["count"] = s.count;
    d["min"] = s.min;
    d["max"] = s.max;
    d["mean"] = s.mean;
    d["std"] = s.std;
    d["nan_count"] = s.nan_count;
    d["inf_count"] = s.inf_count;
    return d;
  }

  py::dict Compare(const Tensor& reference, double rtol, double atol, bool equal_nan) {
    if (reference.core_ != core_) {
      throw StatusError{InvalidArgument("the tensors belong to different sessions")};
    }
    const uint64_t a = Live(), b = reference.Live();
    auto c = core_->Call(
        [&](tooling::InteractiveSession& s) { return Unwrap(s.client().Compare(a, b, rtol, atol, equal_nan)); });
    py::dict d;
    d["ok"] = c.mismatches == 0;
    d["count"] = c.count;
    d["mismatches"] = c.mismatches;
    d["max_abs_error"] = c.max_abs_error;
    d["max_rel_error"] = c.max_rel_error;
    d["first_mismatch"] = c.first_mismatch >= 0 ? py::object(py::int_(c.first_mismatch)) : py::object(py::none());
    return d;
  }

  void Free() {
    if (handle_ == 0) return;
    const uint64_t h = handle_;
    handle_ = 0;
    core_->Call([&](tooling::InteractiveSession& s) {
      Check(s.client().Free({h}));
      return 0;
    });
  }
  bool freed() const { return handle_ == 0; }

  std::string Repr() const {
    return "<remex.Tensor " + (handle_ ? "%" + std::to_string(handle_) : std::string("(freed)")) + " " +
           std::string(DTypeName(dtype_)) + " " + ShapeToString(shape_) + ">";
  }

 private:
  uint64_t Live() const {
    if (handle_ == 0) throw StatusError{FailedPrecondition("the tensor was freed")};
    return handle_;
  }
  std::shared_ptr<Core> core_;
  uint64_t handle_;
  DType dtype_;
  Shape shape_;
};

py::list ValueInfos(const std::vector<vm::ValueDesc>& values) {
  py::list list;
  for (const auto& v : values) {
    py::tuple shape(v.shape.size());
    for (size_t i = 0; i < v.shape.size(); ++i) {
      if (v.shape[i] >= 0) {
        shape[i] = v.shape[i];
      } else {
        shape[i] = i < v.dims.size() && !v.dims[i].empty() ? py::object(py::str(v.dims[i])) : py::object(py::none());
      }
    }
    list.append(py::make_tuple(v.name, std::string(DTypeName(v.dtype)), shape));
  }
  return list;
}

// An input given as a Tensor (its handle) or as an array (uploaded for the call).
struct InputArg {
  std::string name;
  uint64_t handle = 0;
  py::array array;  // keeps the bytes alive while the GIL is released
  DType dtype = DType::kUndefined;
  Shape shape;
  std::span<const std::byte> bytes;
};

// The compile settings of Session.load and remex.compile (the package turns its keyword
// arguments into the CLI's spec strings), as `remex compile` takes them.
tooling::CompileSpecs MakeCompileSpecs(const std::vector<std::string>& shapes,
                                       const std::vector<std::string>& bounds,
                                       const std::vector<std::string>& dispatch, bool strict,
                                       const std::string& layout, const std::string& dtype,
                                       bool fuse_epilogues, bool fold_batchnorm) {
  tooling::CompileSpecs specs;
  specs.shapes = shapes;
  specs.bounds = bounds;
  specs.dispatch = dispatch;
  specs.strict = strict;
  specs.layout = layout;
  specs.dtype = dtype;
  specs.fuse_epilogues = fuse_epilogues;
  specs.fold_batchnorm = fold_batchnorm;
  return specs;
}

// A model loaded in a session: its module and VM, freed when the object goes away.
class Model {
 public:
  Model(std::shared_ptr<Core> core, tooling::SessionModel* model)
      : core_(std::move(core)), model_(model), bound_(model->outputs.size()) {}
  ~Model() {
    if (model_ != nullptr) core_->ReleaseModel(model_);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  tooling::SessionModel& m() const {
    if (model_ == nullptr || core_->closed()) throw StatusError{FailedPrecondition("the model was closed")};
    return *model_;
  }
  std::string name() const { return m().name; }
  std::string path() const { return m().path; }
  py::list inputs() const { return ValueInfos(m().inputs); }
  py::list outputs() const { return ValueInfos(m().outputs); }

  std::vector<InputArg> Inputs(const py::dict& given) const {
    std::vector<InputArg> args;
    for (auto [key, value] : given) {
      InputArg a;
      a.name = py::str(key);
      if (py::isinstance<Tensor>(value)) {
        const Tensor& t = value.cast<const Tensor&>();
        if (t.core() != core_) throw StatusError{InvalidArgument("input '" + a.name + "' is a tensor of another session")};
        a.handle = t.handle();
      } else {
        a.array = py::array::ensure(value, py::array::c_style);
        if (!a.array) throw StatusError{InvalidArgument("input '" + a.name + "' is neither a Tensor nor an array")};
        a.dtype = RemexDType(a.array.dtype());
        for (py::ssize_t i = 0; i < a.array.ndim(); ++i) a.shape.push_back(a.array.shape(i));
        a.bytes = std::span<const std::byte>(static_cast<const std::byte*>(a.array.data()),
                                             static_cast<size_t>(a.array.nbytes()));
      }
      args.push_back(std::move(a));
    }
    return args;
  }

  // Uploads the array inputs; the names' handles in `handles`, the uploads in `temps`.
  static Status UploadInputs(tooling::InteractiveSession& s, std::vector<InputArg>& args,
                             std::map<std::string, uint64_t>* handles, std::vector<uint64_t>* temps) {
    for (auto& a : args) {
      if (a.handle == 0) {
        auto t = s.client().Upload(a.dtype, a.shape, a.bytes);
        if (!t.ok()) return t.status().WithContext("uploading input '" + a.name + "'");
        a.handle = t->handle;
        temps->push_back(t->handle);
      }
      (*handles)[a.name] = a.handle;
    }
    return OkStatus();
  }

  // run(): fetch: None = all, [] = none, else names. Returns {name: ndarray | Tensor}.
  py::dict Run(const py::dict& given, std::optional<std::vector<std::string>> fetch_names) {
    tooling::SessionModel& model = m();
    std::vector<bool> fetch(model.outputs.size(), !fetch_names.has_value());
    if (fetch_names) {
      for (const auto& n : *fetch_names) fetch[Unwrap(model.OutputIndex(n))] = true;
    }
    std::vector<InputArg> args = Inputs(given);
    std::vector<tooling::RunInput> inputs;
    inputs.reserve(args.size());
    for (const InputArg& a : args) inputs.push_back({a.name, a.handle, a.dtype, a.shape, a.bytes});
    // Uploads, invoke and downloads in one round trip (tooling::InteractiveSession::Run).
    tooling::CallReport done = core_->Call([&](tooling::InteractiveSession& s) {
      return Unwrap(s.Run(model, inputs, fetch));
    });
    py::dict result;
    const auto& outs = done.invoke.result.outputs;
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = model.outputs[i].name;
      if (done.fetched[i]) {
        result[py::str(name)] = Tensor::ToNumpy(std::move(*done.fetched[i]));
      } else if (bound_[i] && model.bound_outputs[i] == outs[i].handle) {
        result[py::str(name)] = bound_[i];
      } else {
        result[py::str(name)] = py::cast(std::make_unique<Tensor>(core_, outs[i]));
      }
    }
    last_run_ms_ = done.invoke.run_ms;
    last_server_ms_ = done.invoke.result.run_nanos / 1e6;
    last_function_ = done.invoke.result.function;
    last_graph_ = done.invoke.result.graph;
    return result;
  }

  void SetOutput(const std::string& output, const py::object& tensor) {
    tooling::SessionModel& model = m();
    const size_t index = Unwrap(model.OutputIndex(output));
    uint64_t handle = 0;
    if (!tensor.is_none()) {
      const Tensor& t = tensor.cast<const Tensor&>();
      if (t.core() != core_) throw StatusError{InvalidArgument("the tensor belongs to another session")};
      handle = t.handle();
    }
    core_->Call([&](tooling::InteractiveSession& s) {
      Check(s.SetOutput(model, output, handle));
      return 0;
    });
    bound_[index] = tensor.is_none() ? py::object() : tensor;
  }

  py::tuple Benchmark(const py::dict& given, uint32_t number, uint32_t repeat, uint32_t min_repeat_ms,
                      uint32_t warmup, uint32_t cooldown_ms, uint64_t l2_flush_bytes, bool profile,
                      double min_duration_s, uint64_t min_samples, double confidence, double window_ms,
                      size_t stable_window, double stable_threshold, double stable_percentile,
                      uint32_t max_trials, bool fail_unstable, const std::string& scenario,
                      const std::string& concurrency, std::optional<uint32_t> samples_per_query, double target_qps,
                      double latency_bound_ms, bool find_peak, std::optional<bool> audit, uint32_t audit_samples,
                      double audit_rtol, double audit_atol, uint64_t seed) {
    tooling::SessionModel& model = m();
    tooling::BenchOptions options;
    // A load scenario: the same mapping as remex bench's and the shell's.
    tooling::LoadSpec load;
    load.scenario = scenario;
    load.concurrency = concurrency;
    load.samples_per_query = samples_per_query;
    load.target_qps = target_qps;
    load.latency_bound_ms = latency_bound_ms;
    load.find_peak = find_peak;
    load.audit = audit;
    load.audit_samples = audit_samples;
    load.audit_rtol = audit_rtol;
    load.audit_atol = audit_atol;
    load.seed = seed;
    options.load = Unwrap(tooling::MakeLoadOptions(load));
    options.min_duration_s = min_duration_s;
    options.min_samples = min_samples;
    options.confidence = confidence;
    options.window_ms = window_ms;
    options.stable_window = stable_window;
    options.stable_threshold = stable_threshold;
    options.stable_percentile = stable_percentile;
    options.max_trials = max_trials;
    options.fail_unstable = fail_unstable;  // Model.benchmark raises remex.Unstable
    options.timing.number = number;
    options.timing.repeat = repeat;
    options.timing.min_repeat_ms = min_repeat_ms;
    options.timing.warmup = warmup;
    options.timing.cooldown_ms = cooldown_ms;
    options.timing.l2_flush_bytes = l2_flush_bytes;
    options.profile = profile;
    std::vector<InputArg> args = Inputs(given);
    const std::string date = tooling::UtcNow();  // the report's "date", as remex bench writes it
    auto report = core_->Call([&](tooling::InteractiveSession& s, const std::atomic<int>* interrupt) {
      std::map<std::string, uint64_t> handles;
      std::vector<uint64_t> temps;
      options.interrupt = interrupt;  // Ctrl-C: the samples so far, partial
      Status st = UploadInputs(s, args, &handles, &temps);
      StatusOr<tooling::BenchReport> r = st.ok() ? s.Bench(model, handles, options)
                                                 : StatusOr<tooling::BenchReport>(st);
      if (!temps.empty()) (void)s.client().Free(temps);
      return Unwrap(std::move(r));
    });
    // Interrupted: Python's handler runs now. Its KeyboardInterrupt becomes the
    // package's remex.Interrupted, which carries the partial result; another
    // exception of a handler of the user's is raised as it is.
    bool interrupted = false;
    if (RaisedBySignalHandler()) {
      if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) throw py::error_already_set();
      PyErr_Clear();
      interrupted = true;
    }
    nlohmann::json j = tooling::ToJson(report);
    j["date"] = date;
    return py::make_tuple(j.dump(), tooling::BenchText(report), tooling::BenchFailure(report), interrupted);
  }

  py::tuple Profile(const py::dict& given, uint32_t runs) {
    tooling::SessionModel& model = m();
    std::vector<InputArg> args = Inputs(given);
    auto result = core_->Call([&](tooling::InteractiveSession& s) {
      std::map<std::string, uint64_t> handles;
      std::vector<uint64_t> temps;
      Status st = UploadInputs(s, args, &handles, &temps);
      auto r = st.ok() ? s.Profile(model, handles, runs)
                       : StatusOr<tooling::InteractiveSession::ProfileReport>(st);
      if (!temps.empty()) (void)s.client().Free(temps);
      return Unwrap(std::move(r));
    });
    return py::make_tuple(tooling::ToJson(result).dump(), tooling::ProfileText(result));
  }

  void Close() {
    if (model_ == nullptr) return;
    tooling::SessionModel* model = model_;
    model_ = nullptr;
    bound_.assign(bound_.size(), py::object());
    if (core_->closed()) return;
    core_->Call([&](tooling::InteractiveSession& s) {
      Check(s.Unload(model->name));
      return 0;
    });
  }

  py::dict LastCall() const {
    py::dict d;
    d["run_ms"] = last_run_ms_;
    d["server_run_ms"] = last_server_ms_;
    d["function"] = last_function_;
    d["graph"] = last_graph_;
    return d;
  }

 private:

  std::shared_ptr<Core> core_;
  tooling::SessionModel* model_;
  std::vector<py::object> bound_;  // the Tensor bound to each output, or null
  double last_run_ms_ = 0, last_server_ms_ = 0;
  std::string last_function_;
  bool last_graph_ = false;  // the last call launched a device graph
};

// A connected session.
class Session {
 public:
  explicit Session(const tooling::ServerOptions& options) {
    auto opened = [&] {
      py::gil_scoped_release release;
      return tooling::InteractiveSession::Open(options);
    }();
    core_ = std::make_shared<Core>(Unwrap(std::move(opened)));
    server_ = core_->Call([](tooling::InteractiveSession& s) { return s.connection().server; });
    device_ = core_->Call([](tooling::InteractiveSession& s) { return s.connection().device; });
  }

  std::unique_ptr<Model> Load(const std::string& path, const std::vector<std::string>& shapes,
                              const std::vector<std::string>& bounds, const std::vector<std::string>& dispatch,
                              bool strict, const std::string& layout, const std::string& dtype, bool fuse_epilogues,
                              bool fold_batchnorm) {
    const tooling::CompileSpecs specs =
        MakeCompileSpecs(shapes, bounds, dispatch, strict, layout, dtype, fuse_epilogues, fold_batchnorm);
    compiler::CompileOptions options = Unwrap(tooling::ParseCompileSpecs(specs));
    tooling::SessionModel* model = core_->Call([&](tooling::InteractiveSession& s) {
      return Unwrap(s.Load(path, options, specs.ChangesCompilation()));
    });
    return std::make_unique<Model>(core_, model);
  }

  std::unique_ptr<Tensor> Upload(const py::object& value) {
    py::array array = py::array::ensure(value, py::array::c_style);
    if (!array) throw StatusError{InvalidArgument("upload takes an array (or what numpy.asarray takes)")};
    const DType dtype = RemexDType(array.dtype());
    Shape shape;
    for (py::ssize_t i = 0; i < array.ndim(); ++i) shape.push_back(array.shape(i));
    auto bytes = std::span<const std::byte>(static_cast<const std::byte*>(array.data()),
                                            static_cast<size_t>(array.nbytes()));
    auto t = core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().Upload(dtype, shape, bytes)); });
    return std::make_unique<Tensor>(core_, t);
  }

  // Session.random and zeros: a tensor filled on the server (base/tensor_fill.h).
  std::unique_ptr<Tensor> Fill(const std::vector<int64_t>& shape, const py::object& dtype, const std::string& kind,
                               const py::object& low, const py::object& high, double mean, double scale,
                               uint64_t seed) {
    const DType d = RemexDType(py::dtype::from_args(dtype));
    TensorFill fill;
    fill.kind = kind == "normal"    ? TensorFill::Kind::kNormal
                : kind == "uniform" ? TensorFill::Kind::kUniform
                                    : TensorFill::Kind::kZeros;
    fill = ResolveFillBounds(d, fill);
    if (!low.is_none()) fill.low = low.cast<double>();
    if (!high.is_none()) fill.high = high.cast<double>();
    fill.mean = mean;
    fill.scale = scale;
    fill.seed = seed;
    auto t = core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().Alloc(d, Shape(shape), fill)); });
    return std::make_unique<Tensor>(core_, t);
  }

  std::unique_ptr<Tensor> Empty(const std::vector<int64_t>& shape, const py::object& dtype) {
    const DType d = RemexDType(py::dtype::from_args(dtype));
    auto t = core_->Call([&](tooling::InteractiveSession& s) { return Unwrap(s.client().Alloc(d, Shape(shape))); });
    return std::make_unique<Tensor>(core_, t);
  }

  py::dict Info() {
    auto info = core_->Call([](tooling::InteractiveSession& s) { return Unwrap(s.Info()); });
    py::dict d;
    d["server"] = server_;
    d["name"] = info.name;
    d["version"] = info.version;
    d["protocol"] = std::to_string(info.protocol_major) + "." + std::to_string(info.protocol_minor);
    d["session_id"] = info.session_id;
    py::list devices;
    for (const auto& dev : info.devices) {
      py::dict e;
      e["name"] = dev.name;
      e["description"] = dev.description;
      e["memory_bytes"] = dev.memory_bytes;
      e["bytes_in_use"] = dev.bytes_in_use;
      e["int8_channels_last"] = dev.int8_channels_last;
      e["float_channels_last"] = dev.float_channels_last;
      devices.append(e);
    }
    d["devices"] = devices;
    return d;
  }

  py::list Handles() {
    auto handles = core_->Call([](tooling::InteractiveSession& s) { return Unwrap(s.client().ListHandles()); });
    py::list list;
    for (const auto& h : handles) {
      py::dict d;
      d["handle"] = h.handle;
      d["kind"] = h.kind;
      d["dtype"] = h.kind == "tensor" ? py::object(py::str(std::string(DTypeName(h.dtype)))) : py::object(py::none());
      d["shape"] = h.kind == "tensor" ? py::object(ShapeTuple(h.shape)) : py::object(py::none());
      d["bytes"] = h.bytes;
      d["held_bytes"] = h.held_known ? py::object(py::int_(h.held_bytes)) : py::object(py::none());
      d["device"] = h.device;
      list.append(d);
    }
    return list;
  }

  py::dict Traffic() {
    struct Bytes {
      uint64_t sent, received;
      client::CompressionStats attachments;
      uint64_t round_trips;
    };
    auto b = core_->Call([](tooling::InteractiveSession& s) {
      return Bytes{s.client().bytes_sent(), s.client().bytes_received(), s.client().compression_stats(),
                   s.client().round_trips()};
    });
    py::dict d;
    d["round_trips"] = b.round_trips;
    d["bytes_sent"] = b.sent;
    d["bytes_received"] = b.received;
    d["attachment_bytes_sent"] = b.attachments.raw_sent;
    d["attachment_bytes_received"] = b.attachments.raw_received;
    return d;
  }

  void Close() { core_->Close(); }
  bool closed() { return core_->closed(); }
  const std::string& server() const { return server_; }
  const std::string& device() const { return device_; }

 private:
  std::shared_ptr<Core> core_;
  std::string server_, device_;
};

// remex.compile: the compile of `remex compile` (tooling::ParseCompileSpecs, then
// tooling::CompileModel) with the executable written to `output`. Returns the report
// of `remex compile --json` as JSON text, with "output" added.
std::string Compile(const std::string& model, const std::string& output, const tooling::CompileSpecs& specs) {
  const compiler::CompileOptions options = Unwrap(tooling::ParseCompileSpecs(specs));
  std::optional<StatusOr<tooling::CompileReport>> report;
  {
    py::gil_scoped_release release;  // compiling a large model takes seconds
    report.emplace(tooling::CompileModel(model, options));
    if (report->ok()) Check(tooling::WriteFileBytes(output, (*report)->bytes));
  }
  nlohmann::json j = tooling::ToJson(Unwrap(std::move(*report)));
  j["output"] = output;
  return j.dump();
}

// TLS from connect()'s tls_* arguments: as the CLI's --tls-* flags
// (tooling::TlsFromFlags), with errors naming the Python arguments. The files are read
// when the connection is made; one that cannot be used is INVALID_ARGUMENT naming it.
std::optional<rpc::TlsClientConfig> TlsOptions(const std::string& ca, const std::string& cert, const std::string& key,
                                               const std::string& server_name) {
  if (ca.empty()) {
    if (!cert.empty() || !key.empty() || !server_name.empty()) {
      throw StatusError{InvalidArgument(
          "tls_cert, tls_key and tls_server_name need tls_ca (the CA file the server's certificate must chain to)")};
    }
    return std::nullopt;
  }
  if (cert.empty() != key.empty()) throw StatusError{InvalidArgument("tls_cert and tls_key go together")};
  return rpc::TlsClientConfig{ca, cert, key, server_name};
}

tooling::ServerOptions Options(const std::string& address, const std::string& token, const std::string& token_file,
                               double timeout_s, double connect_timeout_s, const std::string& compression) {
  tooling::ServerOptions o;
  o.address = address;
  if (!address.empty()) Unwrap(tooling::ParseServerAddress(address));
  o.token = token.empty() ? Unwrap(tooling::TokenFromFileOrEnvironment(token_file)) : token;
  o.compression = Unwrap(tooling::ParseCompression(compression));
  if (!(timeout_s > 0) || !(connect_timeout_s > 0)) {
    throw StatusError{InvalidArgument("timeout and connect_timeout must be > 0 seconds")};
  }
  o.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  o.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(connect_timeout_s * 1000));
  return o;
}

}  // namespace
}  // namespace remex::python

PYBIND11_MODULE(_native, m) {
  using namespace remex::python;
  namespace tooling = remex::tooling;
  m.doc() = "The compiled half of the Remex Python client; use the `remex` package.";
  // The project's version (CMake's PROJECT_VERSION, base/version.h) and the commit built.
  m.attr("version") = py::str(remex::kRemexVersion);
  m.attr("commit") = py::str(remex::kRemexCommit);
  // Python runs signal handlers on its main thread: only calls made there are
  // interrupted by Ctrl-C (InterruptScope).
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  // An embedded server logs warnings and errors only, to stderr, as under the remex CLI.
  spdlog::set_default_logger(spdlog::get("remex") ? spdlog::get("remex") : spdlog::stderr_color_mt("remex"));
  spdlog::set_level(spdlog::level::warn);

  // Exception classes by status code name ("NOT_FOUND"), filled in by remex/__init__.py.
  static py::dict* error_classes = new py::dict();  // lives as long as the module
  m.attr("error_classes") = *error_classes;
  // The message's translation into the package's terms (its keyword arguments for the
  // CLI's flags), set by remex/__init__.py; None: as it is.
  static py::object* translate_message = new py::object(py::none());
  m.def("set_message_translator", [](py::object f) { *translate_message = std::move(f); }, py::arg("f"));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const std::string code(remex::StatusCodeName(e.status.code()));
      py::object cls = error_classes->contains(code) ? (*error_classes)[py::str(code)] : py::object(py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
      py::object message = py::str(e.status.message());
      if (!translate_message->is_none()) {
        try {
          message = (*translate_message)(message);
        } catch (py::error_already_set&) {
          // The message as it is rather than an error of the translation.
        }
      }
      PyErr_SetObject(cls.ptr(), message.ptr());
    }
  });

  py::class_<Tensor>(m, "Tensor")
      .def_property_readonly("handle", &Tensor::handle)
      .def_property_readonly("dtype", [](const Tensor& t) { return NumpyDType(t.dtype()); })
      .def_property_readonly("dtype_name", [](const Tensor& t) { return std::string(remex::DTypeName(t.dtype())); })
      .def_property_readonly("shape", [](const Tensor& t) { return ShapeTuple(t.shape()); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("freed", &Tensor::freed)
      .def("numpy", &Tensor::Numpy, py::arg("out") = py::none())
      .def("stats", &Tensor::Stats)
      .def("compare", &Tensor::Compare, py::arg("reference"), py::arg("rtol") = 1e-4, py::arg("atol") = 1e-5,
           py::arg("equal_nan") = true)
      .def("free", &Tensor::Free)
      .def("__repr__", &Tensor::Repr);

  py::class_<Model>(m, "Model")
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("path", &Model::path)
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("last_call", &Model::LastCall)
      .def("run", &Model::Run, py::arg("inputs"), py::arg("fetch") = py::none())
      .def("set_output", &Model::SetOutput, py::arg("output"), py::arg("tensor"))
      .def("benchmark", &Model::Benchmark, py::arg("inputs"), py::arg("number"), py::arg("repeat"),
           py::arg("min_repeat_ms"), py::arg("warmup"), py::arg("cooldown_ms"), py::arg("l2_flush_bytes"),
           py::arg("profile"), py::arg("min_duration_s"), py::arg("min_samples"), py::arg("confidence"),
           py::arg("window_ms"), py::arg("stable_window"), py::arg("stable_threshold"),
           py::arg("stable_percentile"), py::arg("max_trials"), py::arg("fail_unstable"), py::arg("scenario"),
           py::arg("concurrency"), py::arg("samples_per_query"), py::arg("target_qps"), py::arg("latency_bound_ms"),
           py::arg("find_peak"), py::arg("audit"), py::arg("audit_samples"), py::arg("audit_rtol"),
           py::arg("audit_atol"), py::arg("seed"))
      .def("profile", &Model::Profile, py::arg("inputs"), py::arg("runs"))
      .def("close", &Model::Close);

  py::class_<Session>(m, "Session")
      .def_property_readonly("server", &Session::server)
      .def_property_readonly("device", &Session::device)
      .def_property_readonly("closed", &Session::closed)
      .def("load", &Session::Load, py::arg("path"), py::arg("shapes"), py::arg("bounds"), py::arg("dispatch"),
           py::arg("strict"), py::arg("layout"), py::arg("dtype"), py::arg("fuse_epilogues"), py::arg("fold_batchnorm"))
      .def("upload", &Session::Upload, py::arg("array"))
      .def("empty", &Session::Empty, py::arg("shape"), py::arg("dtype"))
      .def("fill", &Session::Fill, py::arg("shape"), py::arg("dtype"), py::arg("kind"), py::arg("low"),
           py::arg("high"), py::arg("mean"), py::arg("scale"), py::arg("seed"))
      .def("info", &Session::Info)
      .def("handles", &Session::Handles)
      .def("traffic", &Session::Traffic)
      .def("close", &Session::Close);

  m.def(
      "connect",
      [](const std::string& address, const std::string& token, const std::string& token_file, double timeout,
         double connect_timeout, const std::string& compression, const std::string& tls_ca,
         const std::string& tls_cert, const std::string& tls_key, const std::string& tls_server_name) {
        tooling::ServerOptions o = Options(address, token, token_file, timeout, connect_timeout, compression);
        o.tls = TlsOptions(tls_ca, tls_cert, tls_key, tls_server_name);
        return std::make_unique<Session>(o);
      },
      py::arg("address"), py::arg("token"), py::arg("token_file"), py::arg("timeout"), py::arg("connect_timeout"),
      py::arg("compression"), py::arg("tls_ca") = "", py::arg("tls_cert") = "", py::arg("tls_key") = "",
      py::arg("tls_server_name") = "");
  m.def(
      "compile",
      [](const std::string& model, const std::string& output, const std::vector<std::string>& shapes,
         const std::vector<std::string>& bounds, const std::vector<std::string>& dispatch, bool strict,
         const std::string& layout, const std::string& dtype, bool fuse_epilogues, bool fold_batchnorm) {
        return Compile(model, output,
                       MakeCompileSpecs(shapes, bounds, dispatch, strict, layout, dtype, fuse_epilogues,
                                        fold_batchnorm));
      },
      py::arg("model"), py::arg("output"), py::arg("shapes"), py::arg("bounds"), py::arg("dispatch"),
      py::arg("strict"), py::arg("layout"), py::arg("dtype"), py::arg("fuse_epilogues"),
      py::arg("fold_batchnorm"));
  // remex tune (host_client/tooling/tuning.h): its report as JSON text.
  m.def(
      "tune",
      [](const std::string& model, const std::string& log, const std::string& output,
         const std::vector<std::string>& shapes, const std::vector<std::string>& bounds,
         const std::vector<std::string>& dispatch, bool strict, const std::string& layout, const std::string& dtype,
         bool fuse_epilogues, bool fold_batchnorm, const std::string& address, const std::string& token,
         const std::string& token_file, const std::string& farm, const std::string& pool, const std::string& labels,
         double wait, double timeout, const std::vector<std::string>& space, double budget_s, double min_duration_s,
         uint64_t min_samples, double confidence, double rtol, double atol, double float16_rtol,
         double float16_atol, int devices, uint64_t seed) {
        tooling::TuneOptions o;
        o.request.model = model;
        o.request.compile = Unwrap(tooling::ParseCompileSpecs(
            MakeCompileSpecs(shapes, bounds, dispatch, strict, layout, dtype, fuse_epilogues, fold_batchnorm)));
        o.request.seed = seed;
        if (!farm.empty()) {
          if (!address.empty()) throw StatusError{remex::InvalidArgument("server and farm: name one or the other")};
          Unwrap(remex::farm::ParseRedisUrl(farm));
          Check(remex::farm::CheckPoolName(pool));
          Unwrap(remex::farm::ParseLabelSelector(labels));
          if (!(wait >= 0)) throw StatusError{remex::InvalidArgument("wait must be >= 0 seconds")};
          o.request.server = Options("", "", "", timeout, 10, "auto");
          o.request.server.farm =
              tooling::FarmLeaseOptions{farm, pool, labels, std::chrono::milliseconds(static_cast<int64_t>(wait * 1000))};
        } else {
          o.request.server = Options(address, token, token_file, timeout, 10, "auto");
        }
        o.space = Unwrap(tooling::ParseTuningSpace(space));
        o.log_path = log;
        o.output_path = output;
        o.budget_s = budget_s;
        o.bench.min_duration_s = min_duration_s;
        o.bench.min_samples = min_samples;
        o.bench.confidence = confidence;
        o.rtol = rtol;
        o.atol = atol;
        o.float16_rtol = float16_rtol;
        o.float16_atol = float16_atol;
        o.max_devices = devices;
        std::optional<remex::StatusOr<tooling::TuneReport>> report;
        {
          py::gil_scoped_release release;  // minutes of measurement
          report.emplace(tooling::Tune(o));
        }
        return tooling::ToJson(Unwrap(std::move(*report))).dump();
      },
      py::arg("model"), py::arg("log"), py::arg("output"), py::arg("shapes"), py::arg("bounds"), py::arg("dispatch"),
      py::arg("strict"), py::arg("layout"), py::arg("dtype"), py::arg("fuse_epilogues"), py::arg("fold_batchnorm"),
      py::arg("address"), py::arg("token"), py::arg("token_file"), py::arg("farm"), py::arg("pool"),
      py::arg("labels"), py::arg("wait"), py::arg("timeout"), py::arg("space"), py::arg("budget_s"),
      py::arg("min_duration_s"), py::arg("min_samples"), py::arg("confidence"), py::arg("rtol"), py::arg("atol"),
      py::arg("float16_rtol"), py::arg("float16_atol"), py::arg("devices"), py::arg("seed"));
  m.def(
      "embedded",
      [](int threads, double timeout) {
        tooling::ServerOptions o = Options("", "", "", timeout, 10, "auto");
        o.embedded_threads = threads;
        return std::make_unique<Session>(o);
      },
      py::arg("threads"), py::arg("timeout"));
  // BenchmarkResult.record: one report into a results store, as remex bench --record
  // writes it (tooling::RecordReport). Returns (run id, the store's URL redacted).
  m.def(
      "record_report",
      [](const std::string& url, const std::string& kind, const std::string& model_path,
         const std::string& report_json, const std::map<std::string, std::string>& tags,
         const std::string& verdict, const std::string& error) {
        std::vector<std::string> specs;
        for (const auto& [key, value] : tags) {
          if (key.find('=') != std::string::npos) {
            throw StatusError{remex::InvalidArgument("tag key '" + key + "' may hold only A-Z a-z 0-9 _ . -")};
          }
          specs.push_back(key + "=" + value);
        }
        const auto parsed_tags = Unwrap(tooling::ParseTags(specs));
        const std::string resolved = Unwrap(tooling::ResolveResultsUrl(url));
        Check(tooling::CheckResultsUrl(resolved));
        nlohmann::json report = nlohmann::json::parse(report_json, nullptr, /*allow_exceptions=*/false);
        if (report.is_discarded()) throw StatusError{remex::InvalidArgument("the report is not JSON")};
        std::optional<remex::StatusOr<int64_t>> id;
        {
          py::gil_scoped_release release;  // the database write may wait on a lock
          id.emplace(tooling::RecordReport(resolved, kind, model_path, report, "", parsed_tags, verdict, error));
        }
        return py::make_tuple(Unwrap(std::move(*id)), tooling::RedactResultsUrl(resolved));
      },
      py::arg("url"), py::arg("kind"), py::arg("model_path"), py::arg("report_json"), py::arg("tags"),
      py::arg("verdict"), py::arg("error"));
  m.def(
      "farm",
      [](const std::string& url, const std::string& pool, const std::string& labels, double wait, double timeout) {
        tooling::ServerOptions o = Options("", "", "", timeout, 10, "auto");
        Unwrap(remex::farm::ParseRedisUrl(url));
        Check(remex::farm::CheckPoolName(pool));
        Unwrap(remex::farm::ParseLabelSelector(labels));
        if (!(wait >= 0)) throw StatusError{remex::InvalidArgument("wait must be >= 0 seconds")};
        o.farm = tooling::FarmLeaseOptions{url, pool, labels, std::chrono::milliseconds(static_cast<int64_t>(wait * 1000))};
        return std::make_unique<Session>(o);
      },
      py::arg("url"), py::arg("pool"), py::arg("labels"), py::arg("wait"), py::arg("timeout"));
  // Jobs (host_client/tooling/job.h): the calls of `remex job`, the results as JSON text.
  auto job_redis = [](const std::string& url) {
    return Unwrap(remex::farm::RedisClient::Connect(Unwrap(remex::farm::ParseRedisUrl(url)), std::chrono::seconds(5)));
  };
  m.def(
      "job_submit",
      [job_redis](const std::string& url, const std::string& target, const std::string& command,
                  const std::vector<std::string>& args, const std::string& pool, const std::string& labels, int priority,
                  int retries) {
        py::gil_scoped_release release;  // reads the files, writes them to Redis
        remex::farm::JobSpec spec = Unwrap(tooling::MakeJobSpec(target, command, args));
        spec.pool = pool;
        spec.labels = labels;
        spec.priority = priority;
        spec.retries = retries;
        return Unwrap(remex::farm::SubmitJob(*job_redis(url), spec));
      },
      py::arg("url"), py::arg("target"), py::arg("command"), py::arg("args"), py::arg("pool"), py::arg("labels"),
      py::arg("priority"), py::arg("retries"));
  m.def(
      "job_status",
      [job_redis](const std::string& url, const std::string& id, bool wait, double timeout) {
        py::gil_scoped_release release;
        auto redis = job_redis(url);
        const auto job = wait ? tooling::WaitForJob(*redis, id, std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)))
                              : remex::farm::ReadJob(*redis, id);
        return tooling::JobToJson(Unwrap(job), remex::farm::UnixMillis()).dump();
      },
      py::arg("url"), py::arg("id"), py::arg("wait"), py::arg("timeout"));
  m.def(
      "job_logs",
      [job_redis](const std::string& url, const std::string& id) {
        py::gil_scoped_release release;
        return Unwrap(tooling::JobLog(*job_redis(url), id));
      },
      py::arg("url"), py::arg("id"));
  m.def(
      "job_cancel",
      [job_redis](const std::string& url, const std::string& id) {
        py::gil_scoped_release release;
        Check(remex::farm::CancelJob(*job_redis(url), id));
      },
      py::arg("url"), py::arg("id"));
  m.def(
      "job_list",
      [job_redis](const std::string& url, const std::string& pool, size_t limit) {
        py::gil_scoped_release release;
        nlohmann::json list = nlohmann::json::array();
        const int64_t now = remex::farm::UnixMillis();
        for (const auto& j : Unwrap(remex::farm::ListJobs(*job_redis(url), pool, limit))) list.push_back(tooling::JobToJson(j, now));
        return list.dump();
      },
      py::arg("url"), py::arg("pool"), py::arg("limit"));
}
