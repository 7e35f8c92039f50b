// remex-server: the device server. Sessions (one per connection), a handle table per
// session, and the VM running executables on the server's device.
//
// Every request of a session is answered by a result or a structured error
// {code, message}; objects are named by server-issued 64-bit handles, unique across
// the server's sessions, so a handle of one session is NOT_FOUND in another. Handles
// with bit 63 set are named by the client (tensorWrite.resultHandle,
// invoke.resultHandles) so that pipelined requests can refer to results before their
// replies arrive; server-issued handles never have bit 63 set. When a connection ends,
// however it ends, everything its session created is freed.
//
// Executables loaded with a content hash enter a server-wide module cache (see
// device_server/module_cache.h) that `moduleHas` consults, across sessions.
//
// A session learns nothing of the others: `hello` reports the bytes its own tensors and
// VMs hold, and no session count. Server-wide figures are on the metrics endpoint.
//
// Device faults. When a request on the device worker fails and the device reports a
// fault (vm::Device::Health: on a GPU, a CUDA error that poisons the context, such as
// an illegal address or a launch failure), the server:
//   - answers that request with ABORTED "<device>: device fault: <CUDA's error>; the
//     server closed every session on <device> and resets the device: reconnect";
//   - closes every session: each releases its handles, VMs and tensors (a request of
//     it in progress stops at its next kernel boundary, and releases them as it ends),
//     and every later request of it is answered with that same error;
//   - once all are released, drops the allocator's cache and resets the device on the
//     worker (vm::Device::Reset), and makes a new kernel registry for it;
//   - meanwhile answers device requests of new sessions with UNAVAILABLE ("retry
//     shortly"), and /readyz with 503;
//   - then serves again, counting the reset (remex_device_resets_total). A device that
//     cannot be reset stays unusable: UNAVAILABLE, and /healthz 503.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "device_server/self_test.h"
#include "rpc/frame.h"
#include "rpc/tls.h"

namespace remex::rpc {
class Server;
}
namespace remex::server {
class HttpEndpoint;
struct HttpRequest;
struct HttpResponse;
}

