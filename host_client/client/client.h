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
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor_fill.h"
#include "rpc/load_scenario.h"
#include "host_client/client/npy.h"
#include "rpc/tls.h"

namespace remex::rpc {
class Client;
}

namespace remex::client {

struct DeviceInfo {
  std::string name;
  std::string description;
  uint64_t memory_bytes = 0;
  uint64_t bytes_in_use = 0;
  // Its int8 convolutions run fastest channels-last (vm::DeviceCapabilities::
  // int8_channels_last): compiles for it default to NHWC for int8 models.
  bool int8_channels_last = false;
  // Its float convolutions run fastest channels-last, and its pooling kernels take NHWC
  // (vm::DeviceCapabilities::float_channels_last): compiles for it default to NHWC for
  // float models with convolutions.
  bool float_channels_last = false;
};

// Whether a feature of the server's host is on, where the server could tell
// (rpc/remex.capnp FeatureState).
enum class FeatureState { kUnknown, kDisabled, kEnabled };
inline const char* FeatureStateName(FeatureState s) {
  return s == FeatureState::kEnabled ? "enabled" : s == FeatureState::kDisabled ? "disabled" : "unknown";
}

// One GPU of the server (rpc/remex.capnp GpuEnvironment): text empty and numbers 0
// where unknown (no NVML on the server, or the GPU does not report it).
struct GpuEnvironment {
  std::string name, compute_capability, cuda_runtime_version, driver_version;
  uint32_t sm_clock_mhz = 0, mem_clock_mhz = 0, max_sm_clock_mhz = 0, max_mem_clock_mhz = 0;
  uint32_t applications_sm_clock_mhz = 0;
  double power_limit_w = 0;
  FeatureState persistence_mode = FeatureState::kUnknown;
  FeatureState ecc_mode = FeatureState::kUnknown;
  FeatureState clocks_locked = FeatureState::kUnknown;
};

// The server's environment fingerprint (rpc/remex.capnp Environment), from an
// authenticated hello. Text empty and numbers 0 where unknown; load_average_1m -1.
struct ServerEnvironment {
  bool known = false;  // the hello carried one (servers older than it send none)
  std::string remex_version, remex_commit;
  std::vector<std::string> server_args;  // at most kMaxServerArgs
  std::string os, cpu_model;
  uint32_t logical_cpus = 0, physical_cores = 0;
  FeatureState smt = FeatureState::kUnknown;
  std::string governor;  // "" without cpufreq; distinct governors joined by ','
  uint32_t cpu_max_mhz = 0;
  uint32_t compute_threads = 0;  // the CPU device's; 0 for a GPU device
  uint64_t memory_bytes = 0;
  double load_average_1m = -1;  // at hello
  std::vector<GpuEnvironment> gpus;  // at most kMaxGpus
  static constexpr size_t kMaxServerArgs = 512;
  static constexpr size_t kMaxGpus = 64;
};

struct ServerInfo {
  std::string name;
  std::string version;
  uint16_t protocol_major = 0;
  uint16_t protocol_minor = 0;
  uint64_t session_id = 0;
  uint32_t active_sessions = 0;  // the server discloses no count: always 0
  std::vector<DeviceInfo> devices;  // bytes_in_use: this session's own
  // The server asked for proof of its token (remex-server --token-file).
  bool requires_token = false;
  // With session_id, what Session::Cancel sends to cancel this session's request in
  // progress (empty from a server without cancel requests).
  std::string cancel_key;
  ServerEnvironment environment;  // authenticated sessions only
};

// A tensor on the server: its handle, dtype and shape.
struct RemoteTensor {
  uint64_t handle = 0;
  DType dtype = DType::kUndefined;
  Shape shape;
};

// One handle of the session (Session::ListHandles).
struct HandleInfo {
  uint64_t handle = 0;
  std::string kind;  // "module", "vm" or "tensor"
  DType dtype = DType::kUndefined;  // tensors
  Shape shape;                      // tensors
  uint64_t bytes = 0;  // tensors: their memory; modules: their constants
  std::string device;  // "cpu", "cuda:0"
  // The bytes of the session's memory (size classes, as ServerInfo's bytes_in_use
  // counts them) this handle keeps alive and no handle listed before it does (tensors
  // first, then VMs: constants' copies, arenas, last inputs and outputs); modules 0.
  // Known from servers of protocol 1.6 on (held_known).
  uint64_t held_bytes = 0;
  bool held_known = false;
};

// How far a session's long request is (the progress request, protocol 1.6).
struct RequestProgress {
  bool running = false;    // a benchmark, loadTest or profile is in progress
  std::string kind;        // "benchmark", "loadTest", "profile"; "" when not running
  uint64_t done = 0;       // samples (benchmark), queries completed (loadTest), runs (profile)
  uint64_t total = 0;      // what the request asked for; 0: not known ahead (loadTest)
  double elapsed_s = 0;    // since the request began
  double remaining_s = 0;  // from the pace so far; 0: not known
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
  // The server's time to decompress, parse and verify it (0: from its module cache, or
  // an older server).
  uint64_t load_nanos = 0;
};

// Transfers one invoke made between the device's memory and host memory.
struct DeviceCopies {
  uint64_t host_to_device_count = 0;
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_count = 0;
  uint64_t device_to_host_bytes = 0;
};

struct InvokeResult {
  std::vector<RemoteTensor> outputs;
  uint64_t run_nanos = 0;  // VM time measured on the server
  DeviceCopies copies;     // device<->host transfers of this call (outputs not fetched)
  // The function whose body ran the call: the one called, or the shape bucket its
  // dispatcher chose ("main[W=33..64]").
  std::string function;
  uint64_t allocations = 0;  // buffers the server's VM allocated in this call
  // The call launched a device graph (a CUDA Graph: remex-server --cuda-graphs).
  bool graph = false;
};

// Time-evaluator settings, as TVM's time_evaluator (see rpc/remex.capnp Benchmark).
struct BenchmarkOptions {
  uint32_t number = 1;         // calls per sample
  uint32_t repeat = 10;        // samples
  uint32_t min_repeat_ms = 0;  // grow `number` until a sample takes this long
  uint32_t warmup = 1;         // untimed calls first
  uint32_t cooldown_ms = 0;    // sleep between samples
  uint64_t l2_flush_bytes = 0; // write this many bytes on the device before each sample
  // Cancelled (Session::Cancel), the call returns the samples completed so far with
  // BenchmarkResult::cancelled set instead of CANCELLED (a server older than this
  // option answers CANCELLED).
  bool partial_on_cancel = false;
};

// Cold start against warm, in ns on the server's steady clock (rpc/remex.capnp
// RunPhases); 0 where not measured (an older server).
struct RunPhases {
  uint64_t vm_create_nanos = 0;             // vmCreate: constants uploaded, kernels made
  uint64_t first_invoke_nanos = 0;          // the VM's first call
  uint64_t instances_create_nanos = 0;      // loadTest: its instances (no constants)
  uint64_t instance_first_invoke_nanos = 0; // loadTest: its first instance's first call
};

// The session's memory around a run, in bytes (rpc/remex.capnp MemoryUse).
struct MemoryUse {
  uint64_t weights_bytes = 0;         // the executable's constants
  uint64_t session_bytes_before = 0;  // live before the run
  uint64_t invoke_peak_bytes = 0;     // one call's peak above that
  uint64_t run_peak_bytes = 0;        // the whole run's peak above that
  uint64_t resident_bytes = 0;        // the server process's resident memory after
  uint64_t resident_peak_bytes = 0;   // and its high-water mark
};

struct BenchmarkResult {
  uint32_t number = 0;                 // calls per sample actually used
  std::vector<double> samples_seconds; // mean seconds per call, one per sample
  std::string timer;                   // "steady_clock" or "cuda_event"
  RunPhases phases;
  MemoryUse memory;
  // The server host's 1-minute load average right after the last sample; -1 unknown
  // (as from servers older than it).
  double load_average_1m = -1;
  // BenchmarkOptions::partial_on_cancel and the run was cancelled: samples_seconds holds
  // the samples completed before (fewer than repeat, maybe none).
  bool cancelled = false;
};

// Load scenarios generated on the server (rpc/load_scenario.h; protocol 1.4).
using remex::LoadScenario;

struct LoadTestOptions {
  LoadScenario scenario = LoadScenario::kSingleStream;
  uint32_t concurrency = 1;        // instances of the module, 1..64
  uint32_t samples_per_query = 1;  // multi-stream
  double target_qps = 0;           // server: Poisson arrival rate, queries/s
  uint32_t min_queries = 0;
  uint32_t min_duration_ms = 0;
  uint32_t warmup = 1;             // untimed calls per instance
  uint64_t seed = 0;
  // Timed samples whose outputs are checked; 0: none, the request's own default (the
  // tooling's scenarios, tooling/load.h LoadOptions, choose 32 where the audit is on).
  uint32_t audit_samples = 0;
  double audit_rtol = 0, audit_atol = 0;
};

struct LoadTestResult {
  std::vector<uint64_t> issue_nanos;    // per query, since the run's start
  std::vector<uint64_t> latency_nanos;  // per query; 0: dropped
  uint64_t completed = 0, late = 0, dropped = 0, samples = 0;
  uint64_t duration_nanos = 0;          // first issue to last completion
  std::string timer;
  RunPhases phases;
  MemoryUse memory;
  uint32_t audit_checked = 0, audit_mismatches = 0;
  std::string audit_first_mismatch;
  double load_average_1m = -1;  // the server host's, after the run; -1 unknown
};

struct ProfileRow {
  std::string name;  // op name for kernels, instruction kind otherwise
  std::string kind;  // "kernel" or "instruction"
  uint64_t calls = 0;
  uint64_t total_nanos = 0;
  uint64_t copies = 0;
  uint64_t copy_bytes = 0;
  // Device memory of the session's allocator (size classes; 0 from servers before
  // these fields): buffers these rows allocated, their bytes, and the most live bytes
  // right after any of their instructions (rpc/remex.capnp ProfileRow).
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t peak_live_bytes = 0;
};

// A tensor operand as a kernel call saw it; `present` false for an absent optional
// input.
struct OperandDesc {
  bool present = false;
  DType dtype = DType::kUndefined;
  Shape shape;
};

// One kernel-table entry that ran: an ONNX node, or the nodes a fused kernel runs
// ("conv_1+relu_1"); rpc/remex.capnp ProfileNode.
struct ProfileNode {
  std::string name, op;
  bool host = false;
  uint64_t calls = 0;                        // in the median run
  std::vector<uint64_t> run_nanos;           // per run: its calls' time, ns
  std::vector<OperandDesc> inputs, outputs;  // of its first call
};

// One instruction run (rpc/remex.capnp ProfileTraceEvent), indices checked.
struct ProfileTraceEvent {
  uint64_t start_nanos = 0;  // since the first run started
  uint64_t nanos = 0;
  uint16_t opcode = 0;  // index into ProfileResult::opcode_names
  uint16_t run = 0;     // < runs
  int32_t node = -1;    // index into ProfileResult::nodes, -1: no kernel
  uint32_t pc = 0;
  uint16_t function = 0;  // index into ProfileResult::function_names
};

struct ProfileOptions {
  uint32_t runs = 1;   // invokes profiled, 1..rpc::kMaxProfileRuns
  bool trace = false;  // also every instruction run (ProfileResult::trace)
};

// A profile of `runs` invokes. rows, total_nanos and the memory are the median run's
// (by total time); nodes give every run's time. From a server before protocol 1.5:
// one run, no nodes, no trace, synchronized false.
struct ProfileResult {
  std::vector<ProfileRow> rows;
  uint64_t total_nanos = 0;
  // The session allocator's live bytes before and after the invoke and its high-water
  // mark during it (0 from servers before these fields).
  uint64_t live_bytes_before = 0;
  uint64_t live_bytes_after = 0;
  uint64_t peak_live_bytes = 0;
  uint32_t runs = 1;
  std::vector<uint64_t> run_total_nanos;  // per run (empty from older servers)
  uint32_t median_run = 0;
  bool synchronized = false;  // each instruction's time holds its device work
  std::vector<ProfileNode> nodes;
  std::vector<std::string> opcode_names, function_names;
  std::vector<ProfileTraceEvent> trace;
  uint64_t trace_dropped = 0;
};

struct TensorStats {
  uint64_t count = 0;
  double min = 0, max = 0, mean = 0, std = 0;
  uint64_t nan_count = 0, inf_count = 0;
};

struct TensorComparison {
  uint64_t count = 0;
  uint64_t mismatches = 0;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t first_mismatch = -1;  // flat index
};

// Compression of tensor attachments: kAuto compresses (byte-shuffled zstd) and sends a
// chunk raw when it does not shrink enough, and compresses nothing when the server is
// on this machine (a loopback address: an embedded server's, or 127.0.0.1), where
// zstd's hundreds of MB/s are slower than the copy they would save (a decoder step's
// 8 KiB of logits cost it about 20 us); kNone never compresses; kZstd always compresses
// at `level`, loopback or not.
enum class CompressionMode { kAuto, kNone, kZstd };
struct CompressionOptions {
  CompressionMode mode = CompressionMode::kAuto;
  int level = 1;
};

// Attachment bytes of a session, each direction: raw (before compression) and on the
// wire (after).
struct CompressionStats {
  uint64_t raw_sent = 0, wire_sent = 0;
  uint64_t raw_received = 0, wire_received = 0;
};

struct ConnectOptions {
  std::chrono::milliseconds timeout{30000};  // per-request deadline (and connect's, by default)
  // Deadline of connecting (TCP, TLS handshake); zero: `timeout`.
  std::chrono::milliseconds connect_timeout{0};
  std::string client_name = "remex";
  CompressionOptions compression;
  // The server's shared secret (rpc/auth.h), proven by challenge-response right after
  // hello when the server asks; never sent. A farm lease's secret (rpc::IsLeaseSecret:
  // farm::Lease::token, REMEX_TOKEN under `remex farm lease`) is proven by signature
  // instead. Empty: none.
  std::string token;
  // Set: connect over TLS (rpc/transport.h, TlsClientConfig: the CA the server's
  // certificate must chain to, and optionally a client certificate for mutual TLS).
  std::optional<rpc::TlsClientConfig> tls;
};

class Session {
 public:
  // Connects and says hello (protocol version check), then proves options.token when
  // the server asks for it. UNAVAILABLE when the server cannot be reached,
  // FAILED_PRECONDITION on a protocol version mismatch, PERMISSION_DENIED when the
  // server wants a token and none was given, or the proof fails either way (the
  // server's proof of the token is checked too; a farm device, proven a lease's
  // signature, proves nothing back: TLS authenticates it). FAILED_PRECONDITION for a
  // lease's token at a server older than protocol 1.3. With options.tls, the TLS errors of
  // rpc::Client::Connect (a CA or key file that cannot be read, a server certificate
  // that does not verify).
  static StatusOr<std::unique_ptr<Session>> Connect(const std::string& host, uint16_t port,
                                                    const ConnectOptions& options = {});
  ~Session();

