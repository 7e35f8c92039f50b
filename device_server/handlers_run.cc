// Run requests: invoke, benchmark, profile.
#include "device_server/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_server/environment.h"
#include "device_server/load_test.h"
#include "device_server/server_state.h"
#include "device_server/time_evaluator.h"
#include "rpc/wire_util.h"
#include "vm/tensor_ops.h"

namespace remex::server {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NanosSince(Clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
}

// The server process's resident memory now and its high-water mark (VmRSS, VmHWM of
// /proc/self/status), in bytes; 0 where unreadable.
std::pair<uint64_t, uint64_t> ResidentMemory() {
  uint64_t rss = 0, hwm = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "VmRSS:", 6) == 0) rss = std::strtoull(line + 6, nullptr, 10) << 10;
      if (std::strncmp(line, "VmHWM:", 6) == 0) hwm = std::strtoull(line + 6, nullptr, 10) << 10;
    }
    std::fclose(f);
  }
  return {rss, hwm};
}

void FillPhases(const VmObject& obj, wire::RunPhases::Builder p) {
  p.setVmCreateNanos(obj.create_nanos);
  p.setFirstInvokeNanos(obj.first_invoke_nanos);
}

}  // namespace

void Session::FillMemoryUse(const VmObject& obj, uint64_t before, uint64_t invoke_peak, uint64_t run_peak,
                            wire::MemoryUse::Builder m) const {
  m.setWeightsBytes(obj.vm->executable().constant_bytes());
  m.setSessionBytesBefore(before);
  m.setInvokePeakBytes(invoke_peak > before ? invoke_peak - before : 0);
  m.setRunPeakBytes(run_peak > before ? run_peak - before : 0);
  auto [rss, hwm] = ResidentMemory();
  m.setResidentBytes(rss);
  m.setResidentPeakBytes(hwm);
}

void Session::ArmRunDeadline(uint32_t client_ms) {
  std::chrono::milliseconds budget = state_->config.max_invoke_time;
  if (client_ms != 0 && std::chrono::milliseconds(client_ms) < budget) budget = std::chrono::milliseconds(client_ms);
  control_.budget = budget;
  control_.deadline = std::chrono::steady_clock::now() + budget;
}

