// Tensor requests: tensorAlloc, tensorWrite, tensorRead, tensorStats, tensorCompare,
// free, listHandles.
#include "device_server/session.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "vm/tensor_ops.h"

namespace remex::server {

Status Session::TensorAlloc(wire::TensorAlloc::Reader req, wire::Reply::Builder reply) {
  REMEX_RETURN_IF_ERROR(CheckDevice(req.getDevice()));
  REMEX_ASSIGN_OR_RETURN(auto desc, rpc::ReadTensorDesc(req.getDesc()));
  // The fill is checked before any memory is taken.
  TensorFill fill;
  const auto f = req.getFill();
  switch (f.getKind()) {
    case wire::TensorFill::Kind::ZEROS:
      break;
    case wire::TensorFill::Kind::UNIFORM:
      fill.kind = TensorFill::Kind::kUniform;
      break;
    case wire::TensorFill::Kind::NORMAL:
      fill.kind = TensorFill::Kind::kNormal;
      break;
    default:
      return InvalidArgument("tensorAlloc: unknown fill kind " +
                             std::to_string(static_cast<int>(f.getKind())));
  }
  fill.bounded = f.getBounded();
  fill.low = f.getLow();
  fill.high = f.getHigh();
  fill.mean = f.getMean();
  fill.scale = f.getScale();
  fill.seed = f.getSeed();
  REMEX_RETURN_IF_ERROR(vm::CheckFill(desc.first, fill).WithContext("tensorAlloc"));
  REMEX_ASSIGN_OR_RETURN(auto t, vm::AllocateTensor(*allocator_, desc.first, desc.second));
  // The allocator reuses blocks other sessions freed: a tensor handed out unwritten
  // is cleared first, so that it never shows another session's data. A large random
  // fill yields to the other sessions' requests after every 1 MiB.
  REMEX_RETURN_IF_ERROR(vm::FillTensor(*state_->device, *t, fill, control_.yield));
  auto r = reply.initTensor();
  rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
  r.setTensor(Add(std::move(t)));
  return OkStatus();
}

Status Session::TensorWrite(wire::TensorWrite::Reader req, rpc::Frame& frame, wire::Reply::Builder reply) {
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
    if (t->view()) {
      return InvalidArgument("tensorWrite: tensor " + std::to_string(handle) + " is " +
                             ShapeToString(t->shape) + " of a buffer a model grows in place (" +
                             ShapeToString(t->physical) + "): write a new tensor");
    }
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
  if (in_place) {
    // Received straight into CPU device memory.
    if (t->dtype == DType::kBool) CanonicalizeBoolBytes(t->data(), t->nbytes());
  } else {
    if (t->dtype == DType::kBool) CanonicalizeBoolBytes(frame.attachments[0].data(), bytes.size());
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

Status Session::TensorRead(wire::TensorRead::Reader req, wire::Reply::Builder reply, rpc::OutFrame& out) {
  REMEX_ASSIGN_OR_RETURN(auto held, Lookup<vm::TensorPtr>(req.getTensor()));
  // A view (a KV cache grown in place) is sent from a dense copy.
  REMEX_ASSIGN_OR_RETURN(auto t, vm::DenseTensor(*allocator_, held));
  auto r = reply.initTensor();
  r.setTensor(req.getTensor());
  rpc::WriteTensorDesc(r.initDesc(), t->dtype, t->shape);
  const auto element_size = static_cast<uint8_t>(DTypeSize(t->dtype));
  if (state_->device->capabilities().host_access_in_place()) {
    // The device's memory is host memory: the reply is sent straight from the tensor,
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

Status Session::TensorStats(wire::TensorStats::Reader req, wire::Reply::Builder reply) {
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

Status Session::TensorCompare(wire::TensorCompare::Reader req, wire::Reply::Builder reply) {
  REMEX_ASSIGN_OR_RETURN(auto a, Lookup<vm::TensorPtr>(req.getA()));
  REMEX_ASSIGN_OR_RETURN(auto b, Lookup<vm::TensorPtr>(req.getB()));
  REMEX_ASSIGN_OR_RETURN(vm::Comparison cmp,
                         vm::CompareTensors(*state_->device, *a, *b, req.getRtol(), req.getAtol(), req.getEqualNan()));
  auto r = reply.initTensorCompare();
  r.setCount(cmp.count);
  r.setMismatches(cmp.mismatches);
  r.setMaxAbsError(cmp.max_abs_error);
  r.setMaxRelError(cmp.max_rel_error);
  r.setFirstMismatch(cmp.first_mismatch);
  return OkStatus();
}

Status Session::Free(wire::Free::Reader req, wire::Reply::Builder reply) {
  std::string missing;
  for (uint64_t h : req.getHandles()) {
    if (!objects_.count(h)) missing += (missing.empty() ? "" : ", ") + HandleString(h);
  }
  if (!missing.empty()) return NotFound("handles not found in this session (none freed): " + missing);
  for (uint64_t h : req.getHandles()) objects_.erase(h);
  reply.setFree();
  return OkStatus();
}

Status Session::ListHandles(wire::ListHandles::Reader /*req*/, wire::Reply::Builder reply) {
  // Bounded by --max-handles-per-session (CheckHandleRoom): at most that many entries.
  std::vector<uint64_t> handles;
  handles.reserve(objects_.size());
  for (const auto& [h, o] : objects_) handles.push_back(h);
  std::sort(handles.begin(), handles.end());
  auto list = reply.initListHandles().initHandles(static_cast<unsigned>(handles.size()));
  const std::string device = state_->device->name();
  // What each handle holds of the session's allocator, each buffer counted once:
  // tensors first (a VM's inputs are often tensors the session holds), then VMs.
  std::unordered_set<const vm::Buffer*> counted;
  auto held = [&](const std::vector<const vm::Buffer*>& buffers) {
    uint64_t bytes = 0;
    for (const vm::Buffer* b : buffers) {
      if (b->owner() == allocator_.get() && counted.insert(b).second) bytes += b->size_class();
    }
    return bytes;
  };
  std::vector<uint64_t> held_bytes(handles.size(), 0);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < handles.size(); ++i) {
      const Object& o = objects_.at(handles[i]);
      std::vector<const vm::Buffer*> buffers;
      if (const auto* t = std::get_if<vm::TensorPtr>(&o); t && pass == 0 && (*t)->buffer) {
        buffers.push_back((*t)->buffer.get());
      } else if (const auto* v = std::get_if<std::shared_ptr<VmObject>>(&o); v && pass == 1) {
        (*v)->vm->HeldBuffers(buffers);
      }
      held_bytes[i] += held(buffers);
    }
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const Object& o = objects_.at(handles[i]);
    auto e = list[static_cast<unsigned>(i)];
    e.setHandle(handles[i]);
    e.setKind(KindName(o));
    e.setDevice(device);
    e.setHeldBytes(held_bytes[i]);
    if (const auto* t = std::get_if<vm::TensorPtr>(&o)) {
      rpc::WriteTensorDesc(e.initDesc(), (*t)->dtype, (*t)->shape);
      e.setBytes((*t)->nbytes());
    } else if (const auto* m = std::get_if<std::shared_ptr<const vm::Executable>>(&o)) {
      e.setBytes((*m)->constant_bytes());
    }
  }
  return OkStatus();
}

}  // namespace remex::server