  // Another session with the same server, options and token: a second client of the
  // same device (remex bench --from-client drives one per instance). Connect's errors.
  StatusOr<std::unique_ptr<Session>> ConnectAnother() const { return Connect(host_, port_, options_); }

  const ServerInfo& server_info() const { return info_; }
  // Says hello again and returns fresh server information (this session's bytes in
  // use). `challenge`, when given, receives the server's authentication challenge.
  StatusOr<ServerInfo> Hello(std::string* challenge = nullptr);

  // Uploads an executable (.rmx bytes); the server parses and verifies it.
  StatusOr<ModuleInfo> LoadModule(std::span<const std::byte> executable, const std::string& name);
  // moduleHas, then moduleLoad only when the server's module cache lacks the
  // executable: `*uploaded` says which happened.
  StatusOr<ModuleInfo> LoadModuleCached(std::span<const std::byte> executable, const std::string& name,
                                        bool* uploaded = nullptr);
  // The content hash the module cache uses: lower-case hex XXH3-128 of the bytes.
  static std::string ContentHash(std::span<const std::byte> executable);
  StatusOr<uint64_t> CreateVm(uint64_t module, const std::string& device = "");
  StatusOr<RemoteTensor> Alloc(DType dtype, const Shape& shape, const std::string& device = "");
  // tensorAlloc of a tensor filled on the server (base/tensor_fill.h: zeros, uniform,
  // normal from a seed); no bytes cross the wire. INVALID_ARGUMENT from the server
  // when the fill does not suit the dtype; UNIMPLEMENTED, before anything is sent,
  // for a random fill to a server older than protocol 1.6 (it would answer zeros).
  StatusOr<RemoteTensor> Alloc(DType dtype, const Shape& shape, const TensorFill& fill,
                               const std::string& device = "");
  // tensorWrite of a new tensor (one round trip).
  StatusOr<RemoteTensor> Upload(const npy::Array& array, const std::string& device = "");
  // tensorWrite of a new tensor straight from the caller's bytes (no copy on the host:
  // they are written to the socket, or compressed, from where they lie). `bytes` must
  // be dtype x shape's size; the server refuses it otherwise (INVALID_ARGUMENT).
  StatusOr<RemoteTensor> Upload(DType dtype, const Shape& shape, std::span<const std::byte> bytes,
                                const std::string& device = "");
  // tensorWrite into an existing tensor; `bytes` must be its exact size.
  Status Write(uint64_t tensor, DType dtype, const Shape& shape, std::span<const std::byte> bytes);
  StatusOr<npy::Array> Download(uint64_t tensor);
  // tensorRead straight into `destination` (e.g. a buffer reused across downloads),
  // which must be exactly the tensor's size: INVALID_ARGUMENT otherwise. Returns the
  // tensor's handle, dtype and shape.
  StatusOr<RemoteTensor> DownloadInto(uint64_t tensor, std::span<std::byte> destination);
  Status SetInputs(uint64_t vm, const std::string& function, const std::vector<uint64_t>& inputs);
  // Binds output `index` to `tensor`; tensor 0 unbinds.
  Status SetOutput(uint64_t vm, const std::string& function, uint32_t index, uint64_t tensor);
  // `deadline` (> 0) bounds the run on the server, which caps it at its own limit
  // (DEADLINE_EXCEEDED past it); 0: the server's limit.
  StatusOr<InvokeResult> Invoke(uint64_t vm, const std::string& function,
                                std::chrono::milliseconds deadline = std::chrono::milliseconds(0));
  // Time evaluator on the server (no output data crosses the wire).
  StatusOr<BenchmarkResult> Benchmark(uint64_t vm, const std::string& function, const BenchmarkOptions& options);
  // A load scenario run on the server over instances of `vm`'s module, with its bound
  // inputs (rpc/remex.capnp LoadTest). UNIMPLEMENTED from a server older than protocol
  // 1.4; the server's errors (INVALID_ARGUMENT naming an option out of range).
  StatusOr<LoadTestResult> LoadTest(uint64_t vm, const std::string& function, const LoadTestOptions& options);
  // Invokes with per-kernel and per-instruction timing (ProfileOptions). INVALID_ARGUMENT
  // for runs outside [1, rpc::kMaxProfileRuns]; DATA_LOSS for a reply whose counts or
  // indices do not add up. A server before protocol 1.5 profiles one invoke, whatever
  // was asked.
  StatusOr<ProfileResult> Profile(uint64_t vm, const std::string& function,
                                  const ProfileOptions& options = {});
  // Computed on the device; only the numbers come back.
  StatusOr<TensorStats> Stats(uint64_t tensor);
  // |a - b| <= atol + rtol * |b| elementwise (b the reference), on the device;
  // equal_nan: a NaN in both is a match. INVALID_ARGUMENT for different dtypes or
  // shapes or bad tolerances, NOT_FOUND for an unknown handle.
  StatusOr<TensorComparison> Compare(uint64_t a, uint64_t b, double rtol, double atol, bool equal_nan = false);

