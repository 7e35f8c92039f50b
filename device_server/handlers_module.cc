// Module and VM requests: moduleLoad, moduleHas, vmCreate, setInput, setOutput.
#include "device_server/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/content_hash.h"

namespace remex::server {

void Session::FillModuleLoadReply(std::shared_ptr<const vm::Executable> exe, uint64_t file_bytes,
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

namespace {

// The protocol binds tensor handles to a function's inputs and returns tensor handles:
// a function that takes or gives an ONNX sequence or optional at its boundary cannot be
// driven over it (inside a model, sequences and optionals run as VM instructions).
Status CheckTensorSignatures(const vm::ExecutableDef& def) {
  for (const auto& fn : def.functions) {
    for (const auto* values : {&fn.inputs, &fn.outputs}) {
      for (const vm::ValueDesc& v : *values) {
        if (v.kind == vm::ValueKind::kTensor) continue;
        return Unimplemented("function '" + fn.name + "' " + (values == &fn.inputs ? "takes input '" : "gives output '") +
                             v.name + "', an ONNX " + vm::ValueKindName(v.kind) +
                             ": the remote protocol carries tensors only (a model may use sequences and optionals "
                             "inside its graph)");
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status Session::CheckHashForm(const std::string& hash) {
  if (!remex::IsContentHash(hash)) {
    return InvalidArgument("module hash '" + hash.substr(0, 64) +
                           "' is not a content hash (32 lower-case hex digits of XXH3-128)");
  }
  return OkStatus();
}

Status Session::ModuleLoad(wire::ModuleLoad::Reader req, rpc::Frame& frame, wire::Reply::Builder reply) {
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
  // Constants beyond what is left of the session's memory quota (or the device's
  // memory) could never be uploaded: refuse them before decompressing anything (a few
  // kilobytes of zstd can declare gigabytes of zeros). The refusal names the bound that
  // decided; "out of memory" is left to a real shortage of host memory while loading.
  const uint64_t quota = allocator_->quota_bytes();
  const uint64_t used = allocator_->stats().allocated_bytes;
  const uint64_t quota_left = used < quota ? quota - used : 0;
  const uint64_t device_bytes = state_->device->memory_bytes();
  const uint64_t left = std::min(device_bytes, quota_left);
  const std::string reason =
      device_bytes < quota_left
          ? "the device has " + std::to_string(device_bytes) + " bytes of memory"
          : "session " + std::to_string(id_) + " has " + std::to_string(quota_left) +
                " bytes left of its memory quota of " + std::to_string(quota) + " bytes (--session-memory-bytes)";
  const auto load_started = std::chrono::steady_clock::now();
  REMEX_ASSIGN_OR_RETURN(auto exe, vm::Executable::Load(bytes, *state_->Registry(), left, reason));
  REMEX_RETURN_IF_ERROR(CheckTensorSignatures(exe->def()).WithContext("moduleLoad"));
  if (!hash.empty()) exe = state_->module_cache->Insert(hash, std::move(exe), bytes.size());
  auto load_reply = reply.initModuleLoad();
  load_reply.setLoadNanos(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - load_started).count()));
  FillModuleLoadReply(std::move(exe), bytes.size(), load_reply);
  spdlog::info("session {}: loaded module '{}' ({} bytes{})", id_, std::string(req.getName()), bytes.size(),
               hash.empty() ? "" : ", hash " + hash);
  return OkStatus();
}

Status Session::ModuleHas(wire::ModuleHas::Reader req, wire::Reply::Builder reply) {
  std::string hash = req.getHash();
  REMEX_RETURN_IF_ERROR(CheckHashForm(hash));
  CachedModule cached = state_->module_cache->Find(hash);
  if (!cached.exe) return NotFound("module " + hash + " is not in the server's module cache");
  FillModuleLoadReply(std::move(cached.exe), cached.file_bytes, reply.initModuleLoad());
  spdlog::info("session {}: module '{}' from the cache (hash {})", id_, std::string(req.getName()), hash);
  return OkStatus();
}

Status Session::VmCreate(wire::VmCreate::Reader req, wire::Reply::Builder reply) {
  REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
  REMEX_ASSIGN_OR_RETURN(auto exe, Lookup<std::shared_ptr<const vm::Executable>>(req.getModule()));
  auto obj = std::make_shared<VmObject>();
  obj->registry = state_->Registry();
  const auto started = std::chrono::steady_clock::now();
  REMEX_ASSIGN_OR_RETURN(obj->vm, vm::VirtualMachine::Create(exe, allocator_, *obj->registry));
  obj->create_nanos = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count());
  obj->vm->set_run_control(&control_);
  obj->vm->set_device_graphs(state_->config.device_graphs);
  if (obj->vm->device_graphs()) {
    obj->vm->set_graph_observer([id = id_, exe](int fn, const std::vector<Shape>& shapes, bool recorded,
                                                const std::string& detail) {
      std::string inputs;
      for (const Shape& s : shapes) inputs += (inputs.empty() ? "" : ", ") + ShapeToString(s);
      const std::string& name = exe->def().functions[fn].name;
      if (recorded) {
        spdlog::info("session {}: function '{}' on inputs {}: recorded a device graph of {}", id, name, inputs, detail);
      } else {
        spdlog::info("session {}: function '{}' on inputs {}: runs without a device graph: {}", id, name, inputs,
                     detail);
      }
    });
  }
  for (const auto& fn : exe->def().functions) obj->bound.emplace_back(fn.outputs.size(), 0);
  reply.setVmCreate(Add(std::move(obj)));
  return OkStatus();
}

StatusOr<std::pair<std::shared_ptr<VmObject>, int>> Session::LookupFunction(uint64_t vm_handle,
                                                                            capnp::Text::Reader name) {
  REMEX_ASSIGN_OR_RETURN(auto obj, Lookup<std::shared_ptr<VmObject>>(vm_handle));
  std::string fn_name = name.size() ? std::string(name.cStr()) : "main";
  REMEX_ASSIGN_OR_RETURN(int fn, obj->vm->executable().FunctionIndex(fn_name));
  return std::make_pair(obj, fn);
}

Status Session::SetInput(wire::SetInput::Reader req, wire::Reply::Builder reply) {
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

Status Session::SetOutput(wire::SetOutput::Reader req, wire::Reply::Builder reply) {
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

}  // namespace remex::server
