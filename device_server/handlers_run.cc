// Run requests: invoke, benchmark, profile.
#include "device_server/session.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "device_server/environment.h"
#include "device_server/time_evaluator.h"

namespace remex::server {

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
  auto call = [&vm = *obj->vm, fn = fn]() -> Status { return vm.Invoke(fn).status(); };
  REMEX_ASSIGN_OR_RETURN(TimeEvaluatorResult result,
                         RunTimeEvaluator(call, *allocator_, options, state_->benchmark_time_limit));
  auto r = reply.initBenchmark();
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

}  // namespace remex::server