  // A fresh client-named handle (bit 63 set) for Pipeline results.
  uint64_t NewResultHandle();

  // Requests queued on a Pipeline go out in one write when Run() is called, and their
  // replies are read in order: setInput -> invoke -> tensorRead costs one round trip.
  // Later requests may use handles named for the results of earlier ones.
  class Pipeline {
   public:
    explicit Pipeline(Session& session) : session_(session) {}
    // tensorWrite of a new tensor whose handle is `result_handle` (client-named).
    Pipeline& Upload(const npy::Array& array, uint64_t result_handle);
    // The same from the caller's bytes, borrowed, not copied: they must stay valid and
    // unchanged until Run() returns. `what` names the request in an error's context.
    Pipeline& Upload(DType dtype, const Shape& shape, std::span<const std::byte> bytes, uint64_t result_handle,
                     std::string what = "tensorWrite");
    Pipeline& SetInputs(uint64_t vm, const std::string& function, const std::vector<uint64_t>& inputs);
    // Outputs get the client-named `result_handles` (one per output, or none).
    Pipeline& Invoke(uint64_t vm, const std::string& function, const std::vector<uint64_t>& result_handles);
    Pipeline& Download(uint64_t tensor, std::string what = "tensorRead");
    // Sends every queued request in one write and reads every reply. The first error
    // reply is returned (with the request's kind); downloads arrive in order. When an
    // error reply came and every reply was read, `answered` (if given) receives what the
    // requests that did succeed returned: an invoke's outputs there are on the server,
    // for the caller to free. Left empty when the connection failed.
    struct Result {
      std::vector<InvokeResult> invokes;
      std::vector<npy::Array> downloads;
    };
    StatusOr<Result> Run(Result* answered = nullptr);