Status Session::Invoke(wire::Invoke::Reader req, wire::Reply::Builder reply) {
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
  const bool first = obj->vm->invoke_count() == 0;
  REMEX_ASSIGN_OR_RETURN(std::vector<vm::TensorPtr> outputs, obj->vm->Invoke(fn));
  std::chrono::nanoseconds nanos = std::chrono::steady_clock::now() - start;
  if (first) obj->first_invoke_nanos = static_cast<uint64_t>(nanos.count());
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
  r.setGraph(obj->vm->last_invoke_graph());
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

Status Session::Benchmark(wire::Benchmark::Reader req, wire::Reply::Builder reply) {
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
  VmObject& vm_obj = *obj;
  auto call = [&vm_obj, fn = fn]() -> Status {
    if (vm_obj.vm->invoke_count() != 0) return vm_obj.vm->Invoke(fn).status();
    const auto started = Clock::now();
    Status st = vm_obj.vm->Invoke(fn).status();
    if (st.ok()) vm_obj.first_invoke_nanos = NanosSince(started);
    return st;
  };
  const uint64_t before = allocator_->stats().allocated_bytes;
  allocator_->ResetPeak();
  progress_.Start(RequestProgress::kBenchmark, options.repeat);
  REMEX_ASSIGN_OR_RETURN(TimeEvaluatorResult result,
                         RunTimeEvaluator(call, *allocator_, options, state_->benchmark_time_limit,
                                          &control_.cancelled, &progress_.done));
  if (result.cancelled) {
    // control_.reason was written before the flag was set (Cancel, CloseLocked).
    const Status why = control_.cancelled.load(std::memory_order_acquire) ? Cancelled(control_.reason)
                                                                          : result.cancel_status;
    if (!req.getPartialOnCancel()) return why.WithContext("benchmark");
    spdlog::info("session {}: benchmark stopped {:.1f} ms after its cancel, {} of {} samples kept ({})", id_,
                 MillisSinceCancel(), result.samples_seconds.size(), options.repeat, why.message());
  }
  const uint64_t peak = allocator_->stats().peak_allocated_bytes;
  auto r = reply.initBenchmark();
  r.setCancelled(result.cancelled);
  FillPhases(*obj, r.initPhases());
  // One call at a time, outputs dropped after each: the run's peak is one call's.
  FillMemoryUse(*obj, before, peak, peak, r.initMemory());
  r.setNumber(result.number);
  r.setTimer(result.timer);
  // Sampled right after the last sample: what else ran on the host while measuring.
  r.setLoadAverage1m(HostLoadAverage1m());
  auto samples = r.initSamplesSeconds(result.samples_seconds.size());
  for (size_t i = 0; i < result.samples_seconds.size(); ++i) samples.set(i, result.samples_seconds[i]);
  return OkStatus();
}

Status Session::Profile(wire::Profile::Reader req, wire::Reply::Builder reply) {
  REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
  auto& [obj, fn] = target;
  const uint32_t asked = req.getRuns() == 0 ? 1 : req.getRuns();
  if (asked > rpc::kMaxProfileRuns) {
    return InvalidArgument("profile: runs must be in [1, " + std::to_string(rpc::kMaxProfileRuns) +
                           "], got " + std::to_string(asked));
  }
  const vm::ExecutableDef& def = obj->vm->executable().def();
  // One profiler per run, every run on one time line; each waits for the device after
  // every instruction, so that an instruction's time holds its device work. The runs
  // together stay within the benchmark time limit: a run that would likely pass it (by
  // the longest run so far) is not started, and the reply says how many ran.
  std::vector<vm::Profiler> profilers(asked);
  std::vector<uint64_t> peaks(asked);
  const auto origin = Clock::now();
  const auto limit = std::chrono::duration_cast<std::chrono::nanoseconds>(state_->benchmark_time_limit);
  uint64_t longest = 0;
  size_t traced = 0;
  uint32_t runs = 0;
  progress_.Start(RequestProgress::kProfile, asked);
  for (uint32_t k = 0; k < asked; ++k) {
    if (k > 0 && std::chrono::nanoseconds(NanosSince(origin) + longest) > limit) break;
    vm::Profiler& p = profilers[k];
    p.synchronize = true;
    p.trace = req.getTrace();
    p.trace_origin = origin;
    p.trace_limit = rpc::kMaxProfileTraceEvents - traced;
    ArmRunDeadline(0);  // each run is one invoke for the run control
    allocator_->ResetPeak();
    REMEX_RETURN_IF_ERROR(
        obj->vm->Invoke(fn, &p).status().WithContext("profiled run " + std::to_string(k + 1)));
    REMEX_RETURN_IF_ERROR(state_->device->Synchronize());
    // The allocator's high-water mark sees buffers that live inside one instruction too.
    peaks[k] = std::max(allocator_->stats().peak_allocated_bytes, p.peak_live_bytes);
    traced += p.events.size();
    longest = std::max(longest, p.total_nanos);
    runs = k + 1;
    progress_.done.store(runs, std::memory_order_relaxed);
  }
  profilers.resize(runs);
  // The median run by total time (the lower middle of an even count).
  std::vector<uint32_t> order(runs);
  for (uint32_t k = 0; k < runs; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return profilers[a].total_nanos != profilers[b].total_nanos
               ? profilers[a].total_nanos < profilers[b].total_nanos
               : a < b;
  });
  const uint32_t median = order[(runs - 1) / 2];
  const vm::Profiler& mid = profilers[median];
  auto rows = mid.Rows(def);
  auto r = reply.initProfile();
  r.setTotalNanos(mid.total_nanos);
  r.setLiveBytesBefore(mid.live_bytes_before);
  r.setLiveBytesAfter(mid.live_bytes_after);
  r.setPeakLiveBytes(peaks[median]);
  auto out = r.initRows(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].setName(rows[i].name);
    out[i].setKind(rows[i].kind);
    out[i].setCalls(rows[i].counter.calls);
    out[i].setTotalNanos(rows[i].counter.total_nanos);
    out[i].setCopies(rows[i].counter.copies);
    out[i].setCopyBytes(rows[i].counter.copy_bytes);
    out[i].setAllocations(rows[i].counter.allocations);
    out[i].setAllocatedBytes(rows[i].counter.allocated_bytes);
    out[i].setPeakLiveBytes(rows[i].counter.peak_live_bytes);
  }
  r.setRuns(runs);
  auto totals = r.initRunTotalNanos(runs);
  for (uint32_t k = 0; k < runs; ++k) totals.set(k, profilers[k].total_nanos);
  r.setMedianRun(median);
  r.setSynchronized(true);

  // Nodes: the kernel-table entries that ran in any run, in table order.
  const size_t n_kernels = def.kernels.size();
  std::vector<int32_t> node_of(n_kernels, -1);
  std::vector<size_t> ran;
  for (size_t e = 0; e < n_kernels; ++e) {
    for (const vm::Profiler& p : profilers) {
      if (e < p.kernels.size() && p.kernels[e].calls != 0) {
        node_of[e] = static_cast<int32_t>(ran.size());
        ran.push_back(e);
        break;
      }
    }
  }
  auto nodes = r.initNodes(ran.size());
  for (size_t i = 0; i < ran.size(); ++i) {
    const size_t e = ran[i];
    const vm::KernelEntry& entry = def.kernels[e];
    auto node = nodes[i];
    node.setName(entry.node_name);
    node.setOp(entry.op);
    node.setHost(entry.host);
    node.setCalls(e < mid.kernels.size() ? mid.kernels[e].calls : 0);
    auto times = node.initRunNanos(runs);
    const vm::KernelShapes* shapes = nullptr;
    for (uint32_t k = 0; k < runs; ++k) {
      const vm::Profiler& p = profilers[k];
      const bool called = e < p.kernels.size() && p.kernels[e].calls != 0;
      times.set(k, called ? p.kernels[e].total_nanos : 0);
      if (called && !shapes) shapes = &p.kernel_shapes[e];
    }
    auto write = [](capnp::List<wire::TensorDesc>::Builder list,
                    const std::vector<std::pair<DType, Shape>>& ops) {
      for (size_t j = 0; j < ops.size(); ++j) {
        if (ops[j].first == DType::kUndefined) continue;  // absent: dtype 0, no shape
        rpc::WriteTensorDesc(list[j], ops[j].first, ops[j].second);
      }
    };
    static const vm::KernelShapes kNone;
    const vm::KernelShapes& operands = shapes ? *shapes : kNone;
    write(node.initInputs(operands.inputs.size()), operands.inputs);
    write(node.initOutputs(operands.outputs.size()), operands.outputs);
  }

  if (req.getTrace()) {
    auto names = r.initOpcodeNames(vm::kOpcodeCount);
    for (int i = 0; i < vm::kOpcodeCount; ++i)
      names.set(i, std::string(vm::OpcodeName(static_cast<vm::Opcode>(i))));
    auto functions = r.initFunctionNames(def.functions.size());
    for (size_t i = 0; i < def.functions.size(); ++i) functions.set(i, def.functions[i].name);
    auto events = r.initTrace(traced);
    size_t at = 0;
    uint64_t dropped = 0;
    for (uint32_t k = 0; k < runs; ++k) {
      dropped += profilers[k].trace_dropped;
      for (const vm::TraceEvent& ev : profilers[k].events) {
        auto e = events[at++];
        e.setStartNanos(ev.start_nanos);
        e.setNanos(ev.nanos);
        e.setOpcode(static_cast<uint16_t>(ev.op));
        e.setRun(static_cast<uint16_t>(k));
        e.setNode(ev.kernel >= 0 && static_cast<size_t>(ev.kernel) < n_kernels ? node_of[ev.kernel] : -1);
        e.setPc(ev.pc);
        e.setFunction(static_cast<uint16_t>(ev.function));
      }
    }
    r.setTraceDropped(dropped);
  }
  return OkStatus();
}

