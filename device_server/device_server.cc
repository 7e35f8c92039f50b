#include "device_server/device_server.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "device_server/metrics.h"
#include "device_server/module_cache.h"
#include "device_server/server_state.h"
#include "device_server/self_test.h"
#include "device_server/session.h"
#include "rpc/auth.h"
#include "rpc/transport.h"
#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/device/cuda_device.h"

namespace remex::server {

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
  if (vm::CudaDeviceFactsOf(*state->device)) {
    auto nvml = Nvml::Load();
    if (nvml.ok()) {
      state->nvml = std::move(nvml).value();
    } else {
      spdlog::info("{}: the environment fingerprint reports the GPU's clocks and modes unknown", nvml.status().message());
    }
  }
  const uint64_t cache_bytes = config.allocator_cache_bytes != 0
                                   ? config.allocator_cache_bytes
                                   : std::max(state->device->memory_bytes() / 4, uint64_t{256} << 20);
  state->allocator = vm::Allocator::Create(*state->device, cache_bytes);
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
  options.auth_timeout = config.auth_timeout;
  options.max_unauthenticated_connections = config.max_unauthenticated_connections;
  options.max_unauthenticated_per_address = config.max_unauthenticated_per_address;
  options.max_receiving_bytes = config.max_receiving_bytes;
  if (options.max_receiving_bytes == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) options.max_receiving_bytes = static_cast<uint64_t>(pages) * page / 2;
  }
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
                                               [self](const HttpRequest& request) { return self->Serve(request); }));
  }
  return server;
}

HttpResponse DeviceServer::Serve(const HttpRequest& request) const {
  const std::string_view target = request.target;
  if (target == "/metrics") {
    const std::string& token = state_->config.metrics_token;
    if (!token.empty() && !rpc::BearerTokenMatches(request.authorization, token)) {
      return {401, "/metrics needs \"Authorization: Bearer TOKEN\" with the server's metrics token\n",
              "text/plain; charset=utf-8", "Bearer realm=\"remex-server metrics\""};
    }
    return {200, RenderMetrics(), "text/plain; version=0.0.4; charset=utf-8"};
  }
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
  gauge("remex_reply_writes_total",
        "Socket writes of replies; one carries several replies of a client that pipelines its requests.", "",
        static_cast<double>(t.writes.load()), true);
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

DeviceServer::DeviceSummary DeviceServer::device_summary() const {
  const vm::Device& d = *state_->device;
  return {std::string(kernels::DeviceKindName(d.kernel_kind())), d.name(), d.description(), d.memory_bytes()};
}

SelfTestResult DeviceServer::SelfTest() {
  auto done = std::make_shared<std::promise<SelfTestResult>>();
  std::future<SelfTestResult> result = done->get_future();
  state_->worker.Post(
      [state = state_, done] {
        done->set_value(RunSelfTest(*state->device, state->allocator, *state->Registry(),
                                    state->config.inject_self_test_failure));
      },
      /*exclusive=*/true);
  return result.get();
}

void DeviceServer::PostSelfTest(std::function<void(std::optional<SelfTestResult>)> done) {
  state_->worker.Post(
      [state = state_, done = std::move(done)] {
        Status unusable;
        bool resetting = false;
        {
          std::lock_guard<std::mutex> lock(state->sessions_mu);
          if (state->reset_failed) unusable = state->fault;
          resetting = !state->reset_failed && state->faulted.load();
        }
        if (!unusable.ok()) return done(SelfTestResult{unusable, {}});
        if (resetting) return done(std::nullopt);
        done(RunSelfTest(*state->device, state->allocator, *state->Registry(), state->config.inject_self_test_failure));
      },
      /*exclusive=*/true);
}

void DeviceServer::KeepLease(const std::string& public_key) {
  std::lock_guard<std::mutex> lock(state_->sessions_mu);
  for (Session* session : state_->sessions) {
    if (session->lease().empty() || session->lease() == public_key) continue;
    session->CloseLocked(Aborted("the lease this session was opened with has ended (released, lapsed or taken over): "
                                 "the session is closed and its memory freed; acquire a new lease"));
  }
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