    struct Impl;

   private:
    Session& session_;
    std::shared_ptr<Impl> impl_;
  };
  Status Free(const std::vector<uint64_t>& handles);
  // Free without waiting for the reply (rpc::Client::SendUnanswered): the request goes
  // with this session's next one, in the same write, and the server frees the handles
  // as it reads it, before that next request; this session reads and drops its reply
  // before the next one, so the caller neither waits a round trip nor pays a write. For handles whose
  // owners went away (a dropped Python Tensor): the reply's error, if any (a handle
  // already gone: NOT_FOUND, and then none of them is freed), is not seen. Errors: those
  // of sending only.
  Status FreeWithoutReply(const std::vector<uint64_t>& handles);
  // Every handle this session holds on the server, in ascending order, with its kind and
  // size: what the session keeps there. UNIMPLEMENTED from a server older than protocol
  // 1.2.
  StatusOr<std::vector<HandleInfo>> ListHandles();
  // Round trip with an echoed payload.
  Status Ping();

  // Cancels this session's request in progress, from another thread while that
  // request's call blocks: a queued request is not run, and a running invoke, profile or
  // benchmark stops at its next kernel boundary; that call then returns CANCELLED.
  // Connects again to the same server with the same options (token, TLS) to say so,
  // since this session's connection reads nothing while its request runs. Returns
  // whether a request was in progress. Thread-safe with every other call of the
  // session. UNAVAILABLE when the server cannot be reached, NOT_FOUND when the server
  // no longer has this session.
  StatusOr<bool> Cancel() const;