Status Session::LoadTest(wire::LoadTest::Reader req, wire::Reply::Builder reply) {
  const auto started = Clock::now();
  progress_.Start(RequestProgress::kLoadTest, 0);  // queries completed; how many is not known ahead
  REMEX_ASSIGN_OR_RETURN(auto target, LookupFunction(req.getVm(), req.getFunction()));
  auto& [obj, fn] = target;
  const std::chrono::milliseconds limit = state_->benchmark_time_limit;
  LoadTestOptions options;
  switch (req.getScenario()) {
    case wire::LoadScenario::SINGLE_STREAM: options.scenario = server::LoadScenario::kSingleStream; break;
    case wire::LoadScenario::MULTI_STREAM: options.scenario = server::LoadScenario::kMultiStream; break;
    case wire::LoadScenario::SERVER: options.scenario = server::LoadScenario::kServer; break;
    case wire::LoadScenario::OFFLINE: options.scenario = server::LoadScenario::kOffline; break;
    default:
      return InvalidArgument("loadTest: unknown scenario " + std::to_string(static_cast<int>(req.getScenario())));
  }
  options.concurrency = req.getConcurrency();
  options.samples_per_query = req.getSamplesPerQuery();
  options.target_qps = req.getTargetQps();
  options.min_queries = req.getMinQueries();
  options.min_duration_ms = req.getMinDurationMs();
  options.seed = req.getSeed();
  REMEX_RETURN_IF_ERROR(ValidateLoadTestOptions(options, limit));
  const uint32_t warmup = req.getWarmup();
  const uint32_t audit_samples = req.getAuditSamples();
  const double rtol = req.getAuditRtol(), atol = req.getAuditAtol();
  if (warmup > kMaxLoadWarmup) {
    return InvalidArgument("loadTest: warmup must be in [0, " + std::to_string(kMaxLoadWarmup) + "], got " +
                           std::to_string(warmup));
  }
  if (audit_samples > kMaxAuditSamples) {
    return InvalidArgument("loadTest: auditSamples must be in [0, " + std::to_string(kMaxAuditSamples) +
                           "], got " + std::to_string(audit_samples));
  }
  if (!(rtol >= 0) || !(atol >= 0) || !std::isfinite(rtol) || !std::isfinite(atol)) {
    return InvalidArgument("loadTest: auditRtol and auditAtol must be finite and >= 0");
  }
  const std::vector<vm::Value>& inputs = obj->vm->bound_inputs(fn);
  if (inputs.empty() && !obj->vm->executable().def().functions[fn].inputs.empty()) {
    return FailedPrecondition("loadTest: the inputs of '" + obj->vm->executable().def().functions[fn].name +
                              "' are not set (setInput first)");
  }
  // Room for every instance: each holds its own planned memory and outputs, charged to
  // the session's quota as they are allocated.
  vm::Device& device = *state_->device;
  const uint64_t before = allocator_->stats().allocated_bytes;
  allocator_->ResetPeak();

  // The reference call, untimed, on the VM itself: the audit's expected outputs, and
  // one call's memory peak.
  ArmRunDeadline(0);
  const bool first = obj->vm->invoke_count() == 0;
  auto call_started = Clock::now();
  REMEX_ASSIGN_OR_RETURN(std::vector<vm::TensorPtr> reference, obj->vm->Invoke(fn));
  REMEX_RETURN_IF_ERROR(device.Synchronize());
  if (first) obj->first_invoke_nanos = NanosSince(call_started);
  const uint64_t invoke_peak = allocator_->stats().peak_allocated_bytes;
  if (audit_samples == 0) reference.clear();
  // The generator enforces the limit from here on (stopping what runs at it); the
  // session's control still carries cancellation and shutdown.
  control_.deadline = Clock::time_point::max();

  // The instances, sharing the VM's constants. On a device with streams
  // (DeviceCapabilities::streams: a GPU) each queues its work on a stream of its own
  // (Device::CreateStream), with kernels bound to that stream and memory drawn on the
  // session's quota but never passed between streams (Allocator::CreateForQueue), so
  // that instances run concurrently on the device; the constants and inputs are complete
  // on the device's stream (the reference call synchronized it). Otherwise (the CPU)
  // they share the device, whose kernels run on the generator's thread. Declared before the
  // instances and their outputs, which go first.
  struct LaneQueue {
    std::unique_ptr<vm::Device> device;  // last to go: the allocator waits for it
    std::shared_ptr<vm::Allocator> allocator;
    std::shared_ptr<const kernels::KernelRegistry> registry;
  };
  auto instances_started = Clock::now();
  const size_t n = options.concurrency;
  const bool streams = device.capabilities().streams;
  std::vector<LaneQueue> queues(n);
  std::vector<std::unique_ptr<vm::VirtualMachine>> instances;
  std::vector<std::unique_ptr<vm::RunControl>> controls;
  for (size_t i = 0; i < n; ++i) {
    if (streams) {
      LaneQueue& q = queues[i];
      REMEX_ASSIGN_OR_RETURN(q.device, device.CreateStream());
      REMEX_ASSIGN_OR_RETURN(q.allocator, vm::Allocator::CreateForQueue(allocator_, *q.device));
      REMEX_ASSIGN_OR_RETURN(q.registry, CreateRegistry(*q.device, q.allocator));
    }
    REMEX_ASSIGN_OR_RETURN(auto inst, streams ? obj->vm->CreateInstance(*queues[i].registry, queues[i].allocator)
                                              : obj->vm->CreateInstance(*obj->registry));
    REMEX_RETURN_IF_ERROR(inst->SetInputValues(fn, inputs));
    inst->set_device_graphs(state_->config.device_graphs);
    controls.push_back(std::make_unique<vm::RunControl>());
    controls.back()->shutdown_at = control_.shutdown_at;
    inst->set_run_control(controls.back().get());
    instances.push_back(std::move(inst));
  }
  const uint64_t instances_nanos = NanosSince(instances_started);

  // Audit: the chosen samples (drawn with the seed below the number of samples the run
  // should reach: a later sample is never audited) are compared with the reference on
  // the device as they complete, outside their latency; nothing is copied or kept.
  const auto& outputs = obj->vm->executable().def().functions[fn].outputs;
  uint32_t audit_checked = 0, mismatches = 0;
  std::string first_mismatch;
  std::vector<std::vector<vm::TensorPtr>> last_outputs(n);
  std::vector<LoadLane> lanes(n);
  for (size_t i = 0; i < n; ++i) {
    lanes[i].control = controls[i].get();
    vm::Device* queue = streams ? queues[i].device.get() : &device;
    lanes[i].run = [&, i, fn = fn, queue]() -> Status {
      auto out = instances[i]->Invoke(fn);
      if (!out.ok()) return out.status();
      last_outputs[i] = std::move(out).value();
      // In the generator's fiber the lane polls its queue and yields meanwhile, so the
      // other lanes queue their work while this one's runs; in the warmup it waits.
      vm::RunControl& control = *controls[i];
      for (;;) {
        REMEX_ASSIGN_OR_RETURN(bool idle, queue->Idle());
        if (idle) return OkStatus();
        if (!control.yield) return queue->Synchronize();
        REMEX_RETURN_IF_ERROR(control.Check());
        control.yield();
      }
    };
    lanes[i].audit = [&, i](uint64_t sample) -> Status {
      ++audit_checked;
      bool differs = false;
      for (size_t o = 0; o < last_outputs[i].size() && o < reference.size(); ++o) {
        auto cmp = vm::CompareTensors(device, *last_outputs[i][o], *reference[o], rtol, atol, /*equal_nan=*/true);
        std::string why;
        if (!cmp.ok()) why = cmp.status().message();
        else if (cmp->mismatches) why = std::to_string(cmp->mismatches) + " of " + std::to_string(cmp->count) + " values differ";
        if (why.empty()) continue;
        differs = true;
        if (first_mismatch.empty()) {
          first_mismatch = "sample " + std::to_string(sample) + ", output '" +
                           (o < outputs.size() ? outputs[o].name : std::to_string(o)) + "': " + why;
        }
      }
      mismatches += differs;
      return OkStatus();
    };
  }

  // The generator runs on a thread of its own (it resumes fibers, which the device
  // thread's request, itself a fiber, cannot); the device thread waits for it, so
  // kernels still run one caller at a time.
  uint64_t instance_first_nanos = 0;
  StatusOr<LoadTestResult> result = Internal("loadTest did not run");
  std::thread generator([&] {
    device.PrepareKernelThread();
    // Warmup: `warmup` untimed calls per instance, one instance after the other.
    auto warm_started = Clock::now();
    uint64_t warm_calls = 0;
    double seconds_per_sample = 0;
    for (size_t i = 0; i < n; ++i) {
      controls[i]->deadline = started + limit;
      controls[i]->budget = limit;
      for (uint32_t w = 0; w < warmup; ++w) {
        Status st = control_.Check();
        auto call = Clock::now();
        if (st.ok()) st = lanes[i].run();
        if (!st.ok()) {
          result = st.WithContext("loadTest warmup of instance " + std::to_string(i));
          return;
        }
        if (i == 0 && w == 0) instance_first_nanos = NanosSince(call);
        ++warm_calls;
      }
    }
    if (warm_calls > (n > 1 ? n : 0)) {
      // The first call of each instance is cold: leave it out where there are others.
      seconds_per_sample = std::chrono::duration<double>(Clock::now() - warm_started).count() /
                           static_cast<double>(warm_calls);
    }
    options.seconds_per_sample = seconds_per_sample;
    if (audit_samples > 0) {
      double expected = static_cast<double>(options.min_queries) * options.samples_per_query;
      if (options.scenario == server::LoadScenario::kServer) {
        // Arrivals, not the device, set how many samples a server run has.
        expected = std::max(expected, options.target_qps * options.min_duration_ms / 1000.0);
      } else if (seconds_per_sample > 0) {
        expected = std::max(expected, options.min_duration_ms / 1000.0 / seconds_per_sample * static_cast<double>(n));
      }
      const uint64_t range = std::max<uint64_t>(1, static_cast<uint64_t>(std::min(expected, 1e7)));
      std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ull);
      std::set<uint64_t> chosen;
      std::uniform_int_distribution<uint64_t> pick(0, range - 1);
      while (chosen.size() < std::min<uint64_t>(audit_samples, range)) chosen.insert(pick(rng));
      options.audited_samples.assign(chosen.begin(), chosen.end());
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    if (elapsed + std::chrono::milliseconds(options.min_duration_ms) > limit) {
      result = DeadlineExceeded("loadTest: the warmup took " + std::to_string(elapsed.count()) +
                                " ms, leaving less than minDurationMs of the server's limit of " +
                                std::to_string(limit.count()) + " ms");
      return;
    }
    options.completed_queries = &progress_.done;
    result = RunLoadTest(lanes, options, limit - elapsed, control_);
  });
  generator.join();
  REMEX_RETURN_IF_ERROR(result.status());
  const uint64_t run_peak = allocator_->stats().peak_allocated_bytes;
  spdlog::info("session {}: loadTest {} at concurrency {}: {} of {} queries completed in {:.3f} s", id_,
               LoadScenarioName(options.scenario), options.concurrency, result->completed,
               result->issue_nanos.size(), result->duration_nanos / 1e9);

  auto r = reply.initLoadTest();
  auto issue = r.initIssueNanos(result->issue_nanos.size());
  auto latency = r.initLatencyNanos(result->latency_nanos.size());
  for (size_t q = 0; q < result->issue_nanos.size(); ++q) {
    issue.set(q, result->issue_nanos[q]);
    latency.set(q, result->latency_nanos[q]);
  }
  r.setCompleted(result->completed);
  r.setLate(result->late);
  r.setDropped(result->dropped);
  r.setSamples(result->samples);
  r.setDurationNanos(result->duration_nanos);
  r.setTimer("steady_clock");
  r.setLoadAverage1m(HostLoadAverage1m());
  auto phases = r.initPhases();
  FillPhases(*obj, phases);
  phases.setInstancesCreateNanos(instances_nanos);
  phases.setInstanceFirstInvokeNanos(instance_first_nanos);
  FillMemoryUse(*obj, before, invoke_peak, run_peak, r.initMemory());

  r.setAuditChecked(audit_checked);
  r.setAuditMismatches(mismatches);
  r.setAuditFirstMismatch(first_mismatch);
  return OkStatus();
}

}  // namespace remex::server