namespace remex::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 9190;  // 0: an ephemeral port
  std::string device = "cpu";
  // I/O threads. Device work runs on the device's own worker thread, so one I/O thread
  // serves many sessions; more help when many clients move large tensors at once.
  int io_threads = 1;
  // The CPU device's compute threads (vm::CreateCpuDevice): 1 to
  // kernels::kMaxCpuComputeThreads, or 0 for OpenMP's default (OMP_NUM_THREADS, else one
  // per CPU the server may run on). Only for device "cpu": INVALID_ARGUMENT otherwise.
  int compute_threads = 0;
  // Bound of the module cache: .rmx bytes plus decompressed constants of the cached
  // executables. 0 disables caching.
  uint64_t module_cache_bytes = uint64_t{1} << 30;
  // Bound of the device allocator's cache of freed blocks kept for reuse (past it the
  // blocks freed longest ago are returned to the device). The whole cache is returned
  // whenever the last session closes. 0: a quarter of the device's memory, at least
  // 256 MiB, so that a model's intermediate tensors are reused from one invoke to the
  // next instead of being allocated (and, on the CPU, page-faulted) afresh.
  uint64_t allocator_cache_bytes = 0;
  // Longest a `benchmark` request may keep the device (DEADLINE_EXCEEDED past it).
  std::chrono::milliseconds benchmark_time_limit{std::chrono::minutes(10)};

  // Budgets (RESOURCE_EXHAUSTED past each, the message naming the limit and its value).
  // Device memory one session's tensors, VM constants and arenas may hold at once;
  // 0: half the device's memory.
  uint64_t session_memory_bytes = 0;
  // Objects (modules, VMs, tensors) one session may hold handles to at once. Each
  // costs host memory besides its device bytes (its table entry and tensor record,
  // about 0.85 KB for a small tensor: 16384 handles hold about 14 MB per session).
  uint32_t max_handles_per_session = 16384;
  // Connections served at once, in all and from one client address (0: no limit).
  uint32_t max_connections = 1024;
  uint32_t max_connections_per_address = 64;
  // Before a session has said hello (and authenticated, when the server has a token or
  // is in a farm): its requests are at most 4 KiB with no attachments, it must be done
  // within auth_timeout of its connection, and at most max_unauthenticated_connections
  // (the oldest closed past it) and max_unauthenticated_per_address (new ones refused
  // past it) wait so (rpc::ServerOptions). 0: no deadline / no limit.
  std::chrono::milliseconds auth_timeout{std::chrono::seconds(5)};
  uint32_t max_unauthenticated_connections = 256;
  uint32_t max_unauthenticated_per_address = 32;
  // Raw bytes of all the attachments of one request frame.
  uint64_t max_frame_bytes = uint64_t{8} << 30;
  // Raw bytes of the attachments of all requests being received at once (declared
  // sizes: what incomplete uploads may make the server hold in host memory); 0: half
  // the host's physical memory (rpc::ServerOptions::max_receiving_bytes).
  uint64_t max_receiving_bytes = 0;
  // Largest raw / wire size of what a request attachment decompresses (a zstd
  // attachment, or each zstd chunk: rpc/frame.h Limits::max_decompression_ratio),
  // checked before it is decompressed. Remex clients stay within the default; 0: no
  // cap (the session quota bounds what an attachment may decompress to either way).
  uint32_t max_decompression_ratio = rpc::kMaxCompressionRatio;
  // A connection idle this long between requests is closed; so is one whose request,
  // once started, makes no progress for read_timeout (0: no deadline).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // A connection whose client takes no byte of a reply for this long is closed (0: no
  // deadline).
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};
  // Threads that compress large replies (1 MiB or more of compressible attachments) off
  // the I/O threads; 0: on the I/O threads.
  int encode_threads = 2;
  // Longest one invoke or profile may run (a client's invoke deadline is capped at it):
  // DEADLINE_EXCEEDED, checked between kernels and at every backward jump.
  std::chrono::milliseconds max_invoke_time{std::chrono::minutes(10)};
  // CPU device only: a session's invoke runs on the I/O thread that received it, not
  // on the device thread, when that thread is idle and the session's previous invoke
  // took less than this on the device (DeviceWorker::RunInlineIfIdle); past this
  // budget the run moves to the device thread at its next yield. The session's
  // bookkeeping requests (Lane::kInlineWhenIdle: setInput, free, ...) run there with
  // the same budget. It saves two thread hand-offs a request (about 20 us of a small
  // model's round trip on a one-core placement; 0.2-0.4 ms of a decoder step's, whose
  // invoke takes 0.4-0.6 ms, on a busy 2-core machine: docs/benchmarks.md) and holds
  // the I/O thread, and the other connections it serves, for the run: at most this
  // budget and one kernel or one 100 us slice. 0: every invoke and every bookkeeping
  // request goes through the device thread.
  std::chrono::microseconds inline_invoke_below{2000};
  // Device graphs (--cuda-graphs): every VM the sessions create, and every loadTest
  // instance, records a function's calls into a CUDA Graph at the second call with the
  // same input shapes and launches the graph after (vm::VirtualMachine::
  // set_device_graphs); the graphs' memory is charged to the session. Devices without
  // graphs (the CPU) ignore it.
  bool device_graphs = false;
  // On Stop (SIGTERM): how long requests already running may take to finish before
  // they are cancelled (UNAVAILABLE) and the server stops.
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(10)};

  // The server's command line (argv), as the environment fingerprint of an
  // authenticated session's hello reports it (device_server/environment.h): file
  // paths, never a file's contents. Empty for a server embedded in a client.
  std::vector<std::string> server_args;

  // The shared secret sessions must prove (rpc/auth.h) before any other request;
  // empty: no authentication.
  std::string token;
  // Farm mode (docs/farm.md): reads the public key of the device's current lease from
  // the farm (32 bytes; "" when it has none) at each session's start; FAILED_PRECONDITION
  // for a lease record it refuses (malformed), which fails that session's authenticate.
  // When set, every session must sign the challenge with the lease's private key
  // (rpc::LeaseSignature; `token` is then not used), and KeepLease closes the sessions
  // of a lease that has ended. Unset: not in a farm.
  std::function<StatusOr<std::string>()> lease_key;
  // Set: connections speak TLS, optionally mutual (rpc/tls.h, rpc/transport.h
  // ServerOptions::tls). Start() fails with INVALID_ARGUMENT naming a file it cannot use.
  std::optional<rpc::TlsServerConfig> tls;

  // The metrics and health endpoint (device_server/metrics.h): /metrics, /healthz,
  // /readyz on metrics_host:metrics_port (0: any free port); none when metrics_port < 0.
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;
  // Non-empty: GET /metrics needs "Authorization: Bearer <metrics_token>" (compared in
  // constant time; 401 otherwise). /healthz and /readyz stay open: they say only
  // whether the server is healthy and ready. remex-server sets it from
  // --metrics-token-file, else from --token-file.
  std::string metrics_token;

  // Test only: the Nth kernel launched on the device (counted over all sessions, from
  // 1) fails with a device fault, once, as one that hit an illegal address would, so
  // that recovery (see "Device faults" below) runs without a faulty GPU. 0: none.
  uint64_t inject_device_fault_at_kernel = 0;
  // Called on the device worker with the result of the self-test (SelfTest) the server
  // runs after every device reset; unset: none. It must not block (a results store is
  // written elsewhere): the device serves nobody meanwhile.
  std::function<void(const SelfTestResult&)> on_self_test;
  // Test only: the self-test sees a wrong result from the device, as on a device that
  // computes wrongly, so that quarantine runs without one.
  bool inject_self_test_failure = false;
};