  // Asks, on this session's connection, how far the request of the session `of` (its
  // hello reply: id and cancel key) has got; that session's own connection reads
  // nothing while its request runs, so this one is another (ConnectAnother). Not
  // running: `running` false. UNIMPLEMENTED for a server older than protocol 1.6;
  // NOT_FOUND when the server no longer has that session.
  StatusOr<RequestProgress> ProgressOf(const ServerInfo& of);

  // Bytes on the wire in each direction, frame headers included.
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  CompressionStats compression_stats() const;
  // Round trips on the connection (rpc::Client::round_trips): a call, or a Pipeline's
  // Run, waits for one.
  uint64_t round_trips() const;

 private:
  Session() = default;
  // Answers hello's `challenge` with a proof of options_.token and checks the server's
  // (or, for a lease's secret, with its signature).
  Status Authenticate(const std::string& challenge);
  StatusOr<ModuleInfo> LoadModuleWithHash(std::span<const std::byte> executable, const std::string& name,
                                          const std::string& hash);
  std::unique_ptr<rpc::Client> rpc_;
  ServerInfo info_;
  ConnectOptions options_;
  std::string host_;  // where Cancel connects
  uint16_t port_ = 0;
  uint64_t next_result_handle_ = 1;
};

}  // namespace remex::client