struct ServerStats {
  uint64_t active_sessions = 0;
  uint64_t device_bytes_in_use = 0;
  uint64_t live_buffers = 0;
  uint64_t module_cache_entries = 0;
  uint64_t module_cache_bytes = 0;
  uint64_t module_cache_hits = 0;
  uint64_t module_cache_misses = 0;
  uint64_t device_faults = 0;  // faults met, and resets done after them
  uint64_t device_resets = 0;
};

class DeviceServer {
 public:
  // Creates the device ("cpu", or "cuda:N" / "cuda" for GPU N / 0) and starts
  // listening. INVALID_ARGUMENT for an unknown device name or a GPU ordinal past the
  // visible GPUs; UNAVAILABLE when no GPU or driver is usable or the address cannot be
  // bound; UNIMPLEMENTED for a CUDA device in a build without CUDA.
  static StatusOr<std::unique_ptr<DeviceServer>> Start(const ServerConfig& config);
  ~DeviceServer();

  uint16_t port() const;
  // The metrics endpoint's port; 0 when there is none.
  uint16_t metrics_port() const;
  std::string device_description() const;
  // The served device: its kind ("cpu", "cuda"), name ("cpu", "cuda:0"), description
  // and memory, as the farm registers them.
  struct DeviceSummary {
    std::string kind, name, description;
    uint64_t memory_bytes = 0;
  };
  DeviceSummary device_summary() const;
  ServerStats stats() const;
  // Runs the device self-test (device_server/self_test.h) on the device worker, as
  // exclusive work (between the kernels of runs in progress, which wait meanwhile, as
  // for a benchmark), and returns its result: its status (OK, or why the device is not
  // to be trusted) and its latencies.
  SelfTestResult SelfTest();
  // As SelfTest, but returns at once: `done` is called on the device worker with the
  // result, and must not block. While the device waits for its reset after a fault,
  // `done` gets nullopt (the reset runs a self-test of its own: on_self_test); once a
  // reset has failed, the result is that failure (UNAVAILABLE). Called from any thread.
  void PostSelfTest(std::function<void(std::optional<SelfTestResult>)> done);
  // Farm mode: `public_key` is that of the device's current lease ("" when none). Every
  // session that authenticated with another lease's key is closed (ABORTED, naming the
  // lease's end): its run stops within one kernel and its memory is freed. Called from
  // any thread (the farm registration's, at every heartbeat).
  void KeepLease(const std::string& public_key);
  // Stops serving: closes the listener, refuses new requests (UNAVAILABLE), lets the
  // requests already running finish for up to config.drain_timeout and then cancels
  // them (each stops within one kernel), then closes every connection. Sessions end by
  // then, except one whose request was still on the device worker, which ends when the
  // DeviceServer is destroyed. Idempotent.
  void Stop();

  // Registry, device and allocator, shared by the server's sessions (opaque).
  struct State;

 private:
  DeviceServer() = default;
  // The metrics endpoint's answer to a GET request.
  HttpResponse Serve(const HttpRequest& request) const;
  std::string RenderMetrics() const;
  std::shared_ptr<State> state_;
  std::unique_ptr<rpc::Server> server_;
  std::unique_ptr<HttpEndpoint> metrics_;
};

}  // namespace remex::server
